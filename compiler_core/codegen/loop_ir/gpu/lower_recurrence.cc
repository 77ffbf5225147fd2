// GPU lowering of the recurrence kind (see gpu/lower_recurrence.h); the
// semantics are the interpreter's (compiler_core/frontend/ops/rnn_ops.cc),
// through the CPU lowering's cell (RecurrenceCell).
#include "compiler_core/codegen/loop_ir/gpu/lower_recurrence.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compiler_core/codegen/loop_ir/gpu/group_reduce.h"
#include "compiler_core/codegen/loop_ir/graph_expr.h"
#include "compiler_core/codegen/loop_ir/lower_common.h"
#include "compiler_core/codegen/loop_ir/lower_recurrence.h"

namespace kiln::loop_ir::gpu {
namespace {

Expr I(int64_t v) { return IntImm(v); }
Expr F(double v) { return FloatImm(v); }

// Accumulators a thread may keep in registers: units x gates x entries.
constexpr int64_t kMaxAccumulators = 64;
// Hidden units per thread.
constexpr int64_t kMaxUnitsPerThread = 8;

bool ResetThroughShared(const RecurrenceForm& f) {
  return f.spec.kind == ops::RnnKind::kGru && !f.spec.linear_before_reset;
}

// Shared floats of a block of bb entries: the double-buffered state, and
// r * h for GRU without linear_before_reset.
int64_t SharedFloats(const RecurrenceForm& f, int64_t bb) { return (ResetThroughShared(f) ? 3 : 2) * bb * f.H; }

int64_t UnitsPerThread(const RecurrenceForm& f, int64_t bt) { return CeilDiv(f.H, bt); }

// Why (bt, bb) does not fit, or "" when it does.
std::string Misfit(const RecurrenceForm& f, int64_t bt, int64_t bb) {
  const int64_t u = UnitsPerThread(f, bt);
  if (u > kMaxUnitsPerThread) return absl::StrCat(u, " hidden units per thread exceed ", kMaxUnitsPerThread);
  if (bb * u * f.G > kMaxAccumulators) {
    return absl::StrCat(bb * u * f.G, " accumulators per thread exceed ", kMaxAccumulators);
  }
  // Each shared buffer is 16-byte aligned.
  const int64_t bytes = SharedFloats(f, bb) * 4 + 32;
  if (bytes > kMaxGpuSharedBytes) {
    return absl::StrCat(bytes, " bytes of shared state exceed ", kMaxGpuSharedBytes);
  }
  return "";
}

// Powers of two from a warp up to the first that covers every hidden unit.
std::vector<int64_t> BlockSizes(const RecurrenceForm& f) {
  std::vector<int64_t> out;
  for (int64_t bt = 32; bt <= kMaxGpuThreads; bt *= 2) {
    out.push_back(bt);
    if (bt >= f.H) break;
  }
  return out;
}

std::vector<int64_t> BatchBlocks(const RecurrenceForm& f) {
  std::vector<int64_t> out;
  for (int64_t bb : {1, 2, 4, 8}) {
    if (bb <= f.B) out.push_back(bb);
  }
  if (f.B <= 8 && std::find(out.begin(), out.end(), f.B) == out.end()) out.push_back(f.B);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<ScheduleConfig> Enumerate(const Graph& g, const GpuTarget&) {
  absl::StatusOr<RecurrenceForm> f = AnalyzeRecurrence(g);
  if (!f.ok()) return {};
  std::vector<ScheduleConfig> out;
  for (int64_t bt : BlockSizes(*f)) {
    for (int64_t bb : BatchBlocks(*f)) {
      if (!Misfit(*f, bt, bb).empty()) continue;
      ScheduleConfig c;
      c.Set("bt", bt);
      c.Set("bb", bb);
      out.push_back(c);
    }
  }
  return out;
}

// A thread per hidden unit up to 512 (every unit's dot products at once; a
// step's latency is the k loop); one entry per block while the directions'
// entries are no more blocks than 132 SMs, else the fewest entries per block
// that bring them down to it (each block reads all of R^T every step: more
// entries per block, fewer reads).
ScheduleConfig Default(const Graph& g, const GpuTarget& t) {
  std::vector<ScheduleConfig> space = Enumerate(g, t);
  absl::StatusOr<RecurrenceForm> f = AnalyzeRecurrence(g);
  if (!f.ok() || space.empty()) return {};
  constexpr int64_t kSms = 132;
  const int64_t bt = std::max<int64_t>(kWarpSize, Pow2Ceil(std::min<int64_t>(f->H, 512)));
  ScheduleConfig best;
  for (int64_t bb : BatchBlocks(*f)) {
    ScheduleConfig c;
    c.Set("bt", bt);
    c.Set("bb", bb);
    if (std::find(space.begin(), space.end(), c) == space.end()) continue;
    best = c;
    if (f->ND * CeilDiv(f->B, bb) <= kSms) break;
  }
  return best.knobs.empty() ? space.front() : best;
}

absl::Status Validate(const Graph& g, const ScheduleConfig& c, const GpuTarget&) {
  ASSIGN_OR_RETURN(RecurrenceForm f, AnalyzeRecurrence(g));
  RETURN_IF_ERROR(ValidateGpuKnobs(g, c, {"bt", "bb"}));
  const int64_t bt = c.Get("bt", 32), bb = c.Get("bb", 1);
  if (bb < 1 || bb > f.B) {
    return absl::InvalidArgumentError(
        absl::StrCat("schedule ", c.ToString(), ": knob bb=", bb, " is not in [1, ", f.B, "] (the batch)"));
  }
  const std::string misfit = Misfit(f, bt, bb);
  if (misfit.empty()) return absl::OkStatus();
  if (Misfit(f, kMaxGpuThreads, 1).empty()) {
    return absl::InvalidArgumentError(absl::StrCat("schedule ", c.ToString(), ": ", misfit));
  }
  return NodeError(*f.node, absl::StrCat("hidden size ", f.H, " does not fit a GPU block: ", misfit));
}

// The kernel of one schedule point: block blk runs direction d_ for batch
// entries b0_ + [0, bb), thread tid its units j = tid + bt * i.
class RecurrenceKernel {
 public:
  using Acts = std::vector<ops::RnnActivation>;

  // `args`: the workload's `inputs` inputs, then its outputs.
  RecurrenceKernel(const RecurrenceForm& f, const std::vector<Buffer>& args, size_t inputs, int64_t bt, int64_t bb)
      : f_(f), bt_(bt), bb_(bb), units_(UnitsPerThread(f, bt)) {
    in_.resize(kRecNumOperands);
    for (int o = 0; o < kRecNumOperands; ++o) {
      if (f.arg[o] >= 0) in_[o] = args[f.arg[o]];
    }
    out_.resize(3);
    for (int o = 0; o < 3; ++o) {
      if (f.out[o] >= 0) out_[o] = args[inputs + f.out[o]];
    }
    h_ = MakeBuffer("h", {2 * bb * f.H}, BufferRole::kShared);
    rh_ = MakeBuffer("rh", {bb * f.H}, BufferRole::kShared);
    acc_ = MakeBuffer("acc", {bb * units_ * f.G}, BufferRole::kLocal);
    c_ = MakeBuffer("c", {bb * units_}, BufferRole::kLocal);
    lens_ = MakeBuffer("len", {bb}, BufferRole::kLocal, -1, ScalarType::kI64);
  }

  Stmt Kernel() const;

 private:
  bool Has(RecurrenceOperand o) const { return in_[o] != nullptr; }
  bool Masked() const { return Has(kRecLens) || f_.lens.has_value(); }
  Expr d() const { return Var("d_"); }
  Expr tid() const { return Var("tid"); }
  // Batch entry of slot e, and its unit i.
  Expr Entry(int64_t e) const { return Add(Var("b0_"), I(e)); }
  Expr Unit(int64_t i) const { return Add(tid(), I(bt_ * i)); }
  // Whether slot e may lie past the batch (in the last block of a batch that
  // bb does not divide; slot 0 never does).
  bool Beyond(int64_t e) const { return e > 0 && f_.B % bb_ != 0; }
  int64_t Slot(int64_t e, int64_t i) const { return e * units_ + i; }
  // The state half step s reads (`next`: writes).
  Expr StateAt(int64_t e, const Expr& j, bool next) const {
    Expr half = Mod(Var("s_"), I(2));
    if (next) half = Sub(I(1), half);
    return Add(Add(Mul(half, I(bb_ * f_.H)), I(e * f_.H)), j);
  }
  Expr Acc(int64_t e, int64_t i, int64_t gate) const { return Load(acc_, I(Slot(e, i) * f_.G + gate)); }
  // Statements for every (entry, unit) of the thread that exists.
  Stmt ForUnits(const std::function<Stmt(int64_t e, int64_t i, const Expr& b, const Expr& j)>& body) const;
  // acc[e, i, gate] = sum_k src[e, k] * RT[d, k, gate * H + j] for `gates`.
  Stmt Gemv(const std::vector<int64_t>& gates, const std::function<Expr(int64_t e, const Expr& k)>& src) const;
  RecurrenceCellAccess Access(int64_t e, int64_t i, const Expr& b) const;
  // One time step's thread loops with one direction's activations.
  std::vector<Stmt> Step(const Acts& acts) const;
  Stmt ThreadLoop(Stmt body) const { return For("tid", I(bt_), body, ForKind::kGpuThread); }

  const RecurrenceForm& f_;
  const int64_t bt_, bb_, units_;
  std::vector<Buffer> in_, out_;
  Buffer h_, rh_, acc_, c_, lens_;
};

Stmt RecurrenceKernel::ForUnits(
    const std::function<Stmt(int64_t e, int64_t i, const Expr& b, const Expr& j)>& body) const {
  std::vector<Stmt> st;
  for (int64_t e = 0; e < bb_; ++e) {
    for (int64_t i = 0; i < units_; ++i) {
      Expr cond;
      if (Beyond(e)) cond = Lt(Entry(e), I(f_.B));
      if (bt_ * (i + 1) > f_.H) cond = cond ? And(cond, Lt(Unit(i), I(f_.H))) : Lt(Unit(i), I(f_.H));
      Stmt s = body(e, i, Entry(e), Unit(i));
      st.push_back(cond ? IfThen(cond, s) : s);
    }
  }
  return Block(st);
}

Stmt RecurrenceKernel::Gemv(const std::vector<int64_t>& gates,
                            const std::function<Expr(int64_t e, const Expr& k)>& src) const {
  const int64_t H = f_.H, GH = f_.G * f_.H;
  std::vector<Stmt> zero, fmas;
  for (int64_t i = 0; i < units_; ++i) {
    // Units past H read a valid column (their sums are never used): no
    // branch in the k loop.
    Expr j = bt_ * (i + 1) > H ? Min(Unit(i), I(H - 1)) : Unit(i);
    for (int64_t gate : gates) {
      const std::string w = absl::StrCat("w", i, "_", gate);
      Expr rt = Load(in_[kRecRt], Add(Mul(Add(Mul(d(), I(H)), Var("k_")), I(GH)), Add(I(gate * H), j)));
      std::vector<Stmt> per_entry;
      for (int64_t e = 0; e < bb_; ++e) {
        const Expr at = I(Slot(e, i) * f_.G + gate);
        zero.push_back(Store(acc_, at, F(0)));
        per_entry.push_back(
            Store(acc_, at, Call("fma", {src(e, Var("k_")), Var(w, ScalarType::kF32), Load(acc_, at)})));
      }
      fmas.push_back(LetStmt(w, rt, Block(per_entry)));
    }
  }
  return Block({Block(zero), For("k_", I(H), Block(fmas))});
}

RecurrenceCellAccess RecurrenceKernel::Access(int64_t e, int64_t i, const Expr& b) const {
  const int64_t H = f_.H, G = f_.G;
  const Expr t = Var(absl::StrCat("t", e, "_"));
  RecurrenceCellAccess io;
  io.xp = [this, t, b, G, H](int64_t gate, const Expr& j) {
    return Load(in_[kRecXp], {t, b, Add(Mul(d(), I(G * H)), Add(I(gate * H), j))});
  };
  io.acc = [this, e, i](int64_t gate, const Expr&) { return Acc(e, i, gate); };
  io.h = [this, e](const Expr& j) { return Load(h_, StateAt(e, j, false)); };
  io.c = [this, e, i](const Expr&) { return Load(c_, I(Slot(e, i))); };
  if (Has(kRecPeep)) {
    io.peep = [this, H](int64_t part, const Expr& j) {
      return Load(in_[kRecPeep], Add(Mul(d(), I(3 * H)), Add(I(part * H), j)));
    };
  }
  if (Has(kRecRbh)) io.rbh = [this, H](const Expr& j) { return Load(in_[kRecRbh], Add(Mul(d(), I(H)), j)); };
  io.store_h = [this, e](const Expr& j, const Expr& v) { return Store(h_, StateAt(e, j, true), v); };
  io.store_c = [this, e, i](const Expr&, const Expr& v) { return Store(c_, I(Slot(e, i)), v); };
  if (out_[0]) {
    io.store_y = [this, t, b, e](const Expr& j) {
      return Store(out_[0], {t, d(), b, j}, Load(h_, StateAt(e, j, true)));
    };
  }
  return io;
}

std::vector<Stmt> RecurrenceKernel::Step(const Acts& acts) const {
  const int64_t H = f_.H;
  auto state = [this](int64_t e, const Expr& k) { return Load(h_, StateAt(e, k, false)); };
  // The entry's time index and whether step s_ is inside its sequence.
  // Backward directions run from the sequence's own end ("reverse" has one
  // direction, d = 0; bidirectional's second is d = 1).
  auto timed = [&](int64_t e, Stmt s) {
    Expr len = Masked() ? Load(lens_, I(e)) : I(f_.T);
    Expr back = Sub(Sub(len, I(1)), Var("s_"));
    Expr t = f_.spec.reverse ? back : f_.ND == 2 ? Select(Eq(d(), I(1)), back, Var("s_")) : Var("s_");
    return LetStmt(absl::StrCat("t", e, "_"), t, s);
  };
  // The cell where the step is inside the entry's sequence; past its end
  // the state carries over and Y is zero.
  auto cell = [&](int64_t e, int64_t i, const Expr& b, const Expr& j) {
    Stmt s = RecurrenceCell(f_, acts, Access(e, i, b), j);
    if (!Masked()) return timed(e, s);
    std::vector<Stmt> idle = {Store(h_, StateAt(e, j, true), Load(h_, StateAt(e, j, false)))};
    if (out_[0]) idle.push_back(Store(out_[0], {Var("s_"), d(), b, j}, F(0)));
    return timed(e, IfThen(Lt(Var("s_"), Load(lens_, I(e))), s, Block(idle)));
  };
  if (!ResetThroughShared(f_)) {
    std::vector<int64_t> gates;
    for (int64_t gate = 0; gate < f_.G; ++gate) gates.push_back(gate);
    return {ThreadLoop(Block({Gemv(gates, state), ForUnits(cell)}))};
  }
  // GRU without linear_before_reset: z and r, then r * h to shared memory;
  // after the barrier the h gate's product reads it.
  auto reset = [&](int64_t e, int64_t i, const Expr& b, const Expr& j) {
    Stmt s = Store(rh_, Add(I(e * H), j), GruResetState(f_, acts, Access(e, i, b), j));
    // Past the sequence's end nothing reads the entry's sums.
    return timed(e, Masked() ? IfThen(Lt(Var("s_"), Load(lens_, I(e))), s) : s);
  };
  auto reset_state = [this, H](int64_t e, const Expr& k) { return Load(rh_, Add(I(e * H), k)); };
  return {ThreadLoop(Block({Gemv({0, 1}, state), ForUnits(reset)})),
          ThreadLoop(Block({Gemv({2}, reset_state), ForUnits(cell)}))};
}

Stmt RecurrenceKernel::Kernel() const {
  const int64_t T = f_.T, H = f_.H;
  std::vector<Stmt> body;
  // The initial state (zero for entries past the batch: their sums read it),
  // and the entries' sequence lengths.
  {
    std::vector<Stmt> init;
    for (int64_t e = 0; e < bb_; ++e) {
      Expr b = Entry(e);
      const bool tail = Beyond(e);
      for (int64_t i = 0; i < units_; ++i) {
        Expr j = Unit(i);
        auto initial = [&](RecurrenceOperand o) -> Expr {
          if (!Has(o)) return F(0);
          Expr v = Load(in_[o], {d(), tail ? Min(b, I(f_.B - 1)) : b, j});
          return tail ? Select(Lt(b, I(f_.B)), v, F(0)) : v;
        };
        std::vector<Stmt> st = {Store(h_, Add(I(e * H), j), initial(kRecH0))};
        if (f_.spec.kind == ops::RnnKind::kLstm) st.push_back(Store(c_, I(Slot(e, i)), initial(kRecC0)));
        init.push_back(bt_ * (i + 1) > H ? IfThen(Lt(j, I(H)), Block(st)) : Block(st));
      }
      if (Masked()) {
        Expr len;
        if (Has(kRecLens)) {
          len = Cast(ScalarType::kI64, Load(in_[kRecLens], Min(b, I(f_.B - 1))));
        } else {
          len = I((*f_.lens)[f_.B - 1]);
          for (int64_t k = f_.B - 1; k-- > 0;) len = Select(Eq(b, I(k)), I((*f_.lens)[k]), len);
        }
        init.push_back(Store(lens_, I(e), len));
      }
    }
    body.push_back(ThreadLoop(Block(init)));
  }
  // Directions may differ in their activations: one step per direction then.
  const std::vector<Acts>& per_direction = f_.spec.activations;
  std::vector<Stmt> step = Step(per_direction[0]);
  Stmt steps = Block(step);
  if (per_direction.size() == 2 && !SameActivations(per_direction[0], per_direction[1])) {
    steps = IfThen(Eq(d(), I(0)), steps, Block(Step(per_direction[1])));
  }
  if (T > 0) body.push_back(For("s_", I(T), steps));
  // The final state: where the last step left it.
  if (out_[1] || out_[2]) {
    const int64_t half = T % 2;
    body.push_back(ThreadLoop(ForUnits([&](int64_t e, int64_t i, const Expr& b, const Expr& j) {
      std::vector<Stmt> st;
      if (out_[1]) st.push_back(Store(out_[1], {d(), b, j}, Load(h_, Add(I(half * bb_ * H + e * H), j))));
      if (out_[2]) st.push_back(Store(out_[2], {d(), b, j}, Load(c_, I(Slot(e, i)))));
      return Block(st);
    })));
  }
  Stmt s = Block(body);
  for (const Buffer& b : {lens_, c_, acc_}) s = Allocate(b, s);
  if (ResetThroughShared(f_)) s = Allocate(rh_, s);
  s = Allocate(h_, s);
  const int64_t groups = CeilDiv(f_.B, bb_);
  s = LetStmt("d_", Div(Var("blk"), I(groups)), LetStmt("b0_", Mul(Mod(Var("blk"), I(groups)), I(bb_)), s));
  return For("blk", I(f_.ND * groups), s, ForKind::kGpuBlock);
}

absl::StatusOr<LoopFunc> Lower(const Graph& g, const ScheduleConfig& c, const GpuTarget& t) {
  RETURN_IF_ERROR(Validate(g, c, t));
  ASSIGN_OR_RETURN(RecurrenceForm f, AnalyzeRecurrence(g));
  const std::vector<Buffer> args = GraphExpr(g).args();
  RecurrenceKernel kernel(f, args, g.inputs().size(), c.Get("bt", 32), c.Get("bb", 1));
  return LoopFunc{"recurrence", args, kernel.Kernel()};
}

}  // namespace

GpuWorkloadLowering GpuRecurrenceLowering() {
  return GpuWorkloadLowering{"recurrence", Enumerate, Default, Validate, Lower};
}

}  // namespace kiln::loop_ir::gpu
