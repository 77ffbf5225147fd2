// GPU lowering of the resize kind (compiler_core/codegen/loop_ir/gpu/lower_resize.h):
// every mode, nearest rounding and coordinate transformation, 1-D to 5-D,
// Upsample, crops with extrapolation and epilogues, on odd shapes; every
// point of the GPU space against the reference interpreter (through the CPU
// emulation; rtol 1e-4 / atol 1e-5: the interpreter blends in double) and
// assembled by ptxas for sm_80 and sm_90; the default's loop IR; refused knobs.
#include "compiler_core/codegen/loop_ir/gpu/lower_resize.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler_core/codegen/kernel_emitter.h"
#include "compiler_core/codegen/loop_ir/printer.h"
#include "compiler_core/codegen/ptx_emitter.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/frontend/shape_inference.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/codegen_testing.h"
#include "tests/compiler_core/codegen/gpu_testing.h"

namespace kiln {
namespace {

using Ints = std::vector<int64_t>;
using Floats = std::vector<float>;
using Attrs = std::map<std::string, AttrValue>;

const GpuTarget kSm90{90};

struct ResizeSpec {
  Ints x;
  Attrs attrs;
  Floats scales;
  Ints sizes;
  Floats roi;
  std::string op = "Resize";
  std::string epilogue;  // "", "Relu" or "Add" (with a second input of the output's shape)
};

std::unique_ptr<Graph> ResizeGraph(const ResizeSpec& s) {
  auto g = std::make_unique<Graph>();
  g->set_opset_version(s.op == "Upsample" ? 9 : 13);
  Value* in = *g->AddInput("in0", TensorType::Static(DType::kFloat32, s.x));
  const int64_t rank = static_cast<int64_t>(s.x.size());
  Value* roi = nullptr;
  Value* scales = nullptr;
  Value* sizes = nullptr;
  if (!s.roi.empty()) roi = *g->AddConstant("roi", Tensor::FromVector(DType::kFloat32, {2 * rank}, s.roi));
  if (!s.scales.empty()) scales = *g->AddConstant("scales", Tensor::FromVector(DType::kFloat32, {rank}, s.scales));
  if (!s.sizes.empty()) sizes = *g->AddConstant("sizes", Tensor::FromVector(DType::kInt64, {rank}, s.sizes));
  std::vector<Value*> ins = {in, roi, scales};
  if (s.op == "Upsample") ins = {in, scales};
  if (sizes != nullptr) ins.push_back(sizes);
  Value* y = *g->AddValue("y");
  EXPECT_TRUE(g->AddNode(s.op, "resize", ins, {y}, s.attrs).ok());
  Value* out = y;
  if (!s.epilogue.empty()) {
    EXPECT_TRUE(InferShapes(*g).ok());
    std::vector<Value*> eins = {y};
    if (s.epilogue == "Add") eins.push_back(*g->AddInput("in1", y->type()));
    out = *g->AddValue("z");
    EXPECT_TRUE(g->AddNode(s.epilogue, "epilogue", eins, {out}).ok());
  }
  g->AddOutput(out);
  absl::Status st = InferShapes(*g);
  EXPECT_TRUE(st.ok()) << st << "\n" << g->ToText();
  return g;
}

void CheckResize(const ResizeSpec& s) {
  std::unique_ptr<Graph> g = ResizeGraph(s);
  ASSERT_EQ(WorkloadKind(*g), "resize") << g->ToText();
  std::vector<ScheduleConfig> space = EnumerateSchedules(*g, kSm90);
  ASSERT_FALSE(space.empty());
  EXPECT_NE(std::find(space.begin(), space.end(), DefaultSchedule(*g, kSm90)), space.end());
  gpu_testing::CheckGpuConfigsAgainstInterpreter(*g, codegen_testing::RandomFeeds(*g, 7, -0.5f, 0.5f, -1.0f, 1.0f),
                                                 space);
  gpu_testing::CheckPtxAssembles(*g, space);
}

Attrs Mode(const std::string& mode, const std::string& coord, const std::string& nearest = "") {
  Attrs a = {{"mode", mode}, {"coordinate_transformation_mode", coord}};
  if (!nearest.empty()) a["nearest_mode"] = nearest;
  return a;
}

TEST(GpuResizeLoweringTest, NearestEveryRoundingAndTransform) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"round_prefer_floor", "half_pixel"},      {"round_prefer_ceil", "asymmetric"},
      {"floor", "align_corners"},                {"ceil", "tf_half_pixel_for_nn"},
      {"round_prefer_floor", "pytorch_half_pixel"}, {"round_prefer_ceil", "half_pixel"}};
  for (const auto& [nearest, coord] : cases) {
    SCOPED_TRACE(nearest + " " + coord);
    CheckResize({{1, 3, 5, 7}, Mode("nearest", coord, nearest), {1, 1, 1.6f, 2.5f}});
    CheckResize({{2, 1, 7, 11}, Mode("nearest", coord, nearest), {}, {2, 1, 3, 5}});
  }
}

// Coordinates exactly halfway between two inputs (asymmetric upsampling by
// 2: o / 2; half_pixel downsampling by 2: 2o + 0.5), where the rounding
// modes part.
TEST(GpuResizeLoweringTest, NearestHalfwayCoordinates) {
  for (const std::string nearest : {"round_prefer_floor", "round_prefer_ceil"}) {
    SCOPED_TRACE(nearest);
    CheckResize({{1, 2, 3, 9}, Mode("nearest", "asymmetric", nearest), {1, 1, 2, 2}});
    CheckResize({{1, 1, 10, 14}, Mode("nearest", "half_pixel", nearest), {1, 1, 0.5f, 0.5f}});
  }
}

TEST(GpuResizeLoweringTest, LinearTransforms) {
  for (const std::string coord : {"half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel"}) {
    SCOPED_TRACE(coord);
    CheckResize({{1, 2, 4, 5}, Mode("linear", coord), {1, 1, 2.0f, 1.8f}});
    CheckResize({{1, 3, 13, 11}, Mode("linear", coord), {}, {1, 3, 5, 1}});
  }
}

TEST(GpuResizeLoweringTest, Linear1DTrilinearAndUntouchedLastAxis) {
  CheckResize({{13}, Mode("linear", "half_pixel"), {}, {29}});
  CheckResize({{1, 2, 3, 4, 5}, Mode("linear", "align_corners"), {1, 1, 1.7f, 0.75f, 2.0f}});
  // Only a middle axis scales: the last axis stays contiguous.
  CheckResize({{3, 7, 2, 11}, Mode("linear", "half_pixel"), {1, 2.3f, 1, 1}});
  CheckResize({{3, 5, 17}, Mode("nearest", "asymmetric", "floor"), {1, 3, 1}});
}

TEST(GpuResizeLoweringTest, CubicVariants) {
  CheckResize({{1, 2, 5, 7}, Mode("cubic", "half_pixel"), {1, 1, 1.6f, 2.0f}});
  CheckResize({{1, 1, 9, 13}, Mode("cubic", "align_corners"), {}, {1, 1, 4, 5}});
  CheckResize({{1, 1, 4, 3}, Mode("cubic", "asymmetric"), {1, 1, 2.5f, 3.0f}});
  Attrs a = Mode("cubic", "half_pixel");
  a["cubic_coeff_a"] = -0.5f;
  a["exclude_outside"] = int64_t{1};
  CheckResize({{2, 1, 6, 5}, a, {1, 1, 0.6f, 2.2f}});
  CheckResize({{7, 3}, Mode("cubic", "pytorch_half_pixel"), {}, {1, 11}});
}

TEST(GpuResizeLoweringTest, TfCropAndResizeWithExtrapolation) {
  for (const std::string mode : {"linear", "nearest", "cubic"}) {
    SCOPED_TRACE(mode);
    Attrs a = Mode(mode, "tf_crop_and_resize");
    a["extrapolation_value"] = 10.0f;
    // The roi reaches outside the input on both resized axes.
    CheckResize({{1, 2, 6, 7}, a, {}, {1, 2, 5, 9}, {0, 0, -0.2f, 0.3f, 1, 1, 0.9f, 1.4f}});
    a["extrapolation_value"] = 0.0f;
    CheckResize({{1, 1, 5, 5}, a, {1, 1, 1.4f, 0.8f}, {}, {0, 0, 0.1f, -0.3f, 1, 1, 0.8f, 0.7f}});
  }
}

TEST(GpuResizeLoweringTest, UpsampleAndEpilogues) {
  ResizeSpec up{{1, 2, 3, 5}, {{"mode", std::string("nearest")}}, {1, 1, 2, 3}};
  up.op = "Upsample";
  CheckResize(up);
  up.attrs = {{"mode", std::string("linear")}};
  CheckResize(up);
  ResizeSpec relu{{1, 3, 4, 5}, Mode("linear", "half_pixel"), {1, 1, 2, 2}};
  relu.epilogue = "Relu";
  CheckResize(relu);
  ResizeSpec add{{2, 3, 3, 3}, Mode("nearest", "asymmetric", "floor"), {1, 1, 2, 2}};
  add.epilogue = "Add";
  CheckResize(add);
}

TEST(GpuResizeLoweringTest, LoopIrOfTheDefault) {
  std::unique_ptr<Graph> g = ResizeGraph({{1, 3, 16, 16}, Mode("linear", "half_pixel"), {}, {1, 3, 64, 64}});
  const ScheduleConfig c = DefaultSchedule(*g, kSm90);
  EXPECT_EQ(c.ToString(), "bt=256,un=1,vw=4");
  absl::StatusOr<loop_ir::LoopFunc> f = LowerWorkload(*g, c, kSm90);
  ASSERT_TRUE(f.ok()) << f.status();
  const loop_ir::GpuLaunch launch = loop_ir::GpuLaunchOf(*f);
  EXPECT_EQ(launch.blocks, 3 * 64 * 64 / (256 * 4));
  EXPECT_EQ(launch.threads, 256);
  EXPECT_EQ(launch.shared_bytes, 0);
  const std::string ir = loop_ir::Print(*f);
  EXPECT_NE(ir.find("vectorized for (v, 0, 4)"), std::string::npos) << ir;
  // The taps from the plan: half_pixel's (o + 0.5) / 4 - 0.5 in f64.
  EXPECT_NE(ir.find("floor((((f64((row % 64)) + 0.5) / 4.0) - 0.5))"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("if ("), std::string::npos) << "the grid fits exactly: no guard\n" << ir;
  // The device's doubles are the interpreter's: IEEE-rounded f64 operations,
  // none fused into an fma.
  absl::StatusOr<PtxCode> ptx = CompileToPtx({KernelRequest{g.get(), c, "k"}}, kSm90);
  ASSERT_TRUE(ptx.ok()) << ptx.status();
  EXPECT_NE(ptx->ptx.find("add.rn.f64"), std::string::npos) << ptx->ptx;
  EXPECT_EQ(ptx->ptx.find("fma.rn.f64"), std::string::npos) << ptx->ptx;
  EXPECT_EQ(ptx->ptx.find("mul.f64"), std::string::npos) << "mul without .rn may be contracted by ptxas";
  EXPECT_EQ(ptx->ptx.find("add.f64"), std::string::npos) << "add without .rn may be contracted by ptxas";
}

TEST(GpuResizeLoweringTest, RefusesKnobsOutOfRange) {
  std::unique_ptr<Graph> g = ResizeGraph({{1, 2, 5, 7}, Mode("linear", "half_pixel"), {1, 1, 2, 2}});
  auto refused = [&](const std::string& knob, int64_t v) {
    ScheduleConfig c;
    c.Set(knob, v);
    absl::Status s = ValidateSchedule(*g, c, kSm90);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << knob;
    EXPECT_NE(s.message().find(absl::StrCat(knob, "=", v)), std::string::npos) << s;
  };
  refused("vw", 3);
  refused("bt", 48);
  refused("un", 0);
  ScheduleConfig tasks;
  tasks.Set("tasks", 4);
  EXPECT_NE(ValidateSchedule(*g, tasks, kSm90).message().find("on a GPU"), std::string::npos);
}

}  // namespace
}  // namespace kiln
