// The "reduction" lowering (see lower_reduction.h).
#include "compiler_core/codegen/loop_ir/lower_reduction.h"
#include "compiler_core/codegen/loop_ir/substitute.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compiler_core/codegen/loop_ir/graph_expr.h"
#include "compiler_core/codegen/loop_ir/lower.h"
#include "compiler_core/codegen/loop_ir/lower_common.h"
#include "compiler_core/codegen/loop_ir/schedule.h"
#include "compiler_core/frontend/op_registry.h"
#include "compiler_core/frontend/ops/op_helpers.h"

namespace kiln::loop_ir {

bool IsReductionOp(const std::string& op) {
  return op == "ReduceSum" || op == "ReduceMean" || op == "ReduceMax" || op == "ReduceMin" || op == "ReduceProd" ||
         op == "ReduceL1" || op == "ReduceL2" || op == "ReduceSumSquare" || op == "ReduceLogSum" ||
         op == "Softmax" || op == "LogSoftmax" || op == "LayerNormalization" || op == "InstanceNormalization" ||
         op == "GlobalAveragePool" || op == "GlobalMaxPool";
}

// Normalizations: mean over the reduced axes, then the centred sum of squares.
bool IsNormOp(const std::string& op) { return op == "LayerNormalization" || op == "InstanceNormalization"; }

// The row-wise ops (reduce, then write a result the input's shape).
bool IsRowWiseOp(const std::string& op) { return op == "Softmax" || op == "LogSoftmax" || IsNormOp(op); }

namespace {

constexpr int64_t kMaxTempElements = 16384;
constexpr int64_t kAccumulators = 4;

bool IsDataMovementOp(const std::string& op) {
  return op == "Transpose" || op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze" ||
         op == "Identity" || op == "Slice" || op == "Concat" || op == "Pad";
}

// Reduced-axis mask of a Reduce* / global pool node.
absl::StatusOr<std::vector<bool>> ReducedAxes(const Node& n) {
  int64_t rank = static_cast<int64_t>(DimsOf(n.input(0)).size());
  std::vector<bool> mask(rank, false);
  if (n.op_type() == "GlobalAveragePool" || n.op_type() == "GlobalMaxPool") {
    if (rank < 3) return NodeError(n, "input rank below 3");
    for (int64_t d = 2; d < rank; ++d) mask[d] = true;
    return mask;
  }
  std::vector<int64_t> axes;
  if (n.input(1) != nullptr) {
    ASSIGN_OR_RETURN(axes, ops::ConstantIntInput(n, 1));
  } else {
    axes = n.GetInts("axes", {});
  }
  if (axes.empty()) {
    if (n.GetInt("noop_with_empty_axes", 0) != 0) return NodeError(n, "noop_with_empty_axes");
    mask.assign(rank, true);
    return mask;
  }
  for (int64_t a : axes) {
    int64_t r = a < 0 ? a + rank : a;
    if (r < 0 || r >= rank || mask[r]) return NodeError(n, "bad axes");
    mask[r] = true;
  }
  return mask;
}

// Optional extra store of each reduced value (index, value) -> the store,
// e.g. softmax's exp written to its output.
using Tee = std::function<Stmt(const std::vector<Expr>&, Expr)>;

class StageBuilder {
 public:
  StageBuilder(int64_t vw) : vw_(vw) {}

  // acc[0] = combine over the `rdims` loops (vars rprefix<k>) of value(idx);
  // value receives the per-reduced-axis index expressions.
  absl::StatusOr<Stmt> Reduce(const std::string& name, const ReduceCombine& c, const std::vector<int64_t>& rdims,
                              const std::function<absl::StatusOr<Expr>(const std::vector<Expr>&)>& value,
                              Stmt* alloc_body_hole, Buffer* acc_out, const Tee& tee = nullptr) {
    (void)alloc_body_hole;
    int64_t last = rdims.empty() ? 1 : rdims.back();
    int64_t w = vw_ > 1 && last > 1 ? vw_ : 1;
    // Independent vector accumulators (unrolled) hide the combine's latency.
    int64_t u = w > 1 && last >= kAccumulators * w ? kAccumulators : 1;
    Buffer acc = MakeBuffer(name, {w * u}, BufferRole::kTemp);
    *acc_out = acc;
    std::string p = name + "_r";
    std::string lane = name + "_lane";
    // u vectors per step that do not divide the row: whole steps, then the
    // rest in vectors of its own (lane-masked only in its last one) rather
    // than a last step of u masked vectors (a row of 196: 13 vectors, not
    // 16). The accumulator lane is then the element's index mod w*u.
    const bool peel = u > 1 && last % (w * u) != 0;
    absl::Status err = absl::OkStatus();
    Stmt loops = ForEachIndex(rdims, p, [&](const std::vector<Expr>& idx) -> Stmt {
      absl::StatusOr<Expr> v = value(idx);
      if (!v.ok()) {
        err = v.status();
        return Block({});
      }
      Expr li = w == 1 ? IntImm(0) : peel ? Mod(idx.back(), IntImm(w * u)) : Var(lane);
      if (tee) {
        // Writes the value out too and accumulates it, bound once (reading
        // back the lane-masked store would wait for it: no store forwarding).
        const std::string tv = name + "_t";
        Expr t = Var(tv, ScalarType::kF32);
        return LetStmt(tv, *v, Block({tee(idx, t), Store(acc, li, ApplyCombine(c, Load(acc, li), t))}));
      }
      return Store(acc, li, ApplyCombine(c, Load(acc, li), *v));
    });
    RETURN_IF_ERROR(err);
    std::vector<Stmt> out;
    if (w > 1) {
      std::string r = absl::StrCat(p, rdims.size() - 1);
      std::string vec = r + "i";
      if (peel) {
        ASSIGN_OR_RETURN(loops, Split(loops, r, w * u, r + "o", r + "i", TailStrategy::kPeel));
        ASSIGN_OR_RETURN(loops, Split(loops, r + "i_tail", w, r + "to", r + "tv"));
        // Fewer than u vectors, unrolled: each then stores to a constant
        // place in the accumulator, so that the guarded last one blends
        // into it (a masked store would keep it in memory).
        ASSIGN_OR_RETURN(loops, Unroll(loops, r + "to"));
        ASSIGN_OR_RETURN(loops, Vectorize(loops, r + "tv"));
      } else {
        ASSIGN_OR_RETURN(loops, Split(loops, r, w * u, r + "o", r + "i"));
        loops = Substitute(loops, lane, Var(r + "i"));
      }
      if (u > 1) {
        ASSIGN_OR_RETURN(loops, Split(loops, r + "i", w, r + "u", r + "v"));
        ASSIGN_OR_RETURN(loops, Unroll(loops, r + "u"));
        vec = r + "v";
      }
      ASSIGN_OR_RETURN(loops, Vectorize(loops, vec));
      out.push_back(For(lane, IntImm(w * u), Store(acc, Var(lane), FloatImm(c.init)), ForKind::kVectorized));
      out.push_back(loops);
      if (u > 1) {
        // acc[0:w] = combine of the u vector accumulators.
        std::string a = name + "_u", l = name + "_ul";
        Expr other = Add(Mul(Add(Var(a), IntImm(1)), IntImm(w)), Var(l));
        out.push_back(For(a, IntImm(u - 1),
                          For(l, IntImm(w), Store(acc, Var(l), ApplyCombine(c, Load(acc, Var(l)), Load(acc, other))),
                              ForKind::kVectorized),
                          ForKind::kUnrolled));
      }
      // Horizontal combine of acc[0:w] into acc[0]: a tree of halving
      // vector steps (log2(w) dependent steps rather than w - 1).
      std::string h = name + "_h";
      int64_t half = w;
      while (half % 2 == 0 && half > 1) {
        half /= 2;
        Expr hi = Add(Var(h), IntImm(half));
        out.push_back(half > 1 ? For(h, IntImm(half),
                                     Store(acc, Var(h), ApplyCombine(c, Load(acc, Var(h)), Load(acc, hi))),
                                     ForKind::kVectorized)
                               : Store(acc, IntImm(0), ApplyCombine(c, Load(acc, IntImm(0)), Load(acc, IntImm(1)))));
      }
      if (half > 1) {
        out.push_back(For(h, IntImm(half - 1),
                          Store(acc, IntImm(0),
                                ApplyCombine(c, Load(acc, IntImm(0)), Load(acc, Add(Var(h), IntImm(1))))),
                          ForKind::kUnrolled));
      }
    } else {
      out.push_back(Store(acc, IntImm(0), FloatImm(c.init)));
      out.push_back(loops);
    }
    return Block(out);
  }

  int64_t vw() const { return vw_; }

 private:
  int64_t vw_;
};

// Splits `x`'s dims at `mask` into kept and reduced lists.
void SplitDims(const std::vector<int64_t>& d, const std::vector<bool>& mask, std::vector<int64_t>* kept,
               std::vector<int64_t>* red) {
  for (size_t i = 0; i < d.size(); ++i) (mask[i] ? red : kept)->push_back(d[i]);
}

// Merges kept and reduced index expressions back into the input's order.
std::vector<Expr> Merge(const std::vector<bool>& mask, const std::vector<Expr>& kept, const std::vector<Expr>& red) {
  std::vector<Expr> out;
  size_t k = 0, r = 0;
  for (bool m : mask) out.push_back(m ? red[r++] : kept[k++]);
  return out;
}

// Trailing reduced axes of an x read straight from memory (a workload
// input) are one contiguous run: they reduce as a single flat axis, one
// vectorised sweep of count elements rather than a lane-masked vector per
// row (a 14x14 map: 13 whole vectors, not 14 masked ones). LayerNormalization's
// scale and bias index the reduced axes one by one, so it keeps them.
bool FlattensTrailingAxes(const Node& n, const std::vector<bool>& mask) {
  const Value* x = n.input(0);
  const int64_t nred = std::count(mask.begin(), mask.end(), true);
  bool trailing = nred >= 2 && n.op_type() != "LayerNormalization" && x->producer() == nullptr && !x->is_constant();
  for (int64_t i = 0; trailing && i < nred; ++i) trailing = mask[mask.size() - 1 - static_cast<size_t>(i)];
  return trailing;
}

// The stage computing node `n` into `dst` (its output value's shape).
// `stats`: LayerNormalization's optional Mean and InvStdDev outputs (null
// when absent), each of the input's shape with the normalized axes 1.
absl::StatusOr<Stmt> LowerStage(const Node& n, GraphExpr& ge, const Buffer& dst, const std::vector<Buffer>& stats,
                                int64_t vw, int64_t tasks, int stage) {
  const std::string& op = n.op_type();
  const Value* x = n.input(0);
  std::vector<int64_t> d = DimsOf(x);
  std::string sp = absl::StrCat("s", stage, "_");
  StageBuilder sb(vw);
  ASSIGN_OR_RETURN(std::vector<bool> mask, ReductionMask(n));
  std::vector<int64_t> kept, red;
  SplitDims(d, mask, &kept, &red);
  int64_t count = NumElements(red);
  bool last_reduced = !mask.empty() && mask.back();
  int64_t rvw = last_reduced ? vw : 1;
  StageBuilder rsb(rvw);
  absl::Status err = absl::OkStatus();
  // Index f of a flattened trailing run (FlattensTrailingAxes) is (0, ...,
  // 0, f) over the reduced axes: the same row-major offset into x and dst.
  const size_t nred = red.size();
  const bool trailing = FlattensTrailingAxes(n, mask);
  if (trailing) red = {count};
  auto unflat = [&](const std::vector<Expr>& ridx) {
    if (!trailing) return ridx;
    std::vector<Expr> r(nred, IntImm(0));
    r.back() = ridx[0];
    return r;
  };
  auto xat = [&](const std::vector<Expr>& kidx, const std::vector<Expr>& ridx) {
    return ge.At(x, Merge(mask, kidx, unflat(ridx)));
  };
  Stmt nest = ForEachIndex(kept, sp + "k", [&](const std::vector<Expr>& kidx) -> Stmt {
    auto build = [&]() -> absl::StatusOr<Stmt> {
      if (IsRowWiseOp(op)) {
        Buffer a1, a2;
        bool ln = IsNormOp(op);
        ReduceCombine c1 =
            ln ? ReduceCombine{ExprKind::kAdd, 0} : ReduceCombine{ExprKind::kMax, -INFINITY, /*nan_free=*/true};
        ASSIGN_OR_RETURN(Stmt s1, rsb.Reduce(sp + "a", c1, red,
                                             [&](const std::vector<Expr>& r) { return xat(kidx, r); }, nullptr, &a1));
        std::string fv = sp + "f";
        std::string mv = sp + "m";
        Expr mean = Div(Load(a1, IntImm(0)), FloatImm(static_cast<double>(std::max<int64_t>(count, 1))));
        Expr m = ln ? Var(mv, ScalarType::kF32) : Load(a1, IntImm(0));
        auto second = [&](const std::vector<Expr>& r) -> absl::StatusOr<Expr> {
          ASSIGN_OR_RETURN(Expr v, xat(kidx, r));
          Expr dv = Sub(v, m);
          // x - max <= 0 (NaN aside): exp's cheaper form (llvm_lowering.cc).
          return ln ? Mul(dv, dv) : Call("exp_nonpositive", {dv});
        };
        bool sm = op == "Softmax";
        Tee tee = nullptr;
        if (sm) {
          // exp(x - max) goes to dst in this pass; the output pass only scales it.
          tee = [&](const std::vector<Expr>& r, Expr v) { return Store(dst, Merge(mask, kidx, unflat(r)), v); };
        }
        ASSIGN_OR_RETURN(Stmt s2,
                         rsb.Reduce(sp + "b", ReduceCombine{ExprKind::kAdd, 0}, red, second, nullptr, &a2, tee));
        // Loop-invariant factor of the output pass, bound once per row.
        Expr factor = RowFactor(n, m, Load(a2, IntImm(0)), count);
        // Output loop over the reduced axes, vectorized like the reductions.
        std::string op_prefix = sp + "w";
        Stmt w = ForEachIndex(red, op_prefix, [&](const std::vector<Expr>& r) -> Stmt {
          absl::StatusOr<Expr> v = xat(kidx, r);
          if (!v.ok()) {
            err = v.status();
            return Block({});
          }
          // Softmax scales the exp(x - max) its sum pass stored.
          Expr e = op == "Softmax" ? Load(dst, Merge(mask, kidx, unflat(r))) : nullptr;
          absl::StatusOr<Expr> y = RowOutput(n, ge, *v, e, m, Var(fv, ScalarType::kF32), kidx, unflat(r));
          if (!y.ok()) {
            err = y.status();
            return Block({});
          }
          return Store(dst, Merge(mask, kidx, unflat(r)), *y);
        });
        RETURN_IF_ERROR(err);
        ASSIGN_OR_RETURN(w, ScheduleNest(w, red, op_prefix, rvw > 1 && red.back() > 1 ? rvw : 1, 1));
        if (ln && (stats[0] != nullptr || stats[1] != nullptr)) {
          // Mean and InvStdDev, one value per kept index.
          Expr flat = FlatIndex(kept, kidx);
          std::vector<Stmt> st;
          if (stats[0] != nullptr) st.push_back(Store(stats[0], flat, Var(mv, ScalarType::kF32)));
          if (stats[1] != nullptr) st.push_back(Store(stats[1], flat, Var(fv, ScalarType::kF32)));
          st.push_back(w);
          w = Block(st);
        }
        w = LetStmt(fv, factor, w);
        Stmt rest = Block({s2, w});
        if (ln) rest = LetStmt(mv, mean, rest);
        return Allocate(a1, Allocate(a2, Block({s1, rest})));
      }
      // Reduce* and global pools.
      Buffer acc;
      ASSIGN_OR_RETURN(Stmt s1, rsb.Reduce(sp + "a", ReduceCombineOf(op), red,
                                           [&](const std::vector<Expr>& r) -> absl::StatusOr<Expr> {
                                             ASSIGN_OR_RETURN(Expr v, xat(kidx, r));
                                             return ReduceElement(op, v);
                                           },
                                           nullptr, &acc));
      Expr y = ReduceResult(op, Load(acc, IntImm(0)), count);
      // dst has the output's shape: kept dims with or without the size-1 reduced ones.
      Expr flat = FlatIndex(kept, kidx);
      return Allocate(acc, Block({s1, Store(dst, flat, y)}));
    };
    absl::StatusOr<Stmt> s = build();
    if (!s.ok()) {
      err = s.status();
      return Block({});
    }
    return *s;
  });
  RETURN_IF_ERROR(err);
  ASSIGN_OR_RETURN(nest, ScheduleNest(nest, kept, sp + "k", 1, tasks));
  return nest;
}

}  // namespace

absl::Status MatchReduction(const Graph& g) {
  RETURN_IF_ERROR(CheckWorkloadBasics(g));
  int reductions = 0;
  int64_t temp = 0;
  std::set<const Value*> outputs(g.outputs().begin(), g.outputs().end());
  for (const auto& n : g.nodes()) {
    if (IsReductionOp(n->op_type())) {
      ++reductions;
      int max_outputs = n->op_type() == "LayerNormalization" ? 3 : 1;
      if (n->num_outputs() > max_outputs || n->output(0) == nullptr) return NodeError(*n, "extra outputs");
      if (n->op_type().rfind("Reduce", 0) == 0 || n->op_type().rfind("Global", 0) == 0) {
        RETURN_IF_ERROR(ReducedAxes(*n).status());
      }
      if (n->op_type() == "InstanceNormalization" && DimsOf(n->input(0)).size() < 3) {
        return NodeError(*n, "input rank below 3");
      }
      for (int i = 0; i < n->num_outputs(); ++i) {
        const Value* v = n->output(i);
        if (v != nullptr && outputs.count(v) == 0) temp += NumElements(DimsOf(v));
      }
      continue;
    }
    RETURN_IF_ERROR(GraphExpr::CheckNode(*n));
  }
  if (reductions == 0) return absl::UnimplementedError("no reduction operator");
  if (temp > kMaxTempElements) {
    return absl::UnimplementedError(absl::StrCat("intermediate results of ", temp, " elements exceed the stack budget"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<bool>> ReductionMask(const Node& n) {
  const std::string& op = n.op_type();
  if (!IsRowWiseOp(op)) return ReducedAxes(n);
  const int64_t rank = static_cast<int64_t>(DimsOf(n.input(0)).size());
  int64_t axis = op == "InstanceNormalization" ? 2 : n.GetInt("axis", -1);
  if (op == "InstanceNormalization" && rank < 3) return NodeError(n, "input rank below 3");
  if (op != "LayerNormalization" && n.GetInt("_kiln_opset", 13) < 13) return NodeError(n, "legacy softmax");
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return NodeError(n, "bad axis");
  std::vector<bool> mask(rank, false);
  for (int64_t i = axis; i < rank; ++i) {
    if (IsNormOp(op) || i == axis) mask[i] = true;
  }
  return mask;
}

int RowLocalAxes(const Graph& g) {
  std::set<const Value*> inputs(g.inputs().begin(), g.inputs().end());
  for (const Value* v : g.outputs()) {
    if (inputs.count(v) > 0) return 0;
  }
  std::vector<int64_t> prefix;  // the extents every computed value shares
  bool first = true;
  size_t axes = 0;
  for (const auto& n : g.nodes()) {
    if (IsDataMovementOp(n->op_type())) return 0;
    for (int i = 0; i < n->num_outputs(); ++i) {
      if (n->output(i) == nullptr) continue;
      std::vector<int64_t> d = DimsOf(n->output(i));
      if (first) {
        prefix = d;
        axes = d.size();
        first = false;
      }
      if (d.size() != prefix.size()) return 0;
      size_t same = 0;
      while (same < axes && d[same] == prefix[same]) ++same;
      axes = same;
    }
    if (!IsReductionOp(n->op_type())) continue;
    absl::StatusOr<std::vector<bool>> mask = ReductionMask(*n);
    if (!mask.ok() || mask->size() != prefix.size()) return 0;
    size_t lead = 0;
    while (lead < mask->size() && !(*mask)[lead]) ++lead;
    axes = std::min(axes, lead);
  }
  return static_cast<int>(axes);
}

ReduceCombine ReduceCombineOf(const std::string& op) {
  if (op == "ReduceMax" || op == "GlobalMaxPool") return {ExprKind::kMax, -INFINITY};
  if (op == "ReduceMin") return {ExprKind::kMin, INFINITY};
  if (op == "ReduceProd") return {ExprKind::kMul, 1};
  return {ExprKind::kAdd, 0};
}

Expr ApplyCombine(const ReduceCombine& c, Expr a, Expr b) {
  if (c.kind == ExprKind::kMax && c.nan_free) return Select(Gt(b, a), b, a);
  if (c.kind == ExprKind::kMax) return Call("fmax", {a, b});
  if (c.kind == ExprKind::kMin) return Call("fmin", {a, b});
  if (c.kind == ExprKind::kMul) return Mul(a, b);
  return Add(a, b);
}

Expr ReduceElement(const std::string& op, Expr x) {
  if (op == "ReduceL2" || op == "ReduceSumSquare") return Mul(x, x);
  if (op == "ReduceL1") return Call("abs", {x});
  return x;
}

Expr ReduceResult(const std::string& op, Expr acc, int64_t count) {
  if (op == "ReduceMean" || op == "GlobalAveragePool") {
    return Div(acc, FloatImm(static_cast<double>(std::max<int64_t>(count, 1))));
  }
  if (op == "ReduceL2") return Call("sqrt", {acc});
  if (op == "ReduceLogSum") return Call("log", {acc});
  return acc;
}

Expr RowFactor(const Node& n, Expr first, Expr second, int64_t count) {
  if (n.op_type() == "Softmax") return Div(FloatImm(1), second);
  if (n.op_type() == "LogSoftmax") return Add(first, Call("log", {second}));
  return Div(FloatImm(1), Call("sqrt", {Add(Div(second, FloatImm(static_cast<double>(std::max<int64_t>(count, 1)))),
                                             FloatImm(n.GetFloat("epsilon", 1e-5f)))}));
}

absl::StatusOr<Expr> RowOutput(const Node& n, GraphExpr& ge, Expr x, Expr exp_shifted, Expr first, Expr factor,
                               const std::vector<Expr>& kidx, const std::vector<Expr>& ridx) {
  const std::string& op = n.op_type();
  if (op == "Softmax") return Mul(exp_shifted, factor);
  if (op == "LogSoftmax") return Sub(x, factor);
  Expr y = Mul(Sub(x, first), factor);
  // Scale and bias broadcast against the normalised axes
  // (InstanceNormalization: per channel, the kept axis 1).
  for (int i = 1; i < 3; ++i) {
    const Value* p = n.input(i);
    if (p == nullptr) continue;
    std::vector<int64_t> pd = DimsOf(p);
    std::vector<Expr> pidx;
    if (op == "InstanceNormalization") {
      pidx.push_back(pd.size() == 1 && pd[0] == 1 ? IntImm(0) : kidx[1]);
    } else {
      for (size_t k = 0; k < pd.size(); ++k) {
        pidx.push_back(pd[k] == 1 ? IntImm(0) : ridx[k + ridx.size() - pd.size()]);
      }
    }
    ASSIGN_OR_RETURN(Expr pv, ge.At(p, pidx));
    y = i == 1 ? Mul(y, pv) : Add(y, pv);
  }
  return y;
}

namespace {

const Node* LastReduction(const Graph& g) {
  const Node* last = nullptr;
  for (const auto& n : g.nodes()) {
    if (IsReductionOp(n->op_type())) last = n.get();
  }
  return last;
}

// A single stage writes the only output: that stage may run in parallel.
bool SingleStage(const Graph& g) {
  int count = 0;
  for (const auto& n : g.nodes()) count += IsReductionOp(n->op_type()) ? 1 : 0;
  return count == 1 && g.outputs().size() == 1 && LastReduction(g)->output(0) == g.outputs()[0];
}

// The first axis of more than one element (-1 when there is none).
int FirstWideAxis(const std::vector<int64_t>& d) {
  for (size_t i = 0; i < d.size(); ++i) {
    if (d[i] > 1) return static_cast<int>(i);
  }
  return -1;
}

// A value's extent on its first wide axis: its rows, each a contiguous slice.
int64_t RowExtent(const Value* v) {
  std::vector<int64_t> d = DimsOf(v);
  const int a = FirstWideAxis(d);
  return a < 0 ? 1 : d[a];
}

// Whether node `n`, reading `u` (a value of `rows` rows computed from a
// stage's result), reads for row r of its output `v` only row r of `u`.
bool KeepsRows(const Node& n, const Value* u, const Value* v, int64_t rows) {
  const std::vector<int64_t> du = DimsOf(u), dv = DimsOf(v);
  const int au = FirstWideAxis(du), av = FirstWideAxis(dv);
  if (au < 0 || av < 0 || du[au] != rows || dv[av] != rows) return false;
  const std::string& op = n.op_type();
  // Row-major: the r-th slice of rows of the input is the r-th of the output.
  if (op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze" || op == "Identity") return true;
  if (op == "Transpose") {
    std::vector<int64_t> perm = n.GetInts("perm", {});
    if (perm.empty()) {
      for (size_t i = du.size(); i-- > 0;) perm.push_back(static_cast<int64_t>(i));
    }
    return perm.size() == dv.size() && perm[av] == au;
  }
  // Concatenated along another axis than the rows (which have the same
  // extent in and out).
  if (op == "Concat") return du.size() == dv.size() && au == av;
  const OpDef* def = FindOpDef(n.domain(), op);
  if (def != nullptr && def->traits.op_class == OpClass::kElementwise) {
    // Broadcast aligns trailing axes.
    return static_cast<int64_t>(au) + static_cast<int64_t>(dv.size()) - static_cast<int64_t>(du.size()) == av;
  }
  return false;
}

// Rows of a multi-stage workload whose stages can run fused row by row, in
// parallel: the extent of the first stage result's first wide axis when
// every stage result and output has that many rows (row r of each is its
// r-th contiguous slice), no stage reduces over them, and every value
// computed from a stage's result reads at row r only that result's row r
// (KeepsRows); else 0. The leading axes of a batch of one are no rows, and
// data movement keeps them where it neither moves nor cuts them: a
// squeeze-excite's channels under Concat -> BatchNormalization -> x *
// sigmoid(x) -> ReduceMean -> Reshape, a classifier's GlobalAveragePool ->
// Flatten.
int64_t RowParallelRows(const Graph& g) {
  const Node* first = nullptr;
  for (const auto& n : g.nodes()) {
    if (IsReductionOp(n->op_type())) {
      first = n.get();
      break;
    }
  }
  if (first == nullptr) return 0;
  const int64_t rows = RowExtent(first->output(0));
  if (rows < 2) return 0;
  std::set<const Value*> inputs(g.inputs().begin(), g.inputs().end());
  for (const Value* v : g.outputs()) {
    if (inputs.count(v) > 0 || RowExtent(v) != rows) return 0;
  }
  std::set<const Value*> computed;  // stage results and values computed from them
  for (const auto& n : g.nodes()) {
    if (IsReductionOp(n->op_type())) {
      // A stage reads a computed input's row r for its own row r: that
      // input's rows are not reduced. An input computed from the workload's
      // inputs alone it may read anywhere, but a row-wise stage (Softmax, the
      // norms) writes its result in the input's shape: its loop runs over
      // the rows only where it does not reduce them.
      if (computed.count(n->input(0)) > 0 || IsRowWiseOp(n->op_type())) {
        const std::vector<int64_t> dx = DimsOf(n->input(0));
        const int ax = FirstWideAxis(dx);
        absl::StatusOr<std::vector<bool>> mask = ReductionMask(*n);
        if (ax < 0 || dx[ax] != rows || !mask.ok() || static_cast<size_t>(ax) >= mask->size() || (*mask)[ax]) {
          return 0;
        }
      }
      for (int i = 1; i < n->num_inputs(); ++i) {
        if (computed.count(n->input(i)) > 0) return 0;
      }
      for (int i = 0; i < n->num_outputs(); ++i) {
        if (n->output(i) == nullptr) continue;
        if (RowExtent(n->output(i)) != rows) return 0;
        computed.insert(n->output(i));
      }
      continue;
    }
    bool reads = false;
    for (int i = 0; i < n->num_inputs(); ++i) {
      const Value* u = n->input(i);
      if (u == nullptr || computed.count(u) == 0) continue;
      if (n->num_outputs() != 1 || !KeepsRows(*n, u, n->output(0), rows)) return 0;
      reads = true;
    }
    if (reads) computed.insert(n->output(0));
  }
  return rows;
}

std::vector<ScheduleConfig> Enumerate(const Graph& g, const CpuTarget& target) {
  const Node* r = LastReduction(g);
  std::vector<int64_t> d = DimsOf(r->input(0));
  // The innermost loop's extent: the last axis, or the flattened run of
  // trailing reduced axes (a 7x7 map's 49, which 16 lanes fit better than 8).
  int64_t inner = d.empty() ? 1 : d.back();
  absl::StatusOr<std::vector<bool>> mask = ReductionMask(*r);
  if (mask.ok() && FlattensTrailingAxes(*r, *mask)) {
    inner = 1;
    for (size_t i = 0; i < d.size(); ++i) inner *= (*mask)[i] ? d[i] : 1;
  }
  std::vector<ScheduleConfig> out;
  for (int64_t vw : VectorWidths(target, inner)) {
    bool parallel = (SingleStage(g) && NumElements(DimsOf(r->output(0))) > 1) || RowParallelRows(g) > 0;
    for (int64_t tasks : TaskCounts(NumElements(d), parallel)) {
      ScheduleConfig c;
      c.Set("vw", vw);
      c.Set("tasks", tasks);
      out.push_back(c);
    }
  }
  return out;
}

absl::StatusOr<LoopFunc> Lower(const Graph& g, const ScheduleConfig& config, const CpuTarget& target) {
  RETURN_IF_ERROR(MatchReduction(g));
  GraphExpr ge(g);
  int64_t vw = config.Get("vw", 1);
  bool single = SingleStage(g);
  int64_t rows = single ? 0 : RowParallelRows(g);
  int64_t tasks = single || rows > 0 ? config.Get("tasks", 1) : 1;
  std::vector<Stmt> stages;
  std::vector<Buffer> temps;
  int stage = 0;
  std::set<const Value*> written;
  for (const auto& n : g.nodes()) {
    if (!IsReductionOp(n->op_type())) continue;
    // Each output's buffer: its first graph-output slot, else a temp.
    std::vector<Buffer> bufs;
    for (int i = 0; i < n->num_outputs(); ++i) {
      const Value* v = n->output(i);
      Buffer buf;
      if (v == nullptr) {
        bufs.push_back(buf);
        continue;
      }
      for (size_t j = 0; j < g.outputs().size(); ++j) {
        if (g.outputs()[j] == v) {
          buf = ge.output_buffer(static_cast<int>(j));
          break;
        }
      }
      if (buf == nullptr) {
        buf = MakeBuffer(i == 0 ? absl::StrCat("t", stage) : absl::StrCat("t", stage, "_", i), DimsOf(v),
                         BufferRole::kTemp);
        temps.push_back(buf);
      }
      bufs.push_back(buf);
    }
    std::vector<Buffer> stats(2);
    for (int i = 1; i < 3 && i < static_cast<int>(bufs.size()); ++i) stats[i - 1] = bufs[i];
    ASSIGN_OR_RETURN(Stmt s, LowerStage(*n, ge, bufs[0], stats, vw, single ? tasks : 1, stage));
    stages.push_back(s);
    for (int i = 0; i < n->num_outputs(); ++i) {
      if (n->output(i) == nullptr) continue;
      ge.Bind(n->output(i), bufs[i]);
      written.insert(n->output(i));
    }
    ++stage;
  }
  for (size_t j = 0; j < g.outputs().size(); ++j) {
    const Value* v = g.outputs()[j];
    std::vector<int64_t> dims = DimsOf(v);
    if (NumElements(dims) == 0) continue;
    if (written.count(v) > 0) {
      // Written by its stage into the first output slot holding it; copy to the others.
      if (ge.output_buffer(static_cast<int>(j))->name != "" && g.outputs()[j] == v) {
        bool first = true;
        for (size_t k = 0; k < j; ++k) first = first && g.outputs()[k] != v;
        if (first) continue;
      }
    }
    absl::Status err = absl::OkStatus();
    std::string prefix = absl::StrCat("c", j, "_");
    Stmt nest = ForEachIndex(dims, prefix, [&](const std::vector<Expr>& idx) -> Stmt {
      absl::StatusOr<Expr> e = ge.At(v, idx);
      if (!e.ok()) {
        err = e.status();
        return Block({});
      }
      return Store(ge.output_buffer(static_cast<int>(j)), idx, *e);
    });
    RETURN_IF_ERROR(err);
    // An output of one element per row keeps its loop over the rows whole
    // (not vectorized) where the rows run in parallel.
    const bool per_row = rows > 0 && tasks > 1 && NumElements(dims) == rows;
    ASSIGN_OR_RETURN(nest, ScheduleNest(nest, dims, prefix, per_row ? 1 : vw, 1));
    stages.push_back(nest);
  }
  if (rows > 0 && tasks > 1) {
    // Fuse the stages per row: for (task) parallel { temps; for (row in block) { stage bodies } }.
    int64_t per = (rows + tasks - 1) / tasks;
    int64_t num = (rows + per - 1) / per;
    Expr row = Add(Mul(Var("task"), IntImm(per)), Var("row"));
    std::vector<Stmt> bodies;
    for (size_t i = 0; i < stages.size(); ++i) {
      const Stmt& s = stages[i];
      int64_t ext = 0;
      // Each stage's outermost loop runs over its first wide axis: the rows.
      if (s->kind != StmtKind::kFor || s->for_kind != ForKind::kSerial || !AsConst(s->extent, &ext) ||
          ext != rows) {
        bodies.clear();
        break;
      }
      bodies.push_back(Substitute(s->body[0], s->var, row));
    }
    if (!bodies.empty()) {
      Stmt inner = Block(bodies);
      if (per * num != rows) inner = IfThen(Lt(row, IntImm(rows)), inner);
      inner = For("row", IntImm(per), inner);
      for (size_t i = temps.size(); i-- > 0;) inner = Allocate(temps[i], inner);
      return LoopFunc{"reduction", ge.args(), For("task", IntImm(num), inner, ForKind::kParallel)};
    }
  }
  Stmt body = Block(stages);
  for (size_t i = temps.size(); i-- > 0;) body = Allocate(temps[i], body);
  return LoopFunc{"reduction", ge.args(), body};
}

}  // namespace

WorkloadLowering ReductionLowering() {
  WorkloadLowering l;
  l.kind = "reduction";
  l.match = MatchReduction;
  l.enumerate = Enumerate;
  l.default_schedule = [](const Graph& g, const CpuTarget& t) { return PickDefault(Enumerate(g, t), t); };
  l.validate = [](const Graph& g, const ScheduleConfig& c, const CpuTarget& t) {
    return ValidateKnobs(g, c, t, {"vw", "tasks"});
  };
  l.lower = Lower;
  return l;
}

}  // namespace kiln::loop_ir
