// GPU lowering of the index kind (compiler_core/codegen/loop_ir/gpu/lower_index.h):
// Gather, GatherElements, GatherND, DepthToSpace, SpaceToDepth, Trilu, Split,
// CumSum and ArgMax/ArgMin on odd shapes, every point of their GPU spaces
// against the reference interpreter (through the CPU emulation) and
// assembled by ptxas for sm_80 and sm_90; the default's loop IR; refused
// knobs. CumSum data are multiples of 1/8, so that every order of summation
// (a thread's serial sum, the block's Hillis-Steele scan, the interpreter's
// doubles) gives the same floats and results compare exactly. Most case
// lists are the CPU test's too (loop_ir/index_cases.h).
#include "compiler_core/codegen/loop_ir/gpu/lower_index.h"

#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "compiler_core/codegen/kernel_emitter.h"
#include "compiler_core/codegen/loop_ir/printer.h"
#include "compiler_core/codegen/schedule_space.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/codegen_testing.h"
#include "tests/compiler_core/codegen/gpu_testing.h"
#include "tests/compiler_core/codegen/loop_ir/index_cases.h"

namespace kiln {
namespace {

using loop_ir_testing::IndexCase;
using loop_ir_testing::IndexData;
using loop_ir_testing::IndexGraph;
using loop_ir_testing::Ints;

const GpuTarget kSm90{90};

// Every point of the space against the interpreter (exactly, unless the
// workload computes transcendental functions), then assembled.
void CheckEverywhere(const Graph& g, const IndexGraph& b, IndexData data = IndexData::kUniform,
                     codegen_testing::Tolerance tol = {0, 0}) {
  gpu_testing::CheckEveryPoint(g, "index", loop_ir_testing::IndexFeeds(g, b, data), tol);
}

// CheckEverywhere on the graph of each case.
void CheckCases(const std::vector<IndexCase>& cases, IndexData data = IndexData::kUniform,
                codegen_testing::Tolerance tol = {0, 0}) {
  for (const IndexCase& c : cases) {
    SCOPED_TRACE(c.name);
    IndexGraph b;
    auto g = b.Finish(c.build(b));
    CheckEverywhere(*g, b, data, tol);
  }
}

std::string DefaultIr(const Graph& g) {
  absl::StatusOr<loop_ir::LoopFunc> f = LowerWorkload(g, DefaultSchedule(g, kSm90), kSm90);
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? loop_ir::Print(*f) : "";
}

TEST(GpuIndexLoweringTest, GatherAxesNegativeIndicesAndEpilogue) {
  for (const IndexCase& c : loop_ir_testing::GatherAxisCases()) {
    SCOPED_TRACE(c.name);
    IndexGraph b;
    Value* y = c.build(b)[0];
    auto g = b.Finish({y, b.Op("Relu", {b.Op("Neg", {y})})});  // an epilogue beside the Gather
    CheckEverywhere(*g, b);
  }
  IndexGraph b;  // constant indices, a transposed input, a reshaped consumer
  Value* x = b.F32({5, 3});
  Value* t = b.Op("Transpose", {x}, {{"perm", Ints{1, 0}}});
  Value* y = b.Op("Gather", {t, b.Const({2, 2}, {4, -1, 0, 2})}, {{"axis", int64_t{1}}});
  Value* r = b.Op("Reshape", {y, b.Const({2}, {3, 4})});
  auto g = b.Finish({b.Op("Mul", {r, r})});
  CheckEverywhere(*g, b);
}

TEST(GpuIndexLoweringTest, GatherOfBoolAndHalfRows) {
  CheckCases(loop_ir_testing::GatherOfBoolAndHalfCases());
}

// Out-of-range indices are clamped (past the end to the last row, before
// the negative range to the first), as the CPU lowering does.
TEST(GpuIndexLoweringTest, GatherClampsOutOfRangeIndices) {
  IndexGraph b;
  Value* x = b.F32({5, 3});
  auto g = b.Finish({b.Op("Gather", {x, b.I64({3}, 0, 1)}, {{"axis", int64_t{0}}})});
  for (const ScheduleConfig& c : EnumerateSchedules(*g, kSm90)) {
    SCOPED_TRACE(c.ToString());
    auto k = gpu_testing::CompileEmulated(*g, c, kSm90);
    ASSERT_TRUE(k.ok()) << k.status();
    std::vector<float> data(15);
    for (int j = 0; j < 15; ++j) data[j] = static_cast<float>(j);
    std::vector<int64_t> idx = {100, -100, -2};
    std::vector<float> out(9, -1);
    void* args[] = {data.data(), idx.data(), out.data()};
    codegen_testing::RunTasksUnevenly(**k, args);
    EXPECT_EQ(out, (std::vector<float>{12, 13, 14, 0, 1, 2, 9, 10, 11}));
  }
}

TEST(GpuIndexLoweringTest, GatherElementsAndGatherND) {
  CheckCases(loop_ir_testing::GatherElementsCases());
  CheckCases(loop_ir_testing::GatherNDCases());
}

TEST(GpuIndexLoweringTest, DepthToSpaceAndSpaceToDepth) {
  CheckCases(loop_ir_testing::DepthToSpaceAndSpaceToDepthCases());
}

TEST(GpuIndexLoweringTest, TriluConstantRuntimeAndMissingK) {
  CheckCases(loop_ir_testing::TriluCases());
}

TEST(GpuIndexLoweringTest, SplitPieces) {
  CheckCases(loop_ir_testing::SplitCases());
}

// Short rows: a thread per row and blocks mostly idle.
TEST(GpuIndexLoweringTest, CumSumEveryAxisAndDirection) {
  CheckCases(loop_ir_testing::CumSumCases(), IndexData::kEighths);
}

// Long rows: the block-wide scan over several tiles with a partial last
// one (300 = 2 * 128 + 44; 1000 is no multiple of 4 * 32), along the last
// axis and along an outer one.
TEST(GpuIndexLoweringTest, CumSumLongRowsAcrossTiles) {
  for (Ints dims : {Ints{3, 300}, Ints{1000}, Ints{70, 3}}) {
    for (int64_t excl : {0, 1}) {
      for (int64_t rev : {0, 1}) {
        SCOPED_TRACE(absl::StrCat(dims[0], " exclusive ", excl, " reverse ", rev));
        IndexGraph b;
        const int64_t axis = dims.size() == 2 && dims[1] == 3 ? 0 : -1;
        auto g = b.Finish(
            {b.Op("CumSum", {b.F32(dims), b.Const({}, {axis})}, {{"exclusive", excl}, {"reverse", rev}})});
        CheckEverywhere(*g, b, IndexData::kEighths);
      }
    }
  }
}

// Consumers: a Tanh at the scanned element is written with it; a Transpose
// reads other elements and sums their prefixes again; a Gather beside the
// scan is a flat output. The axis as a run-time input as well.
TEST(GpuIndexLoweringTest, CumSumConsumersAndRuntimeAxis) {
  {
    IndexGraph b;
    Value* x = b.F32({4, 65});
    Value* c = b.Op("CumSum", {x, b.Const({}, {1})}, {{"exclusive", int64_t{1}}});
    Value* t = b.Op("Transpose", {c}, {{"perm", Ints{1, 0}}});
    Value* gather = b.Op("Gather", {x, b.I64({3}, 0, 4)}, {{"axis", int64_t{0}}});
    auto g = b.Finish({c, b.Op("Tanh", {c}), b.Op("Relu", {t}), gather});
    CheckEverywhere(*g, b, IndexData::kEighths, {1e-6, 1e-6});
    // The Tanh is stored where the scan stores (one store of out1 per
    // element written); only the transposed reads sum again.
    const std::string ir = DefaultIr(*g);
    EXPECT_NE(ir.find("allocate resum2_0: f32[1]"), std::string::npos) << ir;
    EXPECT_EQ(ir.find("resum1"), std::string::npos) << ir;
  }
  CheckCases(loop_ir_testing::CumSumRuntimeAxisCases(), IndexData::kEighths, {1e-6, 1e-6});
}

// Scans read their input through fused producers: a broadcast product
// (of eighths: multiples of 1/64, still summed exactly) and a Gather of rows.
TEST(GpuIndexLoweringTest, ScansOfFusedProducers) {
  {
    IndexGraph b;
    Value* x = b.F32({3, 130});
    Value* scale = b.F32({3, 1});
    auto g = b.Finish({b.Op("CumSum", {b.Op("Mul", {x, scale}), b.Const({}, {-1})}, {{"reverse", int64_t{1}}})});
    CheckEverywhere(*g, b, IndexData::kEighths);
  }
  {
    IndexGraph b;
    Value* rows = b.Op("Gather", {b.F32({9, 40}), b.I64({5}, -9, 9)}, {{"axis", int64_t{0}}});
    auto g = b.Finish({b.Op("ArgMin", {b.Op("Abs", {rows})}, {{"axis", int64_t{1}}, {"keepdims", int64_t{0}}})});
    CheckEverywhere(*g, b, IndexData::kTies);
  }
}

// Integer scans sum in their own type, in registers and in the block's
// shared tiles alike.
TEST(GpuIndexLoweringTest, IntegerDataScannedAndMoved) { CheckCases(loop_ir_testing::IntegerDataCases()); }

// Ties: data from {-1, 0, 1}.
TEST(GpuIndexLoweringTest, ArgMaxArgMin) {
  CheckCases(loop_ir_testing::ArgMaxArgMinCases(), IndexData::kTies);
}

// NaN as the interpreter compares: a NaN first element is never replaced
// (the result is 0); a NaN elsewhere never wins; -inf rows.
TEST(GpuIndexLoweringTest, ArgMaxNaNAndInfinities) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (std::string op : {"ArgMax", "ArgMin"}) {
    for (int64_t last : {0, 1}) {
      SCOPED_TRACE(absl::StrCat(op, " last ", last));
      IndexGraph b;
      auto g = b.Finish({b.Op(op, {b.F32({4, 100})}, {{"axis", int64_t{1}}, {"select_last_index", last}})});
      std::vector<float> x(400);
      std::mt19937 rng(3);
      std::uniform_int_distribution<int> ties(-1, 1);
      for (float& e : x) e = static_cast<float>(ties(rng));
      x[0] = nan;                        // row 0: NaN first
      x[100 + 37] = nan;                 // row 1: NaN inside
      for (int k = 0; k < 100; ++k) x[200 + k] = op == "ArgMax" ? -inf : inf;  // row 2: all the identity
      x[300 + 99] = nan;                 // row 3: NaN last
      std::map<std::string, Tensor> feeds;
      feeds.emplace(g->inputs()[0]->name(), Tensor::FromVector(DType::kFloat32, {4, 100}, x));
      std::vector<ScheduleConfig> space = EnumerateSchedules(*g, kSm90);
      gpu_testing::CheckGpuConfigsAgainstInterpreter(*g, feeds, space, {0, 0});
      gpu_testing::CheckPtxAssembles(*g, space);
    }
  }
}

TEST(GpuIndexLoweringTest, LoopIrOfTheDefaults) {
  {  // flat: 4-lane items of 256-wide rows, no guard
    IndexGraph b;
    auto g = b.Finish({b.Op("Gather", {b.F32({64, 256}), b.I64({32}, 0, 64)}, {{"axis", int64_t{0}}})});
    EXPECT_EQ(DefaultSchedule(*g, kSm90).ToString(), "bt=256,un=1,vw=4");
    const std::string ir = DefaultIr(*g);
    EXPECT_NE(ir.find("gpu_block for (blk, 0, 8)"), std::string::npos) << ir;
    EXPECT_NE(ir.find("vectorized for (v_0, 0, 4)"), std::string::npos) << ir;
    EXPECT_EQ(ir.find("if ("), std::string::npos) << ir;
  }
  {  // CumSum along long rows: a block per row, tiles through shared memory
    IndexGraph b;
    auto g = b.Finish({b.Op("CumSum", {b.F32({8, 1000}), b.Const({}, {1})})});
    EXPECT_EQ(DefaultSchedule(*g, kSm90).ToString(), "bt=256,ept=4,tr=256,vw=1");
    const std::string ir = DefaultIr(*g);
    EXPECT_NE(ir.find("gpu_block for (blk, 0, 8)"), std::string::npos) << ir;
    EXPECT_NE(ir.find("allocate shared tile: f32[1056]"), std::string::npos) << ir;
    EXPECT_NE(ir.find("allocate local carry: f32[1]"), std::string::npos) << ir;
  }
  {  // CumSum along an outer axis: a thread per row
    IndexGraph b;
    auto g = b.Finish({b.Op("CumSum", {b.F32({1000, 8}), b.Const({}, {0})})});
    EXPECT_EQ(DefaultSchedule(*g, kSm90).ToString(), "bt=256,tr=1,vw=1");
  }
  {  // ArgMax of many rows of 100: a warp per row
    IndexGraph b;
    auto g = b.Finish({b.Op("ArgMax", {b.F32({4096, 100})}, {{"axis", int64_t{1}}})});
    EXPECT_EQ(DefaultSchedule(*g, kSm90).ToString(), "bt=256,tr=32,vw=1");
    const std::string ir = DefaultIr(*g);
    EXPECT_NE(ir.find("gpu_block for (blk, 0, 512)"), std::string::npos) << ir;
    EXPECT_NE(ir.find("warp_reduce max"), std::string::npos) << ir;
  }
  {  // ArgMax of one long row: the block, across its warps through shared memory
    IndexGraph b;
    auto g = b.Finish({b.Op("ArgMin", {b.F32({1, 32000})}, {{"axis", int64_t{1}}})});
    EXPECT_EQ(DefaultSchedule(*g, kSm90).ToString(), "bt=256,tr=256,vw=1");
    const std::string ir = DefaultIr(*g);
    EXPECT_NE(ir.find("allocate shared part_v: f32[8]"), std::string::npos) << ir;
  }
}

TEST(GpuIndexLoweringTest, RefusesKnobsOutOfRange) {
  IndexGraph b;
  auto g = b.Finish({b.Op("CumSum", {b.F32({4, 50}), b.I64({}, 0, 2)})});
  auto refused = [&](std::map<std::string, int64_t> knobs, const std::string& what) {
    ScheduleConfig c;
    for (const auto& [k, v] : knobs) c.Set(k, v);
    absl::Status s = ValidateSchedule(*g, c, kSm90);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.ToString();
    EXPECT_NE(s.message().find(what), std::string::npos) << s;
  };
  refused({{"tr", 64}, {"bt", 64}}, "run-time input");  // a run-time axis scans with a thread per row
  refused({{"tr", 7}}, "knob tr=7");
  refused({{"ept", 3}}, "knob ept=3");
  refused({{"un", 2}}, "knob un");  // a scan's grid is its own
  refused({{"vw", 8}}, "knob vw=8");
  refused({{"bt", 100}}, "bt=100");
  IndexGraph b2;
  auto arg = b2.Finish({b2.Op("ArgMax", {b2.F32({4, 50})}, {{"axis", int64_t{1}}})});
  ScheduleConfig c;
  c.Set("ept", 4);
  EXPECT_EQ(ValidateSchedule(*arg, c, kSm90).code(), absl::StatusCode::kInvalidArgument);
  c = ScheduleConfig();
  c.Set("tr", 32);
  c.Set("bt", 64);
  EXPECT_TRUE(ValidateSchedule(*arg, c, kSm90).ok());
}

}  // namespace
}  // namespace kiln
