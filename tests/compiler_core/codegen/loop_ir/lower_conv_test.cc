// Conv workloads on loop IR (compiler_core/codegen/loop_ir/lower_conv.h): every shape
// family, JIT-compiled at several schedule points, against the reference
// interpreter at rtol 1e-4 / atol 1e-5.
#include "compiler_core/codegen/loop_ir/lower_conv.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler_core/codegen/jit.h"
#include "compiler_core/codegen/kernel_emitter.h"
#include "compiler_core/codegen/loop_ir/loop_ir.h"
#include "compiler_core/codegen/loop_ir/lower.h"
#include "compiler_core/codegen/loop_ir/printer.h"
#include "compiler_core/codegen/loop_ir/verifier.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/codegen/target.h"
#include "compiler_core/frontend/interpreter.h"
#include "compiler_core/frontend/shape_inference.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/loop_ir/conv_graphs.h"
#include "tests/compiler_core/codegen/loop_ir/lowering_testing.h"

namespace kiln {
namespace {

using namespace loop_ir_testing;  // NOLINT: test helpers

// Every point of the pointwise variant (pw=1) in the space.
std::vector<ScheduleConfig> PointwisePoints(const Graph& g, const CpuTarget& target) {
  std::vector<ScheduleConfig> out;
  for (const ScheduleConfig& c : EnumerateSchedules(g, target)) {
    if (c.Get("pw", 0) == 1) out.push_back(c);
  }
  return out;
}

// Every point of the depthwise plane variant (dw=1) in the space.
std::vector<ScheduleConfig> PlanePoints(const Graph& g, const CpuTarget& target) {
  std::vector<ScheduleConfig> out;
  for (const ScheduleConfig& c : EnumerateSchedules(g, target)) {
    if (c.Get("dw", 0) == 1) out.push_back(c);
  }
  return out;
}

// Inputs: in0 the data in [-1, 1], the rest (weights, bias, residuals) in
// [-0.5, 0.5]; tasks run in three uneven ranges. `configs` defaults to Points.
void CheckConv(const Graph& g, std::vector<ScheduleConfig> configs = {}) {
  CpuTarget target = CpuTarget::Host();
  ASSERT_EQ(WorkloadKind(g), "conv") << g.ToText();
  ASSERT_TRUE(CanCompile(g));
  if (configs.empty()) configs = Points(g, target);
  ASSERT_FALSE(configs.empty());
  CheckConfigsAgainstInterpreter(g, configs, target);
}

TEST(ConvLoweringTest, ThreeByThreeStrideOnePadOne) {
  CheckConv(*ConvGraph({1, 8, 12, 20}, 16, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1));
}

TEST(ConvLoweringTest, ThreeByThreeStrideTwo) {
  CheckConv(*ConvGraph({2, 3, 17, 19}, 8, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1));
}

TEST(ConvLoweringTest, PointwiseNoBias) {
  CheckConv(*ConvGraph({1, 16, 7, 9}, 24, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, /*bias=*/false));
}

TEST(ConvLoweringTest, Depthwise) {
  CheckConv(*ConvGraph({1, 12, 10, 18}, 12, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 12));
}

TEST(ConvLoweringTest, DepthwiseStrideTwoMultiplier) {
  CheckConv(*ConvGraph({1, 4, 11, 11}, 8, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 4));
}

TEST(ConvLoweringTest, Dilation) {
  CheckConv(*ConvGraph({1, 4, 13, 15}, 6, {3, 3}, {1, 1}, {2, 2, 2, 2}, {2, 2}, 1));
}

// The segmentation head that failed: a 3x3 convolution with dilation 12 and
// pads 12 on a 16x16 map with 256 input channels does not fit one input pack,
// so the kernel packs channel chunks and accumulates over them in the output.
TEST(ConvLoweringTest, WideDilationOverChannelChunks) {
  auto g = ConvGraph({1, 256, 16, 16}, 8, {3, 3}, {1, 1}, {12, 12, 12, 12}, {12, 12}, 1);
  CpuTarget target = CpuTarget::Host();
  std::vector<ScheduleConfig> points = Points(*g, target);
  ASSERT_FALSE(points.empty());
  // Keep the check fast: the default, and the first and last points.
  CheckConv(*g, {points[0], points[1], points.back()});
}

// Tap rows that fall in the padding are skipped (dilation 12 on a 16-row
// map: rows 4..11 read only the middle tap row): the multiply-adds of a tap
// row sit under a guard on the input row, and the sums stay exact at every
// point of the space.
TEST(ConvLoweringTest, TapRowsInThePaddingAreSkipped) {
  auto g = ConvGraph({1, 8, 16, 16}, 8, {3, 3}, {1, 1}, {12, 12, 12, 12}, {12, 12}, 1);
  CpuTarget target = CpuTarget::Host();
  const loop_ir::WorkloadLowering* l = loop_ir::FindLowering(*g);
  ASSERT_NE(l, nullptr);
  auto f = l->lower(*g, DefaultSchedule(*g, target), target);
  ASSERT_TRUE(f.ok()) << f.status();
  // A guard on the tap row: an `if` whose condition reads kh_.
  auto guards_tap_rows = [](const std::string& text) {
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      if (line.find("if (") != std::string::npos && line.find("kh_") != std::string::npos) return true;
    }
    return false;
  };
  EXPECT_TRUE(guards_tap_rows(loop_ir::Print(*f))) << loop_ir::Print(*f);
  CheckConv(*g);
  // No padding: no guard.
  auto valid = ConvGraph({1, 8, 16, 16}, 8, {3, 3}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1);
  auto fv = l->lower(*valid, DefaultSchedule(*valid, target), target);
  ASSERT_TRUE(fv.ok()) << fv.status();
  EXPECT_FALSE(guards_tap_rows(loop_ir::Print(*fv))) << loop_ir::Print(*fv);
}

// Many channels on a small map (a ResNet-50 ASPP-like 2048 -> 16 3x3): chunks
// again, with an epilogue that must see the final sums only.
TEST(ConvLoweringTest, ManyChannelsChunksWithEpilogue) {
  Builder b;
  Value* x = b.Input({1, 2048, 5, 7});
  Value* w = b.Input({16, 2048, 3, 3});
  Value* c = b.Op("Conv", {x, w}, ConvAttrs({3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}));
  auto g = b.Finish({b.Op("Relu", {c})});
  CpuTarget target = CpuTarget::Host();
  CheckConv(*g, {DefaultSchedule(*g, target)});
}

TEST(ConvLoweringTest, TwoGroups) {
  CheckConv(*ConvGraph({1, 8, 9, 9}, 6, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2));
}

TEST(ConvLoweringTest, OddSizesAsymmetricPads) {
  CheckConv(*ConvGraph({1, 5, 7, 23}, 7, {5, 3}, {2, 3}, {2, 0, 1, 2}, {1, 1}, 1));
}

TEST(ConvLoweringTest, SevenBySevenStrideTwoLikeResNetStem) {
  CheckConv(*ConvGraph({1, 3, 32, 32}, 16, {7, 7}, {2, 2}, {3, 3, 3, 3}, {1, 1}, 1));
}

TEST(ConvLoweringTest, AutoPadSameUpper) {
  Builder b;
  Value* x = b.Input({1, 4, 9, 10});
  Value* w = b.Input({8, 4, 3, 3});
  Value* y = b.Op("Conv", {x, w}, {{"auto_pad", std::string("SAME_UPPER")}, {"strides", Ints{2, 2}}});
  CheckConv(*b.Finish({y}));
}

TEST(ConvLoweringTest, OneDimensional) {
  Builder b;
  Value* x = b.Input({2, 6, 31});
  Value* w = b.Input({10, 6, 5});
  Value* bias = b.Input({10});
  Value* y = b.Op("Conv", {x, w, bias},
                  {{"kernel_shape", Ints{5}}, {"strides", Ints{2}}, {"pads", Ints{2, 1}}, {"dilations", Ints{1}}});
  CheckConv(*b.Finish({y}));
}

// Fewer row tasks than threads want (1-D convs, a 2-row map): the direct
// variant's tasks split each row's register blocks (cs), the last split
// holding fewer; every such point against the interpreter, with the input
// channels in chunks too (a wide 1-D row), and the default splits a 1-D row.
TEST(ConvLoweringTest, DirectColumnSplits) {
  CpuTarget target = CpuTarget::Host();
  auto split_points = [&](const Graph& g) {
    std::vector<ScheduleConfig> out;
    for (const ScheduleConfig& c : EnumerateSchedules(g, target)) {
      if (c.Get("cs", 1) > 1) out.push_back(c);
    }
    return out;
  };
  Builder b;
  Value* x = b.Input({1, 6, 301});
  Value* y = b.Op("Conv", {x, b.Input({10, 6, 3}), b.Input({10})},
                  {{"kernel_shape", Ints{3}}, {"strides", Ints{2}}, {"pads", Ints{1, 0}}, {"dilations", Ints{1}}});
  auto one_d = b.Finish({b.Op("Relu", {y})});
  std::vector<ScheduleConfig> cs = split_points(*one_d);
  ASSERT_FALSE(cs.empty());
  EXPECT_GT(DefaultSchedule(*one_d, target).Get("cs", 1), 1) << DefaultSchedule(*one_d, target).ToString();
  CheckConv(*one_d, cs);
  auto two_rows = ConvGraph({1, 4, 4, 45}, 8, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1);
  CheckConv(*two_rows, split_points(*two_rows));
  Builder wide;
  Value* wx = wide.Input({1, 160, 1700});
  Value* wy = wide.Op("Conv", {wx, wide.Input({8, 160, 2})},
                      {{"kernel_shape", Ints{2}}, {"strides", Ints{1}}, {"pads", Ints{0, 0}}, {"dilations", Ints{1}}});
  auto chunked = wide.Finish({wy});
  std::vector<ScheduleConfig> wide_cs = split_points(*chunked);
  ASSERT_FALSE(wide_cs.empty());
  CheckConv(*chunked, {wide_cs.front(), wide_cs.back()});
}

// A long 1-D row whose kMinTasks column splits still leave a task's input
// pack over half of L2 (96 channels x 2 stride phases x 520 columns, 390
// KiB): the default splits it until the pack fits where L2 is 512 KiB (Zen
// 3), not where it is 1 MiB (Zen 4); and since each output-channel block
// streams that pack from L2, the block is 4 channels or more (fewer input
// vectors loaded per FMA), not 2 channels by 4 vectors.
TEST(ConvLoweringTest, DirectPacksStayInHalfOfL2) {
  Builder b;
  Value* x = b.Input({1, 96, 4099});
  Value* y = b.Op("Conv", {x, b.Input({64, 96, 3})},
                  {{"kernel_shape", Ints{3}}, {"strides", Ints{2}}, {"pads", Ints{0, 0}}, {"dilations", Ints{1}}});
  auto g = b.Finish({y});
  absl::StatusOr<CpuTarget> zen3 = CpuTarget::Named("znver3"), zen4 = CpuTarget::Named("znver4");
  ASSERT_TRUE(zen3.ok() && zen4.ok());
  const ScheduleConfig small_l2 = DefaultSchedule(*g, *zen3), big_l2 = DefaultSchedule(*g, *zen4);
  EXPECT_EQ(small_l2.Get("cs", 1), 8) << small_l2.ToString();
  EXPECT_GE(small_l2.Get("kb", 1), 4) << small_l2.ToString();
  EXPECT_EQ(big_l2.Get("cs", 1), 4) << big_l2.ToString();
  for (const ScheduleConfig& c : EnumerateSchedules(*g, *zen3)) {
    EXPECT_LE(c.Get("cs", 1), 8) << c.ToString();
  }
}

TEST(ConvLoweringTest, EpilogueBiasRelu) {
  Builder b;
  Value* x = b.Input({1, 8, 14, 14});
  Value* w = b.Input({16, 8, 3, 3});
  Value* bias = b.Input({16});
  Value* c = b.Op("Conv", {x, w, bias}, ConvAttrs({3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}));
  CheckConv(*b.Finish({b.Op("Relu", {c})}));
}

// The epilogue takes the accumulator: at every point of every variant the
// output is stored once per element and never read back (a masked store
// followed by a load of the same lanes stalls store forwarding).
TEST(ConvLoweringTest, EpilogueNeverReloadsTheOutput) {
  for (Ints kernel : {Ints{3, 3}, Ints{1, 1}}) {
    for (int64_t group : {int64_t{1}, int64_t{8}}) {
      Builder b;
      Value* x = b.Input({1, 8, 14, 14});
      Value* w = b.Input({8, 8 / group, kernel[0], kernel[1]});
      Ints pads = kernel[0] == 3 ? Ints{1, 1, 1, 1} : Ints{0, 0, 0, 0};
      Value* c = b.Op("Conv", {x, w}, ConvAttrs(kernel, {1, 1}, pads, {1, 1}, group));
      auto g = b.Finish({b.Op("Mul", {c, b.Op("Sigmoid", {c})})});
      const loop_ir::WorkloadLowering* l = loop_ir::FindLowering(*g);
      ASSERT_NE(l, nullptr);
      for (const ScheduleConfig& config : EnumerateSchedules(*g, CpuTarget::Host())) {
        auto f = l->lower(*g, config, CpuTarget::Host());
        ASSERT_TRUE(f.ok()) << f.status();
        std::string text = loop_ir::Print(*f);
        EXPECT_EQ(text.find("= out0["), std::string::npos) << config.ToString() << "\n" << text;
        EXPECT_EQ(text.find("(out0["), std::string::npos) << config.ToString() << "\n" << text;
      }
    }
  }
}

TEST(ConvLoweringTest, EpilogueClipAndHardSwish) {
  Builder b;
  Value* x = b.Input({1, 6, 9, 11});
  Value* w = b.Input({12, 6, 3, 3});
  Value* c = b.Op("Conv", {x, w}, ConvAttrs({3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}));
  Value* clip = b.Op("Clip", {c}, {{"min", 0.0f}, {"max", 0.3f}});
  Value* hs = b.Op("HardSwish", {c});
  CheckConv(*b.Finish({clip, hs}));
}

TEST(ConvLoweringTest, EpilogueResidualAddReluAndChannelScale) {
  Builder b;
  Value* x = b.Input({1, 8, 10, 10});
  Value* w = b.Input({8, 8, 3, 3});
  Value* bias = b.Input({8});
  Value* residual = b.Input({1, 8, 10, 10});
  Value* scale = b.Input({8, 1, 1});
  Value* c = b.Op("Conv", {x, w, bias}, ConvAttrs({3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}));
  Value* s = b.Op("Mul", {c, scale});
  Value* y = b.Op("Relu", {b.Op("Add", {s, residual})});
  CheckConv(*b.Finish({y}));
}

TEST(ConvLoweringTest, ConvValueAlsoAnOutput) {
  Builder b;
  Value* x = b.Input({1, 4, 6, 6});
  Value* w = b.Input({4, 4, 1, 1});
  Value* c = b.Op("Conv", {x, w}, ConvAttrs({1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}));
  CheckConv(*b.Finish({b.Op("Relu", {c}), c}));
}

TEST(ConvLoweringTest, SpaceAndValidation) {
  auto g = ConvGraph({1, 64, 56, 56}, 64, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1);
  CpuTarget target = CpuTarget::Host();
  std::vector<ScheduleConfig> space = EnumerateSchedules(*g, target);
  EXPECT_GE(space.size(), 4u);
  ScheduleConfig def = DefaultSchedule(*g, target);
  EXPECT_NE(std::find(space.begin(), space.end(), def), space.end()) << def.ToString();
  for (const ScheduleConfig& c : space) EXPECT_TRUE(ValidateSchedule(*g, c, target).ok()) << c.ToString();
  ScheduleConfig bad = def;
  bad.Set("kb", 3);  // does not divide 64
  EXPECT_EQ(ValidateSchedule(*g, bad, target).code(), absl::StatusCode::kInvalidArgument);
  bad = def;
  bad.Set("mr", 4);
  EXPECT_EQ(ValidateSchedule(*g, bad, target).code(), absl::StatusCode::kInvalidArgument);
}

// The pointwise variant (1x1, stride 1, no pads) over flattened pixels: odd
// pixel counts leave a masked tail block; rows=2 leaves a task with one block.
// The plane variant at every point of its space: strides (incl. unequal),
// asymmetric pads, dilation, 5x5 windows, two images, rows (channels per
// task) dividing the channels; the default of a depthwise conv over rows
// this narrow is a dw=1 point.
TEST(ConvLoweringTest, DepthwisePlaneVariantEveryPoint) {
  CpuTarget target = CpuTarget::Host();
  struct Case {
    Ints x, kernel, strides, pads, dil;
  };
  for (const Case& c : std::vector<Case>{{{1, 8, 10, 18}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}},
                                         {{2, 4, 11, 13}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}},
                                         {{1, 6, 7, 7}, {5, 5}, {1, 1}, {2, 2, 2, 2}, {1, 1}},
                                         {{1, 4, 9, 12}, {3, 3}, {2, 1}, {0, 1, 2, 1}, {1, 1}},
                                         {{1, 2, 13, 15}, {3, 3}, {1, 1}, {2, 2, 2, 2}, {2, 2}},
                                         {{1, 3, 6, 20}, {3, 5}, {3, 2}, {1, 2, 1, 2}, {1, 1}}}) {
    auto g = ConvGraph(c.x, c.x[1], c.kernel, c.strides, c.pads, c.dil, c.x[1]);
    std::vector<ScheduleConfig> dw = PlanePoints(*g, target);
    ASSERT_FALSE(dw.empty()) << g->ToText();
    // The 7x7 map takes the channel vectors on 16-lane targets (DepthwiseChannelsPay).
    const int64_t want = target.FloatLanes() == 16 && c.x[2] == 7 ? 3 : 1;
    EXPECT_EQ(DefaultSchedule(*g, target).Get("dw", 0), want) << g->ToText();
    CheckConv(*g, dw);
  }
  // Channel multipliers (two outputs per input channel) keep the row variant.
  auto mult = ConvGraph({1, 4, 11, 11}, 8, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 4);
  EXPECT_TRUE(PlanePoints(*mult, target).empty());
  ScheduleConfig bad = DefaultSchedule(*ConvGraph({1, 8, 10, 18}, 8, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 8), target);
  bad.Set("rows", 3);  // does not divide 8 channels
  EXPECT_EQ(ValidateSchedule(*ConvGraph({1, 8, 10, 18}, 8, {3, 3},
                                        {1, 1}, {1, 1, 1, 1}, {1, 1}, 8), bad, target).code(),
               absl::StatusCode::kInvalidArgument);
}

// The row variant (dw=2) reads the input in place: no planes; a row's
// blocks that reach into the padding are peeled at constant columns, those
// between loop; the row's last columns run as whole vectors and one
// narrower vector. Every row point against the interpreter: strides 1 and 2
// (unequal too), asymmetric pads, dilation, 5x5 windows, two images, bias
// and an epilogue; a channel multiplier has no row points. The default takes
// it on rows of 4 vectors or more (stride 1: blocks of 4 vectors; stride 2,
// windows of 3 columns under a cheap epilogue: of 1), the plane variant on
// narrower rows, wider stride-2 windows and stride 2 under a sigmoid.
TEST(ConvLoweringTest, DepthwiseRowVariantReadsTheInputInPlace) {
  const CpuTarget target = CpuTarget::Host();
  const int64_t lanes = target.FloatLanes();
  auto rows_points = [&](const Graph& g) {
    std::vector<ScheduleConfig> out;
    for (const ScheduleConfig& c : EnumerateSchedules(g, target)) {
      if (c.Get("dw", 0) == 2) out.push_back(c);
    }
    return out;
  };
  // 5 vectors and 3 columns a row, blocks of 2 vectors: block 0 peeled (left
  // pad), block 1 looped, a block of 1 vector then one of 3 lanes at the end.
  const int64_t ow = 5 * lanes + 3;
  auto g = ConvGraph({2, 6, 5, ow}, 6, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 6, true, "Relu");
  ScheduleConfig c;
  c.Set("dw", 2), c.Set("kb", 1), c.Set("rows", 3), c.Set("ur", 2), c.Set("vw", lanes);
  ASSERT_TRUE(ValidateSchedule(*g, c, target).ok()) << ValidateSchedule(*g, c, target);
  auto f = LowerWorkload(*g, c, target);
  ASSERT_TRUE(f.ok()) << f.status();
  const std::string text = loop_ir::Print(*f);
  EXPECT_EQ(text.find("allocate xp"), std::string::npos) << text;
  EXPECT_NE(text.find("allocate acc_l0"), std::string::npos) << text;
  EXPECT_NE(text.find("for (owo_, 0, 1)"), std::string::npos) << text;
  EXPECT_NE(text.find("allocate acc_t: f32[" + std::to_string(lanes) + "]"), std::string::npos) << text;
  EXPECT_NE(text.find("allocate acc_e: f32[3]"), std::string::npos) << text;
  CheckConv(*g, {c});
  struct Case {
    Ints x, kernel, strides, pads, dil;
  };
  for (const Case& k : std::vector<Case>{{{1, 4, 6, 3 * lanes + 5}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}},
                                         {{1, 3, 7, 2 * lanes + 1}, {5, 5}, {1, 1}, {2, 2, 2, 2}, {1, 1}},
                                         {{2, 2, 9, 2 * lanes}, {3, 3}, {2, 1}, {0, 1, 2, 1}, {1, 1}},
                                         {{1, 2, 8, 2 * lanes + 3}, {3, 3}, {1, 2}, {1, 0, 1, 2}, {2, 2}}}) {
    auto gk = ConvGraph(k.x, k.x[1], k.kernel, k.strides, k.pads, k.dil, k.x[1]);
    std::vector<ScheduleConfig> points = rows_points(*gk);
    ASSERT_FALSE(points.empty()) << gk->ToText();
    CheckConv(*gk, points);
  }
  auto plain = ConvGraph({1, 2, 4, 3 * lanes}, 2, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2, false);
  CheckConv(*plain, rows_points(*plain));
  auto mult = ConvGraph({1, 4, 11, 3 * lanes}, 8, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 4);
  EXPECT_TRUE(rows_points(*mult).empty());
  auto wide1 = ConvGraph({1, 16, 12, 4 * lanes}, 16, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 16);
  ScheduleConfig d1 = DefaultSchedule(*wide1, target);
  EXPECT_EQ(d1.Get("dw", 0), 2) << d1.ToString();
  EXPECT_EQ(d1.Get("ur", 0), 4) << d1.ToString();
  // At stride 2 (on AVX-512: AVX2 takes the direct variant there, see
  // DepthwiseDirectDefaultAtStride2).
  absl::StatusOr<CpuTarget> zen4 = CpuTarget::Named("znver4");
  ASSERT_TRUE(zen4.ok());
  auto wide2 = ConvGraph({1, 16, 12, 128}, 16, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 16);
  ScheduleConfig d2 = DefaultSchedule(*wide2, *zen4);
  EXPECT_EQ(d2.Get("dw", 0), 2) << d2.ToString();
  EXPECT_EQ(d2.Get("ur", 0), 1) << d2.ToString();
  // On 16 lanes: rows of 32 columns or more at stride 2 (2.3 vectors:
  // Xception's onto 38), of 48 or more at stride 1 under 3x3 (three
  // vectors), of 4 vectors under 5x5; planes below.
  absl::StatusOr<CpuTarget> zen5 = CpuTarget::Named("znver5");
  ASSERT_TRUE(zen5.ok());
  for (const auto& [width, kernel, stride, want] : std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>>{
           {74, 3, 2, 2}, {56, 3, 2, 1}, {56, 3, 1, 2}, {40, 3, 1, 1}, {56, 5, 1, 1}}) {
    const int64_t p = kernel / 2;
    auto g = ConvGraph({1, 16, 12, width}, 16, {kernel, kernel}, {stride, stride}, {p, p, p, p}, {1, 1}, 16, true,
                       "Relu");
    const ScheduleConfig d = DefaultSchedule(*g, *zen5);
    EXPECT_EQ(d.Get("dw", 0), want) << kernel << "x" << kernel << " stride " << stride << " over " << width
                                    << " columns: " << d.ToString();
  }
  auto relu2 = ConvGraph({1, 16, 12, 128}, 16, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 16, true, "Relu");
  EXPECT_EQ(DefaultSchedule(*relu2, *zen4).Get("dw", 0), 2);
  auto sigmoid2 = ConvGraph({1, 16, 12, 128}, 16, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 16, true, "Sigmoid");
  EXPECT_EQ(DefaultSchedule(*sigmoid2, *zen4).Get("dw", 0), 1);
  auto sigmoid1 = ConvGraph({1, 16, 12, 4 * lanes}, 16, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 16, true, "Sigmoid");
  EXPECT_EQ(DefaultSchedule(*sigmoid1, target).Get("dw", 0), 2);
  auto narrow = ConvGraph({1, 16, 14, 3 * lanes + 4}, 16, {5, 5}, {1, 1}, {2, 2, 2, 2}, {1, 1}, 16);
  EXPECT_EQ(DefaultSchedule(*narrow, target).Get("dw", 0), 1);
  auto wide5 = ConvGraph({1, 16, 12, 128}, 16, {5, 5}, {2, 2}, {2, 2, 2, 2}, {1, 1}, 16);
  EXPECT_EQ(DefaultSchedule(*wide5, *zen4).Get("dw", 0), 1);
}

// On AVX2 a stride-2 depthwise conv onto rows of 28 columns or more
// defaults to the direct variant (its input rows staged and de-interleaved
// once per task); onto narrower rows, to the planes. Its points match the
// interpreter.
TEST(ConvLoweringTest, DepthwiseDirectDefaultAtStride2) {
  absl::StatusOr<CpuTarget> zen3 = CpuTarget::Named("znver3");
  ASSERT_TRUE(zen3.ok());
  for (Ints kernel : {Ints{3, 3}, Ints{5, 5}}) {
    const int64_t p = kernel[0] / 2;
    auto onto28 = ConvGraph({1, 8, 56, 56}, 8, kernel, {2, 2}, {p, p, p, p}, {1, 1}, 8, true, "Relu");
    const ScheduleConfig d = DefaultSchedule(*onto28, *zen3);
    EXPECT_EQ(d.Get("dw", 0), 0) << d.ToString();
    EXPECT_EQ(d.Get("kv", 0), 0) << d.ToString();
    auto onto14 = ConvGraph({1, 8, 28, 28}, 8, kernel, {2, 2}, {p, p, p, p}, {1, 1}, 8, true, "Relu");
    EXPECT_EQ(DefaultSchedule(*onto14, *zen3).Get("dw", 0), 1) << DefaultSchedule(*onto14, *zen3).ToString();
    auto small = ConvGraph({1, 2, 12, 60}, 2, kernel, {2, 2}, {p, p, p, p}, {1, 1}, 2, true, "Relu");
    std::vector<ScheduleConfig> direct;
    for (const ScheduleConfig& c : EnumerateSchedules(*small, CpuTarget::Host())) {
      if (c.Get("dw", 0) == 0 && c.Get("kv", 0) == 0) direct.push_back(c);
    }
    ASSERT_FALSE(direct.empty());
    CheckConv(*small, direct);
  }
}

// The default register block of either depthwise variant: 8 accumulators
// where the window's weights do not stay in the registers (5x5 and 7x7 on
// 16 of them), else 4; in rows, no more vectors than a row has. The plane
// variant's 8 span two rows of a 28x28 map's plane, whose lower row's taps
// read the upper row's vectors again.
TEST(ConvLoweringTest, DepthwiseAccumulatorsFollowTheRegisters) {
  absl::StatusOr<CpuTarget> zen3 = CpuTarget::Named("znver3"), zen4 = CpuTarget::Named("znver4");
  ASSERT_TRUE(zen3.ok() && zen4.ok());
  auto k5 = ConvGraph({1, 16, 28, 28}, 16, {5, 5}, {1, 1}, {2, 2, 2, 2}, {1, 1}, 16, true, "HardSwish");
  const ScheduleConfig avx2 = DefaultSchedule(*k5, *zen3), avx512 = DefaultSchedule(*k5, *zen4);
  EXPECT_EQ(avx2.Get("dw", 0), 1) << avx2.ToString();
  EXPECT_EQ(avx2.Get("ur", 0), 8) << avx2.ToString();
  EXPECT_EQ(avx512.Get("dw", 0), 1) << avx512.ToString();
  EXPECT_EQ(avx512.Get("ur", 0), 4) << avx512.ToString();
  auto k7 = ConvGraph({1, 16, 28, 28}, 16, {7, 7}, {1, 1}, {3, 3, 3, 3}, {1, 1}, 16);
  EXPECT_EQ(DefaultSchedule(*k7, *zen4).Get("ur", 0), 8) << DefaultSchedule(*k7, *zen4).ToString();
  auto k3 = ConvGraph({1, 16, 14, 14}, 16, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 16, true, "Sigmoid");
  const ScheduleConfig k3d = DefaultSchedule(*k3, *zen3);
  EXPECT_EQ(k3d.Get("dw", 0), 1) << k3d.ToString();
  EXPECT_EQ(k3d.Get("ur", 0), 4) << k3d.ToString();
  // Fewer positions computed still come first: on a 7x7 map 8 vectors of 8
  // would compute 128 positions for the 77 a 5x5 window needs.
  auto small = ConvGraph({1, 16, 7, 7}, 16, {5, 5}, {1, 1}, {2, 2, 2, 2}, {1, 1}, 16);
  EXPECT_NE(DefaultSchedule(*small, *zen3).Get("ur", 0), 8) << DefaultSchedule(*small, *zen3).ToString();
  std::vector<ScheduleConfig> eight;
  for (const ScheduleConfig& c : PlanePoints(*k5, CpuTarget::Host())) {
    if (c.Get("ur", 0) == 8) eight.push_back(c);
  }
  ASSERT_FALSE(eight.empty());
  CheckConv(*k5, eight);
  // The row variant: a 56-column row is 7 vectors of 8 lanes, one block;
  // a 112-column row takes blocks of 8 of its 14 (AVX-512: 4 of its 7).
  auto r7 = ConvGraph({1, 8, 56, 56}, 8, {7, 7}, {1, 1}, {3, 3, 3, 3}, {1, 1}, 8);
  const ScheduleConfig r7d = DefaultSchedule(*r7, *zen3);
  EXPECT_EQ(r7d.Get("dw", 0), 2) << r7d.ToString();
  EXPECT_EQ(r7d.Get("ur", 0), 7) << r7d.ToString();
  auto r5 = ConvGraph({1, 8, 8, 112}, 8, {5, 5}, {1, 1}, {2, 2, 2, 2}, {1, 1}, 8);
  const ScheduleConfig r5avx2 = DefaultSchedule(*r5, *zen3), r5avx512 = DefaultSchedule(*r5, *zen4);
  EXPECT_EQ(r5avx2.Get("dw", 0), 2) << r5avx2.ToString();
  EXPECT_EQ(r5avx2.Get("ur", 0), 8) << r5avx2.ToString();
  EXPECT_EQ(r5avx512.Get("dw", 0), 2) << r5avx512.ToString();
  EXPECT_EQ(r5avx512.Get("ur", 0), 4) << r5avx512.ToString();
  std::vector<ScheduleConfig> wide_rows;
  for (const ScheduleConfig& c : EnumerateSchedules(*r5, CpuTarget::Host())) {
    if (c.Get("dw", 0) == 2 && c.Get("ur", 0) > 4) wide_rows.push_back(c);
  }
  // (On a 32-register host a 5x5 window's blocks stay at 4 vectors.)
  if (CpuTarget::Host().NumVectorRegisters() == 16) ASSERT_FALSE(wide_rows.empty());
  if (!wide_rows.empty()) CheckConv(*r5, wide_rows);
}

// Every point of the channel-vector variant (kv=1) in the space.
std::vector<ScheduleConfig> ChannelVectorPoints(const Graph& g, const CpuTarget& target) {
  std::vector<ScheduleConfig> out;
  for (const ScheduleConfig& c : EnumerateSchedules(g, target)) {
    if (c.Get("kv", 0) == 1) out.push_back(c);
  }
  return out;
}

// The channel-vector variant (output channels in the lanes) at every point of
// its space: 1x7 and 7x1 windows with padding on one axis, stride 2 without
// padding, dilation with asymmetric pads, two groups, two images, rows that
// do not divide the output rows, pixel tails of every length, and a bias +
// ReLU epilogue; refused where the output channels do not fill whole vectors.
TEST(ConvLoweringTest, ChannelVectorVariantEveryPoint) {
  CpuTarget target = CpuTarget::Host();
  const int64_t lanes = target.FloatLanes();
  struct Case {
    Ints x;
    int64_t k;
    Ints kernel, strides, pads, dil;
    int64_t group;
  };
  for (const Case& c : std::vector<Case>{{{1, 8, 17, 17}, 2 * lanes, {1, 7}, {1, 1}, {0, 3, 0, 3}, {1, 1}, 1},
                                         {{1, 6, 13, 9}, lanes, {7, 1}, {1, 1}, {3, 0, 3, 0}, {1, 1}, 1},
                                         {{2, 5, 15, 15}, lanes, {3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1},
                                         {{1, 4, 11, 10}, 2 * lanes, {3, 3}, {1, 1}, {2, 1, 1, 2}, {2, 2}, 2}}) {
    auto g = ConvGraph(c.x, c.k, c.kernel, c.strides, c.pads, c.dil, c.group);
    std::vector<ScheduleConfig> kv = ChannelVectorPoints(*g, target);
    ASSERT_FALSE(kv.empty()) << g->ToText();
    CheckConv(*g, kv);
  }
  Builder b;
  Value* x = b.Input({1, 8, 9, 9});
  Value* w = b.Input({lanes, 8, 3, 3});
  Value* bias = b.Input({lanes});
  Value* conv = b.Op("Conv", {x, w, bias}, ConvAttrs({3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}));
  auto relu = b.Finish({b.Op("Relu", {conv})});
  CheckConv(*relu, ChannelVectorPoints(*relu, target));
  // Output channels that do not fill a vector: no kv points, and kv=1 is refused.
  auto narrow = ConvGraph({1, 8, 9, 9}, lanes / 2, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1);
  EXPECT_TRUE(ChannelVectorPoints(*narrow, target).empty());
  ScheduleConfig bad = DefaultSchedule(*narrow, target);
  bad.Set("kv", 1);
  EXPECT_EQ(ValidateSchedule(*narrow, bad, target).code(), absl::StatusCode::kInvalidArgument);
}

TEST(ConvLoweringTest, DepthwisePlaneVariantEpilogue) {
  CpuTarget target = CpuTarget::Host();
  Builder b;
  Value* x = b.Input({1, 6, 9, 9});
  Value* w = b.Input({6, 1, 3, 3});
  Value* bias = b.Input({6});
  Value* c = b.Op("Conv", {x, w, bias}, ConvAttrs({3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 6));
  Value* clip = b.Op("Clip", {c}, {{"min", 0.0f}, {"max", 0.3f}});
  Value* hs = b.Op("HardSwish", {c});
  auto g = b.Finish({clip, hs});
  CheckConv(*g, PlanePoints(*g, target));
}

// The channel-vector variant (dw=3) at every point of its space: channel
// counts with and without a tail block (fewer channels than lanes among
// them), strides (incl. unequal), asymmetric pads, dilation, 5x5 and 3x5
// windows, two images, maps whose pixels fill no whole vector; epilogues
// with two outputs and a residual (each pixel's stores stay a transpose
// group only with one output).
TEST(ConvLoweringTest, DepthwiseChannelVariantEveryPoint) {
  CpuTarget target = CpuTarget::Host();
  auto points = [&](const Graph& g) {
    std::vector<ScheduleConfig> out;
    for (const ScheduleConfig& c : EnumerateSchedules(g, target)) {
      if (c.Get("dw", 0) == 3) out.push_back(c);
    }
    return out;
  };
  const int64_t lanes = target.FloatLanes();
  struct Case {
    Ints x, kernel, strides, pads, dil;
  };
  for (const Case& c : std::vector<Case>{{{1, 2 * lanes, 7, 7}, {5, 5}, {1, 1}, {2, 2, 2, 2}, {1, 1}},
                                         {{2, lanes + 3, 9, 10}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}},
                                         {{1, 5, 6, 6}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}},
                                         {{1, 3 * lanes, 14, 14}, {3, 3}, {2, 1}, {0, 1, 2, 1}, {1, 1}},
                                         {{1, lanes, 13, 11}, {3, 3}, {1, 1}, {2, 2, 2, 2}, {2, 2}},
                                         {{1, 2 * lanes - 1, 6, 20}, {3, 5}, {3, 2}, {1, 2, 1, 2}, {1, 1}}}) {
    auto g = ConvGraph(c.x, c.x[1], c.kernel, c.strides, c.pads, c.dil, c.x[1]);
    std::vector<ScheduleConfig> dw = points(*g);
    ASSERT_FALSE(dw.empty()) << g->ToText();
    CheckConv(*g, dw);
  }
  {
    Builder b;
    Value* x = b.Input({1, lanes + 2, 9, 9});
    Value* w = b.Input({lanes + 2, 1, 3, 3});
    Value* bias = b.Input({lanes + 2});
    Value* c = b.Op("Conv", {x, w, bias}, ConvAttrs({3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, lanes + 2));
    Value* clip = b.Op("Clip", {c}, {{"min", 0.0f}, {"max", 0.3f}});
    Value* hs = b.Op("HardSwish", {c});
    auto g = b.Finish({clip, hs});
    CheckConv(*g, points(*g));
  }
  {
    Builder b;
    Value* x = b.Input({1, 2 * lanes, 7, 7});
    Value* w = b.Input({2 * lanes, 1, 3, 3});
    Value* r = b.Input({1, 2 * lanes, 7, 7});
    Value* c = b.Op("Conv", {x, w}, ConvAttrs({3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2 * lanes));
    Value* relu = b.Op("Relu", {b.Op("Add", {c, r})});
    auto g = b.Finish({relu});
    CheckConv(*g, points(*g));
  }
}

TEST(ConvLoweringTest, PointwiseVariantOddSizes) {
  CpuTarget target = CpuTarget::Host();
  for (const Ints& x : {Ints{2, 6, 5, 7}, Ints{1, 5, 3, 3}, Ints{1, 4, 13, 11}, Ints{1, 3, 1, 1}}) {
    auto g = ConvGraph(x, 12, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1);
    std::vector<ScheduleConfig> pw = PointwisePoints(*g, target);
    ASSERT_FALSE(pw.empty());
    EXPECT_EQ(DefaultSchedule(*g, target).Get("pw", 0), 1);
    CheckConv(*g, pw);
  }
  auto grouped = ConvGraph({1, 6, 9, 9}, 4, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 2, /*bias=*/false);
  CheckConv(*grouped, PointwisePoints(*grouped, target));
}

// Maps of 1024 pixels or more: tasks whose channel blocks reuse their input
// pack it once (xs), at every point of the space (last tasks of fewer
// blocks than their share, split channel blocks, two images, two groups).
TEST(ConvLoweringTest, PointwiseVariantPacksLargeMapsInput) {
  CpuTarget target = CpuTarget::Host();
  auto g = ConvGraph({2, 6, 32, 37}, 32, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 2);
  std::vector<ScheduleConfig> pw = PointwisePoints(*g, target);
  ASSERT_FALSE(pw.empty());
  int packed = 0;
  for (const ScheduleConfig& c : pw) {
    auto f = loop_ir::FindLowering(*g)->lower(*g, c, target);
    ASSERT_TRUE(f.ok()) << f.status();
    if (loop_ir::Print(*f).find("allocate xs:") != std::string::npos) ++packed;
  }
  EXPECT_GT(packed, 0);
  EXPECT_LT(packed, static_cast<int>(pw.size()));  // too few channel blocks per task: in place
  CheckConv(*g, pw);
}

// Tasks that run reduction chunks (kc) pack their input whatever the map, so
// that each chunk's rows are contiguous in L1 (PointwisePacksInput): 512 ->
// 32 on 10x10, every chunked point of one pixel block per task and 4 channel
// blocks per task or more packs, no point without chunks does (100 pixels),
// and every chunked point matches the interpreter.
TEST(ConvLoweringTest, PointwiseChunkedTasksPackTheirInput) {
  CpuTarget target = HostWithL2AtMost1MiB();
  auto g = ConvGraph({1, 512, 10, 10}, 32, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1);
  std::vector<ScheduleConfig> chunked;
  int packed = 0;
  for (const ScheduleConfig& c : PointwisePoints(*g, target)) {
    auto f = loop_ir::FindLowering(*g)->lower(*g, c, target);
    ASSERT_TRUE(f.ok()) << f.status();
    const bool packs = loop_ir::Print(*f).find("allocate xs:") != std::string::npos;
    const int64_t per_task = (32 / c.Get("kb", 1) + c.Get("ks", 1) - 1) / c.Get("ks", 1);
    if (c.Get("kc", 0) == 0) {
      EXPECT_FALSE(packs) << c.ToString();
      continue;
    }
    chunked.push_back(c);
    // A block wider than the map (16 x 7 pixels on AVX-512) leaves no full
    // block to run in chunks: the map is one tail, read in place.
    const bool full_block = c.Get("vw", 1) * c.Get("ur", 1) <= 100;
    if (c.Get("rows", 1) == 1 && per_task >= 4 && full_block) EXPECT_TRUE(packs) << c.ToString();
    packed += packs;
  }
  EXPECT_GT(packed, 0);
  CheckConv(*g, chunked);
}

// The pointwise default blocks 8 output channels over 128 input channels
// or more (their weights stream from L2), 4 over fewer; 16 accumulators,
// or on a 2 MiB L2 24 over 128 input channels or more whose input stays in
// half of it (PointwiseAccumulators): not over 288 channels of 35x35, nor
// on 8x8, where blocks of 3 vectors leave a quarter of the map.
TEST(ConvLoweringTest, PointwiseDefaultBlockFollowsTheReduction) {
  for (const char* cpu : {"znver4", "sapphirerapids"}) {
    absl::StatusOr<CpuTarget> target = CpuTarget::Named(cpu);
    ASSERT_TRUE(target.ok()) << target.status();
    const bool spr = std::string(cpu) == "sapphirerapids";
    for (const auto& [cin, kb] : std::vector<std::pair<int64_t, int64_t>>{{256, 8}, {128, 8}, {32, 4}, {64, 4}}) {
      auto g = ConvGraph({1, cin, 14, 14}, 64, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1);
      ScheduleConfig d = DefaultSchedule(*g, *target);
      EXPECT_EQ(d.Get("pw", 0), 1) << cpu << " " << cin;
      EXPECT_EQ(d.Get("kb", 1), kb) << cpu << " " << cin << ": " << d.ToString();
      EXPECT_EQ(d.Get("kb", 1) * d.Get("ur", 1), spr && cin >= 128 ? 24 : 16) << cpu << " " << cin << ": "
                                                                              << d.ToString();
    }
    for (const auto& [cin, hw] : std::vector<std::pair<int64_t, int64_t>>{{288, 35}, {384, 8}}) {
      auto g = ConvGraph({1, cin, hw, hw}, 64, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1);
      ScheduleConfig d = DefaultSchedule(*g, *target);
      EXPECT_EQ(d.Get("kb", 1) * d.Get("ur", 1), 16) << cpu << " " << cin << " on " << hw << ": " << d.ToString();
    }
  }
  // 8 by 3 matches the interpreter wherever the host's vectors hold 16 floats.
  if (CpuTarget::Host().FloatLanes() < 16) GTEST_SKIP() << "host vectors hold fewer than 16 floats";
  absl::StatusOr<CpuTarget> spr = CpuTarget::Named("sapphirerapids");
  auto g = ConvGraph({1, 256, 7, 7}, 64, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1);
  const ScheduleConfig d = DefaultSchedule(*g, *spr);
  EXPECT_EQ(d.Get("ur", 1), 3) << d.ToString();
  CheckConv(*g, {d});
}

// On a 1 MiB L2 (Zen 5), a pointwise conv whose input stays in L2 and whose
// weights pass from L3 takes 8 output channels by 2 vectors in reduction
// chunks, not 4 by 4 over every pixel block (the 4 by 4 block makes too few
// pixel blocks to chunk, and took the default on that): PoolFormer's 320 ->
// 1280 on 14x14, SqueezeNet's 512 -> 1000 on 13x13.
TEST(ConvLoweringTest, PointwiseOverL3WeightsChunksEightChannelsByTwoVectors) {
  absl::StatusOr<CpuTarget> target = CpuTarget::Named("znver5");
  ASSERT_TRUE(target.ok()) << target.status();
  for (const auto& [cin, k, hw] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{320, 1280, 14}, {512, 1000, 13}}) {
    auto g = ConvGraph({1, cin, hw, hw}, k, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1);
    const ScheduleConfig d = DefaultSchedule(*g, *target);
    EXPECT_EQ(d.Get("pw", 0), 1) << d.ToString();
    EXPECT_EQ(d.Get("kb", 1), 8) << cin << " -> " << k << ": " << d.ToString();
    EXPECT_EQ(d.Get("ur", 1), 2) << cin << " -> " << k << ": " << d.ToString();
    EXPECT_NE(d.Get("kc", 0), 0) << cin << " -> " << k << ": " << d.ToString();
  }
}

// A pointwise default's register block lies within the map, its leftover
// one vector at most (which joins it), where any block does: on 5x5 (25
// pixels) one vector of 16 (its 9 leftover pixels join it as a second), not
// two, which leave no full block and run the map as passes of one vector
// each over all the weights; on 7x7 three vectors, one pixel left.
TEST(ConvLoweringTest, PointwiseDefaultBlockLiesWithinTheMap) {
  for (const char* cpu : {"znver5", "sapphirerapids"}) {
    absl::StatusOr<CpuTarget> target = CpuTarget::Named(cpu);
    ASSERT_TRUE(target.ok()) << target.status();
    for (const auto& [cin, k, hw] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{720, 240, 5}, {96, 576, 7}}) {
      auto g = ConvGraph({1, cin, hw, hw}, k, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1);
      const ScheduleConfig d = DefaultSchedule(*g, *target);
      EXPECT_EQ(d.Get("pw", 0), 1) << cpu << " " << d.ToString();
      const int64_t block = d.Get("vw", 1) * d.Get("ur", 1);
      EXPECT_LE(block, hw * hw) << cpu << " " << cin << " -> " << k << ": " << d.ToString();
      EXPECT_LE(hw * hw % block, d.Get("vw", 1)) << cpu << " " << cin << " -> " << k << ": " << d.ToString();
    }
  }
}

// Output channels that 4 does not divide (detection heads: 91 classes x 6
// anchors) are blocked by their divisors from 3 to 8: every such point
// matches the interpreter, and the default takes the one nearest its
// preferred block rather than 2 by 8.
TEST(ConvLoweringTest, PointwiseOddChannelBlocks) {
  CpuTarget target = CpuTarget::Host();
  for (const auto& [cin, k] : std::vector<std::pair<int64_t, int64_t>>{{16, 21}, {160, 42}}) {
    auto g = ConvGraph({1, cin, 5, 7}, k, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1);
    std::vector<ScheduleConfig> odd;
    for (const ScheduleConfig& c : PointwisePoints(*g, target)) {
      if (c.Get("kb", 1) % 2 == 1 && c.Get("kb", 1) > 1) odd.push_back(c);
    }
    ASSERT_FALSE(odd.empty()) << k;
    CheckConv(*g, odd);
    const int64_t kb = DefaultSchedule(*g, target).Get("kb", 1);
    EXPECT_EQ(k % kb, 0);
    EXPECT_GE(kb, 3) << cin << " -> " << k << ": " << DefaultSchedule(*g, target).ToString();
  }
}

// The direct variant takes the same odd channel blocks: a 3x3 conv onto 21
// or 91 channels (RetinaNet's 819 class logits are 91 x 9) shares each input
// load among 7 of them by default, not 1.
TEST(ConvLoweringTest, DirectOddChannelBlocks) {
  CpuTarget target = CpuTarget::Host();
  for (const auto& [cin, k, hw] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{16, 21, 9}, {24, 91, 4}}) {
    auto g = ConvGraph({1, cin, hw, hw}, k, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1);
    std::vector<ScheduleConfig> odd;
    for (const ScheduleConfig& c : EnumerateSchedules(*g, target)) {
      if (c.Get("pw", 0) == 0 && c.Get("kv", 0) == 0 && c.Get("kb", 1) == 7) odd.push_back(c);
    }
    ASSERT_FALSE(odd.empty()) << k;
    CheckConv(*g, odd);
    EXPECT_EQ(DefaultSchedule(*g, target).Get("kb", 1), 7) << DefaultSchedule(*g, target).ToString();
  }
}

// The pixels whole vector blocks leave: full vectors, then the last few in
// the last block or the narrowest vector that holds them, ending at the last
// pixel and storing only the pixels it adds. No multiply-add is lane-masked (that would keep
// the accumulators in memory) unless the map is narrower than the vector.
TEST(ConvLoweringTest, PointwiseVariantTailNeedsNoLaneMask) {
  CpuTarget target = HostWithL2AtMost1MiB();
  if (target.FloatLanes() < 16) GTEST_SKIP() << "host vectors hold fewer than 16 floats";
  const loop_ir::WorkloadLowering* l = nullptr;
  for (int64_t hw : {7, 10, 3}) {  // 49 pixels: 3 vectors + 1; 100: 6 + 4; 9: narrower than a vector
    auto g = ConvGraph({1, 16, hw, hw}, 32, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1);
    l = loop_ir::FindLowering(*g);
    ASSERT_NE(l, nullptr);
    for (int64_t ur : {1, 2}) {
      ScheduleConfig c;
      for (const auto& [k, v] : std::map<std::string, int64_t>{{"pw", 1}, {"vw", 16}, {"ur", ur}, {"kb", 4}}) {
        c.Set(k, v);
      }
      if (!ValidateSchedule(*g, c, target).ok()) continue;
      auto f = l->lower(*g, c, target);
      ASSERT_TRUE(f.ok()) << f.status();
      std::string text = loop_ir::Print(*f);
      SCOPED_TRACE(absl::StrCat(hw, "x", hw, " ", c.ToString(), "\n", text));
      const int64_t np = hw * hw, left = np % 16;
      const bool masked = hw == 3;
      EXPECT_EQ(text.find(absl::StrCat("< ", np, ")")) != std::string::npos, masked);
      // Pixels past the full blocks join the last one (acc_m: a vector
      // ending at the last pixel, PointwiseLastVectorJoinsTheLastBlock) or,
      // where they cannot, are one narrower vector (acc_left).
      if (!masked && text.find("acc_m") == std::string::npos) {
        int64_t lw = 1;
        while (lw < left) lw *= 2;
        EXPECT_NE(text.find("acc_left"), std::string::npos);
        EXPECT_NE(text.find(absl::StrCat("vectorized for (v_, 0, ", lw, ")")), std::string::npos);
        EXPECT_EQ(text.find(absl::StrCat(">= ", np - left, ")")) != std::string::npos, lw > left);
      }
      CheckConv(*g, {c});
    }
  }
}

// Up to 4 pixels left after the whole vectors, over at least two vectors of
// input channels (or, in half vectors, eight, or two for one pixel), are dot products: the columns packed once per task, the
// weight rows read as vectors, the lanes summed (a 7x7 map's 49th pixel no
// longer costs a third of the map). Every pointwise point matches the
// interpreter: epilogues with flat and row/column indices, groups, 1-D, a
// map split into pixel chunks (the pack in the last chunk only), no bias.
TEST(ConvLoweringTest, PointwiseVariantLastPixelsAsDotProducts) {
  CpuTarget target = CpuTarget::Host();
  if (target.FloatLanes() < 16) GTEST_SKIP() << "host vectors hold fewer than 16 floats";
  auto has_dot = [&](const Graph& g) {
    auto f = loop_ir::FindLowering(g)->lower(g, DefaultSchedule(g, target), target);
    EXPECT_TRUE(f.ok()) << f.status();
    return f.ok() && loop_ir::Print(*f).find("acc_dot") != std::string::npos;
  };
  for (const Ints& r : {Ints{1, 24, 7, 7}, Ints{1, 1, 1, 7}}) {
    Builder b;
    Value* x = b.Input({1, 32, 7, 7});
    Value* y = b.Op("Conv", {x, b.Input({24, 32, 1, 1}), b.Input({24})}, {});
    auto g = b.Finish({b.Op("Relu", {b.Op("Add", {y, b.Input(r)})})});
    EXPECT_TRUE(has_dot(*g)) << g->ToText();
    CheckConv(*g, PointwisePoints(*g, target));
  }
  auto grouped = ConvGraph({1, 64, 7, 7}, 16, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 2, /*bias=*/false);
  EXPECT_TRUE(has_dot(*grouped));
  CheckConv(*grouped, PointwisePoints(*grouped, target));
  auto chunks = ConvGraph({1, 32, 17, 17}, 8, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1);  // 289 = 18 * 16 + 1
  std::vector<ScheduleConfig> pw = PointwisePoints(*chunks, target);
  ASSERT_TRUE(std::any_of(pw.begin(), pw.end(), [](const ScheduleConfig& c) { return c.Get("rows", 1) < 18; }));
  CheckConv(*chunks, pw);
  Builder b;
  Value* y = b.Op("Conv", {b.Input({1, 48, 51}), b.Input({8, 48, 1})}, {});
  auto one_d = b.Finish({b.Op("Sigmoid", {y})});
  EXPECT_TRUE(has_dot(*one_d));
  CheckConv(*one_d, PointwisePoints(*one_d, target));
  // 16 channels fill one vector only: the left pixel keeps its lane block.
  EXPECT_FALSE(has_dot(*ConvGraph({1, 16, 7, 7}, 8, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1)));
  // 136 channels fill whole half vectors only (Xception's 728): 8-lane dot
  // products, summed in three halving steps. 40 such channels are too few
  // for 4 pixels (the last block takes them), not for one.
  auto half = ConvGraph({1, 136, 10, 10}, 24, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1);
  EXPECT_TRUE(has_dot(*half));
  auto lowered = loop_ir::FindLowering(*half)->lower(*half, DefaultSchedule(*half, target), target);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  const std::string text = loop_ir::Print(*lowered);
  EXPECT_NE(text.find("for (co_, 0, 17)"), std::string::npos) << text;
  EXPECT_EQ(text.find("vectorized for (h_, 0, 8)"), std::string::npos) << text;
  EXPECT_NE(text.find("vectorized for (h_, 0, 4)"), std::string::npos) << text;
  EXPECT_FALSE(has_dot(*ConvGraph({1, 40, 10, 10}, 24, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1)));
  auto one_left = ConvGraph({1, 40, 7, 7}, 24, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1);
  EXPECT_TRUE(has_dot(*one_left));
  CheckConv(*one_left, PointwisePoints(*one_left, target));
  CheckConv(*half, PointwisePoints(*half, target));
}

// Pixels the full blocks leave, one vector's at most, join the last full
// block as one more vector ending at the last pixel (acc_m, in passes over
// the channel block), where alone they would be one vector of kb chains of
// multiply-adds or 3 or more dot products over blocked weights: with and
// without reduction chunks (their running sums in part_merged), under a
// residual epilogue, against the interpreter at every point that merges.
// Two vectors left, or one pixel as a dot product, stay apart.
TEST(ConvLoweringTest, PointwiseLastVectorJoinsTheLastBlock) {
  CpuTarget target = CpuTarget::Host();
  const int64_t lanes = target.FloatLanes();
  auto text_at = [&](const Graph& g, const ScheduleConfig& c) {
    auto f = loop_ir::FindLowering(g)->lower(g, c, target);
    EXPECT_TRUE(f.ok()) << f.status();
    return f.ok() ? loop_ir::Print(*f) : std::string();
  };
  auto point = [&](int64_t kc) {
    ScheduleConfig c;
    for (const auto& [k, v] : std::map<std::string, int64_t>{{"pw", 1}, {"vw", lanes}, {"ur", 3}, {"kb", 4}}) {
      c.Set(k, v);
    }
    if (kc != 0) c.Set("kc", kc);
    return c;
  };
  auto merged_points = [&](const Graph& g) {
    std::vector<ScheduleConfig> out;
    for (const ScheduleConfig& c : PointwisePoints(g, target)) {
      if (text_at(g, c).find("acc_m") != std::string::npos) out.push_back(c);
    }
    return out;
  };
  // Blocked weights over 64 channels in chunks of 16, 10x10: 4 pixels past
  // the full blocks of 3 vectors (8 or 16 lanes).
  auto blocked = BlockedPointwiseGraph({1, 64, 10, 10}, 12, 16);
  for (int64_t kc : {0, 16}) {
    SCOPED_TRACE(point(kc).ToString());
    ASSERT_TRUE(ValidateSchedule(*blocked, point(kc), target).ok());
    const std::string text = text_at(*blocked, point(kc));
    EXPECT_NE(text.find("acc_m"), std::string::npos) << text;
    EXPECT_EQ(text.find("acc_dot"), std::string::npos) << text;
    EXPECT_EQ(text.find("part_merged") != std::string::npos, kc != 0) << text;
  }
  std::vector<ScheduleConfig> points = merged_points(*blocked);
  EXPECT_TRUE(std::any_of(points.begin(), points.end(), [](const ScheduleConfig& c) { return c.Get("kc", 0) != 0; }));
  CheckConv(*blocked, points);
  // A whole vector left (7 rows of one vector: 2 blocks and a vector), a
  // residual added in the epilogue.
  Builder b;
  Value* y = b.Op("Conv", {b.Input({1, 32, 7, lanes}), b.Input({16, 32, 1, 1}), b.Input({16})}, {});
  auto residual = b.Finish({b.Op("Relu", {b.Op("Add", {y, b.Input({1, 16, 7, lanes})})})});
  EXPECT_NE(text_at(*residual, point(0)).find("acc_m"), std::string::npos);
  CheckConv(*residual, merged_points(*residual));
  // Two vectors left; one pixel left as a dot product.
  EXPECT_EQ(text_at(*BlockedPointwiseGraph({1, 64, 11, lanes}, 12, 16), point(0)).find("acc_m"), std::string::npos);
  const std::string one = text_at(*BlockedPointwiseGraph({1, 64, 1, 9 * lanes + 1}, 12, 16), point(0));
  EXPECT_EQ(one.find("acc_m"), std::string::npos);
  EXPECT_NE(one.find("acc_dot"), std::string::npos);
}

// The direct variant's default register block spends few FMA operations
// past a row's end, counted at the width the target's FMA units run
// (NativeVectorBits): where 512-bit operations run as two 256-bit halves,
// 17 columns take 3 vectors of 8 (3 operations), not 2 of 16 (4); where they
// run whole, 2 of 16 (2), not 3 of 8 (3). 56 columns take 16-lane vectors
// that cover 64, not 3 of 16 twice.
TEST(ConvLoweringTest, DirectDefaultWastesFewLanes) {
  CpuTarget target = CpuTarget::Host();
  if (target.FloatLanes() < 16) GTEST_SKIP() << "host vectors hold fewer than 16 floats";
  for (int64_t w : {7, 14, 17, 28, 35, 56, 64, 112}) {
    for (int64_t h : {1, 4, 6}) {
      auto g = ConvGraph({1, 16, h, w}, 32, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1);
      ScheduleConfig d = DefaultSchedule(*g, target);
      ASSERT_EQ(d.Get("pw", 0) + d.Get("dw", 0), 0) << d.ToString();
      EXPECT_GE(d.Get("kb", 1) * d.Get("ur", 1), 8) << "width " << w << ": " << d.ToString();
      // Rows that whole pixel vectors cover with more than a tenth of their
      // lanes idle take the channel-vector variant on maps of 4 rows or
      // more and 36 pixels or more, where every lane holds an output channel.
      const bool ragged = w % 16 != 0 && static_cast<double>(w) < 0.9 * static_cast<double>((w + 15) / 16 * 16);
      EXPECT_EQ(d.Get("kv", 0), ragged && h >= 4 && h * w >= 36 ? 1 : 0)
          << "width " << w << " height " << h << ": " << d.ToString();
      if (d.Get("kv", 0) == 1) continue;
      // Native FMA operations per output row and input channel-tap.
      auto ops = [&](int64_t vw, int64_t ur) {
        const int64_t per_vector = std::max<int64_t>(1, vw * 32 / target.NativeVectorBits());
        return (w + vw * ur - 1) / (vw * ur) * ur * per_vector;
      };
      const int64_t fewest = std::min(ops(8, 1), ops(16, 1));
      EXPECT_LE(static_cast<double>(ops(d.Get("vw", 1), d.Get("ur", 1))), 1.35 * static_cast<double>(fewest))
          << "width " << w << ": " << d.ToString();
    }
  }
}

// The same 17 columns on named targets: Zen 4 halves 512-bit operations
// (8-lane vectors), Zen 5 and Sapphire Rapids do not (16-lane ones).
TEST(ConvLoweringTest, DirectDefaultFollowsTheTargetsFmaWidth) {
  for (const auto& [cpu, bits, vw] : std::vector<std::tuple<std::string, int, int64_t>>{
           {"znver4", 256, 8}, {"znver5", 512, 16}, {"sapphirerapids", 512, 16}, {"x86-64-v3", 256, 8}}) {
    absl::StatusOr<CpuTarget> target = CpuTarget::Named(cpu);
    ASSERT_TRUE(target.ok()) << target.status();
    EXPECT_EQ(target->NativeVectorBits(), bits) << cpu;
    auto g = ConvGraph({1, 16, 1, 17}, 32, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1);
    EXPECT_EQ(DefaultSchedule(*g, *target).Get("vw", 1), vw) << cpu;
  }
}

// Where a task's packs of two channel vectors overflow (512 input channels
// of 3x3 taps), the channel-vector default takes one vector by 12 pixels,
// and 2 by 6 where they fit.
TEST(ConvLoweringTest, ChannelVectorDefaultFitsItsPacks) {
  CpuTarget target = CpuTarget::Host();
  if (target.FloatLanes() < 16) GTEST_SKIP() << "host vectors hold fewer than 16 floats";
  for (const auto& [cin, kb] : std::vector<std::pair<int64_t, int64_t>>{{512, 1}, {128, 2}}) {
    auto g = ConvGraph({1, cin, 14, 14}, 64, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1);
    ScheduleConfig d = DefaultSchedule(*g, target);
    EXPECT_EQ(d.Get("kv", 0), 1) << cin << ": " << d.ToString();
    EXPECT_EQ(d.Get("kb", 1), kb) << cin << ": " << d.ToString();
    EXPECT_EQ(d.Get("kb", 1) * d.Get("ur", 1), 12) << cin << ": " << d.ToString();
  }
}

// On 16 registers the channel-vector default's register block holds its
// accumulators, a tap's weight vectors and its broadcast pixels (2 x 6
// needs 20, and LLVM spilled it: DeepSpeech2's 21x11 conv ran 1.5x slower
// than 2 x 4). The block is as wide as the row at most: onto 7 columns, 1 by
// 12 is one block of 7, which fits (groups of 8 channels, one vector).
// Blocked and unblocked weights (a 21x11 window, 3x3 ones, group convs),
// each default matching the interpreter where the host runs it. On 32
// registers the unblocked default stays 2 x 6.
// A direct conv's row of 15 columns in blocks of 8: the first block ends
// inside the row and stores unguarded, only the last one is guarded. For
// AVX2 no masked store is left (the last block's mask is a constant:
// masked_stores.h), and every column is right, against the interpreter.
TEST(ConvLoweringTest, DirectBlocksInsideTheRowStoreUnguarded) {
  const CpuTarget host = CpuTarget::Host();
  if (!host.HasFeature("avx2") || !host.HasFeature("fma")) GTEST_SKIP() << "host lacks avx2/fma";
  absl::StatusOr<CpuTarget> avx2 = CpuTarget::Named("x86-64-v3");
  ASSERT_TRUE(avx2.ok()) << avx2.status();
  std::unique_ptr<Graph> g = ConvGraph({1, 3, 31, 31}, 8, {3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1, true, "Relu");
  ScheduleConfig c;
  for (const auto& [k, v] : std::map<std::string, int64_t>{{"vw", 8}, {"ur", 1}, {"kb", 8}, {"rows", 1}}) c.Set(k, v);
  ASSERT_TRUE(ValidateSchedule(*g, c, *avx2).ok()) << ValidateSchedule(*g, c, *avx2);
  auto f = LowerWorkload(*g, c, *avx2);
  ASSERT_TRUE(f.ok()) << f.status();
  const std::string text = loop_ir::Print(*f);
  EXPECT_NE(text.find("if ((((owo_ + 1) * 8) <= 15)) {"), std::string::npos) << text;
  auto kernel = JitCompile(*g, c, *avx2);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ((*kernel)->llvm_ir().find("call void @llvm.masked.store"), std::string::npos) << (*kernel)->llvm_ir();
  CheckConfigsAgainstInterpreter(*g, {c}, *avx2);
}

// Channel-vector blocks whose weights outgrow half of L2 (512 input
// channels of 3x3 taps by 32 output channels: 576 KiB) run a row's blocks
// chunk by chunk of input channels, the running sums in a row buffer: every
// channel-vector point, blocked weights and packed ones, against the
// interpreter; a smaller conv keeps one pass.
// Reduction chunks (ChannelVectorChunk): 512 channels of 3x3 taps by 16 or
// 32 output channels (288 or 576 KiB of weights, past half of L2) run their chunks
// outermost, the running sums of all the task's rows in racc; 64 channels
// (72 KiB, blocked) run in chunks only where a block of 4 pixels or fewer
// leaves the row other blocks, the sums of one row in racc.
TEST(ConvLoweringTest, ChannelVectorBlocksOverManyChannelsRunInChunks) {
  const CpuTarget target = CpuTarget::Host();
  auto kv_points = [&](const Graph& g) {
    std::vector<ScheduleConfig> kv;
    for (const ScheduleConfig& c : EnumerateSchedules(g, target)) {
      if (c.Get("kv", 0) == 1) kv.push_back(c);
    }
    return kv;
  };
  auto text = [&](const Graph& g, const ScheduleConfig& c) {
    auto f = LowerWorkload(g, c, target);
    EXPECT_TRUE(f.ok()) << f.status();
    return f.ok() ? loop_ir::Print(*f) : std::string();
  };
  auto racc = [](int64_t floats) { return absl::StrCat("allocate racc: f32[", floats, "]"); };
  for (const bool blocked : {true, false}) {
    SCOPED_TRACE(blocked ? "blocked" : "packed");
    std::unique_ptr<Graph> g = blocked ? BlockedConvGraph({1, 512, 5, 6}, 32, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1)
                                       : ConvGraph({1, 512, 5, 6}, 32, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1);
    std::vector<ScheduleConfig> kv = kv_points(*g);
    ASSERT_FALSE(kv.empty());
    int outer = 0;
    for (const ScheduleConfig& c : kv) {
      const int64_t cw = c.Get("kb", 1) * c.Get("vw", 1);
      if (512 * 9 * cw * 4 <= 256 * 1024) continue;
      const std::string t = text(*g, c);
      EXPECT_NE(t.find(racc(c.Get("rows", 1) * 6 * cw)), std::string::npos) << c.ToString();
      EXPECT_LT(t.find("for (ch_"), t.find("for (rr_")) << c.ToString();
      ++outer;
    }
    EXPECT_GT(outer, 0);
    // Sums of 4608 products near 0.25 that cancel to about 0.1: the
    // interpreter's order and the kernel's differ by up to 3e-5.
    codegen_testing::CheckConfigsAgainstInterpreter(
        *g, codegen_testing::RandomFeeds(*g, 7, -0.5f, 0.5f, -1.0f, 1.0f), kv, target, {.atol = 1e-4, .rtol = 1e-4});
  }
  std::unique_ptr<Graph> small = BlockedConvGraph({1, 64, 5, 6}, 32, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1);
  for (const ScheduleConfig& c : kv_points(*small)) {
    const std::string t = text(*small, c);
    const int64_t cw = c.Get("kb", 1) * c.Get("vw", 1);
    if (c.Get("ur", 1) <= 4) {
      EXPECT_NE(t.find(racc(6 * cw)), std::string::npos) << c.ToString();
      EXPECT_LT(t.find("for (rr_"), t.find("for (ch_")) << c.ToString();
    } else {
      EXPECT_EQ(t.find("racc"), std::string::npos) << c.ToString();
    }
  }
  CheckConv(*small, kv_points(*small));
}

// The channel-vector kernel reads its input in place, no row packed: onto
// 16 columns in blocks of 4 pixels, the first block (its window starting in
// the left padding) and the last (ending in the right) run apart, guarded
// at constant columns; the two between run in a loop without guards. Every
// point matches the interpreter, blocked weights too, over two images.
TEST(ConvLoweringTest, ChannelVectorReadsTheInputInPlace) {
  const CpuTarget target = CpuTarget::Host();
  const int64_t lanes = target.FloatLanes();
  std::unique_ptr<Graph> g = ConvGraph({2, 8, 9, 16}, 2 * lanes, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1);
  ScheduleConfig c;
  c.Set("kb", 2), c.Set("kv", 1), c.Set("rows", 9), c.Set("ur", 4), c.Set("vw", lanes);
  ASSERT_TRUE(ValidateSchedule(*g, c, target).ok()) << ValidateSchedule(*g, c, target);
  auto f = LowerWorkload(*g, c, target);
  ASSERT_TRUE(f.ok()) << f.status();
  const std::string text = loop_ir::Print(*f);
  EXPECT_EQ(text.find("allocate xr"), std::string::npos) << text;
  EXPECT_NE(text.find("for (owo_, 0, 2)"), std::string::npos) << text;
  // Each block's taps end in a fence (ChannelVectorRegisters): three blocks.
  size_t fences = 0;
  for (size_t at = text.find(" fence\n"); at != std::string::npos; at = text.find(" fence\n", at + 1)) ++fences;
  EXPECT_EQ(fences, 3u) << text;
  EXPECT_NE(text.find("allocate acc_l0"), std::string::npos) << text;
  EXPECT_NE(text.find("allocate acc_r3"), std::string::npos) << text;
  std::vector<ScheduleConfig> points;
  for (const ScheduleConfig& p : EnumerateSchedules(*g, target)) {
    if (p.Get("kv", 0) == 1) points.push_back(p);
  }
  ASSERT_FALSE(points.empty());
  CheckConv(*g, points);
  std::unique_ptr<Graph> blocked = BlockedConvGraph({2, 16, 9, 16}, 32, {3, 3}, {1, 1}, {1, 2, 1, 0}, {1, 1}, 1);
  CheckConv(*blocked, EnumerateSchedules(*blocked, target));
  // A window of 11 columns, padded by 5 each side, onto 30 columns in
  // blocks of 4: the guarded blocks unroll their taps, so that each tap's
  // guard is constant; the blocks between loop over them.
  std::unique_ptr<Graph> wide = BlockedConvGraph({1, 8, 25, 30}, 32, {21, 11}, {2, 1}, {10, 5, 10, 5}, {1, 1}, 1);
  c.Set("rows", 13);
  ASSERT_TRUE(ValidateSchedule(*wide, c, target).ok()) << ValidateSchedule(*wide, c, target);
  auto wf = LowerWorkload(*wide, c, target);
  ASSERT_TRUE(wf.ok()) << wf.status();
  const std::string wide_text = loop_ir::Print(*wf);
  auto count = [&](const std::string& what) {
    int n = 0;
    for (size_t at = wide_text.find(what); at != std::string::npos; at = wide_text.find(what, at + 1)) ++n;
    return n;
  };
  const int unrolled = count("unrolled for (kw_, 0, 11)");
  EXPECT_EQ(unrolled, 4) << wide_text;  // blocks 0, 1 and 6, and the 2-pixel tail
  EXPECT_EQ(count("for (kw_, 0, 11)") - unrolled, 1) << wide_text;
  CheckConv(*wide, {c});
}

TEST(ConvLoweringTest, ChannelVectorDefaultBlocksFitSixteenRegisters) {
  struct Case {
    std::shared_ptr<Graph> g;
    int64_t ow;
  };
  const std::vector<Case> cases = {
      {BlockedConvGraph({1, 8, 25, 30}, 32, {21, 11}, {2, 1}, {10, 5, 10, 5}, {1, 1}, 1), 30},
      {BlockedConvGraph({1, 16, 28, 28}, 32, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1), 14},
      {ConvGraph({1, 64, 20, 20}, 64, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1), 20},
      {ConvGraph({1, 48, 28, 28}, 48, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 3), 14},
      {ConvGraph({1, 48, 7, 7}, 48, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 6), 7}};
  for (const std::string cpu : {"znver3", "x86-64-v3"}) {
    absl::StatusOr<CpuTarget> target = CpuTarget::Named(cpu);
    ASSERT_TRUE(target.ok()) << target.status();
    ASSERT_EQ(target->NumVectorRegisters(), 16) << cpu;
    int channel_vector = 0;
    for (const Case& c : cases) {
      ScheduleConfig d = DefaultSchedule(*c.g, *target);
      if (d.Get("kv", 0) != 1) continue;
      ++channel_vector;
      const int64_t kb = d.Get("kb", 1), ur = std::min(d.Get("ur", 1), c.ow);
      EXPECT_LE(kb * ur + kb + ur, 16) << cpu << ": " << d.ToString() << "\n" << c.g->ToText();
      if (c.ow == 7) EXPECT_EQ(d.Get("ur", 1), 12) << cpu << ": " << d.ToString();
      if (target->FloatLanes() == CpuTarget::Host().FloatLanes()) CheckConv(*c.g, {d});
    }
    EXPECT_GE(channel_vector, 4) << cpu;
  }
  absl::StatusOr<CpuTarget> zen5 = CpuTarget::Named("znver5");
  ASSERT_TRUE(zen5.ok()) << zen5.status();
  ScheduleConfig d = DefaultSchedule(*ConvGraph({1, 64, 56, 56}, 64, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1), *zen5);
  EXPECT_EQ(d.Get("kv", 0), 1) << d.ToString();
  EXPECT_EQ(d.Get("kb", 0) * 100 + d.Get("ur", 0), 206) << d.ToString();
}

// The channel-vector update runs pixel by pixel, each pixel's broadcast
// feeding every channel vector before the next loads (u_ outside j_ in the
// loop IR): the block holds one broadcast, not ur of them (on Zen 4, 2 x 12
// over a 21x11 window spilled 10 registers a tap the other way round, none so).
TEST(ConvLoweringTest, ChannelVectorUpdateTakesOnePixelAtATime) {
  CpuTarget target = CpuTarget::Host();
  auto g = BlockedConvGraph({1, 8, 25, 30}, 32, {21, 11}, {2, 1}, {10, 5, 10, 5}, {1, 1}, 1);
  ScheduleConfig c;
  c.Set("kb", 2), c.Set("kv", 1), c.Set("rows", 13), c.Set("ur", 4), c.Set("vw", target.FloatLanes());
  ASSERT_TRUE(ValidateSchedule(*g, c, target).ok()) << ValidateSchedule(*g, c, target);
  auto f = loop_ir::FindLowering(*g)->lower(*g, c, target);
  ASSERT_TRUE(f.ok()) << f.status();
  const std::string text = loop_ir::Print(*f);
  const size_t kw = text.find("for (kw_, 0, 11)");
  ASSERT_NE(kw, std::string::npos) << text;
  const size_t u = text.find("unrolled for (u_, 0, 4)", kw), j = text.find("unrolled for (j_, 0, 2)", kw);
  ASSERT_NE(u, std::string::npos) << text;
  EXPECT_LT(u, j) << text.substr(kw, 600);
  CheckConv(*g, {c});
}

// kiln.BlockedConv (weights blocked by 16 output channels at compile time):
// only channel-vector points, each matching the interpreter (which unblocks
// the weights into a Conv's): stride 2 onto 7x7 rows that one register
// block covers, stride 2 without padding over two images, dilation with
// asymmetric pads over two groups of 16, a 7x1 window, no bias, a 3x3 map,
// one row of 19. A point of another variant is refused.
TEST(ConvLoweringTest, BlockedWeightsEveryPoint) {
  CpuTarget target = CpuTarget::Host();
  struct Case {
    Ints x;
    int64_t k;
    Ints kernel, strides, pads, dil;
    int64_t group;
    bool bias;
  };
  for (const Case& c : std::vector<Case>{{{1, 8, 14, 14}, 32, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1, true},
                                         {{2, 5, 15, 15}, 16, {3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1, true},
                                         {{1, 4, 11, 10}, 32, {3, 3}, {1, 1}, {2, 1, 1, 2}, {2, 2}, 2, true},
                                         {{1, 6, 13, 9}, 16, {7, 1}, {1, 1}, {3, 0, 3, 0}, {1, 1}, 1, false},
                                         {{1, 8, 3, 3}, 32, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true},
                                         {{1, 8, 2, 20}, 16, {2, 2}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, true}}) {
    auto g = BlockedConvGraph(c.x, c.k, c.kernel, c.strides, c.pads, c.dil, c.group, c.bias);
    std::vector<ScheduleConfig> space = EnumerateSchedules(*g, target);
    ASSERT_FALSE(space.empty()) << g->ToText();
    for (const ScheduleConfig& p : space) EXPECT_EQ(p.Get("kv", 0), 1) << p.ToString();
    CheckConv(*g, space);
    ScheduleConfig direct;
    direct.Set("vw", 4), direct.Set("ur", 1), direct.Set("kb", 1), direct.Set("rows", 1);
    EXPECT_EQ(ValidateSchedule(*g, direct, target).code(), absl::StatusCode::kInvalidArgument);
  }
}

// Pointwise weights blocked by B output channels in chunks of input channels
// (Wb [C/L, K/B, L, 1, 1, B]; B 4, or 6, 5 or 3 for channels that 4 does not
// divide): only pointwise points, reduction chunks of L or none, channel
// blocks that tile B (1, 2, 4 or 8 for B = 4); each such block with and without
// chunks, and points spread over the space: one chunk of every channel,
// chunks with a 1-, 4- and 6-pixel tail (dot products over the chunks,
// output channels in the lanes), a 7x7 map, a map of 1024 pixels (input
// packed per task).
TEST(ConvLoweringTest, BlockedPointwiseWeightsAcrossTheSpace) {
  CpuTarget target = CpuTarget::Host();
  struct Case {
    Ints x;
    int64_t k, chunk, block = 4;
  };
  for (const Case& c : std::vector<Case>{{{1, 48, 5, 5}, 12, 48},
                                         {{1, 96, 5, 5}, 8, 32},
                                         {{1, 64, 10, 10}, 12, 16},
                                         {{1, 40, 7, 7}, 16, 20},
                                         {{2, 32, 3, 10}, 8, 16},
                                         {{1, 16, 32, 32}, 32, 16},
                                         {{1, 32, 6, 7}, 18, 16, 6},
                                         {{1, 24, 5, 9}, 15, 24, 5},
                                         {{1, 16, 4, 11}, 21, 8, 3}}) {
    auto g = BlockedPointwiseGraph(c.x, c.k, c.chunk, "Relu", c.block);
    std::vector<ScheduleConfig> space = EnumerateSchedules(*g, target);
    ASSERT_FALSE(space.empty()) << g->ToText();
    std::set<int64_t> kbs;
    for (const ScheduleConfig& p : space) {
      EXPECT_EQ(p.Get("pw", 0), 1) << p.ToString();
      EXPECT_TRUE(p.Get("kc", 0) == 0 || p.Get("kc", 0) == c.chunk) << p.ToString();
      kbs.insert(p.Get("kb", 1));
    }
    // Channel blocks that tile the weight blocks: B's divisors and multiples.
    for (int64_t kb : kbs) EXPECT_TRUE(kb % c.block == 0 || c.block % kb == 0) << kb;
    EXPECT_EQ(kbs.count(c.block), 1u);
    std::vector<ScheduleConfig> points = SpreadPoints(*g, target, 8);
    for (int64_t kb : kbs) {
      for (int64_t kc : {int64_t{0}, c.chunk}) {
        auto it = std::find_if(space.begin(), space.end(), [&](const ScheduleConfig& p) {
          return p.Get("kb", 1) == kb && p.Get("kc", 0) == kc;
        });
        if (it != space.end() && std::find(points.begin(), points.end(), *it) == points.end()) points.push_back(*it);
      }
    }
    SCOPED_TRACE(g->ToText());
    CheckConv(*g, points);
    ScheduleConfig other_chunk = DefaultSchedule(*g, target);
    other_chunk.Set("kc", c.x[1] / 2 == c.chunk ? c.x[1] / 4 : c.x[1] / 2);
    EXPECT_EQ(ValidateSchedule(*g, other_chunk, target).code(), absl::StatusCode::kInvalidArgument);
    ScheduleConfig direct;
    direct.Set("vw", 4), direct.Set("ur", 1), direct.Set("kb", 1), direct.Set("rows", 1);
    EXPECT_EQ(ValidateSchedule(*g, direct, target).code(), absl::StatusCode::kInvalidArgument);
  }
}

// The blocked default: the most channel vectors whose weights a task keeps in
// L2, then a register block that covers a 7-pixel row at once (HRNet's
// 512 -> 1024 onto 7x7: 2 vectors by one block of 7), else 4 vectors: by 6
// pixels on Zen, whose spills cost little, by 4 where 6 would spill
// (SpilledBlocksPay: Sapphire Rapids).
TEST(ConvLoweringTest, BlockedDefaultKeepsWeightsInL2) {
  absl::StatusOr<CpuTarget> zen5 = CpuTarget::Named("znver5"), spr = CpuTarget::Named("sapphirerapids");
  ASSERT_TRUE(zen5.ok()) << zen5.status();
  ASSERT_TRUE(spr.ok()) << spr.status();
  auto wide = BlockedConvGraph({1, 512, 14, 14}, 1024, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1);
  auto mid = BlockedConvGraph({1, 256, 28, 28}, 512, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1);
  for (const CpuTarget& target : {*zen5, *spr}) {
    ScheduleConfig d = DefaultSchedule(*wide, target);
    EXPECT_EQ(d.Get("kb", 1), 2) << target.cpu << " " << d.ToString();
    EXPECT_GE(d.Get("ur", 1), 7) << target.cpu << " " << d.ToString();
    d = DefaultSchedule(*mid, target);
    EXPECT_EQ(d.Get("kb", 1), 4) << target.cpu << " " << d.ToString();
    EXPECT_EQ(d.Get("ur", 1), target.cpu == "znver5" ? 6 : 4) << target.cpu << " " << d.ToString();
  }
}

// The depthwise default computes few positions past the map: a 7x7 map with
// a 5x5 window needs 77 (7 rows of 11 padded columns); 16 lanes by 4 would
// compute 128, the default computes 80, in vectors no wider than a row or,
// for such a window, than one native FMA operation.
TEST(ConvLoweringTest, DepthwiseDefaultComputesFewPositions) {
  CpuTarget target = CpuTarget::Host();
  if (target.FloatLanes() < 8) GTEST_SKIP() << "host vectors hold fewer than 8 floats";
  auto g = ConvGraph({1, 32, 7, 7}, 32, {5, 5}, {1, 1}, {2, 2, 2, 2}, {1, 1}, 32);
  ScheduleConfig d = DefaultSchedule(*g, target);
  if (target.FloatLanes() == 16) {
    // 16-lane targets take the channel vectors there: 7 pixels a block, a
    // block of channels a task (DepthwiseChannelsPay).
    EXPECT_EQ(d.ToString(), "dw=3,kb=1,rows=1,ur=7,vw=16");
    CheckConv(*g, {d});
    return;  // the plane variant's defaults below are those of 8-lane targets
  }
  EXPECT_EQ(d.Get("dw", 0), 1) << d.ToString();
  // 80 positions: 8 lanes by 5 twice where 512-bit operations run in
  // halves or vectors hold 8 floats (not 4 lanes by 4 five times: each
  // position's multiply-adds cost twice as much), 16 by 5 where they run
  // whole; a 3x3 window keeps vectors no wider than the row.
  EXPECT_EQ(d.Get("vw", 1), target.NativeVectorBits() == 512 ? 16 : 8) << d.ToString();
  auto small = ConvGraph({1, 32, 7, 7}, 32, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 32);
  EXPECT_EQ(DefaultSchedule(*small, target).Get("vw", 1), 8);
  auto f = loop_ir::FindLowering(*g)->lower(*g, d, target);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_NE(loop_ir::Print(*f).find("allocate yp: f32[80]"), std::string::npos) << loop_ir::Print(*f);
  CheckConv(*g, {d});
  auto wide = ConvGraph({1, 16, 28, 28}, 16, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 16);
  EXPECT_EQ(DefaultSchedule(*wide, target).Get("vw", 1), target.FloatLanes());
}

// On 16-lane targets the depthwise default takes the channel vectors (dw=3)
// onto rows of up to 12 columns under 3x3, and of 16 to 24 under 5x5 or
// wider; not onto 14 columns under 3x3, nor under an epilogue that reads a
// map-sized operand (a residual, read one lane at a time after the output
// transpose). Every default matches the interpreter.
TEST(ConvLoweringTest, DepthwiseChannelVectorsTakeSmallRowsAndWideWindows) {
  for (const char* cpu : {"znver5", "sapphirerapids"}) {
    absl::StatusOr<CpuTarget> target = CpuTarget::Named(cpu);
    ASSERT_TRUE(target.ok()) << target.status();
    auto dw_of = [&](const Graph& g) { return DefaultSchedule(g, *target).Get("dw", 0); };
    for (const auto& [c, hw, kernel, want] : std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>>{
             {32, 8, 3, 3}, {48, 10, 3, 3}, {16, 12, 3, 3}, {32, 14, 3, 1}, {32, 20, 5, 3}, {16, 24, 7, 3}}) {
      auto g = ConvGraph({1, c, hw, hw}, c, {kernel, kernel}, {1, 1}, {kernel / 2, kernel / 2, kernel / 2, kernel / 2},
                         {1, 1}, c);
      EXPECT_EQ(dw_of(*g) == 3, want == 3) << cpu << " " << kernel << "x" << kernel << " over " << c << " on " << hw
                                           << ": " << DefaultSchedule(*g, *target).ToString();
    }
    Builder b;
    Value* x = b.Input({1, 32, 10, 10});
    Value* w = b.Input({32, 1, 3, 3});
    Value* y = b.Op("Conv", {x, w}, ConvAttrs({3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 32));
    auto residual = b.Finish({b.Op("Add", {y, x})});
    EXPECT_NE(dw_of(*residual), 3) << cpu;
  }
  CpuTarget host = CpuTarget::Host();
  auto g = ConvGraph({1, 40, 10, 10}, 40, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 40);
  CheckConv(*g, {DefaultSchedule(*g, host)});
  auto wide = ConvGraph({1, 24, 18, 18}, 24, {5, 5}, {1, 1}, {2, 2, 2, 2}, {1, 1}, 24);
  CheckConv(*wide, {DefaultSchedule(*wide, host)});
}

// A small map has fewer pixel blocks than tasks wanted: the space splits the
// output-channel blocks (ks), uneven splits included, and the default takes
// the fewest splits that make 4 tasks.
TEST(ConvLoweringTest, PointwiseVariantSplitsChannelsOnSmallMaps) {
  CpuTarget target = CpuTarget::Host();
  auto g = ConvGraph({1, 8, 5, 5}, 40, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1);
  std::vector<ScheduleConfig> pw = PointwisePoints(*g, target);
  std::set<int64_t> splits;
  for (const ScheduleConfig& c : pw) splits.insert(c.Get("ks", 1));
  EXPECT_GT(splits.size(), 2u);
  CheckConv(*g, pw);
  ScheduleConfig def = DefaultSchedule(*g, target);
  EXPECT_EQ(def.Get("pw", 0), 1);
  EXPECT_EQ(def.Get("ks", 1), 4) << def.ToString();  // one pixel block of 25: 4 tasks of channel blocks
  ScheduleConfig bad = def;
  bad.Set("ks", 99);
  EXPECT_FALSE(ValidateSchedule(*g, bad, target).ok());
}

// Weights past L2 over an input that fits it, a reduction whose blocks'
// input stays in L1 (256 -> 1024 on 14x14): the default task takes every
// pixel block, so each block of output channels reads its weights once, and
// the tasks split the channels; every such point matches the interpreter,
// tails included. Weights that fit keep a pixel block or two per task.
TEST(ConvLoweringTest, PointwiseWeightsPastL2TakeEveryPixelBlockPerTask) {
  CpuTarget target = HostWithL2AtMost1MiB();
  auto big = ConvGraph({1, 256, 14, 14}, 1024, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1);
  const ScheduleConfig d = DefaultSchedule(*big, target);
  ASSERT_EQ(d.Get("pw", 0), 1) << d.ToString();
  EXPECT_GE(d.Get("rows", 1), 196 / (d.Get("vw", 1) * d.Get("ur", 1))) << d.ToString();
  EXPECT_GT(d.Get("ks", 1), 1) << d.ToString();
  EXPECT_EQ(d.Get("kc", 0), 0) << d.ToString();
  // 78 pixels: 4 blocks of 16 lanes (9 of 8) and a tail.
  auto small = ConvGraph({1, 40, 6, 13}, 36, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1);
  std::vector<ScheduleConfig> every;
  for (const ScheduleConfig& c : PointwisePoints(*small, target)) {
    if (c.Get("rows", 1) > 2) every.push_back(c);
  }
  ASSERT_FALSE(every.empty());
  CheckConv(*small, every);
  EXPECT_LE(DefaultSchedule(*small, target).Get("rows", 1), 2) << DefaultSchedule(*small, target).ToString();
}

// Whether the weights pass L2 is the target's own L2: RegNetX's 368 -> 368
// on 7x7 (529 KiB of weights) takes every pixel block per task on Zen 3's
// 512 KiB L2, and one block per task on the same ISA with 1 MiB (x86-64-v3).
TEST(ConvLoweringTest, PointwiseWeightsPastTheTargetsL2TakeEveryPixelBlock) {
  absl::StatusOr<CpuTarget> zen3 = CpuTarget::Named("znver3"), v3 = CpuTarget::Named("x86-64-v3");
  ASSERT_TRUE(zen3.ok() && v3.ok());
  ASSERT_EQ(zen3->FloatLanes(), v3->FloatLanes());
  ASSERT_LT(zen3->L2Bytes(), 368 * 368 * 4);
  ASSERT_GT(v3->L2Bytes(), 368 * 368 * 4);
  auto g = ConvGraph({1, 368, 7, 7}, 368, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1);
  const ScheduleConfig small_l2 = DefaultSchedule(*g, *zen3), big_l2 = DefaultSchedule(*g, *v3);
  ASSERT_EQ(small_l2.Get("pw", 0), 1) << small_l2.ToString();
  ASSERT_EQ(big_l2.Get("pw", 0), 1) << big_l2.ToString();
  EXPECT_GE(small_l2.Get("rows", 1), 49 / (small_l2.Get("vw", 1) * small_l2.Get("ur", 1))) << small_l2.ToString();
  EXPECT_GT(small_l2.Get("rows", 1), 1) << small_l2.ToString();
  EXPECT_EQ(big_l2.Get("rows", 1), 1) << big_l2.ToString();
}

// Few input channels over a map past L2 (SSDlite's 16 -> 16 on 160x160,
// here 16 -> 16 on 200x200, 2.4 MiB in, as much out): a task takes as many pixel blocks as
// fill 4096 floats of input, leaving 16 tasks, so that each channel plane
// is read and written in runs longer than one block; those points match
// the interpreter, the last task short and the pixel tail masked. 256 input
// channels, or an input within L2 (16 channels of 40x43), keep one block
// per task.
TEST(ConvLoweringTest, PointwiseOverFewChannelsPastL2TakesRunsOfBlocksPerTask) {
  CpuTarget target = CpuTarget::Host();
  ASSERT_LT(2 * target.L2Bytes(), 32 * 200 * 200 * 4);
  auto few = ConvGraph({1, 16, 200, 200}, 16, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1);
  const ScheduleConfig d = DefaultSchedule(*few, target);
  ASSERT_EQ(d.Get("pw", 0), 1) << d.ToString();
  const int64_t bw = d.Get("vw", 1) * d.Get("ur", 1);
  const int64_t want = std::max<int64_t>(1, std::min<int64_t>(4096 / (16 * bw), 200 * 200 / bw / 16));
  ASSERT_GT(want, 2) << d.ToString();
  EXPECT_EQ(d.Get("rows", 1), want) << d.ToString();
  std::vector<ScheduleConfig> runs;
  for (const ScheduleConfig& c : PointwisePoints(*few, target)) {
    const int64_t blocks = 200 * 200 / (c.Get("vw", 1) * c.Get("ur", 1));
    if (c.Get("rows", 1) > 2 && c.Get("rows", 1) < blocks && c.Get("kb", 1) == d.Get("kb", 1)) runs.push_back(c);
  }
  ASSERT_FALSE(runs.empty());
  CheckConv(*few, runs);
  auto many = ConvGraph({1, 256, 200, 200}, 16, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1);
  EXPECT_EQ(DefaultSchedule(*many, target).Get("rows", 1), 1) << DefaultSchedule(*many, target).ToString();
  auto within = ConvGraph({1, 16, 40, 43}, 16, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1);
  EXPECT_EQ(DefaultSchedule(*within, target).Get("rows", 1), 1) << DefaultSchedule(*within, target).ToString();
}

// Long reductions whose blocks' input outgrows L1 run in reduction chunks
// (kc): the default for Xception's 728 -> 728 on 10x10 takes one pixel block
// per task and chunks whose input fits half an L1, its running sums in a
// per-task buffer between chunks; every chunked point (first, middle and
// last chunks, channel splits, tails, a Relu epilogue) matches the
// interpreter. A 7x7 map (one or two blocks) keeps every block in one task,
// unchunked. The default is Zen 3's, where it was measured (round 23 of
// docs/performance.md); with 16-lane blocks of 32 pixels (AVX-512) the rule
// for weights past L2 takes every block per task instead, unmeasured there.
TEST(ConvLoweringTest, PointwiseLongReductionsRunInChunks) {
  CpuTarget target = HostWithL2AtMost1MiB();
  absl::StatusOr<CpuTarget> zen3 = CpuTarget::Named("znver3");
  ASSERT_TRUE(zen3.ok()) << zen3.status();
  auto xception = ConvGraph({1, 728, 10, 10}, 728, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1);
  const ScheduleConfig d = DefaultSchedule(*xception, *zen3);
  ASSERT_EQ(d.Get("pw", 0), 1) << d.ToString();
  EXPECT_EQ(d.Get("rows", 1), 1) << d.ToString();
  const int64_t kc = d.Get("kc", 0), bw = d.Get("vw", 1) * d.Get("ur", 1);
  ASSERT_GT(kc, 0) << d.ToString();
  EXPECT_EQ(728 % kc, 0) << d.ToString();
  EXPECT_LE(kc * bw, 4096) << d.ToString();
  auto f = loop_ir::FindLowering(*xception)->lower(*xception, d, *zen3);
  ASSERT_TRUE(f.ok()) << f.status();
  const std::string ir = loop_ir::Print(*f);
  EXPECT_NE(ir.find(absl::StrCat("allocate part: f32[", 728 * bw, "]")), std::string::npos) << ir;
  EXPECT_NE(ir.find(absl::StrCat("for (rc_, 0, ", 728 / kc - 2, ")")), std::string::npos) << ir;

  auto g = ConvGraph({1, 512, 11, 11}, 8, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, true, "Relu");
  std::vector<ScheduleConfig> chunked;
  std::set<int64_t> splits;
  for (const ScheduleConfig& c : PointwisePoints(*g, target)) {
    if (c.Get("kc", 0) == 0) continue;
    chunked.push_back(c);
    splits.insert(c.Get("ks", 1));
  }
  ASSERT_FALSE(chunked.empty());
  EXPECT_GT(splits.size(), 1u);
  CheckConv(*g, chunked);
  ScheduleConfig bad = chunked.front();
  bad.Set("kc", 500);  // does not divide 512
  EXPECT_FALSE(ValidateSchedule(*g, bad, target).ok());

  auto seven = ConvGraph({1, 1024, 7, 7}, 1024, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1);
  EXPECT_EQ(DefaultSchedule(*seven, target).Get("kc", 0), 0) << DefaultSchedule(*seven, target).ToString();
}

// On a 2 MiB L2 (Sapphire Rapids) pointwise defaults run no reduction chunks
// and take every pixel block per task only over input of a quarter of the L2
// at most (PointwiseBlocksFromL2): Xception's 728 -> 728 on 20x20 (1.1 MiB
// of input, 2.1 MiB of weights) runs tasks of the 3 blocks of 8 channels by
// 3 vectors whose input fills a quarter of the L2, unchunked, each task
// streaming the weights from L3 once; on 10x10 (0.28 MiB) every
// block per task; ResNet-50's 512 -> 128 on 28x28, chunked on a 1 MiB L2,
// unchunked. Zen 4's defaults for the same convs keep their chunks.
TEST(ConvLoweringTest, PointwiseDefaultsOnATwoMiBL2) {
  absl::StatusOr<CpuTarget> spr = CpuTarget::Named("sapphirerapids"), zen4 = CpuTarget::Named("znver4");
  ASSERT_TRUE(spr.ok()) << spr.status();
  ASSERT_TRUE(zen4.ok()) << zen4.status();
  ASSERT_EQ(spr->L2Bytes(), int64_t{2} << 20);
  auto twenty = ConvGraph({1, 728, 20, 20}, 728, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1);
  const ScheduleConfig d = DefaultSchedule(*twenty, *spr);
  EXPECT_EQ(d.Get("pw", 0), 1) << d.ToString();
  EXPECT_EQ(d.Get("rows", 1), 3) << d.ToString();
  EXPECT_EQ(d.Get("kb", 1) * d.Get("ur", 1), 24) << d.ToString();
  EXPECT_EQ(d.Get("kc", 0), 0) << d.ToString();
  // Its 3 chunks (3, 3 and 2 blocks) by 2 channel splits run split by split,
  // so that each of 2 threads' halves of the tasks is one whole split.
  ASSERT_EQ(d.Get("ks", 1), 2) << d.ToString();
  auto lowered = LowerWorkload(*twenty, d, *spr);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  const std::string text = loop_ir::Print(*lowered);
  EXPECT_NE(text.find("let pc_ = (t_ % 3)"), std::string::npos) << text;
  EXPECT_NE(text.find("let kp_ = (t_ / 3)"), std::string::npos) << text;
  EXPECT_EQ(text.find("allocate xs:"), std::string::npos) << text;  // its planes are whole lines
  CheckConv(*twenty, {d});
  // On 19x19 (timm's Xception-41) the planes start off the cache lines and a
  // block's input column (728 channels of 48 pixels) outgrows L1: tasks of
  // one block pack it (PointwiseColumnOffLines), where 3 blocks would not fit
  // the pack. 1024 -> 512 on 14x14, 4 blocks: tasks of 2 would save 2 passes.
  auto nineteen = ConvGraph({1, 728, 19, 19}, 728, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1);
  const ScheduleConfig n = DefaultSchedule(*nineteen, *spr);
  EXPECT_EQ(n.Get("rows", 1), 1) << n.ToString();
  EXPECT_EQ(n.Get("kb", 1) * n.Get("ur", 1), 24) << n.ToString();
  auto packed = LowerWorkload(*nineteen, n, *spr);
  ASSERT_TRUE(packed.ok()) << packed.status();
  EXPECT_NE(loop_ir::Print(*packed).find("allocate xs: f32[34944]"), std::string::npos) << loop_ir::Print(*packed);
  CheckConv(*nineteen, {n});
  auto fourteen = ConvGraph({1, 1024, 14, 14}, 512, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1);
  EXPECT_EQ(DefaultSchedule(*fourteen, *spr).Get("rows", 1), 1) << DefaultSchedule(*fourteen, *spr).ToString();

  auto ten = ConvGraph({1, 728, 10, 10}, 728, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1);
  const ScheduleConfig e = DefaultSchedule(*ten, *spr);
  EXPECT_EQ(e.Get("kc", 0), 0) << e.ToString();
  EXPECT_GE(e.Get("rows", 1) * e.Get("vw", 1) * e.Get("ur", 1), 100 - e.Get("vw", 1)) << e.ToString();

  auto resnet = ConvGraph({1, 512, 28, 28}, 128, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1);
  EXPECT_EQ(DefaultSchedule(*resnet, *spr).Get("kc", 0), 0) << DefaultSchedule(*resnet, *spr).ToString();
  EXPECT_GT(DefaultSchedule(*resnet, *zen4).Get("kc", 0), 0) << DefaultSchedule(*resnet, *zen4).ToString();
  EXPECT_GT(DefaultSchedule(*twenty, *zen4).Get("kc", 0), 0) << DefaultSchedule(*twenty, *zen4).ToString();
}

// On a 2 MiB L2 a pointwise conv whose epilogue adds a residual takes
// every pixel block of a channel slice per task where its weights take a
// quarter of the L2 or its output all of it (PointwiseAllPixels): keras
// ResNet-50's 256 -> 1024 on 14x14 (1 MiB of weights) and 64 -> 256 on
// 56x56 (3 MiB out). Without the residual, one block a task; on Zen 4 the
// 56x56 one too (the 14x14 one's weights outgrow its L2: every block).
TEST(ConvLoweringTest, PointwiseResidualStreamsOnATwoMiBL2) {
  absl::StatusOr<CpuTarget> spr = CpuTarget::Named("sapphirerapids"), zen4 = CpuTarget::Named("znver4");
  ASSERT_TRUE(spr.ok()) << spr.status();
  ASSERT_TRUE(zen4.ok()) << zen4.status();
  auto with_residual = [](int64_t c, int64_t k, int64_t hw) {
    Builder b;
    Value* x = b.Input({1, c, hw, hw});
    Value* w = b.Input({k, c, 1, 1});
    Value* bias = b.Input({k});
    Value* residual = b.Input({1, k, hw, hw});
    Value* conv = b.Op("Conv", {x, w, bias}, ConvAttrs({1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}));
    return b.Finish({b.Op("Relu", {b.Op("Add", {conv, residual})})});
  };
  for (auto [c, k, hw] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{256, 1024, 14}, {64, 256, 56}}) {
    SCOPED_TRACE(absl::StrCat(c, " -> ", k, " on ", hw, "x", hw));
    auto g = with_residual(c, k, hw);
    const ScheduleConfig d = DefaultSchedule(*g, *spr);
    EXPECT_EQ(d.Get("pw", 0), 1) << d.ToString();
    EXPECT_EQ(d.Get("rows", 1), hw * hw / (d.Get("vw", 1) * d.Get("ur", 1))) << d.ToString();
    EXPECT_GT(d.Get("ks", 1), 1) << d.ToString();
    if (hw == 56) EXPECT_EQ(DefaultSchedule(*g, *zen4).Get("rows", 1), 1) << DefaultSchedule(*g, *zen4).ToString();
    auto plain = ConvGraph({1, c, hw, hw}, k, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1);
    EXPECT_EQ(DefaultSchedule(*plain, *spr).Get("rows", 1), 1) << DefaultSchedule(*plain, *spr).ToString();
  }
  // The schedule runs here wherever the host's vectors hold 16 floats.
  if (CpuTarget::Host().FloatLanes() < 16) GTEST_SKIP() << "host vectors hold fewer than 16 floats";
  auto g = with_residual(256, 1024, 14);
  CheckConv(*g, {DefaultSchedule(*g, *spr)});
}

// On a 2 MiB L2, a pointwise conv whose input and output outgrow twice the
// L2 over planes that are not whole vectors takes, per task, the pixel
// blocks whose input and output fill a quarter of the L2, as long as its
// input pack stays within bounds (PointwiseStreamRows): keras Xception's
// 128 -> 128 on 77x77 takes 16 blocks of 32 pixels and copies their input
// into an aligned pack. Planes of whole vectors keep the runs that fill L1
// (one block here).
TEST(ConvLoweringTest, PointwiseUnalignedPlanesPastL2TakePackedRunsOnATwoMiBL2) {
  absl::StatusOr<CpuTarget> spr = CpuTarget::Named("sapphirerapids");
  ASSERT_TRUE(spr.ok()) << spr.status();
  auto xception = ConvGraph({1, 128, 77, 77}, 128, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1);
  const ScheduleConfig d = DefaultSchedule(*xception, *spr);
  EXPECT_EQ(d.Get("pw", 0), 1) << d.ToString();
  EXPECT_EQ(d.Get("vw", 1) * d.Get("ur", 1), 32) << d.ToString();
  EXPECT_EQ(d.Get("rows", 1), 16) << d.ToString();
  auto f = loop_ir::FindLowering(*xception)->lower(*xception, d, *spr);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_NE(loop_ir::Print(*f).find("allocate xs: f32[65536]"), std::string::npos) << loop_ir::Print(*f);
  auto aligned = ConvGraph({1, 128, 76, 80}, 128, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1);
  EXPECT_EQ(DefaultSchedule(*aligned, *spr).Get("rows", 1), 1) << DefaultSchedule(*aligned, *spr).ToString();
  // 16 -> 16 on 182x182 (4.2 MB in and out, 4 pixels past whole vectors):
  // the runs match the interpreter wherever the host's vectors hold 16 floats.
  if (CpuTarget::Host().FloatLanes() < 16) GTEST_SKIP() << "host vectors hold fewer than 16 floats";
  auto few = ConvGraph({1, 16, 182, 182}, 16, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1);
  const ScheduleConfig e = DefaultSchedule(*few, *spr);
  EXPECT_GT(e.Get("rows", 1), 16) << e.ToString();
  CheckConv(*few, {e});
}

// The channel-vector default splits its rows so that two threads share the
// tasks evenly: Inception's 7x1 conv of 5 channel blocks over 17 rows takes
// quarter rows (20 tasks), where whole rows ran 3 blocks against 2.
TEST(ConvLoweringTest, ChannelVectorDefaultSplitsRowsEvenlyForTwoThreads) {
  CpuTarget target = CpuTarget::Host();
  if (target.FloatLanes() < 16) GTEST_SKIP() << "host vectors hold fewer than 16 floats";
  auto seven = BlockedConvGraph({1, 160, 17, 17}, 160, {7, 1}, {1, 1}, {3, 0, 3, 0}, {1, 1}, 1);
  ScheduleConfig d = DefaultSchedule(*seven, target);
  EXPECT_EQ(d.Get("kv", 0), 1) << d.ToString();
  EXPECT_EQ(d.Get("rows", 0), 5) << d.ToString();
  auto f = loop_ir::FindLowering(*seven)->lower(*seven, d, target);
  ASSERT_TRUE(f.ok()) << f.status();
  const int64_t tasks = 160 / (16 * d.Get("kb", 1)) * 4;
  EXPECT_NE(loop_ir::Print(*f).find(absl::StrCat("parallel for (t_, 0, ", tasks, ")")), std::string::npos)
      << loop_ir::Print(*f);
  CheckConv(*seven, {d});
}

TEST(ConvLoweringTest, PointwiseVariantOneDimensionalAndEpilogues) {
  CpuTarget target = CpuTarget::Host();
  {
    Builder b;
    Value* x = b.Input({2, 5, 37});
    Value* w = b.Input({8, 5, 1});
    Value* y = b.Op("Conv", {x, w}, {});
    auto g = b.Finish({b.Op("Relu", {y})});
    CheckConv(*g, PointwisePoints(*g, target));
  }
  // Residual of the full shape (flat spatial index), then a residual that
  // broadcasts along H only (row/column index).
  for (const Ints& r : {Ints{1, 8, 5, 9}, Ints{1, 1, 1, 9}, Ints{8, 1, 1}}) {
    Builder b;
    Value* x = b.Input({1, 6, 5, 9});
    Value* w = b.Input({8, 6, 1, 1});
    Value* bias = b.Input({8});
    Value* res = b.Input(r);
    Value* y = b.Op("Conv", {x, w, bias}, {});
    auto g = b.Finish({b.Op("Relu", {b.Op("Add", {y, res})})});
    CheckConv(*g, PointwisePoints(*g, target));
  }
  // Not pointwise: the variant does not apply.
  auto g = ConvGraph({1, 8, 12, 20}, 16, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1);
  EXPECT_TRUE(PointwisePoints(*g, target).empty());
  ScheduleConfig bad = DefaultSchedule(*g, target);
  bad.Set("pw", 1);
  EXPECT_EQ(ValidateSchedule(*g, bad, target).code(), absl::StatusCode::kInvalidArgument);
  auto strided = ConvGraph({1, 8, 12, 20}, 16, {1, 1}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1);
  EXPECT_TRUE(PointwisePoints(*strided, target).empty());
}

TEST(ConvLoweringTest, ThreeDimensional) {
  for (int64_t group : {1, 2}) {
    Builder b;
    Value* x = b.Input({2, 4, 5, 6, 7});
    Value* w = b.Input({6, 4 / group, 3, 2, 3});
    Value* bias = b.Input({6});
    Value* y = b.Op("Conv", {x, w, bias},
                    {{"pads", Ints{1, 0, 1, 1, 1, 0}}, {"strides", Ints{2, 1, 2}}, {"dilations", Ints{1, 2, 1}},
                     {"group", group}});
    CheckConv(*b.Finish({b.Op("Relu", {y})}));
  }
  // 1x1x1 (not the pointwise variant in 3-D) and SAME_UPPER.
  Builder b;
  Value* x = b.Input({1, 3, 3, 4, 5});
  Value* w = b.Input({5, 3, 1, 1, 1});
  Value* y = b.Op("Conv", {x, w}, {});
  CheckConv(*b.Finish({y}));
  Builder b2;
  Value* x2 = b2.Input({1, 2, 5, 5, 5});
  Value* w2 = b2.Input({3, 2, 3, 3, 3});
  Value* y2 = b2.Op("Conv", {x2, w2}, {{"auto_pad", std::string("SAME_UPPER")}, {"strides", Ints{2, 2, 2}}});
  auto g = b2.Finish({y2});
  CheckConv(*g);
  auto f = loop_ir::ConvLowering().lower(*g, DefaultSchedule(*g, CpuTarget::Host()), CpuTarget::Host());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE(loop_ir::Verify(*f).ok());
  EXPECT_NE(loop_ir::Print(*f).find("for (kd_, 0, 3)"), std::string::npos) << loop_ir::Print(*f);
}

TEST(ConvLoweringTest, RefusesWhatItDoesNotLower) {
  // Weights computed inside the workload.
  Builder b;
  Value* x = b.Input({1, 2, 4, 4});
  Value* w = b.Op("Relu", {b.Input({2, 2, 3, 3})});
  Value* y = b.Op("Conv", {x, w}, {{"pads", Ints{1, 1, 1, 1}}});
  auto g = b.Finish({y});
  EXPECT_FALSE(loop_ir::ConvLowering().match(*g).ok());
}

// ---- ConvTranspose -------------------------------------------------------------

void CheckConvT(const Graph& g) {
  CpuTarget target = CpuTarget::Host();
  ASSERT_EQ(WorkloadKind(g), "conv_transpose") << g.ToText();
  ASSERT_TRUE(CanCompile(g));
  std::vector<ScheduleConfig> configs = Points(g, target);
  ASSERT_FALSE(configs.empty());
  CheckConfigsAgainstInterpreter(g, configs, target);
}

// Random points of the space (beyond Points' spread), fixed seed.
void CheckConvTRandom(const Graph& g, int count, uint32_t seed) {
  CpuTarget target = CpuTarget::Host();
  std::vector<ScheduleConfig> space = EnumerateSchedules(g, target);
  ASSERT_FALSE(space.empty());
  std::mt19937 rng(seed);
  std::vector<ScheduleConfig> pick;
  for (int i = 0; i < count; ++i) pick.push_back(space[rng() % space.size()]);
  CheckConfigsAgainstInterpreter(g, pick, target);
}

TEST(ConvTransposeLoweringTest, FourByFourStrideTwoPadOneLikeDcgan) {
  CheckConvT(*ConvTransposeGraph({1, 8, 7, 9}, 6, {4, 4}, {{"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}));
}

TEST(ConvTransposeLoweringTest, StrideOneNoPadNoBias) {
  CheckConvT(*ConvTransposeGraph({2, 3, 5, 3}, 5, {3, 3}, {}, 1, /*bias=*/false));
}

TEST(ConvTransposeLoweringTest, StrideThreeOutputPaddingDilationAsymmetricPads) {
  CheckConvT(*ConvTransposeGraph({1, 3, 5, 6}, 4, {3, 2},
                                 {{"strides", Ints{3, 2}}, {"pads", Ints{1, 0, 2, 1}}, {"dilations", Ints{2, 3}},
                                  {"output_padding", Ints{1, 1}}}));
}

TEST(ConvTransposeLoweringTest, GroupsAndDepthwise) {
  CheckConvT(*ConvTransposeGraph({1, 6, 5, 5}, 2, {3, 3}, {{"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}, 3));
  CheckConvT(*ConvTransposeGraph({1, 4, 3, 7}, 1, {2, 2}, {{"strides", Ints{2, 2}}}, 4));
}

TEST(ConvTransposeLoweringTest, AutoPadAndOutputShape) {
  CheckConvT(*ConvTransposeGraph({1, 2, 5, 7}, 3, {3, 3},
                                 {{"strides", Ints{2, 2}}, {"auto_pad", std::string("SAME_UPPER")}}));
  CheckConvT(*ConvTransposeGraph({1, 2, 4, 3}, 3, {3, 3},
                                 {{"strides", Ints{2, 3}}, {"auto_pad", std::string("SAME_LOWER")}}));
  CheckConvT(*ConvTransposeGraph({1, 1, 3, 3}, 2, {3, 3}, {{"strides", Ints{3, 2}}, {"output_shape", Ints{10, 8}}}));
  // output_shape larger than the full extent: the extra columns hold the bias.
  CheckConvT(*ConvTransposeGraph({1, 2, 3, 3}, 2, {2, 2}, {{"strides", Ints{2, 2}}, {"output_shape", Ints{9, 11}}}));
}

TEST(ConvTransposeLoweringTest, OneDimensionalAndEpilogue) {
  CheckConvT(*ConvTransposeGraph({2, 5, 13}, 3, {5}, {{"strides", Ints{3}}, {"pads", Ints{2, 1}}}, 1, true, "Relu"));
  CheckConvT(*ConvTransposeGraph({1, 2, 1}, 3, {1}, {}));
}

TEST(ConvTransposeLoweringTest, ThreeDimensional) {
  CheckConvT(*ConvTransposeGraph({1, 3, 3, 4, 5}, 2, {3, 2, 3},
                                 {{"strides", Ints{2, 1, 2}}, {"pads", Ints{1, 0, 1, 0, 1, 1}},
                                  {"dilations", Ints{1, 2, 1}}}));
  CheckConvT(*ConvTransposeGraph({1, 2, 2, 3, 3}, 2, {2, 2, 2}, {{"strides", Ints{3, 2, 2}}}, 2, false));
}

TEST(ConvTransposeLoweringTest, RandomPointsOnOddSizes) {
  uint32_t seed = 11;
  for (const Ints& x : {Ints{1, 1, 1, 1}, Ints{1, 3, 2, 5}, Ints{2, 5, 7, 3}, Ints{1, 7, 11, 13}}) {
    for (int64_t s : {1, 2, 3}) {
      SCOPED_TRACE(absl::StrCat("x ", x[1], "x", x[2], "x", x[3], " stride ", s));
      auto g = ConvTransposeGraph(x, 7, {3, 4}, {{"strides", Ints{s, s}}, {"pads", Ints{1, 2, 0, 1}}});
      CheckConvTRandom(*g, 4, seed++);
    }
  }
}

TEST(ConvTransposeLoweringTest, PrintVerifySpaceAndValidation) {
  auto g = ConvTransposeGraph({1, 64, 28, 28}, 32, {4, 4}, {{"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}});
  CpuTarget target = CpuTarget::Host();
  const loop_ir::WorkloadLowering* l = loop_ir::FindLowering(*g);
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->kind, "conv_transpose");
  std::vector<ScheduleConfig> space = l->enumerate(*g, target);
  EXPECT_GE(space.size(), 4u);
  ScheduleConfig def = l->default_schedule(*g, target);
  EXPECT_NE(std::find(space.begin(), space.end(), def), space.end()) << def.ToString();
  for (const ScheduleConfig& c : space) {
    ASSERT_TRUE(l->validate(*g, c, target).ok()) << c.ToString();
    auto f = l->lower(*g, c, target);
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_TRUE(loop_ir::Verify(*f).ok()) << c.ToString() << "\n" << loop_ir::Print(*f);
  }
  auto f = l->lower(*g, def, target);
  ASSERT_TRUE(f.ok());
  std::string text = loop_ir::Print(*f);
  // Two width phases, each with its own accumulator; the height taps are
  // picked by a scalar test.
  EXPECT_NE(text.find("allocate acc0"), std::string::npos) << text;
  EXPECT_NE(text.find("allocate acc1"), std::string::npos) << text;
  EXPECT_NE(text.find("% 2) == 0"), std::string::npos) << text;
  ScheduleConfig bad = def;
  bad.Set("rows", 3);  // not a multiple of the height stride
  EXPECT_EQ(l->validate(*g, bad, target).code(), absl::StatusCode::kInvalidArgument);
  bad = def;
  bad.Set("pw", 1);
  EXPECT_EQ(l->validate(*g, bad, target).code(), absl::StatusCode::kInvalidArgument);
  bad = def;
  bad.Set("kb", 3);
  EXPECT_EQ(l->validate(*g, bad, target).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln
