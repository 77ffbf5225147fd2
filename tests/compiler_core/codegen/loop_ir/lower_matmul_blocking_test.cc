// Cache-blocked MatMul/Gemm kernels (knobs mc, nc, kc: rows and columns per
// task, K blocks with B packed on the stack) against plain-loop references on
// odd shapes: K not a multiple of kc, column tails inside the last column
// block, transposed B, batches, a fused bias + ReLU epilogue applied once;
// the matmul space on large shapes and the packed-buffer bound.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler_core/codegen/jit.h"
#include "compiler_core/codegen/loop_ir/lower_common.h"
#include "compiler_core/codegen/loop_ir/lower_matmul.h"
#include "compiler_core/codegen/object_emitter.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/codegen/target.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/codegen_testing.h"
#include "tests/compiler_core/codegen/loop_ir/lowering_testing.h"

namespace kiln {
namespace {

using codegen_testing::MakeWorkload;
using codegen_testing::RandomData;
using codegen_testing::RunKernel;

ScheduleConfig Config(const std::string& text) {
  auto c = ScheduleConfig::Parse(text);
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

// out[b, i, j] = sum_p A[b, i, p] * B[b', p, j] (+ bias[j], ReLU), B shared
// across batches when b_batched is false; b_trans: B stored [N, K].
std::vector<double> Reference(const std::vector<float>& a, const std::vector<float>& b,
                              const std::vector<float>* bias, int64_t batches, int64_t m, int64_t n,
                              int64_t k, bool b_batched, bool b_trans) {
  std::vector<double> out(batches * m * n);
  for (int64_t bi = 0; bi < batches; ++bi) {
    const float* bb = b.data() + (b_batched ? bi * k * n : 0);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) {
          s += static_cast<double>(a[(bi * m + i) * k + p]) * (b_trans ? bb[j * k + p] : bb[p * n + j]);
        }
        if (bias != nullptr) s = std::max(s + (*bias)[j], 0.0);
        out[(bi * m + i) * n + j] = s;
      }
    }
  }
  return out;
}

void Compare(const std::vector<float>& got, const std::vector<double>& want, int64_t k) {
  ASSERT_EQ(got.size(), want.size());
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 5; ++i) {
    double tol = 1e-5 * (4.0 * k + 1);
    if (!(std::fabs(got[i] - want[i]) <= tol)) {
      ADD_FAILURE() << "element " << i << ": got " << got[i] << " want " << want[i];
      ++bad;
    }
  }
}

void Check(const Graph& g, std::vector<std::vector<float>> inputs, const std::vector<double>& want,
           int64_t k, const std::vector<std::string>& configs) {
  CpuTarget target = CpuTarget::Host();
  for (const std::string& text : configs) {
    SCOPED_TRACE(absl::StrCat(g.ToText(), " config ", text));
    ScheduleConfig config = Config(text);
    ASSERT_TRUE(ValidateSchedule(g, config, target).ok()) << ValidateSchedule(g, config, target);
    auto kernel = JitCompile(g, config, target);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    Compare(RunKernel(**kernel, inputs, static_cast<int64_t>(want.size())), want, k);
  }
}

const std::vector<std::string>& BlockedConfigs() {
  static const std::vector<std::string> configs = {
      "kc=16,mr=6,nr=2,ku=4",           // K = 67: 4 blocks + 3
      "kc=32,mc=40,mr=4,nr=3,ku=4",     // rows per task not a multiple of 32
      "kc=67,mr=8,nr=2,ku=1",           // one block, exactly K
      "kc=100,nc=32,mr=6,nr=1,ku=4",    // one block longer than K; 2-vector column blocks
      "kc=5,nc=40,mc=7,mr=2,nr=1,ku=4", // nc rounded up to a panel, tiny blocks
      "kc=64,nc=64,mr=1,nr=4,ku=4",
      "nc=48,mr=6,nr=3,ku=4",           // column blocks without K blocking
      "mc=9,nc=16,mr=4,nr=1,ku=1",
      "kc=0,mc=0,nc=0,mr=6,nr=2,ku=4",  // explicit zeros: today's kernel
  };
  return configs;
}

TEST(MatMulBlocking, OddShapesEveryKnob) {
  int64_t m = 71, n = 101, k = 67;
  std::vector<std::vector<float>> in = {RandomData(m * k, 11), RandomData(k * n, 12)};
  auto g = MakeWorkload("MatMul", {{m, k}, {k, n}}, {m, n});
  Check(*g, in, Reference(in[0], in[1], nullptr, 1, m, n, k, false, false), k, BlockedConfigs());
}

TEST(MatMulBlocking, BatchedAndBroadcastB) {
  int64_t m = 13, n = 37, k = 45;
  std::vector<std::vector<float>> in = {RandomData(3 * m * k, 13), RandomData(3 * k * n, 14)};
  auto g = MakeWorkload("MatMul", {{3, m, k}, {3, k, n}}, {3, m, n});
  Check(*g, in, Reference(in[0], in[1], nullptr, 3, m, n, k, true, false), k, BlockedConfigs());
  std::vector<std::vector<float>> in2 = {in[0], RandomData(k * n, 15)};
  auto g2 = MakeWorkload("MatMul", {{3, m, k}, {k, n}}, {3, m, n});
  Check(*g2, in2, Reference(in2[0], in2[1], nullptr, 3, m, n, k, false, false), k,
        {"kc=16,nc=32,mr=4,nr=2,ku=4", "kc=44,mc=8,mr=8,nr=1,ku=1"});
}

TEST(MatMulBlocking, GemmTransposedB) {
  int64_t m = 23, n = 53, k = 41;
  std::vector<std::vector<float>> in = {RandomData(m * k, 16), RandomData(n * k, 17)};
  auto g = MakeWorkload("Gemm", {{m, k}, {n, k}}, {m, n}, {{"transB", int64_t{1}}});
  Check(*g, in, Reference(in[0], in[1], nullptr, 1, m, n, k, false, true), k,
        {"kc=16,mr=6,nr=2,ku=4", "kc=40,nc=16,mr=4,nr=1,ku=1", "kc=7,nc=64,mc=10,mr=2,nr=4,ku=4"});
}

// An unpacked B whose slice per task is beyond an L2: tasks walk column
// panels outermost (MatMulTiling::cols_outer), with row blocks, a row tail, a
// guarded last row task and a column tail inside each panel walk.
TEST(MatMulBlocking, ColumnPanelsOutermostOverALargeUnpackedB) {
  CpuTarget target = CpuTarget::Host();
  int64_t m = 45, n = 420, k = 700;  // B: 1.18 MB
  std::vector<std::vector<float>> in = {RandomData(m * k, 21), RandomData(k * n, 22)};
  auto g = MakeWorkload("MatMul", {{m, k}, {k, n}}, {m, n});
  const std::vector<std::string> configs = {"mr=6,nr=2,ku=4", "nc=400,mr=4,nr=1,ku=4", "mc=12,mr=4,nr=3,ku=1"};
  auto spec = loop_ir::AnalyzeMatMul(*g);
  ASSERT_TRUE(spec.ok());
  for (const std::string& text : configs) {
    EXPECT_TRUE(loop_ir::TileMatMul(*spec, Config(text), target).cols_outer) << text;
  }
  EXPECT_FALSE(loop_ir::TileMatMul(*spec, Config("nc=48,mr=6,nr=3,ku=4"), target).cols_outer);
  EXPECT_FALSE(loop_ir::TileMatMul(*spec, Config("kc=64,mr=6,nr=2,ku=4"), target).cols_outer);
  Check(*g, in, Reference(in[0], in[1], nullptr, 1, m, n, k, false, false), k, configs);
}

// Relu(MatMul(A, B) + bias): the epilogue must run once, after the last K
// block (a ReLU on partial sums would be wrong).
TEST(MatMulBlocking, FusedBiasReluAfterLastBlock) {
  int64_t m = 37, n = 70, k = 90;
  auto g = std::make_unique<Graph>();
  auto* a = *g->AddInput("a", TensorType::Static(DType::kFloat32, {m, k}));
  auto* b = *g->AddInput("b", TensorType::Static(DType::kFloat32, {k, n}));
  auto* bias = *g->AddInput("bias", TensorType::Static(DType::kFloat32, {n}));
  auto* t0 = *g->AddValue("t0", TensorType::Static(DType::kFloat32, {m, n}));
  auto* t1 = *g->AddValue("t1", TensorType::Static(DType::kFloat32, {m, n}));
  auto* y = *g->AddValue("y", TensorType::Static(DType::kFloat32, {m, n}));
  ASSERT_TRUE(g->AddNode("MatMul", "mm", {a, b}, {t0}).ok());
  ASSERT_TRUE(g->AddNode("Add", "add", {t0, bias}, {t1}).ok());
  ASSERT_TRUE(g->AddNode("Relu", "relu", {t1}, {y}).ok());
  g->AddOutput(y);
  ASSERT_TRUE(CanCompile(*g));
  std::vector<std::vector<float>> in = {RandomData(m * k, 18), RandomData(k * n, 19), RandomData(n, 20)};
  Check(*g, in, Reference(in[0], in[1], &in[2], 1, m, n, k, false, false), k, BlockedConfigs());
}

TEST(MatMulBlocking, EmptyK) {
  std::vector<std::vector<float>> in = {RandomData(0, 1), RandomData(0, 2)};
  auto g = MakeWorkload("MatMul", {{5, 0}, {0, 19}}, {5, 19});
  Check(*g, in, std::vector<double>(5 * 19, 0.0), 0, {"kc=16,mr=4,nr=1,ku=4", "kc=8,nc=16,mr=1,nr=1,ku=1"});
}

// The row-streaming GEMV (gv=1): column blocks with a tail inside the last
// one, K not a multiple of ku, a 1-D A, a bias + ReLU epilogue, and batches
// of rows with their own B; refused where it does not apply.
TEST(MatMulBlocking, RowStreamingGemv) {
  int64_t n = 1000, k = 67;
  const std::vector<std::string> configs = {"gv=1,mr=1,nr=1,ku=4", "gv=1,mr=1,nr=1,ku=8,nc=256",
                                            "gv=1,mr=1,nr=1,ku=1,nc=300", "gv=1,mr=1,nr=1,ku=2,nc=512"};
  std::vector<std::vector<float>> in = {RandomData(k, 21), RandomData(k * n, 22)};
  auto g = MakeWorkload("MatMul", {{1, k}, {k, n}}, {1, n});
  Check(*g, in, Reference(in[0], in[1], nullptr, 1, 1, n, k, false, false), k, configs);
  auto vec = MakeWorkload("MatMul", {{k}, {k, n}}, {n});
  Check(*vec, in, Reference(in[0], in[1], nullptr, 1, 1, n, k, false, false), k, configs);
  std::vector<std::vector<float>> batched = {RandomData(3 * k, 23), RandomData(3 * k * 45, 24)};
  auto b3 = MakeWorkload("MatMul", {{3, 1, k}, {3, k, 45}}, {3, 1, 45});
  Check(*b3, batched, Reference(batched[0], batched[1], nullptr, 3, 1, 45, k, true, false), k,
        {"gv=1,mr=1,nr=1,ku=4", "gv=1,mr=1,nr=1,ku=8,nc=16"});

  auto fused = std::make_unique<Graph>();
  auto* a = *fused->AddInput("a", TensorType::Static(DType::kFloat32, {1, k}));
  auto* b = *fused->AddInput("b", TensorType::Static(DType::kFloat32, {k, n}));
  auto* bias = *fused->AddInput("bias", TensorType::Static(DType::kFloat32, {n}));
  auto* t0 = *fused->AddValue("t0", TensorType::Static(DType::kFloat32, {1, n}));
  auto* y = *fused->AddValue("y", TensorType::Static(DType::kFloat32, {1, n}));
  ASSERT_TRUE(fused->AddNode("Gemm", "fc", {a, b, bias}, {t0}).ok());
  ASSERT_TRUE(fused->AddNode("Relu", "relu", {t0}, {y}).ok());
  fused->AddOutput(y);
  std::vector<std::vector<float>> fin = {in[0], in[1], RandomData(n, 25)};
  Check(*fused, fin, Reference(fin[0], fin[1], &fin[2], 1, 1, n, k, false, false), k, configs);

  CpuTarget target = CpuTarget::Host();
  auto rows = MakeWorkload("MatMul", {{2, k}, {k, n}}, {2, n});
  auto tb = MakeWorkload("Gemm", {{1, k}, {n, k}}, {1, n}, {{"transB", int64_t{1}}});
  for (const Graph* bad : {rows.get(), tb.get()}) {
    EXPECT_FALSE(ValidateSchedule(*bad, Config("gv=1,mr=1,nr=1,ku=4"), target).ok());
  }
  EXPECT_FALSE(ValidateSchedule(*g, Config("gv=1,mr=2,nr=1,ku=4"), target).ok());
  EXPECT_FALSE(ValidateSchedule(*g, Config("gv=1,mr=1,nr=1,ku=4,kc=16"), target).ok());
  // A task's column accumulators live on its stack: a vocabulary-wide GEMV
  // takes them in blocks.
  auto wide = MakeWorkload("MatMul", {{1, 8}, {8, 50257}}, {1, 50257});
  EXPECT_FALSE(ValidateSchedule(*wide, Config("gv=1,mr=1,nr=1,ku=4"), target).ok());
  EXPECT_TRUE(ValidateSchedule(*wide, Config("gv=1,mr=1,nr=1,ku=4,nc=512"), target).ok());
  for (const ScheduleConfig& c : EnumerateSchedules(*wide, target)) {
    EXPECT_TRUE(ValidateSchedule(*wide, c, target).ok()) << c.ToString();
  }
  // A classifier's weights (1280 x 1000 floats) stream, eight rows a pass
  // (a short K as many as it has); a small B stays in the register-tiled
  // kernel.
  auto classifier = MakeWorkload("MatMul", {{1, 1280}, {1280, 1000}}, {1, 1000});
  EXPECT_EQ(DefaultSchedule(*classifier, target).Get("gv", 0), 1);
  EXPECT_EQ(DefaultSchedule(*classifier, target).Get("ku", 0), 8);
  auto short_k = MakeWorkload("MatMul", {{1, 3}, {3, 60000}}, {1, 60000});
  EXPECT_EQ(DefaultSchedule(*short_k, target).Get("gv", 0), 1);
  EXPECT_EQ(DefaultSchedule(*short_k, target).Get("ku", 0), 4);
  EXPECT_EQ(DefaultSchedule(*g, target).Get("gv", 0), 0);
}

// The dot-form GEMV (gv=2) over B's rows (Gemm transB=1): column blocks
// with a tail inside the last one and ku not dividing them, K with a tail
// vector and K below one vector, a bias + ReLU epilogue; refused where it
// does not apply; the default for a classifier head.
TEST(MatMulBlocking, DotFormGemv) {
  CpuTarget target = CpuTarget::Host();
  const std::vector<std::string> configs = {"gv=2,mr=1,nr=1,ku=4", "gv=2,mr=1,nr=1,ku=8,nc=256",
                                            "gv=2,mr=1,nr=1,ku=3,nc=300", "gv=2,mr=1,nr=1,ku=2,nc=512"};
  for (int64_t k : {67, 5, 64}) {
    const int64_t n = 1000;
    std::vector<std::vector<float>> in = {RandomData(k, 31), RandomData(n * k, 32), RandomData(n, 33)};
    auto g = MakeWorkload("Gemm", {{1, k}, {n, k}}, {1, n}, {{"transB", int64_t{1}}});
    Check(*g, {in[0], in[1]}, Reference(in[0], in[1], nullptr, 1, 1, n, k, false, true), k, configs);
    auto fused = std::make_unique<Graph>();
    auto* a = *fused->AddInput("a", TensorType::Static(DType::kFloat32, {1, k}));
    auto* b = *fused->AddInput("b", TensorType::Static(DType::kFloat32, {n, k}));
    auto* bias = *fused->AddInput("bias", TensorType::Static(DType::kFloat32, {n}));
    auto* t0 = *fused->AddValue("t0", TensorType::Static(DType::kFloat32, {1, n}));
    auto* y = *fused->AddValue("y", TensorType::Static(DType::kFloat32, {1, n}));
    ASSERT_TRUE(fused->AddNode("Gemm", "fc", {a, b, bias}, {t0}, {{"transB", int64_t{1}}}).ok());
    ASSERT_TRUE(fused->AddNode("Relu", "relu", {t0}, {y}).ok());
    fused->AddOutput(y);
    Check(*fused, in, Reference(in[0], in[1], &in[2], 1, 1, n, k, false, true), k, configs);
  }
  auto plain = MakeWorkload("MatMul", {{1, 67}, {67, 1000}}, {1, 1000});
  auto rows = MakeWorkload("Gemm", {{2, 67}, {1000, 67}}, {2, 1000}, {{"transB", int64_t{1}}});
  for (const Graph* bad : {plain.get(), rows.get()}) {
    EXPECT_FALSE(ValidateSchedule(*bad, Config("gv=2,mr=1,nr=1,ku=4"), target).ok());
  }
  auto head = MakeWorkload("Gemm", {{1, 1280}, {1000, 1280}}, {1, 1000}, {{"transB", int64_t{1}}});
  EXPECT_EQ(DefaultSchedule(*head, target).Get("gv", 0), 2);
  EXPECT_EQ(DefaultSchedule(*head, target).Get("ku", 0), 8);
  for (const ScheduleConfig& c : EnumerateSchedules(*head, target)) {
    EXPECT_TRUE(ValidateSchedule(*head, c, target).ok()) << c.ToString();
  }
}

TEST(MatMulBlocking, SpaceOnLargeShapesAndBufferBound) {
  CpuTarget target = loop_ir_testing::HostWithL2AtMost1MiB();  // the L2 its sizes were chosen for
  auto big = MakeWorkload("MatMul", {{512, 768}, {768, 3072}}, {512, 3072});
  auto gemv = MakeWorkload("MatMul", {{1, 1280}, {1280, 1000}}, {1, 1000});
  // A pointwise conv on a 5x5 map as a matmul: 25 rows, one row task.
  auto few_rows = MakeWorkload("MatMul", {{25, 240}, {240, 1280}}, {25, 1280});
  for (const Graph* g : {big.get(), gemv.get(), few_rows.get()}) {
    std::vector<ScheduleConfig> space = EnumerateSchedules(*g, target);
    bool blocked = false;
    for (const ScheduleConfig& c : space) {
      EXPECT_TRUE(ValidateSchedule(*g, c, target).ok()) << c.ToString();
      blocked |= c.Get("kc", 0) > 0 || c.Get("nc", 0) > 0;
    }
    EXPECT_TRUE(blocked);
    ScheduleConfig d = DefaultSchedule(*g, target);
    EXPECT_NE(std::find(space.begin(), space.end(), d), space.end()) << d.ToString();
    // Column blocks give a GEMV and a few-row GEMM at least two tasks; row and
    // column blocks a big GEMM many.
    auto spec = loop_ir::AnalyzeMatMul(*g);
    ASSERT_TRUE(spec.ok());
    EXPECT_GE(loop_ir::TileMatMul(*spec, d, target).num_tasks, 2) << d.ToString();
  }
  // Few rows over a B beyond 4 MiB: packed by default, in one row block.
  auto few_rows_big_b = MakeWorkload("MatMul", {{32, 768}, {768, 3072}}, {32, 3072});
  ScheduleConfig packed = DefaultSchedule(*few_rows_big_b, target);
  EXPECT_GT(packed.Get("kc", 0), 0) << packed.ToString();
  auto few_spec = loop_ir::AnalyzeMatMul(*few_rows_big_b);
  ASSERT_TRUE(few_spec.ok());
  EXPECT_EQ(loop_ir::TileMatMul(*few_spec, packed, target).row_blocks, 1) << packed.ToString();
  EXPECT_EQ(DefaultSchedule(*few_rows, target).Get("kc", 0), 0);  // 1.2 MB: read in place
  // 8 rows or more over 2 MiB of B (an LSTM's input projection): packed;
  // 4 rows: in place.
  auto lstm = MakeWorkload("MatMul", {{33, 256}, {256, 2048}}, {33, 2048});
  EXPECT_GT(DefaultSchedule(*lstm, target).Get("kc", 0), 0);
  auto four_rows = MakeWorkload("MatMul", {{4, 512}, {512, 1024}}, {4, 1024});
  EXPECT_EQ(DefaultSchedule(*four_rows, target).Get("kc", 0), 0);
  // 1024 x 1024 floats of packed B is over the bound.
  absl::Status s = ValidateSchedule(*big, Config("kc=1024,mr=6,nr=2,ku=4,nc=1024"), target);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(ValidateSchedule(*big, Config("kc=-1"), target).code(), absl::StatusCode::kInvalidArgument);
}

// The default register block: 8 rows by 3 vectors, K not unrolled, where 32
// vector registers hold its 24 accumulators (2 vectors where those cover
// more columns in whole panels), B of a few hundred rows read in place up
// to 4 MiB; 6 x 2 unrolled 4 times with 16 registers.
TEST(MatMulBlocking, DefaultRegisterBlockFollowsTheRegisterFile) {
  absl::StatusOr<CpuTarget> avx512 = CpuTarget::Named("znver5");
  absl::StatusOr<CpuTarget> avx2 = CpuTarget::Named("x86-64-v3");
  ASSERT_TRUE(avx512.ok() && avx2.ok());
  auto proj = MakeWorkload("MatMul", {{128, 768}, {768, 768}}, {128, 768});
  ScheduleConfig d = DefaultSchedule(*proj, *avx512);
  EXPECT_EQ(d.ToString(), "ku=1,mr=8,nr=3");
  d = DefaultSchedule(*proj, *avx2);
  EXPECT_EQ(d.Get("mr", 0), 6) << d.ToString();
  EXPECT_EQ(d.Get("nr", 0), 2) << d.ToString();
  EXPECT_EQ(d.Get("ku", 0), 4) << d.ToString();
  EXPECT_GT(d.Get("kc", 0), 0) << d.ToString();  // packed, as before
  // 34 columns (a Winograd product): 2 vectors and a 2-column tail.
  auto thin = MakeWorkload("MatMul", {{16, 512, 256}, {16, 256, 34}}, {16, 512, 34});
  EXPECT_EQ(DefaultSchedule(*thin, *avx512).Get("nr", 0), 2);
  // A B beyond 4 MiB read by 128 rows: packed in one row block.
  auto mlp = MakeWorkload("MatMul", {{128, 3072}, {3072, 768}}, {128, 768});
  d = DefaultSchedule(*mlp, *avx512);
  EXPECT_GT(d.Get("kc", 0), 0) << d.ToString();
  EXPECT_EQ(d.Get("mr", 0), 8) << d.ToString();
}

// Packing starts where B outgrows the target's L2: ViT's 197 x 192 by 192 x
// 768 (590 KB) packs on Zen 3 (512 KiB L2) and reads B in place where the L2
// is 1 MiB, with the same 16-register block.
TEST(MatMulBlocking, PackingFollowsTheL2) {
  absl::StatusOr<CpuTarget> zen3 = CpuTarget::Named("znver3");
  absl::StatusOr<CpuTarget> v3 = CpuTarget::Named("x86-64-v3");
  ASSERT_TRUE(zen3.ok() && v3.ok());
  auto fc1 = MakeWorkload("MatMul", {{197, 192}, {192, 768}}, {197, 768});
  ScheduleConfig d = DefaultSchedule(*fc1, *zen3);
  EXPECT_GT(d.Get("kc", 0), 0) << d.ToString();
  EXPECT_TRUE(ValidateSchedule(*fc1, d, *zen3).ok());
  d = DefaultSchedule(*fc1, *v3);
  EXPECT_EQ(d.Get("kc", 0), 0) << d.ToString();
  // Under three quarters of Zen 3's L2 (192 x 384, 288 KB), in place there too.
  auto small = MakeWorkload("MatMul", {{197, 192}, {192, 384}}, {197, 384});
  d = DefaultSchedule(*small, *zen3);
  EXPECT_EQ(d.Get("kc", 0), 0) << d.ToString();
}

// The packed buffer lives on the stack: an object with a packed kernel imports
// nothing beyond memcpy/memset/memmove.
// How two and four threads share tasks: contiguous runs of floor or ceil of
// tasks / threads, the longer first (runtime::ThreadPool::ParallelFor).
TEST(MatMulBlocking, EvenShareOfTasks) {
  EXPECT_DOUBLE_EQ(loop_ir::EvenShare({1, 1, 1, 1}, 2), 1.0);
  EXPECT_DOUBLE_EQ(loop_ir::EvenShare({1, 1, 1, 1, 1, 1, 1}, 2), 3.5 / 4);           // 4 against 3
  EXPECT_DOUBLE_EQ(loop_ir::EvenShare({32, 32, 32, 32, 32, 32, 5}, 2), 98.5 / 128);  // 197 rows by 32
  EXPECT_DOUBLE_EQ(loop_ir::EvenShare({5}, 4), 0.25);                                 // one task of four
  EXPECT_DOUBLE_EQ(loop_ir::EvenShare({6, 6}, 1), 1.0);
  EXPECT_EQ(loop_ir::EvenShareRank(std::vector<int64_t>(7, 1)), 0);
  EXPECT_EQ(loop_ir::EvenShareRank(std::vector<int64_t>(8, 1)), 3);
  EXPECT_EQ(loop_ir::EvenShareRank(std::vector<int64_t>(25, 1)), 2);  // 4 threads: 7 of 25 tasks, 0.89
}

// Defaults split their tasks so that two threads share them evenly: ViT's
// 197 rows in 8-row tasks (32-row tasks are 7, 4 against 3), a packed
// GRU projection's 1536 columns in 8 blocks rather than 7, a classifier
// head's 256 columns in two halves, ViT's 65 rows in 12-row blocks, ViT-S's
// 65 rows by 1536 columns in one row block and two column halves. The
// tasks' kernels (a 5-row last task, column halves) match the reference.
TEST(MatMulBlocking, DefaultTasksShareEvenlyBetweenThreads) {
  absl::StatusOr<CpuTarget> avx512 = CpuTarget::Named("znver5");
  ASSERT_TRUE(avx512.ok());
  auto tasks_of = [&](const Graph& g, const ScheduleConfig& c) {
    auto spec = loop_ir::AnalyzeMatMul(g);
    EXPECT_TRUE(spec.ok()) << spec.status();
    return loop_ir::TileMatMul(*spec, c, *avx512).num_tasks;
  };
  auto vit = MakeWorkload("MatMul", {{197, 192}, {192, 576}}, {197, 576});
  ScheduleConfig d = DefaultSchedule(*vit, *avx512);
  EXPECT_EQ(d.ToString(), "ku=1,mc=8,mr=8,nr=3");
  EXPECT_EQ(tasks_of(*vit, d), 25);
  auto gru = MakeWorkload("MatMul", {{100, 1312}, {1312, 1536}}, {100, 1536});
  d = DefaultSchedule(*gru, *avx512);
  EXPECT_GT(d.Get("kc", 0), 0) << d.ToString();
  EXPECT_EQ(tasks_of(*gru, d), 8) << d.ToString();
  auto head = MakeWorkload("Gemm", {{1, 4096}, {256, 4096}}, {1, 256}, {{"transB", int64_t{1}}});
  d = DefaultSchedule(*head, *avx512);
  EXPECT_EQ(d.ToString(), "gv=2,ku=8,mr=1,nc=128,nr=1");
  EXPECT_EQ(tasks_of(*head, d), 2);
  // ViT's 65 rows: no task size of 8-row blocks shares evenly (1-row tail);
  // 12-row blocks do (36 rows against 29), as many accumulators or more.
  auto vit65 = MakeWorkload("MatMul", {{65, 128}, {128, 256}}, {65, 256});
  d = DefaultSchedule(*vit65, *avx512);
  EXPECT_EQ(d.ToString(), "ku=1,mc=12,mr=12,nr=2");
  EXPECT_EQ(tasks_of(*vit65, d), 6);
  // No taller block fits 3 vectors of columns: 100 rows keep 8 x 3 (a
  // shorter block would cost each thread more than the even share saves).
  auto gru100 = MakeWorkload("MatMul", {{100, 256}, {256, 1536}}, {100, 1536});
  d = DefaultSchedule(*gru100, *avx512);
  EXPECT_EQ(d.Get("mr", 0), 8) << d.ToString();
  EXPECT_EQ(d.Get("nr", 0), 3) << d.ToString();
  // ViT-S's 65 rows by 1536 columns in 8 x 3 blocks (no taller block fits
  // three vectors): all rows in one row block, the columns in two halves.
  auto vits = MakeWorkload("MatMul", {{65, 384}, {384, 1536}}, {65, 1536});
  d = DefaultSchedule(*vits, *avx512);
  EXPECT_EQ(d.ToString(), "ku=1,mc=72,mr=8,nc=768,nr=3");
  EXPECT_EQ(tasks_of(*vits, d), 2);
  for (const Graph* g : {vit.get(), gru.get(), head.get(), vit65.get(), gru100.get(), vits.get()}) {
    std::vector<ScheduleConfig> space = EnumerateSchedules(*g, *avx512);
    ScheduleConfig dflt = DefaultSchedule(*g, *avx512);
    EXPECT_NE(std::find(space.begin(), space.end(), dflt), space.end()) << dflt.ToString();
  }
  const int64_t m = 197, k = 40, n = 96;
  std::vector<std::vector<float>> in = {RandomData(m * k, 41), RandomData(k * n, 42)};
  auto g = MakeWorkload("MatMul", {{m, k}, {k, n}}, {m, n});
  Check(*g, in, Reference(in[0], in[1], nullptr, 1, m, n, k, false, false), k,
        {"ku=1,mc=8,mr=8,nr=3", "ku=1,mc=16,mr=8,nr=2", "ku=4,mc=6,mr=6,nr=2", "ku=1,mc=12,mr=12,nr=2",
         "ku=1,mc=200,mr=8,nc=48,nr=3"});
}

TEST(MatMulBlocking, PackedKernelObjectIsSelfContained) {
  CpuTarget target = CpuTarget::Host();
  auto g = MakeWorkload("MatMul", {{200, 700}, {700, 900}}, {200, 900});
  auto obj = CompileToObject({{g.get(), Config("kc=256,mc=128,mr=6,nc=256,nr=2,ku=4"), "mm_packed"}}, target);
  ASSERT_TRUE(obj.ok()) << obj.status();
  ASSERT_EQ(obj->kernels.size(), 1u);
  EXPECT_EQ(obj->kernels[0].num_tasks, 2 * 4);  // 2 row blocks x 4 column blocks
  for (const std::string& name : codegen_testing::UndefinedSymbols(obj->elf)) {
    EXPECT_TRUE(name == "memcpy" || name == "memset" || name == "memmove") << name;
  }
}

}  // namespace
}  // namespace kiln
