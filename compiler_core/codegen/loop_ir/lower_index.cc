// "index" workloads: Gather, GatherElements, DepthToSpace, SpaceToDepth,
// Trilu and Split as index arithmetic inside one loop nest per output;
// CumSum, ArgMax and ArgMin as a serial loop along their axis per output
// position (see lower_index.h).
#include "compiler_core/codegen/loop_ir/lower_index.h"
#include "compiler_core/codegen/loop_ir/printer.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compiler_core/codegen/loop_ir/graph_expr.h"
#include "compiler_core/codegen/loop_ir/lower_common.h"
#include "compiler_core/frontend/ops/index_ops.h"
#include "compiler_core/frontend/ops/op_helpers.h"

namespace kiln::loop_ir {
namespace {

bool IsExprOp(const std::string& op) {
  return op == "Gather" || op == "GatherElements" || op == "GatherND" || op == "DepthToSpace" || op == "SpaceToDepth" ||
         op == "Trilu" || op == "Split";
}
bool IsScanOp(const std::string& op) { return IsIndexScanOp(op); }

// The input slot of `op` that holds integer indices or an integer scalar
// read at run time, or -1.
int IntOperand(const std::string& op) {
  if (op == "Gather" || op == "GatherElements" || op == "GatherND" || op == "Trilu" || op == "CumSum") return 1;
  return -1;
}

int64_t Rank(const Value* v) { return static_cast<int64_t>(DimsOf(v).size()); }

// Offset along the axis of one Split piece (the importer makes one node per
// output; their sizes are ops::SplitSizes).
absl::StatusOr<int64_t> SplitOffset(const Node& n, int64_t axis) {
  const int64_t count = n.GetInt(ops::kSplitNumOutputsAttr, 1);
  const int64_t k = n.GetInt(ops::kSplitOutputIndexAttr, 0);
  if (count < 1 || k < 0 || k >= count) return NodeError(n, "bad output index");
  if (n.input(1) != nullptr && !n.input(1)->is_constant()) return NodeError(n, "split sizes are not a constant");
  auto sizes = ops::SplitSizes(n, DimsOf(n.input(0))[axis]);
  if (!sizes.ok()) return NodeError(n, std::string(sizes.status().message()));
  int64_t off = 0;
  for (int64_t i = 0; i < k; ++i) off += (*sizes)[i];
  return off;
}

// Per-node structural checks (attributes, operand kinds).
absl::Status CheckIndexNode(const Node& n) {
  const std::string& op = n.op_type();
  if (n.num_outputs() != 1) return NodeError(n, "extra outputs");
  if (n.input(0) == nullptr) return NodeError(n, "no data input");
  // Index expressions move elements of any type; CumSum sums f32, f64, i32
  // or i64 in that type (exporters write position ids as integer CumSums),
  // ArgMax and ArgMin compare f32.
  const DType data = n.input(0)->type().dtype;
  if (op == "CumSum" && data != DType::kFloat32 && data != DType::kFloat64 && data != DType::kInt32 &&
      data != DType::kInt64) {
    return NodeError(n, absl::StrCat("data is ", DTypeName(data), ", not f32, f64, i32 or i64"));
  }
  if ((op == "ArgMax" || op == "ArgMin") && data != DType::kFloat32) {
    return NodeError(n, absl::StrCat("data is ", DTypeName(data), ", not f32"));
  }
  const int64_t rank = Rank(n.input(0));
  if (op == "Gather" || op == "GatherElements") {
    RETURN_IF_ERROR(ops::NormalizeAxis(n.GetInt("axis", 0), rank, "axis").status());
    if (n.input(1) == nullptr) return NodeError(n, "missing indices");
    if (op == "GatherElements" && Rank(n.input(1)) != rank) return NodeError(n, "indices rank differs from data");
    return absl::OkStatus();
  }
  if (op == "GatherND") {
    if (n.input(1) == nullptr) return NodeError(n, "missing indices");
    return absl::OkStatus();  // shape inference checked batch_dims and the index tuple length
  }
  if (op == "DepthToSpace" || op == "SpaceToDepth") {
    if (rank != 4) return NodeError(n, "input is not 4-D");
    if (n.GetInt("blocksize", 0) < 1) return NodeError(n, "bad blocksize");
    std::string mode = n.GetString("mode", "DCR");
    if (op == "DepthToSpace" && mode != "DCR" && mode != "CRD") return NodeError(n, "unknown mode");
    return absl::OkStatus();
  }
  if (op == "Trilu") {
    if (rank < 2) return NodeError(n, "rank below 2");
    if (n.input(1) != nullptr && NumElements(DimsOf(n.input(1))) != 1) return NodeError(n, "k is not a scalar");
    return absl::OkStatus();
  }
  if (op == "Split") {
    ASSIGN_OR_RETURN(int64_t axis, ops::NormalizeAxis(n.GetInt("axis", 0), rank, "axis"));
    return SplitOffset(n, axis).status();
  }
  if (op == "CumSum") {
    if (rank < 1) return NodeError(n, "scalar input");
    if (n.input(1) == nullptr || NumElements(DimsOf(n.input(1))) != 1) return NodeError(n, "axis is not a scalar");
    if (n.input(1)->is_constant()) {
      ASSIGN_OR_RETURN(std::vector<int64_t> a, ops::ConstantIntInput(n, 1));
      RETURN_IF_ERROR(ops::NormalizeAxis(a[0], rank, "axis").status());
    }
    return absl::OkStatus();
  }
  if (op == "ArgMax" || op == "ArgMin") {
    if (rank < 1) return NodeError(n, "scalar input");
    ASSIGN_OR_RETURN(int64_t axis, ops::NormalizeAxis(n.GetInt("axis", 0), rank, "axis"));
    if (DimsOf(n.input(0))[axis] < 1) return NodeError(n, "empty axis");
    return absl::OkStatus();
  }
  return NodeError(n, "not an index operator");
}

bool IsGraphOutput(const Graph& g, const Value* v) {
  return std::find(g.outputs().begin(), g.outputs().end(), v) != g.outputs().end();
}

}  // namespace

bool IsIndexScanOp(const std::string& op) { return op == "CumSum" || op == "ArgMax" || op == "ArgMin"; }

// The workload check of this kind: like CheckWorkloadBasics, but integer index
// operands and ArgMax/ArgMin's i64 result are allowed where they are used.
absl::StatusOr<IndexForm> AnalyzeIndex(const Graph& g) {
  if (g.nodes().empty() || g.outputs().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("workload graph ", g.name(), " has no nodes or no outputs"));
  }
  IndexForm f;
  for (const auto& n : g.nodes()) {
    if (!n->domain().empty()) return NodeError(*n, "has a domain");
    const std::string& op = n->op_type();
    if (IsExprOp(op) || IsScanOp(op)) {
      RETURN_IF_ERROR(CheckIndexNode(*n));
      if (IsExprOp(op)) {
        ++f.expr_nodes;
      } else {
        if (f.scan != nullptr) return NodeError(*n, "a second scan in one workload");
        if (!IsGraphOutput(g, n->output(0))) return NodeError(*n, "result is not a workload output");
        f.scan = n.get();
      }
      continue;
    }
    if (!IsInlinableElementwise(op) && !IsInlinableDataMovement(op)) return NodeError(*n, "not inlinable");
    RETURN_IF_ERROR(GraphExpr::CheckNode(*n));
  }
  if (f.scan == nullptr && f.expr_nodes == 0) {
    return absl::UnimplementedError(absl::StrCat("workload ", g.name(), " has no index operator"));
  }
  RETURN_IF_ERROR(CheckWorkload(g, [](const Value*) { return true; }, "tensor"));
  // Integer data (moved by index expressions, scanned, computed by
  // elementwise nodes) takes its own type; an integer read as an index is
  // an i64 workload input or a constant, which IndexExpr::IntAt reads.
  for (const auto& n : g.nodes()) {
    const int slot = IntOperand(n->op_type());
    if (slot < 0 || slot >= n->num_inputs() || n->input(slot) == nullptr) continue;
    const Value* v = n->input(slot);
    if (v->is_constant()) continue;
    const DType t = v->type().dtype;
    if ((t != DType::kInt64 && t != DType::kInt32) || v->producer() != nullptr) {
      return NodeError(*n, absl::StrCat("index operand ", v->name(), " is ", DTypeName(t),
                                        v->producer() != nullptr ? " computed in the workload" : "",
                                        " (indices are i64 or i32 workload inputs or constants)"));
    }
  }
  return f;
}

IndexExpr::IndexExpr(const Graph& g) : g_(g), ge_(g) {
  args_ = ge_.args();  // typed as their values: i64 inputs are i64 buffers
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const DType t = g.inputs()[i]->type().dtype;
    if (t == DType::kInt64 || t == DType::kInt32) int_inputs_[g.inputs()[i]] = args_[i];
  }
  int k = 0;
  for (const auto& n : g.nodes()) {
    if (!IsExprOp(n->op_type())) continue;
    Buffer m = MakeBuffer(absl::StrCat("marker", k++), DimsOf(n->output(0)), BufferRole::kTemp, -1,
                          ScalarTypeOf(n->output(0)->type().dtype));
    markers_[m.get()] = n.get();
    ge_.Bind(n->output(0), m);
  }
}

void IndexExpr::Bind(const Value* v, const Buffer& b) {
  bound_[v] = b;
  ge_.Bind(v, b);
}

absl::StatusOr<Expr> IndexExpr::At(const Value* v, const std::vector<Expr>& idx) {
  if (auto it = bound_.find(v); it != bound_.end()) return Load(it->second, idx);
  const Node* n = v->producer();
  if (n != nullptr && IsExprOp(n->op_type())) return NodeAt(*n, idx);
  ASSIGN_OR_RETURN(Expr e, ge_.At(v, idx));
  return Rewrite(e, idx);
}

absl::StatusOr<Expr> IndexExpr::IntAt(const Value* v, const Expr& flat) {
  if (v->is_constant()) {
    const Tensor& t = v->constant();
    const int64_t count = t.num_elements();
    if (count < 1) return absl::UnimplementedError(absl::StrCat("constant ", v->name(), " is empty"));
    Expr r = IntImm(ops::ElementAsInt(t, count - 1));
    for (int64_t k = count - 1; k-- > 0;) r = Select(Eq(flat, IntImm(k)), IntImm(ops::ElementAsInt(t, k)), r);
    return r;
  }
  auto it = int_inputs_.find(v);
  if (it == int_inputs_.end()) {
    return absl::UnimplementedError(absl::StrCat("value ", v->name(), " is not an integer input"));
  }
  Expr e = Load(it->second, flat);
  return it->second->dtype == ScalarType::kI64 ? e : Cast(ScalarType::kI64, e);
}

// Replaces marker loads in `e` (built by GraphExpr at index `idx`).
absl::StatusOr<Expr> IndexExpr::Rewrite(const Expr& e, const std::vector<Expr>& idx) {
  if (e->kind == ExprKind::kLoad) {
    auto it = markers_.find(e->buffer.get());
    if (it == markers_.end()) return e;
    const Node& n = *it->second;
    std::vector<int64_t> dims = DimsOf(n.output(0));
    const Expr& flat = e->args[0];
    std::vector<Expr> sub;
    if (dims.size() == idx.size() && Print(FlatIndex(dims, idx)) == Print(flat)) {
      sub = idx;  // the common case: same-shape consumers
    } else {
      sub.assign(dims.size(), nullptr);
      Expr rest = flat;
      for (size_t d = dims.size(); d-- > 0;) {
        sub[d] = d == 0 ? rest : Mod(rest, IntImm(dims[d]));
        if (d > 0) rest = Div(rest, IntImm(dims[d]));
      }
    }
    return NodeAt(n, sub);
  }
  bool changed = false;
  std::vector<Expr> args;
  for (const Expr& a : e->args) {
    ASSIGN_OR_RETURN(Expr r, Rewrite(a, idx));
    changed = changed || r != a;
    args.push_back(r);
  }
  if (!changed) return e;
  auto copy = std::make_shared<ExprNode>(*e);
  copy->args = std::move(args);
  return Expr(copy);
}

namespace {

// Index `i` (any sign) normalised against extent `n` and clamped into
// [0, n): the interpreter rejects out-of-range indices at run time, but a
// kernel cannot report an error, so it must at least never read outside.
Expr NormalizeIndex(const Expr& i, int64_t n) {
  Expr pos = Select(Lt(i, IntImm(0)), Add(i, IntImm(n)), i);
  return Min(Max(pos, IntImm(0)), IntImm(n - 1));
}

}  // namespace

absl::StatusOr<Expr> IndexExpr::NodeAt(const Node& n, const std::vector<Expr>& idx) {
  const std::string& op = n.op_type();
  const Value* x = n.input(0);
  std::vector<int64_t> xd = DimsOf(x);
  const int64_t rank = static_cast<int64_t>(xd.size());
  if (op == "Gather") {
    ASSIGN_OR_RETURN(int64_t axis, ops::NormalizeAxis(n.GetInt("axis", 0), rank, "axis"));
    std::vector<int64_t> id = DimsOf(n.input(1));
    const size_t q = id.size();
    std::vector<Expr> j(idx.begin() + axis, idx.begin() + axis + q);
    ASSIGN_OR_RETURN(Expr i, IntAt(n.input(1), FlatIndex(id, j)));
    std::vector<Expr> sub(idx.begin(), idx.begin() + axis);
    sub.push_back(NormalizeIndex(i, xd[axis]));
    sub.insert(sub.end(), idx.begin() + axis + q, idx.end());
    return At(x, sub);
  }
  if (op == "GatherND") {
    const int64_t b = n.GetInt("batch_dims", 0);
    std::vector<int64_t> id = DimsOf(n.input(1));
    const int64_t q = static_cast<int64_t>(id.size()), k = id[q - 1];
    std::vector<Expr> sub(idx.begin(), idx.begin() + b);
    for (int64_t j = 0; j < k; ++j) {
      std::vector<Expr> at(idx.begin(), idx.begin() + (q - 1));
      at.push_back(IntImm(j));
      ASSIGN_OR_RETURN(Expr i, IntAt(n.input(1), FlatIndex(id, at)));
      sub.push_back(NormalizeIndex(i, xd[b + j]));
    }
    sub.insert(sub.end(), idx.begin() + (q - 1), idx.end());
    return At(x, sub);
  }
  if (op == "GatherElements") {
    ASSIGN_OR_RETURN(int64_t axis, ops::NormalizeAxis(n.GetInt("axis", 0), rank, "axis"));
    ASSIGN_OR_RETURN(Expr i, IntAt(n.input(1), FlatIndex(DimsOf(n.input(1)), idx)));
    std::vector<Expr> sub = idx;
    sub[axis] = NormalizeIndex(i, xd[axis]);
    return At(x, sub);
  }
  if (op == "DepthToSpace") {
    const int64_t b = n.GetInt("blocksize", 1), oc = xd[1] / (b * b);
    Expr bh = Mod(idx[2], IntImm(b)), bw = Mod(idx[3], IntImm(b));
    Expr ic = n.GetString("mode", "DCR") == "DCR"
                  ? Add(Mul(Add(Mul(bh, IntImm(b)), bw), IntImm(oc)), idx[1])
                  : Add(Add(Mul(idx[1], IntImm(b * b)), Mul(bh, IntImm(b))), bw);
    return At(x, {idx[0], ic, Div(idx[2], IntImm(b)), Div(idx[3], IntImm(b))});
  }
  if (op == "SpaceToDepth") {
    const int64_t b = n.GetInt("blocksize", 1);
    Expr block = Div(idx[1], IntImm(xd[1])), ch = Mod(idx[1], IntImm(xd[1]));
    Expr bh = Div(block, IntImm(b)), bw = Mod(block, IntImm(b));
    return At(x, {idx[0], ch, Add(Mul(idx[2], IntImm(b)), bh), Add(Mul(idx[3], IntImm(b)), bw)});
  }
  if (op == "Trilu") {
    Expr k = IntImm(0);
    if (n.input(1) != nullptr) {
      ASSIGN_OR_RETURN(k, IntAt(n.input(1), IntImm(0)));
    }
    Expr diff = Sub(idx[rank - 1], idx[rank - 2]);
    Expr keep = n.GetInt("upper", 1) != 0 ? Ge(diff, k) : Le(diff, k);
    ASSIGN_OR_RETURN(Expr v, At(x, idx));
    return Select(keep, v, Const(ComputeTypeOf(x->type().dtype), 0));
  }
  if (op == "Split") {
    ASSIGN_OR_RETURN(int64_t axis, ops::NormalizeAxis(n.GetInt("axis", 0), rank, "axis"));
    ASSIGN_OR_RETURN(int64_t off, SplitOffset(n, axis));
    std::vector<Expr> sub = idx;
    sub[axis] = Add(idx[axis], IntImm(off));
    return At(x, sub);
  }
  return NodeError(n, "not an index expression");
}

std::vector<int64_t> ScanDims(const Node& scan, int64_t axis) {
  std::vector<int64_t> d = DimsOf(scan.input(0));
  d[axis] = 1;
  return d;
}

// AnalyzeIndex checked the axis (CheckIndexNode): it normalises.
std::optional<int64_t> ScanAxis(const Node& scan) {
  const int64_t rank = Rank(scan.input(0));
  if (scan.op_type() != "CumSum") return *ops::NormalizeAxis(scan.GetInt("axis", 0), rank, "axis");
  if (!scan.input(1)->is_constant()) return std::nullopt;
  return *ops::NormalizeAxis(ops::ElementAsInt(scan.input(1)->constant(), 0), rank, "axis");
}

absl::StatusOr<Expr> RuntimeScanAxis(IndexExpr& ie, const Node& scan) {
  ASSIGN_OR_RETURN(Expr a, ie.IntAt(scan.input(1), IntImm(0)));
  return Select(Lt(a, IntImm(0)), Add(a, IntImm(Rank(scan.input(0)))), a);
}

Expr ArgBetter(const Node& arg, const Expr& v, const Expr& best) {
  const bool is_max = arg.op_type() == "ArgMax", last = arg.GetInt("select_last_index", 0) != 0;
  return is_max ? (last ? Ge(v, best) : Gt(v, best)) : (last ? Le(v, best) : Lt(v, best));
}

namespace {

// The dims whose innermost extent sizes the vector width and whose element
// count decides on a parallel split.
std::vector<int64_t> NestDims(const Graph& g, const IndexForm& f) {
  if (f.scan != nullptr) {
    // A run-time CumSum axis: sized as if it were the last.
    const int64_t axis = ScanAxis(*f.scan).value_or(Rank(f.scan->input(0)) - 1);
    return ScanDims(*f.scan, axis);
  }
  return DimsOf(g.outputs()[0]);
}

// One nest (a single loop nest is the whole kernel, so it may go parallel).
bool SingleNest(const Graph& g, const IndexForm& f) {
  if (f.scan == nullptr) return g.outputs().size() == 1;
  if (g.outputs().size() != 1) return false;
  if (f.scan->op_type() == "CumSum" && !f.scan->input(1)->is_constant()) return Rank(f.scan->input(0)) == 1;
  return true;
}

std::vector<ScheduleConfig> Enumerate(const Graph& g, const CpuTarget& target) {
  absl::StatusOr<IndexForm> f = AnalyzeIndex(g);
  if (!f.ok()) return {};
  std::vector<int64_t> d = NestDims(g, *f);
  int64_t inner = 1;
  for (int64_t x : d) {
    if (x != 1) inner = x;
  }
  std::vector<ScheduleConfig> out;
  for (int64_t vw : VectorWidths(target, inner)) {
    int64_t work = f->scan != nullptr ? NumElements(DimsOf(f->scan->input(0))) : NumElements(d);
    for (int64_t tasks : TaskCounts(work, SingleNest(g, *f))) {
      ScheduleConfig c;
      c.Set("vw", vw);
      c.Set("tasks", tasks);
      out.push_back(c);
    }
  }
  return out;
}

absl::Status Validate(const Graph& g, const ScheduleConfig& c, const CpuTarget& target) {
  RETURN_IF_ERROR(AnalyzeIndex(g).status());
  return ValidateKnobs(g, c, target, {"vw", "tasks"});
}

// The scan of a CumSum along `axis` into `out` (the result buffer).
absl::StatusOr<Stmt> CumSumNest(IndexExpr& ie, const Node& n, int64_t axis, const Buffer& out) {
  std::vector<int64_t> xd = DimsOf(n.input(0));
  const int64_t len = xd[axis];
  const bool exclusive = n.GetInt("exclusive", 0) != 0, reverse = n.GetInt("reverse", 0) != 0;
  std::vector<int64_t> dims = ScanDims(n, axis);
  absl::Status err = absl::OkStatus();
  Stmt nest = ForEachIndex(dims, "c_", [&](const std::vector<Expr>& idx) -> Stmt {
    auto at = [&](Expr k) {
      std::vector<Expr> sub = idx;
      sub[axis] = std::move(k);
      return sub;
    };
    auto x_at = [&](Expr k) -> Expr {
      absl::StatusOr<Expr> v = ie.At(n.input(0), at(std::move(k)));
      if (!v.ok()) {
        err = v.status();
        return FloatImm(0);
      }
      return *v;
    };
    Expr first = IntImm(reverse ? len - 1 : 0);
    std::vector<Stmt> st = {Store(out, at(first), exclusive ? Const(out->dtype, 0) : x_at(first))};
    if (len > 1) {
      Expr s = Var("s_");
      Expr k = reverse ? Sub(IntImm(len - 2), s) : Add(s, IntImm(1));
      Expr prev = reverse ? Add(k, IntImm(1)) : s;
      Expr value = Add(Load(out, at(prev)), x_at(exclusive ? prev : k));
      st.push_back(For("s_", IntImm(len - 1), Store(out, at(k), value)));
    }
    return Block(st);
  });
  RETURN_IF_ERROR(err);
  return nest;
}

// ArgMax/ArgMin: the best index so far lives in the (i64) result.
absl::StatusOr<Stmt> ArgNest(IndexExpr& ie, const Node& n, int64_t axis, const Buffer& out) {
  const int64_t len = DimsOf(n.input(0))[axis];
  std::vector<int64_t> dims = ScanDims(n, axis);
  absl::Status err = absl::OkStatus();
  Stmt nest = ForEachIndex(dims, "c_", [&](const std::vector<Expr>& idx) -> Stmt {
    Expr o = FlatIndex(dims, idx);
    std::vector<Stmt> st = {Store(out, o, IntImm(0))};
    if (len > 1) {
      Expr k = Add(Var("s_"), IntImm(1));
      Expr best = Load(out, o);
      std::vector<Expr> sk = idx, sb = idx;
      sk[axis] = k;
      sb[axis] = best;
      absl::StatusOr<Expr> v = ie.At(n.input(0), sk);
      absl::StatusOr<Expr> b = ie.At(n.input(0), sb);
      if (!v.ok() || !b.ok()) {
        err = !v.ok() ? v.status() : b.status();
        return Block({});
      }
      st.push_back(For("s_", IntImm(len - 1), Store(out, o, Select(ArgBetter(n, *v, *b), k, best))));
    }
    return Block(st);
  });
  RETURN_IF_ERROR(err);
  return nest;
}

absl::StatusOr<LoopFunc> Lower(const Graph& g, const ScheduleConfig& config, const CpuTarget& target) {
  ASSIGN_OR_RETURN(IndexForm f, AnalyzeIndex(g));
  RETURN_IF_ERROR(ValidateKnobs(g, config, target, {"vw", "tasks"}));
  IndexExpr ie(g);
  const int64_t vw = config.Get("vw", 1);
  const int64_t tasks = SingleNest(g, f) ? config.Get("tasks", 1) : 1;
  std::vector<Stmt> stmts;
  int scan_out = -1;
  if (f.scan != nullptr) {
    const Node& n = *f.scan;
    for (size_t j = 0; j < g.outputs().size(); ++j) {
      if (g.outputs()[j] == n.output(0)) scan_out = static_cast<int>(j);
    }
    const Buffer& out = ie.output_buffer(scan_out);
    const int64_t rank = Rank(n.input(0));
    if (NumElements(DimsOf(n.input(0))) > 0) {
      if (!ScanAxis(n).has_value()) {
        // The axis is a run-time input: one guarded scan per possible axis.
        ASSIGN_OR_RETURN(Expr axis, RuntimeScanAxis(ie, n));
        for (int64_t ax = 0; ax < rank; ++ax) {
          ASSIGN_OR_RETURN(Stmt nest, CumSumNest(ie, n, ax, out));
          ASSIGN_OR_RETURN(nest, ScheduleNest(nest, ScanDims(n, ax), "c_", vw, rank == 1 ? tasks : 1));
          stmts.push_back(rank == 1 ? nest : IfThen(Eq(axis, IntImm(ax)), nest));
        }
      } else {
        const int64_t axis = *ScanAxis(n);
        ASSIGN_OR_RETURN(Stmt nest, n.op_type() == "CumSum" ? CumSumNest(ie, n, axis, out) : ArgNest(ie, n, axis, out));
        ASSIGN_OR_RETURN(nest, ScheduleNest(nest, ScanDims(n, axis), "c_", vw, tasks));
        stmts.push_back(nest);
      }
    }
    ie.Bind(n.output(0), out);
  }
  for (size_t j = 0; j < g.outputs().size(); ++j) {
    if (static_cast<int>(j) == scan_out) continue;
    std::vector<int64_t> dims = DimsOf(g.outputs()[j]);
    if (NumElements(dims) == 0) continue;
    absl::Status err = absl::OkStatus();
    std::string prefix = absl::StrCat("o", j, "_");
    Stmt nest = ForEachIndex(dims, prefix, [&](const std::vector<Expr>& idx) -> Stmt {
      absl::StatusOr<Expr> v = ie.At(g.outputs()[j], idx);
      if (!v.ok()) {
        err = v.status();
        return Block({});
      }
      const Buffer& out = ie.output_buffer(static_cast<int>(j));
      return Store(out, idx, Cast(out->dtype, *v));
    });
    RETURN_IF_ERROR(err);
    ASSIGN_OR_RETURN(nest, ScheduleNest(nest, dims, prefix, vw, tasks));
    stmts.push_back(nest);
  }
  return LoopFunc{"index", ie.args(), Block(stmts)};
}

}  // namespace

WorkloadLowering IndexLowering() {
  WorkloadLowering l;
  l.kind = "index";
  l.match = [](const Graph& g) { return AnalyzeIndex(g).status(); };
  l.enumerate = Enumerate;
  l.default_schedule = [](const Graph& g, const CpuTarget& t) { return PickDefault(Enumerate(g, t), t); };
  l.validate = Validate;
  l.lower = Lower;
  return l;
}

}  // namespace kiln::loop_ir
