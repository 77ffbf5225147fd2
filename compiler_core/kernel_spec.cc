// KernelSpec: validation of a workload graph and resolution of broadcasting.
#include "compiler_core/kernel_spec.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler_core/status_macros.h"

namespace kiln {
namespace {

constexpr int kMaxRank = 6;
constexpr int64_t kMaxElements = int64_t{1} << 40;

bool IsElementwiseOp(const std::string& op) {
  return op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Relu" ||
         op == "Sigmoid";
}

int ExpectedInputs(const std::string& op) {
  return (op == "Relu" || op == "Sigmoid") ? 1 : 2;
}

std::string DimsToString(const std::vector<int64_t>& d) {
  return absl::StrCat("[", absl::StrJoin(d, ","), "]");
}

absl::StatusOr<std::vector<int64_t>> Broadcast(const Node& node, const std::vector<int64_t>& a,
                                               const std::vector<int64_t>& b) {
  size_t r = std::max(a.size(), b.size());
  std::vector<int64_t> out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("node ", node.name(), " (", node.op_type(), "): shapes ", DimsToString(a),
                       " and ", DimsToString(b), " do not broadcast"));
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// Strides of `in` (row-major, dense) seen through broadcasting to `out`.
std::vector<int64_t> BroadcastStrides(const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  size_t r = out.size();
  std::vector<int64_t> strides(r, 0);
  int64_t s = 1;
  for (size_t i = in.size(); i-- > 0;) {
    size_t d = i + (r - in.size());
    strides[d] = in[i] == 1 ? 0 : s;
    s *= in[i];
  }
  return strides;
}

absl::Status AnalyzeElementwise(const Node& node, const std::vector<std::vector<int64_t>>& in_dims,
                                ElementwiseSpec* spec) {
  std::vector<int64_t> out = in_dims[0];
  for (size_t i = 1; i < in_dims.size(); ++i) {
    ASSIGN_OR_RETURN(out, Broadcast(node, out, in_dims[i]));
  }
  spec->out_dims = out;
  spec->num_elements = NumElements(out);
  std::vector<std::vector<int64_t>> full;
  for (const auto& d : in_dims) full.push_back(BroadcastStrides(d, out));
  spec->dims.clear();
  spec->strides.assign(in_dims.size(), {});
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1) continue;
    bool merge = !spec->dims.empty();
    for (size_t i = 0; merge && i < in_dims.size(); ++i) {
      merge = spec->strides[i].back() == full[i][d] * out[d];
    }
    if (merge) {
      spec->dims.back() *= out[d];
      for (size_t i = 0; i < in_dims.size(); ++i) spec->strides[i].back() = full[i][d];
    } else {
      spec->dims.push_back(out[d]);
      for (size_t i = 0; i < in_dims.size(); ++i) spec->strides[i].push_back(full[i][d]);
    }
  }
  if (spec->dims.empty()) {
    spec->dims.push_back(1);
    for (auto& s : spec->strides) s.push_back(0);
  }
  return absl::OkStatus();
}

absl::Status AnalyzeMatMul(const Node& node, const std::vector<std::vector<int64_t>>& in_dims,
                           MatMulSpec* spec, std::vector<int64_t>* out_dims) {
  auto error = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat("node ", node.name(), " (", node.op_type(), "): ", why));
  };
  const std::vector<int64_t>& a = in_dims[0];
  const std::vector<int64_t>& b = in_dims[1];
  if (node.op_type() == "Gemm") {
    if (a.size() != 2 || b.size() != 2) {
      return error(absl::StrCat("Gemm needs 2-D A and B, got ", DimsToString(a), " and ", DimsToString(b)));
    }
    bool ta = node.GetInt("transA", 0) != 0, tb = node.GetInt("transB", 0) != 0;
    spec->m = ta ? a[1] : a[0];
    spec->k = ta ? a[0] : a[1];
    int64_t kb = tb ? b[1] : b[0];
    spec->n = tb ? b[0] : b[1];
    if (kb != spec->k) {
      return error(absl::StrCat("inner dimensions differ: A ", DimsToString(a), " B ", DimsToString(b),
                                " transA=", ta, " transB=", tb));
    }
    spec->a_stride_m = ta ? 1 : spec->k;
    spec->a_stride_k = ta ? spec->m : 1;
    spec->b_stride_k = tb ? 1 : spec->n;
    spec->b_stride_n = tb ? spec->k : 1;
    spec->alpha = node.GetFloat("alpha", 1.0f);
    spec->beta = node.GetFloat("beta", 1.0f);
    spec->has_c = in_dims.size() > 2;
    if (spec->has_c) {
      const std::vector<int64_t>& c = in_dims[2];
      if (c.size() > 2) return error(absl::StrCat("C of rank ", c.size(), " does not broadcast to [M,N]"));
      int64_t c0 = c.size() == 2 ? c[0] : 1;
      int64_t c1 = c.empty() ? 1 : c.back();
      if ((c0 != 1 && c0 != spec->m) || (c1 != 1 && c1 != spec->n)) {
        return error(absl::StrCat("C ", DimsToString(c), " does not broadcast to [", spec->m, ",",
                                  spec->n, "]"));
      }
      spec->c_stride_m = c0 == 1 ? 0 : c1;
      spec->c_stride_n = c1 == 1 ? 0 : 1;
    }
    *out_dims = {spec->m, spec->n};
    return absl::OkStatus();
  }
  // MatMul, numpy semantics.
  if (a.empty() || b.empty()) return error("MatMul operands must have rank >= 1");
  bool a1 = a.size() == 1, b1 = b.size() == 1;
  spec->m = a1 ? 1 : a[a.size() - 2];
  spec->k = a.back();
  int64_t kb = b1 ? b[0] : b[b.size() - 2];
  spec->n = b1 ? 1 : b.back();
  if (kb != spec->k) {
    return error(absl::StrCat("inner dimensions differ: ", DimsToString(a), " x ", DimsToString(b)));
  }
  spec->a_stride_m = a1 ? 0 : spec->k;
  spec->a_stride_k = 1;
  spec->b_stride_k = b1 ? 1 : spec->n;
  spec->b_stride_n = 1;
  std::vector<int64_t> ab(a.begin(), a1 ? a.end() - 1 : a.end() - 2);
  std::vector<int64_t> bb(b.begin(), b1 ? b.end() - 1 : b.end() - 2);
  ASSIGN_OR_RETURN(spec->batch_dims, Broadcast(node, ab, bb));
  // Batch strides in elements: each batch of A is an M x K matrix.
  spec->a_batch_strides = BroadcastStrides(ab, spec->batch_dims);
  spec->b_batch_strides = BroadcastStrides(bb, spec->batch_dims);
  for (auto& s : spec->a_batch_strides) s *= spec->m * spec->k;
  for (auto& s : spec->b_batch_strides) s *= spec->k * spec->n;
  *out_dims = spec->batch_dims;
  if (!a1) out_dims->push_back(spec->m);
  if (!b1) out_dims->push_back(spec->n);
  return absl::OkStatus();
}

}  // namespace

int64_t MatMulSpec::num_batches() const { return NumElements(batch_dims); }

absl::StatusOr<KernelSpec> AnalyzeWorkload(const Graph& workload) {
  if (workload.nodes().size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("workload graph ", workload.name(), " has ",
                                                   workload.nodes().size(), " nodes, want 1"));
  }
  const Node& node = *workload.nodes()[0];
  KernelSpec spec;
  spec.node_name = node.name();
  spec.op_type = node.op_type();
  const std::string& op = node.op_type();
  bool elementwise = IsElementwiseOp(op);
  if (!node.domain().empty() || (!elementwise && op != "MatMul" && op != "Gemm")) {
    return absl::UnimplementedError(absl::StrCat("node ", node.name(), ": operator ",
                                                 node.domain().empty() ? "" : node.domain() + ".",
                                                 op, " has no CPU codegen"));
  }
  auto error = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("node ", node.name(), " (", op, "): ", why));
  };
  int want_min = elementwise ? ExpectedInputs(op) : 2;
  int want_max = elementwise ? want_min : (op == "Gemm" ? 3 : 2);
  std::vector<Value*> inputs = node.inputs();
  while (!inputs.empty() && inputs.back() == nullptr) inputs.pop_back();
  if (static_cast<int>(inputs.size()) < want_min || static_cast<int>(inputs.size()) > want_max) {
    return error(absl::StrCat("has ", inputs.size(), " inputs, want ", want_min,
                              want_max != want_min ? absl::StrCat("..", want_max) : ""));
  }
  if (node.num_outputs() != 1 || workload.outputs().size() != 1 ||
      workload.outputs()[0] != node.output(0)) {
    return error("the node's single output must be the workload's single output");
  }
  std::vector<std::vector<int64_t>> in_dims;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value* v = inputs[i];
    if (v == nullptr) return error(absl::StrCat("input ", i, " is omitted"));
    auto it = std::find(workload.inputs().begin(), workload.inputs().end(), v);
    if (v->is_constant() || it == workload.inputs().end()) {
      return error(absl::StrCat("input ", v->name(), " is not a workload graph input"));
    }
    if (!v->type().IsStatic() || v->type().dtype != DType::kFloat32) {
      return error(absl::StrCat("input ", v->name(), " has type ", v->type().ToString(),
                                ", want static f32"));
    }
    std::vector<int64_t> dims = v->type().StaticDims();
    if (dims.size() > kMaxRank) {
      return error(absl::StrCat("input ", v->name(), " has rank ", dims.size(), " > ", kMaxRank));
    }
    for (int64_t d : dims) {
      if (d < 0 || d > kMaxElements) return error(absl::StrCat("input ", v->name(), " has a bad dim ", d));
    }
    if (NumElements(dims) > kMaxElements) return error(absl::StrCat("input ", v->name(), " is too large"));
    spec.operand_args.push_back(static_cast<int>(it - workload.inputs().begin()));
    in_dims.push_back(std::move(dims));
  }
  for (const Value* v : workload.inputs()) {
    if (v->type().known && v->type().dtype != DType::kFloat32) {
      return error(absl::StrCat("workload input ", v->name(), " is not f32"));
    }
  }
  std::vector<int64_t> out_dims;
  if (elementwise) {
    spec.kind = KernelSpec::Kind::kElementwise;
    RETURN_IF_ERROR(AnalyzeElementwise(node, in_dims, &spec.elementwise));
    out_dims = spec.elementwise.out_dims;
  } else {
    spec.kind = KernelSpec::Kind::kMatMul;
    RETURN_IF_ERROR(AnalyzeMatMul(node, in_dims, &spec.matmul, &out_dims));
  }
  if (NumElements(out_dims) > kMaxElements) return error("output is too large");
  const Value* out = node.output(0);
  if (out->type().known) {
    if (out->type().dtype != DType::kFloat32 || !out->type().IsStatic() ||
        out->type().StaticDims() != out_dims) {
      return error(absl::StrCat("output ", out->name(), " has type ", out->type().ToString(),
                                ", want f32", DimsToString(out_dims)));
    }
  }
  spec.output_arg = static_cast<int>(workload.inputs().size());
  spec.num_args = spec.output_arg + 1;
  return spec;
}

}  // namespace kiln
