// Loop-IR kinds end to end: workload graph -> loop IR -> LLVM -> JIT, checked
// against the reference interpreter on random shapes (odd sizes included) at
// every schedule point.
#include <cmath>
#include <map>
#include <memory>
#include <random>

#include <sys/mman.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "compiler_core/codegen/jit.h"
#include "compiler_core/codegen/loop_ir/llvm_lowering.h"
#include "compiler_core/codegen/loop_ir/lower.h"
#include "compiler_core/codegen/loop_ir/printer.h"
#include "compiler_core/codegen/loop_ir/verifier.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/frontend/interpreter.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/loop_ir/lowering_testing.h"

namespace kiln {
namespace {

using Builder = loop_ir_testing::TypedBuilder;
using codegen_testing::Occurrences;
using loop_ir_testing::Count;

// JITs every schedule point and compares all outputs with Evaluate.
void CheckAllPoints(const Graph& g, const std::string& want_kind) {
  CpuTarget target = CpuTarget::Host();
  ASSERT_EQ(WorkloadKind(g), want_kind) << g.ToText();
  ASSERT_TRUE(CanCompile(g));
  std::vector<ScheduleConfig> space = EnumerateSchedules(g, target);
  ASSERT_FALSE(space.empty());
  ScheduleConfig def = DefaultSchedule(g, target);
  EXPECT_NE(std::find(space.begin(), space.end(), def), space.end());
  codegen_testing::CheckConfigsAgainstInterpreter(g, codegen_testing::RandomFeeds(g, 7, -2, 2), space, target);
}

TEST(LoopIrLoweringTest, ReduceOps) {
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceL2", "ReduceSumSquare",
                         "ReduceL1"}) {
    for (auto [dims, axes, keep] : std::vector<std::tuple<std::vector<int64_t>, std::vector<int64_t>, int64_t>>{
             {{3, 37}, {1}, 1}, {{5, 7, 19}, {0, 2}, 0}, {{4, 9}, {0}, 1}, {{2, 3, 5}, {-1, -2}, 0}}) {
      SCOPED_TRACE(std::string(op));
      Builder b;
      Value* x = b.In(dims);
      std::vector<int64_t> out;
      for (int64_t d = 0; d < static_cast<int64_t>(dims.size()); ++d) {
        bool red = false;
        for (int64_t a : axes) red = red || (a < 0 ? a + static_cast<int64_t>(dims.size()) : a) == d;
        if (!red) out.push_back(dims[d]);
        else if (keep) out.push_back(1);
      }
      Value* y = b.Op(op, {x}, out, {{"axes", axes}, {"keepdims", keep}});
      b.g->AddOutput(y);
      CheckAllPoints(*b.g, "reduction");
    }
  }
}

TEST(LoopIrLoweringTest, ReduceProdSmallValues) {
  Builder b;
  Value* x = b.In({3, 5});
  Value* y = b.Op("ReduceProd", {x}, {3}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}});
  b.g->AddOutput(y);
  CheckAllPoints(*b.g, "reduction");
}

TEST(LoopIrLoweringTest, FusedProducerReductionConsumer) {
  // exp(x * 2) summed over the last axis, then sqrt of the sum.
  Builder b;
  Value* x = b.In({6, 45});
  Value* s = b.In({1});
  Value* m = b.Op("Mul", {x, s}, {6, 45});
  Value* e = b.Op("Exp", {m}, {6, 45});
  Value* r = b.Op("ReduceSum", {e}, {6, 1}, {{"axes", std::vector<int64_t>{1}}});
  Value* q = b.Op("Sqrt", {r}, {6, 1});
  b.g->AddOutput(q);
  CheckAllPoints(*b.g, "reduction");
}

TEST(LoopIrLoweringTest, SoftmaxAndLogSoftmax) {
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    for (auto [dims, axis] : std::vector<std::pair<std::vector<int64_t>, int64_t>>{
             {{4, 33}, -1}, {{3, 5, 7}, 1}, {{2, 100}, 1}, {{1, 1}, 0}}) {
      Builder b;
      Value* x = b.In(dims);
      Value* y = b.Op(op, {x}, dims, {{"axis", axis}});
      b.g->AddOutput(y);
      CheckAllPoints(*b.g, "reduction");
    }
  }
}

TEST(LoopIrLoweringTest, LayerNormalization) {
  Builder b;
  Value* x = b.In({5, 3, 21});
  Value* sc = b.In({21});
  Value* bi = b.In({3, 21});
  Value* y = b.Op("LayerNormalization", {x, sc, bi}, {5, 3, 21}, {{"axis", int64_t{-2}}, {"epsilon", 1e-5f}});
  b.g->AddOutput(y);
  CheckAllPoints(*b.g, "reduction");
}

TEST(LoopIrLoweringTest, GlobalPoolsAndSoftmaxWithConsumer) {
  for (const char* op : {"GlobalAveragePool", "GlobalMaxPool"}) {
    Builder b;
    Value* x = b.In({2, 3, 7, 5});
    Value* y = b.Op(op, {x}, {2, 3, 1, 1});
    Value* z = b.Op("Relu", {y}, {2, 3, 1, 1});
    b.g->AddOutput(z);
    b.g->AddOutput(y);
    CheckAllPoints(*b.g, "reduction");
  }
  Builder b;
  Value* x = b.In({3, 10});
  Value* y = b.Op("Softmax", {x}, {3, 10}, {{"axis", int64_t{-1}}});
  Value* z = b.Op("Mul", {y, x}, {3, 10});
  b.g->AddOutput(z);
  CheckAllPoints(*b.g, "reduction");
}

TEST(LoopIrLoweringTest, DataMovement) {
  {
    Builder b;
    Value* x = b.In({3, 17, 5});
    Value* t = b.Op("Transpose", {x}, {5, 3, 17}, {{"perm", std::vector<int64_t>{2, 0, 1}}});
    Value* r = b.Op("Relu", {t}, {5, 3, 17});
    b.g->AddOutput(r);
    CheckAllPoints(*b.g, "data_movement");
  }
  {
    Builder b;
    Value* x = b.In({6, 35});
    Value* f = b.Op("Reshape", {x}, {2, 3, 5, 7});
    (void)f;
    // Reshape's shape input is a constant; the kernel reads the output type.
    b.g = std::make_unique<Graph>();
    b.count = 0;
    x = b.In({6, 35});
    Value* shape = *b.g->AddConstant("shape", Tensor::FromVector(DType::kInt64, {4}, std::vector<int64_t>{2, 3, 5, 7}));
    Value* rs = b.Op("Reshape", {x, shape}, {2, 3, 5, 7});
    Value* t = b.Op("Transpose", {rs}, {2, 5, 3, 7}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
    b.g->AddOutput(t);
    CheckAllPoints(*b.g, "data_movement");
  }
  {
    Builder b;
    Value* x = b.In({4, 20});
    Value* y = b.In({4, 3});
    Value* c = b.Op("Concat", {x, y}, {4, 23}, {{"axis", int64_t{1}}});
    b.g->AddOutput(c);
    CheckAllPoints(*b.g, "data_movement");
  }
  {
    Builder b;
    Value* x = b.In({5, 13});
    Value* pads = *b.g->AddConstant("pads", Tensor::FromVector(DType::kInt64, {4}, std::vector<int64_t>{1, 2, 1, 3}));
    Value* val = *b.g->AddConstant("val", Tensor::FromVector(DType::kFloat32, {}, std::vector<float>{0.5f}));
    Value* p = b.Op("Pad", {x, pads, val}, {7, 18});
    b.g->AddOutput(p);
    CheckAllPoints(*b.g, "data_movement");
  }
  {
    Builder b;
    Value* x = b.In({9, 31});
    Value* st = *b.g->AddConstant("st", Tensor::FromVector(DType::kInt64, {2}, std::vector<int64_t>{1, 2}));
    Value* en = *b.g->AddConstant("en", Tensor::FromVector(DType::kInt64, {2}, std::vector<int64_t>{8, 30}));
    Value* ax = *b.g->AddConstant("ax", Tensor::FromVector(DType::kInt64, {2}, std::vector<int64_t>{0, 1}));
    Value* sp = *b.g->AddConstant("sp", Tensor::FromVector(DType::kInt64, {2}, std::vector<int64_t>{2, 3}));
    Value* s = b.Op("Slice", {x, st, en, ax, sp}, {4, 10});
    b.g->AddOutput(s);
    CheckAllPoints(*b.g, "data_movement");
  }
}

// The printed loop IR of a data-movement workload at vw=4, tasks=2.
std::string DataMovementText(const Graph& g) {
  const loop_ir::WorkloadLowering* l = loop_ir::FindLowering(g);
  EXPECT_NE(l, nullptr);
  if (l == nullptr) return "";
  ScheduleConfig config;
  config.Set("vw", 4);
  config.Set("tasks", 2);
  auto f = l->lower(g, config, CpuTarget::Host());
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? loop_ir::Print(*f) : "";
}

// A Concat result is written slab by slab: each input's nest computes only
// its own elements (no select over the inputs), and the slabs share one
// parallel loop whose task t runs chunk t of each.
TEST(LoopIrLoweringTest, ConcatWritesOneSlabPerInput) {
  Builder b;
  std::vector<Value*> parts;
  for (int64_t rows : {24, 6, 1}) {
    Value* x = b.In({1, rows, 7});
    parts.push_back(b.Op("Transpose", {x}, {1, 7, rows}, {{"perm", std::vector<int64_t>{0, 2, 1}}}));
  }
  Value* c = b.Op("Concat", parts, {1, 7, 31}, {{"axis", int64_t{2}}});
  b.g->AddOutput(c);
  CheckAllPoints(*b.g, "data_movement");
  const std::string text = DataMovementText(*b.g);
  EXPECT_EQ(Occurrences(text, "parallel for"), 1) << text;
  EXPECT_EQ(text.find("select("), std::string::npos) << text;
  // One vectorized loop a slab, plus a narrower one for a slab's rows past
  // its whole vectors: no slab's rows are lane-masked (`_2v) < n` guards).
  EXPECT_GE(Occurrences(text, "vectorized for"), 3) << text;
  EXPECT_EQ(text.find("_2v) < "), std::string::npos) << text;
}

// An output computed elementwise from a Concat of its shape, its other
// operands workload inputs (DenseNet's Concat, BatchNormalization, Relu), is
// written slab by slab too: each slab evaluates the chain with the Concat
// pinned to its input. With a computed operand of the Concat's shape the
// Concat may be read elsewhere: one box, selects.
TEST(LoopIrLoweringTest, ElementwiseOverAConcatWritesOneSlabPerInput) {
  for (bool computed_operand : {false, true}) {
    SCOPED_TRACE(computed_operand ? "computed operand" : "per-channel operand");
    Builder b;
    std::vector<Value*> parts = {b.In({1, 5, 3, 9}), b.In({1, 2, 3, 9}), b.In({1, 4, 3, 9})};
    Value* c = b.Op("Concat", parts, {1, 11, 3, 9}, {{"axis", int64_t{1}}});
    Value* other = computed_operand ? b.Op("Neg", {b.In({1, 11, 3, 9})}, {1, 11, 3, 9}) : b.In({1, 11, 1, 1});
    Value* y = b.Op("Relu", {b.Op("Mul", {c, other}, {1, 11, 3, 9})}, {1, 11, 3, 9});
    b.g->AddOutput(y);
    CheckAllPoints(*b.g, "data_movement");
    const std::string text = DataMovementText(*b.g);
    EXPECT_EQ(Occurrences(text, "vectorized for"), computed_operand ? 1 : 3) << text;
    // A slab's store reads its own input only; one box's reads every input.
    int mixed = 0;
    for (const absl::string_view line : absl::StrSplit(text, '\n')) {
      mixed += absl::StrContains(line, "in0[") && absl::StrContains(line, "in1[");
    }
    EXPECT_EQ(mixed > 0, computed_operand) << text;
  }
}

TEST(LoopIrLoweringTest, LoopIrAndLlvmDumps) {
  Builder b;
  Value* x = b.In({4, 10});
  Value* y = b.Op("Softmax", {x}, {4, 10}, {{"axis", int64_t{-1}}});
  b.g->AddOutput(y);
  const loop_ir::WorkloadLowering* l = loop_ir::FindLowering(*b.g);
  ASSERT_NE(l, nullptr);
  ScheduleConfig c;
  c.Set("vw", 4);
  auto f = l->lower(*b.g, c, CpuTarget::Host());
  ASSERT_TRUE(f.ok()) << f.status();
  std::string text = loop_ir::Print(*f);
  EXPECT_NE(text.find("vectorized for"), std::string::npos) << text;
  EXPECT_NE(text.find("allocate"), std::string::npos) << text;
  auto ir = loop_ir::LowerToLlvmText(*f, CpuTarget::Host());
  ASSERT_TRUE(ir.ok()) << ir.status();
  EXPECT_NE(ir->find("@kiln_kernel(ptr"), std::string::npos);
  EXPECT_NE(ir->find("llvm.masked.store"), std::string::npos);
  EXPECT_EQ(ir->find("call float @exp"), std::string::npos);
}

// A guarded load of a stack temporary whose whole vector lies inside it is
// a plain load (lanes outside the guard are never stored), so a guarded
// accumulator stays promotable to registers; the guarded store to the
// output stays masked, and a guarded read of an argument stays masked.
TEST(LoopIrLoweringTest, GuardedReadOfATemporaryIsAPlainLoad) {
  using namespace loop_ir;  // NOLINT: IR builders
  Buffer in = MakeBuffer("in0", {8}, BufferRole::kInput, 0);
  Buffer out = MakeBuffer("out0", {8}, BufferRole::kOutput, 1);
  Buffer acc = MakeBuffer("acc", {8}, BufferRole::kTemp);
  Expr v = Var("v");
  Stmt init = For("v", IntImm(8), Store(acc, v, FloatImm(1)), ForKind::kVectorized);
  auto guarded = [&](Stmt s) { return For("v", IntImm(8), IfThen(Lt(v, IntImm(5)), s), ForKind::kVectorized); };
  Stmt store = guarded(Store(out, v, Add(Load(acc, v), Load(in, v))));
  LoopFunc f{"k", {in, out}, Allocate(acc, Block({init, store}))};
  auto ir = LowerToLlvmText(f, CpuTarget::Host());
  ASSERT_TRUE(ir.ok()) << ir.status();
  EXPECT_EQ(Occurrences(*ir, "call <8 x float> @llvm.masked.load"), 1) << *ir;  // in0 only
  EXPECT_EQ(Occurrences(*ir, "call void @llvm.masked.store"), 1) << *ir;
}

// A fence prints as `fence`, passes the verifier, and lowers to an empty
// asm statement that may touch memory, between the two loads of in0[0]
// (which LLVM's passes then may neither merge nor move across it).
TEST(LoopIrLoweringTest, AFenceKeepsLoadsOnItsSide) {
  using namespace loop_ir;  // NOLINT: IR builders
  Buffer in = MakeBuffer("in0", {4}, BufferRole::kInput, 0);
  Buffer out = MakeBuffer("out0", {2}, BufferRole::kOutput, 1);
  auto kernel = [&](bool fenced) {
    std::vector<Stmt> body = {Store(out, IntImm(0), Add(Load(in, IntImm(0)), FloatImm(1)))};
    if (fenced) body.push_back(Fence());
    body.push_back(Store(out, IntImm(1), Add(Load(in, IntImm(0)), FloatImm(2))));
    return LoopFunc{"k", {in, out}, Block(body)};
  };
  const LoopFunc f = kernel(true);
  EXPECT_NE(Print(f).find("  out0[0] = (in0[0] + 1.0f)\n  fence\n  out0[1]"), std::string::npos) << Print(f);
  EXPECT_TRUE(Verify(f).ok()) << Verify(f);
  auto fenced = LowerToLlvmText(f, CpuTarget::Host());
  auto plain = LowerToLlvmText(kernel(false), CpuTarget::Host());
  ASSERT_TRUE(fenced.ok() && plain.ok()) << fenced.status() << plain.status();
  const std::string fence = "call void asm sideeffect \"\", \"~{memory}\"()";
  EXPECT_EQ(Occurrences(*fenced, fence), 1) << *fenced;
  EXPECT_EQ(Occurrences(*plain, fence), 0) << *plain;
  const size_t first = fenced->find("load float"), second = fenced->find("load float", first + 1);
  ASSERT_NE(second, std::string::npos) << *fenced;
  EXPECT_LT(first, fenced->find(fence)) << *fenced;
  EXPECT_GT(second, fenced->find(fence)) << *fenced;
}

// A load whose lanes are 2, 3 or 4 elements apart reads its span as whole
// vectors (the last ending at the span's end) and picks its lanes by
// shuffles: no odd vector type (a <15 x float> span legalises into an
// insert per element on x86). The input ends at a page that cannot be read,
// so a vector reaching past the span's end faults.
TEST(LoopIrLoweringTest, StridedLoadsReadWholeVectorsWithinTheirSpan) {
  using namespace loop_ir;  // NOLINT: IR builders
  const CpuTarget host = CpuTarget::Host();
  const int64_t page = sysconf(_SC_PAGESIZE), rows = 3, lanes = 8;
  for (int64_t stride : {2, 3, 4}) {
    SCOPED_TRACE(absl::StrCat("stride ", stride));
    const int64_t n = (rows * lanes - 1) * stride + 1;  // the last lane reads the last element
    Buffer in = MakeBuffer("in0", {n}, BufferRole::kInput, 0);
    Buffer out = MakeBuffer("out0", {rows * lanes}, BufferRole::kOutput, 1);
    Expr o = Var("o"), v = Var("v");
    Expr i = Add(Mul(o, IntImm(lanes)), v);
    Stmt copy = Store(out, i, Load(in, Mul(i, IntImm(stride))));
    LoopFunc f{"k", {in, out}, For("o", IntImm(rows), For("v", IntImm(lanes), copy, ForKind::kVectorized))};
    auto text = LowerToLlvmText(f, host);
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_EQ(Occurrences(*text, absl::StrCat("load <", (lanes - 1) * stride + 1, " x float>")), 0) << *text;
    EXPECT_EQ(Occurrences(*text, "load <8 x float>"), stride) << *text;
    auto kernel = JitCompile(f, host);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    const int64_t bytes = n * static_cast<int64_t>(sizeof(float));
    const int64_t pages = (bytes + page - 1) / page + 1;
    void* map = mmap(nullptr, pages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(map, MAP_FAILED);
    char* guard = static_cast<char*>(map) + (pages - 1) * page;
    ASSERT_EQ(mprotect(guard, page, PROT_NONE), 0);
    float* x = reinterpret_cast<float*>(guard - bytes);
    for (int64_t e = 0; e < n; ++e) x[e] = static_cast<float>(e);
    std::vector<float> y(rows * lanes, -1.0f);
    void* args[] = {x, y.data()};
    (*kernel)->Run(args, 0, (*kernel)->num_tasks());
    for (int64_t e = 0; e < rows * lanes; ++e) EXPECT_EQ(y[e], static_cast<float>(e * stride)) << "lane " << e;
    munmap(map, pages * page);
  }
}

// Stores that together fill each lane's run of `stride` elements (a
// Winograd output tile row: lane = tile, four columns each) are written as
// contiguous vectors after a shuffle, not as one scatter per store: in any
// order, each under its own guard (a ragged last tile), for runs of 3 and 4.
// A value that reads the stored buffer keeps the stores apart (and correct).
TEST(LoopIrLoweringTest, StoresFillingStridedRunsWriteContiguousVectors) {
  using namespace loop_ir;  // NOLINT: IR builders
  const CpuTarget host = CpuTarget::Host();
  const int64_t lanes = 8;
  struct Case {
    int64_t stride, limit;  // elements at limit and past it stay untouched
    bool reads_output;
  };
  for (const Case& c : {Case{4, 29, false}, Case{3, 24, false}, Case{4, 32, true}}) {
    SCOPED_TRACE(absl::StrCat("stride ", c.stride, " limit ", c.limit, c.reads_output ? " reading out0" : ""));
    const int64_t n = lanes * c.stride;
    Buffer in = MakeBuffer("in0", {n}, BufferRole::kInput, 0);
    Buffer out = MakeBuffer("out0", {n}, BufferRole::kOutput, 1);
    Expr v = Var("v");
    std::vector<Stmt> stores;
    for (int64_t k = 0; k < c.stride; ++k) {
      const int64_t j = (k * (c.stride - 1) + 2) % c.stride;  // 2, 1, 0 or 2, 1, 0, 3: not in order
      Expr at = Add(Mul(v, IntImm(c.stride)), IntImm(j));
      Expr value = Add(Load(in, Add(Mul(IntImm(j), IntImm(lanes)), v)), FloatImm(static_cast<double>(j)));
      if (c.reads_output) value = Add(value, Load(out, Add(Mul(v, IntImm(c.stride)), IntImm((j + 1) % c.stride))));
      Stmt store = Store(out, at, value);
      stores.push_back(c.limit < n ? IfThen(Lt(at, IntImm(c.limit)), store) : store);
    }
    LoopFunc f{"k", {in, out}, For("v", IntImm(lanes), Block(stores), ForKind::kVectorized)};
    auto text = LowerToLlvmText(f, host);
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_EQ(Occurrences(*text, "call void @llvm.masked.scatter"), c.reads_output ? c.stride : 0) << *text;
    auto kernel = JitCompile(f, host);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    std::vector<float> x(n), y(n, -1.0f);
    for (int64_t e = 0; e < n; ++e) x[e] = static_cast<float>(100 + e);
    std::vector<float> want = y;
    for (int64_t k = 0; k < c.stride; ++k) {  // the stores in program order
      const int64_t j = (k * (c.stride - 1) + 2) % c.stride;
      for (int64_t l = 0; l < lanes; ++l) {
        const int64_t at = l * c.stride + j;
        if (at >= c.limit) continue;
        float value = x[j * lanes + l] + static_cast<float>(j);
        if (c.reads_output) value += want[l * c.stride + (j + 1) % c.stride];
        want[at] = value;
      }
    }
    void* args[] = {x.data(), y.data()};
    (*kernel)->Run(args, 0, (*kernel)->num_tasks());
    EXPECT_EQ(y, want);
  }
}

// One store per lane at a lane stride past 8 is a transpose: lane l's run of
// `lanes` elements (store j's lane l at l * stride + j) becomes one vector,
// by a network of two-vector shuffles. 16 lanes at stride 16 (one span: the
// depthwise channel-vector variant's input transpose) and 8 lanes at
// stride 13 (runs apart: its stores to the output planes), stores out of
// order, the last ones guarded: no scatters, the elements between the runs
// untouched.
TEST(LoopIrLoweringTest, StoresOnePerLaneAtWideStridesAreTransposes) {
  using namespace loop_ir;  // NOLINT: IR builders
  const CpuTarget host = CpuTarget::Host();
  struct Case {
    int64_t lanes, stride, limit;  // stores j >= limit are guarded off in lanes >= 2
  };
  for (const Case& c : {Case{16, 16, 16}, Case{8, 13, 6}}) {
    SCOPED_TRACE(absl::StrCat(c.lanes, " lanes, stride ", c.stride));
    const int64_t n = c.lanes * c.stride;
    Buffer in = MakeBuffer("in0", {c.lanes * c.lanes}, BufferRole::kInput, 0);
    Buffer out = MakeBuffer("out0", {n}, BufferRole::kOutput, 1);
    Expr v = Var("v");
    std::vector<Stmt> stores;
    for (int64_t k = 0; k < c.lanes; ++k) {
      const int64_t j = (k * 5 + 3) % c.lanes;  // a permutation of 0..lanes-1
      Stmt store = Store(out, Add(Mul(v, IntImm(c.stride)), IntImm(j)), Load(in, Add(Mul(IntImm(j), IntImm(c.lanes)), v)));
      stores.push_back(j >= c.limit ? IfThen(Lt(v, IntImm(2)), store) : store);
    }
    LoopFunc f{"k", {in, out}, For("v", IntImm(c.lanes), Block(stores), ForKind::kVectorized)};
    auto text = LowerToLlvmText(f, host);
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_EQ(Occurrences(*text, "call void @llvm.masked.scatter"), 0) << *text;
    EXPECT_GE(Occurrences(*text, "shufflevector"), c.lanes) << *text;
    auto kernel = JitCompile(f, host);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    std::vector<float> x(c.lanes * c.lanes), y(n, -1.0f);
    for (size_t e = 0; e < x.size(); ++e) x[e] = static_cast<float>(100 + e);
    std::vector<float> want = y;
    for (int64_t j = 0; j < c.lanes; ++j) {
      for (int64_t l = 0; l < c.lanes; ++l) {
        if (j >= c.limit && l >= 2) continue;
        want[l * c.stride + j] = x[j * c.lanes + l];
      }
    }
    void* args[] = {x.data(), y.data()};
    (*kernel)->Run(args, 0, (*kernel)->num_tasks());
    EXPECT_EQ(y, want);
  }
}

}  // namespace
}  // namespace kiln
