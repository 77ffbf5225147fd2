// Verifier: each structural invariant, violated once.
#include "compiler_core/frontend/verifier.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

TensorType F32(std::vector<int64_t> d) { return TensorType::Static(DType::kFloat32, d); }

TEST(VerifierTest, AcceptsWellFormedGraph) {
  Graph g;
  Value* x = *g.AddInput("x", F32({2}));
  Value* c = *g.AddConstant("c", Tensor(DType::kFloat32, {2}));
  Value* t = *g.AddValue("t", F32({2}));
  Value* y = *g.AddValue("y", F32({2}));
  ASSERT_TRUE(g.AddNode("Add", "a", {x, c}, {t}).ok());
  ASSERT_TRUE(g.AddNode("Relu", "r", {t}, {y}).ok());
  g.AddOutput(y);
  EXPECT_TRUE(VerifyGraph(g).ok()) << VerifyGraph(g);
}

TEST(VerifierTest, NodesOutOfTopologicalOrder) {
  Graph g;
  Value* x = *g.AddInput("x", F32({2}));
  Value* t = *g.AddValue("t", F32({2}));
  Value* y = *g.AddValue("y", F32({2}));
  ASSERT_TRUE(g.AddNode("Relu", "second", {t}, {y}).ok());
  ASSERT_TRUE(g.AddNode("Relu", "first", {x}, {t}).ok());
  g.AddOutput(y);
  absl::Status s = VerifyGraph(g);
  ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "node 'second' (Relu): input 't' is used before node 'first' defines it (not in topological order)");
}

TEST(VerifierTest, DanglingInput) {
  Graph g;
  Value* x = *g.AddInput("x", F32({2}));
  Value* ghost = *g.AddValue("ghost", F32({2}));
  Value* y = *g.AddValue("y", F32({2}));
  ASSERT_TRUE(g.AddNode("Add", "add0", {x, ghost}, {y}).ok());
  g.AddOutput(y);
  absl::Status s = VerifyGraph(g);
  ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "node 'add0' (Add): input 'ghost' is not defined by any node, input or initializer");
}

TEST(VerifierTest, UnknownTypeAndUndefinedOutput) {
  Graph g;
  Value* x = *g.AddInput("x", F32({2}));
  Value* y = *g.AddValue("y");  // no type
  ASSERT_TRUE(g.AddNode("Relu", "r", {x}, {y}).ok());
  g.AddOutput(y);
  absl::Status s = VerifyGraph(g);
  EXPECT_EQ(s.message(), "node 'r' (Relu): output 'y' has no known type");
  EXPECT_TRUE(VerifyGraphStructure(g).ok());

  y->set_type(F32({2}));
  Value* z = *g.AddValue("z", F32({2}));
  g.AddOutput(z);
  s = VerifyGraph(g);
  EXPECT_THAT(s.message(), HasSubstr("graph output 'z' is not defined"));
}

}  // namespace
}  // namespace kiln
