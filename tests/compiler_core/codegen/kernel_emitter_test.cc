// Fused kernels: random elementwise DAGs (fan-in, fan-out, broadcasting,
// several outputs) and MatMul/Gemm anchors with elementwise epilogues, JIT-
// compiled on several schedule points and checked against the reference
// interpreter; CanCompile on supported and unsupported workloads; object
// emission of a fused kernel.
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler_core/codegen/jit.h"
#include "compiler_core/codegen/object_emitter.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/codegen/target.h"
#include "compiler_core/frontend/interpreter.h"
#include "compiler_core/frontend/shape_inference.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/codegen_testing.h"

namespace kiln {
namespace {

using codegen_testing::GraphBuilder;
using codegen_testing::Product;
using codegen_testing::RandomData;
using codegen_testing::RunTasksUnevenly;

// Runs the kernel (tasks in three uneven ranges) and the interpreter on the
// same random inputs; compares every output with rtol 1e-4, atol `atol` (NaN
// must match NaN).
void CheckAgainstInterpreter(const Graph& g, const std::vector<ScheduleConfig>& configs, float atol = 1e-5f,
                             float lo = -3.0f, float hi = 3.0f) {
  CpuTarget target = CpuTarget::Host();
  ASSERT_TRUE(CanCompile(g)) << g.ToText();
  codegen_testing::CheckConfigsAgainstInterpreter(g, codegen_testing::RandomFeeds(g, 101, lo, hi), configs, target,
                                                  {atol, 1e-4});
}

// Vector widths x task counts of the elementwise space, plus an odd task
// count that splits the outer loop unevenly.
std::vector<ScheduleConfig> ElementwisePoints(const CpuTarget& target) {
  std::vector<ScheduleConfig> out;
  for (int64_t vw : {1, 4, 8, 16}) {
    if (vw > target.FloatLanes()) continue;
    for (int64_t tasks : {1, 3, 16}) {
      ScheduleConfig c;
      c.Set("vw", vw);
      c.Set("tasks", tasks);
      out.push_back(c);
    }
  }
  return out;
}

std::vector<ScheduleConfig> MatMulPoints() {
  std::vector<ScheduleConfig> out;
  for (auto [mr, nr, ku] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {2, 3, 4}, {4, 2, 1}, {6, 2, 4},
                            {8, 1, 4}, {8, 4, 1}}) {
    ScheduleConfig c;
    c.Set("mr", mr);
    c.Set("nr", nr);
    c.Set("ku", ku);
    out.push_back(c);
  }
  return out;
}

// A random elementwise DAG of `num_nodes` operators over 1-3 inputs that
// broadcast to `out` (input 0 has the full shape); one or two outputs.
std::unique_ptr<Graph> RandomDag(std::mt19937& rng, const std::vector<int64_t>& out, int num_nodes) {
  static const char* const kUnary[] = {"Relu", "Sigmoid", "Neg",       "Abs",         "Exp",       "Tanh",
                                       "Erf",  "Gelu",    "LeakyRelu", "HardSigmoid", "HardSwish", "Sqrt",
                                       "Reciprocal"};
  static const char* const kBinary[] = {"Add", "Sub", "Mul", "Div", "Max", "Min"};
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  GraphBuilder wb(20);
  std::vector<Value*> values;
  std::vector<std::vector<int64_t>> dims;
  values.push_back(wb.Input(out));
  dims.push_back(out);
  int extra = pick(3);
  for (int i = 0; i < extra; ++i) {
    std::vector<int64_t> d = out;
    switch (pick(4)) {
      case 0: d.erase(d.begin(), d.begin() + std::min<size_t>(d.size(), 1 + pick(2))); break;  // trailing dims
      case 1: for (auto& x : d) if (pick(2)) x = 1; break;                                      // some dims 1
      case 2: d = {}; break;                                                                     // scalar
      default: break;                                                                            // full
    }
    values.push_back(wb.Input(d));
    dims.push_back(d);
  }
  std::vector<Value*> full_nodes;
  for (int n = 0; n < num_nodes; ++n) {
    // Prefer recent values: chains with some fan-out.
    auto choose = [&] {
      int k = static_cast<int>(values.size());
      return pick(2) ? k - 1 - pick(std::min(k, 2)) : pick(k);
    };
    Value* y;
    int first = n == 0 ? 0 : choose();
    std::map<std::string, AttrValue> attrs;
    int kind = pick(10);
    if (kind < 5) {
      std::string op = kUnary[pick(std::size(kUnary))];
      if (op == "LeakyRelu") attrs["alpha"] = 0.1f;
      if (op == "HardSigmoid") attrs["alpha"] = 0.3f;
      if (op == "Gelu" && pick(2)) attrs["approximate"] = std::string("tanh");
      Value* x = values[first];
      // Keep Sqrt and Reciprocal away from NaN and poles most of the time.
      if (op == "Sqrt") x = wb.Op("Abs", {x});
      if (op == "Reciprocal") x = wb.Op("Add", {wb.Op("Abs", {x}), values[0]});
      y = wb.Op(op, {x}, attrs);
    } else if (kind < 9) {
      std::string op = kBinary[pick(std::size(kBinary))];
      Value* b = values[choose()];
      if (op == "Div") b = wb.Op("Add", {wb.Op("Exp", {b}), values[0]});  // positive, away from 0
      y = wb.Op(op, {values[first], b});
    } else {
      Value* lo = wb.Input({});
      Value* hi = wb.Input({1});
      y = wb.Op("Clip", {values[first], pick(2) ? lo : nullptr, hi});
    }
    values.push_back(y);
  }
  // Make sure the last value has the full shape (add input 0 when it does not).
  Value* last = values.back();
  wb.Output(wb.Op("Add", {last, values[0]}));
  // A second output: the first node whose result already has the full shape
  // (always true of nodes reading input 0 alone).
  if (pick(2)) wb.Output(wb.Op("Mul", {values[1], values[0]}));
  return wb.Finish();
}

TEST(FusedElementwise, RandomDags) {
  CpuTarget target = CpuTarget::Host();
  std::vector<ScheduleConfig> points = ElementwisePoints(target);
  std::mt19937 rng(2024);
  const std::vector<std::vector<int64_t>> shapes = {{37}, {5, 19}, {3, 4, 33}, {2, 1, 7, 9}, {1, 130}, {6, 1}};
  int n = 0;
  for (int round = 0; round < 24; ++round) {
    const auto& out = shapes[round % shapes.size()];
    int nodes = 2 + round % 5;
    auto g = RandomDag(rng, out, nodes);
    SCOPED_TRACE(absl::StrCat("dag ", round));
    ASSERT_EQ(WorkloadKind(*g), "elementwise") << g->ToText();
    CheckAgainstInterpreter(*g, points);
    ++n;
  }
  EXPECT_EQ(n, 24);
}

TEST(FusedElementwise, EveryOperatorOnWideRange) {
  // Each unary operator alone on [-12, 12] (exp/tanh/erf tails) and a Clip with
  // attribute bounds.
  CpuTarget target = CpuTarget::Host();
  for (const char* op : {"Exp", "Tanh", "Erf", "Gelu", "Sigmoid", "HardSwish", "HardSigmoid", "LeakyRelu",
                         "Neg", "Abs", "Relu"}) {
    SCOPED_TRACE(op);
    GraphBuilder wb(20);
    Value* x = wb.Input({4099});
    wb.Output(wb.Op(op, {x}));
    auto g = wb.Finish();
    CheckAgainstInterpreter(*g, {DefaultSchedule(*g, target)}, 1e-5f, -12.0f, 12.0f);
  }
  {
    GraphBuilder wb(20);
    Value* x = wb.Input({4099});
    Value* y = wb.Op("Gelu", {x}, {{"approximate", std::string("tanh")}});
    wb.Output(y);
    auto g = wb.Finish();
    CheckAgainstInterpreter(*g, {DefaultSchedule(*g, target)}, 1e-5f, -12.0f, 12.0f);
  }
  {
    // Exp far into overflow and underflow.
    GraphBuilder wb(20);
    Value* x = wb.Input({1000});
    wb.Output(wb.Op("Exp", {x}));
    auto g = wb.Finish();
    CheckAgainstInterpreter(*g, {DefaultSchedule(*g, target)}, 1e-5f, -120.0f, 100.0f);
  }
  {
    GraphBuilder wb(20);
    Value* x = wb.Input({3, 50});
    Value* c = wb.Op("Clip", {x}, {{"min", -0.5f}, {"max", 0.25f}});
    Value* m = wb.Op("Max", {c, wb.Input({50}), wb.Input({3, 1})});
    wb.Output(wb.Op("Min", {m, wb.Op("Sqrt", {wb.Op("Abs", {x})})}));
    auto g = wb.Finish();
    CheckAgainstInterpreter(*g, ElementwisePoints(target));
  }
}

TEST(FusedMatMul, BiasRelu) {
  GraphBuilder wb(20);
  Value* a = wb.Input({37, 29});
  Value* w = wb.Input({29, 53});
  Value* bias = wb.Input({53});
  wb.Output(wb.Op("Relu", {wb.Op("Add", {wb.Op("MatMul", {a, w}), bias})}));
  auto g = wb.Finish();
  EXPECT_EQ(WorkloadKind(*g), "matmul");
  CheckAgainstInterpreter(*g, MatMulPoints(), 1e-4f, -1.0f, 1.0f);
}

TEST(FusedMatMul, GemmResidualClip) {
  GraphBuilder wb(20);
  Value* a = wb.Input({19, 40});
  Value* w = wb.Input({35, 40});
  Value* c = wb.Input({35});
  Value* res = wb.Input({19, 35});
  Value* lo = wb.Input({});
  Value* hi = wb.Input({});
  Value* y = wb.Op("Gemm", {a, w, c}, {{"transB", int64_t{1}}, {"alpha", 0.5f}, {"beta", 2.0f}});
  wb.Output(wb.Op("Clip", {wb.Op("Add", {res, y}), lo, hi}));
  auto g = wb.Finish();
  EXPECT_EQ(WorkloadKind(*g), "matmul");
  CheckAgainstInterpreter(*g, MatMulPoints(), 1e-4f, -1.0f, 1.0f);
}

TEST(FusedMatMul, GeluBatchedBroadcastAndTwoOutputs) {
  {
    GraphBuilder wb(20);
    Value* a = wb.Input({23, 64});
    Value* w = wb.Input({64, 70});
    wb.Output(wb.Op("Gelu", {wb.Op("MatMul", {a, w})}));
    auto g = wb.Finish();
    CheckAgainstInterpreter(*g, MatMulPoints(), 1e-4f, -1.0f, 1.0f);
  }
  {
    // Batched, epilogue operands [M,1] and [2,1,N]; the raw product and the
    // epilogue result are both outputs.
    GraphBuilder wb(20);
    Value* a = wb.Input({2, 13, 17});
    Value* w = wb.Input({17, 21});
    Value* row_scale = wb.Input({13, 1});
    Value* shift = wb.Input({2, 1, 21});
    Value* mm = wb.Op("MatMul", {a, w});
    Value* t = wb.Op("Mul", {mm, row_scale});
    Value* u = wb.Op("Sub", {t, shift});
    wb.Output(mm);
    wb.Output(wb.Op("Tanh", {u}));
    wb.Output(wb.Op("Sigmoid", {u}));
    auto g = wb.Finish();
    EXPECT_EQ(WorkloadKind(*g), "matmul");
    CheckAgainstInterpreter(*g, MatMulPoints(), 1e-4f, -1.0f, 1.0f);
  }
  {
    // Matrix-vector (1-D B drops N) with a residual that reuses A's buffer shape.
    GraphBuilder wb(20);
    Value* a = wb.Input({3, 9, 31});
    Value* v = wb.Input({31});
    Value* r = wb.Input({9});
    wb.Output(wb.Op("HardSwish", {wb.Op("Add", {wb.Op("MatMul", {a, v}), r})}));
    auto g = wb.Finish();
    CheckAgainstInterpreter(*g, MatMulPoints(), 1e-4f, -1.0f, 1.0f);
  }
}

TEST(FusedCanCompile, SupportedAndUnsupported) {
  auto single = codegen_testing::MakeWorkload("Add", {{4}, {4}}, {4});
  EXPECT_TRUE(CanCompile(*single));
  {
    GraphBuilder wb(20);
    Value* x = wb.Input({4, 8});
    wb.Output(wb.Op("Relu", {wb.Op("Add", {x, wb.Input({8})})}));
    auto g = wb.Finish();
    EXPECT_TRUE(CanCompile(*g));
    EXPECT_EQ(WorkloadKind(*g), "elementwise");
    EXPECT_FALSE(EnumerateSchedules(*g, CpuTarget::Host()).empty());
  }
  {
    // Unsupported operator in the chain.
    GraphBuilder wb(20);
    Value* x = wb.Input({4, 8});
    wb.Output(wb.Op("Hardmax", {wb.Op("Relu", {x})}));
    auto g = wb.Finish();
    EXPECT_FALSE(CanCompile(*g));
    EXPECT_EQ(WorkloadKind(*g), "unsupported");
    EXPECT_TRUE(EnumerateSchedules(*g, CpuTarget::Host()).empty());
    EXPECT_EQ(JitCompile(*g, {}, CpuTarget::Host()).status().code(), absl::StatusCode::kUnimplemented);
  }
  {
    // Two anchors.
    GraphBuilder wb(20);
    Value* x = wb.Input({4, 8});
    Value* y = wb.Op("MatMul", {x, wb.Input({8, 8})});
    wb.Output(wb.Op("MatMul", {y, wb.Input({8, 8})}));
    EXPECT_FALSE(CanCompile(*wb.Finish()));
  }
  {
    // Elementwise prologue feeding the anchor.
    GraphBuilder wb(20);
    Value* x = wb.Op("Relu", {wb.Input({4, 8})});
    wb.Output(wb.Op("MatMul", {x, wb.Input({8, 8})}));
    EXPECT_FALSE(CanCompile(*wb.Finish()));
  }
  {
    // Epilogue broadcasts the product to a larger shape.
    GraphBuilder wb(20);
    Value* y = wb.Op("MatMul", {wb.Input({4, 8}), wb.Input({8, 8})});
    wb.Output(wb.Op("Add", {y, wb.Input({2, 4, 8})}));
    EXPECT_FALSE(CanCompile(*wb.Finish()));
  }
  {
    // Outputs of different shapes.
    GraphBuilder wb(20);
    Value* x = wb.Input({4, 8});
    Value* b = wb.Input({8});
    wb.Output(wb.Op("Add", {x, b}));
    wb.Output(wb.Op("Relu", {b}));
    EXPECT_EQ(WorkloadKind(*wb.Finish()), "elementwise");
  }
  {
    // Conv anchor with an epilogue: compiles through the loop IR.
    GraphBuilder wb(20);
    Value* y = wb.Op("Conv", {wb.Input({1, 3, 8, 8}), wb.Input({4, 3, 3, 3})});
    wb.Output(wb.Op("Relu", {y}));
    EXPECT_TRUE(CanCompile(*wb.Finish()));
  }
  {
    // Gelu with an unknown approximation.
    auto g = std::make_unique<Graph>();
    Value* gx = *g->AddInput("x", TensorType::Static(DType::kFloat32, {4}));
    Value* gy = *g->AddValue("y", TensorType::Static(DType::kFloat32, {4}));
    ASSERT_TRUE(g->AddNode("Gelu", "g", {gx}, {gy}, {{"approximate", std::string("fast")}}).ok());
    g->AddOutput(gy);
    EXPECT_FALSE(CanCompile(*g));
  }
  {
    // f16 input: every Kiln dtype compiles.
    auto g = std::make_unique<Graph>();
    Value* x = *g->AddInput("x", TensorType::Static(DType::kFloat16, {4}));
    Value* y = *g->AddValue("y", TensorType::Static(DType::kFloat16, {4}));
    ASSERT_TRUE(g->AddNode("Relu", "r", {x}, {y}).ok());
    g->AddOutput(y);
    EXPECT_EQ(WorkloadKind(*g), "elementwise");
  }
  {
    // An output that is a workload input: a copy.
    GraphBuilder wb(20);
    Value* x = wb.Input({4});
    wb.Output(wb.Op("Relu", {x}));
    wb.Output(x);
    EXPECT_EQ(WorkloadKind(*wb.Finish()), "elementwise");
  }
}

TEST(FusedObject, NoUndefinedSymbolsAndDeterministic) {
  CpuTarget target = CpuTarget::Host();
  GraphBuilder wb(20);
  Value* a = wb.Input({31, 40});
  Value* w = wb.Input({40, 24});
  Value* bias = wb.Input({24});
  Value* y = wb.Op("Add", {wb.Op("MatMul", {a, w}), bias});
  wb.Output(wb.Op("Gelu", {y}));
  wb.Output(wb.Op("Tanh", {wb.Op("Exp", {wb.Op("Erf", {y})})}));
  auto mm = wb.Finish();
  GraphBuilder eb(20);
  Value* x = eb.Input({7, 300});
  eb.Output(eb.Op("Sigmoid", {eb.Op("Mul", {eb.Op("HardSwish", {x}), eb.Input({300})})}));
  auto ew = eb.Finish();
  std::vector<KernelRequest> reqs = {{mm.get(), DefaultSchedule(*mm, target), "fused_mm"},
                                     {ew.get(), DefaultSchedule(*ew, target), "fused_ew"}};
  auto o1 = CompileToObject(reqs, target);
  ASSERT_TRUE(o1.ok()) << o1.status();
  auto o2 = CompileToObject(reqs, target);
  ASSERT_TRUE(o2.ok()) << o2.status();
  EXPECT_EQ(o1->elf, o2->elf);
  ASSERT_EQ(o1->kernels.size(), 2u);
  EXPECT_EQ(o1->kernels[0].num_args, 5);  // a, w, bias, two outputs
  EXPECT_EQ(o1->kernels[1].num_args, 3);
  for (const std::string& name : codegen_testing::UndefinedSymbols(o1->elf)) {
    EXPECT_TRUE(name == "memcpy" || name == "memset" || name == "memmove") << name;
  }
  // The IR calls nothing but LLVM intrinsics.
  size_t pos = 0;
  while ((pos = o1->llvm_ir.find("declare ", pos)) != std::string::npos) {
    size_t eol = o1->llvm_ir.find('\n', pos);
    std::string line = o1->llvm_ir.substr(pos, eol - pos);
    EXPECT_NE(line.find("@llvm."), std::string::npos) << line;
    pos = eol;
  }
}

// A kernel's body takes its buffers as noalias pointers and is inlined into
// the exported entry point: every access carries alias scopes, so a value
// read from one buffer stays in a register across stores to another (here
// the per-channel Sigmoid under a broadcast Mul).
TEST(FusedObject, BuffersAreNoaliasInTheOptimizedKernel) {
  CpuTarget target = CpuTarget::Host();
  GraphBuilder b(21);
  Value* s = b.Input({1, 24, 1, 1});
  b.Output(b.Op("Mul", {b.Op("Sigmoid", {s}), b.Input({1, 24, 20, 20})}));
  auto g = b.Finish();
  auto o = CompileToObject({{g.get(), DefaultSchedule(*g, target), "scaled"}}, target);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_NE(o->llvm_ir.find("define dso_local void @scaled("), std::string::npos) << o->llvm_ir;
  EXPECT_EQ(o->llvm_ir.find("@scaled.body"), std::string::npos) << "the body was not inlined";
  EXPECT_NE(o->llvm_ir.find("!alias.scope"), std::string::npos) << o->llvm_ir;
  EXPECT_NE(o->llvm_ir.find("!noalias"), std::string::npos) << o->llvm_ir;
}

}  // namespace
}  // namespace kiln
