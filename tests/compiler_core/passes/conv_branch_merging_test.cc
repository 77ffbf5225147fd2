// Conv branch merging: which Adds of branches over one input become one Conv
// (the interpreter's numbers unchanged, the branches gone) and which stay.
#include "compiler_core/passes/conv_branch_merging.h"

#include <gtest/gtest.h>

#include "compiler_core/passes/dead_code_elimination.h"
#include "tests/compiler_core/passes/pass_test_support.h"

namespace kiln {
namespace {

using testing::GraphBuilder;
using Attrs = std::map<std::string, AttrValue>;

Attrs ConvAttrs(std::vector<int64_t> pads, std::vector<int64_t> strides = {1, 1}, int64_t group = 1,
                std::vector<int64_t> dilations = {1, 1}) {
  return {{"pads", pads}, {"strides", strides}, {"group", group}, {"dilations", dilations}};
}

// Conv(x) with random weights [m, c/group, kh, kw] and a bias.
Value* RandomConv(GraphBuilder& b, Value* x, int64_t m, int64_t c, int64_t kh, int64_t kw, const Attrs& attrs,
                  const std::string& name) {
  const int64_t group = std::get<int64_t>(attrs.at("group"));
  return b.Op("Conv", {x, b.Random(name + "_w", {m, c / group, kh, kw}), b.Random(name + "_b", {m})}, attrs, name);
}

Value* RandomBatchNorm(GraphBuilder& b, Value* x, int64_t c, const std::string& name) {
  return b.Op("BatchNormalization",
              {x, b.Random(name + "_s", {c}), b.Random(name + "_b", {c}), b.Random(name + "_m", {c}),
               b.Random(name + "_v", {c}, 0.5f, 2.0f)},
              {}, name);
}

bool Merge(Graph& g) {
  PassPipeline p("conv_branch_merging");
  p.Add(std::make_unique<ConvBranchMerging>()).Add(std::make_unique<DeadCodeElimination>());
  return testing::RunPasses(g, p);
}

// The only Conv's attribute `name`.
std::vector<int64_t> ConvInts(const Graph& g, const char* name) {
  for (const auto& n : g.nodes()) {
    if (n->op_type() == "Conv") return n->GetInts(name, {});
  }
  return {};
}

void ExpectOneConv(std::unique_ptr<Graph> g, std::vector<int64_t> kernel, std::vector<int64_t> pads) {
  auto original = g->Clone();
  ASSERT_TRUE(Merge(*g)) << g->ToText();
  EXPECT_EQ(testing::OpSequence(*g), "Conv") << g->ToText();
  EXPECT_EQ(ConvInts(*g, "kernel_shape"), kernel) << g->ToText();
  EXPECT_EQ(ConvInts(*g, "pads"), pads) << g->ToText();
  testing::ExpectSameOutputs(*original, *g, 1e-4);
}

// RepVGG's block as timm exports it: a 3x3 and a 1x1 branch, and an
// identity BatchNormalization where the channels and the map are kept.
TEST(ConvBranchMergingTest, RepVggBlockBecomesOneConv) {
  for (int64_t group : {1, 2}) {
    GraphBuilder b;
    Value* x = b.Input("x", {1, 8, 9, 10});
    Value* k3 = RandomConv(b, x, 8, 8, 3, 3, ConvAttrs({1, 1, 1, 1}, {1, 1}, group), "conv_kxk");
    Value* k1 = RandomConv(b, x, 8, 8, 1, 1, ConvAttrs({0, 0, 0, 0}, {1, 1}, group), "conv_1x1");
    Value* sum = b.Op("Add", {k3, k1});
    b.Output(b.Op("Add", {sum, RandomBatchNorm(b, x, 8, "identity")}));
    ExpectOneConv(b.Finish(), {3, 3}, {1, 1, 1, 1});
  }
}

// The downsampling block: both branches strided, no identity.
TEST(ConvBranchMergingTest, StridedBranchesMerge) {
  GraphBuilder b;
  Value* x = b.Input("x", {1, 4, 11, 12});
  Value* k3 = RandomConv(b, x, 6, 4, 3, 3, ConvAttrs({1, 1, 1, 1}, {2, 2}), "k3");
  Value* k1 = RandomConv(b, x, 6, 4, 1, 1, ConvAttrs({0, 0, 0, 0}, {2, 2}), "k1");
  b.Output(b.Op("Add", {k1, k3}));
  // The 12 columns need no end pad for 6 outputs at stride 2.
  ExpectOneConv(b.Finish(), {3, 3}, {1, 1, 1, 0});
}

// A residual whose conv reads the residual itself, and ACNet's 3x3 + 1x3 +
// 3x1 (the 1x3 and 3x1 inside the 3x3's window).
TEST(ConvBranchMergingTest, IdentityAndAsymmetricBranchesMerge) {
  {
    GraphBuilder b;
    Value* x = b.Input("x", {1, 5, 7, 7});
    b.Output(b.Op("Add", {x, RandomConv(b, x, 5, 5, 3, 3, ConvAttrs({1, 1, 1, 1}), "k3")}));
    ExpectOneConv(b.Finish(), {3, 3}, {1, 1, 1, 1});
  }
  GraphBuilder b;
  Value* x = b.Input("x", {1, 3, 8, 8});
  Value* sq = RandomConv(b, x, 4, 3, 3, 3, ConvAttrs({1, 1, 1, 1}), "k33");
  Value* hor = RandomConv(b, x, 4, 3, 1, 3, ConvAttrs({0, 1, 0, 1}), "k13");
  Value* ver = RandomConv(b, x, 4, 3, 3, 1, ConvAttrs({1, 0, 1, 0}), "k31");
  b.Output(b.Op("Add", {b.Op("Add", {sq, hor}), ver}));
  ExpectOneConv(b.Finish(), {3, 3}, {1, 1, 1, 1});
}

TEST(ConvBranchMergingTest, LeavesBranchesOneConvCannotSum) {
  struct Case {
    const char* why;
    std::function<void(GraphBuilder&, Value*)> build;  // x is [1, 4, 8, 8]
  };
  const std::vector<Case> cases = {
      {"a 1x3 and a 3x1 would cost a 3x3",
       [](GraphBuilder& b, Value* x) {
         b.Output(b.Op("Add", {RandomConv(b, x, 4, 4, 1, 3, ConvAttrs({0, 1, 0, 1}), "h"),
                               RandomConv(b, x, 4, 4, 3, 1, ConvAttrs({1, 0, 1, 0}), "v")}));
       }},
      {"other inputs",
       [](GraphBuilder& b, Value* x) {
         Value* x2 = b.Op("Relu", {x});
         b.Output(b.Op("Add", {RandomConv(b, x, 4, 4, 3, 3, ConvAttrs({1, 1, 1, 1}), "a"),
                               RandomConv(b, x2, 4, 4, 1, 1, ConvAttrs({0, 0, 0, 0}), "b")}));
       }},
      {"a branch read twice",
       [](GraphBuilder& b, Value* x) {
         Value* k1 = RandomConv(b, x, 4, 4, 1, 1, ConvAttrs({0, 0, 0, 0}), "b");
         b.Output(b.Op("Add", {RandomConv(b, x, 4, 4, 3, 3, ConvAttrs({1, 1, 1, 1}), "a"), k1}));
         b.Output(b.Op("Relu", {k1}));
       }},
      {"groups differ",
       [](GraphBuilder& b, Value* x) {
         b.Output(b.Op("Add", {RandomConv(b, x, 4, 4, 3, 3, ConvAttrs({1, 1, 1, 1}, {1, 1}, 2), "a"),
                               RandomConv(b, x, 4, 4, 1, 1, ConvAttrs({0, 0, 0, 0}), "b")}));
       }},
      {"windows off the dilated grid",
       [](GraphBuilder& b, Value* x) {
         b.Output(b.Op("Add", {RandomConv(b, x, 4, 4, 3, 3, ConvAttrs({2, 2, 2, 2}, {1, 1}, 1, {2, 2}), "a"),
                               RandomConv(b, x, 4, 4, 2, 2, ConvAttrs({1, 1, 1, 1}, {1, 1}, 1, {2, 2}), "b")}));
       }},
      {"a per-channel map alone", [](GraphBuilder& b, Value* x) {
         b.Output(b.Op("Add", {x, RandomBatchNorm(b, x, 4, "bn")}));
       }}};
  for (const Case& c : cases) {
    GraphBuilder b;
    c.build(b, b.Input("x", {1, 4, 8, 8}));
    auto g = b.Finish();
    const std::string before = g->ToText();
    EXPECT_FALSE(Merge(*g)) << c.why << "\n" << g->ToText();
    EXPECT_EQ(g->ToText(), before) << c.why;
  }
}

}  // namespace
}  // namespace kiln
