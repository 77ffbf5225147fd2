// The data-movement family's index rules (see lower_data_movement.h).
#include "compiler_core/codegen/loop_ir/lower_data_movement.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compiler_core/codegen/loop_ir/lower_elementwise.h"
#include "compiler_core/frontend/ops/op_helpers.h"

namespace kiln::loop_ir {
namespace {

// Per-axis start and step of a Slice, after ONNX clamping.
absl::Status SliceParams(const Node& n, std::vector<int64_t>* start, std::vector<int64_t>* step) {
  std::vector<int64_t> in = DimsOf(n.input(0));
  int64_t rank = static_cast<int64_t>(in.size());
  std::vector<int64_t> starts, ends, axes, steps;
  if (n.input(1) != nullptr) {
    ASSIGN_OR_RETURN(starts, ops::ConstantIntInput(n, 1));
    ASSIGN_OR_RETURN(ends, ops::ConstantIntInput(n, 2));
    if (n.input(3) != nullptr) {
      ASSIGN_OR_RETURN(axes, ops::ConstantIntInput(n, 3));
    }
    if (n.input(4) != nullptr) {
      ASSIGN_OR_RETURN(steps, ops::ConstantIntInput(n, 4));
    }
  } else {
    starts = n.GetInts("starts", {});
    ends = n.GetInts("ends", {});
    axes = n.GetInts("axes", {});
  }
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
    return NodeError(n, "starts, ends, axes and steps differ in length");
  }
  start->assign(rank, 0);
  step->assign(rank, 1);
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (a < 0 || a >= rank) return NodeError(n, "axis out of range");
    int64_t d = in[a], s = starts[i], st = steps[i];
    if (st == 0) return NodeError(n, "step 0");
    if (s < 0) s += d;
    if (st > 0) s = std::clamp<int64_t>(s, 0, d);
    else s = std::clamp<int64_t>(s, 0, d - 1);
    (*start)[a] = s;
    (*step)[a] = st;
  }
  return absl::OkStatus();
}

absl::Status PadParams(const Node& n, std::vector<int64_t>* begin, double* value) {
  std::vector<int64_t> in = DimsOf(n.input(0));
  size_t rank = in.size();
  if (n.GetString("mode", "constant") != "constant") return NodeError(n, "only constant padding");
  std::vector<int64_t> pads;
  *value = 0;
  if (n.input(1) != nullptr) {
    ASSIGN_OR_RETURN(pads, ops::ConstantIntInput(n, 1));
    if (n.input(2) != nullptr) {
      if (!n.input(2)->is_constant()) return NodeError(n, "pad value is not a constant");
      *value = ops::ElementAsDouble(n.input(2)->constant(), 0);
    }
    if (n.input(3) != nullptr) {
      ASSIGN_OR_RETURN(std::vector<int64_t> axes, ops::ConstantIntInput(n, 3));
      std::vector<int64_t> full(2 * rank, 0);
      for (size_t i = 0; i < axes.size(); ++i) {
        int64_t a = axes[i] < 0 ? axes[i] + static_cast<int64_t>(rank) : axes[i];
        if (a < 0 || a >= static_cast<int64_t>(rank) || pads.size() != 2 * axes.size()) {
          return NodeError(n, "bad axes");
        }
        full[a] = pads[i];
        full[a + rank] = pads[i + axes.size()];
      }
      pads = full;
    }
  } else {
    pads = n.GetInts("pads", {});
    *value = n.GetFloat("value", 0.0f);
  }
  if (pads.size() != 2 * rank) return NodeError(n, "pads do not match the rank");
  begin->assign(pads.begin(), pads.begin() + rank);
  return absl::OkStatus();
}

Expr Clamp(Expr x, int64_t lo, int64_t hi) { return Min(Max(std::move(x), IntImm(lo)), IntImm(hi)); }

DataMovementRule Rule(std::function<absl::StatusOr<Expr>(GraphExpr&, const Node&, const std::vector<Expr>&)> at) {
  DataMovementRule r;
  r.at = std::move(at);
  return r;
}

std::map<std::string, DataMovementRule> MakeRules() {
  std::map<std::string, DataMovementRule> r;
  // out[i] = in[i mod in_dim] per axis (the repeats are out_dim / in_dim).
  r["Tile"] = Rule([](GraphExpr& ge, const Node& n, const std::vector<Expr>& idx) {
    std::vector<int64_t> in = DimsOf(n.input(0)), out = DimsOf(n.output(0));
    std::vector<Expr> sub(in.size());
    for (size_t i = 0; i < in.size(); ++i) sub[i] = in[i] == out[i] ? idx[i] : Mod(idx[i], IntImm(in[i]));
    return ge.At(n.input(0), sub);
  });
  r["Transpose"] = Rule([](GraphExpr& ge, const Node& n, const std::vector<Expr>& idx) {
    std::vector<int64_t> in = DimsOf(n.input(0));
    std::vector<int64_t> perm = n.GetInts("perm", {});
    if (perm.empty()) {
      for (size_t i = 0; i < in.size(); ++i) perm.push_back(static_cast<int64_t>(in.size() - 1 - i));
    }
    std::vector<Expr> sub(in.size());
    for (size_t i = 0; i < perm.size(); ++i) sub[perm[i]] = idx[i];
    return ge.At(n.input(0), sub);
  });
  // Views: the same flat index into the input.
  DataMovementRule view = Rule([](GraphExpr& ge, const Node& n, const std::vector<Expr>& idx) {
    std::vector<int64_t> in = DimsOf(n.input(0)), out = DimsOf(n.output(0));
    Expr flat = FlatIndex(out, idx);
    std::vector<Expr> sub(in.size());
    for (size_t d = in.size(); d-- > 0;) {
      sub[d] = d == 0 ? flat : Mod(flat, IntImm(in[d]));
      if (d > 0) flat = Div(flat, IntImm(in[d]));
    }
    if (!in.empty() && in.size() == 1) sub[0] = FlatIndex(out, idx);
    return ge.At(n.input(0), sub);
  });
  for (const char* op : {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"}) r[op] = view;
  // Broadcast of input 0 to the output's shape.
  r["Expand"] = Rule([](GraphExpr& ge, const Node& n, const std::vector<Expr>& idx) {
    return ge.AtBroadcast(n.input(0), idx);
  });
  r["Slice"] = Rule([](GraphExpr& ge, const Node& n, const std::vector<Expr>& idx) -> absl::StatusOr<Expr> {
    std::vector<int64_t> start, step;
    RETURN_IF_ERROR(SliceParams(n, &start, &step));
    std::vector<Expr> sub;
    for (size_t d = 0; d < start.size(); ++d) sub.push_back(Add(IntImm(start[d]), Mul(idx[d], IntImm(step[d]))));
    return ge.At(n.input(0), sub);
  });
  r["Slice"].check = [](const Node& n) {
    std::vector<int64_t> start, step;
    return SliceParams(n, &start, &step);
  };
  r["Pad"] = Rule([](GraphExpr& ge, const Node& n, const std::vector<Expr>& idx) -> absl::StatusOr<Expr> {
    std::vector<int64_t> in = DimsOf(n.input(0)), out = DimsOf(n.output(0));
    std::vector<int64_t> begin;
    double value = 0;
    RETURN_IF_ERROR(PadParams(n, &begin, &value));
    std::vector<Expr> sub;
    Expr inside;
    for (size_t d = 0; d < in.size(); ++d) {
      Expr s = Sub(idx[d], IntImm(begin[d]));
      if (begin[d] != 0 || out[d] != in[d]) {
        Expr ok = And(Ge(s, IntImm(0)), Lt(s, IntImm(in[d])));
        inside = inside ? And(inside, ok) : ok;
        s = Clamp(s, 0, in[d] - 1);
      }
      sub.push_back(s);
    }
    ASSIGN_OR_RETURN(Expr e, ge.At(n.input(0), sub));
    return inside ? Select(inside, e, Const(ComputeTypeOf(n.output(0)->type().dtype), value)) : e;
  });
  r["Pad"].check = [](const Node& n) {
    std::vector<int64_t> begin;
    double value;
    return PadParams(n, &begin, &value);
  };
  r["Concat"] = Rule([](GraphExpr& ge, const Node& n, const std::vector<Expr>& idx) -> absl::StatusOr<Expr> {
    int64_t axis = n.GetInt("axis", 0);
    if (axis < 0) axis += static_cast<int64_t>(idx.size());
    std::vector<int64_t> offs;
    int64_t off = 0;
    for (int i = 0; i < n.num_inputs(); ++i) {
      offs.push_back(off);
      off += DimsOf(n.input(i))[axis];
    }
    if (const int pin = ge.PinnedConcatInput(&n); pin >= 0) {
      std::vector<Expr> sub = idx;
      sub[axis] = Sub(idx[axis], IntImm(offs[pin]));
      return ge.At(n.input(pin), sub);
    }
    Expr r;
    for (int i = n.num_inputs(); i-- > 0;) {
      int64_t ext = DimsOf(n.input(i))[axis];
      if (ext == 0) continue;
      std::vector<Expr> sub = idx;
      sub[axis] = Clamp(Sub(idx[axis], IntImm(offs[i])), 0, ext - 1);
      ASSIGN_OR_RETURN(Expr e, ge.At(n.input(i), sub));
      r = r ? Select(Lt(idx[axis], IntImm(offs[i] + ext)), e, r) : e;
    }
    if (r == nullptr) return NodeError(n, "empty concat");
    return r;
  });
  return r;
}

}  // namespace

const DataMovementRule* FindDataMovementRule(const std::string& op_type) {
  static const auto* rules = new std::map<std::string, DataMovementRule>(MakeRules());
  auto it = rules->find(op_type);
  return it == rules->end() ? nullptr : &it->second;
}

WorkloadLowering DataMovementLowering() { return InlinedNestLowering(true); }

}  // namespace kiln::loop_ir
