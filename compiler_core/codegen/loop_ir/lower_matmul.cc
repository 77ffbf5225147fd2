// "matmul" workloads: MatMul/Gemm + elementwise epilogue lowered to a tiled,
// packed, register-blocked loop nest (see lower_matmul.h), and a small JIT for
// loop-IR functions.
#include "compiler_core/codegen/loop_ir/lower_matmul.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler_core/codegen/kernel_spec.h"
#include "compiler_core/codegen/loop_ir/graph_expr.h"
#include "compiler_core/codegen/loop_ir/llvm_lowering.h"
#include "compiler_core/codegen/schedule_space.h"
#include "base/status_macros.h"

namespace kiln::loop_ir {
namespace {

Expr I(int64_t v) { return IntImm(v); }
Expr V(const std::string& name) { return Var(name); }

// `e` with every load of `from` replaced by `with`.
Expr ReplaceLoads(const Expr& e, const BufferNode* from, const Expr& with) {
  if (e->kind == ExprKind::kLoad && e->buffer.get() == from) return with;
  bool changed = false;
  std::vector<Expr> args;
  for (const Expr& a : e->args) {
    args.push_back(ReplaceLoads(a, from, with));
    changed = changed || args.back() != a;
  }
  if (!changed) return e;
  auto copy = std::make_shared<ExprNode>(*e);
  copy->args = std::move(args);
  return copy;
}

absl::StatusOr<KernelSpec> MatMulSpecOf(const Graph& g) {
  ASSIGN_OR_RETURN(KernelSpec spec, AnalyzeWorkload(g));
  if (spec.kind != KernelSpec::Kind::kMatMul) {
    return absl::UnimplementedError(absl::StrCat("workload ", g.name(), " has no MatMul or Gemm anchor"));
  }
  return spec;
}

// How a register tile starts and ends over one K block.
enum class Init { kZero, kPartial, kFirstBlock };  // kFirstBlock: zero when kb == 0, else partial

struct KPart {
  Expr k0;
  int64_t klen = 0;
  Init init = Init::kZero;
  Expr first;          // kFirstBlock: the "no partial sums yet" condition
  bool final = true;   // epilogue and every output; else raw sums into output 0
};

class MatMulBuilder {
 public:
  MatMulBuilder(const Graph& g, const KernelSpec& spec, const ScheduleConfig& config, const CpuTarget& target)
      : g_(g), spec_(spec), s_(spec.matmul), t_(TileMatMul(spec.matmul, config, target)), ge_(g),
        lanes_(target.FloatLanes()) {}

  absl::StatusOr<LoopFunc> Build() {
    const Node* anchor = nullptr;
    for (const auto& n : g_.nodes()) {
      if (n->name() == spec_.node_name) anchor = n.get();
    }
    if (anchor == nullptr) return absl::InternalError(absl::StrCat("anchor ", spec_.node_name, " not found"));
    view_ = MakeBuffer("mm_result", DimsOf(anchor->output(0)), BufferRole::kTemp);
    ge_.Bind(anchor->output(0), view_);
    a_ = ge_.args()[spec_.operand_args[0]];
    b_ = ge_.args()[spec_.operand_args[1]];
    if (s_.has_c) c_ = ge_.args()[spec_.operand_args[2]];
    for (size_t j = 0; j < g_.outputs().size(); ++j) outs_.push_back(ge_.output_buffer(static_cast<int>(j)));
    if (t_.num_tasks <= 0) return absl::UnimplementedError(absl::StrCat("node ", spec_.node_name, ": empty matmul"));
    nf_ = s_.n / t_.nb * t_.nb;
    if (t_.kc > 0) packed_ = MakeBuffer("packed_b", {t_.pack_floats}, BufferRole::kTemp);

    Expr a_off = I(0), b_off = I(0);
    int64_t inner = 1;
    for (size_t d = s_.batch_dims.size(); d-- > 0;) {
      Expr idx = Mod(Div(V("batch"), I(inner)), I(s_.batch_dims[d]));
      if (d == 0) idx = Div(V("batch"), I(inner));
      batch_idx_.insert(batch_idx_.begin(), Simplify(idx));
      if (s_.a_batch_strides[d] != 0) a_off = Add(a_off, Mul(batch_idx_.front(), I(s_.a_batch_strides[d])));
      if (s_.b_batch_strides[d] != 0) b_off = Add(b_off, Mul(batch_idx_.front(), I(s_.b_batch_strides[d])));
      inner *= s_.batch_dims[d];
    }
    std::vector<Stmt> parts;
    if (t_.kc == 0) {
      ASSIGN_OR_RETURN(Stmt p, Part(KPart{I(0), s_.k, Init::kZero, nullptr, true}));
      parts.push_back(p);
    } else {
      int64_t nk = std::max<int64_t>(1, (s_.k + t_.kc - 1) / t_.kc);
      int64_t last_k0 = (nk - 1) * t_.kc;
      if (nk > 1) {
        ASSIGN_OR_RETURN(Stmt p, Part(KPart{Mul(V("kb"), I(t_.kc)), t_.kc, Init::kFirstBlock, Eq(V("kb"), I(0)), false}));
        parts.push_back(For("kb", I(nk - 1), p));
      }
      ASSIGN_OR_RETURN(Stmt p, Part(KPart{I(last_k0), s_.k - last_k0, nk > 1 ? Init::kPartial : Init::kZero, nullptr, true}));
      parts.push_back(p);
    }
    Stmt body = Block(std::move(parts));
    if (packed_ != nullptr) body = Allocate(packed_, body);
    // Task decomposition: batch, row block, column block.
    int64_t per_batch = t_.row_blocks * t_.col_blocks;
    body = LetStmt("m0", Mul(V("rb"), I(t_.rows_per_task)), LetStmt("n0", Mul(V("cb"), I(t_.cols_per_task)), body));
    body = LetStmt("a_off", Simplify(a_off), LetStmt("b_off", Simplify(b_off), body));
    body = LetStmt("batch", Div(V("task"), I(per_batch)),
                   LetStmt("rb", Div(Mod(V("task"), I(per_batch)), I(t_.col_blocks)),
                           LetStmt("cb", Mod(V("task"), I(t_.col_blocks)), body)));
    LoopFunc f;
    f.name = "matmul";
    f.args = ge_.args();
    f.body = For("task", I(t_.num_tasks), body, ForKind::kParallel);
    RETURN_IF_ERROR(Verify(f));
    return f;
  }

 private:
  // The statements of one K block for the task.
  absl::StatusOr<Stmt> Part(const KPart& kp) {
    std::vector<Stmt> out;
    const int64_t nb = t_.nb, tail = s_.n % nb;
    const int64_t last_cb = t_.col_blocks - 1;
    const int64_t tail_panel = (nf_ - last_cb * t_.cols_per_task) / nb;  // in the last column block
    // Full column panels of the task: a static count when every task has the
    // same, else a guard.
    int64_t panels = t_.cols_per_task / nb;
    bool guard_cols = false;
    if (t_.col_blocks == 1) {
      panels = nf_ / nb;
    } else if (s_.n % t_.cols_per_task != 0) {
      guard_cols = true;
    }
    auto col_n = [&](const Expr& jp) { return Add(V("n0"), Mul(jp, I(nb))); };
    auto col_guard = [&](const Expr& jp, Stmt st) {
      return guard_cols ? IfThen(Le(col_n(jp), I(s_.n - nb)), st) : st;
    };
    auto tail_guard = [&](Stmt st) { return t_.col_blocks == 1 ? st : IfThen(Eq(V("cb"), I(last_cb)), st); };
    if (packed_ != nullptr && kp.klen > 0) {  // K = 0: nothing to pack
      auto pack = [&](const Expr& panel, const Expr& n, int64_t width) {
        Expr src = Add(Add(V("b_off"), Mul(Add(kp.k0, V("kk")), I(s_.b_stride_k))),
                       Mul(Add(n, V("pj")), I(s_.b_stride_n)));
        Expr dst = Add(Add(Mul(panel, I(t_.kc * nb)), Mul(V("kk"), I(nb))), V("pj"));
        return For("kk", I(kp.klen), EachCol(width, "pj", Store(packed_, dst, Load(b_, src))));
      };
      if (panels > 0) out.push_back(For("jp", I(panels), col_guard(V("jp"), pack(V("jp"), col_n(V("jp")), nb))));
      if (tail != 0) out.push_back(tail_guard(pack(I(tail_panel), I(nf_), tail)));
    }
    // One row of tiles: full panels, then the column tail.
    auto tile_row = [&](const Expr& m, int64_t rows, const std::string& tag) -> absl::StatusOr<Stmt> {
      std::vector<Stmt> row;
      if (panels > 0) {
        ASSIGN_OR_RETURN(Stmt full, Tile(kp, m, col_n(V("jp")), rows, nb, Mul(V("jp"), I(t_.kc * nb)), tag + "f"));
        row.push_back(For("jp", I(panels), col_guard(V("jp"), full)));
      }
      if (tail != 0) {
        ASSIGN_OR_RETURN(Stmt t, Tile(kp, m, I(nf_), rows, tail, I(tail_panel * t_.kc * nb), tag + "t"));
        row.push_back(tail_guard(t));
      }
      return Block(std::move(row));
    };
    const int64_t mr = t_.mr;
    int64_t row_blocks = t_.rows_per_task / mr;
    bool guard_rows = false;
    if (t_.row_blocks == 1) {
      row_blocks = s_.m / mr;
    } else if (s_.m % t_.rows_per_task != 0) {
      guard_rows = true;
    }
    if (row_blocks > 0) {
      Expr m = Add(V("m0"), Mul(V("ib"), I(mr)));
      ASSIGN_OR_RETURN(Stmt r, tile_row(m, mr, "r"));
      if (guard_rows) r = IfThen(Le(m, I(s_.m - mr)), r);
      out.push_back(For("ib", I(row_blocks), r));
    }
    if (s_.m % mr != 0) {
      ASSIGN_OR_RETURN(Stmt r, tile_row(Add(I(s_.m / mr * mr), V("it")), 1, "t"));
      Stmt rows = For("it", I(s_.m % mr), r);
      out.push_back(t_.row_blocks == 1 ? rows : IfThen(Eq(V("rb"), I(t_.row_blocks - 1)), rows));
    }
    return Block(std::move(out));
  }

  // `body` over columns `col` in [0, width): an unrolled loop over full vectors
  // of the target's lanes, then one narrower vector for the rest. (A single
  // vectorized loop nr * lanes wide would make LLVM vectors of 48 floats,
  // which the x86 back end legalizes poorly.)
  Stmt EachCol(int64_t width, const std::string& col, const Stmt& body) {
    std::vector<Stmt> out;
    int64_t full = width / lanes_, rest = width % lanes_;
    if (full > 0) {
      Stmt v = For(col + "l", I(lanes_), Substitute(body, col, Add(Mul(V(col + "v"), I(lanes_)), V(col + "l"))),
                   ForKind::kVectorized);
      out.push_back(For(col + "v", I(full), v, ForKind::kUnrolled));
    }
    if (rest > 0) {
      out.push_back(For(col + "l", I(rest), Substitute(body, col, Add(I(full * lanes_), V(col + "l"))),
                        ForKind::kVectorized));
    }
    return out.size() == 1 ? out[0] : Block(std::move(out));
  }

  // The rows x width register tile at (m, n) over kp's K range; `panel`: flat
  // offset of its packed B panel (when B is packed).
  absl::StatusOr<Stmt> Tile(const KPart& kp, const Expr& m, const Expr& n, int64_t rows, int64_t width,
                            const Expr& panel, const std::string& tag) {
    Buffer acc = MakeBuffer("acc_" + tag, {rows, width}, BufferRole::kTemp);
    Expr acc_idx = Add(Mul(V("i"), I(width)), V("j"));
    Expr mi = Add(m, V("i"));
    Expr nj = Add(n, V("j"));
    Expr out_idx = Add(Add(Mul(V("batch"), I(s_.m * s_.n)), Mul(mi, I(s_.n))), nj);
    auto each = [&](Stmt st) { return For("i", I(rows), EachCol(width, "j", st), ForKind::kUnrolled); };
    std::vector<Stmt> body;
    // Init.
    Expr init = FloatImm(0);
    if (kp.init == Init::kPartial) init = Load(outs_[0], out_idx);
    if (kp.init == Init::kFirstBlock) init = Select(kp.first, FloatImm(0), Load(outs_[0], out_idx));
    body.push_back(each(Store(acc, acc_idx, init)));
    // K loop: acc += A[m+i, k0+k] * B[k0+k, n+j].
    auto kstep = [&](const Expr& k) {
      Expr a = Load(a_, Add(Add(V("a_off"), Mul(mi, I(s_.a_stride_m))), Mul(Add(kp.k0, k), I(s_.a_stride_k))));
      Expr b = packed_ != nullptr
                   ? Load(packed_, Add(Add(panel, Mul(k, I(t_.nb))), V("j")))
                   : Load(b_, Add(Add(V("b_off"), Mul(Add(kp.k0, k), I(s_.b_stride_k))), Mul(nj, I(s_.b_stride_n))));
      return each(Store(acc, acc_idx, Call("fma", {a, b, Load(acc, acc_idx)})));
    };
    int64_t ku = std::max<int64_t>(1, t_.ku);
    int64_t kfull = kp.klen / ku;
    if (kfull > 0) {
      body.push_back(For("ko", I(kfull), For("u", I(ku), kstep(Add(Mul(V("ko"), I(ku)), V("u"))), ForKind::kUnrolled)));
    }
    if (kp.klen % ku != 0) {
      body.push_back(For("kt", I(kp.klen % ku), kstep(Add(I(kfull * ku), V("kt"))), ForKind::kUnrolled));
    }
    // Store: partial sums, or the epilogue of every output.
    Expr v = Load(acc, acc_idx);
    if (!kp.final) {
      body.push_back(each(Store(outs_[0], out_idx, v)));
      return Allocate(acc, Block(std::move(body)));
    }
    if (s_.alpha != 1.0f) v = Mul(v, FloatImm(s_.alpha));
    if (s_.has_c && s_.beta != 0.0f) {
      Expr c = Load(c_, Add(Mul(mi, I(s_.c_stride_m)), Mul(nj, I(s_.c_stride_n))));
      if (s_.beta != 1.0f) c = Mul(c, FloatImm(s_.beta));
      v = Add(v, c);
    }
    std::vector<Expr> index = batch_idx_;
    if (s_.has_m_dim) index.push_back(mi);
    if (s_.has_n_dim) index.push_back(nj);
    std::vector<Stmt> stores;
    for (size_t o = 0; o < outs_.size(); ++o) {
      ASSIGN_OR_RETURN(Expr e, ge_.At(g_.outputs()[o], index));
      stores.push_back(Store(outs_[o], out_idx, ReplaceLoads(e, view_.get(), v)));
    }
    body.push_back(each(Block(std::move(stores))));
    return Allocate(acc, Block(std::move(body)));
  }

  const Graph& g_;
  const KernelSpec& spec_;
  const MatMulSpec& s_;
  const MatMulTiling t_;
  GraphExpr ge_;
  Buffer view_, a_, b_, c_, packed_;
  std::vector<Buffer> outs_;
  std::vector<Expr> batch_idx_;
  int64_t lanes_ = 1;
  int64_t nf_ = 0;
};

}  // namespace

WorkloadLowering MatMulLowering() {
  WorkloadLowering l;
  l.kind = "matmul";
  l.match = [](const Graph& g) { return MatMulSpecOf(g).status(); };
  l.enumerate = [](const Graph& g, const CpuTarget& target) { return EnumerateSchedules(g, target); };
  l.default_schedule = [](const Graph& g, const CpuTarget& target) { return DefaultSchedule(g, target); };
  l.validate = [](const Graph& g, const ScheduleConfig& c, const CpuTarget& target) {
    return ValidateSchedule(g, c, target);
  };
  l.lower = [](const Graph& g, const ScheduleConfig& c, const CpuTarget& target) -> absl::StatusOr<LoopFunc> {
    ASSIGN_OR_RETURN(KernelSpec spec, MatMulSpecOf(g));
    RETURN_IF_ERROR(ValidateSchedule(g, c, target));
    MatMulBuilder b(g, spec, c, target);
    return b.Build();
  };
  return l;
}

}  // namespace kiln::loop_ir
