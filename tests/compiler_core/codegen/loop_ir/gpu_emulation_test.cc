// GPU loop IR: its dump, the verifier's GPU rules, and the CPU emulation
// running a kernel with shared memory, per-thread buffers that outlive a
// thread loop, and a warp reduction.
#include "compiler_core/codegen/loop_ir/gpu_emulation.h"

#include <cmath>
#include <vector>

#include "compiler_core/codegen/jit.h"
#include "compiler_core/codegen/loop_ir/loop_ir.h"
#include "compiler_core/codegen/loop_ir/printer.h"
#include "compiler_core/codegen/loop_ir/verifier.h"
#include "gtest/gtest.h"

namespace kiln::loop_ir {
namespace {

constexpr int64_t kRows = 5, kCols = 100, kThreads = 64;

// out[r] = sum of in[r, :] and out2[r] = max: one block per row; each of 64
// threads strides over the row into its local (sum, max); a warp_reduce per
// statistic; lane 0 of each warp writes its warp's totals to shared memory;
// thread 0 adds the two warps.
LoopFunc RowSumKernel() {
  Buffer in = MakeBuffer("in0", {kRows, kCols}, BufferRole::kInput, 0);
  Buffer sum = MakeBuffer("out0", {kRows}, BufferRole::kOutput, 1);
  Buffer mx = MakeBuffer("out1", {kRows}, BufferRole::kOutput, 2);
  Buffer acc = MakeBuffer("acc", {1}, BufferRole::kLocal);
  Buffer top = MakeBuffer("top", {1}, BufferRole::kLocal);
  Buffer part = MakeBuffer("part", {2, 2}, BufferRole::kShared);
  Expr r = Var("r"), t = Var("t"), k = Var("k");
  Expr col = Add(t, Mul(k, IntImm(kThreads)));
  Stmt accumulate = For(
      "t", IntImm(kThreads),
      Block({Store(acc, IntImm(0), FloatImm(0)), Store(top, IntImm(0), FloatImm(-INFINITY)),
             For("k", IntImm((kCols + kThreads - 1) / kThreads),
                 IfThen(Lt(col, IntImm(kCols)),
                        Block({Store(acc, IntImm(0), Add(Load(acc, IntImm(0)), Load(in, {r, col}))),
                               Store(top, IntImm(0), Call("fmax", {Load(top, IntImm(0)), Load(in, {r, col})}))})))}),
      ForKind::kGpuThread);
  Stmt publish = For("t", IntImm(kThreads),
                     IfThen(Eq(Mod(t, IntImm(32)), IntImm(0)),
                            Block({Store(part, {Div(t, IntImm(32)), IntImm(0)}, Load(acc, IntImm(0))),
                                   Store(part, {Div(t, IntImm(32)), IntImm(1)}, Load(top, IntImm(0)))})),
                     ForKind::kGpuThread);
  Stmt finish = For("t", IntImm(1),
                    Block({Store(sum, r, Add(Load(part, {IntImm(0), IntImm(0)}), Load(part, {IntImm(1), IntImm(0)}))),
                           Store(mx, r,
                                 Call("fmax", {Load(part, {IntImm(0), IntImm(1)}), Load(part, {IntImm(1), IntImm(1)})}))}),
                    ForKind::kGpuThread);
  Stmt block = Allocate(acc, Allocate(top, Allocate(part, Block({accumulate, WarpReduce(acc, "sum", 32),
                                                                 WarpReduce(top, "max", 32), publish, finish}))));
  return LoopFunc{"row_stats", {in, sum, mx}, For("r", IntImm(kRows), block, ForKind::kGpuBlock)};
}

TEST(GpuLoopIrTest, PrintsAndVerifiesAndLaunches) {
  LoopFunc f = RowSumKernel();
  ASSERT_TRUE(Verify(f).ok()) << Verify(f);
  const std::string text = Print(f);
  EXPECT_NE(text.find("gpu_block for (r, 0, 5) {\n    allocate local acc: f32[1] {"), std::string::npos) << text;
  EXPECT_NE(text.find("allocate shared part: f32[2,2]"), std::string::npos) << text;
  EXPECT_NE(text.find("gpu_thread for (t, 0, 64)"), std::string::npos) << text;
  EXPECT_NE(text.find("warp_reduce sum(acc, 32)"), std::string::npos) << text;
  EXPECT_TRUE(IsGpuKernel(f));
  GpuLaunch launch = GpuLaunchOf(f);
  EXPECT_EQ(launch.blocks, 5);
  EXPECT_EQ(launch.threads, 64);
  EXPECT_EQ(launch.shared_bytes, 16);
}

TEST(GpuLoopIrTest, EmulationComputesWhatTheKernelMeans) {
  absl::StatusOr<LoopFunc> cpu = EmulateOnCpu(RowSumKernel());
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_FALSE(IsGpuKernel(*cpu));
  EXPECT_EQ(NumTasks(*cpu), kRows);
  auto kernel = JitCompile(*cpu, CpuTarget::Host());
  ASSERT_TRUE(kernel.ok()) << kernel.status() << "\n" << Print(*cpu);
  std::vector<float> in(kRows * kCols), sum(kRows, NAN), mx(kRows, NAN);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>((i * 37) % 101) * 0.25f - 10.0f;
  void* args[] = {in.data(), sum.data(), mx.data()};
  (*kernel)->Run(args, 0, kRows);
  for (int64_t r = 0; r < kRows; ++r) {
    double want = 0;
    float want_max = -INFINITY;
    for (int64_t c = 0; c < kCols; ++c) {
      want += in[r * kCols + c];
      want_max = std::max(want_max, in[r * kCols + c]);
    }
    EXPECT_NEAR(sum[r], want, 1e-3) << "row " << r;
    EXPECT_EQ(mx[r], want_max) << "row " << r;
  }
}

// A thread loop narrower than the block leaves the other threads' local
// slots unwritten: the emulation poisons them, so a warp_reduce over them
// shows up as NaN rather than passing by luck.
TEST(GpuLoopIrTest, EmulationPoisonsWhatNoThreadWrote) {
  Buffer out = MakeBuffer("out0", {1}, BufferRole::kOutput, 0);
  Buffer acc = MakeBuffer("acc", {1}, BufferRole::kLocal);
  Stmt body = Allocate(acc, Block({For("t", IntImm(16), Store(acc, IntImm(0), FloatImm(1)), ForKind::kGpuThread),
                                   WarpReduce(acc, "sum", 32),
                                   For("t", IntImm(32), IfThen(Eq(Var("t"), IntImm(0)), Store(out, IntImm(0), Load(acc, IntImm(0)))),
                                       ForKind::kGpuThread)}));
  LoopFunc f{"half", {out}, For("b", IntImm(1), body, ForKind::kGpuBlock)};
  ASSERT_TRUE(Verify(f).ok()) << Verify(f);
  absl::StatusOr<LoopFunc> cpu = EmulateOnCpu(f);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  auto kernel = JitCompile(*cpu, CpuTarget::Host());
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  float result = 0;
  void* args[] = {&result};
  (*kernel)->Run(args, 0, 1);
  EXPECT_TRUE(std::isnan(result)) << result;
}

// The verifier's GPU rules, each with the statement it names.
TEST(GpuLoopIrTest, VerifierRefusesMisplacedGpuConstructs) {
  Buffer in = MakeBuffer("in0", {64}, BufferRole::kInput, 0);
  Buffer out = MakeBuffer("out0", {64}, BufferRole::kOutput, 1);
  Buffer sh = MakeBuffer("sh", {64}, BufferRole::kShared);
  Buffer loc = MakeBuffer("loc", {1}, BufferRole::kLocal);
  Stmt copy = Store(out, Var("t"), Load(in, Var("t")));
  auto kernel = [&](Stmt block_body) {
    return LoopFunc{"k", {in, out}, For("b", IntImm(1), block_body, ForKind::kGpuBlock)};
  };
  auto refused = [](const LoopFunc& f, const std::string& what) {
    absl::Status s = Verify(f);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << what;
    EXPECT_NE(s.message().find(what), std::string::npos) << s;
  };
  Stmt threads = For("t", IntImm(64), copy, ForKind::kGpuThread);
  EXPECT_TRUE(Verify(kernel(threads)).ok());
  refused(kernel(For("t", IntImm(64), threads, ForKind::kGpuThread)), "inside another gpu_thread loop");
  refused(kernel(For("t", IntImm(2048), IfThen(Lt(Var("t"), IntImm(64)), copy), ForKind::kGpuThread)),
          "exceeds 1024");
  refused(kernel(Store(out, IntImm(0), Load(in, IntImm(0)))), "outside every gpu_thread loop");
  refused(kernel(For("t", IntImm(64), Allocate(sh, copy), ForKind::kGpuThread)), "is not at a GPU block's level");
  refused(kernel(Allocate(MakeBuffer("tmp", {4}, BufferRole::kTemp), threads)), "is not shared or local");
  refused(kernel(Allocate(loc, Block({For("t", IntImm(48), copy, ForKind::kGpuThread), WarpReduce(loc, "sum", 32)}))),
          "not whole warps");
  refused(kernel(Allocate(loc, Block({threads, WarpReduce(loc, "prod", 32)}))), "is not sum, max or min");
  refused(kernel(Allocate(loc, Block({For("t", IntImm(64), copy, ForKind::kGpuThread), WarpReduce(loc, "sum", 48)}))),
          "is not a power of two");
  refused(kernel(Allocate(MakeBuffer("big", {20000}, BufferRole::kShared), threads)), "bytes of shared memory exceed");
  refused(LoopFunc{"k", {in, out}, For("t", IntImm(64), copy, ForKind::kGpuThread)}, "outside a GPU kernel");
  refused(LoopFunc{"k", {in, out}, For("p", IntImm(4), Allocate(sh, For("t", IntImm(64), copy)), ForKind::kParallel)},
          "is not at a GPU block's level");
}

}  // namespace
}  // namespace kiln::loop_ir
