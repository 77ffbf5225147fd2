// Pool workloads on loop IR (compiler_core/codegen/loop_ir/lower_pool.h): MaxPool and
// AveragePool shape families, JIT-compiled at several schedule points, against
// the reference interpreter at rtol 1e-4 / atol 1e-5. The 3-D and
// MaxPool-with-Indices case lists are the GPU test's too (pool_cases.h).
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler_core/codegen/jit.h"
#include "compiler_core/codegen/loop_ir/loop_ir.h"
#include "compiler_core/codegen/loop_ir/lower_pool.h"
#include "compiler_core/codegen/loop_ir/printer.h"
#include "compiler_core/codegen/loop_ir/verifier.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/codegen/target.h"
#include "compiler_core/frontend/interpreter.h"
#include "compiler_core/frontend/shape_inference.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/loop_ir/lowering_testing.h"
#include "tests/compiler_core/codegen/loop_ir/pool_cases.h"

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

TEST(PoolLoweringTest, MaxPool3x3Stride2Pad1LikeResNet) {
  CheckPool(*PoolGraph("MaxPool", {1, 8, 20, 20},
                       {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}));
}

// A row's vectors run in three parts: the first, whose windows may start in
// the left padding (a first tap per lane), those whose windows start inside
// the input (their start a contiguous load: no per-lane first tap), and the
// ragged last vector, alone with the only guard on the output column. Every
// point matches the interpreter, with a left padding wider than a vector too.
TEST(PoolLoweringTest, RowVectorsInsideTheInputNeedNoPerLaneStartOrGuard) {
  CpuTarget target = CpuTarget::Host();
  const int64_t vw = target.FloatLanes();
  const int64_t w = 6 * vw + 5;  // 3 vw + 3 outputs a row: the first vector, two inside, a ragged one
  auto g = PoolGraph("MaxPool", {1, 3, 9, w},
                     {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}});
  ScheduleConfig c;
  c.Set("vw", vw);
  auto f = loop_ir::FindLowering(*g)->lower(*g, c, target);
  ASSERT_TRUE(f.ok()) << f.status();
  const std::string ir = loop_ir::Print(*f);
  const size_t inside = ir.find("for (owm_, 0, ");
  ASSERT_NE(inside, std::string::npos) << ir;
  const size_t taps = ir.find("for (kh_", inside);
  ASSERT_NE(taps, std::string::npos) << ir;
  // The window's start along W per lane, (ow * 2 - 1), takes no part there.
  const std::string run = ir.substr(inside, taps - inside);
  EXPECT_EQ(run.find("v_) * 2) - 1)"), std::string::npos) << ir;
  EXPECT_EQ(run.find("v_ * 2) - 1)"), std::string::npos) << ir;
  EXPECT_NE(ir.substr(0, inside).find("(v_ * 2) - 1)"), std::string::npos) << ir;  // the first vector's
  const std::string guard = absl::StrCat("+ v_) < ", (w + 2 - 3) / 2 + 1, "))");
  EXPECT_EQ(ir.find(guard), ir.rfind(guard)) << ir;
  EXPECT_NE(ir.find(guard), std::string::npos) << ir;
  CheckPool(*g);
  CheckPool(*PoolGraph("MaxPool", {1, 2, 7, w},
                       {{"kernel_shape", Ints{5, 5}}, {"pads", Ints{2, vw + 3, 2, vw + 3}}}));
}

TEST(PoolLoweringTest, MaxPool2x2NoPadOddSizes) {
  CheckPool(*PoolGraph("MaxPool", {2, 3, 9, 13}, {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}}));
}

TEST(PoolLoweringTest, MaxPoolCeilModeAndDilation) {
  CheckPool(*PoolGraph("MaxPool", {1, 4, 11, 12},
                       {{"kernel_shape", Ints{3, 2}}, {"strides", Ints{2, 3}}, {"dilations", Ints{2, 1}},
                        {"ceil_mode", int64_t{1}}, {"pads", Ints{1, 0, 1, 1}}}));
}

TEST(PoolLoweringTest, AveragePoolExcludePad) {
  CheckPool(*PoolGraph("AveragePool", {1, 5, 10, 17},
                       {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{1, 1}}, {"pads", Ints{1, 1, 1, 1}}}));
}

TEST(PoolLoweringTest, AveragePoolIncludePadCeilMode) {
  CheckPool(*PoolGraph("AveragePool", {1, 3, 9, 10},
                       {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}},
                        {"ceil_mode", int64_t{1}}, {"count_include_pad", int64_t{1}}}));
}

TEST(PoolLoweringTest, AveragePoolAutoPadSameLower) {
  CheckPool(*PoolGraph("AveragePool", {1, 2, 7, 8},
                       {{"kernel_shape", Ints{2, 3}}, {"strides", Ints{2, 2}},
                        {"auto_pad", std::string("SAME_LOWER")}}));
}

TEST(PoolLoweringTest, OneDimensionalMaxPool) {
  CheckPool(
      *PoolGraph("MaxPool", {2, 3, 29}, {{"kernel_shape", Ints{3}}, {"strides", Ints{2}}, {"pads", Ints{1, 1}}}));
}

TEST(PoolLoweringTest, MaxPoolWithReluEpilogue) {
  Builder b;
  Value* x = b.Input({1, 6, 12, 12});
  Value* p = b.Op("MaxPool", {x}, {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}});
  CheckPool(*b.Finish({b.Op("Relu", {p})}));
}

TEST(PoolLoweringTest, SpaceAndValidation) {
  auto g = PoolGraph("MaxPool", {1, 64, 112, 112},
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

TEST(PoolLoweringTest, ThreeDimensionalPools) {
  for (const PoolCase& c : ThreeDimensionalPoolCases()) CheckPool(*PoolGraph(c));
  auto g = PoolGraph("MaxPool", {1, 2, 4, 4, 4}, {{"kernel_shape", Ints{2, 2, 2}}});
  auto f = loop_ir::PoolLowering().lower(*g, DefaultSchedule(*g, CpuTarget::Host()), CpuTarget::Host());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE(loop_ir::Verify(*f).ok());
  EXPECT_NE(loop_ir::Print(*f).find("for (kd_, 0, 2)"), std::string::npos) << loop_ir::Print(*f);
}

// MaxPool(x) -> (Y, Indices) at every point of the space: values and flat
// argmax positions (row-major, or column-major with storage_order=1) equal the
// interpreter's. `special` (optional) rewrites the random data first.
// With `with_indices` false, MaxPool(x) -> Y alone (the value-only kernel).
void CheckMaxPoolWithIndices(const Ints& x, Attrs attrs,
                             const std::function<void(std::vector<float>&)>& special = nullptr,
                             bool with_indices = true) {
  std::unique_ptr<Graph> g =
      with_indices ? MaxPoolWithIndicesGraph(x, std::move(attrs)) : PoolGraph("MaxPool", x, std::move(attrs));
  CpuTarget target = CpuTarget::Host();
  ASSERT_EQ(WorkloadKind(*g), "pool") << g->ToText();
  std::vector<float> data = Random(Product(x), 3, -1.0f, 1.0f);
  if (special) special(data);
  std::map<std::string, Tensor> feeds;
  feeds.emplace("in0", Tensor::FromVector(DType::kFloat32, x, data));
  auto ref = Evaluate(*g, feeds);
  ASSERT_TRUE(ref.ok()) << ref.status();
  const Tensor& want_y = ref->at(g->outputs()[0]->name());
  const Tensor want_i = with_indices ? ref->at("ind") : Tensor();
  for (const ScheduleConfig& c : EnumerateSchedules(*g, target)) {
    SCOPED_TRACE(c.ToString());
    auto kernel = JitCompile(*g, c, target);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    std::vector<float> got_y(want_y.num_elements(), std::numeric_limits<float>::quiet_NaN());
    std::vector<int64_t> got_i(with_indices ? want_i.num_elements() : 0, -7);
    std::vector<void*> args = {data.data(), got_y.data()};
    if (with_indices) args.push_back(got_i.data());
    (*kernel)->Run(args.data(), 0, (*kernel)->num_tasks());
    for (size_t i = 0; i < got_y.size(); ++i) {
      const float w = want_y.data<float>()[i];
      if (std::isnan(w)) {
        ASSERT_TRUE(std::isnan(got_y[i])) << "element " << i << ": " << got_y[i];
      } else {
        ASSERT_EQ(got_y[i], w) << "element " << i;
      }
      if (with_indices) ASSERT_EQ(got_i[i], want_i.data<int64_t>()[i]) << "element " << i;
    }
  }
}

TEST(PoolLoweringTest, MaxPoolWithIndices) {
  for (const PoolCase& c : MaxPoolWithIndicesCases()) CheckMaxPoolWithIndices(c.x, c.attrs);
}

// As the reference (and ONNX Runtime) does: a window's first tap inside the
// input is taken, then any strictly greater one. So a NaN first tap stays,
// a later NaN never wins, and a window of -inf gives its first tap's index
// (not -1), with and without padding around it.
TEST(PoolLoweringTest, MaxPoolNaNAndMinusInfinityAsTheReference) {
  auto special = [](std::vector<float>& d) {
    for (size_t i = 0; i < d.size(); ++i) {
      if (i % 7 == 0) d[i] = std::numeric_limits<float>::quiet_NaN();
      if ((i / 3) % 5 == 1) d[i] = -std::numeric_limits<float>::infinity();
    }
  };
  auto all_minus_inf = [](std::vector<float>& d) {
    for (float& v : d) v = -std::numeric_limits<float>::infinity();
  };
  for (bool with_indices : {true, false}) {
    SCOPED_TRACE(with_indices ? "Y and Indices" : "Y alone");
    CheckMaxPoolWithIndices({1, 2, 8, 9}, {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}}, special,
                            with_indices);
    CheckMaxPoolWithIndices({1, 2, 9, 13},
                            {{"kernel_shape", Ints{3, 3}},
                             {"strides", Ints{2, 1}},
                             {"pads", Ints{1, 1, 1, 1}},
                             {"ceil_mode", int64_t{1}}},
                            special, with_indices);
    // Dilated taps after a padding wider than one of them: the first tap
    // inside is the second or third of the window.
    CheckMaxPoolWithIndices({1, 2, 11, 12},
                            {{"kernel_shape", Ints{3, 3}},
                             {"strides", Ints{1, 2}},
                             {"pads", Ints{3, 2, 1, 2}},
                             {"dilations", Ints{2, 2}}},
                            special, with_indices);
    // Stride above the kernel in ceil mode: the last window starts past the
    // input, wholly in the padding.
    CheckMaxPoolWithIndices({1, 1, 8, 8}, {{"kernel_shape", Ints{1, 1}}, {"strides", Ints{3, 3}}, {"ceil_mode", int64_t{1}}},
                            special, with_indices);
    CheckMaxPoolWithIndices({1, 1, 6, 6}, {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}}, all_minus_inf,
                            with_indices);
  }
}

}  // namespace
}  // namespace kiln
