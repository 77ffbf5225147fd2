// GPU lowerings of the Winograd transforms against the reference interpreter
// through the CPU emulation at every point of their spaces: tile sizes 2 and
// 4, ragged edges, padding on any side, several images, the output
// transform with a bias and an epilogue; PTX for sm_80 and sm_90; the
// default's loop IR. The case lists are the CPU test's too
// (loop_ir/winograd_cases.h).
#include "compiler_core/codegen/loop_ir/gpu/lower_winograd.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler_core/codegen/kernel_emitter.h"
#include "compiler_core/codegen/loop_ir/printer.h"
#include "compiler_core/codegen/schedule_space.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/codegen_testing.h"
#include "tests/compiler_core/codegen/gpu_testing.h"
#include "tests/compiler_core/codegen/loop_ir/winograd_cases.h"

namespace kiln {
namespace {

using codegen_testing::RandomFeeds;
using loop_ir_testing::WinogradInputGraph;
using loop_ir_testing::WinogradOutputGraph;

const GpuTarget kSm90{90};

void CheckEveryPoint(const Graph& g, const char* kind) {
  gpu_testing::CheckEveryPoint(g, kind, RandomFeeds(g, 3, -1.0f, 1.0f), {1e-4, 1e-4});
}

TEST(GpuWinogradLoweringTest, InputTransformEveryPoint) {
  for (const loop_ir_testing::WinogradGeometry& s : loop_ir_testing::WinogradInputCases()) {
    SCOPED_TRACE(loop_ir_testing::WinogradName(s));
    CheckEveryPoint(*WinogradInputGraph(s), "winograd_input");
  }
}

TEST(GpuWinogradLoweringTest, OutputTransformEveryPoint) {
  for (const loop_ir_testing::WinogradOutputCase& o : loop_ir_testing::WinogradOutputCases()) {
    SCOPED_TRACE(loop_ir_testing::WinogradName(o));
    CheckEveryPoint(*WinogradOutputGraph(o), "winograd_output");
  }
}

// One thread per (channel, tile), 128 per block: 64 channels of a 56 x 56
// map in F(4x4) tiles (14 x 14 of them) make 98 blocks; the patch stays in
// registers.
TEST(GpuWinogradLoweringTest, LoopIrOfTheDefault) {
  auto g = WinogradInputGraph({.c = 64, .h = 56, .w = 56});
  ScheduleConfig c = DefaultSchedule(*g, kSm90);
  EXPECT_EQ(c.ToString(), "bt=128");
  absl::StatusOr<loop_ir::LoopFunc> f = LowerWorkload(*g, c, kSm90);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(loop_ir::GpuLaunchOf(*f).blocks, 64 * 14 * 14 / 128);
  EXPECT_EQ(loop_ir::GpuLaunchOf(*f).threads, 128);
  const std::string text = loop_ir::Print(*f);
  EXPECT_NE(text.find("allocate patch: f32[36]"), std::string::npos) << text;
  ScheduleConfig bad;
  bad.Set("vw", 4);
  EXPECT_EQ(ValidateSchedule(*g, bad, kSm90).code(), absl::StatusCode::kInvalidArgument);
  // The output transform: a thread per (output channel, tile), the epilogue
  // (Relu, residual Add) at each of its 16 outputs.
  auto out = WinogradOutputGraph({{.c = 64, .h = 56, .w = 56}, true, true, false});
  ScheduleConfig oc = DefaultSchedule(*out, kSm90);
  EXPECT_EQ(oc.ToString(), "bt=128");
  absl::StatusOr<loop_ir::LoopFunc> of = LowerWorkload(*out, oc, kSm90);
  ASSERT_TRUE(of.ok()) << of.status();
  EXPECT_EQ(loop_ir::GpuLaunchOf(*of).blocks, 64 * 14 * 14 / 128);
  bad = ScheduleConfig();
  bad.Set("bt", 48);
  EXPECT_EQ(ValidateSchedule(*out, bad, kSm90).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln
