// Windowed pools over NC[D][H]W tensors with 1 to 3 spatial axes
// (codegen/loop_ir/lower_pool.cc): MaxPool (with its optional Indices) and
// AveragePool. The global pools are reductions (reduction_ops.cc).
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
#include "compiler_core/frontend/ops/window.h"
#include "compiler_core/frontend/shape_inference.h"

namespace kiln::ops {
namespace {

// ---------------------------------------------------------------------------
// MaxPool / AveragePool. Positions in the padding are skipped; AveragePool with
// count_include_pad=1 divides by the window's size clipped to the padded input.
// MaxPool's optional Indices output holds flat indices into X (row-major, or
// column-major over the spatial axes with storage_order=1).

absl::StatusOr<std::vector<TensorType>> InferPool(const Node& node, const InputTypes& in, bool is_max) {
  const TensorType& x = *in[0];
  if (is_max) {
    if (x.dtype != DType::kFloat32 && x.dtype != DType::kFloat64 && x.dtype != DType::kInt8 &&
        x.dtype != DType::kUInt8) {
      return absl::InvalidArgumentError(absl::StrCat("input '", InputName(node, 0), "' has dtype ", DTypeName(x.dtype),
                                                     "; expected f32, f64, i8 or u8"));
    }
  } else {
    RETURN_IF_ERROR(RequireF32(node, in));
  }
  RETURN_IF_ERROR(RequireSpatialRank(x, "input X"));
  if (!node.has_attr("kernel_shape")) return absl::InvalidArgumentError("attribute 'kernel_shape' is required");
  ASSIGN_OR_RETURN(Window win, ForwardWindow(node, x, 0, node.GetInts("kernel_shape", {}), true));
  std::vector<TensorType> out = {MakeType(x.dtype, NcDims(x, x.dims[1], win.out))};
  if (node.num_outputs() > 1) out.push_back(MakeType(DType::kInt64, out[0].dims));
  return out;
}

template <typename T>
void PoolKernel(const Node& node, bool is_max, const Window& w, const Tensor& xt, std::vector<Tensor>& out) {
  const int64_t planes = xt.dims()[0] * xt.dims()[1];
  const int64_t in_plane = w.in[0] * w.in[1] * w.in[2];
  const int64_t out_plane = w.out[0] * w.out[1] * w.out[2];
  const bool include_pad = node.GetInt("count_include_pad", 0) != 0;
  const bool col_major = node.GetInt("storage_order", 0) != 0;
  const T* x = xt.data<T>();
  T* y = out[0].data<T>();
  int64_t* idx = out.size() > 1 ? out[1].data<int64_t>() : nullptr;
  for (int64_t p = 0; p < planes; ++p) {
    const T* xp = x + p * in_plane;
    for (int64_t od = 0; od < w.out[0]; ++od) {
      for (int64_t oh = 0; oh < w.out[1]; ++oh) {
        for (int64_t ow = 0; ow < w.out[2]; ++ow) {
          const int64_t o[3] = {od, oh, ow};
          double best = -std::numeric_limits<double>::infinity(), sum = 0;
          int64_t best_at = -1, count = 0, padded = 1;
          int64_t lo[3], hi[3];
          for (int a = 0; a < 3; ++a) {
            int64_t start = o[a] * w.stride[a] - w.pad_begin[a];
            int64_t end = std::min(start + (w.kernel[a] - 1) * w.dilation[a] + 1, w.in[a] + w.pad_end[a]);
            padded *= (end - start + w.dilation[a] - 1) / w.dilation[a];
            lo[a] = start;
            hi[a] = end;
          }
          for (int64_t id = lo[0]; id < hi[0]; id += w.dilation[0]) {
            if (id < 0 || id >= w.in[0]) continue;
            for (int64_t ih = lo[1]; ih < hi[1]; ih += w.dilation[1]) {
              if (ih < 0 || ih >= w.in[1]) continue;
              for (int64_t iw = lo[2]; iw < hi[2]; iw += w.dilation[2]) {
                if (iw < 0 || iw >= w.in[2]) continue;
                const int64_t at = (id * w.in[1] + ih) * w.in[2] + iw;
                const double v = static_cast<double>(xp[at]);
                if (is_max) {
                  if (v > best || best_at < 0) {
                    best = v;
                    best_at = col_major ? (iw * w.in[1] + ih) * w.in[0] + id : at;
                  }
                } else {
                  sum += v;
                  ++count;
                }
              }
            }
          }
          const int64_t oi = p * out_plane + (od * w.out[1] + oh) * w.out[2] + ow;
          if (is_max) {
            y[oi] = static_cast<T>(best);
            if (idx) idx[oi] = p * in_plane + best_at;
          } else {
            const int64_t div = include_pad ? padded : count;
            y[oi] = static_cast<T>(div > 0 ? sum / static_cast<double>(div) : 0.0);
          }
        }
      }
    }
  }
}

OpDef PoolOp(bool is_max) {
  OpDef def;
  def.op_type = is_max ? "MaxPool" : "AveragePool";
  if (is_max) {  // optional Indices
    def.min_outputs = 1;
    def.num_outputs = 2;
  }
  def.attrs = {{"auto_pad", AttrKind::kString}, {"ceil_mode", AttrKind::kInt}, {"dilations", AttrKind::kInts},
               {"kernel_shape", AttrKind::kInts}, {"pads", AttrKind::kInts}, {"strides", AttrKind::kInts}};
  def.attrs.push_back(is_max ? AttrSpec{"storage_order", AttrKind::kInt} : AttrSpec{"count_include_pad", AttrKind::kInt});
  def.validate = [](const Node& node) -> absl::Status {
    RETURN_IF_ERROR(ValidateAutoPad(node));
    for (const char* name : {"ceil_mode", "storage_order", "count_include_pad"}) {
      int64_t v = node.GetInt(name, 0);
      if (v != 0 && v != 1) {
        return absl::InvalidArgumentError(absl::StrCat("attribute '", name, "' must be 0 or 1, got ", v));
      }
    }
    return absl::OkStatus();
  };
  def.infer = [is_max](const Node& node, const InputTypes& in) { return InferPool(node, in, is_max); };
  def.eval = [is_max](const Node& node, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    const TensorType xt = TensorType::Static(in[0]->dtype(), in[0]->dims());
    ASSIGN_OR_RETURN(Window win, ForwardWindow(node, xt, 0, node.GetInts("kernel_shape", {}), true));
    const Window w = win.To3D();
    return DispatchDType(in[0]->dtype(), [&](auto tag) -> absl::Status {
      PoolKernel<decltype(tag)>(node, is_max, w, *in[0], out);
      return absl::OkStatus();
    });
  };
  return def;
}

}  // namespace

void RegisterPoolOps(std::vector<OpDef>* defs) {
  defs->push_back(WithClass(OpClass::kReduction, PoolOp(true)));
  defs->push_back(WithClass(OpClass::kReduction, PoolOp(false)));
}

}  // namespace kiln::ops
