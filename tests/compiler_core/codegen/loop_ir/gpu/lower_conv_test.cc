// GPU lowerings of the conv and conv_transpose kinds against the reference
// interpreter through the CPU emulation: implicit GEMM over 1-D, 2-D and 3-D
// convs with groups, strides, asymmetric pads, dilations, biases and
// epilogues; the depthwise direct kernel at every point; the gather-form
// ConvTranspose at every point; PTX for sm_80 and sm_90; the defaults' loop
// IR; refused knobs.
#include "compiler_core/codegen/loop_ir/gpu/lower_conv.h"

#include <algorithm>
#include <string>
#include <vector>

#include "compiler_core/codegen/kernel_emitter.h"
#include "compiler_core/codegen/loop_ir/printer.h"
#include "compiler_core/codegen/schedule_space.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/codegen_testing.h"
#include "tests/compiler_core/codegen/gpu_testing.h"
#include "tests/compiler_core/codegen/loop_ir/conv_graphs.h"

namespace kiln {
namespace {

using codegen_testing::GraphBuilder;
using codegen_testing::RandomFeeds;
using codegen_testing::Tolerance;
using loop_ir_testing::ConvAttrs;
using loop_ir_testing::ConvGraph;
using loop_ir_testing::ConvTransposeGraph;
using Ints = std::vector<int64_t>;
using Attrs = std::map<std::string, AttrValue>;

const GpuTarget kSm90{90};
const Tolerance kTol{1e-4, 1e-4};

ScheduleConfig Parse(const std::string& text) {
  absl::StatusOr<ScheduleConfig> c = ScheduleConfig::Parse(text);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : ScheduleConfig();
}

// The points of the space with knob `key` set (or, for "", without dw),
// spread: the first, the last and up to `count` between.
std::vector<ScheduleConfig> Points(const Graph& g, const std::string& key, size_t count) {
  std::vector<ScheduleConfig> all, out;
  for (const ScheduleConfig& c : EnumerateSchedules(g, kSm90)) {
    if (key.empty() ? c.Get("dw", 0) == 0 : c.knobs.count(key) > 0) all.push_back(c);
  }
  if (all.size() <= count + 2) return all;
  out.push_back(all.front());
  for (size_t i = 1; i <= count; ++i) out.push_back(all[i * all.size() / (count + 1)]);
  out.push_back(all.back());
  return out;
}

void Check(const Graph& g, const std::string& kind, std::vector<ScheduleConfig> configs) {
  ASSERT_EQ(WorkloadKind(g), kind) << g.ToText();
  std::vector<ScheduleConfig> space = EnumerateSchedules(g, kSm90);
  const ScheduleConfig def = DefaultSchedule(g, kSm90);
  EXPECT_NE(std::find(space.begin(), space.end(), def), space.end());
  if (std::find(configs.begin(), configs.end(), def) == configs.end()) configs.push_back(def);
  gpu_testing::CheckGpuConfigsAgainstInterpreter(g, RandomFeeds(g, 9, -1.0f, 1.0f), configs, kTol);
  gpu_testing::CheckPtxAssembles(g, configs);
}

// Groups, a stride and a dilation per axis, asymmetric pads; 9 x 11 maps
// whose pixels no tile divides.
TEST(GpuConvLoweringTest, GroupsStridesPadsDilations) {
  auto g = ConvGraph({2, 8, 9, 11}, 12, {3, 3}, {2, 1}, {1, 2, 0, 1}, {1, 2}, 2, true, "Relu");
  Check(*g, "conv", Points(*g, "", 5));
}

// A pointwise conv reads X as a matrix: vector loads along the pixels
// (6 x 8), a residual Add and a Clip in the epilogue, outputs before and
// after it.
TEST(GpuConvLoweringTest, PointwiseVectorLoadsAndEpilogue) {
  GraphBuilder b;
  Value* y = b.Op("Conv", {b.Input({2, 16, 6, 8}), b.Input({24, 16, 1, 1}), b.Input({24})},
                  ConvAttrs({1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1));
  Value* s = b.Op("Add", {y, b.Input({2, 24, 6, 8})});
  auto g = b.Finish({b.Op("Clip", {s, b.FloatConstant({}, {-0.5f}), b.FloatConstant({}, {0.5f})}), y});
  Check(*g, "conv", Points(*g, "", 4));
}

// 1-D (stride, pads, dilation) and 3-D (a different stride, pad and
// dilation per axis; no bias) convs.
TEST(GpuConvLoweringTest, OneAndThreeDimensional) {
  {
    auto g = ConvGraph({2, 5, 23}, 7, {5}, {2}, {2, 1}, {1}, 1, true, "Tanh");
    Check(*g, "conv", Points(*g, "", 4));
  }
  {
    auto g = ConvGraph({1, 3, 5, 6, 7}, 4, {3, 2, 3}, {1, 2, 1}, {1, 0, 1, 1, 1, 0}, {1, 1, 2}, 1, false);
    Check(*g, "conv", Points(*g, "", 4));
  }
}

// Every point of the depthwise direct kernel (and a few implicit-GEMM
// points): 3x3 stride 1 on 13 x 17; 5x5 stride 2 with a dilated 3x3's
// asymmetric pads on 9 x 10; a 1-D depthwise conv.
TEST(GpuConvLoweringTest, DepthwiseEveryPoint) {
  {
    auto g = ConvGraph({1, 6, 13, 17}, 6, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 6, true, "Relu");
    std::vector<ScheduleConfig> points = Points(*g, "dw", 100);
    ASSERT_FALSE(points.empty());
    EXPECT_EQ(DefaultSchedule(*g, kSm90).Get("dw", 0), 1);
    for (const ScheduleConfig& c : Points(*g, "", 2)) points.push_back(c);
    Check(*g, "conv", points);
  }
  {
    auto g = ConvGraph({2, 4, 9, 10}, 4, {5, 3}, {2, 2}, {2, 2, 1, 0}, {1, 2}, 4);
    Check(*g, "conv", Points(*g, "dw", 100));
  }
  {
    auto g = ConvGraph({1, 3, 20}, 3, {3}, {1}, {1, 1}, {1}, 3, false);
    Check(*g, "conv", Points(*g, "dw", 100));
  }
}

// The default of a 64-channel 3x3 conv on 56 x 56: implicit GEMM of 64
// channels by 3136 pixels, K = 576 in vectors of 4 along the weights' rows;
// 32 x 32 tiles make 196 blocks (64 x 64 would make 49), sliced by 4 along K.
TEST(GpuConvLoweringTest, LoopIrOfTheDefaults) {
  {
    auto g = ConvGraph({1, 64, 56, 56}, 64, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1);
    ScheduleConfig c = DefaultSchedule(*g, kSm90);
    EXPECT_EQ(c.ToString(), "bk=8,bm=32,bn=32,sk=4,tm=4,tn=4,vw=4");
    absl::StatusOr<loop_ir::LoopFunc> f = LowerWorkload(*g, c, kSm90);
    ASSERT_TRUE(f.ok()) << f.status();
    loop_ir::GpuLaunch launch = loop_ir::GpuLaunchOf(*f);
    EXPECT_EQ(launch.blocks, 2 * 98);
    EXPECT_EQ(launch.threads, 256);
    const std::string text = loop_ir::Print(*f);
    for (const char* want : {"for (kt, 0, 18)", "vectorized for (la, 0, 4)", "vectorized for (ln, 0, 4)",
                             "allocate shared partial: f32[3072]"}) {
      EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
    }
  }
  // A depthwise 3x3 on 112 x 112 (MobileNet's first block): the direct
  // kernel, 8 rows of 112 pixels per block of 256 threads, 448 blocks.
  {
    auto g = ConvGraph({1, 32, 112, 112}, 32, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 32);
    ScheduleConfig c = DefaultSchedule(*g, kSm90);
    EXPECT_EQ(c.ToString(), "bt=256,dw=1,rows=8");
    absl::StatusOr<loop_ir::LoopFunc> f = LowerWorkload(*g, c, kSm90);
    ASSERT_TRUE(f.ok()) << f.status();
    loop_ir::GpuLaunch launch = loop_ir::GpuLaunchOf(*f);
    EXPECT_EQ(launch.blocks, 32 * 14);
    EXPECT_EQ(launch.shared_bytes, 10 * 114 * 4);
    const std::string text = loop_ir::Print(*f);
    EXPECT_NE(text.find("allocate local taps: f32[9]"), std::string::npos) << text;
  }
}

TEST(GpuConvLoweringTest, RefusesKnobsOutOfRange) {
  auto g = ConvGraph({1, 4, 8, 8}, 6, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2);
  for (const char* bad : {"dw=1", "bm=8", "vw=4", "bt=64", "ur=2"}) {
    absl::Status s = ValidateSchedule(*g, Parse(bad), kSm90);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad << ": " << s;
  }
  auto dw = ConvGraph({1, 4, 8, 8}, 4, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 4);
  for (const char* bad : {"dw=1,rows=3", "dw=1,rows=32", "dw=2", "dw=1,tm=4"}) {
    absl::Status s = ValidateSchedule(*dw, Parse(bad), kSm90);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad << ": " << s;
  }
}

// ---- ConvTranspose ---------------------------------------------------------------

void CheckConvT(const Graph& g) { Check(g, "conv_transpose", EnumerateSchedules(g, kSm90)); }

TEST(GpuConvTransposeLoweringTest, StridePadGroupsEveryPoint) {
  CheckConvT(*ConvTransposeGraph({1, 8, 7, 9}, 6, {4, 4},
                                 {{"strides", AttrValue(Ints{2, 2})}, {"pads", AttrValue(Ints{1, 1, 1, 1})}}));
  CheckConvT(*ConvTransposeGraph({1, 6, 5, 5}, 2, {3, 3},
                                 {{"strides", AttrValue(Ints{2, 2})}, {"pads", AttrValue(Ints{1, 1, 1, 1})}},
                                 3, false));
}

TEST(GpuConvTransposeLoweringTest, OutputPaddingDilationAsymmetricPads) {
  CheckConvT(*ConvTransposeGraph({1, 3, 5, 6}, 4, {3, 2},
                                 {{"strides", AttrValue(Ints{3, 2})}, {"pads", AttrValue(Ints{1, 0, 2, 1})},
                                  {"dilations", AttrValue(Ints{2, 3})}, {"output_padding", AttrValue(Ints{1, 1})}}));
}

TEST(GpuConvTransposeLoweringTest, OneAndThreeDimensional) {
  CheckConvT(*ConvTransposeGraph({2, 5, 13}, 3, {5},
                                 {{"strides", AttrValue(Ints{3})}, {"pads", AttrValue(Ints{2, 1})}}, 1, true,
                                 "Relu"));
  CheckConvT(*ConvTransposeGraph({1, 3, 3, 4, 5}, 2, {3, 2, 3},
                                 {{"strides", AttrValue(Ints{2, 1, 2})}, {"pads", AttrValue(Ints{1, 0, 1, 0, 1, 1})},
                                  {"dilations", AttrValue(Ints{1, 2, 1})}}));
}

TEST(GpuConvTransposeLoweringTest, DefaultAndRefusedKnobs) {
  auto g = ConvTransposeGraph({1, 4, 6, 6}, 4, {2, 2}, {{"strides", AttrValue(Ints{2, 2})}});
  EXPECT_EQ(DefaultSchedule(*g, kSm90).ToString(), "bt=256,un=1");
  absl::StatusOr<loop_ir::LoopFunc> f = LowerWorkload(*g, DefaultSchedule(*g, kSm90), kSm90);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(loop_ir::GpuLaunchOf(*f).blocks, 3);  // 4 x 12 x 12 outputs, 256 per block
  for (const char* bad : {"un=8", "bt=100", "vw=4"}) {
    absl::Status s = ValidateSchedule(*g, Parse(bad), kSm90);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad << ": " << s;
  }
}

}  // namespace
}  // namespace kiln
