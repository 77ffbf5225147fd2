// GPU lowering of the resize kind (compiler_core/codegen/loop_ir/gpu/lower_resize.h):
// every mode, nearest rounding and coordinate transformation, 1-D to 5-D,
// Upsample, crops with extrapolation and epilogues, on odd shapes; every
// point of the GPU space against the reference interpreter (through the CPU
// emulation; rtol 1e-4 / atol 1e-5: the interpreter blends in double) and
// assembled by ptxas for sm_80 and sm_90; the default's loop IR; refused knobs.
// The case lists are the CPU test's too (loop_ir/resize_cases.h).
#include "compiler_core/codegen/loop_ir/gpu/lower_resize.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler_core/codegen/kernel_emitter.h"
#include "compiler_core/codegen/loop_ir/printer.h"
#include "compiler_core/codegen/ptx_emitter.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/frontend/shape_inference.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/codegen_testing.h"
#include "tests/compiler_core/codegen/gpu_testing.h"
#include "tests/compiler_core/codegen/loop_ir/resize_cases.h"

namespace kiln {
namespace {

using loop_ir_testing::ResizeGraph;
using loop_ir_testing::ResizeMode;
using loop_ir_testing::ResizeSpec;

const GpuTarget kSm90{90};

void CheckResize(const ResizeSpec& s) {
  std::unique_ptr<Graph> g = ResizeGraph(s);
  gpu_testing::CheckEveryPoint(*g, "resize", codegen_testing::RandomFeeds(*g, 7, -0.5f, 0.5f, -1.0f, 1.0f));
}

TEST(GpuResizeLoweringTest, NearestEveryRoundingAndTransform) {
  for (const ResizeSpec& s : loop_ir_testing::NearestRoundingAndTransformCases()) CheckResize(s);
}

TEST(GpuResizeLoweringTest, NearestHalfwayCoordinates) {
  for (const ResizeSpec& s : loop_ir_testing::NearestHalfwayCases()) CheckResize(s);
}

TEST(GpuResizeLoweringTest, LinearTransforms) {
  for (const ResizeSpec& s : loop_ir_testing::LinearTransformCases()) CheckResize(s);
}

TEST(GpuResizeLoweringTest, Linear1DTrilinearAndUntouchedLastAxis) {
  for (const ResizeSpec& s : loop_ir_testing::Linear1DTrilinearAndUntouchedLastAxisCases()) CheckResize(s);
}

TEST(GpuResizeLoweringTest, CubicVariants) {
  for (const ResizeSpec& s : loop_ir_testing::CubicCases()) CheckResize(s);
}

TEST(GpuResizeLoweringTest, TfCropAndResizeWithExtrapolation) {
  for (const ResizeSpec& s : loop_ir_testing::TfCropAndResizeCases()) CheckResize(s);
}

TEST(GpuResizeLoweringTest, UpsampleAndEpilogues) {
  for (const ResizeSpec& s : loop_ir_testing::UpsampleAndEpilogueCases()) CheckResize(s);
}

TEST(GpuResizeLoweringTest, LoopIrOfTheDefault) {
  std::unique_ptr<Graph> g = ResizeGraph({{1, 3, 16, 16}, ResizeMode("linear", "half_pixel"), {}, {1, 3, 64, 64}});
  const ScheduleConfig c = DefaultSchedule(*g, kSm90);
  EXPECT_EQ(c.ToString(), "bt=256,un=1,vw=4");
  absl::StatusOr<loop_ir::LoopFunc> f = LowerWorkload(*g, c, kSm90);
  ASSERT_TRUE(f.ok()) << f.status();
  const loop_ir::GpuLaunch launch = loop_ir::GpuLaunchOf(*f);
  EXPECT_EQ(launch.blocks, 3 * 64 * 64 / (256 * 4));
  EXPECT_EQ(launch.threads, 256);
  EXPECT_EQ(launch.shared_bytes, 0);
  const std::string ir = loop_ir::Print(*f);
  EXPECT_NE(ir.find("vectorized for (v, 0, 4)"), std::string::npos) << ir;
  // The taps from the plan: half_pixel's (o + 0.5) / 4 - 0.5 in f64.
  EXPECT_NE(ir.find("floor((((f64((row % 64)) + 0.5) / 4.0) - 0.5))"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("if ("), std::string::npos) << "the grid fits exactly: no guard\n" << ir;
  // The device's doubles are the interpreter's: IEEE-rounded f64 operations,
  // none fused into an fma.
  absl::StatusOr<PtxCode> ptx = CompileToPtx({KernelRequest{g.get(), c, "k"}}, kSm90);
  ASSERT_TRUE(ptx.ok()) << ptx.status();
  EXPECT_NE(ptx->ptx.find("add.rn.f64"), std::string::npos) << ptx->ptx;
  EXPECT_EQ(ptx->ptx.find("fma.rn.f64"), std::string::npos) << ptx->ptx;
  EXPECT_EQ(ptx->ptx.find("mul.f64"), std::string::npos) << "mul without .rn may be contracted by ptxas";
  EXPECT_EQ(ptx->ptx.find("add.f64"), std::string::npos) << "add without .rn may be contracted by ptxas";
}

TEST(GpuResizeLoweringTest, RefusesKnobsOutOfRange) {
  std::unique_ptr<Graph> g = ResizeGraph({{1, 2, 5, 7}, ResizeMode("linear", "half_pixel"), {1, 1, 2, 2}});
  auto refused = [&](const std::string& knob, int64_t v) {
    ScheduleConfig c;
    c.Set(knob, v);
    absl::Status s = ValidateSchedule(*g, c, kSm90);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << knob;
    EXPECT_NE(s.message().find(absl::StrCat(knob, "=", v)), std::string::npos) << s;
  };
  refused("vw", 3);
  refused("bt", 48);
  refused("un", 0);
  ScheduleConfig tasks;
  tasks.Set("tasks", 4);
  EXPECT_NE(ValidateSchedule(*g, tasks, kSm90).message().find("on a GPU"), std::string::npos);
}

}  // namespace
}  // namespace kiln
