// GPU lowering of the index kind (compiler_core/codegen/loop_ir/gpu/lower_index.h):
// Gather, GatherElements, GatherND, DepthToSpace, SpaceToDepth, Trilu, Split,
// CumSum and ArgMax/ArgMin on odd shapes, every point of their GPU spaces
// against the reference interpreter (through the CPU emulation) and
// assembled by ptxas for sm_80 and sm_90; the default's loop IR; refused
// knobs. CumSum data are multiples of 1/8, so that every order of summation
// (a thread's serial sum, the block's Hillis-Steele scan, the interpreter's
// doubles) gives the same floats and results compare exactly.
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
#include "compiler_core/frontend/ops/index_ops.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/codegen_testing.h"
#include "tests/compiler_core/codegen/gpu_testing.h"

namespace kiln {
namespace {

using Ints = std::vector<int64_t>;
using Attrs = std::map<std::string, AttrValue>;

const GpuTarget kSm90{90};

// Graphs with f32 inputs and i64 index inputs (each with the range of its
// values) and i64 constants.
class IndexGraph : public codegen_testing::GraphBuilder {
 public:
  Value* F32(const Ints& dims) { return Input(dims); }
  // An i64 input holding values in [lo, hi).
  Value* I64(const Ints& dims, int64_t lo, int64_t hi) {
    Value* v = Input(dims, DType::kInt64);
    ranges_[v->name()] = {lo, hi};
    return v;
  }
  Value* Const(const Ints& dims, const std::vector<int64_t>& vals) { return Int64Constant(dims, vals); }
  const std::map<std::string, std::pair<int64_t, int64_t>>& ranges() const { return ranges_; }

 private:
  std::map<std::string, std::pair<int64_t, int64_t>> ranges_;
};

enum class Data { kUniform, kEighths, kTies };

std::map<std::string, Tensor> Feeds(const Graph& g, const IndexGraph& b, Data data) {
  std::map<std::string, Tensor> feeds;
  std::mt19937 rng(11);
  for (const Value* v : g.inputs()) {
    const Ints dims = v->type().StaticDims();
    const int64_t n = codegen_testing::Product(dims);
    if (v->type().dtype == DType::kInt64) {
      auto [lo, hi] = b.ranges().at(v->name());
      std::uniform_int_distribution<int64_t> dist(lo, hi - 1);
      std::vector<int64_t> x(n);
      for (int64_t& e : x) e = dist(rng);
      feeds.emplace(v->name(), Tensor::FromVector(DType::kInt64, dims, x));
      continue;
    }
    std::vector<float> x(n);
    std::uniform_real_distribution<float> uniform(-1, 1);
    std::uniform_int_distribution<int> eighths(-8, 8), ties(-1, 1);
    for (float& e : x) {
      if (data == Data::kUniform) e = uniform(rng);
      if (data == Data::kEighths) e = static_cast<float>(eighths(rng)) / 8;
      if (data == Data::kTies) e = static_cast<float>(ties(rng));
    }
    feeds.emplace(v->name(), Tensor::FromVector(DType::kFloat32, dims, x));
  }
  return feeds;
}

// Every point of the space against the interpreter (exactly, unless the
// workload computes transcendental functions), then assembled.
void CheckEverywhere(const Graph& g, const IndexGraph& b, Data data = Data::kUniform,
                     codegen_testing::Tolerance tol = {0, 0}) {
  ASSERT_EQ(WorkloadKind(g), "index") << g.ToText();
  std::vector<ScheduleConfig> space = EnumerateSchedules(g, kSm90);
  ASSERT_FALSE(space.empty()) << g.ToText();
  EXPECT_NE(std::find(space.begin(), space.end(), DefaultSchedule(g, kSm90)), space.end());
  gpu_testing::CheckGpuConfigsAgainstInterpreter(g, Feeds(g, b, data), space, tol);
  gpu_testing::CheckPtxAssembles(g, space);
}

std::string DefaultIr(const Graph& g) {
  absl::StatusOr<loop_ir::LoopFunc> f = LowerWorkload(g, DefaultSchedule(g, kSm90), kSm90);
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? loop_ir::Print(*f) : "";
}

TEST(GpuIndexLoweringTest, GatherAxesNegativeIndicesAndEpilogue) {
  struct Case { Ints data, ind; int64_t axis; };
  for (const Case& c : {Case{{3, 7, 5}, {4}, 1}, Case{{3, 7, 5}, {2, 3}, -1}, Case{{2, 3, 17}, {}, 2},
                        Case{{13}, {3, 2}, 0}, Case{{11, 9}, {2, 3}, 0}}) {
    SCOPED_TRACE(c.axis);
    IndexGraph b;
    Value* x = b.F32(c.data);
    const int64_t a = c.axis < 0 ? c.axis + static_cast<int64_t>(c.data.size()) : c.axis;
    Value* i = b.I64(c.ind, -c.data[a], c.data[a]);
    Value* y = b.Op("Gather", {x, i}, {{"axis", c.axis}});
    auto g = b.Finish({y, b.Op("Relu", {b.Op("Neg", {y})})});
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

// Index expressions move elements of any type: bool and f16 rows.
TEST(GpuIndexLoweringTest, GatherOfBoolAndHalfRows) {
  for (int64_t to : {int64_t{9}, int64_t{10}}) {
    SCOPED_TRACE(to);
    IndexGraph b;
    Value* x = b.F32({32, 6});
    Value* data = b.Op("Cast", {x}, {{"to", to}});
    auto g = b.Finish({b.Op("Gather", {data, b.I64({1, 5}, 0, 32)}, {{"axis", int64_t{0}}})});
    CheckEverywhere(*g, b);
  }
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
  struct Case { Ints data, ind; int64_t axis; };
  for (const Case& c : {Case{{3, 5}, {3, 5}, 0}, Case{{3, 5}, {2, 7}, 1}, Case{{2, 3, 7}, {1, 3, 4}, -1}}) {
    IndexGraph b;
    Value* x = b.F32(c.data);
    const int64_t a = c.axis < 0 ? c.axis + static_cast<int64_t>(c.data.size()) : c.axis;
    auto g = b.Finish({b.Op("GatherElements", {x, b.I64(c.ind, -c.data[a], c.data[a])}, {{"axis", c.axis}})});
    CheckEverywhere(*g, b);
  }
  struct NdCase { Ints data, ind; int64_t batch_dims; };
  for (const NdCase& c : {NdCase{{5, 7, 3}, {2, 4, 1}, 0}, NdCase{{2, 5, 3}, {2, 4, 1}, 1},
                          NdCase{{2, 3, 4, 5}, {2, 3, 2}, 2}}) {
    IndexGraph b;
    Value* x = b.F32(c.data);
    Value* i = b.I64(c.ind, -1, *std::min_element(c.data.begin() + c.batch_dims, c.data.end()));
    auto g = b.Finish({b.Op("GatherND", {x, i}, {{"batch_dims", c.batch_dims}})});
    CheckEverywhere(*g, b);
  }
}

TEST(GpuIndexLoweringTest, DepthToSpaceAndSpaceToDepth) {
  for (std::string mode : {"DCR", "CRD"}) {
    for (auto [dims, bs] : {std::pair<Ints, int64_t>{{1, 8, 3, 5}, 2}, {{2, 9, 1, 3}, 3}}) {
      IndexGraph b;
      auto g = b.Finish({b.Op("DepthToSpace", {b.F32(dims)}, {{"blocksize", bs}, {"mode", mode}})});
      CheckEverywhere(*g, b);
    }
  }
  for (auto [dims, bs] : {std::pair<Ints, int64_t>{{1, 3, 6, 10}, 2}, {{2, 1, 3, 9}, 3}}) {
    IndexGraph b;
    auto g = b.Finish({b.Op("SpaceToDepth", {b.F32(dims)}, {{"blocksize", bs}})});
    CheckEverywhere(*g, b);
  }
}

TEST(GpuIndexLoweringTest, TriluConstantRuntimeAndMissingK) {
  for (int64_t upper : {0, 1}) {
    for (int64_t k : {-2, 1}) {
      IndexGraph b;
      auto g = b.Finish({b.Op("Trilu", {b.F32({2, 5, 7}), b.Const({}, {k})}, {{"upper", upper}})});
      CheckEverywhere(*g, b);
    }
    IndexGraph b;
    Value* x = b.F32({6, 5});
    Value* k = b.I64({}, -3, 4);
    auto g = b.Finish({b.Op("Trilu", {x, k}, {{"upper", upper}}), b.Op("Trilu", {x}, {{"upper", upper}})});
    CheckEverywhere(*g, b);
  }
}

TEST(GpuIndexLoweringTest, SplitPieces) {
  struct Case { Ints dims; int64_t axis; std::vector<int64_t> sizes; int64_t pieces; };
  for (const Case& c : {Case{{3, 7}, 1, {1, 4, 2}, 3}, Case{{7, 2}, 0, {}, 3}, Case{{2, 3, 10}, -1, {}, 2}}) {
    IndexGraph b;
    Value* x = b.F32(c.dims);
    Value* sizes = c.sizes.empty() ? nullptr : b.Const({static_cast<int64_t>(c.sizes.size())}, c.sizes);
    std::vector<Value*> outs;
    for (int64_t k = 0; k < c.pieces; ++k) {
      Attrs a = {{"axis", c.axis}, {ops::kSplitOutputIndexAttr, k}, {ops::kSplitNumOutputsAttr, c.pieces}};
      std::vector<Value*> ins = {x};
      if (sizes) ins.push_back(sizes);
      outs.push_back(b.Op("Split", ins, a));
    }
    auto g = b.Finish(outs);
    CheckEverywhere(*g, b);
  }
}

// Every axis, exclusive and reverse, rows of 1 to 13 elements (a thread per
// row and blocks mostly idle).
TEST(GpuIndexLoweringTest, CumSumEveryAxisAndDirection) {
  for (Ints dims : {Ints{3, 7, 5}, Ints{13}, Ints{1, 2, 1}}) {
    for (int64_t axis = -1; axis < static_cast<int64_t>(dims.size()); ++axis) {
      for (int64_t excl : {0, 1}) {
        for (int64_t rev : {0, 1}) {
          SCOPED_TRACE(absl::StrCat("axis ", axis, " exclusive ", excl, " reverse ", rev));
          IndexGraph b;
          Value* x = b.F32(dims);
          auto g = b.Finish({b.Op("CumSum", {x, b.Const({}, {axis})}, {{"exclusive", excl}, {"reverse", rev}})});
          CheckEverywhere(*g, b, Data::kEighths);
        }
      }
    }
  }
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
        CheckEverywhere(*g, b, Data::kEighths);
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
    CheckEverywhere(*g, b, Data::kEighths, {1e-6, 1e-6});
    // The Tanh is stored where the scan stores (one store of out1 per
    // element written); only the transposed reads sum again.
    const std::string ir = DefaultIr(*g);
    EXPECT_NE(ir.find("allocate resum2_0: f32[1]"), std::string::npos) << ir;
    EXPECT_EQ(ir.find("resum1"), std::string::npos) << ir;
  }
  {
    IndexGraph b;
    Value* x = b.F32({4, 9});
    Value* c = b.Op("CumSum", {x, b.I64({}, -2, 2)}, {{"reverse", int64_t{1}}});
    Value* t = b.Op("Transpose", {c}, {{"perm", Ints{1, 0}}});
    auto g = b.Finish({c, b.Op("Tanh", {c}), t});
    CheckEverywhere(*g, b, Data::kEighths, {1e-6, 1e-6});
  }
  {
    IndexGraph b;
    auto g = b.Finish({b.Op("CumSum", {b.F32({17}), b.I64({1}, -1, 1)})});
    CheckEverywhere(*g, b, Data::kEighths);
  }
}

// Scans read their input through fused producers: a broadcast product
// (of eighths: multiples of 1/64, still summed exactly) and a Gather of rows.
TEST(GpuIndexLoweringTest, ScansOfFusedProducers) {
  {
    IndexGraph b;
    Value* x = b.F32({3, 130});
    Value* scale = b.F32({3, 1});
    auto g = b.Finish({b.Op("CumSum", {b.Op("Mul", {x, scale}), b.Const({}, {-1})}, {{"reverse", int64_t{1}}})});
    CheckEverywhere(*g, b, Data::kEighths);
  }
  {
    IndexGraph b;
    Value* rows = b.Op("Gather", {b.F32({9, 40}), b.I64({5}, -9, 9)}, {{"axis", int64_t{0}}});
    auto g = b.Finish({b.Op("ArgMin", {b.Op("Abs", {rows})}, {{"axis", int64_t{1}}, {"keepdims", int64_t{0}}})});
    CheckEverywhere(*g, b, Data::kTies);
  }
}

// Ties (data from {-1, 0, 1}), every axis, keepdims on and off, first and
// last index; rows of 1 to 17 and of 70 and 1000 (warps and blocks per row).
TEST(GpuIndexLoweringTest, ArgMaxArgMin) {
  for (std::string op : {"ArgMax", "ArgMin"}) {
    for (Ints dims : {Ints{3, 7, 5}, Ints{2, 1, 17}, Ints{5, 70}, Ints{2, 1000}}) {
      for (int64_t axis = -1; axis < static_cast<int64_t>(dims.size()); ++axis) {
        for (int64_t keep : {0, 1}) {
          for (int64_t last : {0, 1}) {
            if (dims.back() >= 70 && (axis != -1 || keep == 0)) continue;  // long rows: their own axis
            SCOPED_TRACE(absl::StrCat(op, " axis ", axis, " keepdims ", keep, " last ", last));
            IndexGraph b;
            auto g = b.Finish(
                {b.Op(op, {b.F32(dims)}, {{"axis", axis}, {"keepdims", keep}, {"select_last_index", last}})});
            CheckEverywhere(*g, b, Data::kTies);
          }
        }
      }
    }
  }
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
