// Reference interpreter: numbers against hand-computed values for every
// required operator, including broadcasting and Gemm's transposes/alpha/beta.
#include "compiler_core/frontend/interpreter.h"

#include <cmath>

#include "compiler_core/frontend/onnx_importer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/frontend/onnx_model_builder.h"

namespace kiln {
namespace {

using ::kiln::testing::OnnxModelBuilder;
using ::testing::ElementsAreArray;
using ::testing::FloatNear;
using ::testing::HasSubstr;
using ::testing::Pointwise;

Tensor F32(std::vector<int64_t> dims, std::vector<float> v) {
  return Tensor::FromVector(DType::kFloat32, std::move(dims), v);
}

std::vector<float> Values(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.num_elements());
}

std::vector<std::string> Dims(const std::vector<int64_t>& d) {
  std::vector<std::string> s;
  for (int64_t x : d) s.push_back(std::to_string(x));
  return s;
}

// Imports a one-node model over inputs a (and b, c when given) and runs it.
struct OneNode {
  std::string op;
  std::vector<std::pair<std::string, Tensor>> inputs;
  std::function<void(onnx::NodeProto*)> attrs = nullptr;

  absl::StatusOr<Tensor> Run() const {
    OnnxModelBuilder m;
    std::vector<std::string> names;
    std::map<std::string, Tensor> feeds;
    for (const auto& [name, t] : inputs) {
      names.push_back(name);
      if (name.empty()) continue;
      m.Input(name, Dims(t.dims()));
      feeds[name] = t;
    }
    onnx::NodeProto* n = m.Node(op, "n0", names, {"y"});
    if (attrs) attrs(n);
    m.Output("y");
    auto g = ImportOnnxModel(m.Bytes(), {});
    if (!g.ok()) return g.status();
    auto out = Evaluate(**g, feeds);
    if (!out.ok()) return out.status();
    Tensor y = out->at("y");
    EXPECT_EQ(y.dims(), (*g)->FindValue("y")->type().StaticDims()) << "shape inference disagrees";
    return y;
  }
};

void ExpectTensor(const absl::StatusOr<Tensor>& t, std::vector<int64_t> dims, std::vector<float> values) {
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->dtype(), DType::kFloat32);
  EXPECT_EQ(t->dims(), dims);
  EXPECT_THAT(Values(*t), Pointwise(FloatNear(1e-5), values));
}

TEST(InterpreterTest, ElementwiseSameShape) {
  Tensor a = F32({2, 2}, {1, 2, 3, 4});
  Tensor b = F32({2, 2}, {10, 20, 30, 40});
  ExpectTensor(OneNode{"Add", {{"a", a}, {"b", b}}}.Run(), {2, 2}, {11, 22, 33, 44});
  ExpectTensor(OneNode{"Sub", {{"a", a}, {"b", b}}}.Run(), {2, 2}, {-9, -18, -27, -36});
  ExpectTensor(OneNode{"Mul", {{"a", a}, {"b", b}}}.Run(), {2, 2}, {10, 40, 90, 160});
  ExpectTensor(OneNode{"Div", {{"a", b}, {"b", a}}}.Run(), {2, 2}, {10, 10, 10, 10});
}

TEST(InterpreterTest, ElementwiseBroadcasting) {
  // [2,3] + [3]: row vector added to every row.
  ExpectTensor(OneNode{"Add", {{"a", F32({2, 3}, {1, 2, 3, 4, 5, 6})}, {"b", F32({3}, {10, 20, 30})}}}.Run(),
               {2, 3}, {11, 22, 33, 14, 25, 36});
  // [2,1] - [1,3]: outer difference.
  ExpectTensor(OneNode{"Sub", {{"a", F32({2, 1}, {1, 2})}, {"b", F32({1, 3}, {1, 2, 3})}}}.Run(), {2, 3},
               {0, -1, -2, 1, 0, -1});
  // [2,1,2] * [3,1]: both sides broadcast, rank extended.
  ExpectTensor(OneNode{"Mul", {{"a", F32({2, 1, 2}, {1, 2, 3, 4})}, {"b", F32({3, 1}, {1, 10, 100})}}}.Run(),
               {2, 3, 2}, {1, 2, 10, 20, 100, 200, 3, 4, 30, 40, 300, 400});
  // scalar divisor.
  ExpectTensor(OneNode{"Div", {{"a", F32({3}, {2, 4, 6})}, {"b", F32({}, {2})}}}.Run(), {3}, {1, 2, 3});
}

TEST(InterpreterTest, Activations) {
  Tensor x = F32({4}, {-2, -0.5, 0, 3});
  ExpectTensor(OneNode{"Relu", {{"x", x}}}.Run(), {4}, {0, 0, 0, 3});
  std::vector<float> sig;
  for (float v : {-2.f, -0.5f, 0.f, 3.f}) sig.push_back(1.f / (1.f + std::exp(-v)));
  ExpectTensor(OneNode{"Sigmoid", {{"x", x}}}.Run(), {4}, sig);
  ExpectTensor(OneNode{"Identity", {{"x", x}}}.Run(), {4}, {-2, -0.5, 0, 3});
  ExpectTensor(OneNode{"Neg", {{"x", x}}}.Run(), {4}, {2, 0.5, 0, -3});
  ExpectTensor(OneNode{"Abs", {{"x", x}}}.Run(), {4}, {2, 0.5, 0, 3});
  ExpectTensor(OneNode{"LeakyRelu", {{"x", x}}, [](onnx::NodeProto* n) {
                 OnnxModelBuilder::AttrFloat(n, "alpha", 0.1f);
               }}.Run(),
               {4}, {-0.2f, -0.05f, 0, 3});
  ExpectTensor(OneNode{"Sqrt", {{"x", F32({2}, {4, 9})}}}.Run(), {2}, {2, 3});
  ExpectTensor(OneNode{"Reciprocal", {{"x", F32({2}, {4, -0.5})}}}.Run(), {2}, {0.25, -2});
}

TEST(InterpreterTest, MatMul2D) {
  // [[1,2,3],[4,5,6]] @ [[1,0],[0,1],[1,1]] = [[4,5],[10,11]]
  ExpectTensor(OneNode{"MatMul", {{"a", F32({2, 3}, {1, 2, 3, 4, 5, 6})},
                                  {"b", F32({3, 2}, {1, 0, 0, 1, 1, 1})}}}.Run(),
               {2, 2}, {4, 5, 10, 11});
}

TEST(InterpreterTest, MatMulOneDimensionalOperands) {
  Tensor m = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  // [2,3] @ [3] -> [2]
  ExpectTensor(OneNode{"MatMul", {{"a", m}, {"b", F32({3}, {1, 1, 1})}}}.Run(), {2}, {6, 15});
  // [2] @ [2,3] -> [3]
  ExpectTensor(OneNode{"MatMul", {{"a", F32({2}, {1, 2})}, {"b", m}}}.Run(), {3}, {9, 12, 15});
  // [3] @ [3] -> scalar
  ExpectTensor(OneNode{"MatMul", {{"a", F32({3}, {1, 2, 3})}, {"b", F32({3}, {4, 5, 6})}}}.Run(), {}, {32});
}

TEST(InterpreterTest, MatMulBroadcastBatch) {
  // a: [2,1,2] (two 1x2 rows), b: [3,2,1] (three 2x1 columns) -> [2,3,1,1]
  Tensor a = F32({2, 1, 1, 2}, {1, 2, 3, 4});
  Tensor b = F32({3, 2, 1}, {1, 0, 0, 1, 1, 1});
  // batch (i, j): a_i . b_j with a_0=(1,2), a_1=(3,4); b_0=(1,0), b_1=(0,1), b_2=(1,1)
  ExpectTensor(OneNode{"MatMul", {{"a", a}, {"b", b}}}.Run(), {2, 3, 1, 1}, {1, 2, 3, 3, 4, 7});
  // [2,2,2] @ [2,2]: the matrix is shared across the batch.
  ExpectTensor(OneNode{"MatMul", {{"a", F32({2, 2, 2}, {1, 0, 0, 1, 2, 0, 0, 2})},
                                  {"b", F32({2, 2}, {1, 2, 3, 4})}}}.Run(),
               {2, 2, 2}, {1, 2, 3, 4, 2, 4, 6, 8});
}

TEST(InterpreterTest, GemmTransposesAlphaBeta) {
  Tensor a = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor at = F32({3, 2}, {1, 4, 2, 5, 3, 6});  // a transposed
  Tensor b = F32({3, 2}, {1, 0, 0, 1, 1, 1});
  Tensor bt = F32({2, 3}, {1, 0, 1, 0, 1, 1});  // b transposed
  // a @ b = [[4,5],[10,11]]
  ExpectTensor(OneNode{"Gemm", {{"a", a}, {"b", b}}}.Run(), {2, 2}, {4, 5, 10, 11});
  ExpectTensor(OneNode{"Gemm", {{"a", at}, {"b", b}}, [](onnx::NodeProto* n) {
                 OnnxModelBuilder::AttrInt(n, "transA", 1);
               }}.Run(),
               {2, 2}, {4, 5, 10, 11});
  ExpectTensor(OneNode{"Gemm", {{"a", a}, {"b", bt}}, [](onnx::NodeProto* n) {
                 OnnxModelBuilder::AttrInt(n, "transB", 1);
               }}.Run(),
               {2, 2}, {4, 5, 10, 11});
  // Both transposed, alpha=2, beta=0.5, C [2,2].
  ExpectTensor(OneNode{"Gemm", {{"a", at}, {"b", bt}, {"c", F32({2, 2}, {2, 4, 6, 8})}},
                       [](onnx::NodeProto* n) {
                         OnnxModelBuilder::AttrInt(n, "transA", 1);
                         OnnxModelBuilder::AttrInt(n, "transB", 1);
                         OnnxModelBuilder::AttrFloat(n, "alpha", 2.0f);
                         OnnxModelBuilder::AttrFloat(n, "beta", 0.5f);
                       }}.Run(),
               {2, 2}, {9, 12, 23, 26});
  // C broadcast: [2] is a row added to every row, [2,1] a column, [] a scalar.
  ExpectTensor(OneNode{"Gemm", {{"a", a}, {"b", b}, {"c", F32({2}, {100, 200})}}}.Run(), {2, 2},
               {104, 205, 110, 211});
  ExpectTensor(OneNode{"Gemm", {{"a", a}, {"b", b}, {"c", F32({2, 1}, {100, 200})}}}.Run(), {2, 2},
               {104, 105, 210, 211});
  ExpectTensor(OneNode{"Gemm", {{"a", a}, {"b", b}, {"c", F32({}, {1})}}, [](onnx::NodeProto* n) {
                 OnnxModelBuilder::AttrFloat(n, "beta", 3.0f);
               }}.Run(),
               {2, 2}, {7, 8, 13, 14});
}

TEST(InterpreterTest, GemmBadCShape) {
  auto r = OneNode{"Gemm", {{"a", F32({2, 3}, std::vector<float>(6))},
                            {"b", F32({3, 2}, std::vector<float>(6))},
                            {"c", F32({3}, {1, 2, 3})}}}.Run();
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "node 'n0' (Gemm): C f32[3] cannot be broadcast to [2,2]");
}

TEST(InterpreterTest, ConstantsAndChains) {
  OnnxModelBuilder m;
  m.Input("x", {"2"});
  m.Initializer("w", {2}, {3, 4});
  auto* c = m.Node("Constant", "k", {}, {"k"});
  OnnxModelBuilder::AttrFloat(c, "value_float", 0.5f);
  m.Node("Mul", "m", {"x", "w"}, {"t"});
  m.Node("Add", "a", {"t", "k"}, {"y"});
  m.Output("y");
  m.Output("t");
  auto g = ImportOnnxModel(m.Bytes(), {});
  ASSERT_TRUE(g.ok()) << g.status();
  auto out = Evaluate(**g, {{"x", F32({2}, {1, 2})}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(Values(out->at("y")), ElementsAreArray({3.5f, 8.5f}));
  EXPECT_THAT(Values(out->at("t")), ElementsAreArray({3.f, 8.f}));
}

TEST(InterpreterTest, SymbolicInputsTakeActualShapes) {
  OnnxModelBuilder m;
  m.Input("x", {"batch", "2"});
  m.Input("z", {"batch", "1"});
  m.Node("Add", "add0", {"x", "z"}, {"y"});
  m.Output("y");
  auto g = ImportOnnxModel(m.Bytes(), {});
  ASSERT_TRUE(g.ok()) << g.status();
  auto out = Evaluate(**g, {{"x", F32({3, 2}, {1, 2, 3, 4, 5, 6})}, {"z", F32({3, 1}, {10, 20, 30})}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->at("y").dims(), (std::vector<int64_t>{3, 2}));
  EXPECT_THAT(Values(out->at("y")), ElementsAreArray({11.f, 12.f, 23.f, 24.f, 35.f, 36.f}));
  // 'batch' bound inconsistently.
  out = Evaluate(**g, {{"x", F32({3, 2}, std::vector<float>(6))}, {"z", F32({2, 1}, {1, 2})}});
  ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("input 'z'"));
}

TEST(InterpreterTest, InputErrorsNameTheInput) {
  OnnxModelBuilder m;
  m.Input("x", {"2", "3"});
  m.Node("Relu", "r", {"x"}, {"y"});
  m.Output("y");
  auto g = ImportOnnxModel(m.Bytes(), {});
  ASSERT_TRUE(g.ok()) << g.status();
  auto out = Evaluate(**g, {});
  ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(out.status().message(), "input 'x' is missing");
  out = Evaluate(**g, {{"x", F32({3, 2}, std::vector<float>(6))}});
  ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(out.status().message(), "input 'x': expected f32[2,3], got f32[3,2]");
  out = Evaluate(**g, {{"x", Tensor::FromVector(DType::kInt64, {2, 3}, std::vector<int64_t>(6))}});
  ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(out.status().message(), "input 'x': expected f32[2,3], got i64[2,3]");
  out = Evaluate(**g, {{"x", F32({2, 3}, std::vector<float>(6))}, {"extra", F32({1}, {1})}});
  ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("'extra'"));
}

}  // namespace
}  // namespace kiln
