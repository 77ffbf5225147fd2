// The fused expansion + depthwise conv (lower_conv_pair.h): every schedule
// point against the reference interpreter, tasks run in three uneven ranges,
// over strides, pads, dilations, odd maps, mid chains (Relu, HardSwish, SiLU,
// a per-channel scale, an operand broadcast along H only, a Clip without
// min), epilogues (residual Add), missing biases; and what it refuses. The
// case lists are the GPU test's too (conv_pair_cases.h).
#include "compiler_core/codegen/loop_ir/lower_conv_pair.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler_core/codegen/kernel_emitter.h"
#include "compiler_core/codegen/loop_ir/printer.h"
#include "compiler_core/codegen/loop_ir/verifier.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/codegen/target.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/loop_ir/conv_pair_cases.h"
#include "tests/compiler_core/codegen/loop_ir/lowering_testing.h"

namespace kiln {
namespace {

using namespace loop_ir_testing;  // NOLINT: test helpers

// Every point of the space against the interpreter.
void CheckPair(const ConvPairSpec& s) {
  std::unique_ptr<Graph> g = ConvPairGraph(s);
  SCOPED_TRACE(g->ToText());
  CpuTarget target = CpuTarget::Host();
  ASSERT_EQ(WorkloadKind(*g), "conv_pair");
  std::vector<ScheduleConfig> space = EnumerateSchedules(*g, target);
  ASSERT_FALSE(space.empty());
  EXPECT_NE(std::find(space.begin(), space.end(), DefaultSchedule(*g, target)), space.end());
  CheckConfigsAgainstInterpreter(*g, space, target);
}

TEST(ConvPairLoweringTest, StridesPadsAndMaps) {
  for (const ConvPairSpec& s : ConvPairStrideAndMapCases()) CheckPair(s);
}

TEST(ConvPairLoweringTest, MidOperandsAndResidualEpilogue) {
  for (const ConvPairSpec& s : ConvPairMidChainCases()) CheckPair(s);
}

// An input too large to stay in L2 while every channel block reads it whole
// (16 x 96 x 96 floats, 576 KiB): the default takes bands of output rows, a
// task per band running every channel block over the band's input rows.
TEST(ConvPairLoweringTest, ALargeInputIsTakenInBandsOfRows) {
  CpuTarget target = CpuTarget::Host();
  for (const ConvPairSpec& s : {ConvPairSpec{{1, 16, 96, 96}, 32, 3, 2, 1, 1, "SiLU", "Relu"},
                                ConvPairSpec{{1, 16, 96, 96}, 16, 3, 1, 1, 1, "Relu", "Add"}}) {
    std::unique_ptr<Graph> g = ConvPairGraph(s);
    SCOPED_TRACE(g->ToText());
    const ScheduleConfig d = DefaultSchedule(*g, target);
    const int64_t oh = (96 + 2 - 3) / s.stride + 1;
    const int64_t rb = d.Get("rb", 0);
    ASSERT_GT(rb, 0) << d.ToString();
    EXPECT_EQ(oh % rb, 0);
    auto f = LowerWorkload(*g, d, target);
    ASSERT_TRUE(f.ok()) << f.status();
    const std::string text = loop_ir::Print(*f);
    EXPECT_NE(text.find(absl::StrCat("parallel for (t_, 0, ", oh / rb, ")")), std::string::npos) << text;
    EXPECT_NE(text.find("for (cb_, 0, "), std::string::npos) << text;
    EXPECT_NE(text.find("for (er_, 0, "), std::string::npos) << text;
    ScheduleConfig whole = d;
    whole.knobs.erase("rb");
    CheckConfigsAgainstInterpreter(*g, {d, whole}, target);
  }
}

// A small input taken whole: 24 expanded channels in blocks of 8 made 3
// tasks, two of them on one of two threads (MNASNet's 8 -> 24 pair on
// 112x112); the default takes blocks of 4 (6 tasks), still 16 pointwise
// accumulators.
TEST(ConvPairLoweringTest, TheDefaultMakesTasksForTwoThreads) {
  CpuTarget target = CpuTarget::Host();
  if (target.FloatLanes() != 16) GTEST_SKIP() << "the case is for 16-lane targets; this host has " << target.FloatLanes();
  std::unique_ptr<Graph> g = ConvPairGraph(ConvPairSpec{{1, 8, 56, 56}, 24, 3, 2, 1, 1, "Relu", "Relu"});
  SCOPED_TRACE(g->ToText());
  const ScheduleConfig d = DefaultSchedule(*g, target);
  EXPECT_EQ(d.Get("rb", 0), 0) << d.ToString();
  EXPECT_EQ(d.Get("kb", 0) * d.Get("pu", 0), 16) << d.ToString();
  auto f = LowerWorkload(*g, d, target);
  ASSERT_TRUE(f.ok()) << f.status();
  const std::string text = loop_ir::Print(*f);
  EXPECT_NE(text.find(absl::StrCat("parallel for (t_, 0, ", 24 / d.Get("kb", 0), ")")), std::string::npos) << text;
  EXPECT_GE(24 / d.Get("kb", 0), 4) << d.ToString();
  CheckConfigsAgainstInterpreter(*g, {d}, target);
}

TEST(ConvPairLoweringTest, RefusesWhatIsNotAnExpansionAndADepthwiseConv) {
  CpuTarget target = CpuTarget::Host();
  const loop_ir::WorkloadLowering l = loop_ir::ConvPairLowering();
  {
    Builder b;  // the expansion is 3x3
    Value* e = b.Op("Conv", {b.Input({1, 4, 8, 8}), b.Input({8, 4, 3, 3})}, {{"pads", Ints{1, 1, 1, 1}}});
    auto g = b.Finish({b.Op("Conv", {e, b.Input({8, 1, 3, 3})}, DepthwiseAttrs(8, 3, 1, 1))});
    EXPECT_EQ(l.match(*g).code(), absl::StatusCode::kUnimplemented);
  }
  {
    Builder b;  // the second conv is not depthwise
    Value* e = b.Op("Conv", {b.Input({1, 4, 8, 8}), b.Input({8, 4, 1, 1})});
    auto g = b.Finish({b.Op("Conv", {e, b.Input({8, 8, 3, 3})}, {{"pads", Ints{1, 1, 1, 1}}})});
    EXPECT_EQ(l.match(*g).code(), absl::StatusCode::kUnimplemented);
  }
  {
    Builder b;  // the expansion is also an output
    Value* e = b.Op("Relu", {b.Op("Conv", {b.Input({1, 4, 8, 8}), b.Input({8, 4, 1, 1})})});
    auto g = b.Finish({e, b.Op("Conv", {e, b.Input({8, 1, 3, 3})}, DepthwiseAttrs(8, 3, 1, 1))});
    EXPECT_EQ(l.match(*g).code(), absl::StatusCode::kUnimplemented);
  }
  std::unique_ptr<Graph> g = ConvPairGraph({{1, 4, 8, 8}, 8});
  ScheduleConfig bad = DefaultSchedule(*g, target);
  bad.Set("kb", 3);  // does not divide 8 channels
  EXPECT_EQ(ValidateSchedule(*g, bad, target).code(), absl::StatusCode::kInvalidArgument);
  ScheduleConfig uneven = DefaultSchedule(*g, target);
  uneven.Set("rb", 3);  // does not divide 8 output rows
  EXPECT_EQ(ValidateSchedule(*g, uneven, target).code(), absl::StatusCode::kInvalidArgument);
  auto f = LowerWorkload(*g, DefaultSchedule(*g, target), target);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE(loop_ir::Verify(*f).ok());
  const std::string text = loop_ir::Print(*f);
  EXPECT_NE(text.find("allocate ep: f32["), std::string::npos) << text;
}

}  // namespace
}  // namespace kiln
