// TopK workloads on loop IR (compiler_core/codegen/loop_ir/lower_topk.h):
// largest and smallest along every axis with many ties, JIT-compiled at
// several schedule points and compared exactly with the reference interpreter.
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler_core/codegen/jit.h"
#include "compiler_core/codegen/loop_ir/lower_topk.h"
#include "compiler_core/codegen/loop_ir/printer.h"
#include "compiler_core/codegen/loop_ir/verifier.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/codegen/target.h"
#include "compiler_core/frontend/interpreter.h"
#include "compiler_core/frontend/shape_inference.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/loop_ir/lowering_testing.h"

namespace kiln {
namespace {

using namespace loop_ir_testing;  // NOLINT: test helpers
using Floats = std::vector<float>;

std::unique_ptr<Graph> TopKGraph(const Ints& x, int64_t k, int64_t axis, int64_t largest, bool values = true,
                                 bool indices = true) {
  auto g = std::make_unique<Graph>();
  g->set_opset_version(13);
  Value* in = *g->AddInput("in0", TensorType::Static(DType::kFloat32, x));
  Value* kv = *g->AddConstant("k", Tensor::FromVector(DType::kInt64, {1}, Ints{k}));
  Value* v = *g->AddValue("values");
  Value* i = *g->AddValue("indices");
  Attrs a = {{"axis", axis}, {"largest", largest}};
  EXPECT_TRUE(g->AddNode("TopK", "topk", {in, kv}, {v, i}, a).ok());
  if (values) g->AddOutput(v);
  if (indices) g->AddOutput(i);
  absl::Status st = InferShapes(*g);
  EXPECT_TRUE(st.ok()) << st << "\n" << g->ToText();
  return g;
}

// Data in [-1, 1] rounded to `levels` steps (few levels: many ties).
void CheckTopK(const Graph& g, int levels) {
  CpuTarget target = CpuTarget::Host();
  ASSERT_EQ(WorkloadKind(g), "topk") << g.ToText();
  Ints dims = g.inputs()[0]->type().StaticDims();
  Floats x = Random(Product(dims), 11, -1, 1);
  for (float& f : x) f = std::round(f * levels) / levels;
  auto ref = Evaluate(g, {{"in0", Tensor::FromVector(DType::kFloat32, dims, x)}});
  ASSERT_TRUE(ref.ok()) << ref.status();
  std::vector<ScheduleConfig> configs = EnumerateSchedules(g, target);
  ASSERT_FALSE(configs.empty());
  for (const ScheduleConfig& c : configs) {
    SCOPED_TRACE(absl::StrCat("schedule ", c.ToString(), "\n", g.ToText()));
    ASSERT_TRUE(ValidateSchedule(g, c, target).ok());
    auto lowered = loop_ir::TopKLowering().lower(g, c, target);
    ASSERT_TRUE(lowered.ok()) << lowered.status();
    ASSERT_TRUE(loop_ir::Verify(*lowered).ok()) << loop_ir::Print(*lowered);
    auto kernel = JitCompile(g, c, target);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    std::vector<std::vector<int64_t>> outs;  // 8-byte slots serve f32 and i64
    std::vector<void*> args = {x.data()};
    for (const Value* v : g.outputs()) outs.emplace_back(Product(v->type().StaticDims()), -7);
    for (auto& o : outs) args.push_back(o.data());
    const JitKernel& k = **kernel;
    ASSERT_EQ(k.num_args(), static_cast<int>(args.size()));
    int64_t t = k.num_tasks();
    k.Run(args.data(), t / 2, t);
    k.Run(args.data(), 0, t / 2);
    for (size_t o = 0; o < outs.size(); ++o) {
      const Value* v = g.outputs()[o];
      const Tensor& want = ref->at(v->name());
      int bad = 0;
      for (int64_t e = 0; e < want.num_elements() && bad < 5; ++e) {
        if (v->type().dtype == DType::kInt64) {
          if (outs[o][e] != want.data<int64_t>()[e]) {
            ADD_FAILURE() << "indices element " << e << ": got " << outs[o][e] << " want "
                          << want.data<int64_t>()[e];
            ++bad;
          }
        } else {
          float got = reinterpret_cast<const float*>(outs[o].data())[e];
          if (got != want.data<float>()[e]) {
            ADD_FAILURE() << "values element " << e << ": got " << got << " want " << want.data<float>()[e];
            ++bad;
          }
        }
      }
    }
  }
}

TEST(TopKLoweringTest, LargestSmallestAxesAndTies) {
  CheckTopK(*TopKGraph({5, 13}, 3, -1, 1), 1000);
  CheckTopK(*TopKGraph({5, 13}, 4, 1, 0), 3);  // many ties: lower index first
  CheckTopK(*TopKGraph({3, 7, 5}, 7, 1, 0), 1000);
  CheckTopK(*TopKGraph({3, 7, 5}, 2, 0, 1), 2);
  CheckTopK(*TopKGraph({1}, 1, 0, 1), 1000);
  CheckTopK(*TopKGraph({2, 3}, 0, 1, 1), 1000);
  CheckTopK(*TopKGraph({64, 97}, 5, 1, 1), 1000);  // enough rows for parallel tasks
  CheckTopK(*TopKGraph({4, 11}, 3, 1, 1, true, false), 4);
  CheckTopK(*TopKGraph({4, 11}, 3, 1, 0, false, true), 4);
}

TEST(TopKLoweringTest, PrintVerifyAndValidation) {
  std::unique_ptr<Graph> g = TopKGraph({5, 13}, 3, 1, 1);
  CpuTarget target = CpuTarget::Host();
  const loop_ir::WorkloadLowering l = loop_ir::TopKLowering();
  ASSERT_TRUE(l.match(*g).ok());
  ScheduleConfig def = l.default_schedule(*g, target);
  auto f = l.lower(*g, def, target);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_TRUE(loop_ir::Verify(*f).ok());
  std::string text = loop_ir::Print(*f);
  EXPECT_NE(text.find("out1: i64[5,3] output"), std::string::npos) << text;
  EXPECT_NE(text.find("allocate tv: f32[3]"), std::string::npos) << text;
  ScheduleConfig bad;
  bad.Set("vw", 4);
  EXPECT_EQ(l.validate(*g, bad, target).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WorkloadKind(*g), "topk");  // no other lowering claims it
}

}  // namespace
}  // namespace kiln
