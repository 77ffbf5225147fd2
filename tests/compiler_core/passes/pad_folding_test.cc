// Pad folding: which zero Pads become their Convs' padding (the interpreter's
// numbers unchanged, the Pad gone) and which stay.
#include "compiler_core/passes/pad_folding.h"

#include <gtest/gtest.h>

#include "compiler_core/passes/dead_code_elimination.h"
#include "tests/compiler_core/passes/pass_test_support.h"

namespace kiln {
namespace {

using testing::GraphBuilder;

struct Case {
  std::vector<int64_t> pads = {0, 0, 0, 1, 0, 0, 1, 1};  // Keras' ZeroPadding2D(((0, 1), (0, 1))) is {.., 0, 0, 1, 1}
  float value = 0;
  std::string mode = "constant";
  std::map<std::string, AttrValue> conv = {{"strides", std::vector<int64_t>{2, 2}}, {"group", int64_t{8}}};
  bool second_reader_is_relu = false;
  bool two_convs = false;
};

std::unique_ptr<Graph> Build(const Case& c) {
  GraphBuilder b;
  Value* x = b.Input("x", {1, 8, 9, 10});
  std::vector<Value*> pad_in = {x, b.Ints("pads", c.pads)};
  if (c.value != 0) pad_in.push_back(b.Scalar("value", c.value));
  Value* p = b.Op("Pad", pad_in, {{"mode", c.mode}}, "pad");
  const int64_t group = std::get<int64_t>(c.conv.at("group"));
  Value* y = b.Op("Conv", {p, b.Random("w", {8, 8 / group, 3, 3}), b.Random("b", {8})}, c.conv, "conv");
  b.Output(y);
  if (c.two_convs) {
    b.Output(b.Op("Conv", {p, b.Random("w2", {4, 8, 1, 1})}, {{"pads", std::vector<int64_t>{1, 0, 0, 1}}}, "conv2"));
  }
  if (c.second_reader_is_relu) b.Output(b.Op("Relu", {p}, {}, "relu"));
  return b.Finish();
}

bool Fold(Graph& g) {
  PassPipeline p("pad_folding");
  p.Add(std::make_unique<PadFolding>()).Add(std::make_unique<DeadCodeElimination>());
  return testing::RunPasses(g, p);
}

TEST(PadFoldingTest, ZeroPadBecomesConvPadding) {
  for (const Case& c : {Case{}, Case{.pads = {0, 0, 2, 1, 0, 0, 0, 3}, .conv = {{"group", int64_t{1}},
                                                                                {"pads", std::vector<int64_t>{1, 1, 1, 1}}}},
                        Case{.conv = {{"group", int64_t{1}}, {"auto_pad", std::string("VALID")}}},
                        Case{.two_convs = true}}) {
    auto g = Build(c);
    auto original = g->Clone();
    ASSERT_TRUE(Fold(*g)) << g->ToText();
    EXPECT_EQ(testing::OpSequence(*g), c.two_convs ? "Conv,Conv" : "Conv") << g->ToText();
    testing::ExpectSameOutputs(*original, *g, 1e-5);
  }
  // The pads add up: {1,1,1,1} + pad (2,0 | 1,3) on H and W.
  auto g = Build({.pads = {0, 0, 2, 1, 0, 0, 0, 3},
                  .conv = {{"group", int64_t{1}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}}});
  ASSERT_TRUE(Fold(*g));
  for (const auto& n : g->nodes()) {
    if (n->op_type() == "Conv") EXPECT_EQ(n->GetInts("pads", {}), (std::vector<int64_t>{3, 2, 1, 4}));
  }
}

TEST(PadFoldingTest, LeavesWhatConvPaddingCannotExpress) {
  for (const Case& c : {Case{.value = 1.5f}, Case{.mode = "reflect"}, Case{.pads = {1, 0, 0, 1, 0, 0, 0, 1}},
                        Case{.pads = {0, 0, -1, 1, 0, 0, 1, 1}}, Case{.second_reader_is_relu = true},
                        Case{.conv = {{"group", int64_t{1}}, {"auto_pad", std::string("SAME_UPPER")}}}}) {
    auto g = Build(c);
    EXPECT_FALSE(Fold(*g)) << g->ToText();
    EXPECT_NE(testing::OpSequence(*g).find("Pad"), std::string::npos);
  }
}

}  // namespace
}  // namespace kiln
