// Schedule spaces, config text, workload kinds, target keys and the errors of
// the codegen entry points.
#include "compiler_core/codegen/schedule_space.h"

#include <set>
#include <thread>

#include "compiler_core/codegen/jit.h"
#include "compiler_core/codegen/target.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/codegen_testing.h"

namespace kiln {
namespace {

using codegen_testing::MakeWorkload;
using codegen_testing::RandomData;
using codegen_testing::RunKernel;

TEST(CpuTarget, HostKeyAndVectorBits) {
  CpuTarget t = CpuTarget::Host();
  EXPECT_FALSE(t.cpu.empty());
  EXPECT_EQ(t.Key().rfind("cpu/x86_64/" + t.cpu + "/", 0), 0u) << t.Key();
  EXPECT_EQ(t.Key(), CpuTarget::Host().Key());
  EXPECT_EQ(t.VectorBits(), t.HasFeature("avx512f") ? 512 : t.HasFeature("avx2") ? 256 : 128);
  CpuTarget other = t;
  other.features += ",+madeup";
  EXPECT_NE(other.Key(), t.Key());
  CpuTarget avx2{"x86_64-pc-linux-gnu", "haswell", "+avx,+avx2,+fma,-avx512f"};
  EXPECT_EQ(avx2.VectorBits(), 256);
  EXPECT_FALSE(avx2.HasFeature("avx512f"));
}

TEST(ScheduleConfig, ToStringParseRoundTrip) {
  ScheduleConfig c;
  c.Set("nr", 2);
  c.Set("mr", 4);
  c.Set("ku", -1);
  EXPECT_EQ(c.ToString(), "ku=-1,mr=4,nr=2");
  auto back = ScheduleConfig::Parse(c.ToString());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, c);
  EXPECT_EQ(back->Get("mr", 0), 4);
  EXPECT_EQ(back->Get("zz", 7), 7);
  auto empty = ScheduleConfig::Parse("");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->knobs.empty());
  for (const char* bad : {"mr", "mr=", "=3", "mr=x", "mr=1,,nr=2", "mr=1,mr=2", "MR=1", "mr=1 "}) {
    EXPECT_EQ(ScheduleConfig::Parse(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(ScheduleSpace, KindsAndEnumeration) {
  CpuTarget t = CpuTarget::Host();
  auto add = MakeWorkload("Add", {{64, 1024}, {1024}}, {64, 1024});
  auto mm = MakeWorkload("MatMul", {{128, 256}, {256, 512}}, {128, 512});
  auto gemm = MakeWorkload("Gemm", {{8, 4}, {4, 16}}, {8, 16});
  auto conv = MakeWorkload("Conv", {{1, 3, 8, 8}, {4, 3, 3, 3}}, {1, 4, 6, 6});
  auto deconv = MakeWorkload("ConvTranspose", {{1, 3, 8, 8}, {3, 4, 3, 3}}, {1, 4, 10, 10});
  EXPECT_EQ(WorkloadKind(*add), "elementwise");
  EXPECT_EQ(WorkloadKind(*mm), "matmul");
  EXPECT_EQ(WorkloadKind(*gemm), "matmul");
  EXPECT_EQ(WorkloadKind(*conv), "conv");  // through the loop IR
  EXPECT_FALSE(EnumerateSchedules(*conv, t).empty());
  EXPECT_EQ(WorkloadKind(*deconv), "conv_transpose");  // through the loop IR
  EXPECT_FALSE(EnumerateSchedules(*deconv, t).empty());
  auto einsum = MakeWorkload("Hardmax", {{4, 8}}, {4, 8});
  EXPECT_EQ(WorkloadKind(*einsum), "unsupported");
  EXPECT_TRUE(EnumerateSchedules(*einsum, t).empty());

  for (const Graph* g : {add.get(), mm.get(), gemm.get()}) {
    std::vector<ScheduleConfig> space = EnumerateSchedules(*g, t);
    ASSERT_FALSE(space.empty());
    EXPECT_EQ(space, EnumerateSchedules(*g, t));  // deterministic
    std::set<std::string> seen;
    for (const auto& c : space) {
      EXPECT_TRUE(seen.insert(c.ToString()).second) << "duplicate " << c.ToString();
      EXPECT_TRUE(ValidateSchedule(*g, c, t).ok()) << c.ToString();
    }
    ScheduleConfig d = DefaultSchedule(*g, t);
    EXPECT_TRUE(seen.count(d.ToString())) << d.ToString();
  }
  // Full spaces on large shapes.
  int lanes = t.FloatLanes();
  size_t vws = 1 + (lanes >= 4) + (lanes >= 8) + (lanes >= 16);
  EXPECT_EQ(EnumerateSchedules(*add, t).size(), vws * 2);  // vw x tasks {1, 16}
  std::vector<ScheduleConfig> mm_space = EnumerateSchedules(*mm, t);
  for (const auto& c : mm_space) {
    EXPECT_LE(c.Get("mr", 0) * c.Get("nr", 0) + c.Get("nr", 0) + 1, t.NumVectorRegisters());
  }
  if (lanes == 16) {
    // mr 6 x nr 4 x ku 2, less (8,4,*) and (12,3..4,*): 42 register blocks;
    // those of 4 rows or more again with row tasks of one and two blocks
    // (mr 12: one; two is its default of 24 rows): 48; and those 26 blocks
    // with all 128 rows in one row block, the columns in halves and in
    // quarters: 52.
    EXPECT_EQ(mm_space.size(), 142u);
    ScheduleConfig d = DefaultSchedule(*mm, t);
    // 8 rows by 2 vectors: 512 columns are 16 whole 2-vector panels, where
    // 3-vector panels would leave 32 to a tail tile (DefaultMatMul).
    EXPECT_EQ(d.ToString(), "ku=1,mr=8,nr=2");
    EXPECT_EQ(DefaultSchedule(*add, t).ToString(), "tasks=16,vw=16");
  }
  // A tiny shape prunes points that would only repeat smaller ones.
  auto tiny = MakeWorkload("MatMul", {{1, 1}, {1, 1}}, {1, 1});
  EXPECT_EQ(EnumerateSchedules(*tiny, t).size(), 1u);
}

TEST(ScheduleSpace, InvalidConfigsAndWorkloads) {
  CpuTarget t = CpuTarget::Host();
  auto add = MakeWorkload("Add", {{4}, {4}}, {4});
  ScheduleConfig bad_knob;
  bad_knob.Set("mr", 4);
  EXPECT_EQ(JitCompile(*add, bad_knob, t).status().code(), absl::StatusCode::kInvalidArgument);
  ScheduleConfig wide;
  wide.Set("vw", 64);
  EXPECT_EQ(JitCompile(*add, wide, t).status().code(), absl::StatusCode::kInvalidArgument);
  ScheduleConfig odd;
  odd.Set("vw", 3);
  EXPECT_EQ(JitCompile(*add, odd, t).status().code(), absl::StatusCode::kInvalidArgument);

  auto hardmax = MakeWorkload("Hardmax", {{4, 8}}, {4, 8});
  absl::Status s = JitCompile(*hardmax, {}, t).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("Hardmax"), std::string::npos) << s;

  auto mismatch = MakeWorkload("Add", {{3, 4}, {5}}, {3, 4});
  EXPECT_EQ(JitCompile(*mismatch, {}, t).status().code(), absl::StatusCode::kInvalidArgument);
  auto wrong_out = MakeWorkload("Add", {{3, 4}, {4}}, {3, 5});
  EXPECT_EQ(JitCompile(*wrong_out, {}, t).status().code(), absl::StatusCode::kInvalidArgument);
  auto bad_k = MakeWorkload("MatMul", {{3, 4}, {5, 6}}, {3, 6});
  EXPECT_EQ(JitCompile(*bad_k, {}, t).status().code(), absl::StatusCode::kInvalidArgument);
  auto gemm3d = MakeWorkload("Gemm", {{2, 3, 4}, {4, 5}}, {3, 5});
  EXPECT_EQ(JitCompile(*gemm3d, {}, t).status().code(), absl::StatusCode::kInvalidArgument);

  // Constant operand: not a workload (no code generator takes it).
  Graph g;
  Value* x = *g.AddInput("x", TensorType::Static(DType::kFloat32, {4}));
  Value* w = *g.AddConstant("w", Tensor(DType::kFloat32, {4}));
  Value* y = *g.AddValue("y", TensorType::Static(DType::kFloat32, {4}));
  ASSERT_TRUE(g.AddNode("Add", "a", {x, w}, {y}).ok());
  g.AddOutput(y);
  EXPECT_FALSE(JitCompile(g, {}, t).ok());
  // Non-f32 input: the loop IR compiles every Kiln dtype.
  auto ints = std::make_unique<Graph>();
  Value* xi = *ints->AddInput("x", TensorType::Static(DType::kInt32, {4}));
  Value* yi = *ints->AddValue("y", TensorType::Static(DType::kInt32, {4}));
  ASSERT_TRUE(ints->AddNode("Relu", "r", {xi}, {yi}).ok());
  ints->AddOutput(yi);
  EXPECT_TRUE(JitCompile(*ints, {}, t).ok());
  // Declared types that shape inference contradicts.
  auto wrong_i = MakeWorkload("Relu", {{3, 4}}, {3, 5});
  EXPECT_EQ(JitCompile(*wrong_i, {}, t).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Jit, ConcurrentCompilesAndIrDump) {
  CpuTarget t = CpuTarget::Host();
  auto mm = MakeWorkload("MatMul", {{9, 10}, {10, 33}}, {9, 33});
  auto sig = MakeWorkload("Sigmoid", {{100}}, {100});
  std::unique_ptr<JitKernel> k1, k2;
  absl::Status s1, s2;
  for (int round = 0; round < 3; ++round) {
    std::thread a([&] {
      auto r = JitCompile(*mm, DefaultSchedule(*mm, t), t);
      s1 = r.status();
      if (r.ok()) k1 = std::move(*r);
    });
    std::thread b([&] {
      auto r = JitCompile(*sig, DefaultSchedule(*sig, t), t);
      s2 = r.status();
      if (r.ok()) k2 = std::move(*r);
    });
    a.join();
    b.join();
    ASSERT_TRUE(s1.ok()) << s1;
    ASSERT_TRUE(s2.ok()) << s2;
  }
  // The kernels work, also with tasks run from two threads at once.
  std::vector<std::vector<float>> in = {RandomData(90, 1), RandomData(330, 2)};
  std::vector<float> out(9 * 33, 0.0f);
  void* args[] = {in[0].data(), in[1].data(), out.data()};
  int64_t n = k1->num_tasks();
  std::thread ta([&] { k1->Run(args, 0, n / 2); });
  std::thread tb([&] { k1->Run(args, n / 2, n); });
  ta.join();
  tb.join();
  for (int i = 0; i < 9; ++i) {
    for (int j = 0; j < 33; ++j) {
      double r = 0;
      for (int p = 0; p < 10; ++p) r += static_cast<double>(in[0][i * 10 + p]) * in[1][p * 33 + j];
      EXPECT_NEAR(out[i * 33 + j], r, 1e-4);
    }
  }
  // IR dumps: the kernel symbol and, for vector configs, vector types.
  EXPECT_NE(k1->llvm_ir().find("@kiln_kernel"), std::string::npos);
  std::string vec = "<" + std::to_string(t.FloatLanes()) + " x float>";
  EXPECT_NE(k1->llvm_ir().find(vec), std::string::npos);
  EXPECT_NE(k2->llvm_ir().find(vec), std::string::npos);
  EXPECT_EQ(k2->llvm_ir().find("@expf"), std::string::npos);
  ScheduleConfig scalar;
  scalar.Set("vw", 1);
  auto ks = JitCompile(*sig, scalar, t);
  ASSERT_TRUE(ks.ok()) << ks.status();
  EXPECT_EQ((*ks)->llvm_ir().find("x float>"), std::string::npos);
}

}  // namespace
}  // namespace kiln
