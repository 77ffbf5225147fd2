// GPU lowering of the elementwise and data_movement kinds: every point of
// their GPU spaces against the reference interpreter (through the CPU
// emulation), and their PTX assembled by ptxas for sm_80 and sm_90.
#include "compiler_core/codegen/loop_ir/gpu/lower_elementwise.h"

#include "compiler_core/codegen/kernel_emitter.h"
#include "compiler_core/codegen/loop_ir/printer.h"
#include "compiler_core/codegen/schedule_space.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/codegen_testing.h"
#include "tests/compiler_core/codegen/gpu_testing.h"

namespace kiln {
namespace {

using codegen_testing::GraphBuilder;
using codegen_testing::RandomFeeds;

const GpuTarget kSm90{90};

void CheckEverywhere(const Graph& g) {
  std::vector<ScheduleConfig> space = EnumerateSchedules(g, kSm90);
  ASSERT_FALSE(space.empty()) << g.ToText();
  EXPECT_NE(std::find(space.begin(), space.end(), DefaultSchedule(g, kSm90)), space.end());
  gpu_testing::CheckGpuConfigsAgainstInterpreter(g, RandomFeeds(g, 11, -2.0f, 2.0f), space);
  gpu_testing::CheckPtxAssembles(g, space);
}

// Broadcasting operands, a row of 33 (no vector width divides it: masked
// lanes), transcendental functions.
TEST(GpuElementwiseLoweringTest, BroadcastingDagEveryPoint) {
  GraphBuilder b;
  Value* x = b.Input({3, 5, 33});
  Value* bias = b.Input({33});
  Value* s = b.Input({3, 1, 1});
  Value* y = b.Op("Mul", {b.Op("Sigmoid", {b.Op("Add", {x, bias})}), s});
  auto g = b.Finish({b.Op("Tanh", {y}), b.Op("Relu", {x})});
  EXPECT_EQ(WorkloadKind(*g), "elementwise");
  CheckEverywhere(*g);
}

// Transpose, then a Concat whose segments are written as boxes, and a
// strided Slice.
TEST(GpuDataMovementLoweringTest, TransposeConcatSliceEveryPoint) {
  GraphBuilder b;
  Value* x = b.Input({2, 6, 8});
  Value* z = b.Input({2, 8, 4});
  Value* t = b.Op("Transpose", {x}, {{"perm", AttrValue(std::vector<int64_t>{0, 2, 1})}});
  Value* c = b.Op("Concat", {t, z}, {{"axis", AttrValue(int64_t{2})}});
  Value* starts = b.Int64Constant({1}, {1});
  Value* ends = b.Int64Constant({1}, {7});
  Value* axes = b.Int64Constant({1}, {1});
  Value* steps = b.Int64Constant({1}, {2});
  auto g = b.Finish({b.Op("Relu", {c}), b.Op("Slice", {x, starts, ends, axes, steps})});
  EXPECT_EQ(WorkloadKind(*g), "data_movement");
  CheckEverywhere(*g);
}

// Element types other than f32: i64 arithmetic, a Cast to f16 and back.
TEST(GpuElementwiseLoweringTest, IntegerAndHalfTypes) {
  GraphBuilder b;
  Value* x = b.Input({4, 12});
  Value* h = b.Op("Cast", {x}, {{"to", AttrValue(int64_t{10})}});
  Value* back = b.Op("Cast", {h}, {{"to", AttrValue(int64_t{1})}});
  Value* i = b.Op("Cast", {x}, {{"to", AttrValue(int64_t{7})}});
  auto g = b.Finish({back, b.Op("Mul", {i, i})});
  CheckEverywhere(*g);
}

// What the lowering builds: one block loop, thread loops of `bt`, 4-lane
// vectors on rows that 4 divides.
TEST(GpuElementwiseLoweringTest, LoopIrOfTheDefault) {
  GraphBuilder b;
  Value* x = b.Input({64, 256});
  auto g = b.Finish({b.Op("Relu", {x})});
  ScheduleConfig c = DefaultSchedule(*g, kSm90);
  EXPECT_EQ(c.ToString(), "bt=256,un=1,vw=4");
  absl::StatusOr<loop_ir::LoopFunc> f = LowerWorkload(*g, c, kSm90);
  ASSERT_TRUE(f.ok()) << f.status();
  loop_ir::GpuLaunch launch = loop_ir::GpuLaunchOf(*f);
  EXPECT_EQ(launch.blocks, 64 * 256 / (256 * 4));
  EXPECT_EQ(launch.threads, 256);
  const std::string text = loop_ir::Print(*f);
  EXPECT_NE(text.find("gpu_block for (blk, 0, 16)"), std::string::npos) << text;
  EXPECT_NE(text.find("gpu_thread for (tid, 0, 256)"), std::string::npos) << text;
  EXPECT_NE(text.find("vectorized for (v_0, 0, 4)"), std::string::npos) << text;
  EXPECT_EQ(text.find("if ("), std::string::npos) << "the grid fits exactly: no guard\n" << text;
}

TEST(GpuElementwiseLoweringTest, RefusesKnobsOutOfRange) {
  GraphBuilder b;
  Value* x = b.Input({8, 8});
  auto g = b.Finish({b.Op("Relu", {x})});
  ScheduleConfig c;
  c.Set("vw", 8);
  EXPECT_EQ(ValidateSchedule(*g, c, kSm90).code(), absl::StatusCode::kInvalidArgument);
  c = ScheduleConfig();
  c.Set("bt", 100);
  EXPECT_EQ(ValidateSchedule(*g, c, kSm90).code(), absl::StatusCode::kInvalidArgument);
  c = ScheduleConfig();
  c.Set("tasks", 4);
  absl::Status s = ValidateSchedule(*g, c, kSm90);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("on a GPU"), std::string::npos) << s;
}

}  // namespace
}  // namespace kiln
