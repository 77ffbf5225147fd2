// The "matmul" loop-IR lowering (MatMul/Gemm + fused epilogue): its loop IR
// (golden substrings, Verify) and random points of the direct emitter's space
// on odd shapes, compiled and compared with the reference interpreter.
#include "compiler_core/codegen/loop_ir/lower_matmul.h"
#include "compiler_core/codegen/loop_ir/printer.h"
#include "compiler_core/codegen/loop_ir/verifier.h"

#include <gtest/gtest.h>

#include <random>

#include "compiler_core/codegen/jit.h"
#include "compiler_core/codegen/loop_ir/llvm_lowering.h"
#include "compiler_core/codegen/loop_ir/lower_matmul.h"
#include "compiler_core/frontend/interpreter.h"
#include "compiler_core/frontend/op_registry.h"
#include "tests/compiler_core/codegen/loop_ir/lowering_testing.h"

namespace kiln::loop_ir {
namespace {

using loop_ir_testing::Attrs;
using loop_ir_testing::Builder;
using loop_ir_testing::Ints;
using loop_ir_testing::Product;
using loop_ir_testing::Random;

CpuTarget Host() { return CpuTarget::Host(); }

// Default, first, last and `n` random points of the space.
std::vector<ScheduleConfig> RandomPoints(const Graph& g, const CpuTarget& target, int n, uint32_t seed) {
  std::vector<ScheduleConfig> space = EnumerateSchedules(g, target);
  std::vector<ScheduleConfig> out;
  auto add = [&](const ScheduleConfig& c) {
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  };
  if (space.empty()) return out;
  add(DefaultSchedule(g, target));
  add(space.front());
  add(space.back());
  std::mt19937 rng(seed);
  for (int i = 0; i < n; ++i) add(space[rng() % space.size()]);
  return out;
}

// Lowers `g` at each config (Verify on the loop IR), then compiles it through
// JitCompile (which routes MatMul/Gemm here) and compares every output with
// the interpreter (lowering_testing.h).
void CheckAgainstInterpreter(const Graph& g, const std::vector<ScheduleConfig>& configs) {
  CpuTarget target = Host();
  WorkloadLowering l = MatMulLowering();
  ASSERT_TRUE(l.match(g).ok()) << l.match(g);
  ASSERT_FALSE(configs.empty());
  for (const ScheduleConfig& config : configs) {
    SCOPED_TRACE(absl::StrCat("schedule ", config.ToString(), "\n", g.ToText()));
    ASSERT_TRUE(l.validate(g, config, target).ok());
    absl::StatusOr<LoopFunc> f = l.lower(g, config, target);
    ASSERT_TRUE(f.ok()) << f.status();
    ASSERT_TRUE(Verify(*f).ok()) << Verify(*f) << "\n" << Print(*f);
  }
  loop_ir_testing::CheckConfigsAgainstInterpreter(g, configs, target);
}

std::unique_ptr<Graph> PlainMatMul(const Ints& a, const Ints& b) {
  Builder gb;
  Value* x = gb.Input(a);
  Value* w = gb.Input(b);
  return gb.Finish({gb.Op("MatMul", {x, w})});
}

TEST(MatMulLoweringTest, MatchesOnlyMatMulAnchors) {
  WorkloadLowering l = MatMulLowering();
  EXPECT_EQ(l.kind, "matmul");
  EXPECT_TRUE(l.match(*PlainMatMul({3, 4}, {4, 5})).ok());
  Builder gb;
  Value* x = gb.Input({3, 4});
  auto relu = gb.Finish({gb.Op("Relu", {x})});
  EXPECT_FALSE(l.match(*relu).ok());
}

TEST(MatMulLoweringTest, PrintsTiledPackedRegisterBlockedNest) {
  Builder gb;
  Value* x = gb.Input({67, 300});
  Value* w = gb.Input({300, 900});
  Value* bias = gb.Input({900});
  auto g = gb.Finish({gb.Op("Relu", {gb.Op("Add", {gb.Op("MatMul", {x, w}), bias})})});
  CpuTarget target = Host();
  int64_t lanes = target.FloatLanes();
  ScheduleConfig c;
  c.Set("mr", 4);
  c.Set("nr", 1);
  c.Set("ku", 4);
  c.Set("kc", 128);
  c.Set("nc", 4 * lanes);
  absl::StatusOr<LoopFunc> f = MatMulLowering().lower(*g, c, target);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_TRUE(Verify(*f).ok()) << Verify(*f);
  std::string text = Print(*f);
  MatMulTiling t = TileMatMul(*AnalyzeMatMul(*g), c, target);
  for (const std::string& want : {
           absl::StrCat("parallel for (task, 0, ", t.num_tasks, ")"),
           absl::StrCat("allocate packed_b: f32[", t.pack_floats, "]"),
           std::string("for (kb, 0, 2)"),                  // two full K blocks, the third peeled
           absl::StrCat("allocate acc_rf: f32[4,", lanes, "]"),
           absl::StrCat("unrolled for (u, 0, 4)"),
           absl::StrCat("vectorized for (jl, 0, ", lanes, ")"),
           std::string("fma("),
       }) {
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
  }
  // Row tail (67 % 4 = 3 rows, one tile) and column tail (900 % lanes) tiles.
  EXPECT_NE(text.find("allocate acc_tf: f32[3,"), std::string::npos) << text;
  if (900 % lanes != 0) {
    EXPECT_NE(text.find(absl::StrCat("allocate acc_rt: f32[4,", 900 % lanes, "]")), std::string::npos) << text;
  }
  // The epilogue (bias add, relu) appears once per tile shape, in the last K block only.
  EXPECT_NE(text.find("in2["), std::string::npos) << text;
  auto llvm = LowerToLlvmText(*f, target);
  ASSERT_TRUE(llvm.ok()) << llvm.status();
  EXPECT_NE(llvm->find("llvm.fmuladd"), std::string::npos);
  // After O3 the accumulator tiles live in registers (SROA): no acc_ alloca
  // is left, only the packed B panel.
  auto kernel = JitCompile(*g, c, target);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const std::string& ir = (*kernel)->llvm_ir();
  for (size_t at = ir.find(" = alloca"); at != std::string::npos; at = ir.find(" = alloca", at + 1)) {
    EXPECT_EQ(ir.rfind("%packed_b", at), ir.rfind('%', at)) << ir.substr(ir.rfind('\n', at), 80);
  }
  EXPECT_NE(ir.find(" = alloca"), std::string::npos) << "no packed B panel";
}

// Every register-block shape keeps its accumulators in registers after O3.
TEST(MatMulLoweringTest, AccumulatorsArePromotedForEveryBlockShape) {
  auto g = PlainMatMul({64, 256}, {256, 256});
  CpuTarget target = Host();
  for (int64_t nr : {1, 2, 3, 4}) {
    for (int64_t mr : {1, 6, 8}) {
      if (mr * nr + nr + 1 > target.NumVectorRegisters()) continue;
      ScheduleConfig c;
      c.Set("mr", mr);
      c.Set("nr", nr);
      c.Set("ku", 1);
      absl::StatusOr<LoopFunc> f = MatMulLowering().lower(*g, c, target);
      ASSERT_TRUE(f.ok()) << f.status();
      auto kernel = JitCompile(*g, c, target);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      EXPECT_EQ((*kernel)->llvm_ir().find(" = alloca"), std::string::npos) << c.ToString();
    }
  }
}

// A contiguous vector access is addressed with scalar arithmetic: no index
// vector is built to extract its lane 0 (after O3 such vectors stayed in
// registers as loop invariants, and an AVX2 GEMM's inner loop moved every B
// address through them and spilled accumulators for the room). Checked on
// the optimised IR for AVX2 and AVX-512, K unrolled or not, in place and
// packed.
TEST(MatMulLoweringTest, ContiguousAccessesAreAddressedWithScalars) {
  auto g = PlainMatMul({64, 192}, {192, 768});
  for (const std::string cpu : {"x86-64-v3", "znver4"}) {
    absl::StatusOr<CpuTarget> target = CpuTarget::Named(cpu);
    ASSERT_TRUE(target.ok()) << target.status();
    for (const std::string config : {"ku=4,mr=6,nr=2", "ku=1,mr=6,nr=2", "ku=4,mr=4,nr=3,kc=64"}) {
      absl::StatusOr<ScheduleConfig> c = ScheduleConfig::Parse(config);
      ASSERT_TRUE(c.ok()) << c.status();
      auto kernel = JitCompile(*g, *c, *target);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      const std::string& ir = (*kernel)->llvm_ir();
      EXPECT_EQ(ir.find("extractelement <"), std::string::npos) << cpu << " " << config << "\n" << ir;
      EXPECT_EQ(ir.find(" x i64>"), std::string::npos) << cpu << " " << config << "\n" << ir;
    }
  }
}

TEST(MatMulLoweringTest, TinyAndPrimeShapes) {
  for (const auto& [a, b] : std::vector<std::pair<Ints, Ints>>{
           {{1, 1}, {1, 1}}, {{1, 3}, {3, 1}}, {{3, 2}, {2, 3}}, {{7, 5}, {5, 3}}, {{13, 29}, {29, 37}},
           {{31, 17}, {17, 67}}, {{5, 7}, {7, 1}}}) {
    auto g = PlainMatMul(a, b);
    CheckAgainstInterpreter(*g, RandomPoints(*g, Host(), 6, 1));
  }
}

TEST(MatMulLoweringTest, OneDimensionalOperands) {
  auto g1 = PlainMatMul({7}, {7, 19});
  CheckAgainstInterpreter(*g1, RandomPoints(*g1, Host(), 4, 2));
  auto g2 = PlainMatMul({11, 7}, {7});
  CheckAgainstInterpreter(*g2, RandomPoints(*g2, Host(), 4, 3));
}

TEST(MatMulLoweringTest, BatchedWithBroadcastBatchDims) {
  auto g1 = PlainMatMul({2, 3, 5, 7}, {7, 9});
  CheckAgainstInterpreter(*g1, RandomPoints(*g1, Host(), 4, 4));
  auto g2 = PlainMatMul({3, 1, 5, 7}, {1, 4, 7, 6});
  CheckAgainstInterpreter(*g2, RandomPoints(*g2, Host(), 4, 5));
  auto g3 = PlainMatMul({9, 13}, {2, 13, 11});
  CheckAgainstInterpreter(*g3, RandomPoints(*g3, Host(), 4, 6));
}

// Batches of A sharing one B are rows of one taller matrix (an RNN's input
// projection x[T, 1, I] @ W[I, N]); the epilogue still sees every batch index.
TEST(MatMulLoweringTest, BatchesSharingBFoldIntoRows) {
  Builder gb;
  Value* x = gb.Input({3, 4, 1, 19});
  Value* w = gb.Input({19, 21});
  Value* per_batch = gb.Input({3, 4, 1, 1});
  Value* outer = gb.Input({3, 1, 1, 21});
  Value* mm = gb.Op("MatMul", {x, w});
  auto g = gb.Finish({gb.Op("Add", {gb.Op("Mul", {mm, per_batch}), outer})});
  auto spec = loop_ir::AnalyzeMatMul(*g);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->m, 12);
  EXPECT_EQ(spec->num_batches(), 1);
  EXPECT_EQ(spec->folded_batch_dims, (Ints{3, 4}));
  CheckAgainstInterpreter(*g, RandomPoints(*g, Host(), 6, 10));
  // A broadcast against B's batches does not fold.
  auto g2 = PlainMatMul({5, 7}, {2, 7, 6});
  auto spec2 = loop_ir::AnalyzeMatMul(*g2);
  ASSERT_TRUE(spec2.ok()) << spec2.status();
  EXPECT_TRUE(spec2->folded_batch_dims.empty());
}

TEST(MatMulLoweringTest, GemmTransposesAlphaBetaBroadcastC) {
  struct GemmCase {
    Ints a, b, c;
    int64_t ta, tb;
    float alpha, beta;
  };
  for (const GemmCase& gc : std::vector<GemmCase>{{{5, 13}, {13, 11}, {11}, 0, 0, 1.0f, 1.0f},
                                                   {{13, 5}, {11, 13}, {5, 1}, 1, 1, 0.5f, 2.0f},
                                                   {{9, 17}, {19, 17}, {9, 19}, 0, 1, -1.5f, 0.25f},
                                                   {{17, 9}, {17, 3}, {1}, 1, 0, 2.0f, 0.0f},
                                                   {{3, 4}, {4, 6}, {}, 0, 0, 0.75f, 1.0f}}) {
    Builder gb;
    Value* a = gb.Input(gc.a);
    Value* b = gb.Input(gc.b);
    std::vector<Value*> ins = {a, b};
    if (!gc.c.empty()) ins.push_back(gb.Input(gc.c));
    Attrs attrs = {{"transA", gc.ta}, {"transB", gc.tb}, {"alpha", gc.alpha}, {"beta", gc.beta}};
    auto g = gb.Finish({gb.Op("Gemm", ins, attrs)});
    CheckAgainstInterpreter(*g, RandomPoints(*g, Host(), 5, 7));
  }
}

TEST(MatMulLoweringTest, EpiloguesBiasReluResidualAndTwoOutputs) {
  {
    Builder gb;
    Value* x = gb.Input({23, 19});
    Value* w = gb.Input({19, 41});
    Value* bias = gb.Input({41});
    auto g = gb.Finish({gb.Op("Relu", {gb.Op("Add", {gb.Op("MatMul", {x, w}), bias})})});
    CheckAgainstInterpreter(*g, RandomPoints(*g, Host(), 6, 8));
  }
  {
    Builder gb;
    Value* x = gb.Input({2, 11, 19});
    Value* w = gb.Input({19, 29});
    Value* res = gb.Input({2, 11, 29});
    Value* col = gb.Input({11, 1});
    Value* mm = gb.Op("MatMul", {x, w});
    Value* sum = gb.Op("Add", {mm, res});
    Value* scaled = gb.Op("Mul", {sum, col});
    auto g = gb.Finish({gb.Op("Relu", {scaled}), sum});
    CheckAgainstInterpreter(*g, RandomPoints(*g, Host(), 6, 9));
  }
}

TEST(MatMulLoweringTest, PackedKBlocksWithTails) {
  // B larger than 1 MiB and more than 64 rows: the space has packed (kc) points.
  Builder gb;
  Value* x = gb.Input({67, 300});
  Value* w = gb.Input({300, 901});
  Value* bias = gb.Input({901});
  auto g = gb.Finish({gb.Op("Relu", {gb.Op("Add", {gb.Op("MatMul", {x, w}), bias})})});
  std::vector<ScheduleConfig> packed;
  for (const ScheduleConfig& c : EnumerateSchedules(*g, loop_ir_testing::HostWithL2AtMost1MiB())) {
    if (c.Get("kc", 0) > 0) packed.push_back(c);
  }
  ASSERT_FALSE(packed.empty());
  std::mt19937 rng(10);
  std::shuffle(packed.begin(), packed.end(), rng);
  packed.resize(std::min<size_t>(packed.size(), 5));
  packed.push_back(DefaultSchedule(*g, loop_ir_testing::HostWithL2AtMost1MiB()));
  CheckAgainstInterpreter(*g, packed);
}

// kiln.PackedMatMul(a, bp[P, K, lanes], c?) with attributes `attrs` (n = N
// set here), then `epilogue` (a Relu or nothing). Bp's lanes past N hold
// random floats, as a workload input does: no kernel may read them.
std::unique_ptr<Graph> PackedGraph(const Ints& a, int64_t k, int64_t n, int64_t lanes, const Ints& c, Attrs attrs,
                                   bool relu) {
  Builder gb;
  std::vector<Value*> ins = {gb.Input(a), gb.Input({(n + lanes - 1) / lanes, k, lanes})};
  if (!c.empty()) ins.push_back(gb.Input(c));
  attrs["n"] = n;
  Value* y = gb.Op("PackedMatMul", ins, attrs, std::string(kKilnDomain));
  return gb.Finish({relu ? gb.Op("Relu", {y}) : y});
}

// Tasks of one or two column panels copy each tile row's strip of A first
// (MatMulTiling::pack_a; a Winograd conv's products, 16 x 40 x 36 by 36 x
// 16 tiles here) and their tiles read the copy, K's tail included; wider
// tasks read A in place. Every point against the interpreter.
TEST(MatMulLoweringTest, NarrowTasksCopyTheirStripOfA) {
  auto narrow = PlainMatMul({16, 40, 36}, {16, 36, 16});
  CpuTarget target = Host();
  for (const ScheduleConfig& c : EnumerateSchedules(*narrow, target)) {
    const MatMulTiling t = TileMatMul(*AnalyzeMatMul(*narrow), c, target);
    if (t.gemv || t.gemv_dot) continue;
    absl::StatusOr<LoopFunc> f = MatMulLowering().lower(*narrow, c, target);
    ASSERT_TRUE(f.ok()) << f.status();
    const std::string text = Print(*f);
    EXPECT_EQ(t.pack_a, std::min<int64_t>(t.cols_per_task, 16) <= 2 * t.nb) << c.ToString();
    EXPECT_EQ(text.find("allocate packed_a_r") != std::string::npos, t.pack_a) << c.ToString() << "\n" << text;
    if (t.pack_a) {
      EXPECT_EQ(text.find("= fma(in0["), std::string::npos) << text;  // the tiles read the copy only
    }
  }
  EXPECT_TRUE(TileMatMul(*AnalyzeMatMul(*narrow), DefaultSchedule(*narrow, target), target).pack_a);
  CheckAgainstInterpreter(*narrow, RandomPoints(*narrow, target, 8, 21));
  auto wide = PlainMatMul({40, 36}, {36, 200});
  const ScheduleConfig c = DefaultSchedule(*wide, target);
  EXPECT_FALSE(TileMatMul(*AnalyzeMatMul(*wide), c, target).pack_a) << c.ToString();
  absl::StatusOr<LoopFunc> f = MatMulLowering().lower(*wide, c, target);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(Print(*f).find("packed_a"), std::string::npos) << Print(*f);
}

// B in column panels of the host's lanes (the packed_matmul_weights pass):
// MatMul and Gemm forms, panel tails, A's batches folded into rows, Gemm's
// transA, alpha, beta and C, K blocks; no GEMV variant applies.
TEST(MatMulLoweringTest, PackedPanelsOfB) {
  const int64_t lanes = loop_ir_testing::HostWithL2AtMost1MiB().FloatLanes();
  struct PackedCase {
    Ints a;
    int64_t k, n;
    Ints c;
    Attrs attrs;
  };
  for (const PackedCase& pc : std::vector<PackedCase>{
           {{23, 19}, 19, 41, {}, {}},
           {{2, 11, 19}, 19, 3 * lanes, {}, {}},
           {{3, 1, 7}, 7, lanes + 1, {}, {}},
           {{13, 5}, 13, 19, {5, 1}, {{"transA", int64_t{1}}, {"alpha", 0.5f}, {"beta", 2.0f}}},
           {{9, 17}, 17, 2 * lanes - 3, {2 * lanes - 3}, {}}}) {
    auto g = PackedGraph(pc.a, pc.k, pc.n, lanes, pc.c, pc.attrs, pc.c.empty());
    absl::StatusOr<MatMulSpec> spec = AnalyzeMatMul(*g);
    ASSERT_TRUE(spec.ok()) << spec.status();
    EXPECT_EQ(spec->b_panel, lanes);
    EXPECT_EQ(spec->n, pc.n);
    CheckAgainstInterpreter(*g, RandomPoints(*g, loop_ir_testing::HostWithL2AtMost1MiB(), 6, 11));
  }
  // B larger than 1 MiB and more than 64 rows: K blocks, read from the panels in place.
  auto big = PackedGraph({67, 300}, 300, 901, lanes, {}, {}, true);
  std::vector<ScheduleConfig> blocked;
  for (const ScheduleConfig& c : EnumerateSchedules(*big, loop_ir_testing::HostWithL2AtMost1MiB())) {
    EXPECT_EQ(c.Get("gv", 0), 0) << c.ToString();
    if (c.Get("kc", 0) > 0) blocked.push_back(c);
  }
  ASSERT_FALSE(blocked.empty());
  std::mt19937 rng(12);
  std::shuffle(blocked.begin(), blocked.end(), rng);
  blocked.resize(std::min<size_t>(blocked.size(), 4));
  CheckAgainstInterpreter(*big, blocked);
  // One row of A: no GEMV points either, the tiles read the panels.
  auto row = PackedGraph({1, 300}, 300, 901, lanes, {}, {}, false);
  for (const ScheduleConfig& c : EnumerateSchedules(*row, loop_ir_testing::HostWithL2AtMost1MiB())) EXPECT_EQ(c.Get("gv", 0), 0) << c.ToString();
  CheckAgainstInterpreter(*row, RandomPoints(*row, loop_ir_testing::HostWithL2AtMost1MiB(), 3, 13));
}

// A panel row's vector is one contiguous load, in K blocks too: no gather and
// no index vector in the optimised IR for AVX2 and AVX-512 (panels of each
// one's lanes), K unrolled or not.
TEST(MatMulLoweringTest, PackedPanelsAreReadAsWholeVectors) {
  for (const std::string cpu : {"x86-64-v3", "znver4"}) {
    absl::StatusOr<CpuTarget> target = CpuTarget::Named(cpu);
    ASSERT_TRUE(target.ok()) << target.status();
    auto g = PackedGraph({64, 192}, 192, 768, target->FloatLanes(), {}, {}, true);
    for (const std::string config : {"ku=4,mr=6,nr=2", "ku=1,mr=6,nr=2,nc=256", "ku=4,mr=4,nr=3,kc=64"}) {
      absl::StatusOr<ScheduleConfig> c = ScheduleConfig::Parse(config);
      ASSERT_TRUE(c.ok()) << c.status();
      auto kernel = JitCompile(*g, *c, *target);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      const std::string& ir = (*kernel)->llvm_ir();
      EXPECT_EQ(ir.find("gather"), std::string::npos) << cpu << " " << config << "\n" << ir;
      EXPECT_EQ(ir.find(" x i64>"), std::string::npos) << cpu << " " << config << "\n" << ir;
    }
  }
}

}  // namespace
}  // namespace kiln::loop_ir
