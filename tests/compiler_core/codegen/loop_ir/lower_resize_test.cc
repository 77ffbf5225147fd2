// Resize workloads on loop IR (compiler_core/codegen/loop_ir/lower_resize.h):
// every mode and coordinate transformation family on odd shapes, JIT-compiled
// at several schedule points and compared with the reference interpreter
// (rtol 1e-4 / atol 1e-5).
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler_core/codegen/jit.h"
#include "compiler_core/codegen/loop_ir/lower_resize.h"
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
  CpuTarget target = CpuTarget::Host();
  ASSERT_EQ(WorkloadKind(*g), "resize") << g->ToText();
  std::vector<ScheduleConfig> configs = EnumerateSchedules(*g, target);
  ASSERT_FALSE(configs.empty());
  // The whole space: it is small (vw x tasks).
  CheckConfigsAgainstInterpreter(*g, configs, target);
  const loop_ir::WorkloadLowering l = loop_ir::ResizeLowering();
  for (const ScheduleConfig& c : configs) {
    auto f = l.lower(*g, c, target);
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_TRUE(loop_ir::Verify(*f).ok()) << c.ToString() << "\n" << loop_ir::Print(*f);
  }
}

Attrs Mode(const std::string& mode, const std::string& coord, const std::string& nearest = "") {
  Attrs a = {{"mode", mode}, {"coordinate_transformation_mode", coord}};
  if (!nearest.empty()) a["nearest_mode"] = nearest;
  return a;
}

TEST(ResizeLoweringTest, NearestEveryRoundingAndTransform) {
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

TEST(ResizeLoweringTest, LinearBilinearTransforms) {
  for (const std::string coord : {"half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel"}) {
    SCOPED_TRACE(coord);
    CheckResize({{1, 2, 4, 5}, Mode("linear", coord), {1, 1, 2.0f, 1.8f}});
    CheckResize({{1, 3, 13, 11}, Mode("linear", coord), {}, {1, 3, 5, 1}});
  }
}

TEST(ResizeLoweringTest, Linear1DAndTrilinearAndInnerAxisUntouched) {
  CheckResize({{13}, Mode("linear", "half_pixel"), {}, {29}});
  CheckResize({{1, 2, 3, 4, 5}, Mode("linear", "align_corners"), {1, 1, 1.7f, 0.75f, 2.0f}});
  // Only a middle axis scales: the last axis stays contiguous.
  CheckResize({{3, 7, 2, 11}, Mode("linear", "half_pixel"), {1, 2.3f, 1, 1}});
  CheckResize({{3, 5, 17}, Mode("nearest", "asymmetric", "floor"), {1, 3, 1}});
}

TEST(ResizeLoweringTest, CubicVariants) {
  CheckResize({{1, 2, 5, 7}, Mode("cubic", "half_pixel"), {1, 1, 1.6f, 2.0f}});
  CheckResize({{1, 1, 9, 13}, Mode("cubic", "align_corners"), {}, {1, 1, 4, 5}});
  CheckResize({{1, 1, 4, 3}, Mode("cubic", "asymmetric"), {1, 1, 2.5f, 3.0f}});
  Attrs a = Mode("cubic", "half_pixel");
  a["cubic_coeff_a"] = -0.5f;
  a["exclude_outside"] = int64_t{1};
  CheckResize({{2, 1, 6, 5}, a, {1, 1, 0.6f, 2.2f}});
  CheckResize({{7, 3}, Mode("cubic", "pytorch_half_pixel"), {}, {1, 11}});
}

TEST(ResizeLoweringTest, TfCropAndResizeWithExtrapolation) {
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

TEST(ResizeLoweringTest, UpsampleAndEpilogues) {
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

// Where rows do not shrink, H and W resize separably: each input row once
// along W into the row buffer, then each output row blends buffered rows.
// Shrinking rows, extrapolation or a resized axis before H keep the direct
// form. Both against the interpreter at every schedule point.
TEST(ResizeLoweringTest, SeparableWhereRowsDoNotShrink) {
  auto text = [](const ResizeSpec& s) {
    std::unique_ptr<Graph> g = ResizeGraph(s);
    auto f = loop_ir::ResizeLowering().lower(*g, DefaultSchedule(*g, CpuTarget::Host()), CpuTarget::Host());
    EXPECT_TRUE(f.ok()) << f.status();
    return f.ok() ? loop_ir::Print(*f) : std::string();
  };
  ResizeSpec deeplab{{1, 3, 16, 16}, Mode("linear", "half_pixel"), {}, {1, 3, 64, 64}};
  deeplab.epilogue = "Relu";
  ResizeSpec planes{{2, 5, 7, 9}, Mode("linear", "align_corners"), {}, {2, 5, 14, 31}};
  ResizeSpec cubic{{1, 2, 5, 6}, Mode("cubic", "half_pixel"), {1, 1, 1.5f, 2.5f}};
  ResizeSpec nearest{{3, 4, 6}, Mode("nearest", "asymmetric", "floor"), {1, 2, 3}};
  for (const ResizeSpec& s : {deeplab, planes, cubic, nearest}) {
    CheckResize(s);
    EXPECT_NE(text(s).find("allocate hrows"), std::string::npos) << text(s);
  }
  ResizeSpec shrink{{1, 3, 13, 11}, Mode("linear", "half_pixel"), {}, {1, 3, 5, 22}};
  ResizeSpec channels{{1, 3, 4, 5}, Mode("linear", "half_pixel"), {1, 2, 2, 2}};
  for (const ResizeSpec& s : {shrink, channels}) {
    CheckResize(s);
    EXPECT_EQ(text(s).find("hrows"), std::string::npos) << text(s);
  }
}

TEST(ResizeLoweringTest, PrintVerifySpaceAndValidation) {
  std::unique_ptr<Graph> g = ResizeGraph({{1, 2, 5, 7}, Mode("linear", "half_pixel"), {1, 1, 2, 2}});
  CpuTarget target = CpuTarget::Host();
  const loop_ir::WorkloadLowering l = loop_ir::ResizeLowering();
  ASSERT_TRUE(l.match(*g).ok());
  std::vector<ScheduleConfig> space = l.enumerate(*g, target);
  ASSERT_FALSE(space.empty());
  EXPECT_EQ(space, l.enumerate(*g, target));
  ScheduleConfig def = l.default_schedule(*g, target);
  EXPECT_NE(std::find(space.begin(), space.end(), def), space.end());
  auto f = l.lower(*g, def, target);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_TRUE(loop_ir::Verify(*f).ok());
  std::string text = loop_ir::Print(*f);
  EXPECT_NE(text.find("allocate ridx3: i64[28]"), std::string::npos) << text;
  EXPECT_NE(text.find("ridx3[6] = 2"), std::string::npos) << text;
  ScheduleConfig bad;
  bad.Set("vw", 3);
  EXPECT_EQ(l.validate(*g, bad, target).code(), absl::StatusCode::kInvalidArgument);
  ScheduleConfig unknown;
  unknown.Set("rows", 2);
  EXPECT_EQ(l.validate(*g, unknown, target).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln
