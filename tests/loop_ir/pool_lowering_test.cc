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
  std::map<std::string, Tensor> feeds;
  std::vector<std::vector<float>> inputs;
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const Value* v = g.inputs()[i];
    Ints dims = v->type().StaticDims();
    inputs.push_back(Random(Product(dims), 7 + static_cast<uint32_t>(i), i == 0 ? -1.0f : -0.5f,
                            i == 0 ? 1.0f : 0.5f));
    feeds.emplace(v->name(), Tensor::FromVector(DType::kFloat32, dims, inputs.back()));
  }
  auto ref = Evaluate(g, feeds);
  ASSERT_TRUE(ref.ok()) << ref.status();
  for (const ScheduleConfig& config : configs) {
    SCOPED_TRACE(absl::StrCat("schedule ", config.ToString(), "\n", g.ToText()));
    ASSERT_TRUE(ValidateSchedule(g, config, target).ok());
    auto kernel = JitCompile(g, config, target);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    const JitKernel& k = **kernel;
    std::vector<std::vector<float>> outs;
    std::vector<void*> args;
    for (auto& in : inputs) args.push_back(in.data());
    for (const Value* v : g.outputs()) {
      outs.emplace_back(Product(v->type().StaticDims()), std::numeric_limits<float>::quiet_NaN());
    }
    for (auto& o : outs) args.push_back(o.data());
    ASSERT_EQ(k.num_args(), static_cast<int>(args.size()));
    int64_t t = k.num_tasks();
    int64_t a = t / 3, b = a + (t - a) * 3 / 4;
    k.Run(args.data(), b, t);
    k.Run(args.data(), 0, a);
    k.Run(args.data(), a, b);
    for (size_t o = 0; o < outs.size(); ++o) {
      const Tensor& want = ref->at(g.outputs()[o]->name());
      ASSERT_EQ(want.num_elements(), static_cast<int64_t>(outs[o].size()));
      const float* w = want.data<float>();
      int bad = 0;
      for (size_t i = 0; i < outs[o].size() && bad < 5; ++i) {
        float got = outs[o][i];
        if (!(std::fabs(got - w[i]) <= 1e-5f + 1e-4f * std::fabs(w[i]))) {
          ADD_FAILURE() << "output " << o << " element " << i << ": got " << got << " want " << w[i];
          ++bad;
        }
      }
    }
  }
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
