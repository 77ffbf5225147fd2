// GPU lowering of the topk kind (see gpu/lower_topk.h): a group of threads
// per row, k selection rounds or a bitonic sort in shared memory.
#include "compiler_core/codegen/loop_ir/gpu/lower_topk.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compiler_core/codegen/loop_ir/gpu/group_reduce.h"
#include "compiler_core/codegen/loop_ir/lower_common.h"
#include "compiler_core/codegen/loop_ir/lower_topk.h"
#include "compiler_core/codegen/loop_ir/substitute.h"

namespace kiln::loop_ir::gpu {
namespace {

// Elements per thread kept in registers across the selection rounds.
constexpr int64_t kMaxCached = 32;

Expr I(int64_t v) { return IntImm(v); }

int64_t Rows(const TopKForm& f) { return f.outer * f.inner; }

// The sort variant's padded row, and the shared memory of a block's rows:
// f32 values and i32 indices.
int64_t SortedLength(const TopKForm& f) { return Pow2Ceil(f.n); }
int64_t SortSharedBytes(const TopKForm& f, int64_t bt, int64_t tr) {
  return (bt / tr) * CeilDiv(SortedLength(f) * 4, 16) * 16 * 2;
}

// The block of a group size: the group itself from 128 threads on; else up
// to 128 threads, fewer where there are fewer rows.
int64_t BlockFor(const TopKForm& f, int64_t tr) {
  if (tr >= 128) return tr;
  return std::clamp<int64_t>(Pow2Ceil(Rows(f)) * tr, std::max(kWarpSize, tr), 128);
}

std::vector<ScheduleConfig> EnumerateForm(const TopKForm& f) {
  std::vector<ScheduleConfig> out;
  for (int64_t tr : {1, 8, 32, 128, 256, 512, 1024}) {
    if (tr > 1 && tr > Pow2Ceil(f.n)) break;
    const int64_t bt = BlockFor(f, tr);
    for (int64_t sort : {0, 1}) {
      if (sort == 1 && SortSharedBytes(f, bt, tr) > kMaxGpuSharedBytes) continue;
      ScheduleConfig c;
      c.Set("bt", bt);
      c.Set("sort", sort);
      c.Set("tr", tr);
      out.push_back(c);
    }
  }
  return out;
}

std::vector<ScheduleConfig> Enumerate(const Graph& g, const GpuTarget&) {
  absl::StatusOr<TopKForm> f = AnalyzeTopK(g);
  if (!f.ok()) return {};
  return EnumerateForm(*f);
}

// Issue slots a group spends combining one value: shuffles within a warp,
// then a barrier and the fold of the warps' partials.
double CombineCost(int64_t tr) {
  if (tr == 1) return 0;
  double c = 2 * std::log2(static_cast<double>(std::min(tr, kWarpSize)));
  if (tr > kWarpSize) c += 40 + static_cast<double>(tr / kWarpSize);
  return c;
}

// The point of least modelled time: rows run in waves of kGpuFillThreads
// threads; a row costs, per thread, its element reads and compares and the
// group combines (selection: 2 per round; sort: a barrier per step).
ScheduleConfig DefaultForm(const TopKForm& f) {
  const std::vector<ScheduleConfig> space = EnumerateForm(f);
  return BestBy(space, [&](const ScheduleConfig& c) {
    const int64_t tr = c.Get("tr", 1);
    double per_row;
    if (c.Get("sort", 0) == 0) {
      const double ept = static_cast<double>(CeilDiv(f.n, tr));
      per_row = ept + static_cast<double>(f.k) * (ept * 3 + 2 * CombineCost(tr) + 4);
    } else {
      const int64_t n = SortedLength(f);
      const double lg = std::log2(static_cast<double>(n));
      const double steps = lg * (lg + 1) / 2;
      per_row = static_cast<double>(CeilDiv(n, tr)) + steps * (static_cast<double>(CeilDiv(n / 2, tr)) * 6 +
                                                                (tr > 1 ? 40 : 0)) +
                static_cast<double>(CeilDiv(f.k, tr));
    }
    const double waves = std::ceil(static_cast<double>(Rows(f) * tr) / kGpuFillThreads);
    return -waves * per_row;
  });
}

ScheduleConfig Default(const Graph& g, const GpuTarget&) {
  absl::StatusOr<TopKForm> f = AnalyzeTopK(g);
  if (!f.ok()) return {};
  return DefaultForm(*f);
}

absl::Status ValidateForm(const Graph& g, const TopKForm& f, const ScheduleConfig& c) {
  RETURN_IF_ERROR(ValidateGpuKnobs(g, c, {"bt", "sort", "tr"}));
  const int64_t bt = c.Get("bt", 128), tr = c.Get("tr", 1), sort = c.Get("sort", 0);
  if (tr < 1 || tr > bt || (tr & (tr - 1)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("schedule ", c.ToString(), ": knob tr=", tr,
                                                   " is not a power of two up to bt for TopK ", f.topk->name()));
  }
  if (sort != 0 && sort != 1) {
    return absl::InvalidArgumentError(absl::StrCat("schedule ", c.ToString(), ": knob sort=", sort,
                                                   " is not 0 or 1 for TopK ", f.topk->name()));
  }
  if (sort == 1 && SortSharedBytes(f, bt, tr) > kMaxGpuSharedBytes) {
    return absl::InvalidArgumentError(absl::StrCat("schedule ", c.ToString(), ": sorting ", bt / tr, " rows of ",
                                                   SortedLength(f), " in a block of TopK ", f.topk->name(),
                                                   " needs more than ", kMaxGpuSharedBytes,
                                                   " bytes of shared memory"));
  }
  return absl::OkStatus();
}

absl::Status Validate(const Graph& g, const ScheduleConfig& c, const GpuTarget&) {
  ASSIGN_OR_RETURN(TopKForm f, AnalyzeTopK(g));
  return ValidateForm(g, f, c);
}

class Lowerer {
 public:
  Lowerer(const TopKForm& f, int64_t bt, int64_t tr) : f_(f), bt_(bt), tr_(tr) {}

  LoopFunc Run(bool sort) {
    args_.push_back(MakeBuffer("in0", f_.dims, BufferRole::kInput, 0));
    std::vector<int64_t> od = f_.dims;
    od[f_.axis] = f_.k;
    for (int j = 0; j < 2; ++j) {
      const bool is_idx = j == f_.indices_out;
      if (j != f_.values_out && !is_idx) continue;
      Buffer b = MakeBuffer(absl::StrCat("out", j), od, BufferRole::kOutput, 1 + j,
                            is_idx ? ScalarType::kI64 : ScalarType::kF32);
      (is_idx ? out_i_ : out_v_) = b;
      args_.push_back(b);
    }
    if (Rows(f_) == 0 || f_.k == 0) return LoopFunc{"topk", args_, For("blk", I(1), Block({}), ForKind::kGpuBlock)};
    const int64_t rpb = bt_ / tr_;
    const int64_t blocks = CeilDiv(Rows(f_), rpb);
    if (blocks * rpb != Rows(f_)) valid_ = Lt(Var("q"), I(Rows(f_)));
    Stmt body = sort ? Sort() : Selection();
    return LoopFunc{"topk", args_, For("blk", I(blocks), body, ForKind::kGpuBlock)};
  }

 private:
  Expr Group() const { return tr_ == 1 ? Var("tid") : tr_ == bt_ ? I(0) : Div(Var("tid"), I(tr_)); }
  Expr Lane() const { return tr_ == 1 ? I(0) : tr_ == bt_ ? Var("tid") : Mod(Var("tid"), I(tr_)); }

  // Every thread loop starts with its row: q, then (o, i).
  std::function<Stmt(Stmt)> Prologue() const {
    const int64_t rpb = bt_ / tr_, inner = f_.inner;
    Expr q = Add(Mul(Var("blk"), I(rpb)), Group());
    return [q, inner](Stmt body) {
      body = LetStmt("o", inner == 1 ? Var("q") : Div(Var("q"), I(inner)),
                     LetStmt("i", inner == 1 ? I(0) : Mod(Var("q"), I(inner)), body));
      return LetStmt("q", q, body);
    };
  }

  Expr X(const Expr& j) const {
    return Load(args_[0], Add(Mul(Add(Mul(Var("o"), I(f_.n)), j), I(f_.inner)), Var("i")));
  }
  Expr OutAt(const Expr& w) const { return Add(Mul(Add(Mul(Var("o"), I(f_.k)), w), I(f_.inner)), Var("i")); }
  Stmt StoreOut(const Expr& w, const Expr& value, const Expr& index) const {
    std::vector<Stmt> st;
    if (out_v_ != nullptr) st.push_back(Store(out_v_, OutAt(w), value));
    if (out_i_ != nullptr) st.push_back(Store(out_i_, OutAt(w), Cast(ScalarType::kI64, index)));
    return Block(st);
  }

  // The order of the output: a before b when a's value is better, or equal
  // with a lower index.
  Expr Better(const Expr& a, const Expr& b) const { return f_.largest ? Gt(a, b) : Lt(a, b); }
  Expr Before(const Expr& av, const Expr& ai, const Expr& bv, const Expr& bi) const {
    return Or(Better(av, bv), And(Eq(av, bv), Lt(ai, bi)));
  }
  // A value after every element (padding, threads without elements).
  Expr Worst() const { return FloatImm(f_.largest ? -INFINITY : INFINITY); }

  Stmt Guard(const Expr& cond, Stmt s) const {
    Expr all = valid_ == nullptr ? cond : cond == nullptr ? valid_ : And(cond, valid_);
    return all == nullptr ? s : IfThen(all, std::move(s));
  }

  // for (var, 0, steps) { let j = var * tr + lane; body if j < extent }
  Stmt Strided(const std::string& var, int64_t extent, const std::function<Stmt(Expr)>& body, bool unrolled,
               bool also_valid) const {
    const int64_t steps = CeilDiv(extent, tr_);
    Expr j = Var(var + "j");
    Expr bound = steps * tr_ == extent ? nullptr : Lt(j, I(extent));
    Stmt st = also_valid ? Guard(bound, body(j)) : (bound == nullptr ? body(j) : IfThen(bound, body(j)));
    st = LetStmt(var + "j", Add(Mul(Var(var), I(tr_)), Lane()), st);
    if (steps == 1) return Substitute(st, var, I(0));
    return For(var, I(steps), st, unrolled ? ForKind::kUnrolled : ForKind::kSerial);
  }

  // k rounds of selecting the next element of the order.
  Stmt Selection() {
    const int64_t steps = CeilDiv(f_.n, tr_);
    const bool cached = steps <= kMaxCached;
    auto local = [&](const std::string& name, ScalarType t, int64_t n = 1) {
      Buffer b = MakeBuffer(name, {n}, BufferRole::kLocal, -1, t);
      locals_.push_back(b);
      return b;
    };
    Buffer xs = cached ? local("xs", ScalarType::kF32, steps) : nullptr;
    Buffer last_v = local("last_v", ScalarType::kF32), last_i = local("last_i", ScalarType::kI64);
    Buffer mine_v = local("mine_v", ScalarType::kF32), mine_i = local("mine_i", ScalarType::kI64);
    Buffer grp_v = local("grp_v", ScalarType::kF32), grp_i = local("grp_i", ScalarType::kI64);
    const int64_t parts = PartialsNeeded("max", tr_, bt_);
    Buffer part_v = parts > 0 ? MakeBuffer("partials_v", {parts}, BufferRole::kShared) : nullptr;
    Buffer part_i = parts > 0 ? MakeBuffer("partials_i", {parts}, BufferRole::kShared, -1, ScalarType::kI64) : nullptr;
    Expr zero = I(0);

    // The thread's elements into registers; the previous pick starts before
    // every element.
    ThreadLoops init(bt_, Prologue());
    std::vector<Stmt> first = {Store(last_v, zero, FloatImm(f_.largest ? INFINITY : -INFINITY)),
                               Store(last_i, zero, I(-1))};
    if (cached) {
      first.push_back(Strided(
          "s", steps * tr_,
          [&](Expr j) {
            Stmt load = Store(xs, Var("s"), X(j));
            Expr inside = steps * tr_ == f_.n ? valid_ : valid_ == nullptr ? Lt(j, I(f_.n)) : And(Lt(j, I(f_.n)), valid_);
            return inside == nullptr ? load : IfThen(inside, load, Store(xs, Var("s"), Worst()));
          },
          true, false));
    }
    init.Emit(Block(first));

    // A round: the thread's first element after the last pick, the group's
    // best value, the lowest index holding it, then the pick.
    ThreadLoops round(bt_, Prologue());
    Expr xv = Var("xv", ScalarType::kF32), take = Var("take", ScalarType::kBool);
    Stmt scan = Strided(
        "s", f_.n,
        [&](Expr j) {
          Expr value = cached ? Load(xs, Var("s")) : X(j);
          Expr after = Before(Load(last_v, zero), Load(last_i, zero), xv, j);
          return LetStmt("xv", value,
                         LetStmt("take", And(after, Before(xv, j, Load(mine_v, zero), Load(mine_i, zero))),
                                 Block({Store(mine_v, zero, Select(take, xv, Load(mine_v, zero))),
                                        Store(mine_i, zero, Select(take, j, Load(mine_i, zero)))})));
        },
        cached, true);
    round.Emit(Block({Store(mine_v, zero, Worst()), Store(mine_i, zero, I(f_.n)), scan,
                      Store(grp_v, zero, Load(mine_v, zero))}));
    CombineInGroups(round, grp_v, f_.largest ? "max" : "min", tr_, bt_, part_v, "v_");
    round.Emit(Store(grp_i, zero, Select(Eq(Load(mine_v, zero), Load(grp_v, zero)), Load(mine_i, zero), I(f_.n))));
    CombineInGroups(round, grp_i, "min", tr_, bt_, part_i, "i_");
    Expr lane0 = tr_ == 1 ? nullptr : Eq(Lane(), zero);
    round.Emit(Block({Store(last_v, zero, Load(grp_v, zero)), Store(last_i, zero, Load(grp_i, zero)),
                      Guard(lane0, StoreOut(Var("r"), Load(grp_v, zero), Load(grp_i, zero)))}));
    Stmt body = Block({init.Finish(), For("r", I(f_.k), round.Finish())});
    for (const Buffer& b : locals_) body = Allocate(b, body);
    if (part_i != nullptr) body = Allocate(part_i, Allocate(part_v, body));
    return body;
  }

  // The bitonic network over each group's padded row in shared memory.
  Stmt Sort() {
    const int64_t n = SortedLength(f_), rpb = bt_ / tr_;
    Buffer sv = MakeBuffer("sv", {rpb * n}, BufferRole::kShared);
    Buffer si = MakeBuffer("si", {rpb * n}, BufferRole::kShared, -1, ScalarType::kI32);
    Expr base = rpb == 1 ? I(0) : Mul(Group(), I(n));
    auto at = [&](const Expr& e) { return Add(base, e); };
    ThreadLoops tl(bt_, Prologue());
    // The row, padded with the worst value at indices past n.
    tl.Emit(Strided(
        "e", n,
        [&](Expr j) {
          Expr inside = n == f_.n ? valid_ : valid_ == nullptr ? Lt(j, I(f_.n)) : And(Lt(j, I(f_.n)), valid_);
          Stmt value = inside == nullptr ? Store(sv, at(j), X(j))
                                         : IfThen(inside, Store(sv, at(j), X(j)), Store(sv, at(j), Worst()));
          return Block({value, Store(si, at(j), Cast(ScalarType::kI32, j))});
        },
        false, false));
    for (int64_t size = 2; size <= n; size *= 2) {
      for (int64_t stride = size / 2; stride >= 1; stride /= 2) {
        tl.Close();
        tl.Emit(Strided(
            "e", n / 2,
            [&](Expr pr) {
              // Pair (lo, lo + stride), in order where lo's size-block is
              // even, reversed where odd (the last merge: all in order).
              Expr lo = Add(Mul(Div(pr, I(stride)), I(2 * stride)), Mod(pr, I(stride)));
              Expr av = Var("av", ScalarType::kF32), bv = Var("bv", ScalarType::kF32);
              Expr ai = Var("ai", ScalarType::kI32), bi = Var("bi", ScalarType::kI32);
              Expr swap = Before(bv, bi, av, ai);
              if (size < n) swap = Select(Eq(Mod(Div(Var("lo"), I(size)), I(2)), I(0)), swap, Before(av, ai, bv, bi));
              Expr hi = Add(Var("lo"), I(stride));
              Stmt exchange = IfThen(swap, Block({Store(sv, at(Var("lo")), bv), Store(si, at(Var("lo")), bi),
                                                  Store(sv, at(hi), av), Store(si, at(hi), ai)}));
              return LetStmt(
                  "lo", lo,
                  LetStmt("av", Load(sv, at(Var("lo"))),
                          LetStmt("ai", Load(si, at(Var("lo"))),
                                  LetStmt("bv", Load(sv, at(hi)), LetStmt("bi", Load(si, at(hi)), exchange)))));
            },
            false, false));
      }
    }
    tl.Close();
    tl.Emit(Strided(
        "e", f_.k, [&](Expr w) { return StoreOut(w, Load(sv, at(w)), Load(si, at(w))); }, false, true));
    return Allocate(sv, Allocate(si, tl.Finish()));
  }

  const TopKForm& f_;
  int64_t bt_, tr_;
  std::vector<Buffer> args_;
  Buffer out_v_, out_i_;
  Expr valid_;  // the row exists (null: every group's does)
  std::vector<Buffer> locals_;
};

absl::StatusOr<LoopFunc> Lower(const Graph& g, const ScheduleConfig& c, const GpuTarget&) {
  ASSIGN_OR_RETURN(TopKForm f, AnalyzeTopK(g));
  RETURN_IF_ERROR(ValidateForm(g, f, c));
  return Lowerer(f, c.Get("bt", 128), c.Get("tr", 1)).Run(c.Get("sort", 0) == 1);
}

}  // namespace

GpuWorkloadLowering GpuTopKLowering() {
  return GpuWorkloadLowering{"topk", Enumerate, Default, Validate, Lower};
}

}  // namespace kiln::loop_ir::gpu
