// Shared knob and form helpers of the loop-IR lowerings.
#include "compiler_core/codegen/loop_ir/lower_common.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace kiln::loop_ir {

absl::Status CheckWorkload(const Graph& g, const std::function<bool(const Value*)>& accepts,
                           const std::string& what, const Node* domain_node) {
  if (g.nodes().empty() || g.outputs().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("workload graph ", g.name(), " has no nodes or no outputs"));
  }
  for (const Value* v : g.values()) {
    if (v->is_constant() && v->users().empty()) continue;
    const TensorType& t = v->type();
    if (!t.known || !t.IsStatic() || !accepts(v)) {
      return absl::UnimplementedError(absl::StrCat("value ", v->name(), " is not a static ", what));
    }
    if (NumElements(t.StaticDims()) > (int64_t{1} << 31)) {
      return absl::UnimplementedError(absl::StrCat("value ", v->name(), " is too large"));
    }
  }
  for (const auto& n : g.nodes()) {
    if (!n->domain().empty() && n.get() != domain_node) return absl::UnimplementedError(absl::StrCat("node ", n->name(), " has a domain"));
  }
  return absl::OkStatus();
}

bool IsStructuralInt(const Value* v) {
  DType t = v->type().dtype;
  return v->is_constant() && (t == DType::kInt64 || t == DType::kInt32);
}

absl::Status CheckWorkloadBasics(const Graph& g, const Node* domain_node) {
  return CheckWorkload(
      g, [](const Value* v) { return IsStructuralInt(v) || v->type().dtype == DType::kFloat32; }, "f32 tensor",
      domain_node);
}

absl::Status CheckWorkloadTypes(const Graph& g) {
  return CheckWorkload(
      g, [](const Value* v) { return DTypeSize(v->type().dtype) != 0; }, "tensor of a known dtype");
}

double EvenShare(const std::vector<int64_t>& work, int64_t threads) {
  int64_t total = 0;
  for (int64_t w : work) total += w;
  if (total <= 0 || threads <= 1) return 1.0;
  const int64_t tasks = static_cast<int64_t>(work.size());
  const int64_t runs = std::min(tasks, threads), base = tasks / runs, rem = tasks % runs;
  int64_t largest = 0;
  for (int64_t r = 0, begin = 0; r < runs; ++r) {
    const int64_t end = begin + base + (r < rem ? 1 : 0);
    int64_t share = 0;
    for (int64_t t = begin; t < end; ++t) share += work[t];
    largest = std::max(largest, share);
    begin = end;
  }
  return static_cast<double>(total) / static_cast<double>(threads) / static_cast<double>(largest);
}

int EvenShareRank(const std::vector<int64_t>& work) {
  return (EvenShare(work, 2) >= 0.9 ? 2 : 0) + (EvenShare(work, 4) >= 0.9 ? 1 : 0);
}

int WidestElementBytes(const Graph& g) {
  int64_t widest = 4;
  for (const Value* v : g.values()) {
    if (v->is_constant() && v->users().empty()) continue;
    if (IsStructuralInt(v)) continue;
    widest = std::max<int64_t>(widest, DTypeSize(v->type().dtype));
  }
  return static_cast<int>(widest);
}

int64_t MaxLanesFor(const CpuTarget& target, int elem_bytes) {
  return std::max<int64_t>(1, target.FloatLanes() * 4 / std::max(elem_bytes, 4));
}

std::vector<int64_t> VectorWidthsFor(const CpuTarget& target, int64_t extent, int elem_bytes) {
  std::vector<int64_t> out;
  for (int64_t vw : {1, 4, 8, 16}) {
    if (vw > MaxLanesFor(target, elem_bytes)) break;
    if (!out.empty() && out.back() >= extent) break;
    out.push_back(vw);
  }
  return out;
}

std::vector<int64_t> VectorWidths(const CpuTarget& target, int64_t extent) {
  std::vector<int64_t> out;
  for (int64_t vw : {1, 4, 8, 16}) {
    if (vw > target.FloatLanes()) break;
    if (!out.empty() && out.back() >= extent) break;
    out.push_back(vw);
  }
  return out;
}

std::vector<int64_t> TaskCounts(int64_t elements, bool can_parallelize) {
  if (!can_parallelize || elements < 4096) return {1};
  return {1, 16};
}

ScheduleConfig PickDefault(const std::vector<ScheduleConfig>& space, const CpuTarget& target) {
  return BestBy(space, [&](const ScheduleConfig& x) {
    return std::make_pair(std::min<int64_t>(x.Get("vw", 1), target.FloatLanes()), x.Get("tasks", 1));
  });
}

absl::Status ValidateKnobs(const Graph& g, const ScheduleConfig& c, const CpuTarget& target,
                           const std::vector<std::string>& known) {
  for (const auto& [k, v] : c.knobs) {
    if (std::find(known.begin(), known.end(), k) == known.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("schedule ", c.ToString(), ": knob ", k, " does not apply to workload ", g.name()));
    }
    bool ok = true;
    if (k == "vw") ok = v >= 1 && v <= target.FloatLanes() && (v & (v - 1)) == 0;
    if (k == "tasks") ok = v >= 1 && v <= 1024;
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("schedule ", c.ToString(), ": knob ", k, "=", v, " out of range for target ", target.Key()));
    }
  }
  return absl::OkStatus();
}

AnchorOutputs PlanAnchorOutputs(const Graph& g, const Value* anchor_value, int skip) {
  const int num_out = static_cast<int>(g.outputs().size());
  AnchorOutputs a;
  a.raw = -1;
  for (int j = num_out - 1; j >= 0; --j) {
    if (j != skip && (a.raw < 0 || g.outputs()[j] == anchor_value)) a.raw = j;
  }
  for (int j = 0; j < num_out; ++j) {
    if (j != a.raw && j != skip) a.order.push_back(j);
  }
  if (g.outputs()[a.raw] != anchor_value) a.order.push_back(a.raw);
  return a;
}

absl::StatusOr<Stmt> StoreThroughEpilogue(const Graph& g, GraphExpr& ge, const Value* anchor, const AnchorOutputs& outs,
                                          Expr value, const std::vector<Expr>& idx, Expr oi) {
  std::vector<Stmt> st;
  const Buffer& raw = ge.output_buffer(outs.raw);
  if (g.outputs()[outs.raw] == anchor) st.push_back(Store(raw, oi, Cast(raw->dtype, value)));
  ge.BindValue(anchor, value);
  for (int j : outs.order) {
    ASSIGN_OR_RETURN(Expr e, ge.At(g.outputs()[j], idx));
    const Buffer& out = ge.output_buffer(j);
    st.push_back(Store(out, oi, Cast(out->dtype, e)));
  }
  return Block(st);
}

Stmt VectorChunks(const std::string& outer, const std::string& inner, int64_t extent, int64_t vw,
                  const std::function<Stmt(Expr index, Expr guard)>& body) {
  const int64_t whole = extent / vw;
  std::vector<Stmt> parts;
  if (whole > 0) {
    Expr index = Add(Mul(Var(outer), IntImm(vw)), Var(inner));
    parts.push_back(For(outer, IntImm(whole), For(inner, IntImm(vw), body(index, nullptr), ForKind::kVectorized)));
  }
  if (extent % vw != 0) {
    Expr index = Add(IntImm(whole * vw), Var(inner));
    parts.push_back(For(inner, IntImm(vw), body(index, Lt(index, IntImm(extent))), ForKind::kVectorized));
  }
  return parts.size() == 1 ? parts[0] : Block(parts);
}

}  // namespace kiln::loop_ir
