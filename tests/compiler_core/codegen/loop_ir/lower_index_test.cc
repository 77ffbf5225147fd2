// Index workloads on loop IR (compiler_core/codegen/loop_ir/lower_index.h): Gather,
// GatherElements, DepthToSpace, SpaceToDepth, Trilu, Split, CumSum, ArgMax and
// ArgMin on odd shapes, JIT-compiled at several schedule points and compared
// with the reference interpreter (exactly; CumSum to 1e-5, as the interpreter
// sums in double). Most case lists are the GPU test's too (index_cases.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
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
#include "compiler_core/frontend/shape_inference.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/loop_ir/index_cases.h"
#include "tests/compiler_core/codegen/loop_ir/lowering_testing.h"

namespace kiln {
namespace {

using namespace loop_ir_testing;  // NOLINT: test helpers

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
  const IndexData data = opt.ties ? IndexData::kTies : IndexData::kUniform;
  codegen_testing::CheckConfigsAgainstInterpreter(g, IndexFeeds(g, b, data), configs, target,
                                                  {opt.tolerance, opt.tolerance});
}

// CheckIndex on the graph of each case.
void CheckCases(const std::vector<IndexCase>& cases, CheckOptions opt = {}) {
  for (const IndexCase& c : cases) {
    SCOPED_TRACE(c.name);
    IndexGraph b;
    auto g = b.Finish(c.build(b));
    CheckIndex(*g, b, opt);
  }
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

TEST(IndexLoweringTest, GatherOfBoolAndHalfData) {
  CheckCases(GatherOfBoolAndHalfCases());
}

TEST(IndexLoweringTest, GatherND) {
  CheckCases(GatherNDCases());
}

TEST(IndexLoweringTest, GatherAxesAndNegativeIndices) {
  CheckCases(GatherAxisCases());
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
  CheckCases(GatherElementsCases());
}

TEST(IndexLoweringTest, DepthToSpaceAndSpaceToDepth) {
  CheckCases(DepthToSpaceAndSpaceToDepthCases());
}

TEST(IndexLoweringTest, Trilu) {
  CheckCases(TriluCases());
}

TEST(IndexLoweringTest, SplitPieces) {
  CheckCases(SplitCases());
}

TEST(IndexLoweringTest, CumSum) {
  CheckCases(CumSumCases(), {1e-5f});
}

TEST(IndexLoweringTest, CumSumRuntimeAxisAndEpilogue) {
  CheckCases(CumSumRuntimeAxisCases(), {1e-5f});
}

TEST(IndexLoweringTest, IntegerDataScannedAndMoved) { CheckCases(IntegerDataCases()); }

TEST(IndexLoweringTest, ArgMaxArgMin) {
  CheckCases(ArgMaxArgMinCases(), {0, true});
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
  {  // indices computed in the workload: IntAt reads inputs and constants
    IndexGraph b;
    Value* i = b.Op("Add", {b.I64({2}, 0, 2), b.Const({}, {1})});
    auto g = b.Finish({b.Op("Gather", {b.F32({5, 3}), i}, {{"axis", int64_t{0}}})});
    absl::Status s = l.match(*g);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
    EXPECT_NE(s.message().find("computed in the workload"), std::string::npos) << s;
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
