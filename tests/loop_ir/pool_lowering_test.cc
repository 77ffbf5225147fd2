// Pool workloads on loop IR (compiler_core/loop_ir/lower_pool.h): MaxPool and
// AveragePool shape families, JIT-compiled at several schedule points, against
// the reference interpreter at rtol 1e-4 / atol 1e-5.
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler_core/interpreter.h"
#include "compiler_core/jit.h"
#include "compiler_core/loop_ir/lower_pool.h"
#include "compiler_core/schedule_space.h"
#include "compiler_core/shape_inference.h"
#include "compiler_core/target.h"
#include "gtest/gtest.h"
#include "tests/loop_ir/lowering_testing.h"

namespace kiln {
namespace {

using namespace loop_ir_testing;  // NOLINT: test helpers

// Inputs: in0 the data in [-1, 1], the rest (epilogue operands) in
// [-0.5, 0.5]; tasks run in three uneven ranges.
void CheckPool(const Graph& g) {
  CpuTarget target = CpuTarget::Host();
  ASSERT_EQ(WorkloadKind(g), "pool") << g.ToText();
  ASSERT_TRUE(CanCompile(g));
  std::vector<ScheduleConfig> configs = Points(g, target);
  ASSERT_FALSE(configs.empty());
  CheckConfigsAgainstInterpreter(g, configs, target);
}

// pool(x) with the given attributes.
std::unique_ptr<Graph> Pool(const std::string& op, Ints x, Attrs attrs) {
  Builder b;
  Value* in = b.Input(x);
  return b.Finish({b.Op(op, {in}, std::move(attrs))});
}

TEST(PoolLoweringTest, MaxPool3x3Stride2Pad1LikeResNet) {
  CheckPool(*Pool("MaxPool", {1, 8, 20, 20},
                  {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}));
}

TEST(PoolLoweringTest, MaxPool2x2NoPadOddSizes) {
  CheckPool(*Pool("MaxPool", {2, 3, 9, 13}, {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}}));
}

TEST(PoolLoweringTest, MaxPoolCeilModeAndDilation) {
  CheckPool(*Pool("MaxPool", {1, 4, 11, 12},
                  {{"kernel_shape", Ints{3, 2}}, {"strides", Ints{2, 3}}, {"dilations", Ints{2, 1}},
                   {"ceil_mode", int64_t{1}}, {"pads", Ints{1, 0, 1, 1}}}));
}

TEST(PoolLoweringTest, AveragePoolExcludePad) {
  CheckPool(*Pool("AveragePool", {1, 5, 10, 17},
                  {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{1, 1}}, {"pads", Ints{1, 1, 1, 1}}}));
}

TEST(PoolLoweringTest, AveragePoolIncludePadCeilMode) {
  CheckPool(*Pool("AveragePool", {1, 3, 9, 10},
                  {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}},
                   {"ceil_mode", int64_t{1}}, {"count_include_pad", int64_t{1}}}));
}

TEST(PoolLoweringTest, AveragePoolAutoPadSameLower) {
  CheckPool(*Pool("AveragePool", {1, 2, 7, 8},
                  {{"kernel_shape", Ints{2, 3}}, {"strides", Ints{2, 2}}, {"auto_pad", std::string("SAME_LOWER")}}));
}

TEST(PoolLoweringTest, OneDimensionalMaxPool) {
  CheckPool(*Pool("MaxPool", {2, 3, 29}, {{"kernel_shape", Ints{3}}, {"strides", Ints{2}}, {"pads", Ints{1, 1}}}));
}

TEST(PoolLoweringTest, MaxPoolWithReluEpilogue) {
  Builder b;
  Value* x = b.Input({1, 6, 12, 12});
  Value* p = b.Op("MaxPool", {x}, {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}});
  CheckPool(*b.Finish({b.Op("Relu", {p})}));
}

TEST(PoolLoweringTest, SpaceAndValidation) {
  auto g = Pool("MaxPool", {1, 64, 112, 112},
                {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}});
  CpuTarget target = CpuTarget::Host();
  std::vector<ScheduleConfig> space = EnumerateSchedules(*g, target);
  EXPECT_GE(space.size(), 2u);
  for (const ScheduleConfig& c : space) EXPECT_TRUE(ValidateSchedule(*g, c, target).ok()) << c.ToString();
  ScheduleConfig bad;
  bad.Set("kb", 4);
  EXPECT_EQ(ValidateSchedule(*g, bad, target).code(), absl::StatusCode::kInvalidArgument);
  bad = ScheduleConfig();
  bad.Set("vw", 3);
  EXPECT_EQ(ValidateSchedule(*g, bad, target).code(), absl::StatusCode::kInvalidArgument);
}

TEST(PoolLoweringTest, RefusesThreeDimensionalPools) {
  auto g = Pool("MaxPool", {1, 2, 4, 4, 4}, {{"kernel_shape", Ints{2, 2, 2}}});
  EXPECT_FALSE(loop_ir::PoolLowering().match(*g).ok());
  EXPECT_FALSE(CanCompile(*g));
}

}  // namespace
}  // namespace kiln
