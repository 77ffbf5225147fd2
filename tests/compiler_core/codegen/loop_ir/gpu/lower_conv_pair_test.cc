// GPU lowering of the conv pair (expansion + depthwise conv) against the
// reference interpreter through the CPU emulation: strides, pads,
// dilations, odd maps that no tile divides, mid chains (Relu, HardSwish,
// SiLU, a per-channel scale, an operand broadcast along H, a Clip without
// min), epilogues, missing biases; the tiled kernel at a spread of points
// and the recompute variant; PTX for sm_80 and sm_90; the default's loop
// IR; refused knobs.
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

namespace kiln {
namespace {

using codegen_testing::GraphBuilder;
using codegen_testing::RandomFeeds;
using Ints = std::vector<int64_t>;
using Attrs = std::map<std::string, AttrValue>;

const GpuTarget kSm90{90};

Attrs DwAttrs(int64_t c, int64_t k, int64_t stride, int64_t pad, int64_t dil) {
  return {{"kernel_shape", AttrValue(Ints{k, k})},
          {"strides", AttrValue(Ints{stride, stride})},
          {"pads", AttrValue(Ints{pad, pad, pad, pad})},
          {"dilations", AttrValue(Ints{dil, dil})},
          {"group", AttrValue(c)}};
}

struct PairSpec {
  Ints x;         // [n, cin, h, w]
  int64_t c = 8;  // expanded channels
  int64_t k = 3, stride = 1, pad = 1, dil = 1;
  std::string mid = "Relu";  // "", Relu, HardSwish, SiLU, Scale, RowAdd, ClipMax
  std::string epilogue;      // "", Relu, Add
  bool bias = true;
};

std::unique_ptr<Graph> Pair(const PairSpec& s) {
  GraphBuilder b;
  Value* x = b.Input(s.x);
  std::vector<Value*> ins = {x, b.Input({s.c, s.x[1], 1, 1})};
  if (s.bias) ins.push_back(b.Input({s.c}));
  Value* e = b.Op("Conv", ins);
  if (s.mid == "Relu" || s.mid == "HardSwish") e = b.Op(s.mid, {e});
  if (s.mid == "SiLU") e = b.Op("Mul", {e, b.Op("Sigmoid", {e})});
  if (s.mid == "Scale") e = b.Op("Mul", {e, b.Input({1, s.c, 1, 1})});
  if (s.mid == "RowAdd") e = b.Op("Add", {e, b.Input({1, 1, s.x[2], 1})});
  if (s.mid == "ClipMax") e = b.Op("Clip", {e, nullptr, b.FloatConstant({}, {0.25f})});
  std::vector<Value*> dins = {e, b.Input({s.c, 1, s.k, s.k})};
  if (s.bias) dins.push_back(b.Input({s.c}));
  Value* y = b.Op("Conv", dins, DwAttrs(s.c, s.k, s.stride, s.pad, s.dil));
  if (s.epilogue == "Relu") y = b.Op("Relu", {y});
  if (s.epilogue == "Add") {
    const int64_t oh = (s.x[2] + 2 * s.pad - s.dil * (s.k - 1) - 1) / s.stride + 1;
    const int64_t ow = (s.x[3] + 2 * s.pad - s.dil * (s.k - 1) - 1) / s.stride + 1;
    y = b.Op("Add", {y, b.Input({s.x[0], s.c, oh, ow})});
  }
  return b.Finish({y});
}

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

void CheckPair(const PairSpec& s, size_t count = 4) {
  std::unique_ptr<Graph> g = Pair(s);
  ASSERT_EQ(WorkloadKind(*g), "conv_pair") << g->ToText();
  std::vector<ScheduleConfig> space = EnumerateSchedules(*g, kSm90);
  EXPECT_NE(std::find(space.begin(), space.end(), DefaultSchedule(*g, kSm90)), space.end());
  std::vector<ScheduleConfig> points = Points(*g, count);
  gpu_testing::CheckGpuConfigsAgainstInterpreter(*g, RandomFeeds(*g, 13, -1.0f, 1.0f), points, {1e-4, 1e-4});
  gpu_testing::CheckPtxAssembles(*g, points);
}

TEST(GpuConvPairLoweringTest, StridesPadsAndMaps) {
  CheckPair({{1, 4, 12, 12}, 8});                                  // 3x3 s1
  CheckPair({{1, 5, 9, 11}, 6, 3, 2, 1, 1, "HardSwish"});          // s2, odd map
  CheckPair({{2, 3, 7, 37}, 4, 5, 1, 2, 1, "SiLU", "Relu"});       // 5x5 over 37 columns: two column tiles
  CheckPair({{1, 3, 10, 9}, 4, 3, 1, 2, 2, "Relu", "Add", false});  // dilation 2, residual, no biases
}

TEST(GpuConvPairLoweringTest, MidChains) {
  CheckPair({{1, 3, 6, 7}, 4, 3, 1, 1, 1, "Scale"}, 2);
  CheckPair({{1, 3, 6, 7}, 4, 3, 2, 1, 1, "RowAdd"}, 2);
  CheckPair({{1, 3, 6, 7}, 4, 3, 1, 0, 1, "ClipMax"}, 2);
  CheckPair({{1, 3, 6, 7}, 4, 3, 1, 1, 1, ""}, 2);
}

// MobileNetV2's 24 -> 144 -> depthwise 3x3 on 56 x 56: 8 channels, 8 rows
// and 64 columns per block make 18 x 7 = 126 blocks, fewer than 132 SMs:
// 4 channels, 252 blocks, 4 * 10 * 66 floats of shared memory.
TEST(GpuConvPairLoweringTest, LoopIrOfTheDefault) {
  std::unique_ptr<Graph> g = Pair({{1, 24, 56, 56}, 144, 3, 1, 1, 1, "Relu"});
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
  std::unique_ptr<Graph> g = Pair({{1, 4, 12, 12}, 6});
  for (const char* bad : {"kc=4", "kc=3", "rows=16", "cols=48", "rc=2", "vw=4", "rc=1,kc=2"}) {
    absl::StatusOr<ScheduleConfig> c = ScheduleConfig::Parse(bad);
    ASSERT_TRUE(c.ok());
    absl::Status s = ValidateSchedule(*g, *c, kSm90);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad << ": " << s;
  }
}

}  // namespace
}  // namespace kiln
