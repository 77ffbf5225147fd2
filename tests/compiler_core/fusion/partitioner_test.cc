// Partitioning and workload keys: one group per node, canonical keys that
// ignore names and weights but see shapes and attributes.
#include <gtest/gtest.h>

#include "client/example_models.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/frontend/onnx_importer.h"
#include "compiler_core/fusion/partitioner.h"
#include "compiler_core/fusion/workload.h"

namespace kiln {
namespace {

std::unique_ptr<Graph> ImportMlp(int64_t batch) {
  auto model = client::MakeExampleModel("mlp");
  EXPECT_TRUE(model.ok());
  ImportOptions options;
  options.input_shapes["x"] = {batch, 64};
  auto g = ImportOnnxModel(model->onnx_bytes, options);
  EXPECT_TRUE(g.ok()) << g.status();
  return std::move(*g);
}

// One group per node, each named by the code generator's kind.
absl::StatusOr<Partition> Unfused(const Graph& g) {
  FusionOptions options;
  options.fuse = false;
  options.classify = LoweringKind;
  return PartitionGraph(g, options);
}

TEST(PartitionTest, OneGroupPerNodeWithTextualDump) {
  auto g = ImportMlp(8);
  auto p = Unfused(*g);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->groups.size(), 8u);
  EXPECT_EQ(p->ToText().substr(0, p->ToText().find('\n')),
            "group 0 matmul [fc1:MatMul] (%x, %w1) -> (%h1)");
  EXPECT_EQ(p->groups[3].kind, "matmul");
  EXPECT_EQ(p->groups[4].kind, "elementwise");
}

TEST(WorkloadTest, CanonicalFormIgnoresNamesAndWeights) {
  auto g = ImportMlp(8);
  auto p = Unfused(*g);
  ASSERT_TRUE(p.ok());
  auto w = ExtractWorkload(*g, p->groups[0]);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->canonical_text,
            "graph workload(%in0: f32[8,64], %in1: f32[64,128]) -> (%out0) {\n"
            "  %out0: f32[8,128] = MatMul(%in0, %in1) {name=\"n0\"}\n"
            "}\n");
  EXPECT_EQ(w->key.size(), 64u);
  EXPECT_DOUBLE_EQ(w->flops, 2.0 * 8 * 128 * 64);

  // The same model imported again: identical keys. Another batch: different keys.
  auto g2 = ImportMlp(8);
  auto p2 = Unfused(*g2);
  auto g3 = ImportMlp(16);
  auto p3 = Unfused(*g3);
  for (size_t i = 0; i < p->groups.size(); ++i) {
    auto a = ExtractWorkload(*g, p->groups[i]);
    auto b = ExtractWorkload(*g2, p2->groups[i]);
    auto c = ExtractWorkload(*g3, p3->groups[i]);
    ASSERT_TRUE(a.ok() && b.ok() && c.ok());
    EXPECT_EQ(a->key, b->key) << i;
    EXPECT_NE(a->key, c->key) << i;
  }
}

TEST(WorkloadTest, AttributesEnterTheKey) {
  auto g = ImportMlp(8);
  auto p = Unfused(*g);
  ASSERT_TRUE(p.ok());
  auto gemm = ExtractWorkload(*g, p->groups[3]);
  ASSERT_TRUE(gemm.ok());
  EXPECT_NE(gemm->canonical_text.find("transB=1"), std::string::npos) << gemm->canonical_text;
}

TEST(PartitionTest, AGroupNoLoweringTakesIsUnsupported) {
  Graph g;
  Value* x = *g.AddInput("x", TensorType::Static(DType::kFloat32, {4, 4}));
  Value* y = *g.AddValue("y", TensorType::Static(DType::kFloat32, {4, 4}));
  ASSERT_TRUE(g.AddNode("Hardmax", "hm", {x}, {y}).ok());
  g.AddOutput(y);
  auto p = Unfused(g);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->groups[0].kind, "unsupported");
}

}  // namespace
}  // namespace kiln
