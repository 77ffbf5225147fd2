// Resize (opset 10 form Resize(X, scales) and opset 11+ form Resize(X, roi,
// scales, sizes)) and Upsample (opset 7 scales attribute, opset 9 scales input).
// Modes nearest, linear and cubic, every coordinate_transformation_mode; scales,
// sizes and roi must be constants. The kernel resizes one axis at a time, last
// axis first, as the ONNX reference does.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler_core/ops/op_families.h"
#include "compiler_core/ops/op_helpers.h"
#include "compiler_core/ops/resize_plan.h"
#include "compiler_core/shape_inference.h"
#include "compiler_core/status_macros.h"

namespace kiln::ops {
namespace {

// The f32 elements of constant input i; empty when the input is omitted or empty.
absl::StatusOr<std::vector<double>> ConstantFloats(const Node& node, int i) {
  Value* v = node.input(i);
  if (v == nullptr) return std::vector<double>{};
  if (!v->is_constant()) {
    return absl::InvalidArgumentError(absl::StrCat("input ", i, " '", v->name(),
                                                   "' must be a constant (initializer): the output shape depends on it"));
  }
  const Tensor& t = v->constant();
  if (t.dtype() != DType::kFloat32) {
    return absl::InvalidArgumentError(absl::StrCat("input ", i, " '", v->name(), "' must be f32, got ",
                                                   DTypeName(t.dtype())));
  }
  return std::vector<double>(t.data<float>(), t.data<float>() + t.num_elements());
}

absl::Status CheckChoice(const std::string& attr, const std::string& v, std::initializer_list<const char*> ok) {
  for (const char* o : ok) {
    if (v == o) return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("attribute '", attr, "' has unsupported value '", v, "'"));
}

// Output extents from scales or sizes. `dims` may hold symbols on axes with scale 1.
absl::StatusOr<ResizePlan> MakePlan(const Node& node, const std::vector<Dim>& dims, bool is_upsample) {
  ResizePlan p;
  const int64_t rank = static_cast<int64_t>(dims.size());
  std::vector<double> scales;
  std::vector<int64_t> sizes;
  // Upsample and Resize-10 are Op(X, scales); Resize-11+ always has roi/scales slots.
  bool legacy = is_upsample || (node.num_inputs() == 2 && node.input(1) != nullptr);
  if (is_upsample && node.num_inputs() == 1) {
    if (!node.has_attr("scales")) return absl::InvalidArgumentError("scales are missing (attribute or input 1)");
    for (float f : node.GetFloats("scales", {})) scales.push_back(f);
  } else if (legacy) {
    ASSIGN_OR_RETURN(scales, ConstantFloats(node, 1));
  } else {
    ASSIGN_OR_RETURN(p.roi_start, ConstantFloats(node, 1));
    ASSIGN_OR_RETURN(scales, ConstantFloats(node, 2));
    if (node.input(3) != nullptr) {
      ASSIGN_OR_RETURN(sizes, ConstantIntInput(node, 3));
    }
  }
  p.mode = node.GetString("mode", "nearest");
  if (p.mode == "bilinear") p.mode = "linear";
  if (legacy) {
    // As ONNX's Resize 10->11 version converter: asymmetric, nearest = floor.
    p.coord = "asymmetric";
    p.nearest = "floor";
  } else {
    p.coord = node.GetString("coordinate_transformation_mode", "half_pixel");
    p.nearest = node.GetString("nearest_mode", "round_prefer_floor");
    p.cubic_a = node.GetFloat("cubic_coeff_a", -0.75f);
    p.exclude_outside = node.GetInt("exclude_outside", 0) != 0;
    p.extrapolation = node.GetFloat("extrapolation_value", 0.0f);
  }
  if (!sizes.empty() && !scales.empty()) {
    return absl::InvalidArgumentError("only one of 'scales' and 'sizes' may be given");
  }
  if (sizes.empty() && scales.empty()) return absl::InvalidArgumentError("one of 'scales' and 'sizes' is required");
  const size_t n = sizes.empty() ? scales.size() : sizes.size();
  if (static_cast<int64_t>(n) != rank) {
    return absl::InvalidArgumentError(absl::StrCat(sizes.empty() ? "scales" : "sizes", " have ", n,
                                                   " entries for an input of rank ", rank));
  }
  if (p.coord == "tf_crop_and_resize") {
    if (static_cast<int64_t>(p.roi_start.size()) != 2 * rank) {
      return absl::InvalidArgumentError(absl::StrCat("roi must have ", 2 * rank, " entries for tf_crop_and_resize, got ",
                                                     p.roi_start.size()));
    }
    p.roi_end.assign(p.roi_start.begin() + rank, p.roi_start.end());
    p.roi_start.resize(rank);
  } else {
    p.roi_start.assign(rank, 0.0);
    p.roi_end.assign(rank, 1.0);
  }
  p.out.resize(rank);
  p.scale.resize(rank);
  for (int64_t i = 0; i < rank; ++i) {
    const Dim& d = dims[i];
    const bool identity = sizes.empty() ? scales[i] == 1.0 && p.coord != "tf_crop_and_resize"
                                        : d.is_static() && sizes[i] == d.value;
    if (identity) {
      p.out[i] = d.is_static() ? d.value : -1;
      p.scale[i] = 1.0;
      continue;
    }
    if (!d.is_static()) return SymbolicError(node, 0, i, d, "is resized");
    if (sizes.empty()) {
      if (!(scales[i] > 0)) {
        return absl::InvalidArgumentError(absl::StrCat("scales must be positive, got [", absl::StrJoin(scales, ","), "]"));
      }
      p.scale[i] = scales[i];
      p.out[i] = static_cast<int64_t>(
          std::floor(static_cast<double>(d.value) * (p.roi_end[i] - p.roi_start[i]) * scales[i] + 1e-9));
    } else {
      if (sizes[i] < 0) return absl::InvalidArgumentError("sizes must be non-negative");
      p.out[i] = sizes[i];
      p.scale[i] = d.value > 0 ? static_cast<double>(sizes[i]) / d.value : 1.0;
    }
  }
  return p;
}

absl::Status EvalResize(const Node& node, const InputTensors& in, std::vector<Tensor>& out, bool is_upsample) {
  const TensorType xt = TensorType::Static(in[0]->dtype(), in[0]->dims());
  ASSIGN_OR_RETURN(ResizePlan p, MakePlan(node, xt.dims, is_upsample));
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
  ASSIGN_OR_RETURN(ResizePlan p, MakePlan(node, x.dims, is_upsample));
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
               {"antialias", AttrKind::kInt}};
  def.validate = [](const Node& node) -> absl::Status {
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

void RegisterNnResizeOps(std::vector<OpDef>* defs) {
  defs->push_back(ResizeOp());
  defs->push_back(UpsampleOp());
}

}  // namespace kiln::ops
