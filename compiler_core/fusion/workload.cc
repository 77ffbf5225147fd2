// Cutting fusion groups out as canonical standalone graphs, and keying them.
#include "compiler_core/fusion/workload.h"

#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/digest.h"
#include "base/status_macros.h"
#include "compiler_core/frontend/ops/conv_blocking.h"

namespace kiln {
namespace {

int64_t ElementsOf(const Value* v) {
  return v->type().IsStatic() ? NumElements(v->type().StaticDims()) : 0;
}

// Floating-point operations of one node: 2 per multiply-add of the
// contractions (MatMul, Gemm, kiln.PackedMatMul, Conv, ConvTranspose,
// kiln.BlockedConv, kiln.Recurrence's state times weights), one per output
// element otherwise.
double FlopsOf(const Node& n) {
  auto static_dims = [](const Value* v) {
    return v != nullptr && v->type().IsStatic() ? v->type().StaticDims() : std::vector<int64_t>{};
  };
  if ((n.op_type() == "Conv" || n.op_type() == "ConvTranspose") && n.domain().empty()) {
    // Per output (Conv) or input (ConvTranspose) element: W's dim 1 (the
    // other side's channels of one group) times the kernel window.
    std::vector<int64_t> w = static_dims(n.input(1));
    const Value* side = n.op_type() == "Conv" ? n.output(0) : n.input(0);
    if (w.size() < 3 || side == nullptr || !side->type().IsStatic()) return 0;
    double macs = static_cast<double>(w[1]);
    for (size_t i = 2; i < w.size(); ++i) macs *= static_cast<double>(w[i]);
    return 2.0 * static_cast<double>(ElementsOf(side)) * macs;
  }
  if (n.op_type() == "BlockedConv" && n.domain() == "kiln") {  // as the Conv of its unblocked W [K, C/g, k...]
    std::vector<int64_t> w = ops::UnblockedWeightDims(static_dims(n.input(1)), static_dims(n.input(0)).size());
    if (w.empty() || !n.output(0)->type().IsStatic()) return 0;
    double macs = 1;
    for (size_t i = 1; i < w.size(); ++i) macs *= static_cast<double>(w[i]);
    return 2.0 * static_cast<double>(ElementsOf(n.output(0))) * macs;
  }
  if (n.op_type() == "Recurrence" && n.domain() == "kiln") {  // T*B*ND steps of [H] x [H, G*H]
    std::vector<int64_t> xp = static_dims(n.input(0)), rt = static_dims(n.input(1));
    if (xp.size() != 3 || rt.size() != 3) return 0;
    return 2.0 * static_cast<double>(xp[0] * xp[1] * rt[0]) * static_cast<double>(rt[1] * rt[2]);
  }
  const bool packed = n.op_type() == "PackedMatMul" && n.domain() == "kiln";
  if (n.op_type() == "MatMul" || n.op_type() == "Gemm" || packed) {
    const Value* a = n.input(0);
    const Value* y = n.output(0);
    if (!a || !a->type().IsStatic() || !y->type().IsStatic()) return 0;
    std::vector<int64_t> ad = a->type().StaticDims();
    int64_t k = ad.empty() ? 1 : ad.back();
    if ((n.op_type() == "Gemm" || packed) && n.GetInt("transA", 0) && !ad.empty()) k = ad.front();
    return 2.0 * static_cast<double>(ElementsOf(y)) * static_cast<double>(k);
  }
  return static_cast<double>(ElementsOf(n.output(0)));
}

}  // namespace

bool IsStructuralConstant(const Value* v) {
  if (!v || !v->is_constant()) return false;
  DType t = v->constant().dtype();
  int64_t n = v->constant().num_elements();
  if ((t == DType::kInt64 || t == DType::kInt32) && n <= 64) return true;
  // Resize's roi and scales (they decide the kernel's index tables) and Pad's
  // constant value: two nodes that differ only there are different workloads.
  if (n > 16 || v->users().empty()) return false;
  for (const Node* u : v->users()) {
    bool resize = u->op_type() == "Resize" || u->op_type() == "Upsample";
    bool pad = u->op_type() == "Pad";
    if (!resize && !pad) return false;
    for (size_t i = 0; i < u->inputs().size(); ++i) {
      if (u->inputs()[i] != v) continue;
      if (i == 0 || (pad && i != 2) || (resize && t != DType::kFloat32)) return false;
    }
  }
  return true;
}

absl::StatusOr<Workload> ExtractWorkload(const Graph& graph, const FusionGroup& group) {
  Workload w;
  w.kind = group.kind;
  auto g = std::make_unique<Graph>();
  g->set_name("workload");
  g->set_opset_version(graph.opset_version());
  std::unordered_map<const Value*, Value*> map;
  for (size_t i = 0; i < group.inputs.size(); ++i) {
    const Value* v = group.inputs[i];
    if (!v->type().IsStatic()) {
      return absl::InvalidArgumentError(absl::StrCat("value '", v->name(), "' has no static shape (",
                                                     v->type().ToString(), "); bind it with --shape"));
    }
    ASSIGN_OR_RETURN(Value * nv, g->AddInput(absl::StrCat("in", i), v->type()));
    map[v] = nv;
  }
  std::unordered_map<const Value*, int> output_index;
  for (size_t i = 0; i < group.outputs.size(); ++i) output_index[group.outputs[i]] = static_cast<int>(i);
  int temp = 0;
  std::vector<std::string> ops;
  std::string constants_text;
  for (size_t ni = 0; ni < group.nodes.size(); ++ni) {
    const Node* n = group.nodes[ni];
    std::vector<Value*> ins, outs;
    for (Value* v : n->inputs()) {
      if (!v) {
        ins.push_back(nullptr);
        continue;
      }
      auto it = map.find(v);
      if (it == map.end() && IsStructuralConstant(v)) {
        std::string name = absl::StrCat("c", g->constants().size());
        ASSIGN_OR_RETURN(Value * nv, g->AddConstant(name, v->constant()));
        absl::StrAppend(&constants_text, "const %", name, " = ", v->constant().DebugString(64), "\n");
        it = map.emplace(v, nv).first;
      }
      if (it == map.end()) {
        return absl::InternalError(absl::StrCat("group ", group.index, ": value '", v->name(),
                                                "' is neither a group input nor computed inside"));
      }
      ins.push_back(it->second);
    }
    for (Value* v : n->outputs()) {
      auto oi = output_index.find(v);
      std::string name = oi != output_index.end() ? absl::StrCat("out", oi->second) : absl::StrCat("t", temp++);
      ASSIGN_OR_RETURN(Value * nv, g->AddValue(name, v->type()));
      map[v] = nv;
      outs.push_back(nv);
    }
    RETURN_IF_ERROR(g->AddNode(n->op_type(), absl::StrCat("n", ni), ins, outs, n->attrs(), n->domain()).status());
    ops.push_back(n->op_type());
    w.flops += FlopsOf(*n);
  }
  for (Value* v : group.outputs) g->AddOutput(map[v]);
  for (Value* v : g->inputs()) w.bytes += static_cast<double>(ElementsOf(v) * DTypeSize(v->type().dtype));
  for (Value* v : g->outputs()) w.bytes += static_cast<double>(ElementsOf(v) * DTypeSize(v->type().dtype));
  w.op_summary = absl::StrJoin(ops, "+");
  w.canonical_text = g->ToText() + constants_text;
  w.key = Sha256Hex(w.canonical_text);
  w.graph = std::move(g);
  return w;
}

}  // namespace kiln
