// The fused expansion + depthwise conv (lower_conv_pair.h): every schedule
// point against the reference interpreter, tasks run in three uneven ranges,
// over strides, pads, dilations, odd maps, mid chains (Relu, HardSwish, SiLU,
// a per-channel scale, an operand broadcast along H only, a Clip without
// min), epilogues
// (residual Add), missing biases; and what it refuses.
#include "compiler_core/codegen/loop_ir/lower_conv_pair.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler_core/codegen/kernel_emitter.h"
#include "compiler_core/codegen/loop_ir/printer.h"
#include "compiler_core/codegen/loop_ir/verifier.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/codegen/target.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/loop_ir/lowering_testing.h"

namespace kiln {
namespace {

using namespace loop_ir_testing;  // NOLINT: test helpers

Attrs DwAttrs(int64_t c, int64_t k, int64_t stride, int64_t pad, int64_t dil = 1) {
  return {{"kernel_shape", Ints{k, k}},
          {"strides", Ints{stride, stride}},
          {"pads", Ints{pad, pad, pad, pad}},
          {"dilations", Ints{dil, dil}},
          {"group", c}};
}

struct PairSpec {
  Ints x;         // [n, cin, h, w]
  int64_t c = 8;  // expanded channels
  int64_t k = 3, stride = 1, pad = 1, dil = 1;
  std::string mid = "Relu";  // "", Relu, HardSwish, SiLU, Scale, RowAdd
  std::string epilogue;      // "", Relu, Add
  bool bias = true;
};

std::unique_ptr<Graph> Pair(const PairSpec& s) {
  Builder b;
  Value* x = b.Input(s.x);
  std::vector<Value*> ins = {x, b.Input({s.c, s.x[1], 1, 1})};
  if (s.bias) ins.push_back(b.Input({s.c}));
  Value* e = b.Op("Conv", ins);
  if (s.mid == "Relu" || s.mid == "HardSwish") e = b.Op(s.mid, {e});
  if (s.mid == "SiLU") e = b.Op("Mul", {e, b.Op("Sigmoid", {e})});
  if (s.mid == "Scale") e = b.Op("Mul", {e, b.Input({1, s.c, 1, 1})});
  if (s.mid == "RowAdd") e = b.Op("Add", {e, b.Input({1, 1, s.x[2], 1})});
  if (s.mid == "ClipMax") e = b.Op("Clip", {e, nullptr, b.FloatConstant({}, {0.25f})});  // min omitted
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

void CheckPair(const PairSpec& s) {
  std::unique_ptr<Graph> g = Pair(s);
  SCOPED_TRACE(g->ToText());
  CpuTarget target = CpuTarget::Host();
  ASSERT_EQ(WorkloadKind(*g), "conv_pair");
  std::vector<ScheduleConfig> space = EnumerateSchedules(*g, target);
  ASSERT_FALSE(space.empty());
  EXPECT_NE(std::find(space.begin(), space.end(), DefaultSchedule(*g, target)), space.end());
  CheckConfigsAgainstInterpreter(*g, space, target);
}

TEST(ConvPairLoweringTest, StridesPadsAndMaps) {
  CheckPair({{1, 4, 12, 12}, 8});                                 // 3x3 s1: 144 pixels, 9 vectors
  CheckPair({{1, 5, 9, 11}, 6, 3, 2, 1, 1, "HardSwish"});         // s2, odd map
  CheckPair({{2, 3, 7, 7}, 4, 5, 1, 2, 1, "SiLU", "Relu"});       // 5x5, two images
  CheckPair({{1, 4, 10, 13}, 8, 5, 2, 2, 1, "Relu", "", false});  // 5x5 s2, no biases
  CheckPair({{1, 3, 11, 11}, 4, 3, 1, 2, 2, ""});                 // dilation 2, no mid chain
}

TEST(ConvPairLoweringTest, MidOperandsAndResidualEpilogue) {
  CheckPair({{1, 4, 8, 9}, 8, 3, 1, 1, 1, "Scale", "Add"});
  CheckPair({{1, 4, 6, 7}, 4, 3, 1, 1, 1, "RowAdd"});  // broadcast along H only: row/column index
  CheckPair({{1, 4, 6, 6}, 4, 3, 2, 1, 1, "ClipMax"});
}

TEST(ConvPairLoweringTest, RefusesWhatIsNotAnExpansionAndADepthwiseConv) {
  CpuTarget target = CpuTarget::Host();
  const loop_ir::WorkloadLowering l = loop_ir::ConvPairLowering();
  {
    Builder b;  // the expansion is 3x3
    Value* e = b.Op("Conv", {b.Input({1, 4, 8, 8}), b.Input({8, 4, 3, 3})}, {{"pads", Ints{1, 1, 1, 1}}});
    auto g = b.Finish({b.Op("Conv", {e, b.Input({8, 1, 3, 3})}, DwAttrs(8, 3, 1, 1))});
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
    auto g = b.Finish({e, b.Op("Conv", {e, b.Input({8, 1, 3, 3})}, DwAttrs(8, 3, 1, 1))});
    EXPECT_EQ(l.match(*g).code(), absl::StatusCode::kUnimplemented);
  }
  std::unique_ptr<Graph> g = Pair({{1, 4, 8, 8}, 8});
  ScheduleConfig bad = DefaultSchedule(*g, target);
  bad.Set("kb", 3);  // does not divide 8 channels
  EXPECT_EQ(ValidateSchedule(*g, bad, target).code(), absl::StatusCode::kInvalidArgument);
  auto f = LowerWorkload(*g, DefaultSchedule(*g, target), target);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE(loop_ir::Verify(*f).ok());
  const std::string text = loop_ir::Print(*f);
  EXPECT_NE(text.find("allocate ep: f32["), std::string::npos) << text;
}

}  // namespace
}  // namespace kiln
