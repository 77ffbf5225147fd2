// GPU lowering of the conv pair (expansion + depthwise conv) against the
// reference interpreter through the CPU emulation: strides, pads,
// dilations, odd maps that no tile divides, mid chains (Relu, HardSwish,
// SiLU, a per-channel scale, an operand broadcast along H, a Clip without
// min), epilogues, missing biases; the tiled kernel at a spread of points
// and the recompute variant; PTX for sm_80 and sm_90; the default's loop
// IR; refused knobs. The case lists are the CPU test's too
// (loop_ir/conv_pair_cases.h).
#include "compiler_core/codegen/loop_ir/gpu/lower_conv_pair.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "compiler_core/codegen/kernel_emitter.h"
#include "compiler_core/codegen/loop_ir/printer.h"
#include "compiler_core/codegen/schedule_space.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/codegen_testing.h"
#include "tests/compiler_core/codegen/gpu_testing.h"
#include "tests/compiler_core/codegen/loop_ir/conv_pair_cases.h"

namespace kiln {
namespace {

using codegen_testing::RandomFeeds;
using loop_ir_testing::ConvPairGraph;
using loop_ir_testing::ConvPairSpec;

const GpuTarget kSm90{90};

// The default, both recompute points, and `count` tiled points spread
// over the space.
std::vector<ScheduleConfig> Points(const Graph& g, size_t count) {
  std::vector<ScheduleConfig> tiled, out = {DefaultSchedule(g, kSm90)};
  for (const ScheduleConfig& c : EnumerateSchedules(g, kSm90)) {
    if (c.Get("rc", 0) == 1) {
      out.push_back(c);
    } else {
      tiled.push_back(c);
    }
  }
  for (size_t i = 0; i < count && !tiled.empty(); ++i) {
    const ScheduleConfig& c = tiled[i * (tiled.size() - 1) / std::max<size_t>(1, count - 1)];
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  }
  return out;
}

void CheckPair(const ConvPairSpec& s, size_t count) {
  std::unique_ptr<Graph> g = ConvPairGraph(s);
  ASSERT_EQ(WorkloadKind(*g), "conv_pair") << g->ToText();
  std::vector<ScheduleConfig> space = EnumerateSchedules(*g, kSm90);
  EXPECT_NE(std::find(space.begin(), space.end(), DefaultSchedule(*g, kSm90)), space.end());
  std::vector<ScheduleConfig> points = Points(*g, count);
  gpu_testing::CheckGpuConfigsAgainstInterpreter(*g, RandomFeeds(*g, 13, -1.0f, 1.0f), points, {1e-4, 1e-4});
  gpu_testing::CheckPtxAssembles(*g, points);
}

TEST(GpuConvPairLoweringTest, StridesPadsAndMaps) {
  for (const ConvPairSpec& s : loop_ir_testing::ConvPairStrideAndMapCases()) CheckPair(s, 4);
}

TEST(GpuConvPairLoweringTest, MidChains) {
  for (const ConvPairSpec& s : loop_ir_testing::ConvPairMidChainCases()) CheckPair(s, 2);
}

// MobileNetV2's 24 -> 144 -> depthwise 3x3 on 56 x 56: 8 channels, 8 rows
// and 64 columns per block make 18 x 7 = 126 blocks, fewer than 132 SMs:
// 4 channels, 252 blocks, 4 * 10 * 66 floats of shared memory.
TEST(GpuConvPairLoweringTest, LoopIrOfTheDefault) {
  std::unique_ptr<Graph> g = ConvPairGraph({{1, 24, 56, 56}, 144, 3, 1, 1, 1, "Relu"});
  ScheduleConfig c = DefaultSchedule(*g, kSm90);
  EXPECT_EQ(c.ToString(), "bt=256,cols=64,kc=4,rows=8");
  absl::StatusOr<loop_ir::LoopFunc> f = LowerWorkload(*g, c, kSm90);
  ASSERT_TRUE(f.ok()) << f.status();
  loop_ir::GpuLaunch launch = loop_ir::GpuLaunchOf(*f);
  EXPECT_EQ(launch.blocks, 36 * 7);
  EXPECT_EQ(launch.shared_bytes, 4 * 10 * 66 * 4);
  const std::string text = loop_ir::Print(*f);
  EXPECT_NE(text.find("allocate shared expanded: f32[2640]"), std::string::npos) << text;
  EXPECT_NE(text.find("allocate acc_e: f32[4]"), std::string::npos) << text;
}

TEST(GpuConvPairLoweringTest, RefusesKnobsOutOfRange) {
  std::unique_ptr<Graph> g = ConvPairGraph({{1, 4, 12, 12}, 6});
  for (const char* bad : {"kc=4", "kc=3", "rows=16", "cols=48", "rc=2", "vw=4", "rc=1,kc=2"}) {
    absl::StatusOr<ScheduleConfig> c = ScheduleConfig::Parse(bad);
    ASSERT_TRUE(c.ok());
    absl::Status s = ValidateSchedule(*g, *c, kSm90);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad << ": " << s;
  }
}

}  // namespace
}  // namespace kiln
