// Resize workloads on loop IR (compiler_core/codegen/loop_ir/lower_resize.h):
// every mode and coordinate transformation family on odd shapes, JIT-compiled
// at several schedule points and compared with the reference interpreter
// (rtol 1e-4 / atol 1e-5). The case lists are the GPU test's too
// (resize_cases.h).
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
#include "tests/compiler_core/codegen/loop_ir/resize_cases.h"

namespace kiln {
namespace {

using namespace loop_ir_testing;  // NOLINT: test helpers

// Every point of the space (it is small: vw x tasks) lowered, verified and
// run against the interpreter.
void CheckResize(const ResizeSpec& s) {
  std::unique_ptr<Graph> g = ResizeGraph(s);
  CpuTarget target = CpuTarget::Host();
  ASSERT_EQ(WorkloadKind(*g), "resize") << g->ToText();
  std::vector<ScheduleConfig> configs = EnumerateSchedules(*g, target);
  ASSERT_FALSE(configs.empty());
  CheckConfigsAgainstInterpreter(*g, configs, target);
  const loop_ir::WorkloadLowering l = loop_ir::ResizeLowering();
  for (const ScheduleConfig& c : configs) {
    auto f = l.lower(*g, c, target);
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_TRUE(loop_ir::Verify(*f).ok()) << c.ToString() << "\n" << loop_ir::Print(*f);
  }
}

TEST(ResizeLoweringTest, NearestEveryRoundingAndTransform) {
  for (const ResizeSpec& s : NearestRoundingAndTransformCases()) CheckResize(s);
}

TEST(ResizeLoweringTest, NearestHalfwayCoordinates) {
  for (const ResizeSpec& s : NearestHalfwayCases()) CheckResize(s);
}

TEST(ResizeLoweringTest, LinearBilinearTransforms) {
  for (const ResizeSpec& s : LinearTransformCases()) CheckResize(s);
}

TEST(ResizeLoweringTest, Linear1DAndTrilinearAndInnerAxisUntouched) {
  for (const ResizeSpec& s : Linear1DTrilinearAndUntouchedLastAxisCases()) CheckResize(s);
}

TEST(ResizeLoweringTest, CubicVariants) {
  for (const ResizeSpec& s : CubicCases()) CheckResize(s);
}

TEST(ResizeLoweringTest, TfCropAndResizeWithExtrapolation) {
  for (const ResizeSpec& s : TfCropAndResizeCases()) CheckResize(s);
}

TEST(ResizeLoweringTest, UpsampleAndEpilogues) {
  for (const ResizeSpec& s : UpsampleAndEpilogueCases()) CheckResize(s);
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
  ResizeSpec deeplab{{1, 3, 16, 16}, ResizeMode("linear", "half_pixel"), {}, {1, 3, 64, 64}};
  deeplab.epilogue = "Relu";
  ResizeSpec planes{{2, 5, 7, 9}, ResizeMode("linear", "align_corners"), {}, {2, 5, 14, 31}};
  ResizeSpec cubic{{1, 2, 5, 6}, ResizeMode("cubic", "half_pixel"), {1, 1, 1.5f, 2.5f}};
  ResizeSpec nearest{{3, 4, 6}, ResizeMode("nearest", "asymmetric", "floor"), {1, 2, 3}};
  for (const ResizeSpec& s : {deeplab, planes, cubic, nearest}) {
    CheckResize(s);
    EXPECT_NE(text(s).find("allocate hrows"), std::string::npos) << text(s);
  }
  ResizeSpec shrink{{1, 3, 13, 11}, ResizeMode("linear", "half_pixel"), {}, {1, 3, 5, 22}};
  ResizeSpec channels{{1, 3, 4, 5}, ResizeMode("linear", "half_pixel"), {1, 2, 2, 2}};
  for (const ResizeSpec& s : {shrink, channels}) {
    CheckResize(s);
    EXPECT_EQ(text(s).find("hrows"), std::string::npos) << text(s);
  }
}

TEST(ResizeLoweringTest, PrintVerifySpaceAndValidation) {
  std::unique_ptr<Graph> g = ResizeGraph({{1, 2, 5, 7}, ResizeMode("linear", "half_pixel"), {1, 1, 2, 2}});
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
