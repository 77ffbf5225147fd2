// Real models (ResNet-18, MobileNetV3-Small, a BERT-style encoder exported by
// export_models.py) through import, OptimizeGraph and the fusion partitioner:
// the number of groups stays within anchors + reductions + a small constant,
// and the partitioned graph, evaluated group by group, computes what the
// original graph computes. Also runs `kiln inspect` on each.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "compiler_core/frontend/interpreter.h"
#include "compiler_core/frontend/onnx_importer.h"
#include "compiler_core/fusion/partitioner.h"
#include "compiler_core/fusion/workload.h"
#include "compiler_core/passes/optimize.h"
#include "tests/compiler_core/fusion/partition_evaluation.h"
#include "tests/models/model_testing.h"

namespace kiln {
namespace {

// Groups a model may have beyond its anchors, reductions and opaque nodes
// (groups of their own: a Winograd input transform, TopK, ...). Each anchor
// takes its elementwise epilogue and each reduction its elementwise
// consumers; what remains is a chain that starts at a graph input before any
// anchor (an embedding Gather, an input normalisation) and one that ends at a
// graph output after the last anchor (a final reshape or activation), plus one
// of slack for a data-movement op between two anchors that cannot be index
// arithmetic (a fan-out the cost model chooses to materialise).
constexpr int kGroupSlack = 3;

void CheckModel(const std::string& file) {
  std::string path = ModelPath(file);
  ASSERT_TRUE(std::filesystem::exists(path))
      << path << " is missing: the kiln_models_export test writes it with tests/models/export_models.py, "
      << "which needs torch and torchvision from PyPI (pip install torch torchvision onnx)";
  auto original = ImportOnnxModel(ReadAll(path), ImportOptions{});
  ASSERT_TRUE(original.ok()) << original.status();
  std::unique_ptr<Graph> optimised = (*original)->Clone();
  auto records = OptimizeGraph(*optimised, PassPipelineOptions{});
  ASSERT_TRUE(records.ok()) << records.status();
  auto partition = PartitionGraph(*optimised, FusionOptions{});
  ASSERT_TRUE(partition.ok()) << partition.status();

  int anchors = 0, reductions = 0, opaque = 0;
  for (const auto& n : optimised->nodes()) {
    OpClass c = ClassifyForFusion(*n);
    anchors += c == OpClass::kAnchor;
    reductions += c == OpClass::kReduction;
    opaque += c == OpClass::kOpaque;
  }
  std::set<std::string> keys;
  for (const FusionGroup& g : partition->groups) {
    auto w = ExtractWorkload(*optimised, g);
    ASSERT_TRUE(w.ok()) << "group " << g.index << ": " << w.status();
    keys.insert(w->key);
  }
  // Transposes the optimiser added (a pointwise conv on a small map computed
  // as a transposed Gemm transposes its result back) may be groups of their own.
  std::set<std::string> model_nodes;
  for (const auto& n : (*original)->nodes()) model_nodes.insert(n->name());
  int added_transposes = 0;
  for (const auto& n : optimised->nodes()) {
    added_transposes += n->op_type() == "Transpose" && model_nodes.count(n->name()) == 0;
  }
  int groups = static_cast<int>(partition->groups.size());
  const int bound = anchors + reductions + opaque + added_transposes + kGroupSlack;
  std::printf("%s: nodes %zu before optimisation, %zu after; anchors %d, reductions %d, opaque %d, added "
              "transposes %d, groups %d (bound %d), distinct workloads %zu; traffic %.2f MB fused vs %.2f MB unfused\n",
              file.c_str(), (*original)->nodes().size(), optimised->nodes().size(), anchors, reductions, opaque,
              added_transposes, groups, bound, keys.size(), partition->bytes_fused / 1e6,
              partition->bytes_unfused / 1e6);
  EXPECT_LE(groups, bound) << partition->ToText();
  EXPECT_LT(partition->bytes_fused, partition->bytes_unfused);

  std::map<std::string, Tensor> inputs = RandomInputs(**original);
  auto want = Evaluate(**original, inputs);
  ASSERT_TRUE(want.ok()) << want.status();
  auto got = testing::EvaluatePartitioned(*optimised, *partition, inputs);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), (*original)->outputs().size());
  for (size_t i = 0; i < got->size(); ++i) {
    const Tensor& w = want->at((*original)->outputs()[i]->name());
    double diff = testing::MaxAbsDiff((*got)[i], w);
    std::printf("%s: output %zu max |partitioned - original| = %.3g\n", file.c_str(), i, diff);
    EXPECT_LE(diff, 1e-4) << "output " << i;
  }
}

void CheckInspect(const std::string& file) {
  std::string path = ModelPath(file);
  ASSERT_TRUE(std::filesystem::exists(path)) << path << " is missing (see kiln_models_export)";
  std::string dot = std::string(KILN_BINARY_DIR) + "/test_models/" + file + ".dot";
  std::string cmd = std::string(KILN_CLI) + " inspect " + path + " --json --dot " + dot;
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int rc = pclose(p);
  ASSERT_EQ(rc, 0) << cmd;
  for (const char* field : {"\"nodes_before\"", "\"nodes_after\"", "\"num_groups\"", "\"distinct_workloads\"",
                            "\"bytes_fused\"", "\"bytes_unfused\"", "\"workload_key\"", "\"kind\": \"conv\"",
                            "\"graph\""}) {
    if (file == "bert_encoder.onnx" && std::string(field) == "\"kind\": \"conv\"") continue;
    EXPECT_NE(out.find(field), std::string::npos) << field;
  }
  std::string dot_text = ReadAll(dot);
  EXPECT_NE(dot_text.find("subgraph cluster_0"), std::string::npos);
}

TEST(ModelsFusionTest, ResNet18) { CheckModel("resnet18.onnx"); }
TEST(ModelsFusionTest, MobileNetV3Small) { CheckModel("mobilenet_v3_small.onnx"); }
TEST(ModelsFusionTest, BertEncoder) { CheckModel("bert_encoder.onnx"); }

TEST(ModelsInspectTest, ResNet18) { CheckInspect("resnet18.onnx"); }
TEST(ModelsInspectTest, MobileNetV3Small) { CheckInspect("mobilenet_v3_small.onnx"); }
TEST(ModelsInspectTest, BertEncoder) { CheckInspect("bert_encoder.onnx"); }

}  // namespace
}  // namespace kiln
