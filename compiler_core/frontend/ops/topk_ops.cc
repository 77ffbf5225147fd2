// TopK (codegen/loop_ir/lower_topk.cc): the k largest or smallest values
// along an axis and their int64 indices.
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
#include "compiler_core/frontend/shape_inference.h"

namespace kiln::ops {
namespace {

// ---------------------------------------------------------------------------
// TopK: the k largest (or smallest) along `axis`, values and i64 indices, always
// sorted; equal values keep the lower index first. K must be a constant.

absl::StatusOr<int64_t> TopKCount(const Node& node) {
  ASSIGN_OR_RETURN(std::vector<int64_t> k, ConstantIntInput(node, 1));
  if (k.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("input 'K' must hold one element, got ", k.size()));
  }
  if (k[0] < 0) return absl::InvalidArgumentError(absl::StrCat("K must be >= 0, got ", k[0]));
  return k[0];
}

OpDef TopKOp() {
  OpDef def;
  def.op_type = "TopK";
  def.min_inputs = def.max_inputs = 2;
  def.num_outputs = 2;
  def.attrs = {{"axis", AttrKind::kInt}, {"largest", AttrKind::kInt}, {"sorted", AttrKind::kInt}};
  def.validate = [](const Node& node) -> absl::Status {
    RETURN_IF_ERROR(RequireBool01(node, "largest", 1));
    return RequireBool01(node, "sorted", 1);
  };
  def.infer = [](const Node& node, const InputTypes& in) -> absl::StatusOr<std::vector<TensorType>> {
    const TensorType& x = *in[0];
    RETURN_IF_ERROR(RequireNumeric(node, x, 0));
    if (x.rank() == 0) return absl::InvalidArgumentError("input must have rank >= 1");
    ASSIGN_OR_RETURN(int64_t axis, ResolveAxis(node.GetInt("axis", -1), x.rank(), "attribute 'axis'"));
    ASSIGN_OR_RETURN(int64_t k, TopKCount(node));
    const Dim& d = x.dims[axis];
    if (!d.is_static()) return SymbolicError(node, 0, axis, d, "is the TopK axis");
    if (k > d.value) {
      return absl::InvalidArgumentError(absl::StrCat("K = ", k, " exceeds dimension ", axis, " of ", x.ToString()));
    }
    std::vector<Dim> dims = x.dims;
    dims[axis] = Dim::Static(k);
    return std::vector<TensorType>{MakeType(x.dtype, dims), MakeType(DType::kInt64, dims)};
  };
  def.eval = [](const Node& node, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    ASSIGN_OR_RETURN(int64_t axis, ResolveAxis(node.GetInt("axis", -1), in[0]->rank(), "attribute 'axis'"));
    ASSIGN_OR_RETURN(int64_t k, TopKCount(node));
    const bool largest = node.GetInt("largest", 1) != 0;
    return DispatchDType(in[0]->dtype(), [&](auto tag) -> absl::Status {
      using T = decltype(tag);
      AxisSplit s = SplitAt(in[0]->dims(), axis);
      const T* px = in[0]->data<T>();
      T* pv = out[0].data<T>();
      int64_t* pi = out[1].data<int64_t>();
      std::vector<int64_t> idx(s.n);
      for (int64_t o = 0; o < s.outer; ++o) {
        for (int64_t i = 0; i < s.inner; ++i) {
          const T* base = px + o * s.n * s.inner + i;
          std::iota(idx.begin(), idx.end(), 0);
          auto cmp = [&](int64_t a, int64_t b) {
            T va = base[a * s.inner], vb = base[b * s.inner];
            if (va != vb) return largest ? va > vb : va < vb;
            return a < b;
          };
          std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), cmp);
          for (int64_t j = 0; j < k; ++j) {
            int64_t at = (o * k + j) * s.inner + i;
            pv[at] = base[idx[j] * s.inner];
            pi[at] = idx[j];
          }
        }
      }
      return absl::OkStatus();
    });
  };
  return def;
}

}  // namespace

void RegisterTopKOps(std::vector<OpDef>* defs) {
  defs->push_back(WithClass(OpClass::kOpaque, TopKOp()));
}

}  // namespace kiln::ops
