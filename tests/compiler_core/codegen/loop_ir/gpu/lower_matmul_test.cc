// GPU lowering of the matmul kind: the tiled GEMM and the two GEMV kernels
// against the reference interpreter through the CPU emulation, on shapes no
// tile divides (tails in M, N and K), broadcast batches, transposes, Gemm
// with alpha, beta and a broadcast C, 1-D operands and epilogues; their PTX
// assembled for sm_80 and sm_90; the default's loop IR; refused knobs.
#include "compiler_core/codegen/loop_ir/gpu/lower_matmul.h"

#include <algorithm>
#include <string>
#include <vector>

#include "compiler_core/codegen/kernel_emitter.h"
#include "compiler_core/codegen/loop_ir/printer.h"
#include "compiler_core/codegen/ptx_emitter.h"
#include "compiler_core/codegen/schedule_space.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/codegen_testing.h"
#include "tests/compiler_core/codegen/gpu_testing.h"
#include "tests/compiler_core/codegen/loop_ir/lowering_testing.h"

namespace kiln {
namespace {

using codegen_testing::GraphBuilder;
using codegen_testing::RandomFeeds;
using codegen_testing::Tolerance;
using Ints = std::vector<int64_t>;

const GpuTarget kSm90{90};

// Sums in another order than the interpreter's (slices of K, warp trees).
const Tolerance kTol{1e-4, 1e-4};

// The default, the first and last points and `count` more spread evenly
// over the space, then `extra`.
std::vector<ScheduleConfig> Spread(const Graph& g, size_t count, const std::vector<ScheduleConfig>& extra = {}) {
  std::vector<ScheduleConfig> out = loop_ir_testing::SpreadPoints(g, kSm90, count);
  if (out.empty()) return out;
  for (const ScheduleConfig& c : extra) {
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  }
  return out;
}

ScheduleConfig Parse(const std::string& text) {
  absl::StatusOr<ScheduleConfig> c = ScheduleConfig::Parse(text);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : ScheduleConfig();
}

void Check(const Graph& g, const std::vector<ScheduleConfig>& configs) {
  ASSERT_EQ(WorkloadKind(g), "matmul") << g.ToText();
  ASSERT_FALSE(configs.empty());
  std::vector<ScheduleConfig> space = EnumerateSchedules(g, kSm90);
  EXPECT_NE(std::find(space.begin(), space.end(), DefaultSchedule(g, kSm90)), space.end());
  gpu_testing::CheckGpuConfigsAgainstInterpreter(g, RandomFeeds(g, 5, -1.0f, 1.0f), configs, kTol);
  gpu_testing::CheckPtxAssembles(g, configs);
}

// M, N and K that no tile divides (37 x 45 by 45 x 29): partial tiles in
// every direction, scalar loads (K and N are odd), and slices of K.
TEST(GpuMatMulLoweringTest, TailsInEveryDimension) {
  GraphBuilder b;
  auto g = b.Finish({b.Op("MatMul", {b.Input({37, 45}), b.Input({45, 29})})});
  Check(*g, Spread(*g, 4,
                   {Parse("bk=8,bm=16,bn=32,sk=2,tm=2,tn=2,vw=1"), Parse("bk=16,bm=32,bn=16,sk=1,tm=4,tn=2,vw=1"),
                    Parse("bk=8,bm=64,bn=32,sk=1,tm=8,tn=4,vw=1")}));
}

// Broadcast batch dims ([3,1] against [2]), vector loads of A along K and of
// B along N, and an epilogue (bias Add, Relu).
TEST(GpuMatMulLoweringTest, BroadcastBatchVectorLoadsAndEpilogue) {
  GraphBuilder b;
  Value* y = b.Op("MatMul", {b.Input({3, 1, 20, 32}), b.Input({2, 32, 24})});
  auto g = b.Finish({b.Op("Relu", {b.Op("Add", {y, b.Input({24})})})});
  Check(*g, Spread(*g, 3, {Parse("bk=16,bm=32,bn=32,sk=2,tm=4,tn=4,vw=4"), Parse("bk=8,bm=16,bn=16,sk=4,tm=2,tn=2,vw=4")}));
}

// Gemm with both operands transposed (A along M and B along K are
// contiguous: B's tile is transposed on its way into shared memory), alpha,
// beta and a C broadcast along M; and transB alone with C broadcast along N.
TEST(GpuMatMulLoweringTest, GemmTransposesAlphaBetaC) {
  {
    GraphBuilder b;
    Value* y = b.Op("Gemm", {b.Input({40, 36}), b.Input({20, 40}), b.Input({1, 20})},
                    {{"transA", AttrValue(int64_t{1})}, {"transB", AttrValue(int64_t{1})},
                     {"alpha", AttrValue(0.5f)}, {"beta", AttrValue(2.0f)}});
    auto g = b.Finish({y});
    Check(*g, Spread(*g, 3, {Parse("bk=8,bm=32,bn=16,sk=1,tm=4,tn=2,vw=4")}));
  }
  {
    GraphBuilder b;
    Value* y = b.Op("Gemm", {b.Input({33, 17}), b.Input({18, 17}), b.Input({33, 1})},
                    {{"transB", AttrValue(int64_t{1})}, {"beta", AttrValue(-1.0f)}});
    auto g = b.Finish({b.Op("Sigmoid", {y}), y});
    Check(*g, Spread(*g, 2));
  }
}

// A batch of rows over one B ([2,5,16] x [16,12]) folds into M = 10 rows;
// a residual of the output's shape is read in the epilogue.
TEST(GpuMatMulLoweringTest, FoldedBatchWithResidual) {
  GraphBuilder b;
  Value* y = b.Op("MatMul", {b.Input({2, 5, 16}), b.Input({16, 12})});
  auto g = b.Finish({b.Op("Add", {y, b.Input({2, 5, 12})})});
  Check(*g, Spread(*g, 3));
}

// 1-D operands: numpy drops M ([45] x [45, 20]) or N ([20, 45] x [45]).
TEST(GpuMatMulLoweringTest, OneDimensionalOperands) {
  {
    GraphBuilder b;
    auto g = b.Finish({b.Op("MatMul", {b.Input({45}), b.Input({45, 20})})});
    Check(*g, EnumerateSchedules(*g, kSm90).size() > 12 ? Spread(*g, 6) : EnumerateSchedules(*g, kSm90));
  }
  {
    GraphBuilder b;
    auto g = b.Finish({b.Op("MatMul", {b.Input({20, 45}), b.Input({45})})});
    Check(*g, Spread(*g, 4));
  }
}

// Every dot-GEMV point (gv=2) of a classifier head, Gemm transB=1 with a
// bias: 37 columns (no group of columns divides them), K = 100 in vectors of 4.
TEST(GpuMatMulLoweringTest, DotGemvEveryPoint) {
  GraphBuilder b;
  Value* y = b.Op("Gemm", {b.Input({1, 100}), b.Input({37, 100}), b.Input({37})}, {{"transB", AttrValue(int64_t{1})}});
  auto g = b.Finish({y});
  std::vector<ScheduleConfig> gemv;
  for (const ScheduleConfig& c : EnumerateSchedules(*g, kSm90)) {
    if (c.Get("gv", 0) == 2) gemv.push_back(c);
  }
  ASSERT_FALSE(gemv.empty());
  EXPECT_EQ(DefaultSchedule(*g, kSm90).Get("gv", 0), 2);
  Check(*g, gemv);
}

// Every column-GEMV point (gv=1): [1, 50] x [50, 70] and a batch of three
// rows over their own B ([3, 1, 19] x [3, 19, 36]: K not divided by the slices).
TEST(GpuMatMulLoweringTest, ColumnGemvEveryPoint) {
  for (const auto& [a, bd] : std::vector<std::pair<Ints, Ints>>{{{1, 50}, {50, 70}}, {{3, 1, 19}, {3, 19, 36}}}) {
    GraphBuilder b;
    auto g = b.Finish({b.Op("Tanh", {b.Op("MatMul", {b.Input(a), b.Input(bd)})})});
    std::vector<ScheduleConfig> gemv;
    for (const ScheduleConfig& c : EnumerateSchedules(*g, kSm90)) {
      if (c.Get("gv", 0) == 1) gemv.push_back(c);
    }
    ASSERT_FALSE(gemv.empty());
    EXPECT_EQ(DefaultSchedule(*g, kSm90).Get("gv", 0), 1);
    Check(*g, gemv);
  }
}

// The default of a 1024^3 GEMM: 64 x 64 tiles (256 blocks fill 132 SMs;
// 128 x 64 would make 128), 4 x 4 per thread, vector loads, padded shared
// rows; the K loop's two thread loops; its PTX keeps the accumulators in
// registers (no local memory).
TEST(GpuMatMulLoweringTest, LoopIrOfTheDefault) {
  GraphBuilder b;
  auto g = b.Finish({b.Op("MatMul", {b.Input({1024, 1024}), b.Input({1024, 1024})})});
  ScheduleConfig c = DefaultSchedule(*g, kSm90);
  EXPECT_EQ(c.ToString(), "bk=8,bm=64,bn=64,sk=1,tm=4,tn=4,vw=4");
  absl::StatusOr<loop_ir::LoopFunc> f = LowerWorkload(*g, c, kSm90);
  ASSERT_TRUE(f.ok()) << f.status();
  loop_ir::GpuLaunch launch = loop_ir::GpuLaunchOf(*f);
  EXPECT_EQ(launch.blocks, 256);
  EXPECT_EQ(launch.threads, 256);
  EXPECT_EQ(launch.shared_bytes, 2 * 8 * (64 + 4) * 4);
  const std::string text = loop_ir::Print(*f);
  for (const char* want : {"gpu_block for (blk, 0, 256)", "gpu_thread for (tid, 0, 256)", "for (kt, 0, 128)",
                           "shared a_tile: f32[544]", "local acc: f32[16]", "vectorized for (la, 0, 4)",
                           "vectorized for (lb, 0, 4)", "vectorized for (ln, 0, 4)"}) {
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
  }
  EXPECT_EQ(text.find("< 1024"), std::string::npos) << "1024 is a multiple of every tile: no bounds test\n" << text;
  EXPECT_NE(text.find("if ((c0 < 128))"), std::string::npos) << "A's 128 chunks, then B's\n" << text;
  absl::StatusOr<PtxCode> ptx = CompileToPtx({KernelRequest{g.get(), c, "mm"}}, kSm90);
  ASSERT_TRUE(ptx.ok()) << ptx.status();
  EXPECT_EQ(ptx->ptx.find("local"), std::string::npos) << ptx->ptx;
  EXPECT_NE(ptx->ptx.find("ld.shared.v4.f32"), std::string::npos);
  EXPECT_NE(ptx->ptx.find("ld.global.nc.v4.f32"), std::string::npos);
}

// Tall K, small M x N (64 x 4096 by 4096 x 64): no tile makes 132 blocks,
// so the smallest tiles with slices of K. A classifier head (1280 -> 1000,
// Gemm transB=1) takes the dot GEMV: a warp per column, 128 threads a block
// so that the 1000 columns make 250 blocks.
TEST(GpuMatMulLoweringTest, DefaultsOfOtherShapes) {
  {
    GraphBuilder b;
    auto g = b.Finish({b.Op("MatMul", {b.Input({64, 4096}), b.Input({4096, 64})})});
    EXPECT_EQ(DefaultSchedule(*g, kSm90).ToString(), "bk=8,bm=16,bn=16,sk=4,tm=2,tn=2,vw=4");
  }
  {
    GraphBuilder b;
    auto g = b.Finish({b.Op("Gemm", {b.Input({1, 1280}), b.Input({1000, 1280}), b.Input({1000})},
                            {{"transB", AttrValue(int64_t{1})}})});
    ScheduleConfig c = DefaultSchedule(*g, kSm90);
    EXPECT_EQ(c.ToString(), "bt=128,gc=1,gv=2,gw=32,vw=4");
    absl::StatusOr<loop_ir::LoopFunc> f = LowerWorkload(*g, c, kSm90);
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ(loop_ir::GpuLaunchOf(*f).blocks, 250);  // 4 warps, 4 columns per block
    const std::string text = loop_ir::Print(*f);
    EXPECT_NE(text.find("warp_reduce sum(acc, 32)"), std::string::npos) << text;
    EXPECT_NE(text.find("for (kc, 0, 10)"), std::string::npos) << "1280 = 10 steps of 32 lanes x 4\n" << text;
  }
}

TEST(GpuMatMulLoweringTest, RefusesKnobsOutOfRange) {
  GraphBuilder b;
  auto g = b.Finish({b.Op("MatMul", {b.Input({20, 33}), b.Input({33, 15})})});
  for (const char* bad : {"bm=24", "tm=16", "vw=4", "bm=16,bn=16,tm=4,tn=4", "bk=32,bm=128,bn=128,sk=2,tm=8,tn=8",
                          "gv=2", "gv=1,ks=4", "bt=256", "mr=4", "gv=3"}) {
    absl::Status s = ValidateSchedule(*g, Parse(bad), kSm90);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad << ": " << s;
  }
  EXPECT_TRUE(ValidateSchedule(*g, ScheduleConfig(), kSm90).ok());
  EXPECT_TRUE(ValidateSchedule(*g, Parse("gv=0"), kSm90).ok()) << "gv=0 is the tiled kernel";
}

}  // namespace
}  // namespace kiln
