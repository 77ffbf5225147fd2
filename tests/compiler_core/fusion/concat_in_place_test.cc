// Concats placed in place: which lone Concat groups go, and the views that
// replace them, read from the partition's textual dump.
#include "compiler_core/fusion/concat_in_place.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/fusion/partitioner.h"

namespace kiln {
namespace {

// A graph of Relu branches off one input, joined by Concats; one group per
// node (no fusion), as a partition of convolutions and their Concats is.
class ConcatGraph {
 public:
  ConcatGraph() { x_ = *g_.AddInput("x", TensorType::Static(DType::kFloat32, {1, 16, 2, 2})); }

  // Relu of the input, `channels` of them (16 channels are 256 bytes).
  Value* Branch(const std::string& name, int64_t channels = 16) {
    Value* in = x_;
    if (channels != 16) {
      Value* starts = *g_.AddConstant(name + "_s", Tensor::FromVector<int64_t>(DType::kInt64, {1}, {0}));
      Value* ends = *g_.AddConstant(name + "_e", Tensor::FromVector<int64_t>(DType::kInt64, {1}, {channels}));
      Value* axes = *g_.AddConstant(name + "_a", Tensor::FromVector<int64_t>(DType::kInt64, {1}, {1}));
      in = Add("Slice", name + "_slice", {x_, starts, ends, axes}, {1, channels, 2, 2});
    }
    return Add("Relu", name, {in}, {1, channels, 2, 2});
  }
  Value* Concat(const std::string& name, std::vector<Value*> ins, int64_t axis = 1) {
    std::vector<int64_t> dims = ins[0]->type().StaticDims();
    dims[axis] = 0;
    for (Value* v : ins) dims[axis] += v->type().StaticDims()[axis];
    return Add("Concat", name, std::move(ins), dims, {{"axis", axis}});
  }
  // A reader of `v`, so that it is no dead end.
  Value* Read(const std::string& name, Value* v) { return Add("Sigmoid", name, {v}, v->type().StaticDims()); }
  void Output(Value* v) { g_.AddOutput(v); }
  Value* input() { return x_; }

  std::string Placed() {
    FusionOptions options;
    options.fuse = false;
    options.classify = LoweringKind;
    options.view_alignment = 64;
    auto p = PartitionGraph(g_, options);
    EXPECT_TRUE(p.ok()) << p.status();
    // Every group is numbered in order after the removals.
    for (size_t i = 0; i < p->groups.size(); ++i) EXPECT_EQ(p->groups[i].index, static_cast<int>(i));
    std::string concats, views;
    for (const FusionGroup& group : p->groups) {
      if (group.nodes[0]->op_type() == "Concat") concats += group.nodes[0]->name() + " ";
    }
    const std::string text = p->ToText();
    return "kept: " + concats + "\n" + text.substr(text.find("view") == std::string::npos ? text.size()
                                                                                              : text.find("view"));
  }

 private:
  Value* Add(const std::string& op, const std::string& name, std::vector<Value*> ins, std::vector<int64_t> dims,
             std::map<std::string, AttrValue> attrs = {}) {
    Value* out = *g_.AddValue(name + "_out", TensorType::Static(DType::kFloat32, dims));
    EXPECT_TRUE(g_.AddNode(op, name, std::move(ins), {out}, std::move(attrs)).ok());
    return out;
  }

  Graph g_;
  Value* x_;
};

TEST(ConcatInPlaceTest, BranchesAreWrittenIntoTheConcatsOutput) {
  ConcatGraph g;
  Value* y = g.Concat("cat", {g.Branch("a"), g.Branch("b", 32)});
  g.Output(g.Read("use", y));
  EXPECT_EQ(g.Placed(),
            "kept: \n"
            "view %a_out in %cat_out at byte 0\n"
            "view %b_out in %cat_out at byte 256\n");
}

// A Concat of a Concat: the inner output is a view itself, its inputs views
// into it (offsets relative to it).
TEST(ConcatInPlaceTest, NestedConcatsChainTheirViews) {
  ConcatGraph g;
  Value* inner = g.Concat("inner", {g.Branch("a"), g.Branch("b")});
  Value* outer = g.Concat("outer", {g.Branch("c"), inner});
  g.Output(g.Read("use", outer));
  EXPECT_EQ(g.Placed(),
            "kept: \n"
            "view %c_out in %outer_out at byte 0\n"
            "view %inner_out in %outer_out at byte 256\n"
            "view %a_out in %inner_out at byte 0\n"
            "view %b_out in %inner_out at byte 256\n");
}

// DenseNet's growing concatenations of the same feature maps: the largest
// takes them, the smaller ones are its leading runs. One in another order
// cannot be, and stays a kernel.
TEST(ConcatInPlaceTest, ConcatsOfSharedInputsBecomeRunsOfTheLargest) {
  ConcatGraph g;
  Value* a = g.Branch("a");
  Value* b = g.Branch("b");
  Value* c = g.Branch("c");
  g.Output(g.Read("use2", g.Concat("cat2", {a, b})));
  g.Output(g.Read("use_ba", g.Concat("cat_ba", {b, a})));
  g.Output(g.Read("use3", g.Concat("cat3", {a, b, c})));
  EXPECT_EQ(g.Placed(),
            "kept: cat_ba \n"
            "view %a_out in %cat3_out at byte 0\n"
            "view %b_out in %cat3_out at byte 256\n"
            "view %c_out in %cat3_out at byte 512\n"
            "view %cat2_out in %cat3_out at byte 0\n");
}

TEST(ConcatInPlaceTest, ConcatsThatCannotBeViewsStayKernels) {
  ConcatGraph g;
  // A slice 12 bytes long: the next would start off the alignment.
  g.Output(g.Read("u1", g.Concat("misaligned", {g.Branch("a", 3), g.Branch("b")})));
  // A graph input among the inputs.
  g.Output(g.Read("u2", g.Concat("with_input", {g.Branch("c"), g.input()})));
  // The same value twice.
  Value* d = g.Branch("d");
  g.Output(g.Read("u3", g.Concat("twice", {d, d})));
  // The output is a graph output.
  g.Output(g.Concat("is_output", {g.Branch("e"), g.Branch("f")}));
  // An input is a graph output.
  Value* h = g.Branch("h");
  g.Output(h);
  g.Output(g.Read("u5", g.Concat("input_is_output", {g.Branch("i"), h})));
  // Slices that are not contiguous: along the last axis of a 4-D tensor.
  g.Output(g.Read("u6", g.Concat("last_axis", {g.Branch("j"), g.Branch("k")}, 3)));
  EXPECT_EQ(g.Placed(), "kept: misaligned with_input twice is_output input_is_output last_axis \n");
}

}  // namespace
}  // namespace kiln
