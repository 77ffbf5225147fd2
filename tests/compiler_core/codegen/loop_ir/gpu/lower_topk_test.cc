// GPU lowering of the topk kind: largest and smallest along every axis,
// k from 0 to the whole row, rows of 1 to 1000+, many ties (lower index
// first), infinities; every point of the GPU space (selection rounds and the
// bitonic sort, groups of 1 thread to a block) against the reference
// interpreter (through the CPU emulation), exactly, and assembled by ptxas
// for sm_80 and sm_90. The case lists are the CPU test's too
// (loop_ir/topk_cases.h).
#include "compiler_core/codegen/loop_ir/gpu/lower_topk.h"

#include <cmath>

#include "compiler_core/codegen/kernel_emitter.h"
#include "compiler_core/codegen/loop_ir/printer.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/frontend/shape_inference.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/codegen_testing.h"
#include "tests/compiler_core/codegen/gpu_testing.h"
#include "tests/compiler_core/codegen/loop_ir/topk_cases.h"

namespace kiln {
namespace {

using loop_ir_testing::TopKCase;
using loop_ir_testing::TopKGraph;

const GpuTarget kSm90{90};

void CheckEverywhere(const TopKCase& c) {
  SCOPED_TRACE(loop_ir_testing::TopKName(c));
  std::unique_ptr<Graph> g = TopKGraph(c);
  gpu_testing::CheckEveryPoint(*g, "topk", loop_ir_testing::TopKFeeds(*g, c), {0, 0});
}

TEST(GpuTopKLoweringTest, LargestAndSmallestWithTies) {
  for (const TopKCase& c : loop_ir_testing::TopKTieCases()) CheckEverywhere(c);
}

TEST(GpuTopKLoweringTest, KFromOneToTheRow) {
  for (const TopKCase& c : loop_ir_testing::TopKSizeCases()) CheckEverywhere(c);
}

TEST(GpuTopKLoweringTest, AxesOtherThanTheLast) {
  for (const TopKCase& c : loop_ir_testing::TopKAxisCases()) CheckEverywhere(c);
}

TEST(GpuTopKLoweringTest, LongRowsAndInfinities) {
  for (const TopKCase& c : loop_ir_testing::TopKLongRowAndInfinityCases()) CheckEverywhere(c);
}

// The defaults: a few of many elements by selection rounds of a block; the
// whole row of a long one by the sort; many short rows a thread each.
TEST(GpuTopKLoweringTest, LoopIrOfTheDefaults) {
  {
    auto g = TopKGraph({{16, 50000}, 5, 1, 1});
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
    auto g = TopKGraph({{64, 512}, 512, 1, 0});
    ScheduleConfig c = DefaultSchedule(*g, kSm90);
    EXPECT_EQ(c.Get("sort", -1), 1) << c.ToString();
    absl::StatusOr<loop_ir::LoopFunc> f = LowerWorkload(*g, c, kSm90);
    ASSERT_TRUE(f.ok()) << f.status();
    // 9 * 10 / 2 compare-exchange steps after the load, then the output.
    EXPECT_EQ(loop_ir::GpuLaunchOf(*f).shared_bytes % (512 * 8), 0);
  }
  {
    auto g = TopKGraph({{100000, 4}, 2, 1, 1});
    EXPECT_EQ(DefaultSchedule(*g, kSm90).Get("tr", 0), 1) << DefaultSchedule(*g, kSm90).ToString();
  }
}

TEST(GpuTopKLoweringTest, RefusesKnobsOutOfRange) {
  auto g = TopKGraph({{4, 3000}, 3, 1, 1});
  for (const char* knobs : {"bt=128,tr=3", "bt=128,tr=256", "sort=2", "bt=64,tr=1,sort=1", "tasks=2"}) {
    EXPECT_EQ(ValidateSchedule(*g, *ScheduleConfig::Parse(knobs), kSm90).code(), absl::StatusCode::kInvalidArgument)
        << knobs;
  }
  EXPECT_TRUE(ValidateSchedule(*g, *ScheduleConfig::Parse("bt=1024,tr=1024,sort=1"), kSm90).ok());
}

}  // namespace
}  // namespace kiln
