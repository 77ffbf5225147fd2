// Resize workloads for the CPU and GPU lowering tests (lower_resize_test.cc,
// gpu/lower_resize_test.cc): the graph of a spec and the case lists both
// check, each with its own harness (JIT for the host, or the GPU emulation).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compiler_core/frontend/shape_inference.h"
#include "compiler_core/ir/graph.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/loop_ir/lowering_testing.h"

namespace kiln::loop_ir_testing {

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

inline std::unique_ptr<Graph> ResizeGraph(const ResizeSpec& s) {
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

// Resize's mode attributes (nearest_mode only when given).
inline Attrs ResizeMode(const std::string& mode, const std::string& coord, const std::string& nearest = "") {
  Attrs a = {{"mode", mode}, {"coordinate_transformation_mode", coord}};
  if (!nearest.empty()) a["nearest_mode"] = nearest;
  return a;
}

// Each nearest rounding with a coordinate transformation, by scales and by sizes.
inline std::vector<ResizeSpec> NearestRoundingAndTransformCases() {
  const std::vector<std::pair<std::string, std::string>> modes = {
      {"round_prefer_floor", "half_pixel"},         {"round_prefer_ceil", "asymmetric"},
      {"floor", "align_corners"},                   {"ceil", "tf_half_pixel_for_nn"},
      {"round_prefer_floor", "pytorch_half_pixel"}, {"round_prefer_ceil", "half_pixel"}};
  std::vector<ResizeSpec> out;
  for (const auto& [nearest, coord] : modes) {
    out.push_back({{1, 3, 5, 7}, ResizeMode("nearest", coord, nearest), {1, 1, 1.6f, 2.5f}});
    out.push_back({{2, 1, 7, 11}, ResizeMode("nearest", coord, nearest), {}, {2, 1, 3, 5}});
  }
  return out;
}

// Coordinates exactly halfway between two inputs (asymmetric upsampling by
// 2: o / 2; half_pixel downsampling by 2: 2o + 0.5), where the rounding
// modes part.
inline std::vector<ResizeSpec> NearestHalfwayCases() {
  std::vector<ResizeSpec> out;
  for (const std::string nearest : {"round_prefer_floor", "round_prefer_ceil"}) {
    out.push_back({{1, 2, 3, 9}, ResizeMode("nearest", "asymmetric", nearest), {1, 1, 2, 2}});
    out.push_back({{1, 1, 10, 14}, ResizeMode("nearest", "half_pixel", nearest), {1, 1, 0.5f, 0.5f}});
  }
  return out;
}

// Bilinear under each coordinate transformation, up and down.
inline std::vector<ResizeSpec> LinearTransformCases() {
  std::vector<ResizeSpec> out;
  for (const std::string coord : {"half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel"}) {
    out.push_back({{1, 2, 4, 5}, ResizeMode("linear", coord), {1, 1, 2.0f, 1.8f}});
    out.push_back({{1, 3, 13, 11}, ResizeMode("linear", coord), {}, {1, 3, 5, 1}});
  }
  return out;
}

// 1-D linear, trilinear, and resized axes before an untouched last one.
inline std::vector<ResizeSpec> Linear1DTrilinearAndUntouchedLastAxisCases() {
  return {
      {{13}, ResizeMode("linear", "half_pixel"), {}, {29}},
      {{1, 2, 3, 4, 5}, ResizeMode("linear", "align_corners"), {1, 1, 1.7f, 0.75f, 2.0f}},
      // Only a middle axis scales: the last axis stays contiguous.
      {{3, 7, 2, 11}, ResizeMode("linear", "half_pixel"), {1, 2.3f, 1, 1}},
      {{3, 5, 17}, ResizeMode("nearest", "asymmetric", "floor"), {1, 3, 1}},
  };
}

// Bicubic: transformations, cubic_coeff_a with exclude_outside, 2-D input.
inline std::vector<ResizeSpec> CubicCases() {
  Attrs a = ResizeMode("cubic", "half_pixel");
  a["cubic_coeff_a"] = -0.5f;
  a["exclude_outside"] = int64_t{1};
  return {
      {{1, 2, 5, 7}, ResizeMode("cubic", "half_pixel"), {1, 1, 1.6f, 2.0f}},
      {{1, 1, 9, 13}, ResizeMode("cubic", "align_corners"), {}, {1, 1, 4, 5}},
      {{1, 1, 4, 3}, ResizeMode("cubic", "asymmetric"), {1, 1, 2.5f, 3.0f}},
      {{2, 1, 6, 5}, a, {1, 1, 0.6f, 2.2f}},
      {{7, 3}, ResizeMode("cubic", "pytorch_half_pixel"), {}, {1, 11}},
  };
}

// tf_crop_and_resize in every mode, the roi reaching outside the input on
// both resized axes, with an extrapolation value of 10 and of 0.
inline std::vector<ResizeSpec> TfCropAndResizeCases() {
  std::vector<ResizeSpec> out;
  for (const std::string mode : {"linear", "nearest", "cubic"}) {
    Attrs a = ResizeMode(mode, "tf_crop_and_resize");
    a["extrapolation_value"] = 10.0f;
    out.push_back({{1, 2, 6, 7}, a, {}, {1, 2, 5, 9}, {0, 0, -0.2f, 0.3f, 1, 1, 0.9f, 1.4f}});
    a["extrapolation_value"] = 0.0f;
    out.push_back({{1, 1, 5, 5}, a, {1, 1, 1.4f, 0.8f}, {}, {0, 0, 0.1f, -0.3f, 1, 1, 0.8f, 0.7f}});
  }
  return out;
}

// Upsample (opset 9) nearest and linear; a Relu and a residual Add epilogue.
inline std::vector<ResizeSpec> UpsampleAndEpilogueCases() {
  ResizeSpec up{{1, 2, 3, 5}, {{"mode", std::string("nearest")}}, {1, 1, 2, 3}};
  up.op = "Upsample";
  ResizeSpec up_linear = up;
  up_linear.attrs = {{"mode", std::string("linear")}};
  ResizeSpec relu{{1, 3, 4, 5}, ResizeMode("linear", "half_pixel"), {1, 1, 2, 2}};
  relu.epilogue = "Relu";
  ResizeSpec add{{2, 3, 3, 3}, ResizeMode("nearest", "asymmetric", "floor"), {1, 1, 2, 2}};
  add.epilogue = "Add";
  return {up, up_linear, relu, add};
}

}  // namespace kiln::loop_ir_testing
