// Conv workloads on loop IR (compiler_core/loop_ir/lower_conv.h): every shape
// family, JIT-compiled at several schedule points, against the reference
// interpreter at rtol 1e-4 / atol 1e-5.
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler_core/interpreter.h"
#include "compiler_core/jit.h"
#include "compiler_core/loop_ir/lower_conv.h"
#include "compiler_core/schedule_space.h"
#include "compiler_core/shape_inference.h"
#include "compiler_core/target.h"
#include "gtest/gtest.h"
#include "tests/loop_ir/lowering_testing.h"

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

Attrs ConvAttrs(Ints kernel, Ints strides, Ints pads, Ints dilations, int64_t group = 1) {
  return {{"kernel_shape", kernel}, {"strides", strides}, {"pads", pads}, {"dilations", dilations},
          {"group", group}};
}

// Conv(x[1,c,h,w], w[k,c/g,kh,kw], bias[k]) alone.
std::unique_ptr<Graph> Conv2d(Ints x, int64_t k, Ints kernel, Ints strides, Ints pads, Ints dil, int64_t group,
                              bool bias = true) {
  Builder b;
  Value* in = b.Input(x);
  Value* w = b.Input({k, x[1] / group, kernel[0], kernel[1]});
  std::vector<Value*> ins = {in, w};
  if (bias) ins.push_back(b.Input({k}));
  Value* y = b.Op("Conv", ins, ConvAttrs(kernel, strides, pads, dil, group));
  return b.Finish({y});
}

TEST(ConvLoweringTest, ThreeByThreeStrideOnePadOne) {
  CheckConv(*Conv2d({1, 8, 12, 20}, 16, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1));
}

TEST(ConvLoweringTest, ThreeByThreeStrideTwo) {
  CheckConv(*Conv2d({2, 3, 17, 19}, 8, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1));
}

TEST(ConvLoweringTest, PointwiseNoBias) {
  CheckConv(*Conv2d({1, 16, 7, 9}, 24, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, /*bias=*/false));
}

TEST(ConvLoweringTest, Depthwise) {
  CheckConv(*Conv2d({1, 12, 10, 18}, 12, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 12));
}

TEST(ConvLoweringTest, DepthwiseStrideTwoMultiplier) {
  CheckConv(*Conv2d({1, 4, 11, 11}, 8, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 4));
}

TEST(ConvLoweringTest, Dilation) {
  CheckConv(*Conv2d({1, 4, 13, 15}, 6, {3, 3}, {1, 1}, {2, 2, 2, 2}, {2, 2}, 1));
}

TEST(ConvLoweringTest, TwoGroups) {
  CheckConv(*Conv2d({1, 8, 9, 9}, 6, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2));
}

TEST(ConvLoweringTest, OddSizesAsymmetricPads) {
  CheckConv(*Conv2d({1, 5, 7, 23}, 7, {5, 3}, {2, 3}, {2, 0, 1, 2}, {1, 1}, 1));
}

TEST(ConvLoweringTest, SevenBySevenStrideTwoLikeResNetStem) {
  CheckConv(*Conv2d({1, 3, 32, 32}, 16, {7, 7}, {2, 2}, {3, 3, 3, 3}, {1, 1}, 1));
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

TEST(ConvLoweringTest, EpilogueBiasRelu) {
  Builder b;
  Value* x = b.Input({1, 8, 14, 14});
  Value* w = b.Input({16, 8, 3, 3});
  Value* bias = b.Input({16});
  Value* c = b.Op("Conv", {x, w, bias}, ConvAttrs({3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}));
  CheckConv(*b.Finish({b.Op("Relu", {c})}));
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
  auto g = Conv2d({1, 64, 56, 56}, 64, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1);
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
TEST(ConvLoweringTest, PointwiseVariantOddSizes) {
  CpuTarget target = CpuTarget::Host();
  for (const Ints& x : {Ints{2, 6, 5, 7}, Ints{1, 5, 3, 3}, Ints{1, 4, 13, 11}, Ints{1, 3, 1, 1}}) {
    auto g = Conv2d(x, 12, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1);
    std::vector<ScheduleConfig> pw = PointwisePoints(*g, target);
    ASSERT_FALSE(pw.empty());
    EXPECT_EQ(DefaultSchedule(*g, target).Get("pw", 0), 1);
    CheckConv(*g, pw);
  }
  auto grouped = Conv2d({1, 6, 9, 9}, 4, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 2, /*bias=*/false);
  CheckConv(*grouped, PointwisePoints(*grouped, target));
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
  auto g = Conv2d({1, 8, 12, 20}, 16, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1);
  EXPECT_TRUE(PointwisePoints(*g, target).empty());
  ScheduleConfig bad = DefaultSchedule(*g, target);
  bad.Set("pw", 1);
  EXPECT_EQ(ValidateSchedule(*g, bad, target).code(), absl::StatusCode::kInvalidArgument);
  auto strided = Conv2d({1, 8, 12, 20}, 16, {1, 1}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1);
  EXPECT_TRUE(PointwisePoints(*strided, target).empty());
}

TEST(ConvLoweringTest, RefusesWhatItDoesNotLower) {
  // 3-D convolution: not a conv workload (yet).
  Builder b;
  Value* x = b.Input({1, 2, 4, 4, 4});
  Value* w = b.Input({2, 2, 3, 3, 3});
  Value* y = b.Op("Conv", {x, w}, {{"pads", Ints{1, 1, 1, 1, 1, 1}}});
  auto g = b.Finish({y});
  EXPECT_FALSE(loop_ir::ConvLowering().match(*g).ok());
  EXPECT_FALSE(CanCompile(*g));
}

}  // namespace
}  // namespace kiln
