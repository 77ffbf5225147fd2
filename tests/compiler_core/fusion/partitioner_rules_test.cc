// The fusion rules on small graphs: loop fusion with fan-in and fan-out,
// reduction fusion, anchor epilogues, data movement as index arithmetic,
// recompute on fan-out, views of group inputs computed by every reader, splitting by the code generator's verdict, shared
// workload keys. Every
// partition is also evaluated group by group against the whole graph.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <tuple>

#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/frontend/interpreter.h"
#include "compiler_core/frontend/shape_inference.h"
#include "compiler_core/fusion/partitioner.h"
#include "compiler_core/fusion/workload.h"
#include "tests/compiler_core/fusion/partition_evaluation.h"

namespace kiln {
namespace {

// Builds graphs tersely: values are typed by shape inference at Finish().
class Builder {
 public:
  Value* Input(const std::string& name, std::vector<int64_t> dims) {
    return *g_->AddInput(name, TensorType::Static(DType::kFloat32, dims));
  }
  Value* Const(const std::string& name, std::vector<int64_t> dims, float scale = 0.1f) {
    Tensor t(DType::kFloat32, dims);
    for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = scale * static_cast<float>((i * 7) % 11 - 5);
    return *g_->AddConstant(name, std::move(t));
  }
  Value* Ints(const std::string& name, std::vector<int64_t> v) {
    return *g_->AddConstant(name, Tensor::FromVector(DType::kInt64, {static_cast<int64_t>(v.size())}, v));
  }
  Value* Op(const std::string& op, const std::string& name, std::vector<Value*> ins,
            std::map<std::string, AttrValue> attrs = {}) {
    Value* out = *g_->AddValue(name);
    EXPECT_TRUE(g_->AddNode(op, name, std::move(ins), {out}, std::move(attrs)).ok()) << name;
    return out;
  }
  std::unique_ptr<Graph> Finish(std::vector<Value*> outputs) {
    for (Value* v : outputs) g_->AddOutput(v);
    absl::Status s = InferShapes(*g_);
    EXPECT_TRUE(s.ok()) << s;
    return std::move(g_);
  }

 private:
  std::unique_ptr<Graph> g_ = std::make_unique<Graph>();
};

std::vector<std::string> Kinds(const Partition& p) {
  std::vector<std::string> k;
  for (const FusionGroup& g : p.groups) k.push_back(g.kind);
  return k;
}

// Under the code generator's constraint, whose lowering kinds name the groups.
FusionOptions CodegenOptions() {
  FusionOptions options;
  options.classify = LoweringKind;
  return options;
}

// The code generator's verdict, limited to groups of at most `n` nodes.
FusionOptions AtMostNodes(size_t n) {
  FusionOptions options;
  options.classify = [n](const Graph& w) -> std::optional<std::string> {
    if (w.nodes().size() > n) return std::nullopt;
    return LoweringKind(w);
  };
  return options;
}

// Partitions, then checks the group-by-group evaluation against the graph's.
Partition PartitionAndCheck(const Graph& g, const FusionOptions& options = CodegenOptions()) {
  auto p = PartitionGraph(g, options);
  EXPECT_TRUE(p.ok()) << p.status();
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  std::map<std::string, Tensor> inputs;
  for (const Value* v : g.inputs()) {
    Tensor t(DType::kFloat32, v->type().StaticDims());
    for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = normal(rng);
    inputs.emplace(v->name(), std::move(t));
  }
  auto want = Evaluate(g, inputs);
  EXPECT_TRUE(want.ok()) << want.status();
  auto got = testing::EvaluatePartitioned(g, *p, inputs);
  EXPECT_TRUE(got.ok()) << got.status() << "\n" << p->ToText();
  if (want.ok() && got.ok()) {
    for (size_t i = 0; i < g.outputs().size(); ++i) {
      EXPECT_LE(testing::MaxAbsDiff((*got)[i], want->at(g.outputs()[i]->name())), 1e-5) << i;
    }
  }
  return *std::move(p);
}

TEST(FusionRulesTest, ElementwiseChainWithFanInAndFanOutIsOneGroup) {
  Builder b;
  Value* x = b.Input("x", {4, 8});
  Value* bias = b.Const("bias", {8});
  Value* a = b.Op("Exp", "a", {x});
  Value* s = b.Op("Add", "s", {a, x});       // fan-in of x and a
  Value* t = b.Op("Add", "t", {s, bias});    // broadcast
  Value* y1 = b.Op("Relu", "y1", {t});
  Value* y2 = b.Op("Mul", "y2", {a, a});     // a fans out
  auto g = b.Finish({y1, y2});
  Partition p = PartitionAndCheck(*g);
  ASSERT_EQ(p.groups.size(), 1u) << p.ToText();
  EXPECT_EQ(p.groups[0].kind, "elementwise");
  EXPECT_EQ(p.groups[0].outputs.size(), 2u);
  EXPECT_LT(p.bytes_fused, p.bytes_unfused);
}

TEST(FusionRulesTest, DecomposedSoftmaxIsOneReductionGroup) {
  Builder b;
  Value* x = b.Input("x", {4, 16});
  Value* axes = b.Ints("axes", {1});
  Value* m = b.Op("ReduceMax", "max", {x, axes}, {{"keepdims", int64_t{1}}});
  Value* d = b.Op("Sub", "sub", {x, m});
  Value* e = b.Op("Exp", "exp", {d});
  Value* s = b.Op("ReduceSum", "sum", {e, axes}, {{"keepdims", int64_t{1}}});
  Value* y = b.Op("Div", "div", {e, s});
  Value* z = b.Op("Relu", "relu", {y});  // a consumer after the reduction
  auto g = b.Finish({z});
  Partition p = PartitionAndCheck(*g);
  ASSERT_EQ(p.groups.size(), 1u) << p.ToText();
  EXPECT_EQ(p.groups[0].kind, "reduction");
  EXPECT_EQ(p.groups[0].nodes.size(), 6u);
}

TEST(FusionRulesTest, ConvTakesBiasActivationResidualAndClipAsEpilogue) {
  Builder b;
  Value* x = b.Input("x", {1, 4, 6, 6});
  Value* skip = b.Input("skip", {1, 4, 6, 6});
  Value* w = b.Const("w", {4, 4, 3, 3});
  Value* c = b.Op("Conv", "conv", {x, w}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  Value* bias = b.Const("bias", {1, 4, 1, 1});
  Value* cb = b.Op("Add", "bias_add", {c, bias});
  Value* r = b.Op("Relu", "relu", {cb});
  Value* sum = b.Op("Add", "residual", {r, skip});
  Value* lo = b.Const("lo", {});
  Value* hi = b.Const("hi", {}, 6.0f);
  Value* y = b.Op("Clip", "clip", {sum, lo, hi});
  Value* pooled = b.Op("GlobalAveragePool", "gap", {y});
  auto g = b.Finish({pooled});
  Partition p = PartitionAndCheck(*g);
  EXPECT_EQ(Kinds(p), (std::vector<std::string>{"conv", "reduction"})) << p.ToText();
  ASSERT_NE(p.groups[0].anchor, nullptr);
  EXPECT_EQ(p.groups[0].anchor->name(), "conv");
  EXPECT_EQ(p.groups[0].nodes.size(), 5u);
}

// An inverted residual block: the 1x1 expansion, its activation, the
// depthwise conv and its activation are one conv_pair group when the
// expanded tensor is at least min_conv_pair_bytes (then it never goes to
// memory); below, or when the expansion is also read elsewhere, two conv
// groups.
TEST(FusionRulesTest, ExpansionAndDepthwiseConvFuseWhenTheExpansionIsLarge) {
  auto block = [](int64_t hw, bool expansion_also_read) {
    Builder b;
    Value* x = b.Input("x", {1, 4, hw, hw});
    Value* e = b.Op("Conv", "expand", {x, b.Const("w1", {16, 4, 1, 1}), b.Const("b1", {16})});
    Value* r = b.Op("Relu", "relu1", {e});
    Value* d = b.Op(
        "Conv", "dw", {r, b.Const("w2", {16, 1, 3, 3}), b.Const("b2", {16})},
        {{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"strides", std::vector<int64_t>{2, 2}}, {"group", int64_t{16}}});
    Value* y = b.Op("HardSwish", "act2", {d});
    std::vector<Value*> outs = {y};
    if (expansion_also_read) outs.push_back(b.Op("Sigmoid", "side", {r}));
    return b.Finish(outs);
  };
  FusionOptions small = CodegenOptions();
  small.cost.min_conv_pair_bytes = 16 * 32 * 32 * 4;  // the 32x32 block's expansion, exactly
  std::unique_ptr<Graph> g = block(32, false);        // outlives the partition's node pointers
  Partition fused = PartitionAndCheck(*g, small);
  ASSERT_EQ(Kinds(fused), (std::vector<std::string>{"conv_pair"})) << fused.ToText();
  EXPECT_EQ(fused.groups[0].nodes.size(), 4u);
  EXPECT_EQ(fused.groups[0].anchor->name(), "dw");
  Partition below = PartitionAndCheck(*block(30, false), small);
  EXPECT_EQ(Kinds(below), (std::vector<std::string>{"conv", "conv"})) << below.ToText();
  Partition shared = PartitionAndCheck(*block(32, true), small);
  for (const FusionGroup& g : shared.groups) EXPECT_NE(g.kind, "conv_pair") << shared.ToText();
  // The default threshold (1 MiB) takes a 64-channel 112x112 expansion.
  EXPECT_GE(16.0 * 4 * 112 * 112 * 4, FusionOptions().cost.min_conv_pair_bytes);
}

// A pointwise conv that reduces over many channels of a large input (the
// pair kernel would run in bands of rows, expanding each band's halo rows
// twice) stays apart from its depthwise conv; a short reduction over the
// same input, or a long one over an input that stays whole, pairs.
TEST(FusionRulesTest, LongReductionsOverLargeInputsStayOutOfConvPairs) {
  auto block = [](int64_t c, int64_t k, int64_t hw) {
    Builder b;
    Value* x = b.Input("x", {1, c, hw, hw});
    Value* e = b.Op("Conv", "expand", {x, b.Const("w1", {k, c, 1, 1}), b.Const("b1", {k})});
    Value* r = b.Op("Relu", "relu1", {e});
    Value* d = b.Op("Conv", "dw", {r, b.Const("w2", {k, 1, 3, 3})},
                    {{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"group", k}});
    return b.Finish({d});
  };
  const FusionCostOptions cost = FusionOptions().cost;
  // keras Xception's 128 -> 256 on 39x39: 779 KB of input, 128 channels.
  ASSERT_GT(128.0 * 39 * 39 * 4, cost.long_conv_pair_input_bytes);
  ASSERT_GT(128, cost.long_conv_pair_reduction);
  std::unique_ptr<Graph> xception = block(128, 256, 39);
  Partition apart = PartitionAndCheck(*xception, CodegenOptions());
  EXPECT_EQ(Kinds(apart), (std::vector<std::string>{"conv", "conv"})) << apart.ToText();
  // MobileNetV2's 16 -> 96 on 112x112 and Xception's 256 -> 728 on 20x20.
  for (auto [c, k, hw] : {std::tuple<int64_t, int64_t, int64_t>{16, 96, 112}, {256, 728, 20}}) {
    std::unique_ptr<Graph> g = block(c, k, hw);
    Partition paired = PartitionAndCheck(*g, CodegenOptions());
    EXPECT_EQ(Kinds(paired), (std::vector<std::string>{"conv_pair"})) << paired.ToText();
  }
}

TEST(FusionRulesTest, TransposeIsIndexArithmeticOfItsMatMulAndRecomputedOnFanOut) {
  Builder b;
  Value* x = b.Input("x", {8, 16});
  Value* w = b.Input("w", {4, 16});
  Value* xt = b.Op("Transpose", "xt", {x}, {{"perm", std::vector<int64_t>{1, 0}}});  // [16, 8]
  Value* m1 = b.Op("MatMul", "m1", {w, xt});  // [4, 16] x [16, 8]
  Value* w2 = b.Const("w2", {8, 4});
  Value* m2 = b.Op("MatMul", "m2", {xt, w2});  // and again
  auto g = b.Finish({m1, m2});
  // The fusion rule alone (no code generator verdict).
  Partition p = PartitionAndCheck(*g, FusionOptions{});
  ASSERT_EQ(p.groups.size(), 2u) << p.ToText();
  for (const FusionGroup& grp : p.groups) {
    ASSERT_NE(grp.anchor, nullptr);
    EXPECT_EQ(grp.anchor->op_type(), "MatMul");
    EXPECT_EQ(grp.nodes.size(), 2u);
    ASSERT_EQ(grp.recomputed.size(), 1u);
    EXPECT_EQ(grp.recomputed[0]->name(), "xt");
  }
  // The matmul lowering reads its operands as stored, so under its verdict
  // the Transpose is a group of its own, written once.
  p = PartitionAndCheck(*g);
  EXPECT_EQ(Kinds(p), (std::vector<std::string>{"data_movement", "matmul", "matmul"})) << p.ToText();
}

// ResNeSt's radix split: a conv's output reshaped into two halves, summed
// over them, and the halves read again by a later product. The sum's group
// reads the reshape of its input; the product's group computes the reshape
// too instead of reading a copy the sum's group wrote.
TEST(FusionRulesTest, AViewOfAGroupInputIsComputedByEveryGroupReadingIt) {
  Builder b;
  Value* x = b.Input("x", {1, 8, 6, 6});
  Value* w = b.Const("w", {16, 8, 1, 1});
  Value* c = b.Op("Conv", "conv", {x, w});  // [1, 16, 6, 6]
  Value* r = b.Op("Relu", "relu", {c});
  Value* halves = b.Op("Reshape", "view", {r, b.Ints("shape", {1, 2, 8, 6, 6})});
  Value* sum = b.Op("ReduceSum", "sum", {halves, b.Ints("axes", {1})}, {{"keepdims", int64_t{0}}});
  Value* att = b.Op("Sigmoid", "att", {b.Op("ReduceMean", "gap", {sum, b.Ints("hw", {2, 3})})});  // [1, 8, 1, 1]
  Value* prod = b.Op("Mul", "prod", {halves, att});
  Value* y = b.Op("ReduceSum", "sum2", {prod, b.Ints("axes2", {1})}, {{"keepdims", int64_t{0}}});
  auto g = b.Finish({y});
  Partition p = PartitionAndCheck(*g);
  int computing_view = 0;
  for (const FusionGroup& grp : p.groups) {
    for (const Value* v : grp.outputs) EXPECT_NE(v->name(), "view") << p.ToText();
    for (const Node* n : grp.nodes) computing_view += n->name() == "view" ? 1 : 0;
  }
  EXPECT_EQ(computing_view, 2) << p.ToText();
}

TEST(FusionRulesTest, CodegenVerdictSplitsGroupsDownToSingleNodes) {
  Builder b;
  Value* x = b.Input("x", {4, 8});
  Value* w = b.Const("w", {8, 8});
  Value* m = b.Op("MatMul", "mm", {x, w});
  Value* r = b.Op("Relu", "relu", {m});
  Value* s = b.Op("Sigmoid", "sig", {r});
  auto g = b.Finish({s});
  Partition p = PartitionAndCheck(*g, AtMostNodes(1));
  EXPECT_EQ(Kinds(p), (std::vector<std::string>{"matmul", "elementwise", "elementwise"}));
  p = PartitionAndCheck(*g, AtMostNodes(2));
  EXPECT_EQ(Kinds(p), (std::vector<std::string>{"matmul", "elementwise"}));
  EXPECT_EQ(p.groups[0].nodes.size(), 2u);
  p = PartitionAndCheck(*g);
  EXPECT_EQ(Kinds(p), (std::vector<std::string>{"matmul"}));
}

TEST(FusionRulesTest, SameGroupTwiceIsOneWorkload) {
  Builder b;
  Value* x = b.Input("x", {4, 8});
  Value* w1 = b.Const("w1", {8, 8});
  Value* w2 = b.Const("w2", {8, 8}, 0.3f);
  Value* h1 = b.Op("Relu", "r1", {b.Op("MatMul", "m1", {x, w1})});
  Value* h2 = b.Op("Relu", "r2", {b.Op("MatMul", "m2", {h1, w2})});
  auto g = b.Finish({h2});
  Partition p = PartitionAndCheck(*g);
  ASSERT_EQ(p.groups.size(), 2u);
  auto a = ExtractWorkload(*g, p.groups[0]);
  auto c = ExtractWorkload(*g, p.groups[1]);
  ASSERT_TRUE(a.ok() && c.ok());
  EXPECT_EQ(a->key, c->key) << a->canonical_text << c->canonical_text;
  EXPECT_EQ(a->op_summary, "MatMul+Relu");
}

TEST(FusionRulesTest, NoFusionOptionGivesOneGroupPerNode) {
  Builder b;
  Value* x = b.Input("x", {4});
  Value* y = b.Op("Relu", "r", {b.Op("Exp", "e", {x})});
  auto g = b.Finish({y});
  FusionOptions none = CodegenOptions();
  none.fuse = false;
  EXPECT_EQ(PartitionAndCheck(*g, none).groups.size(), 2u);
}

}  // namespace
}  // namespace kiln
