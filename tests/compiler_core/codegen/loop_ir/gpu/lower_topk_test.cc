// GPU lowering of the topk kind: largest and smallest along every axis,
// k from 1 to the whole row, rows of 1 to 1000+, many ties (lower index
// first), infinities; every point of the GPU space (selection rounds and the
// bitonic sort, groups of 1 thread to a block) against the reference
// interpreter (through the CPU emulation), exactly, and assembled by ptxas
// for sm_80 and sm_90.
#include "compiler_core/codegen/loop_ir/gpu/lower_topk.h"

#include <cmath>

#include "compiler_core/codegen/kernel_emitter.h"
#include "compiler_core/codegen/loop_ir/printer.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/frontend/shape_inference.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/codegen_testing.h"
#include "tests/compiler_core/codegen/gpu_testing.h"

namespace kiln {
namespace {

using Ints = std::vector<int64_t>;

const GpuTarget kSm90{90};

std::unique_ptr<Graph> TopKGraph(const Ints& x, int64_t k, int64_t axis, int64_t largest, bool values = true,
                                 bool indices = true) {
  auto g = std::make_unique<Graph>();
  g->set_opset_version(13);
  Value* in = *g->AddInput("in0", TensorType::Static(DType::kFloat32, x));
  Value* kv = *g->AddConstant("k", Tensor::FromVector(DType::kInt64, {1}, Ints{k}));
  Value* v = *g->AddValue("values");
  Value* i = *g->AddValue("indices");
  EXPECT_TRUE(g->AddNode("TopK", "topk", {in, kv}, {v, i},
                         {{"axis", AttrValue(axis)}, {"largest", AttrValue(largest)}})
                  .ok());
  if (values) g->AddOutput(v);
  if (indices) g->AddOutput(i);
  EXPECT_TRUE(InferShapes(*g).ok());
  return g;
}

// Inputs from `levels` distinct values in [-2, 2] (few levels: many ties),
// some of them infinite when asked.
std::map<std::string, Tensor> Feeds(const Graph& g, int levels, bool infinities = false) {
  const Ints dims = g.inputs()[0]->type().StaticDims();
  std::vector<float> x = codegen_testing::RandomData(codegen_testing::Product(dims), 17, 0.0f, 1.0f);
  for (size_t j = 0; j < x.size(); ++j) {
    x[j] = std::floor(x[j] * static_cast<float>(levels)) * 4.0f / static_cast<float>(levels) - 2.0f;
    if (infinities && j % 7 == 3) x[j] = j % 2 == 0 ? INFINITY : -INFINITY;
  }
  return {{"in0", Tensor::FromVector(DType::kFloat32, dims, x)}};
}

void CheckEverywhere(const Graph& g, int levels, bool infinities = false) {
  EXPECT_EQ(WorkloadKind(g), "topk") << g.ToText();
  std::vector<ScheduleConfig> space = EnumerateSchedules(g, kSm90);
  ASSERT_FALSE(space.empty()) << g.ToText();
  EXPECT_NE(std::find(space.begin(), space.end(), DefaultSchedule(g, kSm90)), space.end());
  gpu_testing::CheckGpuConfigsAgainstInterpreter(g, Feeds(g, levels, infinities), space, {0, 0});
  gpu_testing::CheckPtxAssembles(g, space);
}

TEST(GpuTopKLoweringTest, LargestAndSmallestWithTies) {
  CheckEverywhere(*TopKGraph({5, 37}, 5, -1, 1), 1000);
  CheckEverywhere(*TopKGraph({5, 37}, 5, -1, 0), 3);  // many ties: lower index first
  CheckEverywhere(*TopKGraph({4, 11}, 3, 1, 1, true, false), 4);
  CheckEverywhere(*TopKGraph({4, 11}, 3, 1, 0, false, true), 4);
}

// k of 1 and of the whole row (a full sort), rows of one element.
TEST(GpuTopKLoweringTest, KFromOneToTheRow) {
  CheckEverywhere(*TopKGraph({3, 33}, 33, 1, 1), 5);
  CheckEverywhere(*TopKGraph({7, 33}, 1, 1, 0), 5);
  CheckEverywhere(*TopKGraph({6, 1}, 1, 1, 1), 1000);
  CheckEverywhere(*TopKGraph({1}, 1, 0, 0), 1000);
}

// The axis leading or in the middle: rows strided by the kept inner axes.
TEST(GpuTopKLoweringTest, AxesOtherThanTheLast) {
  CheckEverywhere(*TopKGraph({3, 10, 4}, 3, 1, 1), 6);
  CheckEverywhere(*TopKGraph({7, 6}, 7, 0, 0), 1000);
  CheckEverywhere(*TopKGraph({2, 9, 3, 5}, 4, -3, 1), 4);
}

// A long row (the sort pads it to 1024: 8 KiB of shared memory) and rows
// with infinities, which order like any value (before the padding).
TEST(GpuTopKLoweringTest, LongRowsAndInfinities) {
  CheckEverywhere(*TopKGraph({2, 1000}, 10, 1, 1), 1000);
  CheckEverywhere(*TopKGraph({3, 45}, 20, 1, 1), 3, true);
  CheckEverywhere(*TopKGraph({3, 45}, 45, 1, 0), 3, true);
}

// The defaults: a few of many elements by selection rounds of a block; the
// whole row of a long one by the sort; many short rows a thread each.
TEST(GpuTopKLoweringTest, LoopIrOfTheDefaults) {
  {
    auto g = TopKGraph({16, 50000}, 5, 1, 1);
    ScheduleConfig c = DefaultSchedule(*g, kSm90);
    EXPECT_EQ(c.Get("sort", -1), 0) << c.ToString();
    EXPECT_GE(c.Get("tr", 0), 256) << c.ToString();
    absl::StatusOr<loop_ir::LoopFunc> f = LowerWorkload(*g, c, kSm90);
    ASSERT_TRUE(f.ok()) << f.status();
    const std::string text = loop_ir::Print(*f);
    EXPECT_NE(text.find("for (r, 0, 5)"), std::string::npos) << text;
    EXPECT_NE(text.find("warp_reduce max(grp_v, 32)"), std::string::npos) << text;
    EXPECT_NE(text.find("warp_reduce min(grp_i, 32)"), std::string::npos) << text;
  }
  {
    auto g = TopKGraph({64, 512}, 512, 1, 0);
    ScheduleConfig c = DefaultSchedule(*g, kSm90);
    EXPECT_EQ(c.Get("sort", -1), 1) << c.ToString();
    absl::StatusOr<loop_ir::LoopFunc> f = LowerWorkload(*g, c, kSm90);
    ASSERT_TRUE(f.ok()) << f.status();
    // 9 * 10 / 2 compare-exchange steps after the load, then the output.
    EXPECT_EQ(loop_ir::GpuLaunchOf(*f).shared_bytes % (512 * 8), 0);
  }
  {
    auto g = TopKGraph({100000, 4}, 2, 1, 1);
    EXPECT_EQ(DefaultSchedule(*g, kSm90).Get("tr", 0), 1) << DefaultSchedule(*g, kSm90).ToString();
  }
}

TEST(GpuTopKLoweringTest, RefusesKnobsOutOfRange) {
  auto g = TopKGraph({4, 3000}, 3, 1, 1);
  for (const char* knobs : {"bt=128,tr=3", "bt=128,tr=256", "sort=2", "bt=64,tr=1,sort=1", "tasks=2"}) {
    EXPECT_EQ(ValidateSchedule(*g, *ScheduleConfig::Parse(knobs), kSm90).code(), absl::StatusCode::kInvalidArgument)
        << knobs;
  }
  EXPECT_TRUE(ValidateSchedule(*g, *ScheduleConfig::Parse("bt=1024,tr=1024,sort=1"), kSm90).ok());
}

}  // namespace
}  // namespace kiln
