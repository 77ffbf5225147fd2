// MatMul (numpy semantics: batch broadcast, 1-D operands) and Gemm (transA,
// transB, alpha, beta, broadcast C) kernels against plain-loop references, over
// every register-block configuration on odd shapes.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "compiler_core/codegen/jit.h"
#include "compiler_core/codegen/object_emitter.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/codegen/target.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/codegen_testing.h"

namespace kiln {
namespace {

using codegen_testing::MakeWorkload;
using codegen_testing::Product;
using codegen_testing::RandomData;
using codegen_testing::RunKernel;

// Every (mr, nr, ku) of the grid, including points the pruned space drops.
std::vector<ScheduleConfig> FullMatMulGrid() {
  std::vector<ScheduleConfig> out;
  for (int64_t mr : {1, 2, 4, 6, 8}) {
    for (int64_t nr : {1, 2, 3, 4}) {
      for (int64_t ku : {1, 4}) {
        ScheduleConfig c;
        c.Set("mr", mr);
        c.Set("nr", nr);
        c.Set("ku", ku);
        out.push_back(c);
      }
    }
  }
  return out;
}

struct Reference {
  std::vector<double> value;
  std::vector<double> magnitude;  // sum of |terms|, for the tolerance
};

void Compare(const std::vector<float>& out, const Reference& ref) {
  ASSERT_EQ(out.size(), ref.value.size());
  int bad = 0;
  for (size_t i = 0; i < out.size() && bad < 5; ++i) {
    double tol = 1e-5 * ref.magnitude[i] + 1e-6;
    if (!(std::fabs(out[i] - ref.value[i]) <= tol)) {
      ADD_FAILURE() << "element " << i << ": got " << out[i] << " want " << ref.value[i];
      ++bad;
    }
  }
}

// numpy matmul on dims a, b (rank >= 1).
Reference MatMulRef(const std::vector<float>& a, std::vector<int64_t> ad, const std::vector<float>& b,
                    std::vector<int64_t> bd, std::vector<int64_t>* out_dims) {
  bool a1 = ad.size() == 1, b1 = bd.size() == 1;
  if (a1) ad.insert(ad.begin(), 1);
  if (b1) bd.push_back(1);
  int64_t m = ad[ad.size() - 2], k = ad.back(), n = bd.back();
  std::vector<int64_t> ab(ad.begin(), ad.end() - 2), bb(bd.begin(), bd.end() - 2);
  size_t r = std::max(ab.size(), bb.size());
  ab.insert(ab.begin(), r - ab.size(), 1);
  bb.insert(bb.begin(), r - bb.size(), 1);
  std::vector<int64_t> batch(r);
  for (size_t i = 0; i < r; ++i) batch[i] = ab[i] == 1 ? bb[i] : ab[i];
  *out_dims = batch;
  if (!a1) out_dims->push_back(m);
  if (!b1) out_dims->push_back(n);
  int64_t nb = Product(batch);
  Reference ref;
  ref.value.assign(nb * m * n, 0.0);
  ref.magnitude.assign(nb * m * n, 0.0);
  for (int64_t bi = 0; bi < nb; ++bi) {
    int64_t rem = bi, oa = 0, ob = 0, sa = 1, sb = 1;
    for (size_t d = r; d-- > 0;) {
      int64_t idx = rem % batch[d];
      rem /= batch[d];
      if (ab[d] != 1) oa += idx * sa;
      if (bb[d] != 1) ob += idx * sb;
      sa *= ab[d];
      sb *= bb[d];
    }
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double s = 0, mag = 0;
        for (int64_t p = 0; p < k; ++p) {
          double t = static_cast<double>(a[oa * m * k + i * k + p]) * b[ob * k * n + p * n + j];
          s += t;
          mag += std::fabs(t);
        }
        ref.value[(bi * m + i) * n + j] = s;
        ref.magnitude[(bi * m + i) * n + j] = mag;
      }
    }
  }
  return ref;
}

void CheckMatMul(std::vector<int64_t> ad, std::vector<int64_t> bd,
                 const std::vector<ScheduleConfig>& configs) {
  CpuTarget target = CpuTarget::Host();
  std::vector<std::vector<float>> inputs = {RandomData(Product(ad), 3), RandomData(Product(bd), 4)};
  std::vector<int64_t> out_dims;
  Reference ref = MatMulRef(inputs[0], ad, inputs[1], bd, &out_dims);
  auto g = MakeWorkload("MatMul", {ad, bd}, out_dims);
  for (const ScheduleConfig& config : configs) {
    SCOPED_TRACE(absl::StrCat(g->ToText(), " config ", config.ToString()));
    auto kernel = JitCompile(*g, config, target);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    Compare(RunKernel(**kernel, inputs, Product(out_dims)), ref);
  }
}

struct GemmCase {
  int64_t m, n, k;
  bool trans_a, trans_b;
  float alpha, beta;
  std::vector<int64_t> c_dims;  // empty vector + has_c=false: no C
  bool has_c;
};

void CheckGemm(const GemmCase& gc, const std::vector<ScheduleConfig>& configs) {
  CpuTarget target = CpuTarget::Host();
  std::vector<int64_t> ad = gc.trans_a ? std::vector<int64_t>{gc.k, gc.m} : std::vector<int64_t>{gc.m, gc.k};
  std::vector<int64_t> bd = gc.trans_b ? std::vector<int64_t>{gc.n, gc.k} : std::vector<int64_t>{gc.k, gc.n};
  std::vector<std::vector<int64_t>> shapes = {ad, bd};
  std::vector<std::vector<float>> inputs = {RandomData(Product(ad), 5), RandomData(Product(bd), 6)};
  if (gc.has_c) {
    shapes.push_back(gc.c_dims);
    inputs.push_back(RandomData(Product(gc.c_dims), 7));
  }
  std::map<std::string, AttrValue> attrs = {{"transA", int64_t{gc.trans_a}},
                                            {"transB", int64_t{gc.trans_b}},
                                            {"alpha", gc.alpha},
                                            {"beta", gc.beta}};
  auto g = MakeWorkload("Gemm", shapes, {gc.m, gc.n}, attrs);
  Reference ref;
  ref.value.assign(gc.m * gc.n, 0.0);
  ref.magnitude.assign(gc.m * gc.n, 0.0);
  for (int64_t i = 0; i < gc.m; ++i) {
    for (int64_t j = 0; j < gc.n; ++j) {
      double s = 0, mag = 0;
      for (int64_t p = 0; p < gc.k; ++p) {
        float a = gc.trans_a ? inputs[0][p * gc.m + i] : inputs[0][i * gc.k + p];
        float b = gc.trans_b ? inputs[1][j * gc.k + p] : inputs[1][p * gc.n + j];
        s += static_cast<double>(a) * b;
        mag += std::fabs(static_cast<double>(a) * b);
      }
      s *= gc.alpha;
      mag *= std::fabs(gc.alpha);
      if (gc.has_c) {
        const auto& cd = gc.c_dims;
        int64_t c0 = cd.size() == 2 ? cd[0] : 1, c1 = cd.empty() ? 1 : cd.back();
        double c = inputs[2][(c0 == 1 ? 0 : i) * c1 + (c1 == 1 ? 0 : j)];
        s += gc.beta * c;
        mag += std::fabs(gc.beta * c);
      }
      ref.value[i * gc.n + j] = s;
      ref.magnitude[i * gc.n + j] = mag;
    }
  }
  for (const ScheduleConfig& config : configs) {
    SCOPED_TRACE(absl::StrCat(g->ToText(), " config ", config.ToString()));
    auto kernel = JitCompile(*g, config, target);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    Compare(RunKernel(**kernel, inputs, gc.m * gc.n), ref);
  }
}

std::vector<ScheduleConfig> Sample(const std::vector<ScheduleConfig>& grid, size_t every, size_t offset) {
  std::vector<ScheduleConfig> out;
  for (size_t i = offset % every; i < grid.size(); i += every) out.push_back(grid[i]);
  return out;
}

TEST(MatMulCodegen, EveryConfigOnPrimeShape) {
  CheckMatMul({7, 13}, {13, 29}, FullMatMulGrid());
}

TEST(MatMulCodegen, EveryConfigOnTinyShapes) {
  CheckMatMul({1, 1}, {1, 1}, FullMatMulGrid());
  CheckMatMul({3, 5}, {5, 2}, FullMatMulGrid());
}

TEST(MatMulCodegen, LargerThanOneTaskAndBlock) {
  // Several row tasks, column blocks plus a masked tail, K not a multiple of ku.
  CheckMatMul({71, 67}, {67, 101}, Sample(FullMatMulGrid(), 4, 1));
}

TEST(MatMulCodegen, BatchBroadcastAndVectors) {
  std::vector<ScheduleConfig> sample = Sample(FullMatMulGrid(), 5, 2);
  CheckMatMul({2, 3, 7, 13}, {13, 29}, sample);
  CheckMatMul({3, 1, 5, 6}, {4, 6, 17}, sample);
  CheckMatMul({1, 9, 4}, {3, 4, 9}, sample);
  CheckMatMul({13}, {13, 29}, sample);         // 1-D A
  CheckMatMul({2, 7, 13}, {13}, sample);       // 1-D B
  CheckMatMul({13}, {13}, sample);             // dot product, scalar result
  CheckMatMul({5}, {2, 5, 3}, sample);         // 1-D A against a batch
  CheckMatMul({4, 0}, {0, 3}, sample);         // K = 0
}

TEST(GemmCodegen, TransposesAlphaBetaAndBroadcastC) {
  std::vector<ScheduleConfig> grid = FullMatMulGrid();
  std::vector<GemmCase> cases = {
      {7, 29, 13, false, false, 1.0f, 1.0f, {}, false},
      {7, 29, 13, true, false, 0.5f, 1.0f, {7, 29}, true},
      {7, 29, 13, false, true, 1.0f, 2.0f, {29}, true},
      {7, 29, 13, true, true, -1.5f, 0.25f, {7, 1}, true},
      {7, 29, 13, false, false, 1.0f, 1.0f, {1, 29}, true},
      {7, 29, 13, false, true, 2.0f, 1.0f, {}, true},
      {1, 1, 1, true, true, 1.0f, 1.0f, {1}, true},
      {33, 40, 17, false, false, 1.0f, 0.0f, {33, 40}, true},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(absl::StrCat("case ", i));
    CheckGemm(cases[i], Sample(grid, 3, i));
  }
}

TEST(MatMulCodegen, EnumeratedSpaceAndDefaultAreCorrect) {
  CpuTarget target = CpuTarget::Host();
  std::vector<int64_t> ad = {37, 50}, bd = {50, 45};
  auto g = MakeWorkload("MatMul", {ad, bd}, {37, 45});
  std::vector<ScheduleConfig> space = EnumerateSchedules(*g, target);
  ASSERT_FALSE(space.empty());
  space.push_back(DefaultSchedule(*g, target));
  CheckMatMul(ad, bd, Sample(space, 3, 0));
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// Narrower x86 targets run on this host too: AVX2 (8 lanes, 16 registers) and
// the x86-64 baseline (SSE2, 4 lanes, no FMA: must not call fmaf).
TEST(OtherTargets, Avx2AndBaselineKernelsAreCorrectAndSelfContained) {
  CpuTarget host = CpuTarget::Host();
  if (!host.HasFeature("avx2") || !host.HasFeature("fma")) GTEST_SKIP() << "host lacks avx2/fma";
  std::vector<CpuTarget> targets = {
      {host.triple, "haswell", "+avx,+avx2,+fma,+sse4.2,-avx512f"},
      {host.triple, "x86-64", ""},
  };
  EXPECT_EQ(targets[0].VectorBits(), 256);
  EXPECT_EQ(targets[1].VectorBits(), 128);
  std::vector<int64_t> ad = {7, 13}, bd = {13, 29};
  std::vector<std::vector<float>> inputs = {RandomData(7 * 13, 3), RandomData(13 * 29, 4)};
  std::vector<int64_t> out_dims;
  Reference ref = MatMulRef(inputs[0], ad, inputs[1], bd, &out_dims);
  auto mm = MakeWorkload("MatMul", {ad, bd}, out_dims);
  auto gemm_t = MakeWorkload("Gemm", {{7, 13}, {29, 13}}, {7, 29}, {{"transB", int64_t{1}}});
  auto sig = MakeWorkload("Sigmoid", {{37}}, {37});
  for (const CpuTarget& t : targets) {
    SCOPED_TRACE(t.cpu);
    std::vector<ScheduleConfig> space = EnumerateSchedules(*mm, t);
    ASSERT_FALSE(space.empty());
    for (const ScheduleConfig& c : Sample(space, 3, 1)) {
      EXPECT_LE(c.Get("mr", 0) * c.Get("nr", 0) + c.Get("nr", 0) + 1, t.NumVectorRegisters());
      auto k = JitCompile(*mm, c, t);
      ASSERT_TRUE(k.ok()) << k.status();
      Compare(RunKernel(**k, inputs, 7 * 29), ref);
    }
    auto ks = JitCompile(*sig, DefaultSchedule(*sig, t), t);
    ASSERT_TRUE(ks.ok()) << ks.status();
    std::vector<std::vector<float>> sin = {RandomData(37, 9, -20.0f, 20.0f)};
    std::vector<float> sout = RunKernel(**ks, sin, 37);
    for (int i = 0; i < 37; ++i) {
      double r = 1.0 / (1.0 + std::exp(-static_cast<double>(sin[0][i])));
      EXPECT_LE(std::fabs(sout[i] - r), 1e-6 * r) << sin[0][i];
    }
    std::string vec = "<" + std::to_string(t.FloatLanes()) + " x float>";
    EXPECT_NE((*ks)->llvm_ir().find(vec), std::string::npos);
    // Every imported symbol of a whole object is allowed (no fmaf, expf, ...).
    auto obj = CompileToObject({{mm.get(), DefaultSchedule(*mm, t), "mm"},
                                {gemm_t.get(), DefaultSchedule(*gemm_t, t), "gemm"},
                                {sig.get(), DefaultSchedule(*sig, t), "sig"}},
                               t);
    ASSERT_TRUE(obj.ok()) << obj.status();
    for (const char* bad : {"declare float @fmaf", "@expf", "@llvm.fma."}) {
      EXPECT_EQ(obj->llvm_ir.find(bad), std::string::npos) << bad;
    }
  }
}

}  // namespace
}  // namespace kiln
