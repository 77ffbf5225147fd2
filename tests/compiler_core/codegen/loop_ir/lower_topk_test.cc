// TopK workloads on loop IR (compiler_core/codegen/loop_ir/lower_topk.h):
// largest and smallest along every axis with many ties, k from 0 to the
// whole row, infinities, JIT-compiled at every schedule point and compared
// exactly with the reference interpreter. The case lists are the GPU test's
// too (topk_cases.h).
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
#include "tests/compiler_core/codegen/loop_ir/topk_cases.h"

namespace kiln {
namespace {

using namespace loop_ir_testing;  // NOLINT: test helpers

// Every point of the space lowered, verified, run with its tasks in two
// ranges (the second half first) into outputs prefilled with -7, and
// compared exactly with the interpreter.
void CheckTopK(const TopKCase& c) {
  SCOPED_TRACE(TopKName(c));
  std::unique_ptr<Graph> graph = TopKGraph(c);
  const Graph& g = *graph;
  CpuTarget target = CpuTarget::Host();
  ASSERT_EQ(WorkloadKind(g), "topk") << g.ToText();
  std::map<std::string, Tensor> feeds = TopKFeeds(g, c);
  auto ref = Evaluate(g, feeds);
  ASSERT_TRUE(ref.ok()) << ref.status();
  Tensor& x = feeds.at("in0");
  std::vector<ScheduleConfig> configs = EnumerateSchedules(g, target);
  ASSERT_FALSE(configs.empty());
  for (const ScheduleConfig& config : configs) {
    SCOPED_TRACE(absl::StrCat("schedule ", config.ToString(), "\n", g.ToText()));
    ASSERT_TRUE(ValidateSchedule(g, config, target).ok());
    auto lowered = loop_ir::TopKLowering().lower(g, config, target);
    ASSERT_TRUE(lowered.ok()) << lowered.status();
    ASSERT_TRUE(loop_ir::Verify(*lowered).ok()) << loop_ir::Print(*lowered);
    auto kernel = JitCompile(g, config, target);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    std::vector<std::vector<int64_t>> outs;  // 8-byte slots serve f32 and i64
    std::vector<void*> args = {x.raw()};
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
  for (const auto& cases : {TopKTieCases(), TopKSizeCases(), TopKAxisCases(), TopKLongRowAndInfinityCases()}) {
    for (const TopKCase& c : cases) CheckTopK(c);
  }
}

TEST(TopKLoweringTest, PrintVerifyAndValidation) {
  std::unique_ptr<Graph> g = TopKGraph({{5, 13}, 3, 1, 1});
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
