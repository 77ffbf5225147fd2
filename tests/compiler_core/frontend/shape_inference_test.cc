// Shape inference: broadcasting, MatMul/Gemm shapes, symbolic dims, errors.
#include "compiler_core/frontend/shape_inference.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(BroadcastShapesTest, NumpyRules) {
  EXPECT_THAT(*BroadcastShapes({2, 1, 3}, {4, 1}), ElementsAre(2, 4, 3));
  EXPECT_THAT(*BroadcastShapes({}, {5}), ElementsAre(5));
  EXPECT_THAT(*BroadcastShapes({0, 1}, {1, 7}), ElementsAre(0, 7));
  EXPECT_THAT(*BroadcastShapes({3}, {3}), ElementsAre(3));
  auto bad = BroadcastShapes({2, 3}, {4});
  ASSERT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "shapes [2,3] and [4] cannot be broadcast");
}

TEST(CheckedElementCountTest, RejectsAbsurdSizes) {
  EXPECT_EQ(*CheckedElementCount({}), 1);
  EXPECT_EQ(*CheckedElementCount({2, 0, 5}), 0);
  EXPECT_FALSE(CheckedElementCount({-1}).ok());
  EXPECT_FALSE(CheckedElementCount({int64_t{1} << 40, 2}).ok());
  EXPECT_FALSE(CheckedElementCount({int64_t{1} << 62, int64_t{1} << 62}).ok());
}

// Builds `op(a, b[, c])` over graph inputs of the given types and infers.
absl::StatusOr<std::string> Infer(const std::string& op, std::vector<TensorType> ins,
                                  std::map<std::string, AttrValue> attrs = {}) {
  Graph g;
  std::vector<Value*> vals;
  for (size_t i = 0; i < ins.size(); ++i) vals.push_back(*g.AddInput(std::string(1, 'a' + i), ins[i]));
  Value* y = *g.AddValue("y");
  auto n = g.AddNode(op, "n", vals, {y}, attrs);
  if (!n.ok()) return n.status();
  g.AddOutput(y);
  absl::Status s = InferShapes(g);
  if (!s.ok()) return s;
  return y->type().ToString();
}

TensorType T(std::vector<Dim> dims) {
  TensorType t;
  t.dtype = DType::kFloat32;
  t.dims = std::move(dims);
  t.known = true;
  return t;
}
Dim S(int64_t v) { return Dim::Static(v); }
Dim Sym(const char* s) { return Dim::Symbol(s); }

TEST(InferShapesTest, Elementwise) {
  EXPECT_EQ(*Infer("Add", {T({S(2), S(1)}), T({S(3)})}), "f32[2,3]");
  EXPECT_EQ(*Infer("Mul", {T({Sym("n"), S(3)}), T({S(1), S(3)})}), "f32[n,3]");
  EXPECT_EQ(*Infer("Sub", {T({Sym("n"), S(3)}), T({Sym("n"), S(1)})}), "f32[n,3]");
  auto r = Infer("Div", {T({Sym("n")}), T({S(4)})});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "node 'n' (Div): input 'a' dimension 0 is symbolic ('n') but is broadcast against 4: bind it to a "
            "static extent (--shape)");
  r = Infer("Add", {T({S(2)}), TensorType::Static(DType::kInt64, {2})});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "node 'n' (Add): input 'b' has dtype i64 but input 'a' has dtype f32");
}

TEST(InferShapesTest, MatMul) {
  EXPECT_EQ(*Infer("MatMul", {T({S(2), S(3)}), T({S(3), S(4)})}), "f32[2,4]");
  EXPECT_EQ(*Infer("MatMul", {T({S(3)}), T({S(3), S(4)})}), "f32[4]");
  EXPECT_EQ(*Infer("MatMul", {T({S(2), S(3)}), T({S(3)})}), "f32[2]");
  EXPECT_EQ(*Infer("MatMul", {T({S(3)}), T({S(3)})}), "f32[]");
  EXPECT_EQ(*Infer("MatMul", {T({Sym("b"), S(1), S(2), S(3)}), T({S(5), S(3), S(4)})}), "f32[b,5,2,4]");
  auto r = Infer("MatMul", {T({S(2), S(3)}), T({S(4), S(5)})});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "node 'n' (MatMul): inner dimensions of f32[2,3] and f32[4,5] do not match");
  r = Infer("MatMul", {T({S(2), S(2), S(3)}), T({S(3), S(3), S(4)})});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("batch dimensions"));
  EXPECT_FALSE(Infer("MatMul", {T({}), T({S(3)})}).ok());
}

TEST(InferShapesTest, Gemm) {
  EXPECT_EQ(*Infer("Gemm", {T({S(2), S(3)}), T({S(3), S(4)})}), "f32[2,4]");
  EXPECT_EQ(*Infer("Gemm", {T({S(3), S(2)}), T({S(4), S(3)}), T({S(4)})},
                   {{"transA", int64_t{1}}, {"transB", int64_t{1}}}),
            "f32[2,4]");
  auto r = Infer("Gemm", {T({S(2), S(3)}), T({S(3), S(4)})}, {{"transA", int64_t{1}}});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("node 'n' (Gemm): inner dimensions"));
  r = Infer("Gemm", {T({S(2), S(3)}), T({S(3), S(4)})}, {{"alpha", int64_t{2}}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "node 'n' (Gemm): attribute 'alpha' must be of kind float, got int");
  EXPECT_FALSE(Infer("Gemm", {T({S(2), S(3), S(1)}), T({S(3), S(4)})}).ok());
  EXPECT_FALSE(Infer("Gemm", {T({S(2), S(3)})}).ok());  // too few inputs
}

TEST(InferShapesTest, UnknownInputTypeIsAnError) {
  Graph g;
  Value* x = *g.AddInput("x", TensorType{});
  Value* y = *g.AddValue("y");
  ASSERT_TRUE(g.AddNode("Relu", "r", {x}, {y}).ok());
  g.AddOutput(y);
  absl::Status s = InferShapes(g);
  ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'x'"));
}

}  // namespace
}  // namespace kiln
