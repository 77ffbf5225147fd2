// Graph passes: textual IR before and after, and the interpreter's numbers
// unchanged by every pass.
#include <gtest/gtest.h>

#include "compiler_core/frontend/interpreter.h"
#include "compiler_core/frontend/shape_inference.h"
#include "compiler_core/passes/common_subexpression_elimination.h"
#include "compiler_core/passes/dead_code_elimination.h"
#include "compiler_core/passes/pass_pipeline.h"

namespace kiln {
namespace {

TensorType F32(std::vector<int64_t> dims) { return TensorType::Static(DType::kFloat32, dims); }

// y = relu(x + w) * relu(x + w'), w' an equal copy of w; plus a dead branch.
std::unique_ptr<Graph> RedundantGraph() {
  auto g = std::make_unique<Graph>();
  Value* x = *g->AddInput("x", F32({2, 3}));
  Value* w = *g->AddConstant("w", Tensor::FromVector<float>(DType::kFloat32, {3}, {1, 2, 3}));
  Value* w2 = *g->AddConstant("w_copy", Tensor::FromVector<float>(DType::kFloat32, {3}, {1, 2, 3}));
  Value* a1 = *g->AddValue("a1");
  Value* a2 = *g->AddValue("a2");
  Value* r1 = *g->AddValue("r1");
  Value* r2 = *g->AddValue("r2");
  Value* dead = *g->AddValue("dead");
  Value* y = *g->AddValue("y");
  (void)*g->AddNode("Add", "add1", {x, w}, {a1});
  (void)*g->AddNode("Add", "add2", {x, w2}, {a2});
  (void)*g->AddNode("Relu", "relu1", {a1}, {r1});
  (void)*g->AddNode("Relu", "relu2", {a2}, {r2});
  (void)*g->AddNode("Neg", "unused", {r1}, {dead});
  (void)*g->AddNode("Mul", "mul", {r1, r2}, {y});
  g->AddOutput(y);
  EXPECT_TRUE(InferShapes(*g).ok());
  return g;
}

std::map<std::string, Tensor> Inputs() {
  return {{"x", Tensor::FromVector<float>(DType::kFloat32, {2, 3}, {-3, -1, 0, 1, 2, -2.5f})}};
}

void ExpectSameNumbers(const Graph& before, const Graph& after) {
  auto a = Evaluate(before, Inputs());
  auto b = Evaluate(after, Inputs());
  ASSERT_TRUE(a.ok() && b.ok());
  for (const auto& [name, t] : *a) {
    ASSERT_EQ(t.bytes(), b->at(name).bytes()) << name;
  }
}

TEST(DeadCodeEliminationTest, RemovesUnreachableNodesAndConstants) {
  auto g = RedundantGraph();
  auto original = g->Clone();
  DeadCodeElimination dce;
  auto changed = dce.Run(*g);
  ASSERT_TRUE(changed.ok());
  EXPECT_TRUE(*changed);
  EXPECT_EQ(g->ToText().find("unused"), std::string::npos) << g->ToText();
  EXPECT_FALSE(*dce.Run(*g));  // a fixed point
  ExpectSameNumbers(*original, *g);
}

TEST(CommonSubexpressionEliminationTest, MergesEqualConstantsAndNodes) {
  auto g = RedundantGraph();
  auto original = g->Clone();
  PassPipeline pipeline("cleanup");
  pipeline.Add(std::make_unique<CommonSubexpressionElimination>()).Add(std::make_unique<DeadCodeElimination>());
  auto records = pipeline.Run(*g, {});
  ASSERT_TRUE(records.ok()) << records.status();
  EXPECT_EQ(g->ToText(),
            "graph main(%x: f32[2,3]) -> (%y) {\n"
            "  %w: f32[3] = const f32[3]{1,2,3}\n"
            "  %a1: f32[2,3] = Add(%x, %w) {name=\"add1\"}\n"
            "  %r1: f32[2,3] = Relu(%a1) {name=\"relu1\"}\n"
            "  %y: f32[2,3] = Mul(%r1, %r1) {name=\"mul\"}\n"
            "}\n");
  ExpectSameNumbers(*original, *g);
}

TEST(PassPipelineTest, TimesEveryPassAndDumpsOnRequest) {
  auto g = RedundantGraph();
  PassPipeline pipeline("cleanup");
  pipeline.Add(std::make_unique<CommonSubexpressionElimination>()).Add(std::make_unique<DeadCodeElimination>());
  std::vector<std::string> dumped;
  PassPipelineOptions options;
  options.dump_after = {"cse"};
  options.dump = [&](const std::string& pass, const std::string& text) { dumped.push_back(pass + "\n" + text); };
  auto records = pipeline.Run(*g, options);
  ASSERT_TRUE(records.ok());
  ASSERT_EQ(records->size(), 2u);
  EXPECT_EQ((*records)[0].name, "cse");
  EXPECT_TRUE((*records)[0].changed);
  EXPECT_GE((*records)[1].milliseconds, 0);
  ASSERT_EQ(dumped.size(), 1u);
  EXPECT_EQ(dumped[0].rfind("cse\ngraph main", 0), 0u);
}

TEST(CommonSubexpressionEliminationTest, KeepsNodesThatComputeGraphOutputs) {
  Graph g;
  Value* x = *g.AddInput("x", F32({4}));
  Value* y1 = *g.AddValue("y1");
  Value* y2 = *g.AddValue("y2");
  (void)*g.AddNode("Relu", "r1", {x}, {y1});
  (void)*g.AddNode("Relu", "r2", {x}, {y2});
  g.AddOutput(y1);
  g.AddOutput(y2);
  ASSERT_TRUE(InferShapes(g).ok());
  CommonSubexpressionElimination cse;
  EXPECT_FALSE(*cse.Run(g));
  EXPECT_EQ(g.outputs().size(), 2u);
  EXPECT_EQ(g.outputs()[1]->name(), "y2");
}

}  // namespace
}  // namespace kiln
