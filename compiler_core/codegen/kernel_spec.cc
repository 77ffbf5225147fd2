// KernelSpec: validation of a workload graph (a fused elementwise DAG, or a
// MatMul/Gemm anchor with an elementwise epilogue) and resolution of
// broadcasting into strides.
#include "compiler_core/codegen/kernel_spec.h"

#include <algorithm>
#include <map>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace kiln {
namespace {

constexpr int kMaxRank = 6;
constexpr int64_t kMaxElements = int64_t{1} << 40;

// Minimum and maximum input counts of a fusible operator.
std::pair<int, int> InputArity(const std::string& op) {
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") return {2, 2};
  if (op == "Max" || op == "Min") return {1, 8};
  if (op == "Clip") return {1, 3};
  return {1, 1};
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

// Resolves the leaves' broadcasting against `out` (every leaf broadcasts to it;
// a one-element leaf is a scalar of any rank).
void AnalyzeElementwise(const std::vector<std::vector<int64_t>>& in_dims, const std::vector<int64_t>& out,
                        ElementwiseSpec* spec) {
  spec->out_dims = out;
  spec->num_elements = NumElements(out);
  std::vector<std::vector<int64_t>> full;
  for (const auto& d : in_dims) {
    full.push_back(NumElements(d) == 1 ? std::vector<int64_t>(out.size(), 0) : BroadcastStrides(d, out));
  }
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
}

// True when `in` broadcasts to `out` without changing it.
bool BroadcastsTo(const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  if (in.size() > out.size()) return false;
  for (size_t i = 0; i < in.size(); ++i) {
    int64_t o = out[i + out.size() - in.size()];
    if (in[i] != 1 && in[i] != o) return false;
  }
  return true;
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
  spec->has_m_dim = !a1;
  spec->has_n_dim = !b1;
  return absl::OkStatus();
}

}  // namespace

int64_t MatMulSpec::num_batches() const { return NumElements(batch_dims); }

bool IsFusibleElementwiseOp(const std::string& op) {
  static const char* const kOps[] = {
      "Add",  "Sub", "Mul",  "Div",        "Relu",      "Sigmoid", "Neg",         "Abs",
      "Max",  "Min", "Sqrt", "Exp",        "Tanh",      "Clip",    "LeakyRelu",   "HardSigmoid",
      "HardSwish", "Reciprocal", "Erf",   "Gelu"};
  for (const char* o : kOps) {
    if (op == o) return true;
  }
  return false;
}

absl::StatusOr<KernelSpec> AnalyzeWorkload(const Graph& workload) {
  if (workload.nodes().empty() || workload.outputs().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("workload graph ", workload.name(), " has no nodes or no outputs"));
  }
  // Operators first: an unsupported one is UNIMPLEMENTED whatever else is wrong.
  const Node* anchor = nullptr;
  for (const auto& n : workload.nodes()) {
    const std::string& op = n->op_type();
    bool anchor_op = op == "MatMul" || op == "Gemm";
    if (!n->domain().empty() || (!anchor_op && !IsFusibleElementwiseOp(op))) {
      return absl::UnimplementedError(absl::StrCat("node ", n->name(), ": operator ",
                                                   n->domain().empty() ? "" : n->domain() + ".", op,
                                                   " has no CPU codegen"));
    }
    if (anchor_op && anchor != nullptr) {
      return absl::UnimplementedError(absl::StrCat("node ", n->name(), " (", op,
                                                   "): a workload fuses at most one MatMul/Gemm (",
                                                   anchor->name(), " is the first)"));
    }
    if (anchor_op) anchor = n.get();
  }
  const Node& first = *workload.nodes()[0];
  KernelSpec spec;
  spec.node_name = anchor != nullptr ? anchor->name() : first.name();
  std::vector<std::string> ops;
  for (const auto& n : workload.nodes()) ops.push_back(n->op_type());
  spec.op_type = absl::StrJoin(ops, "+");

  // Workload inputs: static f32 buffers of sane size.
  std::map<const Value*, std::vector<int64_t>> dims_of;
  std::map<const Value*, int> input_index;
  for (size_t i = 0; i < workload.inputs().size(); ++i) {
    const Value* v = workload.inputs()[i];
    auto error = [&](const std::string& why) {
      return absl::InvalidArgumentError(absl::StrCat("workload input ", v->name(), ": ", why));
    };
    if (!v->type().known || !v->type().IsStatic() || v->type().dtype != DType::kFloat32) {
      return error(absl::StrCat("has type ", v->type().ToString(), ", want static f32"));
    }
    std::vector<int64_t> dims = v->type().StaticDims();
    if (dims.size() > kMaxRank) return error(absl::StrCat("has rank ", dims.size(), " > ", kMaxRank));
    for (int64_t d : dims) {
      if (d < 0 || d > kMaxElements) return error(absl::StrCat("has a bad dim ", d));
    }
    if (NumElements(dims) > kMaxElements) return error("is too large");
    dims_of[v] = std::move(dims);
    input_index[v] = static_cast<int>(i);
  }

  // Nodes in order: every read value is a workload input or computed earlier;
  // output dims follow from broadcasting (elementwise) or the anchor's shapes.
  std::vector<const Value*> leaves;  // workload inputs read by elementwise nodes
  std::map<const Value*, int> slot;  // value -> program slot (assigned below)
  for (const auto& np : workload.nodes()) {
    const Node& node = *np;
    const std::string& op = node.op_type();
    auto error = [&](const std::string& why) {
      return absl::InvalidArgumentError(absl::StrCat("node ", node.name(), " (", op, "): ", why));
    };
    bool is_anchor = &node == anchor;
    std::vector<Value*> inputs = node.inputs();
    while (!inputs.empty() && inputs.back() == nullptr) inputs.pop_back();
    auto [want_min, want_max] = is_anchor ? std::pair<int, int>{2, op == "Gemm" ? 3 : 2} : InputArity(op);
    if (static_cast<int>(inputs.size()) < want_min || static_cast<int>(inputs.size()) > want_max) {
      return error(absl::StrCat("has ", inputs.size(), " inputs, want ", want_min,
                                want_max != want_min ? absl::StrCat("..", want_max) : ""));
    }
    if (node.num_outputs() != 1 || node.output(0) == nullptr) return error("must have exactly one output");
    std::vector<std::vector<int64_t>> in_dims;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Value* v = inputs[i];
      if (v == nullptr) {
        if (op == "Clip" && i > 0) {
          in_dims.emplace_back();
          continue;
        }
        return error(absl::StrCat("input ", i, " is omitted"));
      }
      auto it = dims_of.find(v);
      if (v->is_constant() || it == dims_of.end()) {
        return error(absl::StrCat("input ", v->name(),
                                  " is neither a workload graph input nor computed by an earlier node"));
      }
      bool from_input = input_index.count(v) > 0;
      if (is_anchor && !from_input) {
        return error(absl::StrCat("input ", v->name(), " is not a workload graph input"));
      }
      if (!is_anchor && from_input && std::find(leaves.begin(), leaves.end(), v) == leaves.end()) {
        leaves.push_back(v);
      }
      in_dims.push_back(it->second);
    }
    std::vector<int64_t> out_dims;
    if (is_anchor) {
      spec.kind = KernelSpec::Kind::kMatMul;
      for (const Value* v : inputs) spec.operand_args.push_back(input_index[v]);
      RETURN_IF_ERROR(AnalyzeMatMul(node, in_dims, &spec.matmul, &out_dims));
      spec.matmul.out_dims = out_dims;
    } else if (op == "Clip") {
      out_dims = in_dims[0];
      for (size_t i = 1; i < inputs.size(); ++i) {
        if (inputs[i] != nullptr && NumElements(in_dims[i]) != 1) {
          return error(absl::StrCat("bound ", inputs[i]->name(), " ", DimsToString(in_dims[i]),
                                    " is not a scalar"));
        }
      }
    } else {
      out_dims = in_dims[0];
      for (size_t i = 1; i < in_dims.size(); ++i) {
        ASSIGN_OR_RETURN(out_dims, Broadcast(node, out_dims, in_dims[i]));
      }
    }
    if (op == "Gelu") {
      std::string a = node.GetString("approximate", "none");
      if (a != "none" && a != "tanh") return error(absl::StrCat("approximate=\"", a, "\" is not none or tanh"));
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
    if (dims_of.count(out) > 0) return error(absl::StrCat("output ", out->name(), " is defined twice"));
    dims_of[out] = std::move(out_dims);
  }

  // The shape every value is evaluated at: the anchor's result, or the outputs'.
  std::vector<int64_t> full = anchor != nullptr ? spec.matmul.out_dims : std::vector<int64_t>();
  for (size_t j = 0; j < workload.outputs().size(); ++j) {
    const Value* v = workload.outputs()[j];
    if (v == nullptr || v->producer() == nullptr || input_index.count(v) > 0 || dims_of.count(v) == 0) {
      return absl::UnimplementedError(absl::StrCat("workload graph ", workload.name(), ": output ", j,
                                                   " is not computed by a node of the workload"));
    }
    if (anchor == nullptr && j == 0) full = dims_of[v];
    if (dims_of[v] != full) {
      return absl::UnimplementedError(absl::StrCat(
          "workload graph ", workload.name(), ": output ", v->name(), " ", DimsToString(dims_of[v]),
          " differs from the kernel's iteration shape ", DimsToString(full)));
    }
  }
  for (const auto& np : workload.nodes()) {
    if (np.get() == anchor) continue;
    const Value* v = np->output(0);
    if (!BroadcastsTo(dims_of[v], full)) {
      return absl::UnimplementedError(absl::StrCat("node ", np->name(), " (", np->op_type(), "): result ",
                                                   DimsToString(dims_of[v]),
                                                   " is larger than the kernel's iteration shape ",
                                                   DimsToString(full)));
    }
  }

  // Leaves in workload-input order (deterministic), then one slot per op.
  std::sort(leaves.begin(), leaves.end(),
            [&](const Value* a, const Value* b) { return input_index[a] < input_index[b]; });
  ElementwiseProgram& prog = spec.program;
  int next = 0;
  if (anchor != nullptr) slot[anchor->output(0)] = next++;
  for (const Value* v : leaves) slot[v] = next++;
  prog.num_leaves = next;
  for (const auto& np : workload.nodes()) {
    const Node& node = *np;
    if (&node == anchor) continue;
    ElementwiseOp e;
    e.op_type = node.op_type();
    e.node_name = node.name();
    std::vector<Value*> inputs = node.inputs();
    while (!inputs.empty() && inputs.back() == nullptr) inputs.pop_back();
    for (const Value* v : inputs) e.inputs.push_back(v == nullptr ? -1 : slot.at(v));
    if (e.op_type == "LeakyRelu") e.alpha = node.GetFloat("alpha", 0.01f);
    if (e.op_type == "HardSigmoid") {
      e.alpha = node.GetFloat("alpha", 0.2f);
      e.beta = node.GetFloat("beta", 0.5f);
    }
    if (e.op_type == "Clip") {
      if (node.has_attr("min")) e.lo = node.GetFloat("min", 0.0f);
      if (node.has_attr("max")) e.hi = node.GetFloat("max", 0.0f);
    }
    if (e.op_type == "Gelu") e.tanh_approx = node.GetString("approximate", "none") == "tanh";
    slot[node.output(0)] = next++;
    prog.ops.push_back(std::move(e));
  }
  for (const Value* v : workload.outputs()) prog.results.push_back(slot.at(v));

  int num_inputs = static_cast<int>(workload.inputs().size());
  for (size_t j = 0; j < workload.outputs().size(); ++j) {
    spec.output_args.push_back(num_inputs + static_cast<int>(j));
  }
  spec.num_args = num_inputs + static_cast<int>(workload.outputs().size());
  std::vector<std::vector<int64_t>> leaf_dims;
  for (const Value* v : leaves) leaf_dims.push_back(dims_of[v]);
  if (anchor == nullptr) {
    spec.kind = KernelSpec::Kind::kElementwise;
    for (const Value* v : leaves) spec.operand_args.push_back(input_index[v]);
    AnalyzeElementwise(leaf_dims, full, &spec.elementwise);
    return spec;
  }
  const MatMulSpec& mm = spec.matmul;
  for (size_t i = 0; i < leaves.size(); ++i) {
    std::vector<int64_t> st = NumElements(leaf_dims[i]) == 1 ? std::vector<int64_t>(full.size(), 0)
                                                             : BroadcastStrides(leaf_dims[i], full);
    EpilogueOperand op;
    op.arg = input_index[leaves[i]];
    size_t d = 0;
    for (; d < mm.batch_dims.size(); ++d) op.batch_strides.push_back(st[d]);
    if (mm.has_m_dim) op.stride_m = st[d++];
    if (mm.has_n_dim) op.stride_n = st[d++];
    spec.epilogue.push_back(std::move(op));
  }
  return spec;
}

}  // namespace kiln
