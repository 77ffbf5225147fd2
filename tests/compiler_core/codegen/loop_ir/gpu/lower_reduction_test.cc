// GPU lowering of the reduction kind: every point of its GPU space against
// the reference interpreter (through the CPU emulation) and assembled by
// ptxas for sm_80 and sm_90, on rows of 1, 7, 33 and 1000+ elements, axes
// in every position, keepdims on and off, batches, fused producers and
// consumers; the loop IR of the defaults; refused knobs.
#include "compiler_core/codegen/loop_ir/gpu/lower_reduction.h"
#include "compiler_core/codegen/loop_ir/lower_reduction.h"

#include <cmath>
#include <random>
#include <tuple>

#include "compiler_core/codegen/kernel_emitter.h"
#include "compiler_core/codegen/loop_ir/printer.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/frontend/interpreter.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/codegen_testing.h"
#include "tests/compiler_core/codegen/gpu_testing.h"

namespace kiln {
namespace {

using codegen_testing::GraphBuilder;
using codegen_testing::RandomFeeds;
using Attrs = std::map<std::string, AttrValue>;

const GpuTarget kSm90{90};

Attrs Axes(std::vector<int64_t> axes, int64_t keepdims) {
  return {{"axes", AttrValue(std::move(axes))}, {"keepdims", AttrValue(keepdims)}};
}
Attrs Axis(int64_t axis) { return {{"axis", AttrValue(axis)}}; }

// Every point of the workload's space (the default among them) against the
// interpreter, and through ptxas.
void CheckEverywhere(const Graph& g, float lo = -2.0f, float hi = 2.0f) {
  gpu_testing::CheckEveryPoint(g, "reduction", RandomFeeds(g, 11, lo, hi));
}

// Stages hand results to each other through memory: every point's kernel
// has shared memory, so the NVPTX lowering puts a barrier after every
// thread loop (the emulation runs threads one after another and cannot see
// a missing one).
void ExpectSharedMemory(const Graph& g) {
  for (const ScheduleConfig& c : EnumerateSchedules(g, kSm90)) {
    absl::StatusOr<loop_ir::LoopFunc> f = LowerWorkload(g, c, kSm90);
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_GT(loop_ir::GpuLaunchOf(*f).shared_bytes, 0) << c.ToString();
  }
}

std::string DefaultIr(const Graph& g) {
  absl::StatusOr<loop_ir::LoopFunc> f = LowerWorkload(g, DefaultSchedule(g, kSm90), kSm90);
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? loop_ir::Print(*f) : std::string();
}

// Every Reduce* operator over rows of 33 (no vector width divides them):
// groups of 1 to 64 threads, the last lanes of each group idle.
TEST(GpuReductionLoweringTest, EveryReduceOperatorOnRowsOf33) {
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                         "ReduceSumSquare", "ReduceLogSum"}) {
    SCOPED_TRACE(op);
    GraphBuilder b(13);
    Value* x = b.Input({5, 33});
    auto g = b.Finish({b.Op(op, {x}, Axes({1}, 1))});
    const bool positive = std::string(op) == "ReduceLogSum" || std::string(op) == "ReduceProd";
    CheckEverywhere(*g, positive ? 0.5f : -2.0f, positive ? 1.5f : 2.0f);
  }
}

// Reduced axes in every position of a batched 4-D input (leading, middle,
// innermost, several, all; negative axes), keepdims on and off: rows that
// are contiguous runs, strided columns (the innermost axis kept: groups read
// neighbouring rows) and mixes.
TEST(GpuReductionLoweringTest, AxesInEveryPosition) {
  const std::vector<int64_t> dims = {2, 7, 3, 33};
  const char* ops[] = {"ReduceSum", "ReduceMax", "ReduceMean"};
  int n = 0;
  for (const std::vector<int64_t>& axes : std::vector<std::vector<int64_t>>{
           {0}, {1}, {2}, {-1}, {1, 2}, {0, 3}, {-3, -1}, {0, 1, 2, 3}, {2, 3}, {0, 2}}) {
    const char* op = ops[n % 3];
    const int64_t keepdims = n++ % 2;
    SCOPED_TRACE(absl::StrCat(op, " axes ", axes.size(), " first ", axes[0], " keepdims ", keepdims));
    GraphBuilder b(13);
    Value* x = b.Input(dims);
    auto g = b.Finish({b.Op(op, {x}, Axes(axes, keepdims))});
    CheckEverywhere(*g);
  }
  // No axes: everything, one row.
  GraphBuilder b(13);
  auto g = b.Finish({b.Op("ReduceMean", {b.Input({3, 11})}, {{"keepdims", AttrValue(int64_t{0})}})});
  CheckEverywhere(*g);
}

// Rows of one element, of 1000 (vectors of 4, 250 per row: block-wide
// groups), 1030 (vectors of 2) and one row of 5000 (groups up to 1024).
TEST(GpuReductionLoweringTest, RowsOf1And1000Plus) {
  for (const auto& [dims, op] : std::vector<std::pair<std::vector<int64_t>, const char*>>{
           {{37, 1}, "ReduceMean"}, {{3, 1000}, "ReduceSum"}, {{2, 1030}, "ReduceL2"}, {{1, 5000}, "ReduceMax"}}) {
    SCOPED_TRACE(op);
    GraphBuilder b(13);
    auto g = b.Finish({b.Op(op, {b.Input(dims)}, Axes({-1}, 0))});
    CheckEverywhere(*g);
  }
}

// ReduceSum over the channels of [N, C, HW]: the innermost axis is kept, so
// neighbouring threads (groups) take neighbouring output pixels.
TEST(GpuReductionLoweringTest, ChannelReductionKeepsReadsCoalesced) {
  GraphBuilder b(13);
  auto g = b.Finish({b.Op("ReduceSum", {b.Input({2, 64, 49})}, Axes({1}, 1))});
  CheckEverywhere(*g);
  // Few pixels: the channels spread over up to 8 threads per pixel, so a
  // warp's load still reads runs of 4 neighbouring pixels (s0_k1).
  const ScheduleConfig c = DefaultSchedule(*g, kSm90);
  EXPECT_EQ(c.Get("vw", 0), 1) << c.ToString();
  EXPECT_EQ(c.Get("tr", 0), 8) << c.ToString();
  const std::string text = DefaultIr(*g);
  EXPECT_NE(text.find("in0[((((s0_k0 * 64) + s0_u) * 49) + s0_k1)]"), std::string::npos) << text;
}

TEST(GpuReductionLoweringTest, SoftmaxAndLogSoftmax) {
  for (const auto& [op, dims, axis] : std::vector<std::tuple<const char*, std::vector<int64_t>, int64_t>>{
           {"Softmax", {37, 129}, -1},
           {"Softmax", {6, 7}, 1},
           {"Softmax", {3, 1000}, -1},
           {"Softmax", {3, 5, 7}, 1},  // the innermost axis kept
           {"Softmax", {4, 6}, 0},
           {"LogSoftmax", {37, 129}, -1},
           {"LogSoftmax", {3, 5, 7}, -2}}) {
    SCOPED_TRACE(absl::StrCat(op, " axis ", axis, " of ", dims.size()));
    GraphBuilder b(13);
    auto g = b.Finish({b.Op(op, {b.Input(dims)}, Axis(axis))});
    CheckEverywhere(*g, -4.0f, 4.0f);
  }
}

// Softmax rows with -inf (masked) entries, exp underflow, one NaN (a NaN
// row), all -inf (a NaN row) and large values; every point agrees with the
// interpreter, NaN for NaN.
TEST(GpuReductionLoweringTest, SoftmaxSpecialValues) {
  const int64_t rows = 6, cols = 53;
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    SCOPED_TRACE(op);
    GraphBuilder b(13);
    Value* x = b.Input({rows, cols});
    auto g = b.Finish({b.Op(op, {x}, Axis(-1))});
    std::vector<float> in = codegen_testing::RandomData(rows * cols, 5, -4, 4);
    for (int64_t c = 0; c < cols; c += 3) in[0 * cols + c] = -INFINITY;
    for (int64_t c = 0; c < cols; ++c) in[1 * cols + c] = -95.0f - c;
    in[1 * cols + 7] = 0;
    in[2 * cols + 11] = NAN;
    for (int64_t c = 0; c < cols; ++c) in[3 * cols + c] = -INFINITY;
    for (int64_t c = 0; c < cols; ++c) in[4 * cols + c] = 80.0f + 0.1f * c;
    std::map<std::string, Tensor> feeds = {{"in0", Tensor::FromVector(DType::kFloat32, {rows, cols}, in)}};
    gpu_testing::CheckGpuConfigsAgainstInterpreter(*g, feeds, EnumerateSchedules(*g, kSm90));
  }
}

// LayerNormalization with its Mean and InvStdDev outputs for every axis
// form (axis 0: one row of everything), scale and bias of the normalized
// shape, one of them broadcast.
TEST(GpuReductionLoweringTest, LayerNormWithMeanAndInvStdDev) {
  const std::vector<int64_t> d = {3, 5, 19};
  for (int64_t axis : {-1, 1, -3}) {
    SCOPED_TRACE(axis);
    const int64_t a = axis < 0 ? axis + 3 : axis;
    std::vector<int64_t> nd(d.begin() + a, d.end()), sd = d;
    for (int64_t i = a; i < 3; ++i) sd[i] = 1;
    std::vector<int64_t> bd = nd;
    bd[0] = 1;  // bias broadcast along the first normalized axis
    auto g = std::make_unique<Graph>();
    g->set_opset_version(17);
    Value* x = *g->AddInput("in0", TensorType::Static(DType::kFloat32, d));
    Value* sc = *g->AddInput("in1", TensorType::Static(DType::kFloat32, nd));
    Value* bi = *g->AddInput("in2", TensorType::Static(DType::kFloat32, bd));
    Value* y = *g->AddValue("y", TensorType::Static(DType::kFloat32, d));
    Value* mean = *g->AddValue("mean", TensorType::Static(DType::kFloat32, sd));
    Value* inv = *g->AddValue("inv", TensorType::Static(DType::kFloat32, sd));
    ASSERT_TRUE(g->AddNode("LayerNormalization", "ln", {x, sc, bi}, {y, mean, inv},
                           {{"axis", AttrValue(axis)}, {"epsilon", AttrValue(0.1f)}})
                    .ok());
    g->AddOutput(y);
    g->AddOutput(mean);
    g->AddOutput(inv);
    CheckEverywhere(*g);
  }
}

TEST(GpuReductionLoweringTest, InstanceNormalizationAndGlobalPools) {
  for (const std::vector<int64_t>& d : std::vector<std::vector<int64_t>>{{2, 3, 4, 5}, {3, 5, 37}, {1, 2, 1, 3}}) {
    GraphBuilder b(17);
    Value* x = b.Input(d);
    Value* sc = b.Input({d[1]});
    Value* bi = b.Input({d[1]});
    auto g = b.Finish({b.Op("InstanceNormalization", {x, sc, bi}, {{"epsilon", AttrValue(0.01f)}})});
    CheckEverywhere(*g);
  }
  {
    GraphBuilder b(13);
    auto g = b.Finish({b.Op("GlobalAveragePool", {b.Input({2, 5, 7, 9})})});
    CheckEverywhere(*g);
  }
  {
    // Of a computed value: the reduced axes are read one by one.
    GraphBuilder b(13);
    auto g = b.Finish({b.Op("GlobalMaxPool", {b.Op("Relu", {b.Input({1, 5, 14, 14})})})});
    CheckEverywhere(*g);
  }
}

// A stage whose results are viewed as the outputs (ResNet's pool and
// Flatten at batch 32; a softmax squeezed) stays one stage spread over
// blocks: its rows' results land at the same flat offsets. Held as an
// intermediate in one block's shared memory, 16384 pooled values would not
// fit (65552 bytes), and every schedule of the space was refused.
TEST(GpuReductionLoweringTest, ResultsViewedAsTheOutputs) {
  {
    GraphBuilder b(13);
    auto g = b.Finish({b.Op("Flatten", {b.Op("GlobalAveragePool", {b.Input({16, 1024, 2, 2})})}, Axis(1))});
    CheckEverywhere(*g);
    const std::string ir = DefaultIr(*g);
    EXPECT_EQ(ir.find("gpu_block for (blk, 0, 1)"), std::string::npos) << ir;
    EXPECT_EQ(ir.find("shared"), std::string::npos) << ir;
  }
  {
    GraphBuilder b(13);
    Value* y = b.Op("Softmax", {b.Input({3, 1, 50})}, Axis(-1));
    auto g = b.Finish({b.Op("Flatten", {y}, Axis(2)), y});
    CheckEverywhere(*g);
  }
}

// Inlined elementwise producers with broadcast operands, and a batch.
TEST(GpuReductionLoweringTest, FusedProducers) {
  GraphBuilder b(13);
  Value* x = b.Input({4, 6, 20});
  Value* bias = b.Input({20});
  Value* s = b.Input({4, 1, 1});
  Value* p = b.Op("Mul", {b.Op("Relu", {b.Op("Add", {x, bias})}), s});
  auto g = b.Finish({b.Op("ReduceSum", {p}, Axes({-1}, 0))});
  CheckEverywhere(*g);
  GraphBuilder b2(13);
  Value* x2 = b2.Input({3, 40});
  auto g2 = b2.Finish({b2.Op("Softmax", {b2.Op("Mul", {x2, b2.FloatConstant({1}, {0.125f})})}, Axis(-1))});
  CheckEverywhere(*g2);
}

// Several stages and the outputs computed from them: one block per slice
// of the row-local leading axes, intermediate results in shared memory.
TEST(GpuReductionLoweringTest, StagesWithConsumers) {
  {
    // Softmax and a consumer, both outputs (row-local along axis 0).
    GraphBuilder b(13);
    Value* x = b.Input({37, 129});
    Value* y = b.Op("Softmax", {x}, Axis(-1));
    auto g = b.Finish({b.Op("Mul", {y, x}), y});
    CheckEverywhere(*g);
    ExpectSharedMemory(*g);
  }
  {
    // LayerNormalization then Relu: slices of [2, 8] rows, the normalized
    // values an intermediate result in shared memory.
    GraphBuilder b(17);
    Value* x = b.Input({2, 8, 100});
    Value* y = b.Op("LayerNormalization", {x, b.Input({100})}, Axis(-1));
    auto g = b.Finish({b.Op("Relu", {y})});
    EXPECT_EQ(loop_ir::RowLocalAxes(*g), 2);
    CheckEverywhere(*g);
  }
  {
    // Decomposed softmax: ReduceMax, Sub, Exp, ReduceSum, Div.
    GraphBuilder b(13);
    Value* x = b.Input({45, 101});
    Value* m = b.Op("ReduceMax", {x}, Axes({1}, 1));
    Value* e = b.Op("Exp", {b.Op("Sub", {x, m})});
    Value* s = b.Op("ReduceSum", {e}, Axes({1}, 1));
    auto g = b.Finish({b.Op("Div", {e, s})});
    CheckEverywhere(*g);
    ExpectSharedMemory(*g);
  }
  {
    // A reduction over the rows broadcast back over them: not row-local,
    // one block does it all.
    GraphBuilder b(13);
    Value* x = b.Input({64, 100});
    Value* m = b.Op("ReduceSum", {x}, Axes({0}, 1));
    auto g = b.Finish({b.Op("Sub", {x, m})});
    EXPECT_EQ(loop_ir::RowLocalAxes(*g), 0);
    CheckEverywhere(*g);
    EXPECT_NE(DefaultIr(*g).find("gpu_block for (blk, 0, 1)"), std::string::npos) << DefaultIr(*g);
  }
  {
    // Mean an output, InvStdDev an unused intermediate, Y through a consumer.
    auto g = std::make_unique<Graph>();
    g->set_opset_version(17);
    Value* x = *g->AddInput("in0", TensorType::Static(DType::kFloat32, {6, 100}));
    Value* sc = *g->AddInput("in1", TensorType::Static(DType::kFloat32, {100}));
    Value* y = *g->AddValue("y", TensorType::Static(DType::kFloat32, {6, 100}));
    Value* mean = *g->AddValue("mean", TensorType::Static(DType::kFloat32, {6, 1}));
    Value* inv = *g->AddValue("inv", TensorType::Static(DType::kFloat32, {6, 1}));
    ASSERT_TRUE(g->AddNode("LayerNormalization", "ln", {x, sc}, {y, mean, inv}, Axis(-1)).ok());
    Value* z = *g->AddValue("z", TensorType::Static(DType::kFloat32, {6, 100}));
    ASSERT_TRUE(g->AddNode("Relu", "relu", {y}, {z}).ok());
    g->AddOutput(z);
    g->AddOutput(mean);
    CheckEverywhere(*g);
  }
}

// The defaults' loop IR: a warp per short row with vectors of 4 and no
// shared memory; a block per long row, its warps' partials through shared
// memory.
TEST(GpuReductionLoweringTest, LoopIrOfTheDefaults) {
  {
    GraphBuilder b(13);
    auto g = b.Finish({b.Op("Softmax", {b.Input({64, 256})}, Axis(-1))});
    ScheduleConfig c = DefaultSchedule(*g, kSm90);
    EXPECT_EQ(c.ToString(), "bt=256,tr=32,vw=4");
    absl::StatusOr<loop_ir::LoopFunc> f = LowerWorkload(*g, c, kSm90);
    ASSERT_TRUE(f.ok()) << f.status();
    loop_ir::GpuLaunch launch = loop_ir::GpuLaunchOf(*f);
    EXPECT_EQ(launch.blocks, 64 / 8);
    EXPECT_EQ(launch.threads, 256);
    EXPECT_EQ(launch.shared_bytes, 0);
    const std::string text = loop_ir::Print(*f);
    EXPECT_NE(text.find("warp_reduce max(s0_a, 32)"), std::string::npos) << text;
    EXPECT_NE(text.find("warp_reduce sum(s0_b, 32)"), std::string::npos) << text;
    EXPECT_NE(text.find("vectorized for (s0_v, 0, 4)"), std::string::npos) << text;
    // 64 elements per row group: two vectors per thread, kept in registers.
    EXPECT_NE(text.find("allocate local s0_xs: f32[8]"), std::string::npos) << text;
    EXPECT_EQ(text.find("if ("), std::string::npos) << "rows and vectors fit exactly: no guard\n" << text;
  }
  {
    GraphBuilder b(13);
    auto g = b.Finish({b.Op("ReduceSum", {b.Input({8, 4096})}, Axes({1}, 0))});
    ScheduleConfig c = DefaultSchedule(*g, kSm90);
    EXPECT_EQ(c.ToString(), "bt=256,tr=256,vw=4");
    absl::StatusOr<loop_ir::LoopFunc> f = LowerWorkload(*g, c, kSm90);
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ(loop_ir::GpuLaunchOf(*f).blocks, 8);
    const std::string text = loop_ir::Print(*f);
    EXPECT_NE(text.find("allocate shared partials: f32[8]"), std::string::npos) << text;
    EXPECT_NE(text.find("warp_reduce sum(s0_a, 32)"), std::string::npos) << text;
    EXPECT_NE(text.find("  for (s0_i, 0, 4)"), std::string::npos) << text;
  }
}

TEST(GpuReductionLoweringTest, RefusesKnobsOutOfRange) {
  GraphBuilder b(13);
  auto g = b.Finish({b.Op("ReduceSum", {b.Input({8, 33})}, Axes({1}, 1))});
  auto refused = [&](const std::string& knobs, const std::string& says) {
    absl::Status s = ValidateSchedule(*g, *ScheduleConfig::Parse(knobs), kSm90);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << knobs;
    EXPECT_NE(s.message().find(says), std::string::npos) << s;
  };
  refused("bt=128,tr=3", "knob tr=3");
  refused("bt=128,tr=256", "knob tr=256");
  refused("bt=100", "knob bt=100");
  refused("vw=4", "knob vw=4");
  refused("tasks=4", "on a GPU");
  GraphBuilder p(13);
  auto prod = p.Finish({p.Op("ReduceProd", {p.Input({8, 200})}, Axes({1}, 1))});
  EXPECT_EQ(ValidateSchedule(*prod, *ScheduleConfig::Parse("bt=128,tr=64"), kSm90).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln
