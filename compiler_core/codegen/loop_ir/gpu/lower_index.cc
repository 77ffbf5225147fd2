// GPU lowering of the index kind (see gpu/lower_index.h); what a workload
// is and how each index operator reads comes from the CPU lowering
// (loop_ir/lower_index.h).
#include "compiler_core/codegen/loop_ir/gpu/lower_index.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compiler_core/codegen/loop_ir/gpu/group_reduce.h"
#include "compiler_core/codegen/loop_ir/graph_expr.h"
#include "compiler_core/codegen/loop_ir/lower_common.h"
#include "compiler_core/codegen/loop_ir/lower_index.h"
#include "compiler_core/codegen/loop_ir/printer.h"

namespace kiln::loop_ir::gpu {
namespace {

Expr I(int64_t v) { return IntImm(v); }
Expr F(double v) { return FloatImm(v); }

// How each output is written.
enum class OutputForm {
  kScan,      // the scan's own result
  kFlat,      // flat items; reads no scan result
  kAtScan,    // reads the scan only at the element it writes: written with it
  kResummed,  // reads a CumSum elsewhere: flat items (vw 1) that sum its prefix again
};

struct Workload {
  IndexForm form;
  std::optional<int64_t> axis;  // the scan's axis; nullopt for a run-time axis
  int64_t len = 0;              // the scan's extent along a constant axis
  int64_t rows = 0;             // scan rows along a constant axis
  bool inner_axis = false;      // every axis after the scanned one has extent 1
  int scan_out = -1;
  std::vector<OutputForm> outputs;
};

std::vector<Expr> SymbolicIndex(size_t rank) {
  std::vector<Expr> idx;
  for (size_t d = 0; d < rank; ++d) idx.push_back(Var(absl::StrCat("q", d)));
  return idx;
}

void CollectLoads(const Expr& e, const BufferNode* b, std::vector<Expr>* loads) {
  if (e->kind == ExprKind::kLoad && e->buffer.get() == b) loads->push_back(e);
  for (const Expr& a : e->args) CollectLoads(a, b, loads);
}

// `e` with every load of `b` replaced by value(that load).
Expr ReplaceLoads(const Expr& e, const BufferNode* b, const std::function<Expr(const Expr&)>& value) {
  if (e->kind == ExprKind::kLoad && e->buffer.get() == b) return value(e);
  if (e->args.empty()) return e;
  bool changed = false;
  std::vector<Expr> args;
  for (const Expr& a : e->args) {
    args.push_back(ReplaceLoads(a, b, value));
    changed = changed || args.back() != a;
  }
  if (!changed) return e;
  auto copy = std::make_shared<ExprNode>(*e);
  copy->args = std::move(args);
  return Expr(copy);
}

absl::StatusOr<Workload> Analyze(const Graph& g) {
  Workload w;
  ASSIGN_OR_RETURN(w.form, AnalyzeIndex(g));
  w.outputs.assign(g.outputs().size(), OutputForm::kFlat);
  const Node* scan = w.form.scan;
  if (scan == nullptr) return w;
  for (size_t j = 0; j < g.outputs().size() && w.scan_out < 0; ++j) {
    if (g.outputs()[j] == scan->output(0)) w.scan_out = static_cast<int>(j);
  }
  w.outputs[w.scan_out] = OutputForm::kScan;
  const std::vector<int64_t> in_dims = DimsOf(scan->input(0));
  w.axis = ScanAxis(*scan);
  if (w.axis.has_value()) {
    w.len = in_dims[*w.axis];
    w.rows = NumElements(ScanDims(*scan, *w.axis));
    w.inner_axis = NumElements(std::vector<int64_t>(in_dims.begin() + *w.axis + 1, in_dims.end())) == 1;
  }
  // Which outputs read the scan's result, and where.
  IndexExpr ie(g);
  const Buffer& sb = ie.output_buffer(w.scan_out);
  ie.Bind(scan->output(0), sb);
  for (size_t j = 0; j < g.outputs().size(); ++j) {
    if (static_cast<int>(j) == w.scan_out) continue;
    const std::vector<int64_t> dims = DimsOf(g.outputs()[j]);
    const std::vector<Expr> idx = SymbolicIndex(dims.size());
    ASSIGN_OR_RETURN(Expr e, ie.At(g.outputs()[j], idx));
    std::vector<Expr> loads;
    CollectLoads(e, sb.get(), &loads);
    if (loads.empty()) continue;
    const std::string own = Print(FlatIndex(dims, idx));
    bool at_own = dims == in_dims;
    for (const Expr& l : loads) at_own = at_own && Print(l->args[0]) == own;
    w.outputs[j] = at_own ? OutputForm::kAtScan : OutputForm::kResummed;
  }
  return w;
}

bool HasFlatVectorOutput(const Workload& w) {
  return std::find(w.outputs.begin(), w.outputs.end(), OutputForm::kFlat) != w.outputs.end();
}

// Lanes of a 16-byte store of the widest output element (narrow types count
// as 4 bytes: they are computed in f32), at most 4.
int64_t MaxVw(const Graph& g) {
  int64_t widest = 4;
  for (const Value* v : g.outputs()) widest = std::max<int64_t>(widest, DTypeSize(v->type().dtype));
  return std::clamp<int64_t>(16 / widest, 1, 4);
}

// The last extent of the first flat output (1 when there is none).
int64_t FlatInner(const Graph& g, const Workload& w) {
  for (size_t j = 0; j < g.outputs().size(); ++j) {
    if (w.outputs[j] != OutputForm::kFlat) continue;
    const std::vector<int64_t> d = DimsOf(g.outputs()[j]);
    return d.empty() ? 1 : d.back();
  }
  return 1;
}

std::vector<int64_t> FlatVectorWidths(const Graph& g, const Workload& w) {
  std::vector<int64_t> out = {1};
  if (!HasFlatVectorOutput(w)) return out;
  const int64_t inner = FlatInner(g, w);
  for (int64_t vw = 2; vw <= MaxVw(g) && vw <= inner; vw *= 2) out.push_back(vw);
  return out;
}

bool IsCumSum(const Workload& w) { return w.form.scan != nullptr && w.form.scan->op_type() == "CumSum"; }

// The scan forms of the space: (bt, tr, ept), ept 0 where it does not apply.
struct ScanPoint {
  int64_t bt, tr, ept;
};

std::vector<ScanPoint> ScanPoints(const Workload& w) {
  std::vector<ScanPoint> out;
  for (int64_t bt : {128, 256}) out.push_back({bt, 1, 0});
  if (!w.axis.has_value()) return out;  // a run-time axis: a thread per row only
  if (IsCumSum(w)) {
    for (int64_t ept : {1, 4}) {
      const int64_t cap = std::max<int64_t>(32, Pow2Ceil(CeilDiv(w.len, ept)));
      for (int64_t bt : {32, 64, 128, 256, 512}) {
        if (bt <= cap) out.push_back({bt, bt, ept});
      }
    }
    return out;
  }
  for (int64_t bt : {128, 256}) out.push_back({bt, 32, 0});
  const int64_t cap = std::max<int64_t>(64, Pow2Ceil(w.len));
  for (int64_t bt : {64, 128, 256, 512}) {
    if (bt <= cap) out.push_back({bt, bt, 0});
  }
  return out;
}

ScheduleConfig Point(int64_t bt, int64_t vw, const std::optional<int64_t>& un, const std::optional<ScanPoint>& p) {
  ScheduleConfig c;
  c.Set("bt", bt);
  c.Set("vw", vw);
  if (un) c.Set("un", *un);
  if (p) {
    c.Set("tr", p->tr);
    if (p->ept > 0) c.Set("ept", p->ept);
  }
  return c;
}

std::vector<ScheduleConfig> Enumerate(const Graph& g, const GpuTarget&) {
  absl::StatusOr<Workload> w = Analyze(g);
  if (!w.ok()) return {};
  std::vector<ScheduleConfig> out;
  for (int64_t vw : FlatVectorWidths(g, *w)) {
    if (w->form.scan == nullptr) {
      for (int64_t bt : GpuBlockSizes()) {
        for (int64_t un : {1, 2, 4}) out.push_back(Point(bt, vw, un, std::nullopt));
      }
      continue;
    }
    for (const ScanPoint& p : ScanPoints(*w)) out.push_back(Point(p.bt, vw, std::nullopt, p));
  }
  return out;
}

// Flat outputs: the widest vw that divides their rows, 256 threads, one item
// per thread. A scan along the innermost axis of long rows takes a block
// (CumSum, or ArgMax/ArgMin of rows too few to fill the GPU with warps) or
// a warp per row: its reads are contiguous then; along another axis
// neighbouring threads' rows are neighbours and a thread per row reads
// coalesced.
ScheduleConfig Default(const Graph& g, const GpuTarget& t) {
  std::vector<ScheduleConfig> space = Enumerate(g, t);
  absl::StatusOr<Workload> w = Analyze(g);
  if (!w.ok() || space.empty()) return {};
  const std::vector<int64_t> vws = FlatVectorWidths(g, *w);
  const int64_t inner = FlatInner(g, *w);
  int64_t vw = 1;
  for (int64_t v : vws) {
    if (inner % v == 0) vw = v;
  }
  ScheduleConfig c;
  if (w->form.scan == nullptr) {
    c = Point(256, vw, 1, std::nullopt);
  } else {
    ScanPoint p{256, 1, 0};
    // Rows enough for 8 warps on each of 132 SMs.
    constexpr int64_t kManyRows = 132 * 8;
    if (w->axis.has_value() && w->inner_axis) {
      if (IsCumSum(*w) && w->len >= 64) {
        const int64_t ept = w->len >= 4 * 32 ? 4 : 1;
        const int64_t bt = std::clamp<int64_t>(Pow2Ceil(CeilDiv(w->len, ept)), 32, 256);
        p = {bt, bt, ept};
      } else if (!IsCumSum(*w) && w->len >= 32) {
        p = w->len >= 1024 && w->rows < kManyRows ? ScanPoint{256, 256, 0} : ScanPoint{256, 32, 0};
      }
    }
    c = Point(p.bt, vw, std::nullopt, p);
  }
  return std::find(space.begin(), space.end(), c) != space.end() ? c : space.front();
}

absl::Status Validate(const Graph& g, const ScheduleConfig& c, const GpuTarget&) {
  ASSIGN_OR_RETURN(Workload w, Analyze(g));
  const bool scan = w.form.scan != nullptr;
  std::vector<std::string> known = {"bt", "vw"};
  if (scan) {
    known.push_back("tr");
    if (IsCumSum(w)) known.push_back("ept");
  } else {
    known.push_back("un");
  }
  RETURN_IF_ERROR(ValidateGpuKnobs(g, c, known));
  auto bad = [&](const std::string& knob, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("schedule ", c.ToString(), ": knob ", knob, "=",
                                                   c.Get(knob, 0), " ", why, " for workload ", g.name()));
  };
  const int64_t vw = c.Get("vw", 1), bt = c.Get("bt", 256);
  if (vw < 1 || vw > MaxVw(g) || (vw & (vw - 1)) != 0) {
    return bad("vw", absl::StrCat("is not a power of two up to ", MaxVw(g)));
  }
  if (c.Get("un", 1) < 1 || c.Get("un", 1) > 8) return bad("un", "is not in [1, 8]");
  if (!scan) return absl::OkStatus();
  const int64_t tr = c.Get("tr", 1), ept = c.Get("ept", 1);
  if (tr != 1 && tr != 32 && tr != bt) return bad("tr", "is not 1, 32 or bt");
  if (tr != 1 && !w.axis.has_value()) return bad("tr", "needs a constant scan axis (the axis is a run-time input)");
  if (IsCumSum(w) && tr != 1 && tr != bt) return bad("tr", "is not 1 or bt (a CumSum scans with a thread or a block)");
  if (ept != 1 && ept != 2 && ept != 4 && ept != 8) return bad("ept", "is not 1, 2, 4 or 8");
  return absl::OkStatus();
}

// `flat` split into an index of `dims` (unit extents take index 0; the
// outermost non-unit axis takes no remainder: flat < the element count).
std::vector<Expr> Unflatten(const std::vector<int64_t>& dims, const Expr& flat) {
  std::vector<Expr> idx(dims.size(), I(0));
  size_t first = dims.size();
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] != 1) {
      first = d;
      break;
    }
  }
  int64_t stride = 1;
  for (size_t d = dims.size(); d-- > 0;) {
    if (dims[d] == 1) continue;
    Expr q = Div(flat, I(stride));
    idx[d] = d == first ? q : Mod(q, I(dims[d]));
    stride *= dims[d];
  }
  return idx;
}

// The kernel's statements for one workload at one schedule point. Errors of
// expression building inside FlatKernel's callbacks are kept in err_.
class IndexKernel {
 public:
  IndexKernel(const Graph& g, const Workload& w, const ScheduleConfig& c)
      : g_(g), w_(w), ie_(g), bt_(c.Get("bt", 256)), vw_(c.Get("vw", 1)), un_(c.Get("un", 1)),
        tr_(c.Get("tr", 1)), ept_(c.Get("ept", 1)) {
    if (w.form.scan != nullptr) {
      scan_ = w.form.scan;
      st_ = ComputeTypeOf(scan_->input(0)->type().dtype);
      scan_buf_ = ie_.output_buffer(w.scan_out);
      in_dims_ = DimsOf(scan_->input(0));
      ie_.Bind(scan_->output(0), scan_buf_);
    }
  }

  absl::StatusOr<LoopFunc> Lower();

 private:
  using FlatBody = std::pair<int64_t, std::function<Stmt(Expr)>>;

  Stmt Failed(const absl::Status& s) {
    if (err_.ok()) err_ = s;
    return Block({});
  }
  // The scan's input at `idx` with position `k` along `axis`.
  Expr X(std::vector<Expr> idx, int64_t axis, const Expr& k) {
    idx[axis] = k;
    absl::StatusOr<Expr> v = ie_.At(scan_->input(0), idx);
    if (!v.ok()) {
      Failed(v.status());
      return F(0);
    }
    return *v;
  }

  FlatBody FlatOutput(int j, int64_t vw);
  // A CumSum's result at element `sidx` of its input summed again: `fill`
  // computes it into the temp `acc` (allocated around the statements that
  // read it); `tag` names the temp and its loop.
  struct Resummed {
    Buffer acc;
    Stmt fill;
  };
  Resummed Resum(const std::vector<Expr>& sidx, const std::string& tag);
  // The scan's result `value` at element `idx` of its input, and the
  // outputs that read it there.
  Stmt StoreScanElement(const std::vector<Expr>& idx, const Expr& value);
  std::vector<FlatBody> ThreadPerRow();
  Stmt ThreadCumSum(const std::vector<Expr>& idx, int64_t axis);
  Stmt ThreadArg(const std::vector<Expr>& idx, int64_t axis);
  // tr = bt (CumSum): the block-wide scan of row `blk`.
  Stmt BlockCumSum();
  // tr = 32 or bt (ArgMax/ArgMin): rows of bt/tr per block.
  Stmt GroupArg();

  const Graph& g_;
  const Workload& w_;
  IndexExpr ie_;
  const int64_t bt_, vw_, un_, tr_, ept_;
  const Node* scan_ = nullptr;
  // What a CumSum sums in: its data's type (f32, f64, i32 or i64).
  ScalarType st_ = ScalarType::kF32;
  Expr Zero() const { return Const(st_, 0); }
  Buffer scan_buf_;
  std::vector<int64_t> in_dims_;
  absl::Status err_ = absl::OkStatus();
};

IndexKernel::Resummed IndexKernel::Resum(const std::vector<Expr>& sidx, const std::string& tag) {
  const bool exclusive = scan_->GetInt("exclusive", 0) != 0, reverse = scan_->GetInt("reverse", 0) != 0;
  Buffer acc = MakeBuffer("resum" + tag, {1}, BufferRole::kTemp, -1, st_);
  auto along = [&](int64_t axis) {
    const int64_t len = in_dims_[axis];
    const Expr& k = sidx[axis];
    // The elements the scan adds up to k, in the scan's order (so that the
    // sum is the one the scan writes).
    Expr count = reverse ? Sub(I(len - 1), k) : k;
    if (!exclusive) count = Add(count, I(1));
    const std::string s = "rs" + tag;
    Expr m = reverse ? Sub(I(len - 1), Var(s)) : Var(s);
    return For(s, count, Store(acc, I(0), Add(Load(acc, I(0)), X(sidx, axis, m))));
  };
  std::vector<Stmt> st = {Store(acc, I(0), Zero())};
  if (w_.axis.has_value()) {
    st.push_back(along(*w_.axis));
  } else {
    absl::StatusOr<Expr> axis = RuntimeScanAxis(ie_, *scan_);
    if (!axis.ok()) return {acc, Failed(axis.status())};
    for (int64_t ax = 0; ax < static_cast<int64_t>(in_dims_.size()); ++ax) {
      st.push_back(IfThen(Eq(*axis, I(ax)), along(ax)));
    }
  }
  return {acc, Block(st)};
}

IndexKernel::FlatBody IndexKernel::FlatOutput(int j, int64_t vw) {
  const std::vector<int64_t> dims = DimsOf(g_.outputs()[j]);
  const int rank = static_cast<int>(dims.size());
  const int64_t inner = rank == 0 ? 1 : dims.back();
  const int64_t per_row = CeilDiv(inner, vw);
  const int64_t items = NumElements(dims) / inner * per_row;
  const bool resummed = w_.outputs[j] == OutputForm::kResummed;
  return {items, [this, j, vw, dims, rank, inner, per_row, resummed](Expr item) -> Stmt {
            const std::string row_var = absl::StrCat("row_", j), lane_var = absl::StrCat("v_", j);
            Expr col = Add(Mul(Mod(item, I(per_row)), I(vw)), Var(lane_var));
            std::vector<Expr> idx;
            if (rank > 0) {
              idx = Unflatten(std::vector<int64_t>(dims.begin(), dims.end() - 1), Var(row_var));
              idx.push_back(col);
            }
            absl::StatusOr<Expr> v = ie_.At(g_.outputs()[j], idx);
            if (!v.ok()) return Failed(v.status());
            Expr value = *v;
            std::vector<Resummed> sums;
            if (resummed) {
              // Each read of the CumSum at another element sums its prefix again.
              std::vector<Expr> loads;
              CollectLoads(value, scan_buf_.get(), &loads);
              std::map<std::string, Buffer> at;
              for (const Expr& l : loads) {
                const std::string where = Print(l->args[0]);
                if (at.count(where) > 0) continue;
                sums.push_back(Resum(Unflatten(in_dims_, l->args[0]), absl::StrCat(j, "_", sums.size())));
                at[where] = sums.back().acc;
              }
              value = ReplaceLoads(value, scan_buf_.get(),
                                   [&](const Expr& l) { return Load(at.at(Print(l->args[0])), I(0)); });
            }
            const Buffer& out = ie_.output_buffer(j);
            Stmt store = Store(out, idx, Cast(out->dtype, value));
            for (size_t i = sums.size(); i-- > 0;) store = Allocate(sums[i].acc, Block({sums[i].fill, store}));
            if (inner % vw != 0) store = IfThen(Lt(col, I(inner)), store);
            Stmt lanes = For(lane_var, I(vw), store, vw > 1 ? ForKind::kVectorized : ForKind::kSerial);
            return LetStmt(row_var, Div(item, I(per_row)), lanes);
          }};
}

Stmt IndexKernel::StoreScanElement(const std::vector<Expr>& idx, const Expr& value) {
  std::vector<Stmt> st = {Store(scan_buf_, FlatIndex(in_dims_, idx), value)};
  for (size_t j = 0; j < g_.outputs().size(); ++j) {
    if (w_.outputs[j] != OutputForm::kAtScan) continue;
    absl::StatusOr<Expr> e = ie_.At(g_.outputs()[j], idx);
    if (!e.ok()) return Failed(e.status());
    const Buffer& out = ie_.output_buffer(static_cast<int>(j));
    Expr v = ReplaceLoads(*e, scan_buf_.get(), [&](const Expr&) { return value; });
    st.push_back(Store(out, FlatIndex(in_dims_, idx), Cast(out->dtype, v)));
  }
  return Block(st);
}

// CumSum along `axis` of the row at `idx`: the running sum in a register.
Stmt IndexKernel::ThreadCumSum(const std::vector<Expr>& idx, int64_t axis) {
  const int64_t len = in_dims_[axis];
  const bool exclusive = scan_->GetInt("exclusive", 0) != 0, reverse = scan_->GetInt("reverse", 0) != 0;
  Buffer acc = MakeBuffer(absl::StrCat("cum", axis), {1}, BufferRole::kTemp, -1, st_);
  const std::string s = absl::StrCat("s", axis);
  Expr k = reverse ? Sub(I(len - 1), Var(s)) : Var(s);
  std::vector<Expr> at = idx;
  at[axis] = k;
  Expr sum = Load(acc, I(0));
  Stmt add = Store(acc, I(0), Add(sum, X(idx, axis, k)));
  Stmt step = exclusive ? Block({StoreScanElement(at, sum), add}) : Block({add, StoreScanElement(at, sum)});
  return Allocate(acc, Block({Store(acc, I(0), Zero()), For(s, I(len), step)}));
}

// ArgMax/ArgMin along `axis` of the row at `idx`: the best index and value
// in registers.
Stmt IndexKernel::ThreadArg(const std::vector<Expr>& idx, int64_t axis) {
  const int64_t len = in_dims_[axis];
  Buffer bi = MakeBuffer("best_i", {1}, BufferRole::kTemp, -1, ScalarType::kI64);
  Buffer bv = MakeBuffer("best_v", {1}, BufferRole::kTemp);
  std::vector<Stmt> st = {Store(bi, I(0), I(0)), Store(bv, I(0), X(idx, axis, I(0)))};
  if (len > 1) {
    Expr k = Add(Var("s_"), I(1));
    Stmt take = Block({Store(bi, I(0), k), Store(bv, I(0), Var("x_", ScalarType::kF32))});
    Stmt step = LetStmt("x_", X(idx, axis, k),
                        IfThen(ArgBetter(*scan_, Var("x_", ScalarType::kF32), Load(bv, I(0))), take));
    st.push_back(For("s_", I(len - 1), step));
  }
  st.push_back(Store(scan_buf_, FlatIndex(ScanDims(*scan_, axis), idx), Load(bi, I(0))));
  return Allocate(bi, Allocate(bv, Block(st)));
}

std::vector<IndexKernel::FlatBody> IndexKernel::ThreadPerRow() {
  std::vector<FlatBody> bodies;
  const int64_t rank = static_cast<int64_t>(in_dims_.size());
  const bool cumsum = scan_->op_type() == "CumSum";
  for (int64_t ax = 0; ax < rank; ++ax) {
    if (w_.axis.has_value() && ax != *w_.axis) continue;
    const std::vector<int64_t> rows = ScanDims(*scan_, ax);
    bodies.emplace_back(NumElements(rows), [this, ax, rows, cumsum, rank](Expr item) -> Stmt {
      std::vector<Expr> idx = Unflatten(rows, item);
      Stmt s = cumsum ? ThreadCumSum(idx, ax) : ThreadArg(idx, ax);
      if (w_.axis.has_value() || rank == 1) return s;
      // A run-time axis: the scan of this axis runs where the input names it.
      absl::StatusOr<Expr> axis = RuntimeScanAxis(ie_, *scan_);
      if (!axis.ok()) return Failed(axis.status());
      return IfThen(Eq(*axis, I(ax)), s);
    });
  }
  return bodies;
}

Stmt IndexKernel::BlockCumSum() {
  const int64_t axis = *w_.axis, len = w_.len, T = bt_, E = ept_, S = T * E, tiles = CeilDiv(len, S);
  const bool exclusive = scan_->GetInt("exclusive", 0) != 0, reverse = scan_->GetInt("reverse", 0) != 0;
  const std::vector<Expr> row = Unflatten(ScanDims(*scan_, axis), Var("blk"));
  // Tile element i lives at i + i/32: a thread's E consecutive elements
  // (stride E across the threads) then fall in distinct banks.
  Buffer tile = MakeBuffer("tile", {S + S / 32}, BufferRole::kShared, -1, st_);
  auto slot = [](const Expr& i) { return Add(i, Div(i, I(32))); };
  Buffer sa = MakeBuffer("sums_a", {T}, BufferRole::kShared, -1, st_);
  Buffer sb = MakeBuffer("sums_b", {T}, BufferRole::kShared, -1, st_);
  Buffer carry = MakeBuffer("carry", {1}, BufferRole::kLocal, -1, st_);
  Expr tid = Var("tid"), tl = Var("tl");
  auto thread_loop = [&](Stmt body) { return For("tid", I(T), body, ForKind::kGpuThread); };
  // Position q of the scan order: its place along the axis, and the element.
  auto pos = [&](const Expr& q) { return reverse ? Sub(I(len - 1), q) : q; };
  auto element = [&](const Expr& q) {
    std::vector<Expr> at = row;
    at[axis] = pos(q);
    return at;
  };
  auto guarded = [&](const Expr& q, Stmt then_case, Stmt else_case = nullptr) {
    return len % S == 0 ? then_case : IfThen(Lt(q, I(len)), then_case, else_case);
  };
  std::vector<Stmt> per_tile;
  // The tile, coalesced: element e*T + tid of the tile is thread tid's e-th.
  {
    std::vector<Stmt> loads;
    for (int64_t e = 0; e < E; ++e) {
      Expr q = Add(Add(Mul(tl, I(S)), I(e * T)), tid);
      const Expr at = slot(Add(I(e * T), tid));
      loads.push_back(guarded(q, Store(tile, at, X(row, axis, pos(q))), Store(tile, at, Zero())));
    }
    per_tile.push_back(thread_loop(Block(loads)));
  }
  // Each thread's sum of its E consecutive elements.
  Buffer src = tile;
  if (E > 1) {
    Expr sum = Load(tile, slot(Mul(tid, I(E))));
    for (int64_t e = 1; e < E; ++e) sum = Add(sum, Load(tile, slot(Add(Mul(tid, I(E)), I(e)))));
    per_tile.push_back(thread_loop(Store(sa, tid, sum)));
    src = sa;
  }
  // Hillis-Steele: after the step of distance d, entry t holds the sum of
  // the 2d entries up to t.
  for (int64_t d = 1; d < T; d *= 2) {
    Buffer dst = src == sa ? sb : sa;
    auto read = [&](const Expr& i) { return Load(src, src == tile ? slot(i) : i); };
    Expr mine = read(tid);
    per_tile.push_back(
        thread_loop(Store(dst, tid, Select(Ge(tid, I(d)), Add(read(Max(Sub(tid, I(d)), I(0))), mine), mine))));
    src = dst;
  }
  const Buffer inclusive = src;
  Expr before = Add(Load(carry, I(0)), Select(Gt(tid, I(0)), Load(inclusive, Max(Sub(tid, I(1)), I(0))), Zero()));
  Stmt advance = Store(carry, I(0), Add(Load(carry, I(0)), Load(inclusive, I(T - 1))));
  if (E == 1) {
    Expr q = Add(Mul(tl, I(S)), tid);
    Expr run = Var("run", st_);
    Expr v = Load(tile, slot(tid));
    Stmt store = guarded(q, StoreScanElement(element(q), exclusive ? run : Add(run, v)));
    per_tile.push_back(thread_loop(LetStmt("run", before, Block({store, advance}))));
  } else {
    // Each thread's elements in place: the carry, the earlier threads' sums
    // and its own running sum; then the tile leaves coalesced.
    Buffer r = MakeBuffer("run", {1}, BufferRole::kTemp, -1, st_);
    std::vector<Stmt> st = {Store(r, I(0), before)};
    for (int64_t e = 0; e < E; ++e) {
      Expr at = slot(Add(Mul(tid, I(E)), I(e)));
      Expr v = Var(absl::StrCat("x", e), st_);
      Stmt add = Store(r, I(0), Add(Load(r, I(0)), v));
      Stmt put = Store(tile, at, Load(r, I(0)));
      st.push_back(LetStmt(v->name, Load(tile, at), exclusive ? Block({put, add}) : Block({add, put})));
    }
    st.push_back(advance);
    per_tile.push_back(thread_loop(Allocate(r, Block(st))));
    std::vector<Stmt> stores;
    for (int64_t e = 0; e < E; ++e) {
      Expr q = Add(Add(Mul(tl, I(S)), I(e * T)), tid);
      stores.push_back(guarded(q, StoreScanElement(element(q), Load(tile, slot(Add(I(e * T), tid))))));
    }
    per_tile.push_back(thread_loop(Block(stores)));
  }
  Stmt body = Block({thread_loop(Store(carry, I(0), Zero())), For("tl", I(tiles), Block(per_tile))});
  for (const Buffer& b : {tile, sa, sb, carry}) body = Allocate(b, body);
  return body;
}

Stmt IndexKernel::GroupArg() {
  const int64_t axis = *w_.axis, len = w_.len, rows = w_.rows, per_block = bt_ / tr_;
  const bool is_max = scan_->op_type() == "ArgMax", last = scan_->GetInt("select_last_index", 0) != 0;
  const std::vector<int64_t> row_dims = ScanDims(*scan_, axis);
  // A thread with no element yet holds the identity of the value's
  // reduction and the index no winner has (the neutral element of the
  // index's reduction: the smallest index wins ties, or the largest).
  const Expr identity = Const(ScalarType::kF32, is_max ? -INFINITY : INFINITY);
  const Expr none = I(last ? -1 : std::numeric_limits<int64_t>::max());
  const std::string value_op = is_max ? "max" : "min", index_op = last ? "max" : "min";
  Buffer mv = MakeBuffer("own_v", {1}, BufferRole::kLocal);
  Buffer mi = MakeBuffer("own_i", {1}, BufferRole::kLocal, -1, ScalarType::kI64);
  Buffer rv = MakeBuffer("best_v", {1}, BufferRole::kLocal);
  Buffer ri = MakeBuffer("best_i", {1}, BufferRole::kLocal, -1, ScalarType::kI64);
  const int64_t partials = PartialsNeeded(value_op, tr_, bt_);
  Buffer pv = MakeBuffer("part_v", {std::max<int64_t>(partials, 1)}, BufferRole::kShared);
  Buffer pi = MakeBuffer("part_i", {std::max<int64_t>(partials, 1)}, BufferRole::kShared, -1, ScalarType::kI64);
  Expr tid = Var("tid");
  Expr row = per_block == 1 ? Var("blk") : Add(Mul(Var("blk"), I(per_block)), Div(tid, I(tr_)));
  Expr lane = per_block == 1 ? tid : Mod(tid, I(tr_));
  const bool row_tail = rows % per_block != 0;
  auto in_row = [&](Stmt s, const Expr& extra = nullptr) {
    Expr cond = extra;
    if (row_tail) cond = cond ? And(Lt(row, I(rows)), cond) : Lt(row, I(rows));
    return cond ? IfThen(cond, s) : s;
  };
  const std::vector<Expr> idx = Unflatten(row_dims, row);
  ThreadLoops tl(bt_, [](Stmt s) { return s; });
  {
    // Each lane scans its strided share of the row in order.
    Expr k = Add(lane, Mul(Var("m_"), I(tr_)));
    Expr v = Var("x_", ScalarType::kF32);
    Expr take = Select(Eq(Load(mi, I(0)), none), Eq(v, v), ArgBetter(*scan_, v, Load(mv, I(0))));
    Stmt update = LetStmt("x_", X(idx, axis, k), IfThen(take, Block({Store(mv, I(0), v), Store(mi, I(0), k)})));
    tl.Emit(Store(mv, I(0), identity));
    tl.Emit(Store(mi, I(0), none));
    tl.Emit(For("m_", I(CeilDiv(len, tr_)), in_row(update, len % tr_ != 0 ? Lt(k, I(len)) : nullptr)));
    tl.Emit(Store(rv, I(0), Load(mv, I(0))));
  }
  // The row's best value, then the index of the threads that hold it.
  CombineInGroups(tl, rv, value_op, tr_, bt_, pv, "cv");
  tl.Emit(Store(ri, I(0), Select(Eq(Load(mv, I(0)), Load(rv, I(0))), Load(mi, I(0)), none)));
  CombineInGroups(tl, ri, index_op, tr_, bt_, pi, "ci");
  // A NaN first element wins (the interpreter compares with it and never
  // replaces it); otherwise the combined index.
  Expr first = X(idx, axis, I(0));
  tl.Emit(in_row(Store(scan_buf_, row, Select(Ne(first, first), I(0), Load(ri, I(0)))), Eq(lane, I(0))));
  Stmt body = tl.Finish();
  for (const Buffer& b : {mv, mi, rv, ri}) body = Allocate(b, body);
  if (partials > 0) body = Allocate(pi, Allocate(pv, body));
  return body;
}

absl::StatusOr<LoopFunc> IndexKernel::Lower() {
  std::vector<FlatBody> flat;
  for (size_t j = 0; j < g_.outputs().size(); ++j) {
    const OutputForm form = w_.outputs[j];
    if (form != OutputForm::kFlat && form != OutputForm::kResummed) continue;
    if (NumElements(DimsOf(g_.outputs()[j])) == 0) continue;
    flat.push_back(FlatOutput(static_cast<int>(j), form == OutputForm::kFlat ? vw_ : 1));
  }
  // Parts of the grid: (blocks, the block's statements).
  std::vector<std::pair<int64_t, Stmt>> parts;
  if (scan_ != nullptr && NumElements(in_dims_) > 0) {
    if (tr_ == 1) {
      for (FlatBody& b : ThreadPerRow()) flat.push_back(std::move(b));
    } else if (scan_->op_type() == "CumSum") {
      parts.emplace_back(w_.rows, BlockCumSum());
    } else {
      parts.emplace_back(CeilDiv(w_.rows, bt_ / tr_), GroupArg());
    }
  }
  if (!flat.empty()) {
    Stmt k = FlatKernel(flat, bt_, un_);
    int64_t blocks = 0;
    AsConst(k->extent, &blocks);
    parts.emplace_back(blocks, k->body[0]);
  }
  RETURN_IF_ERROR(err_);
  int64_t blocks = 1;
  for (const auto& [n, s] : parts) blocks = std::max(blocks, n);
  std::vector<Stmt> body;
  for (const auto& [n, s] : parts) body.push_back(n == blocks ? s : IfThen(Lt(Var("blk"), I(n)), s));
  return LoopFunc{"index", ie_.args(), For("blk", I(blocks), Block(body), ForKind::kGpuBlock)};
}

absl::StatusOr<LoopFunc> Lower(const Graph& g, const ScheduleConfig& c, const GpuTarget& t) {
  RETURN_IF_ERROR(Validate(g, c, t));
  ASSIGN_OR_RETURN(Workload w, Analyze(g));
  IndexKernel kernel(g, w, c);
  return kernel.Lower();
}

}  // namespace

GpuWorkloadLowering GpuIndexLowering() {
  return GpuWorkloadLowering{"index", Enumerate, Default, Validate, Lower};
}

}  // namespace kiln::loop_ir::gpu
