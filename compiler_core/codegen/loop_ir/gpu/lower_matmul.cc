// GPU lowering of the matmul kind: the tiled GEMM and the two GEMV kernels
// (see gpu/lower_matmul.h).
#include "compiler_core/codegen/loop_ir/gpu/lower_matmul.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compiler_core/codegen/loop_ir/gpu/gemm_tiling.h"
#include "compiler_core/codegen/loop_ir/graph_expr.h"
#include "compiler_core/codegen/loop_ir/lower_common.h"
#include "compiler_core/codegen/loop_ir/lower_matmul.h"
#include "compiler_core/codegen/loop_ir/verifier.h"

namespace kiln::loop_ir::gpu {
namespace {

Expr I(int64_t v) { return IntImm(v); }

// The widest vector (4, 2 or 1 lanes) that divides every one of `multiples`.
int64_t WidestDividing(const std::vector<int64_t>& multiples) {
  for (int64_t vw : {4, 2}) {
    bool ok = true;
    for (int64_t m : multiples) ok = ok && m % vw == 0;
    if (ok) return vw;
  }
  return 1;
}

// How the kernels read A and B: which axis is contiguous and how wide a
// vector load along it may be (a chunk's first element a multiple of it:
// the contiguous extent, the other stride and the batch strides divisible).
struct Layout {
  bool a_k_contiguous = true, b_k_contiguous = false;
  int64_t a_vw = 1, b_vw = 1;
};

Layout LayoutOf(const MatMulSpec& s) {
  Layout l;
  std::vector<int64_t> a = s.a_batch_strides, b = s.b_batch_strides;
  l.a_k_contiguous = s.a_stride_k == 1;
  if (l.a_k_contiguous) {
    a.push_back(s.k);
    if (s.m > 1) a.push_back(s.a_stride_m);
  } else {
    a.push_back(s.m);
    a.push_back(s.a_stride_k);
  }
  l.b_k_contiguous = !(s.b_stride_n == 1 && s.n > 1);
  if (l.b_k_contiguous) {
    b.push_back(s.k);
    if (s.n > 1) b.push_back(s.b_stride_n);
  } else {
    b.push_back(s.n);
    if (s.k > 1) b.push_back(s.b_stride_k);
  }
  l.a_vw = WidestDividing(a);
  l.b_vw = WidestDividing(b);
  return l;
}

GemmShape ShapeOf(const MatMulSpec& s) { return GemmShape{s.num_batches(), s.m, s.n, s.k}; }

// The GEMV variants apply to one row of A: gv=2 when B's K is contiguous,
// gv=1 when its N is.
bool DotGemvApplies(const MatMulSpec& s) { return s.m == 1 && s.b_stride_k == 1; }
bool ColumnGemvApplies(const MatMulSpec& s) { return s.m == 1 && s.b_stride_n == 1 && s.n > 1; }

// gv=2: the widest vector both A's row and B's rows allow along K.
int64_t DotVw(const MatMulSpec& s) {
  const Layout l = LayoutOf(s);
  return std::min(l.a_vw, l.b_vw);
}

// gv=1: the widest vector of columns B's rows allow.
int64_t ColumnVw(const MatMulSpec& s) { return LayoutOf(s).b_vw; }

std::string What(const MatMulSpec& s) { return absl::StrCat("matmul ", s.anchor->name()); }

// ---- the knob spaces ---------------------------------------------------------

std::vector<ScheduleConfig> DotGemvPoints(const MatMulSpec& s) {
  std::vector<ScheduleConfig> out;
  if (!DotGemvApplies(s)) return out;
  for (int64_t bt : {128, 256}) {
    for (int64_t gw : {8, 32}) {
      for (int64_t gc : {1, 2, 4}) {
        if (gc > 1 && gc / 2 >= s.n) break;
        ScheduleConfig c;
        c.Set("gv", 2);
        c.Set("bt", bt);
        c.Set("gw", gw);
        c.Set("gc", gc);
        c.Set("vw", DotVw(s));
        out.push_back(c);
      }
    }
  }
  return out;
}

std::vector<ScheduleConfig> ColumnGemvPoints(const MatMulSpec& s) {
  std::vector<ScheduleConfig> out;
  if (!ColumnGemvApplies(s)) return out;
  std::vector<int64_t> vws;
  for (int64_t vw = 1; vw <= ColumnVw(s); vw *= 2) vws.push_back(vw);
  for (int64_t bt : {128, 256}) {
    for (int64_t ks : {1, 4, 8}) {
      for (int64_t vw : vws) {
        ScheduleConfig c;
        c.Set("gv", 1);
        c.Set("bt", bt);
        c.Set("ks", ks);
        c.Set("vw", vw);
        out.push_back(c);
      }
    }
  }
  return out;
}

// The CPU's analysis, less kiln.PackedMatMul: its B panels are a CPU
// layout (the pass that makes them runs for CPU targets only).
absl::StatusOr<MatMulSpec> AnalyzeGpuMatMul(const Graph& g) {
  ASSIGN_OR_RETURN(MatMulSpec s, AnalyzeMatMul(g));
  if (s.b_panel > 0) {
    return absl::UnimplementedError(absl::StrCat("node ", s.anchor->name(),
                                                 ": kiln.PackedMatMul's column panels are a CPU layout"));
  }
  return s;
}

int64_t MaxTiledVw(const MatMulSpec& s) {
  const Layout l = LayoutOf(s);
  return std::max(l.a_vw, l.b_vw);
}

std::vector<ScheduleConfig> Enumerate(const Graph& g, const GpuTarget&) {
  absl::StatusOr<MatMulSpec> s = AnalyzeGpuMatMul(g);
  if (!s.ok()) return {};
  std::vector<ScheduleConfig> out;
  for (const GemmTile& t : EnumerateGemmTiles(ShapeOf(*s), MaxTiledVw(*s))) {
    ScheduleConfig c;
    SetGemmTile(t, &c);
    out.push_back(c);
  }
  for (const ScheduleConfig& c : DotGemvPoints(*s)) out.push_back(c);
  for (const ScheduleConfig& c : ColumnGemvPoints(*s)) out.push_back(c);
  return out;
}

// M = 1: a GEMV kernel sized to make kDefaultGpuSms blocks where the
// columns allow. The dot form: a warp per column (512 contiguous bytes of a
// row of B per step at vw = 4; 8 lanes when K is that short), 256 threads
// per block, 128 when 256 leave SMs idle (a 1000-class head: 125 blocks of
// 256, 250 of 128). The column form: 8 slices of K, the widest columns per
// thread that still make kDefaultGpuSms blocks. Otherwise the tiled GEMM's
// default (gemm_tiling.h).
ScheduleConfig Default(const Graph& g, const GpuTarget& target) {
  absl::StatusOr<MatMulSpec> s = AnalyzeGpuMatMul(g);
  if (!s.ok()) return {};
  const int64_t batches = s->num_batches();
  ScheduleConfig c;
  if (DotGemvApplies(*s)) {
    // A K shorter than a warp's vectors leaves lanes idle: fewer lanes per column.
    const int64_t vw = DotVw(*s);
    const int64_t gw = s->k <= 8 * vw ? 8 : 32;
    const int64_t bt = batches * CeilDiv(s->n, 256 / gw) >= kDefaultGpuSms ? 256 : 128;
    c.Set("gv", 2);
    c.Set("bt", bt);
    c.Set("gw", gw);
    c.Set("gc", 1);
    c.Set("vw", vw);
  } else if (ColumnGemvApplies(*s)) {
    int64_t vw = ColumnVw(*s);
    while (vw > 1 && batches * CeilDiv(s->n, 32 * vw) < kDefaultGpuSms) vw /= 2;
    c.Set("gv", 1);
    c.Set("bt", 256);
    c.Set("ks", 8);
    c.Set("vw", vw);
  } else {
    SetGemmTile(DefaultGemmTile(ShapeOf(*s), MaxTiledVw(*s)), &c);
  }
  std::vector<ScheduleConfig> space = Enumerate(g, target);
  return std::find(space.begin(), space.end(), c) != space.end() ? c : space.front();
}

absl::Status Validate(const Graph& g, const ScheduleConfig& c, const GpuTarget&) {
  ASSIGN_OR_RETURN(MatMulSpec s, AnalyzeGpuMatMul(g));
  const int64_t gv = c.Get("gv", 0);
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("schedule ", c.ToString(), ": ", why, " (", What(s), ")"));
  };
  auto pow2_upto = [](int64_t v, int64_t hi) { return v >= 1 && v <= hi && (v & (v - 1)) == 0; };
  if (gv == 2) {
    RETURN_IF_ERROR(ValidateGpuKnobs(g, c, {"gv", "bt", "gw", "gc", "vw"}));
    if (!DotGemvApplies(s)) return bad("gv=2 needs one row of A and B's K contiguous (Gemm transB=1)");
    const int64_t gw = c.Get("gw", 32), gc = c.Get("gc", 1), vw = c.Get("vw", 1);
    if (gw < 8 || !pow2_upto(gw, 32)) return bad(absl::StrCat("knob gw=", gw, " is not 8, 16 or 32"));
    if (!pow2_upto(gc, 4)) return bad(absl::StrCat("knob gc=", gc, " is not 1, 2 or 4"));
    if (!pow2_upto(vw, DotVw(s))) {
      return bad(absl::StrCat("knob vw=", vw, " is not a power of two up to ", DotVw(s),
                              " (what K and the batch strides allow)"));
    }
    return absl::OkStatus();
  }
  if (gv == 1) {
    RETURN_IF_ERROR(ValidateGpuKnobs(g, c, {"gv", "bt", "ks", "vw"}));
    if (!ColumnGemvApplies(s)) return bad("gv=1 needs one row of A and B's N contiguous");
    const int64_t bt = c.Get("bt", 256), ks = c.Get("ks", 1), vw = c.Get("vw", 1);
    if (!pow2_upto(ks, 8) || ks == 2 || bt / ks < 16) {
      return bad(absl::StrCat("knob ks=", ks, " is not 1, 4 or 8 leaving 16 threads or more per slice"));
    }
    if (!pow2_upto(vw, ColumnVw(s))) {
      return bad(absl::StrCat("knob vw=", vw, " is not a power of two up to ", ColumnVw(s),
                              " (what N and the batch strides allow)"));
    }
    return absl::OkStatus();
  }
  if (gv != 0) return bad(absl::StrCat("knob gv=", gv, " is not 1 or 2"));
  std::vector<std::string> known = GemmKnobs();
  known.push_back("gv");  // gv=0: the tiled kernel
  RETURN_IF_ERROR(ValidateGpuKnobs(g, c, known));
  return CheckGemmTile(GemmTileOf(c, MaxTiledVw(s)), MaxTiledVw(s), absl::StrCat("schedule ", c.ToString(), " of ",
                                                                                 What(s)));
}

// ---- lowering --------------------------------------------------------------------

class MatMulKernels {
 public:
  MatMulKernels(const Graph& g, const MatMulSpec& s) : g_(g), s_(s), ge_(g) {
    a_ = ge_.args()[s.a_arg];
    b_ = ge_.args()[s.b_arg];
  }

  absl::StatusOr<LoopFunc> Lower(const ScheduleConfig& c) {
    Stmt body;
    const int64_t gv = c.Get("gv", 0);
    if (gv == 2) {
      ASSIGN_OR_RETURN(body, DotGemv(c.Get("bt", 256), c.Get("gw", 32), c.Get("gc", 1), c.Get("vw", 1)));
    } else if (gv == 1) {
      ASSIGN_OR_RETURN(body, ColumnGemv(c.Get("bt", 256), c.Get("ks", 1), c.Get("vw", 1)));
    } else {
      ASSIGN_OR_RETURN(body, TiledGemmKernel(Problem(), GemmTileOf(c, MaxTiledVw(s_))));
    }
    LoopFunc f{"matmul", ge_.args(), body};
    RETURN_IF_ERROR(Verify(f));
    return f;
  }

 private:
  // Offsets of batch `batch`'s A and B.
  Expr AOffset(const Expr& batch) const { return Offset(batch, s_.a_batch_strides); }
  Expr BOffset(const Expr& batch) const { return Offset(batch, s_.b_batch_strides); }
  Expr Offset(const Expr& batch, const std::vector<int64_t>& strides) const {
    std::vector<Expr> idx = MatMulBatchIndex(s_, batch);
    Expr off = I(0);
    for (size_t d = 0; d < idx.size(); ++d) {
      if (strides[d] != 0) off = Add(off, Mul(idx[d], I(strides[d])));
    }
    return Simplify(off);
  }
  Expr AAt(const Expr& batch, const Expr& m, const Expr& k) const {
    return Load(a_, Add(Add(AOffset(batch), Mul(m, I(s_.a_stride_m))), Mul(k, I(s_.a_stride_k))));
  }
  Expr BAt(const Expr& batch, const Expr& k, const Expr& n) const {
    return Load(b_, Add(Add(BOffset(batch), Mul(k, I(s_.b_stride_k))), Mul(n, I(s_.b_stride_n))));
  }

  // Every output at (batch, row, col) from the product v.
  absl::StatusOr<Stmt> Stores(const Expr& batch, const Expr& row, const Expr& col, const Expr& v) {
    Expr out_idx = Add(Mul(Add(Mul(batch, I(s_.m)), row), I(s_.n)), col);
    return MatMulOutputStores(g_, s_, ge_, MatMulBatchIndex(s_, batch), v, row, col, out_idx);
  }

  GemmProblem Problem() {
    const Layout l = LayoutOf(s_);
    GemmProblem p;
    p.shape = ShapeOf(s_);
    p.a.k_contiguous = l.a_k_contiguous;
    p.a.max_vw = l.a_vw;
    p.a.at = [this](const Expr& batch, const Expr& m, const Expr& k) {
      return GemmAccess{a_, Add(Add(AOffset(batch), Mul(m, I(s_.a_stride_m))), Mul(k, I(s_.a_stride_k))), nullptr};
    };
    p.b.k_contiguous = l.b_k_contiguous;
    p.b.max_vw = l.b_vw;
    p.b.at = [this](const Expr& batch, const Expr& n, const Expr& k) {
      return GemmAccess{b_, Add(Add(BOffset(batch), Mul(k, I(s_.b_stride_k))), Mul(n, I(s_.b_stride_n))), nullptr};
    };
    p.store = [this](const Expr& batch, const Expr& row, const Expr& col, const Expr& v) {
      return Stores(batch, row, col, v);
    };
    return p;
  }

  // gv=2: groups of gw lanes, gc columns each (see lower_matmul.h).
  absl::StatusOr<Stmt> DotGemv(int64_t bt, int64_t gw, int64_t gc, int64_t vw) {
    const int64_t groups = bt / gw, per_block = groups * gc;
    const int64_t col_blocks = CeilDiv(s_.n, per_block);
    const int64_t step = gw * vw;
    Buffer acc = MakeBuffer("acc", {gc}, BufferRole::kLocal);
    Buffer part = MakeBuffer("lanes", {gc * vw}, BufferRole::kTemp);
    Expr j = Var("j"), l = Var("l");
    Expr col = Add(Var("nb"), j);
    const bool col_tail = s_.n % per_block != 0;
    auto lets = [&](Stmt body) {
      return LetStmt("lane", Mod(Var("tid"), I(gw)),
                     LetStmt("nb", Add(Var("n0"), Mul(Div(Var("tid"), I(gw)), I(gc))), std::move(body)));
    };
    auto each_col = [&](Stmt body) {
      if (col_tail) body = IfThen(Lt(col, I(s_.n)), body);
      return For("j", I(gc), body, ForKind::kUnrolled);
    };
    auto lanes = [&](Stmt body) { return For("l", I(vw), std::move(body), vw > 1 ? ForKind::kVectorized : ForKind::kUnrolled); };
    Expr pi = Add(Mul(j, I(vw)), l);
    Expr k = Add(Var("k"), l);
    Expr mac = Call("fma", {AAt(Var("batch"), I(0), k), BAt(Var("batch"), k, col), Load(part, pi)});
    Stmt step_body = each_col(lanes(Store(part, pi, mac)));
    if (s_.k % step != 0) step_body = IfThen(Lt(Var("k"), I(s_.k)), step_body);
    std::vector<Stmt> walk = {For("j", I(gc), lanes(Store(part, pi, FloatImm(0))), ForKind::kUnrolled)};
    if (s_.k > 0) {
      walk.push_back(For("kc", I(CeilDiv(s_.k, step)),
                         LetStmt("k", Add(Mul(Var("kc"), I(step)), Mul(Var("lane"), I(vw))), step_body)));
    }
    Expr sum = Load(part, Mul(j, I(vw)));
    for (int64_t v = 1; v < vw; ++v) sum = Add(sum, Load(part, Add(Mul(j, I(vw)), I(v))));
    walk.push_back(For("j", I(gc), Store(acc, j, sum), ForKind::kUnrolled));
    Stmt accumulate = For("tid", I(bt), lets(Allocate(part, Block(walk))), ForKind::kGpuThread);
    ASSIGN_OR_RETURN(Stmt st, Stores(Var("batch"), I(0), col, Load(acc, j)));
    Stmt store = For("tid", I(bt), lets(IfThen(Eq(Var("lane"), I(0)), each_col(st))), ForKind::kGpuThread);
    Stmt body = Allocate(acc, Block({accumulate, WarpReduce(acc, "sum", gw), store}));
    body = LetStmt("batch", Div(Var("blk"), I(col_blocks)),
                   LetStmt("n0", Mul(Mod(Var("blk"), I(col_blocks)), I(per_block)), body));
    return For("blk", I(s_.num_batches() * col_blocks), body, ForKind::kGpuBlock);
  }

  // gv=1: ct = bt / ks threads across ct * vw columns, ks slices of K.
  absl::StatusOr<Stmt> ColumnGemv(int64_t bt, int64_t ks, int64_t vw) {
    const int64_t ct = bt / ks, per_block = ct * vw;
    const int64_t col_blocks = CeilDiv(s_.n, per_block);
    Buffer acc = MakeBuffer("acc", {vw}, BufferRole::kTemp);
    Buffer sums = ks > 1 ? MakeBuffer("slice_sums", {ks * per_block}, BufferRole::kShared) : nullptr;
    Expr l = Var("l");
    Expr col = Add(Var("col0"), l);
    auto lets = [&](Stmt body) {
      body = LetStmt("col0", Add(Var("n0"), Mul(Mod(Var("tid"), I(ct)), I(vw))), std::move(body));
      return ks > 1 ? LetStmt("slice", Div(Var("tid"), I(ct)), body) : body;
    };
    auto lanes = [&](Stmt body) { return For("l", I(vw), std::move(body), vw > 1 ? ForKind::kVectorized : ForKind::kUnrolled); };
    // vw divides N (ColumnVw): a vector of columns is wholly inside or outside.
    Expr inside = s_.n % per_block != 0 ? Lt(Var("col0"), I(s_.n)) : nullptr;
    auto guard = [&](Stmt st) { return inside != nullptr ? IfThen(inside, st) : st; };
    Expr k = ks > 1 ? Add(Mul(Var("kc"), I(ks)), Var("slice")) : Var("kc");
    Stmt mac = lanes(Store(acc, l, Call("fma", {AAt(Var("batch"), I(0), Var("k")), BAt(Var("batch"), Var("k"), col),
                                                Load(acc, l)})));
    if (s_.k % ks != 0) mac = IfThen(Lt(Var("k"), I(s_.k)), mac);
    std::vector<Stmt> walk = {lanes(Store(acc, l, FloatImm(0)))};
    if (s_.k > 0) walk.push_back(guard(For("kc", I(CeilDiv(s_.k, ks)), LetStmt("k", k, mac))));
    std::vector<Stmt> loops;
    if (ks == 1) {
      ASSIGN_OR_RETURN(Stmt st, Stores(Var("batch"), I(0), col, Load(acc, l)));
      walk.push_back(guard(lanes(st)));
      loops.push_back(For("tid", I(bt), lets(Allocate(acc, Block(walk))), ForKind::kGpuThread));
    } else {
      Expr at = Add(Add(Mul(Var("slice"), I(per_block)), Mul(Mod(Var("tid"), I(ct)), I(vw))), l);
      walk.push_back(lanes(Store(sums, at, Load(acc, l))));
      loops.push_back(For("tid", I(bt), lets(Allocate(acc, Block(walk))), ForKind::kGpuThread));
      Expr total = Load(sums, Add(Mul(Mod(Var("tid"), I(ct)), I(vw)), l));
      for (int64_t sl = 1; sl < ks; ++sl) {
        total = Add(total, Load(sums, Add(Add(I(sl * per_block), Mul(Mod(Var("tid"), I(ct)), I(vw))), l)));
      }
      ASSIGN_OR_RETURN(Stmt st, Stores(Var("batch"), I(0), col, total));
      loops.push_back(
          For("tid", I(bt), lets(IfThen(Eq(Var("slice"), I(0)), guard(lanes(st)))), ForKind::kGpuThread));
    }
    Stmt body = Block(loops);
    if (sums != nullptr) body = Allocate(sums, body);
    body = LetStmt("batch", Div(Var("blk"), I(col_blocks)),
                   LetStmt("n0", Mul(Mod(Var("blk"), I(col_blocks)), I(per_block)), body));
    return For("blk", I(s_.num_batches() * col_blocks), body, ForKind::kGpuBlock);
  }

  const Graph& g_;
  const MatMulSpec& s_;
  GraphExpr ge_;
  Buffer a_, b_;
};

absl::StatusOr<LoopFunc> Lower(const Graph& g, const ScheduleConfig& c, const GpuTarget& target) {
  ASSIGN_OR_RETURN(MatMulSpec s, AnalyzeGpuMatMul(g));
  RETURN_IF_ERROR(Validate(g, c, target));
  if (s.num_batches() == 0 || s.m == 0 || s.n == 0) {
    return absl::UnimplementedError(absl::StrCat(What(s), ": empty output"));
  }
  MatMulKernels k(g, s);
  return k.Lower(c);
}

}  // namespace

GpuWorkloadLowering GpuMatMulLowering() {
  return GpuWorkloadLowering{"matmul", Enumerate, Default, Validate, Lower};
}

}  // namespace kiln::loop_ir::gpu
