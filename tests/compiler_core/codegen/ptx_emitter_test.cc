// PTX emission: what the NVPTX lowering makes of GPU loop IR (vector
// accesses, shared memory and barriers, warp shuffles, the launch bounds),
// every kernel assembled by ptxas for sm_80 and sm_90.
#include "compiler_core/codegen/ptx_emitter.h"

#include <string>

#include "compiler_core/codegen/loop_ir/loop_ir.h"
#include "compiler_core/codegen/ptx_assembler.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/gpu_testing.h"

namespace kiln {
namespace {

using namespace loop_ir;  // NOLINT: the IR's builders read best unqualified here

// y = relu(x) over 8 x 256 floats: 8 blocks of 64 threads, 4 lanes each.
LoopFunc VectorRelu() {
  Buffer x = MakeBuffer("in0", {8 * 256}, BufferRole::kInput, 0);
  Buffer y = MakeBuffer("out0", {8 * 256}, BufferRole::kOutput, 1);
  Expr i = Add(Mul(Add(Mul(Var("b"), IntImm(64)), Var("t")), IntImm(4)), Var("v"));
  Stmt lanes = For("v", IntImm(4), Store(y, i, Call("fmax", {Load(x, i), FloatImm(0)})), ForKind::kVectorized);
  return LoopFunc{"relu", {x, y}, For("b", IntImm(8), For("t", IntImm(64), lanes, ForKind::kGpuThread),
                                      ForKind::kGpuBlock)};
}

// out[b] = sum of in[b, :]: 128 threads, a warp_reduce, then the 4 warps'
// sums through shared memory.
LoopFunc BlockSum() {
  Buffer x = MakeBuffer("in0", {16, 128}, BufferRole::kInput, 0);
  Buffer y = MakeBuffer("out0", {16}, BufferRole::kOutput, 1);
  Buffer acc = MakeBuffer("acc", {1}, BufferRole::kLocal);
  Buffer part = MakeBuffer("part", {4}, BufferRole::kShared);
  Expr b = Var("b"), t = Var("t");
  Stmt body = Allocate(
      acc, Allocate(part, Block({For("t", IntImm(128), Store(acc, IntImm(0), Load(x, {b, t})), ForKind::kGpuThread),
                                 WarpReduce(acc, "sum", 32),
                                 For("t", IntImm(128),
                                     IfThen(Eq(Mod(t, IntImm(32)), IntImm(0)),
                                            Store(part, Div(t, IntImm(32)), Load(acc, IntImm(0)))),
                                     ForKind::kGpuThread),
                                 For("t", IntImm(1),
                                     Store(y, b,
                                           Add(Add(Load(part, IntImm(0)), Load(part, IntImm(1))),
                                               Add(Load(part, IntImm(2)), Load(part, IntImm(3))))),
                                     ForKind::kGpuThread)})));
  return LoopFunc{"block_sum", {x, y}, For("b", IntImm(16), body, ForKind::kGpuBlock)};
}

void ExpectAssembles(const std::string& ptx, const GpuTarget& target) {
  std::string why;
  std::optional<PtxAssembler> ptxas = gpu_testing::TestPtxas(&why);
  if (!ptxas) GTEST_SKIP() << why;
  absl::StatusOr<std::string> cubin = ptxas->Assemble(ptx, target);
  ASSERT_TRUE(cubin.ok()) << cubin.status() << "\n" << ptx;
  EXPECT_EQ(cubin->substr(0, 4), std::string("\x7f" "ELF", 4));
}

TEST(PtxEmitterTest, ContiguousLanesBecomeVectorAccesses) {
  for (const GpuTarget& target : gpu_testing::AssembledTargets()) {
    absl::StatusOr<std::string> ptx = LoopFuncToPtx(VectorRelu(), target, "relu");
    ASSERT_TRUE(ptx.ok()) << ptx.status();
    EXPECT_NE(ptx->find(".target " + target.Arch()), std::string::npos) << *ptx;
    EXPECT_NE(ptx->find(".entry relu("), std::string::npos) << *ptx;
    EXPECT_NE(ptx->find(".maxntid 64, 1, 1"), std::string::npos) << *ptx;
    EXPECT_NE(ptx->find("ld.global.nc.v4.f32"), std::string::npos) << *ptx;
    EXPECT_NE(ptx->find("st.global.v4.f32"), std::string::npos) << *ptx;
    EXPECT_EQ(ptx->find("bar.sync"), std::string::npos) << "no shared memory, no barrier\n" << *ptx;
    ExpectAssembles(*ptx, target);
  }
}

TEST(PtxEmitterTest, SharedMemoryBarriersAndWarpShuffles) {
  for (const GpuTarget& target : gpu_testing::AssembledTargets()) {
    absl::StatusOr<std::string> ptx = LoopFuncToPtx(BlockSum(), target, "block_sum");
    ASSERT_TRUE(ptx.ok()) << ptx.status();
    EXPECT_NE(ptx->find(".shared .align 16 .b8 block_sum_part[16]"), std::string::npos) << *ptx;
    // Barriers after the first two thread loops; none after the last.
    size_t first = ptx->find("bar.sync"), second = ptx->find("bar.sync", first + 1);
    EXPECT_NE(second, std::string::npos) << *ptx;
    EXPECT_EQ(ptx->find("bar.sync", second + 1), std::string::npos) << *ptx;
    EXPECT_NE(ptx->find("shfl.sync.bfly.b32"), std::string::npos) << *ptx;
    EXPECT_NE(ptx->find(".maxntid 128, 1, 1"), std::string::npos) << *ptx;
    ExpectAssembles(*ptx, target);
  }
}

TEST(PtxEmitterTest, TranscendentalFunctionsNeedNoLibrary) {
  // Kiln's own inline math: exp, tanh, erf, sin lower to plain PTX (no
  // libdevice, no unresolved calls).
  Buffer x = MakeBuffer("in0", {256}, BufferRole::kInput, 0);
  Buffer y = MakeBuffer("out0", {256}, BufferRole::kOutput, 1);
  Expr i = Add(Mul(Var("b"), IntImm(128)), Var("t"));
  Expr v = Load(x, i);
  Expr e = Add(Add(Call("exp", {v}), Call("tanh", {v})), Add(Call("erf", {v}), Call("sin", {v})));
  LoopFunc f{"math", {x, y}, For("b", IntImm(2), For("t", IntImm(128), Store(y, i, e), ForKind::kGpuThread),
                                 ForKind::kGpuBlock)};
  absl::StatusOr<std::string> ptx = LoopFuncToPtx(f, GpuTarget{90}, "math");
  ASSERT_TRUE(ptx.ok()) << ptx.status();
  EXPECT_EQ(ptx->find("call"), std::string::npos) << *ptx;
  ExpectAssembles(*ptx, GpuTarget{90});
}

TEST(PtxEmitterTest, RefusesCpuKernelsAndNamesBadTargets) {
  Buffer x = MakeBuffer("in0", {4}, BufferRole::kInput, 0);
  Buffer y = MakeBuffer("out0", {4}, BufferRole::kOutput, 1);
  LoopFunc cpu{"cpu", {x, y}, For("i", IntImm(4), Store(y, Var("i"), Load(x, Var("i"))))};
  absl::StatusOr<std::string> ptx = LoopFuncToPtx(cpu, GpuTarget{90});
  EXPECT_EQ(ptx.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(ptx.status().message().find("not a GPU kernel"), std::string::npos) << ptx.status();
  absl::StatusOr<GpuTarget> bad = GpuTarget::Named("sm_61");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("sm_80"), std::string::npos) << bad.status();
  EXPECT_EQ(GpuTarget::Named("cuda:sm_90")->Key(), "cuda/sm_90");
}

TEST(PtxAssemblerTest, RefusedPtxIsAnErrorWithPtxassMessage) {
  std::string why;
  std::optional<PtxAssembler> ptxas = gpu_testing::TestPtxas(&why);
  if (!ptxas) GTEST_SKIP() << why;
  absl::StatusOr<std::string> cubin = ptxas->Assemble(".version 7.8\n.target sm_90\n.address_size 64\nnonsense\n",
                                                      GpuTarget{90});
  EXPECT_EQ(cubin.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(cubin.status().message().find("refused the PTX"), std::string::npos) << cubin.status();
  absl::StatusOr<std::string> version = ptxas->Version();
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_NE(version->find("release"), std::string::npos) << *version;
  EXPECT_EQ(PtxAssembler::Find("/nonexistent/ptxas").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace kiln
