// GPU lowering of the reduction kind (see gpu/lower_reduction.h): row groups
// of `tr` threads, per-thread partials, warp shuffles and shared memory.
#include "compiler_core/codegen/loop_ir/gpu/lower_reduction.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compiler_core/codegen/loop_ir/gpu/group_reduce.h"
#include "compiler_core/codegen/loop_ir/graph_expr.h"
#include "compiler_core/codegen/loop_ir/lower_common.h"
#include "compiler_core/codegen/loop_ir/lower_reduction.h"
#include "compiler_core/codegen/loop_ir/substitute.h"

namespace kiln::loop_ir::gpu {
namespace {

// Elements per thread kept in registers between a row-wise op's passes
// (unrolled sweeps, constant indices); longer rows are read again.
constexpr int64_t kMaxCached = 32;

Expr I(int64_t v) { return IntImm(v); }

// Row-major index of `flat` (< the product of dims) over `dims`; size-1
// dims get 0, the outermost other dim needs no remainder.
std::vector<Expr> Unflatten(const Expr& flat, const std::vector<int64_t>& dims) {
  std::vector<Expr> idx(dims.size(), I(0));
  size_t outer = dims.size();
  for (size_t k = 0; k < dims.size(); ++k) {
    if (dims[k] != 1) {
      outer = k;
      break;
    }
  }
  int64_t inner = 1;
  for (size_t k = dims.size(); k-- > 0;) {
    if (dims[k] != 1) {
      Expr q = inner == 1 ? flat : Div(flat, I(inner));
      idx[k] = k == outer ? q : Mod(q, I(dims[k]));
    }
    inner *= dims[k];
  }
  return idx;
}

// Kept and reduced index expressions back in the input's axis order.
std::vector<Expr> Merge(const std::vector<bool>& mask, const std::vector<Expr>& kept, const std::vector<Expr>& red) {
  std::vector<Expr> out;
  size_t k = 0, r = 0;
  for (bool m : mask) out.push_back(m ? red[r++] : kept[k++]);
  return out;
}

Expr AndAll(const std::vector<Expr>& terms) {
  Expr all;
  for (const Expr& t : terms) {
    if (t != nullptr) all = all == nullptr ? t : And(all, t);
  }
  return all;
}

Stmt Guarded(const Expr& cond, Stmt s) { return cond == nullptr ? s : IfThen(cond, std::move(s)); }

// for (var, 0, extent) body, or body at var = 0 when extent is 1.
Stmt Loop(const std::string& var, int64_t extent, const Stmt& body, ForKind kind) {
  if (extent == 1) return Substitute(body, var, I(0));
  return For(var, I(extent), body, kind);
}

// One reduction node of the workload.
struct Stage {
  const Node* node = nullptr;
  std::string op;
  const Value* x = nullptr;
  std::vector<bool> mask;
  std::vector<int64_t> xdims, kept, red;
  int64_t rows = 1;   // kept indices
  int64_t count = 1;  // reduced elements per row
  // x is a workload input whose reduced axes trail: element e of row r is
  // x's flat element r * count + e (no index arithmetic per element).
  bool flat = false;
  // The contiguous run of reduced elements along the innermost axis (all of
  // the row when flat), which vector loads may cover; 0 when the innermost
  // axis is kept.
  int64_t run = 0;
};

absl::StatusOr<Stage> AnalyzeStage(const Node& n) {
  Stage s;
  s.node = &n;
  s.op = n.op_type();
  s.x = n.input(0);
  s.xdims = DimsOf(s.x);
  ASSIGN_OR_RETURN(s.mask, ReductionMask(n));
  for (size_t i = 0; i < s.xdims.size(); ++i) (s.mask[i] ? s.red : s.kept).push_back(s.xdims[i]);
  s.rows = NumElements(s.kept);
  s.count = NumElements(s.red);
  bool trailing = s.x->producer() == nullptr && !s.x->is_constant();
  for (size_t i = 0, nred = s.red.size(); trailing && i < nred; ++i) trailing = s.mask[s.mask.size() - 1 - i];
  s.flat = trailing;
  if (!s.mask.empty() && s.mask.back()) s.run = s.flat ? s.count : s.xdims.back();
  return s;
}

// The workload: its stages, and whether it is one stage alone (every output
// is one of the stage's results) or runs per slice of row-local leading axes.
struct Form {
  std::vector<Stage> stages;
  bool single = false;
  // Several stages: the extents of the row-local leading axes, and the
  // blocks, one per index of them (one block when there is no such axis).
  std::vector<int64_t> prefix;
  int64_t slices = 1;
};

// Reshape, Flatten, Squeeze, Unsqueeze and Identity: the same elements in
// the same order, under another shape.
bool IsView(const Node& n) {
  const std::string& op = n.op_type();
  return op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze" || op == "Identity";
}

// The value that `v` is a view of (through a chain of views), or `v`.
const Value* ViewedValue(const Value* v) {
  while (v->producer() != nullptr && IsView(*v->producer())) v = v->producer()->input(0);
  return v;
}

bool IsResultOf(const Node& n, const Value* v) {
  for (int i = 0; i < n.num_outputs(); ++i) {
    if (n.output(i) == v) return true;
  }
  return false;
}

absl::StatusOr<Form> Analyze(const Graph& g) {
  RETURN_IF_ERROR(MatchReduction(g));
  Form f;
  for (const auto& n : g.nodes()) {
    if (!IsReductionOp(n->op_type())) continue;
    ASSIGN_OR_RETURN(Stage s, AnalyzeStage(*n));
    f.stages.push_back(std::move(s));
  }
  // One stage whose results are the outputs, or viewed as them (a
  // GlobalAveragePool and its Flatten): each row's result is stored at the
  // same flat offset either way.
  f.single = f.stages.size() == 1;
  for (const Value* v : g.outputs()) f.single = f.single && IsResultOf(*f.stages[0].node, ViewedValue(v));
  if (!f.single) {
    const int axes = RowLocalAxes(g);
    const std::vector<int64_t> d = DimsOf(g.nodes().front()->output(0));
    f.prefix.assign(d.begin(), d.begin() + axes);
    f.slices = NumElements(f.prefix);
  }
  return f;
}

// Lanes a stage reads per load under knob vw: vw where it divides the run.
int64_t StageVw(const Stage& s, int64_t vw) { return s.run > 0 && s.run % vw == 0 ? vw : 1; }

// Vector units (of StageVw elements) of one row.
int64_t Units(const Stage& s, int64_t vw) { return s.count / StageVw(s, vw); }

// Rows of a stage one block reduces: all of them in a single-stage kernel
// (spread over blocks), the slice's in a multi-stage one.
int64_t BlockRows(const Form& f, const Stage& s) { return f.single ? s.rows : s.rows / f.slices; }

bool HasProd(const Form& f) {
  for (const Stage& s : f.stages) {
    if (s.op == "ReduceProd") return true;
  }
  return false;
}

// Widest tr the space offers: enough threads for the longest row's units,
// at most 1024, at most a warp when partials are multiplied in shared memory.
int64_t MaxTr(const Form& f, int64_t vw) {
  int64_t units = 1;
  for (const Stage& s : f.stages) units = std::max(units, Units(s, vw));
  return std::min<int64_t>(Pow2Ceil(units), HasProd(f) ? kWarpSize : kMaxGpuThreads);
}

std::vector<int64_t> VectorWidths(const Form& f) {
  std::vector<int64_t> out = {1};
  for (int64_t vw : {2, 4}) {
    bool any = false;
    for (const Stage& s : f.stages) any = any || StageVw(s, vw) == vw;
    if (any) out.push_back(vw);
  }
  return out;
}

// Shared memory of a schedule: the cross-warp partials (at least one
// element in a multi-stage kernel, whose stages talk through memory: a
// kernel with shared memory has a barrier after every thread loop), and the
// slice of every intermediate result that is not a workload output.
int64_t PartialsElements(const Form& f, int64_t bt, int64_t tr) {
  int64_t n = f.single ? 0 : 1;
  for (const Stage& s : f.stages) n = std::max(n, PartialsNeeded(s.op == "ReduceProd" ? "prod" : "sum", tr, bt));
  return n;
}

int64_t SharedBytes(const Graph& g, const Form& f, int64_t bt, int64_t tr) {
  auto aligned = [](int64_t elements) { return CeilDiv(elements * 4, 16) * 16; };
  int64_t bytes = PartialsElements(f, bt, tr) > 0 ? aligned(PartialsElements(f, bt, tr)) : 0;
  if (f.single) return bytes;
  std::set<const Value*> outputs(g.outputs().begin(), g.outputs().end());
  for (const Stage& s : f.stages) {
    for (int i = 0; i < s.node->num_outputs(); ++i) {
      const Value* v = s.node->output(i);
      if (v != nullptr && outputs.count(v) == 0) bytes += aligned(NumElements(DimsOf(v)) / f.slices);
    }
  }
  return bytes;
}

// Threads per block for groups of tr threads over `rows` rows: a block per
// row from 256 threads on; else 128 to 1024, as far as the row groups have
// rows (at least one size), and 32 or 64 where a block of 128 would idle.
std::vector<int64_t> BlockSizesFor(int64_t tr, int64_t rows) {
  if (tr >= 256) return {tr};
  std::vector<int64_t> out;
  const int64_t groups = Pow2Ceil(rows);
  for (int64_t bt : {32, 64, 128, 256, 512, 1024}) {
    if (bt < tr || (!out.empty() && bt / tr > groups) || (bt < 128 && 128 / tr <= groups)) continue;
    out.push_back(bt);
  }
  return out;
}

std::vector<ScheduleConfig> EnumerateForm(const Graph& g, const Form& f) {
  int64_t most_rows = 1;
  for (const Stage& s : f.stages) most_rows = std::max(most_rows, BlockRows(f, s));
  std::vector<ScheduleConfig> out;
  for (int64_t vw : VectorWidths(f)) {
    if (f.single && StageVw(f.stages[0], vw) != vw) continue;
    for (int64_t tr = 1; tr <= MaxTr(f, vw); tr *= 2) {
      for (int64_t bt : BlockSizesFor(tr, most_rows)) {
        if (SharedBytes(g, f, bt, tr) > kMaxGpuSharedBytes) continue;
        ScheduleConfig c;
        c.Set("bt", bt);
        c.Set("tr", tr);
        c.Set("vw", vw);
        out.push_back(c);
      }
    }
  }
  return out;
}

std::vector<ScheduleConfig> Enumerate(const Graph& g, const GpuTarget&) {
  absl::StatusOr<Form> f = Analyze(g);
  if (!f.ok()) return {};
  return EnumerateForm(g, *f);
}

// The widest vw. One stage: short rows (up to ~1024 elements) a group of
// at most a warp, about a vector per thread; long rows a block of 256 to
// 1024 threads, about 16 vectors per thread; rows with a kept innermost
// axis a thread each (neighbouring threads read neighbouring rows). Then,
// while fewer than kGpuFillThreads threads would run, more threads per row,
// as long as each keeps 4 vectors (8 elements, and at most 8 threads per
// row, when the innermost axis is kept).
// Several stages: the threads of a block spread over the slice's rows
// first, up to 256 per block (1024 when one block does all).
ScheduleConfig DefaultForm(const Graph& g, const Form& f) {
  const std::vector<ScheduleConfig> space = EnumerateForm(g, f);
  if (space.empty()) return {};
  const int64_t vw = VectorWidths(f).back();
  int64_t units = 1, rows = 1;
  for (const Stage& s : f.stages) {
    units = std::max(units, Units(s, vw));
    rows = std::max(rows, BlockRows(f, s));
  }
  int64_t tr = 1, bt = 256;
  if (f.single) {
    const Stage& s = f.stages[0];
    if (s.run == 0) {
      // At most 8 lanes per row: a warp's load then reads runs of 4
      // neighbouring rows (a 16-byte half sector each), not 32 scattered
      // elements.
      while (tr < 8 && s.rows * tr < kGpuFillThreads && units >= tr * 2 * 8) tr *= 2;
    } else {
      tr = s.count <= 1024 ? std::min(kWarpSize, Pow2Ceil(units))
                           : std::clamp<int64_t>(Pow2Ceil(units / 16), 256, kMaxGpuThreads);
      while (tr < kMaxGpuThreads && s.rows * tr < kGpuFillThreads && units >= tr * 2 * 4) tr *= 2;
    }
    bt = std::max<int64_t>(tr, 256);
    while (bt > kWarpSize && bt > tr && bt / 2 / tr >= rows) bt /= 2;
  } else {
    const int64_t target = f.slices == 1 ? kMaxGpuThreads : 256;
    while (tr * 2 <= Pow2Ceil(units) && rows * tr * 2 <= target) tr *= 2;
    bt = std::clamp<int64_t>(Pow2Ceil(rows * tr), kWarpSize, target);
    bt = std::max(bt, tr);
  }
  tr = std::min(tr, MaxTr(f, vw));
  // The nearest point of the space (the schedule above when it is one).
  return BestBy(space, [&](const ScheduleConfig& c) {
    auto dist = [](int64_t a, int64_t b) { return std::abs(std::log2(static_cast<double>(a) / b)); };
    return -(dist(c.Get("tr", 1), tr) * 4 + dist(c.Get("bt", 256), bt) + dist(c.Get("vw", 1), vw) * 2);
  });
}

ScheduleConfig Default(const Graph& g, const GpuTarget&) {
  absl::StatusOr<Form> f = Analyze(g);
  if (!f.ok()) return {};
  return DefaultForm(g, *f);
}

absl::Status ValidateForm(const Graph& g, const Form& f, const ScheduleConfig& c) {
  RETURN_IF_ERROR(ValidateGpuKnobs(g, c, {"bt", "tr", "vw"}));
  const int64_t bt = c.Get("bt", 256), tr = c.Get("tr", 1), vw = c.Get("vw", 1);
  const int64_t tr_cap = HasProd(f) ? kWarpSize : bt;
  if (tr < 1 || tr > tr_cap || (tr & (tr - 1)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("schedule ", c.ToString(), ": knob tr=", tr,
                                                   " is not a power of two up to ", tr_cap, " for workload ",
                                                   g.name()));
  }
  const std::vector<int64_t> vws = VectorWidths(f);
  if (std::find(vws.begin(), vws.end(), vw) == vws.end() || (f.single && StageVw(f.stages[0], vw) != vw)) {
    return absl::InvalidArgumentError(absl::StrCat("schedule ", c.ToString(), ": knob vw=", vw,
                                                   " divides no contiguous reduced run of workload ", g.name()));
  }
  const int64_t shared = SharedBytes(g, f, bt, tr);
  if (shared > kMaxGpuSharedBytes) {
    return absl::InvalidArgumentError(absl::StrCat("schedule ", c.ToString(), ": workload ", g.name(), " needs ",
                                                   shared, " bytes of shared memory per block, more than ",
                                                   kMaxGpuSharedBytes));
  }
  return absl::OkStatus();
}

absl::Status Validate(const Graph& g, const ScheduleConfig& c, const GpuTarget&) {
  ASSIGN_OR_RETURN(Form f, Analyze(g));
  return ValidateForm(g, f, c);
}

// Where a stage's results go: the workload output slots holding each, or a
// shared buffer of the result's full shape (rebased to the block's slice at
// the end) when it is an intermediate value.
struct StageResults {
  std::vector<Buffer> y, mean, inv;  // output(0), and LayerNormalization's Mean and InvStdDev
};

class Lowerer {
 public:
  Lowerer(const Graph& g, const Form& f, int64_t bt, int64_t tr, int64_t vw)
      : g_(g), f_(f), ge_(g), bt_(bt), tr_(tr), vw_(vw) {}

  absl::StatusOr<LoopFunc> Run() {
    const int64_t parts = PartialsElements(f_, bt_, tr_);
    if (parts > 0) partials_ = MakeBuffer("partials", {parts}, BufferRole::kShared);
    std::vector<Stmt> body;
    int64_t blocks = 1;
    const int64_t rpb = bt_ / tr_;
    if (f_.single) {
      const Stage& s = f_.stages[0];
      StageResults res;
      std::vector<std::vector<Buffer>*> lists = {&res.y, &res.mean, &res.inv};
      for (size_t j = 0; j < g_.outputs().size(); ++j) {
        for (int i = 0; i < s.node->num_outputs() && i < 3; ++i) {
          if (ViewedValue(g_.outputs()[j]) == s.node->output(i)) {
            lists[i]->push_back(ge_.output_buffer(static_cast<int>(j)));
          }
        }
      }
      blocks = std::max<int64_t>(1, CeilDiv(s.rows, rpb));
      if (s.rows > 0) {
        ASSIGN_OR_RETURN(Stmt st, LowerStage(s, 0, res, Add(Mul(Var("blk"), I(rpb)), Group()), s.rows,
                                             blocks * rpb != s.rows));
        body.push_back(st);
      }
    } else {
      blocks = f_.slices;
      for (size_t a = 0; a < f_.prefix.size(); ++a) {
        prefix_vars_.push_back(absl::StrCat("p", a));
        prefix_.push_back(f_.prefix[a] == 1 ? I(0) : Var(prefix_vars_.back()));
      }
      ASSIGN_OR_RETURN(body, LowerStages());
    }
    Stmt kernel = Block(body);
    if (!slices_.empty()) kernel = RebaseSlices(kernel);
    for (const Buffer& b : locals_) kernel = Allocate(b, kernel);
    for (const auto& [key, slice] : slices_) kernel = Allocate(slice, kernel);
    if (partials_ != nullptr) kernel = Allocate(partials_, kernel);
    // The block's index along each row-local axis.
    const std::vector<Expr> at = Unflatten(Var("blk"), f_.prefix);
    for (size_t a = f_.prefix.size(); a-- > 0;) {
      if (f_.prefix[a] != 1) kernel = LetStmt(prefix_vars_[a], at[a], kernel);
    }
    return LoopFunc{"reduction", ge_.args(), For("blk", I(blocks), kernel, ForKind::kGpuBlock)};
  }

 private:
  // The thread's row group within the block and its lane within the group.
  Expr Group() const { return tr_ == 1 ? Var("tid") : tr_ == bt_ ? I(0) : Div(Var("tid"), I(tr_)); }
  Expr Lane() const { return tr_ == 1 ? I(0) : tr_ == bt_ ? Var("tid") : Mod(Var("tid"), I(tr_)); }

  // Multi-stage: every stage over the block's slice, then the outputs no
  // stage writes.
  absl::StatusOr<std::vector<Stmt>> LowerStages() {
    std::set<const Value*> outputs(g_.outputs().begin(), g_.outputs().end());
    std::set<const Value*> written;
    std::vector<Stmt> body;
    int index = 0;
    for (const Stage& s : f_.stages) {
      StageResults res;
      std::vector<std::vector<Buffer>*> lists = {&res.y, &res.mean, &res.inv};
      for (int i = 0; i < s.node->num_outputs() && i < 3; ++i) {
        const Value* v = s.node->output(i);
        if (v == nullptr) continue;
        for (size_t j = 0; j < g_.outputs().size(); ++j) {
          if (g_.outputs()[j] == v) lists[i]->push_back(ge_.output_buffer(static_cast<int>(j)));
        }
        if (outputs.count(v) > 0) {
          written.insert(v);
        } else {
          Buffer full = MakeBuffer(absl::StrCat("s", index, "_t", i), DimsOf(v), BufferRole::kShared);
          slices_[full.get()] =
              MakeBuffer(full->name, {NumElements(full->shape) / f_.slices}, BufferRole::kShared);
          lists[i]->push_back(full);
        }
      }
      const int64_t rows = BlockRows(f_, s), rpb = bt_ / tr_;
      const int64_t chunks = CeilDiv(rows, rpb);
      const std::string sp = absl::StrCat("s", index, "_");
      Expr q = Add(Mul(Var(sp + "c"), I(rpb)), Group());
      if (rows > 0) {
        ASSIGN_OR_RETURN(Stmt st, LowerStage(s, index, res, q, rows, chunks * rpb != rows));
        body.push_back(Loop(sp + "c", chunks, st, ForKind::kSerial));
      }
      for (int i = 0; i < s.node->num_outputs() && i < 3; ++i) {
        const Value* v = s.node->output(i);
        const std::vector<Buffer>& list = *lists[i];
        if (v != nullptr && !list.empty()) ge_.Bind(v, list.front());
      }
      ++index;
    }
    ThreadLoops out(bt_, [](Stmt s) { return s; });
    for (size_t j = 0; j < g_.outputs().size(); ++j) {
      const Value* v = g_.outputs()[j];
      if (written.count(v) > 0) continue;
      const std::vector<int64_t> dims = DimsOf(v);
      const int64_t per = NumElements(dims) / f_.slices;
      if (per == 0) continue;
      const std::string o = absl::StrCat("o", j, "_");
      Expr e = Add(Mul(Var(o + "i"), I(bt_)), Var("tid"));
      std::vector<Expr> idx = prefix_;
      const std::vector<int64_t> rest(dims.begin() + static_cast<int64_t>(prefix_.size()), dims.end());
      for (const Expr& r : Unflatten(Var(o + "e"), rest)) idx.push_back(r);
      ASSIGN_OR_RETURN(Expr val, ge_.At(v, idx));
      Stmt st = Store(ge_.output_buffer(static_cast<int>(j)), Add(Mul(Var("blk"), I(per)), Var(o + "e")), val);
      const int64_t steps = CeilDiv(per, bt_);
      if (steps * bt_ != per) st = IfThen(Lt(Var(o + "e"), I(per)), st);
      out.Emit(Loop(o + "i", steps, LetStmt(o + "e", e, st), ForKind::kSerial));
    }
    body.push_back(out.Finish());
    return body;
  }

  // The elements of the thread's row it sweeps, one per (step i, lane v):
  // vector unit u = i * tr + lane, element u * vw + v.
  struct Sweep {
    const Stage* s;
    std::string sp;
    int64_t vw = 1, units = 0, steps = 0;
    std::vector<Expr> kidx;   // the row's kept index, one per kept axis
    std::vector<Expr> kflat;  // flat stages: the row-local axes', then 0, ..., 0, the row in the slice
    Buffer cache;             // the row's elements kept between passes, or null
  };

  // x at element (u, v) of the row, the element's flat offset in x's shape
  // (that of a row-wise op's output too), and its reduced index per axis.
  struct Element {
    Expr x, at;
    std::vector<Expr> ridx;
  };

  absl::StatusOr<Element> ElementAt(const Sweep& w, const Expr& u, const Expr& v) {
    const Stage& s = *w.s;
    Element el;
    // Per-axis reduced index: in vector units along the innermost axis
    // when vw divides it (the lanes stay contiguous: no division per lane).
    std::vector<int64_t> units = s.red;
    if (w.vw > 1 && !units.empty() && units.back() % w.vw == 0) {
      units.back() /= w.vw;
      el.ridx = Unflatten(u, units);
      el.ridx.back() = Add(Mul(el.ridx.back(), I(w.vw)), v);
    } else {
      el.ridx = Unflatten(Add(Mul(u, I(w.vw)), v), s.red);
    }
    std::vector<Expr> index;
    if (s.flat) {
      // (..., 0, q) and (0, ..., 0, e): x's flat offset q * count + e in the slice.
      std::vector<Expr> r(s.red.size(), I(0));
      if (!r.empty()) r.back() = Add(Mul(u, I(w.vw)), v);
      index = Merge(s.mask, w.kflat, r);
    } else {
      index = Merge(s.mask, w.kidx, el.ridx);
    }
    ASSIGN_OR_RETURN(el.x, ge_.At(s.x, index));
    el.at = FlatIndex(s.xdims, index);
    return el;
  }

  enum class Cache { kNone, kFill, kRead };

  // The sweep's loops around body(element), guarded where the last step
  // overhangs the row, with x taken from the cache or filling it.
  absl::StatusOr<Stmt> SweepLoops(const Sweep& w, Cache cache,
                                  const std::function<Stmt(const Element&)>& body) {
    const std::string iv = w.sp + "i", vv = w.sp + "v", uv = w.sp + "u";
    Expr u = Var(uv), v = w.vw > 1 ? Var(vv) : I(0);
    ASSIGN_OR_RETURN(Element el, ElementAt(w, u, v));
    Stmt st;
    if (cache == Cache::kNone) {
      st = body(el);
    } else {
      Expr at = Add(Mul(Var(iv), I(w.vw)), v);
      if (cache == Cache::kRead) {
        el.x = Load(w.cache, at);
        st = body(el);
      } else {
        const std::string xv = w.sp + "x";
        Expr x = el.x;
        el.x = Var(xv, ScalarType::kF32);
        st = LetStmt(xv, x, Block({Store(w.cache, at, el.x), body(el)}));
      }
    }
    if (w.vw > 1) st = For(vv, I(w.vw), st, ForKind::kVectorized);
    if (w.steps * tr_ != w.units) st = IfThen(Lt(u, I(w.units)), st);
    st = LetStmt(uv, Add(Mul(Var(iv), I(tr_)), Lane()), st);
    return Loop(iv, w.steps, st, w.cache != nullptr ? ForKind::kUnrolled : ForKind::kSerial);
  }

  // One statistics pass: the thread's partial of combine over element(x)
  // into the local `part`, then the row group's combine of the partials.
  // `wrap` (if given) goes around the thread's statement (a Let the
  // elements read).
  absl::Status Pass(ThreadLoops& tl, const Sweep& w, Cache cache, const ReduceCombine& c, const Buffer& part,
                    const Expr& valid, const std::function<Expr(const Element&)>& element,
                    const std::function<Stmt(Stmt)>& wrap = nullptr) {
    Buffer acc = MakeBuffer(w.sp + "acc", {w.vw}, BufferRole::kTemp);
    Expr lane = w.vw > 1 ? Var(w.sp + "v") : I(0);
    Stmt init = Loop(w.sp + "v", w.vw, Store(acc, lane, FloatImm(c.init)), ForKind::kVectorized);
    ASSIGN_OR_RETURN(Stmt sweep, SweepLoops(w, cache, [&](const Element& el) {
                       return Store(acc, lane, ApplyCombine(c, Load(acc, lane), element(el)));
                     }));
    Expr folded = Load(acc, I(0));
    for (int64_t l = 1; l < w.vw; ++l) folded = ApplyCombine(c, folded, Load(acc, I(l)));
    Stmt st = Allocate(acc, Block({init, Guarded(valid, sweep), Store(part, I(0), folded)}));
    tl.Emit(wrap ? wrap(st) : st);
    const char* op = c.kind == ExprKind::kAdd   ? "sum"
                     : c.kind == ExprKind::kMul ? "prod"
                     : c.kind == ExprKind::kMax ? "max"
                                                : "min";
    CombineInGroups(tl, part, op, tr_, bt_, partials_, w.sp);
    return absl::OkStatus();
  }

  // Stage `s` for row q of each row group among the `rows` of the block's
  // slice (all of the stage's rows in a single-stage kernel), past the last
  // one where `overhang`.
  absl::StatusOr<Stmt> LowerStage(const Stage& s, int index, const StageResults& res, const Expr& q, int64_t rows,
                                  bool overhang) {
    Sweep w;
    w.s = &s;
    w.sp = absl::StrCat("s", index, "_");
    w.vw = StageVw(s, vw_);
    w.units = s.count / w.vw;
    w.steps = CeilDiv(w.units, tr_);
    const bool rowwise = IsRowWiseOp(s.op);
    const bool norm = IsNormOp(s.op);
    if (rowwise && w.steps * w.vw <= kMaxCached && w.steps > 0) {
      w.cache = MakeBuffer(w.sp + "xs", {w.steps * w.vw}, BufferRole::kLocal);
      locals_.push_back(w.cache);
    }
    // The kept index per axis: for x when it is not read flat, and for an
    // InstanceNormalization's per-channel scale and bias.
    // The row-local axes take the block's index; the rest of the kept
    // index is the row's in the slice.
    const bool need_kidx = !s.flat || s.op == "InstanceNormalization";
    const std::string qv = w.sp + "q";
    const size_t axes = prefix_.size();
    const std::vector<int64_t> rest(s.kept.begin() + static_cast<int64_t>(axes), s.kept.end());
    const std::vector<Expr> kidx_values = Unflatten(Var(qv), rest);
    w.kidx = prefix_;
    w.kflat = prefix_;
    for (size_t k = 0; k < rest.size(); ++k) {
      w.kidx.push_back(rest[k] == 1 || !need_kidx ? I(0) : Var(absl::StrCat(w.sp, "k", k + axes)));
      w.kflat.push_back(k + 1 == rest.size() ? Var(qv) : I(0));
    }
    const Expr valid = overhang ? Lt(Var(qv), I(rows)) : nullptr;
    // Where the row's result goes in a result of the kept shape.
    const Expr result_at = FlatIndex(s.kept, s.flat ? w.kflat : w.kidx);
    auto prologue = [=](Stmt body) {
      for (size_t k = rest.size(); k-- > 0;) {
        if (rest[k] != 1 && need_kidx) body = LetStmt(absl::StrCat(w.sp, "k", k + axes), kidx_values[k], body);
      }
      return LetStmt(qv, q, body);
    };
    ThreadLoops tl(bt_, prologue);
    Buffer a = MakeBuffer(w.sp + "a", {1}, BufferRole::kLocal);
    locals_.push_back(a);
    Expr lane0 = tr_ == 1 ? nullptr : Eq(Lane(), I(0));
    Expr store_cond = AndAll({valid, lane0});
    if (!rowwise) {
      const ReduceCombine c = ReduceCombineOf(s.op);
      RETURN_IF_ERROR(Pass(tl, w, Cache::kNone, c, a, valid,
                           [&](const Element& el) { return ReduceElement(s.op, el.x); }));
      std::vector<Stmt> stores;
      Expr y = ReduceResult(s.op, Load(a, I(0)), s.count);
      for (const Buffer& b : res.y) stores.push_back(Store(b, result_at, y));
      tl.Emit(Guarded(store_cond, Block(stores)));
      return tl.Finish();
    }
    const Cache first_cache = w.cache != nullptr ? Cache::kFill : Cache::kNone;
    const Cache then_cache = w.cache != nullptr ? Cache::kRead : Cache::kNone;
    Buffer b = MakeBuffer(w.sp + "b", {1}, BufferRole::kLocal);
    locals_.push_back(b);
    const std::string mv = w.sp + "m", fv = w.sp + "f";
    Expr m = Var(mv, ScalarType::kF32), f = Var(fv, ScalarType::kF32);
    // The first statistic: the row's max (softmax), or its mean (norms).
    const ReduceCombine first =
        norm ? ReduceCombine{ExprKind::kAdd, 0} : ReduceCombine{ExprKind::kMax, -INFINITY, /*nan_free=*/true};
    RETURN_IF_ERROR(Pass(tl, w, first_cache, first, a, valid, [](const Element& el) { return el.x; }));
    Expr m_value = norm ? Div(Load(a, I(0)), FloatImm(static_cast<double>(std::max<int64_t>(s.count, 1))))
                        : Load(a, I(0));
    // The second: the sum of exp(x - max), or the centred sum of squares,
    // with the first bound (after the fold of its partials, which the
    // thread loop starts with).
    RETURN_IF_ERROR(Pass(
        tl, w, then_cache, ReduceCombine{ExprKind::kAdd, 0}, b, valid,
        [&](const Element& el) {
          Expr d = Sub(el.x, m);
          return norm ? Mul(d, d) : Call("exp", {d});
        },
        [&](Stmt st) { return LetStmt(mv, m_value, st); }));
    // The output pass: the per-row factor, LayerNormalization's Mean and
    // InvStdDev, then every element.
    Expr factor = RowFactor(*s.node, m, Load(b, I(0)), s.count);
    std::vector<Stmt> stats;
    for (const Buffer& o : res.mean) stats.push_back(Store(o, result_at, m));
    for (const Buffer& o : res.inv) stats.push_back(Store(o, result_at, f));
    std::vector<Stmt> out;
    if (!stats.empty()) out.push_back(Guarded(store_cond, Block(stats)));
    if (!res.y.empty()) {
      absl::Status err = absl::OkStatus();
      ASSIGN_OR_RETURN(Stmt write, SweepLoops(w, then_cache, [&](const Element& el) -> Stmt {
                         Expr e = s.op == "Softmax" ? Call("exp", {Sub(el.x, m)}) : nullptr;
                         absl::StatusOr<Expr> y = RowOutput(*s.node, ge_, el.x, e, m, f, w.kidx, el.ridx);
                         if (!y.ok()) {
                           err = y.status();
                           return Block({});
                         }
                         std::vector<Stmt> st;
                         for (const Buffer& o : res.y) st.push_back(Store(o, el.at, *y));
                         return Block(st);
                       }));
      RETURN_IF_ERROR(err);
      out.push_back(Guarded(valid, write));
    }
    tl.Emit(LetStmt(mv, m_value, LetStmt(fv, factor, Block(out))));
    return tl.Finish();
  }

  // Loads and stores of an intermediate result's full-shape buffer become
  // accesses of the block's slice of it: the row-local axes' indices (the
  // block's) become 0.
  Expr SliceIndex(Expr index) const {
    for (const std::string& p : prefix_vars_) index = Substitute(index, p, I(0));
    return index;
  }

  Expr Rebase(const Expr& e) {
    if (e == nullptr || e->args.empty()) return e;
    if (auto it = rebased_.find(e.get()); it != rebased_.end()) return it->second;
    bool changed = false;
    std::vector<Expr> args;
    for (const Expr& a : e->args) {
      args.push_back(Rebase(a));
      changed = changed || args.back() != a;
    }
    auto it = e->kind == ExprKind::kLoad ? slices_.find(e->buffer.get()) : slices_.end();
    Expr out = e;
    if (changed || it != slices_.end()) {
      auto n = std::make_shared<ExprNode>(*e);
      n->args = std::move(args);
      if (it != slices_.end()) {
        n->buffer = it->second;
        n->args[0] = SliceIndex(n->args[0]);
      }
      out = n;
    }
    rebased_[e.get()] = out;
    return out;
  }

  Stmt RebaseSlices(const Stmt& s) {
    if (s == nullptr) return s;
    auto n = std::make_shared<StmtNode>(*s);
    n->extent = Rebase(s->extent);
    n->value = Rebase(s->value);
    n->index = Rebase(s->index);
    for (Stmt& c : n->body) c = RebaseSlices(c);
    if (s->kind == StmtKind::kStore) {
      auto it = slices_.find(s->buffer.get());
      if (it != slices_.end()) {
        n->buffer = it->second;
        n->index = SliceIndex(n->index);
      }
    }
    return n;
  }

  const Graph& g_;
  const Form& f_;
  GraphExpr ge_;
  int64_t bt_, tr_, vw_;
  Buffer partials_;
  std::vector<Buffer> locals_;
  // The block's index along each row-local axis (several stages).
  std::vector<std::string> prefix_vars_;
  std::vector<Expr> prefix_;
  // Each intermediate result's full-shape buffer -> the slice of it one
  // block holds.
  std::map<const BufferNode*, Buffer> slices_;
  std::map<const ExprNode*, Expr> rebased_;
};

absl::StatusOr<LoopFunc> Lower(const Graph& g, const ScheduleConfig& c, const GpuTarget&) {
  ASSIGN_OR_RETURN(Form f, Analyze(g));
  RETURN_IF_ERROR(ValidateForm(g, f, c));
  return Lowerer(g, f, c.Get("bt", 256), c.Get("tr", 1), c.Get("vw", 1)).Run();
}

}  // namespace

GpuWorkloadLowering GpuReductionLowering() {
  return GpuWorkloadLowering{"reduction", Enumerate, Default, Validate, Lower};
}

}  // namespace kiln::loop_ir::gpu
