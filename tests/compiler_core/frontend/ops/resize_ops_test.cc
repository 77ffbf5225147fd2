// The resize family (resize_ops.cc): Resize-10 keeps Upsample's coordinates.
#include <gtest/gtest.h>

#include "tests/compiler_core/frontend/ops/op_testing.h"

namespace kiln {
namespace {

using ::kiln::testing::AttrString;
using ::kiln::testing::F32;
using ::kiln::testing::OnnxModelBuilder;

// Resize-10 (X, scales) has Upsample's semantics: asymmetric coordinates, so a
// linear 2x upsample of [1, 2] is [1, 1.5, 2, 2] (half_pixel would give 1.25).
// Disabled until the importer's Resize-10 rewrite to (X, "", scales) also sets
// coordinate_transformation_mode="asymmetric" (and nearest_mode="floor"), as
// ONNX's version converter does; the op itself handles the 2-input form.
TEST(ResizeOpsTest, Resize10UsesAsymmetricCoordinates) {
  OnnxModelBuilder m(10);
  m.Input("x", {"1", "2"});
  m.Initializer("scales", {2}, {1.0f, 2.0f});
  AttrString(m.Node("Resize", "rs", {"x", "scales"}, {"y"}), "mode", "linear");
  m.Output("y");
  auto g = ImportOnnxModel(m.Bytes(), {});
  ASSERT_TRUE(g.ok()) << g.status();
  auto out = Evaluate(**g, {{"x", F32({1, 2}, {1, 2})}});
  ASSERT_TRUE(out.ok()) << out.status();
  const Tensor& y = out->at("y");
  EXPECT_EQ(std::vector<float>(y.data<float>(), y.data<float>() + 4), (std::vector<float>{1, 1.5f, 2, 2}));
}

}  // namespace
}  // namespace kiln
