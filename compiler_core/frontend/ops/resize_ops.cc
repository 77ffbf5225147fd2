// Resize and Upsample (codegen/loop_ir/lower_resize.cc): every mode and
// coordinate transformation, sharing their taps with the lowering through
// resize_plan.h.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "compiler_core/frontend/ops/op_families.h"
#include "compiler_core/frontend/ops/op_helpers.h"
#include "compiler_core/frontend/ops/resize_plan.h"
#include "compiler_core/frontend/shape_inference.h"

namespace kiln::ops {
namespace {

absl::Status CheckChoice(const std::string& attr, const std::string& v, std::initializer_list<const char*> ok) {
  for (const char* o : ok) {
    if (v == o) return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("attribute '", attr, "' has unsupported value '", v, "'"));
}

absl::Status EvalResize(const Node& node, const InputTensors& in, std::vector<Tensor>& out, bool is_upsample) {
  const TensorType xt = TensorType::Static(in[0]->dtype(), in[0]->dims());
  ASSIGN_OR_RETURN(ResizePlan p, MakeResizePlan(node, xt.dims, is_upsample));
  std::vector<int64_t> dims = in[0]->dims();
  std::vector<double> cur(in[0]->data<float>(), in[0]->data<float>() + in[0]->num_elements());
  for (int axis = static_cast<int>(dims.size()) - 1; axis >= 0; --axis) {
    const int64_t n_in = dims[axis], n_out = p.out[axis];
    if (p.scale[axis] == 1.0 && n_in == n_out && p.coord != "tf_crop_and_resize") continue;
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; ++i) outer *= dims[i];
    for (size_t i = axis + 1; i < dims.size(); ++i) inner *= dims[i];
    std::vector<std::vector<ResizeTap>> taps(n_out);
    for (int64_t o = 0; o < n_out; ++o) taps[o] = ResizeTaps(p, axis, o, n_in);
    std::vector<double> next(outer * n_out * inner, 0.0);
    for (int64_t a = 0; a < outer; ++a) {
      for (int64_t o = 0; o < n_out; ++o) {
        double* dst = next.data() + (a * n_out + o) * inner;
        if (taps[o].empty()) {
          std::fill(dst, dst + inner, p.extrapolation);
          continue;
        }
        for (const ResizeTap& t : taps[o]) {
          const double* src = cur.data() + (a * n_in + t.index) * inner;
          for (int64_t i = 0; i < inner; ++i) dst[i] += t.weight * src[i];
        }
      }
    }
    cur = std::move(next);
    dims[axis] = n_out;
  }
  float* y = out[0].data<float>();
  for (size_t i = 0; i < cur.size(); ++i) y[i] = static_cast<float>(cur[i]);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<TensorType>> InferResize(const Node& node, const InputTypes& in, bool is_upsample) {
  const TensorType& x = *in[0];
  if (x.dtype != DType::kFloat32) {
    return absl::InvalidArgumentError(absl::StrCat("input '", InputName(node, 0), "' has dtype ",
                                                   DTypeName(x.dtype), "; only f32 is supported"));
  }
  ASSIGN_OR_RETURN(ResizePlan p, MakeResizePlan(node, x.dims, is_upsample));
  std::vector<Dim> dims;
  for (size_t i = 0; i < x.dims.size(); ++i) dims.push_back(p.out[i] < 0 ? x.dims[i] : Dim::Static(p.out[i]));
  return std::vector<TensorType>{MakeType(DType::kFloat32, std::move(dims))};
}

OpDef ResizeOp() {
  OpDef def;
  def.op_type = "Resize";
  def.min_inputs = 1;
  def.max_inputs = 4;
  def.attrs = {{"mode", AttrKind::kString},
               {"coordinate_transformation_mode", AttrKind::kString},
               {"nearest_mode", AttrKind::kString},
               {"cubic_coeff_a", AttrKind::kFloat},
               {"exclude_outside", AttrKind::kInt},
               {"extrapolation_value", AttrKind::kFloat},
               {"antialias", AttrKind::kInt},
               {"keep_aspect_ratio_policy", AttrKind::kString}};
  def.validate = [](const Node& node) -> absl::Status {
    // Only with `sizes` would another policy change the result; exporters
    // write the default explicitly.
    RETURN_IF_ERROR(CheckChoice("keep_aspect_ratio_policy", node.GetString("keep_aspect_ratio_policy", "stretch"),
                                {"stretch"}));
    RETURN_IF_ERROR(CheckChoice("mode", node.GetString("mode", "nearest"), {"nearest", "linear", "cubic"}));
    RETURN_IF_ERROR(CheckChoice("coordinate_transformation_mode",
                                node.GetString("coordinate_transformation_mode", "half_pixel"),
                                {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                                 "tf_half_pixel_for_nn", "tf_crop_and_resize"}));
    RETURN_IF_ERROR(CheckChoice("nearest_mode", node.GetString("nearest_mode", "round_prefer_floor"),
                                {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}));
    if (node.GetInt("antialias", 0) != 0) {
      return absl::InvalidArgumentError("attribute 'antialias' = 1 is not supported");
    }
    return absl::OkStatus();
  };
  def.infer = [](const Node& node, const InputTypes& in) { return InferResize(node, in, false); };
  def.eval = [](const Node& node, const InputTensors& in, std::vector<Tensor>& out) {
    return EvalResize(node, in, out, false);
  };
  return def;
}

OpDef UpsampleOp() {
  OpDef def;
  def.op_type = "Upsample";
  def.min_inputs = 1;
  def.max_inputs = 2;
  def.attrs = {{"mode", AttrKind::kString}, {"scales", AttrKind::kFloats}};
  def.validate = [](const Node& node) -> absl::Status {
    return CheckChoice("mode", node.GetString("mode", "nearest"), {"nearest", "linear", "bilinear"});
  };
  def.infer = [](const Node& node, const InputTypes& in) { return InferResize(node, in, true); };
  def.eval = [](const Node& node, const InputTensors& in, std::vector<Tensor>& out) {
    return EvalResize(node, in, out, true);
  };
  return def;
}

}  // namespace

void RegisterResizeOps(std::vector<OpDef>* defs) {
  defs->push_back(WithClass(OpClass::kDataMovement, ResizeOp()));
  defs->push_back(WithClass(OpClass::kDataMovement, UpsampleOp()));
}

}  // namespace kiln::ops
