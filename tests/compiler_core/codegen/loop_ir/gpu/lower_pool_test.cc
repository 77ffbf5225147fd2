// GPU lowering of the pool kind: MaxPool (with Indices, both storage
// orders) and AveragePool (count_include_pad, ceil_mode, pads, dilations),
// 1-D, 2-D and 3-D, with an epilogue; every point of the GPU space against
// the reference interpreter (through the CPU emulation) and assembled by
// ptxas for sm_80 and sm_90; windows of padding only, -inf and NaN taps.
// The 3-D and MaxPool-with-Indices case lists are the CPU test's too
// (loop_ir/pool_cases.h).
#include "compiler_core/codegen/loop_ir/gpu/lower_pool.h"

#include <cmath>
#include <limits>

#include "compiler_core/codegen/kernel_emitter.h"
#include "compiler_core/codegen/loop_ir/printer.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/frontend/shape_inference.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/codegen_testing.h"
#include "tests/compiler_core/codegen/gpu_testing.h"
#include "tests/compiler_core/codegen/loop_ir/pool_cases.h"

namespace kiln {
namespace {

using codegen_testing::GraphBuilder;
using codegen_testing::RandomFeeds;
using loop_ir_testing::Attrs;
using loop_ir_testing::Ints;
using loop_ir_testing::MaxPoolWithIndicesGraph;
using loop_ir_testing::PoolCase;
using loop_ir_testing::PoolGraph;

const GpuTarget kSm90{90};

void CheckEverywhere(const Graph& g, const std::map<std::string, Tensor>& feeds) {
  gpu_testing::CheckEveryPoint(g, "pool", feeds);
}

void CheckEverywhere(const Graph& g) { CheckEverywhere(g, RandomFeeds(g, 11, -2.0f, 2.0f)); }

TEST(GpuPoolLoweringTest, MaxPool2d) {
  // ResNet's stem pool at an odd size; odd sizes without padding; ceil mode
  // and dilation with asymmetric pads.
  CheckEverywhere(*PoolGraph("MaxPool", {2, 3, 19, 21},
                             {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}));
  CheckEverywhere(*PoolGraph("MaxPool", {2, 3, 9, 13}, {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}}));
  CheckEverywhere(*PoolGraph("MaxPool", {1, 4, 11, 12},
                             {{"kernel_shape", Ints{3, 2}}, {"strides", Ints{2, 3}}, {"dilations", Ints{2, 1}},
                              {"ceil_mode", int64_t{1}}, {"pads", Ints{1, 0, 1, 1}}}));
}

TEST(GpuPoolLoweringTest, AveragePool2d) {
  for (int64_t include_pad : {0, 1}) {
    SCOPED_TRACE(include_pad);
    CheckEverywhere(*PoolGraph("AveragePool", {2, 3, 10, 13},
                               {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}},
                                {"ceil_mode", int64_t{1}}, {"count_include_pad", include_pad}}));
  }
  CheckEverywhere(*PoolGraph("AveragePool", {1, 5, 8, 9},
                             {{"kernel_shape", Ints{2, 3}}, {"strides", Ints{2, 2}},
                              {"auto_pad", std::string("SAME_LOWER")}}));
  // A 7x7 global-like window: 49 taps, unrolled along the row, serial
  // beyond 8.
  CheckEverywhere(*PoolGraph("AveragePool", {2, 4, 9, 9}, {{"kernel_shape", Ints{9, 9}}}));
}

TEST(GpuPoolLoweringTest, OneAndThreeDimensionalPools) {
  CheckEverywhere(
      *PoolGraph("MaxPool", {2, 3, 29}, {{"kernel_shape", Ints{3}}, {"strides", Ints{2}}, {"pads", Ints{1, 1}}}));
  CheckEverywhere(*PoolGraph("AveragePool", {2, 3, 17},
                             {{"kernel_shape", Ints{4}}, {"strides", Ints{3}}, {"pads", Ints{2, 1}},
                              {"count_include_pad", int64_t{1}}}));
  for (const PoolCase& c : loop_ir_testing::ThreeDimensionalPoolCases()) CheckEverywhere(*PoolGraph(c));
}

TEST(GpuPoolLoweringTest, MaxPoolWithIndices) {
  for (const PoolCase& c : loop_ir_testing::MaxPoolWithIndicesCases()) {
    CheckEverywhere(*MaxPoolWithIndicesGraph(c.x, c.attrs));
  }
}

// The interpreter's MaxPool takes the first tap inside the input, then
// strictly greater ones: a NaN first tap stays (a NaN output, its index),
// a later NaN never wins, ties keep the first position, a window of -inf
// keeps its first tap's index, and a window of padding only (dilation past
// the input) gives -inf and index -1 within its plane.
TEST(GpuPoolLoweringTest, MaxPoolSpecialValues) {
  const Ints x = {1, 2, 6, 7};
  auto g = MaxPoolWithIndicesGraph(x, {{"kernel_shape", Ints{2, 2}},
                                       {"strides", Ints{2, 2}},
                                       {"pads", Ints{0, 0, 1, 3}},
                                       {"ceil_mode", int64_t{1}},
                                       {"dilations", Ints{1, 3}}});
  std::vector<float> data = codegen_testing::RandomData(codegen_testing::Product(x), 9, -2, 2);
  data[0] = NAN;                  // first tap of the first window
  data[7 + 3] = NAN;              // a later tap of another window
  for (int i = 14; i < 28; ++i) data[i] = -INFINITY;
  data[42 + 2] = data[42 + 5] = 3.0f;  // a tie
  CheckEverywhere(*g, {{"in0", Tensor::FromVector(DType::kFloat32, x, data)}});
}

// The epilogue reads the pool's value as computed; the pool's value is an
// output too.
TEST(GpuPoolLoweringTest, Epilogue) {
  GraphBuilder b;
  Value* x = b.Input({2, 6, 12, 14});
  Value* bias = b.Input({6, 1, 1});
  Value* p = b.Op("AveragePool", {x}, {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}});
  auto g = b.Finish({b.Op("Relu", {b.Op("Add", {p, bias})}), p});
  CheckEverywhere(*g);
}

// The default: outputs per thread along a row of 56 (vector stores) as
// long as 64K threads remain (two for one image of ResNet's stem pool, four
// for a batch of 4), blocks of 256; the taps of a 3x3 window unrolled.
TEST(GpuPoolLoweringTest, LoopIrOfTheDefault) {
  const Attrs stem = {{"kernel_shape", AttrValue(Ints{3, 3})}, {"strides", AttrValue(Ints{2, 2})},
                      {"pads", AttrValue(Ints{1, 1, 1, 1})}};
  auto g = PoolGraph("MaxPool", {1, 64, 112, 112}, stem);
  ScheduleConfig c = DefaultSchedule(*g, kSm90);
  EXPECT_EQ(c.ToString(), "bt=256,un=1,vw=2");
  absl::StatusOr<loop_ir::LoopFunc> f = LowerWorkload(*g, c, kSm90);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(loop_ir::GpuLaunchOf(*f).blocks, 64 * 56 * 28 / 256);
  const std::string text = loop_ir::Print(*f);
  EXPECT_NE(text.find("unrolled for (kh, 0, 3)"), std::string::npos) << text;
  EXPECT_NE(text.find("unrolled for (kw, 0, 3)"), std::string::npos) << text;
  EXPECT_NE(text.find("vectorized for (v, 0, 2)"), std::string::npos) << text;
  EXPECT_EQ(text.find("(ow < 56)"), std::string::npos) << "2 divides the row: no guard\n" << text;
  EXPECT_EQ(DefaultSchedule(*PoolGraph("MaxPool", {4, 64, 112, 112}, stem), kSm90).Get("vw", 0), 4);
  // A small map: one output per thread.
  auto small = PoolGraph("MaxPool", {1, 8, 8, 8}, {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}});
  EXPECT_EQ(DefaultSchedule(*small, kSm90).Get("vw", 0), 1);
}

TEST(GpuPoolLoweringTest, RefusesKnobsOutOfRange) {
  auto g = PoolGraph("MaxPool", {1, 4, 8, 8}, {{"kernel_shape", Ints{2, 2}}});
  for (const char* knobs : {"vw=3", "vw=8", "bt=48", "un=0", "rows=2"}) {
    EXPECT_EQ(ValidateSchedule(*g, *ScheduleConfig::Parse(knobs), kSm90).code(), absl::StatusCode::kInvalidArgument)
        << knobs;
  }
}

}  // namespace
}  // namespace kiln
