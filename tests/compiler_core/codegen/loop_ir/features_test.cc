// Cost-model features: counts over hand-built loop IR, and what schedules of a
// real workload change in them.
#include "compiler_core/codegen/loop_ir/features.h"

#include <cmath>
#include <set>
#include <string>

#include "compiler_core/codegen/schedule_space.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/codegen_testing.h"

namespace kiln::loop_ir {
namespace {

using codegen_testing::MakeWorkload;

float Feature(const std::vector<float>& v, const std::string& name, size_t offset = 0) {
  const std::vector<std::string>& names = FeatureNames();
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return v.at(i - offset);
  }
  ADD_FAILURE() << "no feature " << name;
  return 0;
}

// Index of the first "ir." feature: LoopFuncFeatures returns only those.
size_t IrOffset() {
  const std::vector<std::string>& names = FeatureNames();
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i].rfind("ir.", 0) == 0) return i;
  }
  return names.size();
}

TEST(FeaturesTest, CountsAreWeightedByTripCountsAndLanes) {
  // parallel for (t, 0, 4) for (i, 0, 8) vectorized for (j, 0, 16)
  //   out[t*128 + i*16 + j] = exp(in[...]) * 2 + 1
  Buffer in = MakeBuffer("in", {512}, BufferRole::kInput, 0);
  Buffer out = MakeBuffer("out", {512}, BufferRole::kOutput, 1);
  Expr idx = Add(Add(Mul(Var("t"), IntImm(128)), Mul(Var("i"), IntImm(16))), Var("j"));
  Expr value = Add(Mul(Call("exp", {Load(in, idx)}), FloatImm(2)), FloatImm(1));
  Stmt body = For("t", IntImm(4),
                  For("i", IntImm(8), For("j", IntImm(16), Store(out, idx, value), ForKind::kVectorized)),
                  ForKind::kParallel);
  std::vector<float> v = LoopFuncFeatures(LoopFunc{"k", {in, out}, body});
  const size_t o = IrOffset();
  ASSERT_EQ(v.size(), FeatureNames().size() - o);
  EXPECT_FLOAT_EQ(Feature(v, "ir.tasks", o), std::log2(5.0f));
  // 2 float ops per element, 512 elements; 64 vector instructions.
  EXPECT_FLOAT_EQ(Feature(v, "ir.flops", o), std::log2(1.0f + 1024));
  EXPECT_FLOAT_EQ(Feature(v, "ir.vector_flops", o), std::log2(1.0f + 64));
  EXPECT_FLOAT_EQ(Feature(v, "ir.scalar_flops", o), 0.0f);
  EXPECT_FLOAT_EQ(Feature(v, "ir.vector_fraction", o), 1.0f);
  EXPECT_FLOAT_EQ(Feature(v, "ir.calls", o), std::log2(1.0f + 512));
  EXPECT_FLOAT_EQ(Feature(v, "ir.loads", o), std::log2(1.0f + 32));
  EXPECT_FLOAT_EQ(Feature(v, "ir.stores", o), std::log2(1.0f + 32));
  EXPECT_FLOAT_EQ(Feature(v, "ir.max_vector_lanes", o), std::log2(17.0f));
  EXPECT_FLOAT_EQ(Feature(v, "ir.max_depth", o), 3.0f);
  EXPECT_FLOAT_EQ(Feature(v, "ir.input_bytes", o), std::log2(1.0f + 2048));

  // The same kernel without the vector loop: scalar flops, no vector ones.
  Stmt scalar = For("t", IntImm(4), For("i", IntImm(8), For("j", IntImm(16), Store(out, idx, value))),
                    ForKind::kParallel);
  std::vector<float> s = LoopFuncFeatures(LoopFunc{"k", {in, out}, scalar});
  EXPECT_FLOAT_EQ(Feature(s, "ir.flops", o), std::log2(1.0f + 1024));
  EXPECT_FLOAT_EQ(Feature(s, "ir.scalar_flops", o), std::log2(1.0f + 1024));
  EXPECT_FLOAT_EQ(Feature(s, "ir.vector_fraction", o), 0.0f);
  EXPECT_FLOAT_EQ(Feature(s, "ir.loads", o), std::log2(1.0f + 512));
}

TEST(FeaturesTest, SchedulesOfAMatMulDifferWhereTheirKernelsDo) {
  CpuTarget target = CpuTarget::Host();
  auto mm = MakeWorkload("MatMul", {{64, 256}, {256, 256}}, {64, 256});
  std::vector<ScheduleConfig> space = EnumerateSchedules(*mm, target);
  ASSERT_GT(space.size(), 4u);
  std::set<std::string> distinct;  // as text: NaN does not order
  for (const ScheduleConfig& c : space) {
    auto v = ScheduleFeatures(*mm, c, target);
    ASSERT_TRUE(v.ok()) << c.ToString() << ": " << v.status();
    ASSERT_EQ(v->size(), FeatureNames().size());
    EXPECT_EQ(Feature(*v, "kind.matmul"), 1.0f);
    EXPECT_EQ(Feature(*v, "kind.conv"), 0.0f);
    EXPECT_EQ(Feature(*v, "knob.mr"), static_cast<float>(c.Get("mr", -1))) << c.ToString();
    EXPECT_TRUE(std::isnan(Feature(*v, "knob.dw")));
    std::string text;
    for (float x : *v) text += std::to_string(x) + ",";
    distinct.insert(text);
  }
  // Every point is a different kernel, so every point has its own vector.
  EXPECT_EQ(distinct.size(), space.size());
}

TEST(FeaturesTest, AConfigOutOfRangeIsAnError) {
  auto mm = MakeWorkload("MatMul", {{64, 256}, {256, 256}}, {64, 256});
  ScheduleConfig bad;
  bad.Set("mr", 1000);
  EXPECT_FALSE(ScheduleFeatures(*mm, bad, CpuTarget::Host()).ok());
}

}  // namespace
}  // namespace kiln::loop_ir

namespace kiln::loop_ir {
namespace {

// Every knob of every CPU and GPU space has its own column (a knob without
// one would be invisible to the cost model), and a GPU schedule's features
// carry its launch: blocks as tasks, threads per block, shared memory.
TEST(FeaturesTest, EveryKnobOfEverySpaceHasAColumnOnEveryTarget) {
  const std::set<std::string> names(FeatureNames().begin(), FeatureNames().end());
  std::vector<std::unique_ptr<Graph>> workloads;
  workloads.push_back(MakeWorkload("MatMul", {{64, 96}, {96, 80}}, {64, 80}));
  workloads.push_back(MakeWorkload("MatMul", {{1, 512}, {512, 300}}, {1, 300}));
  workloads.push_back(MakeWorkload("Relu", {{3, 33}}, {3, 33}));
  workloads.push_back(MakeWorkload("Softmax", {{8, 100}}, {8, 100}, {{"axis", AttrValue(int64_t{-1})}}));
  workloads.push_back(MakeWorkload("Conv", {{1, 8, 12, 12}, {16, 8, 3, 3}}, {1, 16, 12, 12},
                                   {{"pads", AttrValue(std::vector<int64_t>{1, 1, 1, 1})}}));
  workloads.push_back(MakeWorkload("Conv", {{1, 8, 12, 12}, {8, 1, 3, 3}}, {1, 8, 12, 12},
                                   {{"pads", AttrValue(std::vector<int64_t>{1, 1, 1, 1})},
                                    {"group", AttrValue(int64_t{8})}}));
  for (const auto& g : workloads) {
    for (const Target& target : {Target(CpuTarget::Host()), Target(GpuTarget{90})}) {
      std::vector<ScheduleConfig> space = EnumerateSchedules(*g, target);
      ASSERT_FALSE(space.empty()) << target.Key() << "\n" << g->ToText();
      for (const ScheduleConfig& c : space) {
        for (const auto& [knob, value] : c.knobs) {
          EXPECT_TRUE(names.count("knob." + knob)) << "knob " << knob << " of " << c.ToString() << " on "
                                                   << target.Key() << " has no feature column";
        }
      }
      absl::StatusOr<std::vector<float>> v = ScheduleFeatures(*g, space.front(), target);
      ASSERT_TRUE(v.ok()) << v.status();
      if (target.is_gpu()) {
        EXPECT_GT(Feature(*v, "ir.gpu_threads"), 0.0f) << space.front().ToString();
      } else {
        EXPECT_EQ(Feature(*v, "ir.gpu_threads"), 0.0f);
      }
    }
  }
}

}  // namespace
}  // namespace kiln::loop_ir
