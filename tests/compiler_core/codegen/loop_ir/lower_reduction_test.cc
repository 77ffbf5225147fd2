// Reduction lowering: multi-stage row-wise workloads (softmax, layer norm,
// decomposed softmax, consumers after the reduction, a batch of one through
// data movement) fused per block of rows and run in parallel, and softmax's exp written once; LayerNormalization's
// Mean/InvStdDev outputs and InstanceNormalization at odd sizes; softmax on
// -inf, large negative and NaN inputs, and its exp's accuracy. Checked
// against the reference interpreter (or double precision) at every schedule
// point, tasks run in two halves.
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <tuple>

#include "compiler_core/codegen/jit.h"
#include "compiler_core/codegen/kernel_emitter.h"
#include "compiler_core/codegen/loop_ir/lower.h"
#include "compiler_core/codegen/loop_ir/printer.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/frontend/interpreter.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/loop_ir/lowering_testing.h"

namespace kiln {
namespace {

using Builder = loop_ir_testing::TypedBuilder;
using loop_ir_testing::Count;

// Every schedule point matches Evaluate; returns the largest task count seen.
int64_t CheckAllPoints(const Graph& g) {
  CpuTarget target = CpuTarget::Host();
  EXPECT_EQ(WorkloadKind(g), "reduction") << g.ToText();
  return codegen_testing::CheckConfigsAgainstInterpreter(g, codegen_testing::RandomFeeds(g, 11, -3, 3),
                                                         EnumerateSchedules(g, target), target);
}

TEST(ReductionLoweringTest, SingleRowWiseOpsAtBenchLikeShapes) {
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    Builder b;
    Value* x = b.In({37, 129});
    b.g->AddOutput(b.Op(op, {x}, {37, 129}, {{"axis", int64_t{-1}}}));
    EXPECT_GT(CheckAllPoints(*b.g), 1) << op;
  }
  Builder b;
  Value* x = b.In({33, 2, 77});
  Value* sc = b.In({77});
  Value* bi = b.In({2, 77});
  b.g->AddOutput(b.Op("LayerNormalization", {x, sc, bi}, {33, 2, 77}, {{"axis", int64_t{1}}}));
  EXPECT_GT(CheckAllPoints(*b.g), 1);
}

TEST(ReductionLoweringTest, SoftmaxWithConsumerRunsInParallel) {
  Builder b;
  Value* x = b.In({37, 129});
  Value* y = b.Op("Softmax", {x}, {37, 129}, {{"axis", int64_t{-1}}});
  Value* z = b.Op("Mul", {y, x}, {37, 129});
  b.g->AddOutput(z);
  b.g->AddOutput(y);
  EXPECT_GT(CheckAllPoints(*b.g), 1);
}

TEST(ReductionLoweringTest, LayerNormWithConsumerRunsInParallel) {
  Builder b;
  Value* x = b.In({64, 100});
  Value* sc = b.In({100});
  Value* y = b.Op("LayerNormalization", {x, sc}, {64, 100}, {{"axis", int64_t{-1}}});
  Value* z = b.Op("Relu", {y}, {64, 100});
  b.g->AddOutput(z);
  EXPECT_GT(CheckAllPoints(*b.g), 1);
}

TEST(ReductionLoweringTest, DecomposedSoftmaxRunsInParallel) {
  Builder b;
  Value* x = b.In({45, 101});
  Value* m = b.Op("ReduceMax", {x}, {45, 1}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{1}}});
  Value* d = b.Op("Sub", {x, m}, {45, 101});
  Value* e = b.Op("Exp", {d}, {45, 101});
  Value* s = b.Op("ReduceSum", {e}, {45, 1}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{1}}});
  Value* y = b.Op("Div", {e, s}, {45, 101});
  b.g->AddOutput(y);
  EXPECT_GT(CheckAllPoints(*b.g), 1);
}

TEST(ReductionLoweringTest, CrossRowConsumerStaysSerial) {
  // The reduced result is broadcast over rows: not row-local, one task.
  Builder b;
  Value* x = b.In({64, 100});
  Value* m = b.Op("ReduceSum", {x}, {1, 100}, {{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t{1}}});
  Value* y = b.Op("Sub", {x, m}, {64, 100});
  b.g->AddOutput(y);
  EXPECT_EQ(CheckAllPoints(*b.g), 1);
}

// A batch of one: the rows are the first axis of more than one element.
// MixNet's squeeze-excite (Concat -> x * sigmoid(x) -> ReduceMean over the
// map -> Reshape, both results outputs) runs its channels in parallel; a
// transpose that moves them keeps them rows.
TEST(ReductionLoweringTest, BatchOfOneRunsChannelsInParallelThroughDataMovement) {
  Builder b;
  Value* x0 = b.In({1, 12, 15, 16});
  Value* x1 = b.In({1, 20, 15, 16});
  Value* c = b.Op("Concat", {x0, x1}, {1, 32, 15, 16}, {{"axis", int64_t{1}}});
  Value* sg = b.Op("Sigmoid", {c}, {1, 32, 15, 16});
  Value* sw = b.Op("Mul", {c, sg}, {1, 32, 15, 16});
  Value* m = b.Op("ReduceMean", {sw}, {1, 32, 1, 1},
                  {{"axes", std::vector<int64_t>{2, 3}}, {"keepdims", int64_t{1}}});
  Value* shape = *b.g->AddConstant("shape", Tensor::FromVector(DType::kInt64, {2}, std::vector<int64_t>{1, 32}));
  Value* r = b.Op("Reshape", {m, shape}, {1, 32});
  b.g->AddOutput(sw);
  b.g->AddOutput(r);
  EXPECT_GT(CheckAllPoints(*b.g), 1);

  Builder t;
  Value* x = t.In({1, 96, 50});
  Value* mx = t.Op("ReduceMax", {x}, {1, 96, 1}, {{"axes", std::vector<int64_t>{2}}, {"keepdims", int64_t{1}}});
  Value* tr = t.Op("Transpose", {mx}, {1, 1, 96}, {{"perm", std::vector<int64_t>{0, 2, 1}}});
  t.g->AddOutput(t.Op("Exp", {tr}, {1, 1, 96}));
  EXPECT_GT(CheckAllPoints(*t.g), 1);
}

// Where a value computed from a stage is read across rows, one task: the row
// maxima transposed and broadcast back over the rows, and a softmax over the
// first wide axis (its rows) of a batch of one.
TEST(ReductionLoweringTest, BatchOfOneCrossRowReadsStaySerial) {
  Builder b;
  Value* x = b.In({1, 64, 64});
  Value* mx = b.Op("ReduceMax", {x}, {1, 64, 1}, {{"axes", std::vector<int64_t>{2}}, {"keepdims", int64_t{1}}});
  Value* tr = b.Op("Transpose", {mx}, {1, 1, 64}, {{"perm", std::vector<int64_t>{0, 2, 1}}});
  b.g->AddOutput(b.Op("Sub", {x, tr}, {1, 64, 64}));
  EXPECT_EQ(CheckAllPoints(*b.g), 1);

  Builder s;
  Value* y = s.In({1, 64, 96});
  Value* sm = s.Op("Softmax", {y}, {1, 64, 96}, {{"axis", int64_t{1}}});
  Value* sum = s.Op("ReduceSum", {sm}, {1, 1, 96}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{1}}});
  s.g->AddOutput(sm);
  s.g->AddOutput(sum);
  EXPECT_EQ(CheckAllPoints(*s.g), 1);
}

// LayerNormalization with its Mean and InvStdDev outputs, for every axis form
// (axis 0 normalizes everything: one row), odd sizes, scale/bias of the
// normalized shape.
TEST(ReductionLoweringTest, LayerNormWithMeanAndInvStdDev) {
  std::vector<int64_t> d = {3, 5, 19};
  for (int64_t axis : {-1, 1, -3, 0, 2}) {
    SCOPED_TRACE(axis);
    int64_t a = axis < 0 ? axis + 3 : axis;
    std::vector<int64_t> nd(d.begin() + a, d.end()), sd = d;
    for (int64_t i = a; i < 3; ++i) sd[i] = 1;
    Builder b;
    Value* x = b.In(d);
    Value* sc = b.In(nd);
    Value* bi = b.In(nd);
    Value* y = *b.g->AddValue("y", TensorType::Static(DType::kFloat32, d));
    Value* mean = *b.g->AddValue("mean", TensorType::Static(DType::kFloat32, sd));
    Value* inv = *b.g->AddValue("inv", TensorType::Static(DType::kFloat32, sd));
    ASSERT_TRUE(b.g->AddNode("LayerNormalization", "ln", {x, sc, bi}, {y, mean, inv},
                             {{"axis", axis}, {"epsilon", 0.1f}})
                    .ok());
    b.g->AddOutput(y);
    b.g->AddOutput(mean);
    b.g->AddOutput(inv);
    EXPECT_GE(CheckAllPoints(*b.g), 1);
  }
}

// Y feeds a consumer, Mean is an output, InvStdDev is computed but unused (a
// temp); the row-local stages still run in parallel.
TEST(ReductionLoweringTest, LayerNormMeanOnlyWithConsumer) {
  Builder b;
  Value* x = b.In({64, 100});
  Value* sc = b.In({100});
  Value* y = *b.g->AddValue("y", TensorType::Static(DType::kFloat32, {64, 100}));
  Value* mean = *b.g->AddValue("mean", TensorType::Static(DType::kFloat32, {64, 1}));
  Value* inv = *b.g->AddValue("inv", TensorType::Static(DType::kFloat32, {64, 1}));
  ASSERT_TRUE(b.g->AddNode("LayerNormalization", "ln", {x, sc}, {y, mean, inv}, {{"axis", int64_t{-1}}}).ok());
  Value* z = b.Op("Relu", {y}, {64, 100});
  b.g->AddOutput(z);
  b.g->AddOutput(mean);
  EXPECT_GT(CheckAllPoints(*b.g), 1);
}

TEST(ReductionLoweringTest, InstanceNormalization) {
  for (std::vector<int64_t> d : std::vector<std::vector<int64_t>>{{2, 3, 4, 5}, {3, 5, 37}, {1, 2, 1, 3}}) {
    Builder b;
    Value* x = b.In(d);
    Value* sc = b.In({d[1]});
    Value* bi = b.In({d[1]});
    b.g->AddOutput(b.Op("InstanceNormalization", {x, sc, bi}, d, {{"epsilon", 0.01f}}));
    EXPECT_GE(CheckAllPoints(*b.g), 1);
  }
}

// Trailing reduced axes of a workload input reduce as one flat run (a 14x14
// map: one sweep of 196 in 12 whole vectors and a 4-lane tail, not 14 masked
// rows of 14); axes that are not
// trailing, a computed input and LayerNormalization keep their loops. Every
// schedule point matches the interpreter either way.
TEST(ReductionLoweringTest, TrailingAxesOfAnInputReduceAsOneRun) {
  auto lowered = [](const Graph& g) {
    auto f = LowerWorkload(g, DefaultSchedule(g, CpuTarget::Host()), CpuTarget::Host());
    EXPECT_TRUE(f.ok()) << f.status();
    return f.ok() ? loop_ir::Print(*f) : std::string();
  };
  {
    Builder b;
    b.g->AddOutput(b.Op("GlobalAveragePool", {b.In({1, 5, 14, 14})}, {1, 5, 1, 1}));
    CheckAllPoints(*b.g);
    std::string text = lowered(*b.g);
    EXPECT_NE(text.find("(192 + "), std::string::npos) << text;  // 3 steps of 4 vectors, then the last 4
    EXPECT_EQ(text.find("< 14)"), std::string::npos) << text;
  }
  {
    Builder b;  // the same pool of a computed value: per row
    b.g->AddOutput(b.Op("GlobalMaxPool", {b.Op("Relu", {b.In({1, 5, 14, 14})}, {1, 5, 14, 14})}, {1, 5, 1, 1}));
    CheckAllPoints(*b.g);
    EXPECT_NE(lowered(*b.g).find("< 14)"), std::string::npos) << lowered(*b.g);
  }
  for (const auto& [dims, axes, out] :
       std::vector<std::tuple<std::vector<int64_t>, std::vector<int64_t>, std::vector<int64_t>>>{
           {{3, 4, 5}, {1, 2}, {3, 1, 1}},
           {{3, 4, 5}, {0, 2}, {1, 4, 1}},
           {{2, 3, 7, 9, 2}, {2, 3, 4}, {2, 3, 1, 1, 1}}}) {
    for (const char* op : {"ReduceMean", "ReduceMax", "ReduceL2"}) {
      SCOPED_TRACE(op);
      Builder b;
      b.g->AddOutput(b.Op(op, {b.In(dims)}, out, {{"axes", axes}}));
      CheckAllPoints(*b.g);
    }
  }
  Builder b;
  Value* x = b.In({6, 3, 11});
  b.g->AddOutput(b.Op("LayerNormalization", {x, b.In({3, 11}), b.In({3, 11})}, {6, 3, 11}, {{"axis", int64_t{1}}}));
  CheckAllPoints(*b.g);
}

// A 7x7 map reduces as one run of 49: its space offers the widest vectors,
// though a row is 7, and the guarded tail adds into the accumulator as a
// blend, so the accumulator stays in registers (a masked store into it made
// each row's horizontal sum wait for the store: 1152 rows took 13.7 us, now
// 1.6 us).
TEST(ReductionLoweringTest, ShortRunsUseWideVectorsAndKeepTheirAccumulatorInRegisters) {
  const CpuTarget target = CpuTarget::Host();
  Builder b;
  b.g->AddOutput(b.Op("GlobalAveragePool", {b.In({1, 40, 7, 7})}, {1, 40, 1, 1}));
  CheckAllPoints(*b.g);
  int64_t widest = 0;
  for (const ScheduleConfig& c : EnumerateSchedules(*b.g, target)) widest = std::max(widest, c.Get("vw", 1));
  EXPECT_EQ(widest, target.FloatLanes());
  const ScheduleConfig c = DefaultSchedule(*b.g, target);
  EXPECT_EQ(c.Get("vw", 1), target.FloatLanes()) << c.ToString();
  auto k = JitCompile(*b.g, c, target);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ((*k)->llvm_ir().find("llvm.masked.store"), std::string::npos) << (*k)->llvm_ir();
  EXPECT_NE((*k)->llvm_ir().find("llvm.masked.load"), std::string::npos) << "the input's tail is still guarded";
}

// Softmax rows with -inf (masked), very negative (denormal or zero exp), one
// NaN (NaN row in the reference) and all -inf (NaN row) entries; every
// schedule point agrees with the interpreter, NaN for NaN.
TEST(ReductionLoweringTest, SoftmaxSpecialValues) {
  const int64_t rows = 6, cols = 53;
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    SCOPED_TRACE(op);
    Builder b;
    Value* x = b.In({rows, cols});
    b.g->AddOutput(b.Op(op, {x}, {rows, cols}, {{"axis", int64_t{-1}}}));
    std::vector<float> in(rows * cols);
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> dist(-4, 4);
    for (auto& v : in) v = dist(rng);
    for (int64_t c = 0; c < cols; c += 3) in[0 * cols + c] = -INFINITY;  // masked entries
    for (int64_t c = 0; c < cols; ++c) in[1 * cols + c] = -95.0f - c;  // down to exp underflow
    in[1 * cols + 7] = 0;
    in[2 * cols + 11] = NAN;
    for (int64_t c = 0; c < cols; ++c) in[3 * cols + c] = -INFINITY;
    for (int64_t c = 0; c < cols; ++c) in[4 * cols + c] = 80.0f + 0.1f * c;  // large, shifted by max
    auto ref = Evaluate(*b.g, {{"x0", Tensor::FromVector(DType::kFloat32, {rows, cols}, in)}});
    ASSERT_TRUE(ref.ok()) << ref.status();
    const float* want = ref->at(b.g->outputs()[0]->name()).data<float>();
    CpuTarget target = CpuTarget::Host();
    for (const ScheduleConfig& c : EnumerateSchedules(*b.g, target)) {
      SCOPED_TRACE(c.ToString());
      auto k = JitCompile(*b.g, c, target);
      ASSERT_TRUE(k.ok()) << k.status();
      std::vector<float> out(rows * cols, 1234.0f);
      std::vector<void*> args = {in.data(), out.data()};
      int64_t t = (*k)->num_tasks();
      (*k)->Run(args.data(), 0, t);
      for (int64_t i = 0; i < rows * cols; ++i) {
        if (std::isnan(want[i])) {
          EXPECT_TRUE(std::isnan(out[i])) << "element " << i;
        } else if (std::isinf(want[i])) {
          EXPECT_EQ(out[i], want[i]) << "element " << i;
        } else {
          EXPECT_NEAR(out[i], want[i], 1e-6 + 1e-5 * std::fabs(want[i])) << "element " << i;
        }
      }
    }
  }
}

// Softmax's exp(x - max) takes exp's cheaper form for non-positive
// arguments (loop_ir.h: exp_nonpositive): over a dense grid of x - max in
// [-87.3, 0] each output that is a normal float, divided by the row
// maximum's (exp(0) / sum), is exp(x - max) to 4e-7 relative; below
// ln(2^-126) the output is exactly 0.
TEST(ReductionLoweringTest, SoftmaxExpKeepsItsAccuracy) {
  const int64_t cols = 8009;
  Builder b;
  Value* x = b.In({1, cols});
  b.g->AddOutput(b.Op("Softmax", {x}, {1, cols}, {{"axis", int64_t{-1}}}));
  std::vector<float> in(cols);
  for (int64_t i = 0; i < cols - 3; ++i) in[i] = -87.3f * static_cast<float>(i) / (cols - 4) + 3.0f;
  in[cols - 3] = 3.0f - 87.5f;
  in[cols - 2] = 3.0f - 100.0f;
  in[cols - 1] = -INFINITY;
  CpuTarget target = CpuTarget::Host();
  for (const ScheduleConfig& c : EnumerateSchedules(*b.g, target)) {
    SCOPED_TRACE(c.ToString());
    auto k = JitCompile(*b.g, c, target);
    ASSERT_TRUE(k.ok()) << k.status();
    std::vector<float> out(cols, 1234.0f);
    std::vector<void*> args = {in.data(), out.data()};
    (*k)->Run(args.data(), 0, (*k)->num_tasks());
    double worst = 0;
    int64_t at = 0;
    for (int64_t i = 0; i < cols - 3; ++i) {
      if (out[i] < 0x1p-126f) continue;  // a denormal output: the scaling rounds it
      const double want = std::exp(static_cast<double>(in[i]) - 3.0);
      const double err = std::fabs(static_cast<double>(out[i]) / out[0] - want) / want;
      if (err > worst) worst = err, at = i;
    }
    EXPECT_LE(worst, 4e-7) << "worst at x - max = " << in[at] - 3.0f;
    EXPECT_EQ(out[cols - 3], 0.0f);
    EXPECT_EQ(out[cols - 2], 0.0f);
    EXPECT_EQ(out[cols - 1], 0.0f);
  }
}

}  // namespace
}  // namespace kiln
