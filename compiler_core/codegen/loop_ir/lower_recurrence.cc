// "recurrence" workloads: kiln.Recurrence as one time loop per (direction,
// batch entry) (see lower_recurrence.h). The semantics are the interpreter's
// (compiler_core/frontend/ops/rnn_ops.cc): gates i, o, f, c (LSTM), z, r, h
// (GRU), one (RNN); clip before the gate activations; a sequence shorter than
// T leaves Y zero past its end and its final state where it ended.
#include "compiler_core/codegen/loop_ir/lower_recurrence.h"

#include <cstdlib>
#include <optional>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compiler_core/codegen/loop_ir/graph_expr.h"
#include "compiler_core/codegen/loop_ir/lower_common.h"
#include "compiler_core/codegen/loop_ir/schedule.h"
#include "compiler_core/frontend/ops/rnn.h"
#include "compiler_core/frontend/op_registry.h"

namespace kiln::loop_ir {
namespace {

Expr I(int64_t v) { return IntImm(v); }
Expr F(double v) { return FloatImm(v); }

using Operand = RecurrenceOperand;

}  // namespace

absl::StatusOr<RecurrenceForm> AnalyzeRecurrence(const Graph& g) {
  if (g.nodes().size() != 1 || g.nodes()[0]->domain() != kKilnDomain ||
      g.nodes()[0]->op_type() != "Recurrence") {
    return absl::UnimplementedError(absl::StrCat("workload ", g.name(), " is not a single kiln.Recurrence"));
  }
  RecurrenceForm f;
  f.node = g.nodes()[0].get();
  const Node& n = *f.node;
  absl::StatusOr<ops::RnnSpec> spec = ops::ParseRnn(n);
  if (!spec.ok()) return absl::InvalidArgumentError(absl::StrCat(NodeContext(n), spec.status().message()));
  f.spec = *std::move(spec);
  if (f.spec.batch_first) return NodeError(n, "layout 1 (the pass makes time-major recurrences)");
  f.arg.assign(kRecNumOperands, -1);
  for (int i = 0; i < n.num_inputs() && i < kRecNumOperands; ++i) {
    const Value* v = n.input(i);
    if (v == nullptr) continue;
    if (!v->type().known || !v->type().IsStatic()) return NodeError(n, absl::StrCat("operand ", i, " is not static"));
    for (int k = 0; k < static_cast<int>(g.inputs().size()); ++k) {
      if (g.inputs()[k] == v) f.arg[i] = k;
    }
    if (f.arg[i] >= 0) continue;
    if (i == kRecLens && v->is_constant() && v->constant().dtype() == DType::kInt32) {
      const Tensor& t = v->constant();
      f.lens = std::vector<int32_t>(t.data<int32_t>(), t.data<int32_t>() + t.num_elements());
      continue;
    }
    return NodeError(n, absl::StrCat("operand ", i, " is not a workload input"));
  }
  const std::vector<int64_t> xp = n.input(kRecXp)->type().StaticDims();
  if (xp.size() != 3) return NodeError(n, "XP is not 3-D");
  f.T = xp[0];
  f.B = xp[1];
  f.ND = f.spec.num_directions;
  f.H = f.spec.hidden;
  f.G = f.spec.gates;
  if (NumElements(xp) > (int64_t{1} << 31)) return NodeError(n, "XP too large");
  if (f.lens.has_value()) {
    bool full = true;
    for (int32_t l : *f.lens) {
      if (l < 0 || l > f.T) return NodeError(n, absl::StrCat("sequence_lens value ", l, " is outside [0, ", f.T, "]"));
      full = full && l == f.T;
    }
    if (full) f.lens.reset();
  }
  f.out.assign(3, -1);
  for (int j = 0; j < static_cast<int>(g.outputs().size()); ++j) {
    int which = -1;
    for (int o = 0; o < n.num_outputs() && o < 3; ++o) {
      if (g.outputs()[j] == n.output(o)) which = o;
    }
    if (which < 0) return NodeError(n, "an output that is not the recurrence's");
    f.out[which] = j;
  }
  if (f.out[0] < 0 && f.out[1] < 0 && f.out[2] < 0) return NodeError(n, "no outputs");
  return f;
}

namespace {

// Rows of the recurrent weights a GEMV pass streams at once (kb > 0): the
// divisors of H up to 16 from 4 on, H itself when smaller.
std::vector<int64_t> RowsPerPass(int64_t H) {
  std::vector<int64_t> out;
  for (int64_t kb : {4, 8, 16}) {
    if (H % kb == 0) out.push_back(kb);
  }
  if (out.empty()) out.push_back(H);
  return out;
}

std::vector<ScheduleConfig> EnumerateRecurrence(const Graph& g, const CpuTarget& target) {
  absl::StatusOr<RecurrenceForm> f = AnalyzeRecurrence(g);
  if (!f.ok()) return {};
  std::vector<ScheduleConfig> out;
  for (int64_t vw : VectorWidths(target, f->H)) {
    for (int64_t unroll : {1, 2, 4}) {
      if (unroll > 1 && vw * unroll > f->G * f->H) break;
      std::vector<int64_t> passes = RowsPerPass(f->H);
      passes.insert(passes.begin(), 0);
      for (int64_t kb : passes) {
        ScheduleConfig c;
        c.Set("vw", vw);
        c.Set("unroll", unroll);
        if (kb > 0) c.Set("kb", kb);
        out.push_back(c);
      }
    }
  }
  return out;
}

// The widest vectors, four per column block, in passes of 8 rows (or the
// nearest the space offers): every block's few FMAs per pass are independent
// of the next block's, so the core overlaps them, and the pass reads its rows
// front to back, as the prefetcher likes. (A whole column of H rows per block,
// kb = 0, chains H dependent FMAs per register and walks the weights a row's
// stride apart: 30-55 GFLOP/s on 256-unit LSTMs and GRUs.)
ScheduleConfig DefaultRecurrence(const Graph& g, const CpuTarget& target) {
  return BestBy(EnumerateRecurrence(g, target), [](const ScheduleConfig& c) {
    const int64_t kb = c.Get("kb", 0);
    return std::make_tuple(c.Get("vw", 1), c.Get("unroll", 1), kb > 0, -std::abs(kb - 8));
  });
}

absl::Status ValidateRecurrence(const Graph& g, const ScheduleConfig& c, const CpuTarget& target) {
  ASSIGN_OR_RETURN(RecurrenceForm f, AnalyzeRecurrence(g));
  RETURN_IF_ERROR(ValidateKnobs(g, c, target, {"vw", "unroll", "kb"}));
  const int64_t unroll = c.Get("unroll", 1);
  if (unroll != 1 && unroll != 2 && unroll != 4) return absl::InvalidArgumentError("unroll must be 1, 2 or 4");
  const int64_t kb = c.Get("kb", 0);
  if (kb < 0 || (kb > 0 && f.H % kb != 0)) {
    return absl::InvalidArgumentError(absl::StrCat("kb ", kb, " does not divide the hidden size ", f.H));
  }
  return absl::OkStatus();
}

// One cell activation of an f32 expression (ops::RnnActivation::Apply).
Expr Activate(const ops::RnnActivation& a, const Expr& x) {
  const std::string& n = a.name;
  const Expr zero = F(0);
  if (n == "Sigmoid") return Call("sigmoid", {x});
  if (n == "Tanh") return Call("tanh", {x});
  if (n == "Relu") return Select(Gt(x, zero), x, zero);
  if (n == "Affine") return Add(Mul(F(a.alpha), x), F(a.beta));
  if (n == "LeakyRelu") return Select(Ge(x, zero), x, Mul(F(a.alpha), x));
  if (n == "ThresholdedRelu") return Select(Gt(x, F(a.alpha)), x, zero);
  if (n == "ScaledTanh") return Mul(F(a.alpha), Call("tanh", {Mul(F(a.beta), x)}));
  if (n == "HardSigmoid") return Min(Max(Add(Mul(F(a.alpha), x), F(a.beta)), zero), F(1));
  if (n == "Elu") return Select(Ge(x, zero), x, Mul(F(a.alpha), Call("expm1", {x})));
  if (n == "Softsign") return Div(x, Add(F(1), Call("abs", {x})));
  if (n == "Softplus") {
    return Select(Gt(x, zero), Add(x, Call("log1p", {Call("exp", {Call("neg", {x})})})),
                  Call("log1p", {Call("exp", {x})}));
  }
  return x;  // ParseRnn admits only the activations above
}

// Pre-activations clipped to [-clip, clip] (clip > 0).
Expr Clip(const RecurrenceForm& f, const Expr& x) {
  return f.spec.clip > 0 ? Min(Max(x, F(-f.spec.clip)), F(f.spec.clip)) : x;
}

}  // namespace

bool SameActivations(const std::vector<ops::RnnActivation>& a, const std::vector<ops::RnnActivation>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name || a[i].alpha != b[i].alpha || a[i].beta != b[i].beta) return false;
  }
  return true;
}

Expr GruResetState(const RecurrenceForm& f, const std::vector<ops::RnnActivation>& acts,
                   const RecurrenceCellAccess& io, const Expr& j) {
  Expr r = Activate(acts[0], Clip(f, Add(io.xp(1, j), io.acc(1, j))));
  return Mul(r, io.h(j));
}

Stmt RecurrenceCell(const RecurrenceForm& f, const std::vector<ops::RnnActivation>& acts,
                    const RecurrenceCellAccess& io, const Expr& j) {
  const ops::RnnSpec& s = f.spec;
  auto act = [&](int which, const Expr& x) { return Activate(acts[which], Clip(f, x)); };
  auto pre = [&](int64_t gate) { return Add(io.xp(gate, j), io.acc(gate, j)); };
  Expr h_old = io.h(j);
  std::vector<Stmt> stores;
  if (s.kind == ops::RnnKind::kLstm) {  // gates i, o, f, c; peepholes i, o, f
    Expr c_old = io.c(j);
    Expr gi = pre(0);
    Expr gf = pre(2);
    if (io.peep) {
      gi = Add(gi, Mul(io.peep(0, j), c_old));
      gf = Add(gf, Mul(io.peep(2, j), c_old));
    }
    Expr i_t = act(0, gi);
    Expr f_t = s.input_forget ? Sub(F(1), i_t) : act(0, gf);
    Expr g_t = act(1, pre(3));
    Expr c_new = Add(Mul(f_t, c_old), Mul(i_t, g_t));
    Expr go = pre(1);
    if (io.peep) go = Add(go, Mul(io.peep(1, j), c_new));
    // Statements lower one by one: h (which reads the old c) before c.
    stores.push_back(io.store_h(j, Mul(act(0, go), Activate(acts[2], c_new))));
    stores.push_back(io.store_c(j, c_new));
  } else if (s.kind == ops::RnnKind::kGru) {  // gates z, r, h
    Expr z = act(0, pre(0));
    Expr cand;
    if (s.linear_before_reset) {
      Expr r = act(0, pre(1));
      Expr rec = io.acc(2, j);
      if (io.rbh) rec = Add(rec, io.rbh(j));
      cand = Add(io.xp(2, j), Mul(r, rec));
    } else {
      cand = pre(2);  // acc holds (r h) R_h^T there
    }
    Expr hh = act(1, cand);
    stores.push_back(io.store_h(j, Add(hh, Mul(z, Sub(h_old, hh)))));
  } else {
    stores.push_back(io.store_h(j, act(0, pre(0))));
  }
  if (io.store_y) stores.push_back(io.store_y(j));
  return Block(stores);
}

namespace {

// The kernel's statements for one (direction d_, batch entry b_) task.
class RecurrenceKernel {
 public:
  using Acts = std::vector<ops::RnnActivation>;

  RecurrenceKernel(const RecurrenceForm& f, std::vector<Buffer> in, std::vector<Buffer> out, int64_t vw,
                   int64_t unroll, int64_t kb)
      : f_(f), in_(std::move(in)), out_(std::move(out)), vw_(vw), unroll_(unroll), kb_(kb) {
    h_ = MakeBuffer("h", {f.H}, BufferRole::kTemp);
    c_ = MakeBuffer("c", {f.H}, BufferRole::kTemp);
    acc_ = MakeBuffer("acc", {f.G * f.H}, BufferRole::kTemp);
    rh_ = MakeBuffer("rh", {f.H}, BufferRole::kTemp);
    lens_ = MakeBuffer("lens", {f.B}, BufferRole::kTemp, -1, ScalarType::kI64);
  }

  absl::StatusOr<Stmt> Task() const;

 private:
  Expr d() const { return Var("d_"); }
  Expr b() const { return Var("b_"); }
  Expr t() const { return Var("t_"); }
  const Buffer& In(Operand o) const { return in_[o]; }
  bool Has(Operand o) const { return in_[o] != nullptr; }
  // XP[t, b, (d*G + gate)*H + j]
  Expr Xp(int64_t gate, const Expr& j) const {
    return Load(In(kRecXp), {t(), b(), Add(Mul(d(), I(f_.G * f_.H)), Add(I(gate * f_.H), j))});
  }
  Expr Acc(int64_t gate, const Expr& j) const { return Load(acc_, Add(I(gate * f_.H), j)); }
  // The cell's operands and state: the task's temps.
  RecurrenceCellAccess Access() const;
  // acc[c0 + j] = sum_k src[k] * RT[d, k, c0 + j] for j in [0, n), k
  // ascending: per column block over all k (kb = 0), or in passes of kb rows.
  absl::StatusOr<Stmt> Gemv(const Buffer& src, int64_t c0, int64_t n) const;
  // for (name, 0, H) vectorized by vw (tail lanes masked): body(j).
  absl::StatusOr<Stmt> OverHidden(const std::string& name, const std::function<Stmt(const Expr&)>& body) const;
  // The cell's state update for hidden unit j (stores h, c and Y), with one
  // direction's activations.
  Stmt Cell(const Expr& j, const Acts& acts) const;
  absl::StatusOr<Stmt> Step(const Acts& acts) const;

  const RecurrenceForm& f_;
  std::vector<Buffer> in_, out_;
  int64_t vw_, unroll_, kb_;
  Buffer h_, c_, acc_, rh_, lens_;
};

absl::StatusOr<Stmt> RecurrenceKernel::Gemv(const Buffer& src, int64_t c0, int64_t n) const {
  const int64_t block = vw_ * unroll_, GH = f_.G * f_.H;
  const std::string jo = absl::StrCat("jo", c0), ju = absl::StrCat("ju", c0), jv = absl::StrCat("jv", c0);
  const std::string k = absl::StrCat("k", c0);
  Expr j = Add(Add(Mul(Var(jo), I(block)), Mul(Var(ju), I(vw_))), Var(jv));
  Expr col = Add(I(c0), j);
  auto guarded = [&](Stmt s) { return n % block == 0 ? s : IfThen(Lt(j, I(n)), s); };
  const ForKind lanes_kind = vw_ > 1 ? ForKind::kVectorized : ForKind::kSerial;
  auto over_block = [&](Stmt s) {
    return For(ju, I(unroll_), For(jv, I(vw_), guarded(s), lanes_kind), ForKind::kUnrolled);
  };
  auto fma_at = [&](const Expr& row) {
    Expr rt = Load(In(kRecRt), Add(Mul(Add(Mul(d(), I(f_.H)), row), I(GH)), col));
    return Store(acc_, col, Call("fma", {Load(src, row), rt, Load(acc_, col)}));
  };
  Stmt zero = over_block(Store(acc_, col, F(0)));
  const int64_t blocks = (n + block - 1) / block;
  if (kb_ == 0) {
    // The k loop innermost: the block's accumulators stay in registers.
    return For(jo, I(blocks), Block({zero, For(k, I(f_.H), over_block(fma_at(Var(k))))}));
  }
  // Passes of kb rows: per block, kb FMAs into each of its vectors (loaded
  // from and stored back to acc once per pass), the rows in the pass's order.
  const std::string ko = absl::StrCat("ko", c0), kk = absl::StrCat("kk", c0);
  Expr row = Add(Mul(Var(ko), I(kb_)), Var(kk));
  Stmt pass = For(jo, I(blocks), For(kk, I(kb_), over_block(fma_at(row)), ForKind::kUnrolled));
  return Block({For(jo, I(blocks), zero), For(ko, I(f_.H / kb_), pass)});
}

absl::StatusOr<Stmt> RecurrenceKernel::OverHidden(const std::string& name,
                                                  const std::function<Stmt(const Expr&)>& body) const {
  Stmt s = For(name, I(f_.H), body(Var(name)));
  if (vw_ == 1) return s;
  const std::string inner = name + "v";
  ASSIGN_OR_RETURN(s, Split(s, name, vw_, name + "o", inner));
  return Vectorize(s, inner);
}

RecurrenceCellAccess RecurrenceKernel::Access() const {
  const int64_t H = f_.H;
  RecurrenceCellAccess io;
  io.xp = [this](int64_t gate, const Expr& j) { return Xp(gate, j); };
  io.acc = [this](int64_t gate, const Expr& j) { return Acc(gate, j); };
  io.h = [this](const Expr& j) { return Load(h_, j); };
  io.c = [this](const Expr& j) { return Load(c_, j); };
  if (Has(kRecPeep)) {
    io.peep = [this, H](int64_t part, const Expr& j) {
      return Load(In(kRecPeep), Add(Mul(d(), I(3 * H)), Add(I(part * H), j)));
    };
  }
  if (Has(kRecRbh)) io.rbh = [this, H](const Expr& j) { return Load(In(kRecRbh), Add(Mul(d(), I(H)), j)); };
  io.store_h = [this](const Expr& j, const Expr& v) { return Store(h_, j, v); };
  io.store_c = [this](const Expr& j, const Expr& v) { return Store(c_, j, v); };
  if (out_[0]) {
    // Y[t, d, b, j] = the new state (read back: h_new is not recomputed).
    io.store_y = [this](const Expr& j) { return Store(out_[0], {t(), d(), b(), j}, Load(h_, j)); };
  }
  return io;
}

Stmt RecurrenceKernel::Cell(const Expr& j, const Acts& acts) const { return RecurrenceCell(f_, acts, Access(), j); }

absl::StatusOr<Stmt> RecurrenceKernel::Step(const Acts& acts) const {
  const ops::RnnSpec& s = f_.spec;
  const int64_t H = f_.H, GH = f_.G * f_.H;
  std::vector<Stmt> body;
  if (s.kind == ops::RnnKind::kGru && !s.linear_before_reset) {
    // z and r first; then (r h) through the h rows.
    ASSIGN_OR_RETURN(Stmt zr, Gemv(h_, 0, 2 * H));
    body.push_back(zr);
    ASSIGN_OR_RETURN(Stmt rh, OverHidden("jr", [&](const Expr& j) {
      return Store(rh_, j, GruResetState(f_, acts, Access(), j));
    }));
    body.push_back(rh);
    ASSIGN_OR_RETURN(Stmt hrow, Gemv(rh_, 2 * H, H));
    body.push_back(hrow);
  } else {
    ASSIGN_OR_RETURN(Stmt all, Gemv(h_, 0, GH));
    body.push_back(all);
  }
  ASSIGN_OR_RETURN(Stmt cell, OverHidden("j", [&](const Expr& j) { return Cell(j, acts); }));
  body.push_back(cell);
  return Block(body);
}

absl::StatusOr<Stmt> RecurrenceKernel::Task() const {
  const int64_t T = f_.T, B = f_.B;
  std::vector<Stmt> body;
  auto state_init = [&](const Buffer& state, Operand init) {
    return OverHidden(state->name + "i", [&](const Expr& j) {
      return Store(state, j, Has(init) ? Load(In(init), {d(), b(), j}) : F(0));
    });
  };
  // The length of this entry's sequence.
  Expr len = I(T);
  if (Has(kRecLens)) {
    len = Cast(ScalarType::kI64, Load(In(kRecLens), b()));
  } else if (f_.lens.has_value()) {
    for (int64_t e = 0; e < B; ++e) body.push_back(Store(lens_, I(e), I((*f_.lens)[e])));
    len = Load(lens_, b());
  }
  const bool masked = Has(kRecLens) || f_.lens.has_value();
  ASSIGN_OR_RETURN(Stmt hi, state_init(h_, kRecH0));
  body.push_back(hi);
  if (f_.spec.kind == ops::RnnKind::kLstm) {
    ASSIGN_OR_RETURN(Stmt ci, state_init(c_, kRecC0));
    body.push_back(ci);
  }
  if (out_[0] && masked) {  // steps past the sequence's end stay zero
    ASSIGN_OR_RETURN(Stmt z, OverHidden("jz", [&](const Expr& j) {
      return Store(out_[0], {Var("tz_"), d(), b(), j}, F(0));
    }));
    body.push_back(For("tz_", I(T), z));
  }
  // Directions may differ in their activations: one step per direction then.
  const std::vector<Acts>& per_direction = f_.spec.activations;
  ASSIGN_OR_RETURN(Stmt step, Step(per_direction[0]));
  if (per_direction.size() == 2 && !SameActivations(per_direction[0], per_direction[1])) {
    ASSIGN_OR_RETURN(Stmt backward_step, Step(per_direction[1]));
    step = IfThen(Eq(d(), I(0)), step, backward_step);
  }
  // Backward directions run from the sequence's own end.
  // (direction "reverse" has one direction, d = 0; bidirectional's second is d = 1.)
  Expr backward = f_.spec.reverse ? Const(ScalarType::kBool, 1) : Eq(d(), I(1));
  Stmt steps = For("s_", Var("len_"),
                   LetStmt("t_", Select(backward, Sub(Sub(Var("len_"), I(1)), Var("s_")), Var("s_")), step));
  body.push_back(LetStmt("len_", len, steps));
  for (int o = 1; o <= 2; ++o) {
    if (!out_[o]) continue;
    const Buffer& state = o == 1 ? h_ : c_;
    ASSIGN_OR_RETURN(Stmt w, OverHidden(absl::StrCat("jf", o), [&](const Expr& j) {
      return Store(out_[o], {d(), b(), j}, Load(state, j));
    }));
    body.push_back(w);
  }
  Stmt task = Block(body);
  for (const Buffer& temp : {h_, c_, acc_, rh_, lens_}) task = Allocate(temp, task);
  return task;
}

absl::StatusOr<LoopFunc> LowerRecurrence(const Graph& g, const ScheduleConfig& config, const CpuTarget& target) {
  ASSIGN_OR_RETURN(RecurrenceForm f, AnalyzeRecurrence(g));
  RETURN_IF_ERROR(ValidateRecurrence(g, config, target));
  std::vector<Buffer> args;
  for (int i = 0; i < static_cast<int>(g.inputs().size()); ++i) {
    const Value* v = g.inputs()[i];
    args.push_back(MakeBuffer(absl::StrCat("in", i), v->type().StaticDims(), BufferRole::kInput, i,
                              ScalarTypeOf(v->type().dtype)));
  }
  std::vector<Buffer> outs(3);
  for (int j = 0; j < static_cast<int>(g.outputs().size()); ++j) {
    const Value* v = g.outputs()[j];
    Buffer b = MakeBuffer(absl::StrCat("out", j), v->type().StaticDims(), BufferRole::kOutput,
                          static_cast<int>(g.inputs().size()) + j);
    args.push_back(b);
    for (int o = 0; o < 3; ++o) {
      if (f.out[o] == j) outs[o] = b;
    }
  }
  std::vector<Buffer> in(kRecNumOperands);
  for (int o = 0; o < kRecNumOperands; ++o) {
    if (f.arg[o] >= 0) in[o] = args[f.arg[o]];
  }
  RecurrenceKernel kernel(f, in, outs, config.Get("vw", 1), config.Get("unroll", 1), config.Get("kb", 0));
  ASSIGN_OR_RETURN(Stmt task, kernel.Task());
  const int64_t tasks = f.ND * f.B;
  Stmt nest = LetStmt("d_", Div(Var("task_"), I(f.B)), LetStmt("b_", Mod(Var("task_"), I(f.B)), task));
  nest = For("task_", I(tasks), nest, tasks > 1 ? ForKind::kParallel : ForKind::kSerial);
  return LoopFunc{"recurrence", args, nest};
}

}  // namespace

WorkloadLowering RecurrenceLowering() {
  WorkloadLowering l;
  l.kind = "recurrence";
  l.match = [](const Graph& g) { return AnalyzeRecurrence(g).status(); };
  l.enumerate = EnumerateRecurrence;
  l.default_schedule = DefaultRecurrence;
  l.validate = ValidateRecurrence;
  l.lower = LowerRecurrence;
  return l;
}

}  // namespace kiln::loop_ir
