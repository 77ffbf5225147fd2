// Index workloads on loop IR (compiler_core/codegen/loop_ir/lower_index.h): Gather,
// GatherElements, DepthToSpace, SpaceToDepth, Trilu, Split, CumSum, ArgMax and
// ArgMin on odd shapes, JIT-compiled at several schedule points and compared
// with the reference interpreter (exactly; CumSum to 1e-5, as the interpreter
// sums in double).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler_core/codegen/jit.h"
#include "compiler_core/codegen/loop_ir/loop_ir.h"
#include "compiler_core/codegen/loop_ir/lower_index.h"
#include "compiler_core/codegen/loop_ir/printer.h"
#include "compiler_core/codegen/loop_ir/verifier.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/codegen/target.h"
#include "compiler_core/frontend/interpreter.h"
#include "compiler_core/frontend/ops/index_ops.h"
#include "compiler_core/frontend/shape_inference.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/loop_ir/lowering_testing.h"

namespace kiln {
namespace {

using loop_ir_testing::Attrs;
using loop_ir_testing::Ints;
using loop_ir_testing::Points;
using loop_ir_testing::RunTasksUnevenly;

// Graph building with f32 and i64 inputs (each with the range of its values)
// and i64 constants.
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

struct CheckOptions {
  float tolerance = 0;  // relative and absolute; 0: exact
  bool ties = false;    // f32 data from {-1, 0, 1} (equal values for ArgMax)
};

// Compiles `g` at the schedule points of its space, runs the tasks in three
// uneven ranges and compares every output with the interpreter.
void CheckIndex(const Graph& g, const IndexGraph& b, CheckOptions opt = {}) {
  CpuTarget target = CpuTarget::Host();
  ASSERT_EQ(WorkloadKind(g), "index") << g.ToText();
  std::vector<ScheduleConfig> configs = Points(g, target);
  ASSERT_FALSE(configs.empty());
  std::map<std::string, Tensor> feeds;
  std::mt19937 rng(11);
  for (const Value* v : g.inputs()) {
    Ints dims = v->type().StaticDims();
    int64_t n = loop_ir_testing::Product(dims);
    if (v->type().dtype == DType::kInt64) {
      auto [lo, hi] = b.ranges().at(v->name());
      std::uniform_int_distribution<int64_t> dist(lo, hi - 1);
      std::vector<int64_t> x(n);
      for (int64_t& e : x) e = dist(rng);
      feeds.emplace(v->name(), Tensor::FromVector(DType::kInt64, dims, x));
    } else {
      std::vector<float> x(n);
      std::uniform_real_distribution<float> dist(-1, 1);
      std::uniform_int_distribution<int> tri(-1, 1);
      for (float& e : x) e = opt.ties ? static_cast<float>(tri(rng)) : dist(rng);
      feeds.emplace(v->name(), Tensor::FromVector(DType::kFloat32, dims, x));
    }
  }
  codegen_testing::CheckConfigsAgainstInterpreter(g, feeds, configs, target,
                                                  {opt.tolerance, opt.tolerance});
}

// The loop IR at the default schedule: verified, and its dump holds `want`.
void CheckPrint(const Graph& g, const std::string& want) {
  CpuTarget target = CpuTarget::Host();
  loop_ir::WorkloadLowering l = loop_ir::IndexLowering();
  ASSERT_TRUE(l.match(g).ok()) << l.match(g);
  auto f = l.lower(g, l.default_schedule(g, target), target);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE(loop_ir::Verify(*f).ok()) << loop_ir::Verify(*f);
  std::string text = loop_ir::Print(*f);
  EXPECT_NE(text.find(want), std::string::npos) << text;
}

TEST(IndexLoweringTest, GatherEmbeddingLookup) {
  for (Ints data : {Ints{11, 7}, Ints{5, 1}, Ints{3, 19}}) {
    for (Ints ind : {Ints{2, 3}, Ints{1, 1}, Ints{1, 13}}) {
      IndexGraph b;
      Value* x = b.F32(data);
      Value* i = b.I64(ind, 0, data[0]);
      auto g = b.Finish({b.Op("Gather", {x, i}, {{"axis", int64_t{0}}})});
      CheckIndex(*g, b);
    }
  }
}

// Index expressions move elements of any type: a bool mask row lookup (the
// attention masks of exported transformers) and f16 rows.
TEST(IndexLoweringTest, GatherOfBoolAndHalfData) {
  for (int64_t to : {int64_t{9}, int64_t{10}}) {
    SCOPED_TRACE(to);
    IndexGraph b;
    Value* x = b.F32({32, 1});
    Value* i = b.I64({1, 1, 1, 32}, 0, 32);
    Value* data = b.Op("Cast", {x}, {{"to", to}});
    auto g = b.Finish({b.Op("Gather", {data, i}, {{"axis", int64_t{0}}})});
    CheckIndex(*g, b);
  }
}

// GatherND with and without batch axes, index tuples addressing one axis up
// to all of them, negative indices (wrapped) included.
TEST(IndexLoweringTest, GatherND) {
  struct Case { Ints data, ind; int64_t batch_dims; };
  for (const Case& c : {Case{{5, 7}, {3, 2}, 0}, Case{{5, 7, 3}, {2, 4, 1}, 0}, Case{{1, 32}, {1, 1, 1, 32, 2}, 0},
                        Case{{2, 5, 3}, {2, 4, 1}, 1}, Case{{2, 3, 4, 5}, {2, 3, 2}, 2}}) {
    SCOPED_TRACE(c.batch_dims);
    IndexGraph b;
    Value* x = b.F32(c.data);
    Value* i = b.I64(c.ind, -1, *std::min_element(c.data.begin() + c.batch_dims, c.data.end()));
    auto g = b.Finish({b.Op("GatherND", {x, i}, {{"batch_dims", c.batch_dims}})});
    CheckIndex(*g, b);
  }
}

TEST(IndexLoweringTest, GatherAxesAndNegativeIndices) {
  struct Case { Ints data, ind; int64_t axis; };
  for (const Case& c : {Case{{3, 7, 5}, {4}, 1}, Case{{3, 7, 5}, {2, 3}, -1}, Case{{2, 3, 17}, {}, 2},
                        Case{{13}, {3, 2}, 0}, Case{{2, 5, 3, 2}, {7}, -2}}) {
    SCOPED_TRACE(c.axis);
    IndexGraph b;
    Value* x = b.F32(c.data);
    int64_t a = c.axis < 0 ? c.axis + static_cast<int64_t>(c.data.size()) : c.axis;
    Value* i = b.I64(c.ind, -c.data[a], c.data[a]);
    auto g = b.Finish({b.Op("Gather", {x, i}, {{"axis", c.axis}})});
    CheckIndex(*g, b);
  }
}

TEST(IndexLoweringTest, GatherConstantIndicesAndEpilogue) {
  IndexGraph b;
  Value* x = b.F32({6, 9});
  Value* bias = b.F32({9});
  Value* i = b.Const({3}, {4, -1, 0});
  Value* y = b.Op("Gather", {x, i}, {{"axis", int64_t{0}}});
  Value* z = b.Op("Relu", {b.Op("Add", {y, bias})});
  auto g = b.Finish({z, y});
  CheckIndex(*g, b);
  CheckPrint(*g, "select(");
}

TEST(IndexLoweringTest, GatherOfTransposedInputIntoReshape) {
  IndexGraph b;
  Value* x = b.F32({5, 3});
  Value* i = b.I64({2, 2}, -5, 5);
  Value* t = b.Op("Transpose", {x}, {{"perm", Ints{1, 0}}});
  Value* y = b.Op("Gather", {t, i}, {{"axis", int64_t{1}}});
  Value* r = b.Op("Reshape", {y, b.Const({2}, {3, 4})});
  auto g = b.Finish({b.Op("Mul", {r, r})});
  CheckIndex(*g, b);
}

TEST(IndexLoweringTest, GatherClampsOutOfRangeIndices) {
  IndexGraph b;
  Value* x = b.F32({5, 3});
  Value* i = b.I64({2}, 0, 1);
  auto g = b.Finish({b.Op("Gather", {x, i}, {{"axis", int64_t{0}}})});
  CpuTarget target = CpuTarget::Host();
  auto k = JitCompile(*g, DefaultSchedule(*g, target), target);
  ASSERT_TRUE(k.ok()) << k.status();
  std::vector<float> data(15);
  for (int j = 0; j < 15; ++j) data[j] = static_cast<float>(j);
  std::vector<int64_t> idx = {100, -100};
  std::vector<float> out(6, -1);
  void* args[] = {data.data(), idx.data(), out.data()};
  (*k)->Run(args, 0, (*k)->num_tasks());
  EXPECT_EQ(out, (std::vector<float>{12, 13, 14, 0, 1, 2}));
}

TEST(IndexLoweringTest, GatherElements) {
  struct Case { Ints data, ind; int64_t axis; };
  for (const Case& c : {Case{{3, 5}, {3, 5}, 0}, Case{{3, 5}, {2, 7}, 1}, Case{{2, 3, 7}, {1, 3, 4}, -1},
                        Case{{1}, {3}, 0}}) {
    IndexGraph b;
    Value* x = b.F32(c.data);
    int64_t a = c.axis < 0 ? c.axis + static_cast<int64_t>(c.data.size()) : c.axis;
    Value* i = b.I64(c.ind, -c.data[a], c.data[a]);
    auto g = b.Finish({b.Op("GatherElements", {x, i}, {{"axis", c.axis}})});
    CheckIndex(*g, b);
  }
}

TEST(IndexLoweringTest, DepthToSpaceAndSpaceToDepth) {
  for (std::string mode : {"DCR", "CRD"}) {
    for (auto [dims, bs] : {std::pair<Ints, int64_t>{{1, 8, 3, 5}, 2}, {{2, 9, 1, 3}, 3}, {{1, 3, 2, 2}, 1}}) {
      IndexGraph b;
      Value* x = b.F32(dims);
      auto g = b.Finish({b.Op("DepthToSpace", {x}, {{"blocksize", bs}, {"mode", mode}})});
      CheckIndex(*g, b);
    }
  }
  for (auto [dims, bs] : {std::pair<Ints, int64_t>{{1, 3, 6, 10}, 2}, {{2, 1, 3, 9}, 3}}) {
    IndexGraph b;
    Value* x = b.F32(dims);
    auto g = b.Finish({b.Op("SpaceToDepth", {x}, {{"blocksize", bs}})});
    CheckIndex(*g, b);
  }
}

TEST(IndexLoweringTest, Trilu) {
  for (int64_t upper : {0, 1}) {
    for (int64_t k : {-2, 0, 1, 9}) {
      for (Ints dims : {Ints{5, 7}, Ints{2, 3, 1}, Ints{1, 13, 4}}) {
        IndexGraph b;
        Value* x = b.F32(dims);
        auto g = b.Finish({b.Op("Trilu", {x, b.Const({}, {k})}, {{"upper", upper}})});
        CheckIndex(*g, b);
      }
    }
    IndexGraph b;  // k as a run-time input, and no k
    Value* x = b.F32({6, 5});
    Value* k = b.I64({}, -3, 4);
    auto g = b.Finish({b.Op("Trilu", {x, k}, {{"upper", upper}}), b.Op("Trilu", {x}, {{"upper", upper}})});
    CheckIndex(*g, b);
  }
}

TEST(IndexLoweringTest, SplitPieces) {
  struct Case { Ints dims; int64_t axis; std::vector<int64_t> sizes; int64_t pieces; };
  for (const Case& c : {Case{{3, 7}, 1, {1, 4, 2}, 3}, Case{{7, 2}, 0, {}, 3}, Case{{2, 3, 5}, -1, {}, 2},
                        Case{{6}, 0, {2, 0, 4}, 3}}) {
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
    CheckIndex(*g, b);
  }
}

TEST(IndexLoweringTest, CumSum) {
  for (Ints dims : {Ints{3, 7, 5}, Ints{13}, Ints{1, 2, 1}}) {
    for (int64_t axis = -1; axis < static_cast<int64_t>(dims.size()); ++axis) {
      for (int64_t excl : {0, 1}) {
        for (int64_t rev : {0, 1}) {
          IndexGraph b;
          Value* x = b.F32(dims);
          auto g = b.Finish({b.Op("CumSum", {x, b.Const({}, {axis})}, {{"exclusive", excl}, {"reverse", rev}})});
          CheckIndex(*g, b, {1e-5f});
        }
      }
    }
  }
}

TEST(IndexLoweringTest, CumSumRuntimeAxisAndEpilogue) {
  IndexGraph b;
  Value* x = b.F32({4, 9});
  Value* axis = b.I64({}, -2, 2);
  Value* c = b.Op("CumSum", {x, axis}, {{"reverse", int64_t{1}}});
  auto g = b.Finish({c, b.Op("Tanh", {c})});
  CheckIndex(*g, b, {1e-5f});
  IndexGraph b2;
  Value* y = b2.F32({17});
  auto g2 = b2.Finish({b2.Op("CumSum", {y, b2.I64({1}, -1, 1)})});
  CheckIndex(*g2, b2, {1e-5f});
}

TEST(IndexLoweringTest, ArgMaxArgMin) {
  for (std::string op : {"ArgMax", "ArgMin"}) {
    for (Ints dims : {Ints{3, 7, 5}, Ints{11}, Ints{2, 1, 17}}) {
      for (int64_t axis = -1; axis < static_cast<int64_t>(dims.size()); ++axis) {
        for (int64_t keep : {0, 1}) {
          for (int64_t last : {0, 1}) {
            IndexGraph b;
            Value* x = b.F32(dims);
            auto g = b.Finish(
                {b.Op(op, {x}, {{"axis", axis}, {"keepdims", keep}, {"select_last_index", last}})});
            CheckIndex(*g, b, {0, true});
          }
        }
      }
    }
  }
  IndexGraph b;
  Value* x = b.F32({4, 6});
  auto g = b.Finish({b.Op("ArgMax", {x}, {{"axis", int64_t{1}}})});
  CheckPrint(*g, "out0: i64[4,1] output");
}

TEST(IndexLoweringTest, PrintAndVerifyGather) {
  IndexGraph b;
  Value* x = b.F32({7, 4});
  Value* i = b.I64({2, 3}, 0, 7);
  auto g = b.Finish({b.Op("Gather", {x, i}, {{"axis", int64_t{0}}})});
  CheckPrint(*g, "in1: i64[2,3] input");
}

TEST(IndexLoweringTest, Declines) {
  loop_ir::WorkloadLowering l = loop_ir::IndexLowering();
  {  // i32 indices from a graph input: loop IR has no i32 buffers yet
    auto g = std::make_unique<Graph>();
    g->set_opset_version(17);
    Value* x = *g->AddInput("x", TensorType::Static(DType::kFloat32, {5, 3}));
    Value* i = *g->AddInput("i", TensorType::Static(DType::kInt32, {2}));
    Value* y = *g->AddValue("y");
    ASSERT_TRUE(g->AddNode("Gather", "gather", {x, i}, {y}, {{"axis", int64_t{0}}}).ok());
    g->AddOutput(y);
    ASSERT_TRUE(InferShapes(*g).ok());
    EXPECT_EQ(l.match(*g).code(), absl::StatusCode::kUnimplemented);
  }
  {
    auto g = std::make_unique<Graph>();
    g->set_opset_version(17);
    Value* x = *g->AddInput("x", TensorType::Static(DType::kFloat32, {5, 3}));
    Value* y = *g->AddValue("y");
    ASSERT_TRUE(g->AddNode("Relu", "relu", {x}, {y}).ok());
    g->AddOutput(y);
    ASSERT_TRUE(InferShapes(*g).ok());
    EXPECT_FALSE(l.match(*g).ok());
  }
}

}  // namespace
}  // namespace kiln
