// The compile driver's fail-fast check: a model whose groups cannot all be
// built is refused before any tuning, in the model's node names, every
// failing group listed once.
#include "compiler_core/driver/compile_driver.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "compiler_core/codegen/schedule_space.h"
#include "tests/compiler_core/passes/pass_test_support.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using testing::GraphBuilder;

TEST(CompileDriverTest, ZeroExtentFailsBeforeTuningNamingTheModelsNode) {
  GraphBuilder b;
  Value* x = b.Input("x", {0, 64});
  Value* w = b.Const("w", {64, 32}, std::vector<float>(64 * 32, 1.f));
  Value* y = b.Op("MatMul", {x, w}, {}, "y");
  b.Output(y);
  auto g = b.Finish();
  auto prepared = PrepareModel(std::move(g));
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  absl::Status s = CheckCompilable(*prepared, CpuTarget::Host());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("unsupported: group 0 [node 'MatMul_y' (MatMul)]: node 'MatMul_y': empty matmul"));
}

TEST(CompileDriverTest, CompilableModelPassesTheCheck) {
  GraphBuilder b;
  Value* x = b.Input("x", {4, 64});
  Value* w = b.Const("w", {64, 32}, std::vector<float>(64 * 32, 1.f));
  b.Output(b.Op("Relu", {b.Op("MatMul", {x, w})}, {}, "y"));
  auto prepared = PrepareModel(b.Finish());
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  EXPECT_TRUE(CheckCompilable(*prepared, CpuTarget::Host()).ok());
}

// A group norm as torch exports it (Reshape, InstanceNormalization,
// Reshape, then the affine Mul and Add), as in FCOS's heads: fused whole,
// its normalized values would be an intermediate of 64 KiB, which a GPU
// block's shared memory cannot hold, and no schedule of that workload
// fits. The GPU's partition groups it otherwise and every group builds.
TEST(CompileDriverTest, AGpuGroupWhoseIntermediatesOverflowSharedMemoryIsGroupedOtherwise) {
  GraphBuilder b;
  Value* x = b.Input("x", {1, 256, 8, 8});
  Value* grouped = b.Op("Reshape", {x, b.Ints("grouped", {1, 32, -1})});
  Value* norm = b.Op("InstanceNormalization", {grouped, b.Const("ones", {32}, std::vector<float>(32, 1.f)),
                                               b.Const("zeros", {32}, std::vector<float>(32, 0.f))},
                     {{"epsilon", AttrValue(1e-5f)}});
  Value* back = b.Op("Reshape", {norm, b.Ints("back", {1, 256, 8, 8})});
  Value* scaled = b.Op("Mul", {back, b.Random("gamma", {256, 1, 1})});
  b.Output(b.Op("Relu", {b.Op("Add", {scaled, b.Random("beta", {256, 1, 1})})}, {}, "y"));
  const Target gpu(GpuTarget{90});
  auto prepared = PrepareModel(b.Finish(), PrepareOptionsFor(gpu));
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  EXPECT_TRUE(CheckCompilable(*prepared, gpu).ok()) << CheckCompilable(*prepared, gpu);
  for (const Workload& w : prepared->workloads) {
    EXPECT_FALSE(EnumerateSchedules(*w.graph, gpu).empty()) << w.key;
  }
}

// An inverted residual block's expansion and depthwise conv are one
// conv_pair group for a CPU of 32 vector registers; with 16 (AVX2) the
// fused kernel spills and loses to the two convs apart, so each conv is a
// group of its own, its activation with it.
TEST(CompileDriverTest, ConvPairsOnlyWhereTheTargetHas32VectorRegisters) {
  auto block = [] {
    GraphBuilder b;
    Value* x = b.Input("x", {1, 16, 112, 112});
    Value* e = b.Op("Conv", {x, b.Random("w1", {96, 16, 1, 1}), b.Random("b1", {96})}, {}, "expand");
    Value* r = b.Op("Relu", {e}, {}, "act");
    b.Output(b.Op("Conv", {r, b.Random("w2", {96, 1, 3, 3})},
                  {{"pads", AttrValue(std::vector<int64_t>{1, 1, 1, 1})}, {"group", AttrValue(int64_t{96})}}, "dw"));
    return b.Finish();
  };
  auto kinds = [&](const std::string& cpu) {
    absl::StatusOr<Target> target = Target::Named(cpu);
    EXPECT_TRUE(target.ok()) << target.status();
    std::vector<std::string> out;
    if (!target.ok()) return out;
    auto prepared = PrepareModel(block(), PrepareOptionsFor(*target));
    EXPECT_TRUE(prepared.ok()) << prepared.status();
    if (!prepared.ok()) return out;
    for (const FusionGroup& g : prepared->partition.groups) out.push_back(g.kind);
    return out;
  };
  EXPECT_THAT(kinds("cpu:znver4"), ::testing::ElementsAre("conv_pair"));
  EXPECT_THAT(kinds("cpu:znver3"), ::testing::ElementsAre("conv", "conv"));
}

// Where conv pairs are off, the pointwise convs' weights are blocked
// (kiln.BlockedConv, chunked by input channel); where they may pair, the
// pointwise conv stays a Conv.
TEST(CompileDriverTest, PointwiseWeightsBlockedWhereConvPairsAreOff) {
  auto ops = [](const std::string& cpu) {
    GraphBuilder b;
    Value* x = b.Input("x", {1, 512, 14, 14});
    b.Output(b.Op("Relu", {b.Op("Conv", {x, b.Random("w", {64, 512, 1, 1}), b.Random("b", {64})}, {}, "pw")}));
    absl::StatusOr<Target> target = Target::Named(cpu);
    EXPECT_TRUE(target.ok()) << target.status();
    std::string out;
    if (!target.ok()) return out;
    auto prepared = PrepareModel(b.Finish(), PrepareOptionsFor(*target));
    EXPECT_TRUE(prepared.ok()) << prepared.status();
    if (!prepared.ok()) return out;
    for (const auto& n : prepared->graph->nodes()) {
      absl::StrAppend(&out, out.empty() ? "" : ",", n->op_type());
      if (n->op_type() == "BlockedConv") {
        EXPECT_EQ(n->input(1)->type().StaticDims(), (std::vector<int64_t>{4, 16, 128, 1, 1, 4}));
      }
    }
    return out;
  };
  EXPECT_EQ(ops("cpu:znver3"), "BlockedConv,Relu");
  EXPECT_EQ(ops("cpu:znver4"), "Conv,Relu");
}

}  // namespace
}  // namespace kiln
