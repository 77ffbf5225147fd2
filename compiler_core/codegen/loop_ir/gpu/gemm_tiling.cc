// The tiled GEMM kernel of the GPU back end: its space, default and loop IR
// (see gemm_tiling.h).
#include "compiler_core/codegen/loop_ir/gpu/gemm_tiling.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compiler_core/codegen/loop_ir/lower_common.h"

namespace kiln::loop_ir::gpu {
namespace {

// Floats each shared tile row is padded by (see gemm_tiling.h).
constexpr int64_t kRowPad = 4;

Expr I(int64_t v) { return IntImm(v); }

bool IsPow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

// The register tiles of the space, by (tm, tn).
const std::vector<std::pair<int64_t, int64_t>>& RegisterTiles() {
  static const std::vector<std::pair<int64_t, int64_t>> tiles = {{2, 2}, {2, 4}, {4, 2}, {4, 4},
                                                                 {4, 8}, {8, 4}, {8, 8}};
  return tiles;
}

// Block tile extents 16..128 up to the first that covers `extent`.
std::vector<int64_t> BlockExtents(int64_t extent) {
  std::vector<int64_t> out;
  for (int64_t b : {16, 32, 64, 128}) {
    if (!out.empty() && out.back() >= extent) break;
    out.push_back(b);
  }
  return out;
}

// The lanes an operand's loads take at tile `t`.
int64_t OperandVw(const GemmOperand& op, const GemmTile& t) {
  int64_t vw = 1;
  while (vw * 2 <= std::min(t.vw, op.max_vw)) vw *= 2;
  return vw;
}

// for (var, 0, n) body: vectorized when n > 1.
Stmt Lanes(const std::string& var, int64_t n, Stmt body) {
  return For(var, I(n), std::move(body), n > 1 ? ForKind::kVectorized : ForKind::kUnrolled);
}

Stmt Unrolled(const std::string& var, int64_t n, Stmt body) { return For(var, I(n), std::move(body), ForKind::kUnrolled); }

Expr AndAll(const std::vector<Expr>& conds) {
  Expr out;
  for (const Expr& c : conds) {
    if (c != nullptr) out = out == nullptr ? c : And(out, c);
  }
  return out;
}

Stmt Guard(const Expr& cond, Stmt body, Stmt otherwise = nullptr) {
  return cond == nullptr ? body : IfThen(cond, std::move(body), std::move(otherwise));
}

class GemmKernelBuilder {
 public:
  GemmKernelBuilder(const GemmProblem& p, const GemmTile& t) : p_(p), s_(p.shape), t_(t) {
    per_slice_ = (t.bm / t.tm) * (t.bn / t.tn);
    threads_ = per_slice_ * t.sk;
    ks_ = t.bk * t.sk;
    rvw_ = std::min<int64_t>(4, t.tm);
    cvw_ = std::min<int64_t>(4, t.tn);
    a_tile_ = MakeBuffer("a_tile", {ks_ * (t.bm + kRowPad)}, BufferRole::kShared);
    b_tile_ = MakeBuffer("b_tile", {ks_ * (t.bn + kRowPad)}, BufferRole::kShared);
    acc_ = MakeBuffer("acc", {t.tm * t.tn}, BufferRole::kLocal);
    if (t.sk > 1) partial_ = MakeBuffer("partial", {(t.sk - 1) * t.bm * t.bn}, BufferRole::kShared);
  }

  absl::StatusOr<Stmt> Build() {
    const int64_t tiles_m = CeilDiv(s_.m, t_.bm), tiles_n = CeilDiv(s_.n, t_.bn);
    const int64_t blocks = s_.batches * tiles_m * tiles_n;
    std::vector<Stmt> body;
    body.push_back(ThreadLoop(Unrolled("ai", t_.tm * t_.tn, Store(acc_, Var("ai"), FloatImm(0)))));
    if (s_.k > 0) {
      Stmt step = Block({ThreadLoop(LoadTiles()), ThreadLoop(ThreadLets(Compute()))});
      body.push_back(For("kt", I(CeilDiv(s_.k, ks_)), LetStmt("k0", Mul(Var("kt"), I(ks_)), step)));
    }
    if (t_.sk > 1) {
      ASSIGN_OR_RETURN(Stmt keep, EachOutput(
                                      [&](const Out& o) -> absl::StatusOr<Stmt> {
                                        Expr at = Add(Add(Mul(Sub(Var("slice"), I(1)), I(t_.bm * t_.bn)),
                                                          Mul(o.row_local, I(t_.bn))),
                                                      o.col_local);
                                        return Store(partial_, at, Load(acc_, o.acc_index));
                                      },
                                      false));
      body.push_back(ThreadLoop(ThreadLets(IfThen(Gt(Var("slice"), I(0)), keep))));
    }
    ASSIGN_OR_RETURN(Stmt stores, EachOutput(
                                      [&](const Out& o) -> absl::StatusOr<Stmt> {
                                        Expr v = Load(acc_, o.acc_index);
                                        for (int64_t sl = 1; sl < t_.sk; ++sl) {
                                          Expr at = Add(Add(I((sl - 1) * t_.bm * t_.bn), Mul(o.row_local, I(t_.bn))),
                                                        o.col_local);
                                          v = Add(v, Load(partial_, at));
                                        }
                                        return p_.store(Var("batch"), o.row, o.col, v);
                                      },
                                      true));
    if (t_.sk > 1) stores = IfThen(Eq(Var("slice"), I(0)), stores);
    body.push_back(ThreadLoop(ThreadLets(stores)));
    Stmt kernel = Block(std::move(body));
    if (partial_ != nullptr) kernel = Allocate(partial_, kernel);
    kernel = Allocate(a_tile_, Allocate(b_tile_, Allocate(acc_, kernel)));
    Expr blk = Var("blk");
    Expr tile = Mod(blk, I(tiles_m * tiles_n));
    kernel = LetStmt("batch", Div(blk, I(tiles_m * tiles_n)),
                     LetStmt("m0", Mul(Div(tile, I(tiles_n)), I(t_.bm)),
                             LetStmt("n0", Mul(Mod(tile, I(tiles_n)), I(t_.bn)), kernel)));
    return For("blk", I(blocks), kernel, ForKind::kGpuBlock);
  }

 private:
  // One output element of a thread: its row and column in C (col
  // lane-varying), in the tile, and its accumulator.
  struct Out {
    Expr row, col, row_local, col_local, acc_index;
  };

  Stmt ThreadLoop(Stmt body) const { return For("tid", I(threads_), std::move(body), ForKind::kGpuThread); }

  // The thread's slice of K, and its row (ty) and column (tx) in the grid
  // of register tiles.
  Stmt ThreadLets(Stmt body) const {
    const int64_t cols = t_.bn / t_.tn;
    Expr in_slice = t_.sk > 1 ? Mod(Var("tid"), I(per_slice_)) : Var("tid");
    body = LetStmt("ty", Div(in_slice, I(cols)), LetStmt("tx", Mod(Var("tid"), I(cols)), std::move(body)));
    if (t_.sk > 1) body = LetStmt("slice", Div(Var("tid"), I(per_slice_)), body);
    return body;
  }

  // The thread's local row of register row i = g*rvw + l, column likewise.
  Expr RowLocal(const Expr& g, const Expr& l) const {
    return Add(Add(Mul(g, I(t_.bm / (t_.tm / rvw_))), Mul(Var("ty"), I(rvw_))), l);
  }
  Expr ColLocal(const Expr& g, const Expr& l) const {
    return Add(Add(Mul(g, I(t_.bn / (t_.tn / cvw_))), Mul(Var("tx"), I(cvw_))), l);
  }

  // Chunks of vw elements along an operand's contiguous axis: as many as
  // its rows_tile x ks slice holds.
  int64_t Chunks(const GemmOperand& op, int64_t rows_tile) const { return rows_tile * ks_ / OperandVw(op, t_); }

  // Chunk `c` (an expression < Chunks) of operand `op`'s rows_tile x ks
  // slice at (row0, k0) into `tile` (k-major, rows padded), zero outside the
  // matrix.
  Stmt LoadChunk(const GemmOperand& op, const Buffer& tile, int64_t rows_tile, int64_t rows_total, const Expr& row0,
                 const Expr& c, const std::string& tag) const {
    const int64_t vw = OperandVw(op, t_);
    const int64_t pitch = rows_tile + kRowPad;
    const std::string r = "r" + tag, kk = "k" + tag, lane = "l" + tag;
    Expr rv = Var(r), kv = Var(kk), lv = Var(lane);
    Expr chunk_r, chunk_k;
    if (op.k_contiguous) {
      chunk_r = Div(c, I(ks_ / vw));
      chunk_k = Mul(Mod(c, I(ks_ / vw)), I(vw));
    } else {
      chunk_k = Div(c, I(rows_tile / vw));
      chunk_r = Mul(Mod(c, I(rows_tile / vw)), I(vw));
    }
    Expr er = op.k_contiguous ? rv : Add(rv, lv);
    Expr ek = op.k_contiguous ? Add(kv, lv) : kv;
    GemmAccess at = op.at(Var("batch"), Add(row0, er), Add(Var("k0"), ek));
    Expr shared_at = Add(Mul(ek, I(pitch)), er);
    Stmt load = Store(tile, shared_at, Load(at.buffer, at.index));
    if (at.inside != nullptr) load = IfThen(at.inside, load, Store(tile, shared_at, FloatImm(0)));
    // A chunk lies wholly inside or outside the matrix (vw divides the
    // contiguous extent): one test of its first element.
    Expr in_rows = rows_total % rows_tile != 0 ? Lt(Add(row0, rv), I(rows_total)) : nullptr;
    Expr in_k = s_.k % ks_ != 0 ? Lt(Add(Var("k0"), kv), I(s_.k)) : nullptr;
    Stmt body = Guard(AndAll({in_rows, in_k}), Lanes(lane, vw, load), Lanes(lane, vw, Store(tile, shared_at, FloatImm(0))));
    return LetStmt(r, chunk_r, LetStmt(kk, chunk_k, body));
  }

  // Both slices in one space of chunks, A's then B's, spread over the
  // threads (consecutive threads, consecutive chunks): a 64 x 64 tile's
  // 128 + 128 vectors at bk = 8 take one per thread of 256.
  Stmt LoadTiles() const {
    const int64_t ta = Chunks(p_.a, t_.bm), tb = Chunks(p_.b, t_.bn), total = ta + tb;
    std::vector<Stmt> out;
    for (int64_t it = 0; it * threads_ < total; ++it) {
      const int64_t lo = it * threads_, hi = lo + threads_;
      const std::string c = absl::StrCat("c", it);
      Expr cv = Var(c);
      Stmt a = LoadChunk(p_.a, a_tile_, t_.bm, s_.m, Var("m0"), cv, "a");
      Stmt b = LoadChunk(p_.b, b_tile_, t_.bn, s_.n, Var("n0"), Sub(cv, I(ta)), "b");
      if (hi > total) b = IfThen(Lt(cv, I(total)), b);
      Stmt st = hi <= ta ? a : lo >= ta ? b : IfThen(Lt(cv, I(ta)), a, b);
      out.push_back(LetStmt(c, Add(I(lo), Var("tid")), st));
    }
    return Block(std::move(out));
  }

  // Per K row of the thread's slice: tm values of a_tile and tn of b_tile
  // into registers, then the tm x tn multiply-adds.
  Stmt Compute() const {
    Buffer fa = MakeBuffer("a_frag", {t_.tm}, BufferRole::kTemp);
    Buffer fb = MakeBuffer("b_frag", {t_.tn}, BufferRole::kTemp);
    Expr kr = t_.sk > 1 ? Add(Mul(Var("slice"), I(t_.bk)), Var("kk")) : Var("kk");
    Expr g = Var("g"), l = Var("l"), i = Var("i");
    Stmt load_a = Unrolled("g", t_.tm / rvw_,
                           Lanes("l", rvw_, Store(fa, Add(Mul(g, I(rvw_)), l),
                                                  Load(a_tile_, Add(Mul(Var("kr"), I(t_.bm + kRowPad)), RowLocal(g, l))))));
    Stmt load_b = Unrolled("g", t_.tn / cvw_,
                           Lanes("l", cvw_, Store(fb, Add(Mul(g, I(cvw_)), l),
                                                  Load(b_tile_, Add(Mul(Var("kr"), I(t_.bn + kRowPad)), ColLocal(g, l))))));
    Expr j = Add(Mul(g, I(cvw_)), l);
    Expr ai = Add(Mul(i, I(t_.tn)), j);
    Stmt fma = Unrolled("i", t_.tm,
                        Unrolled("g", t_.tn / cvw_,
                                 Lanes("l", cvw_, Store(acc_, ai, Call("fma", {Load(fa, i), Load(fb, j), Load(acc_, ai)})))));
    Stmt per_k = LetStmt("kr", kr, Block({load_a, load_b, fma}));
    return Allocate(fa, Allocate(fb, Unrolled("kk", t_.bk, per_k)));
  }

  // body(out) over the thread's outputs inside C: rows one by one, columns
  // as vectors of cvw (guarded past M and N when `guard`).
  absl::StatusOr<Stmt> EachOutput(const std::function<absl::StatusOr<Stmt>(const Out&)>& body, bool guard) const {
    Expr gm = Var("gm"), lm = Var("lm"), gn = Var("gn"), ln = Var("ln");
    Out o;
    o.row_local = RowLocal(gm, lm);
    o.col_local = ColLocal(gn, ln);
    o.row = Var("row");
    Expr col0 = Var("col0");
    o.col = Add(col0, ln);
    o.acc_index = Add(Mul(Add(Mul(gm, I(rvw_)), lm), I(t_.tn)), Add(Mul(gn, I(cvw_)), ln));
    ASSIGN_OR_RETURN(Stmt st, body(o));
    const bool n_tail = guard && s_.n % t_.bn != 0;
    if (n_tail && s_.n % cvw_ != 0) st = IfThen(Lt(o.col, I(s_.n)), st);
    Stmt cols = Lanes("ln", cvw_, st);
    if (n_tail && s_.n % cvw_ == 0) cols = IfThen(Lt(col0, I(s_.n)), cols);
    cols = Unrolled("gn", t_.tn / cvw_, LetStmt("col0", Add(Var("n0"), ColLocal(gn, I(0))), cols));
    if (guard && s_.m % t_.bm != 0) cols = IfThen(Lt(o.row, I(s_.m)), cols);
    return Unrolled("gm", t_.tm / rvw_,
                    Unrolled("lm", rvw_, LetStmt("row", Add(Var("m0"), RowLocal(gm, lm)), cols)));
  }

  const GemmProblem& p_;
  const GemmShape& s_;
  const GemmTile t_;
  int64_t per_slice_ = 1, threads_ = 1, ks_ = 1, rvw_ = 1, cvw_ = 1;
  Buffer a_tile_, b_tile_, acc_, partial_;
};

}  // namespace

int64_t GemmTile::shared_bytes() const {
  const int64_t floats = sk * bk * (bm + bn + 2 * kRowPad) + (sk - 1) * bm * bn;
  return floats * 4;
}

int64_t GemmTile::blocks(const GemmShape& s) const { return s.batches * CeilDiv(s.m, bm) * CeilDiv(s.n, bn); }

const std::vector<std::string>& GemmKnobs() {
  static const std::vector<std::string> knobs = {"bm", "bn", "bk", "tm", "tn", "sk", "vw"};
  return knobs;
}

GemmTile GemmTileOf(const ScheduleConfig& c, int64_t max_vw) {
  GemmTile d;
  const int64_t vw = std::min<int64_t>(4, std::max<int64_t>(1, max_vw));
  return GemmTile{c.Get("bm", d.bm), c.Get("bn", d.bn), c.Get("bk", d.bk), c.Get("tm", d.tm),
                  c.Get("tn", d.tn), c.Get("sk", d.sk), c.Get("vw", vw)};
}

void SetGemmTile(const GemmTile& t, ScheduleConfig* c) {
  c->Set("bm", t.bm);
  c->Set("bn", t.bn);
  c->Set("bk", t.bk);
  c->Set("tm", t.tm);
  c->Set("tn", t.tn);
  c->Set("sk", t.sk);
  c->Set("vw", t.vw);
}

absl::Status CheckGemmTile(const GemmTile& t, int64_t max_vw, const std::string& what) {
  auto bad = [&](const std::string& knob, int64_t v, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": knob ", knob, "=", v, " ", why));
  };
  for (const auto& [knob, v] : std::vector<std::pair<std::string, int64_t>>{{"bm", t.bm}, {"bn", t.bn}}) {
    if (!IsPow2(v) || v < 16 || v > 128) return bad(knob, v, "is not 16, 32, 64 or 128");
  }
  if (!IsPow2(t.bk) || t.bk < 8 || t.bk > 32) return bad("bk", t.bk, "is not 8, 16 or 32");
  if (!IsPow2(t.tm) || t.tm > 8 || t.tm > t.bm) return bad("tm", t.tm, "is not a power of two up to min(8, bm)");
  if (!IsPow2(t.tn) || t.tn > 8 || t.tn > t.bn) return bad("tn", t.tn, "is not a power of two up to min(8, bn)");
  if (!IsPow2(t.sk) || t.sk > 8) return bad("sk", t.sk, "is not 1, 2, 4 or 8");
  if (!IsPow2(t.vw) || t.vw > 4 || t.vw > std::max<int64_t>(1, max_vw)) {
    return bad("vw", t.vw, absl::StrCat("is not a power of two up to ", std::max<int64_t>(1, max_vw),
                                        " (what the operands' layouts allow)"));
  }
  const int64_t threads = t.threads();
  if (threads % 32 != 0 || threads > kMaxGpuThreads) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": knobs bm/tm * bn/tn * sk make ", threads,
                                                   " threads per block, not a multiple of 32 up to ", kMaxGpuThreads));
  }
  if (t.shared_bytes() > kMaxGpuSharedBytes) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": knobs bm, bn, bk, sk need ", t.shared_bytes(),
                                                   " bytes of shared memory, more than ", kMaxGpuSharedBytes));
  }
  return absl::OkStatus();
}

std::vector<GemmTile> EnumerateGemmTiles(const GemmShape& s, int64_t max_vw) {
  const int64_t vw = std::min<int64_t>(4, std::max<int64_t>(1, max_vw));
  std::vector<GemmTile> out;
  for (int64_t bm : BlockExtents(s.m)) {
    for (int64_t bn : BlockExtents(s.n)) {
      for (const auto& [tm, tn] : RegisterTiles()) {
        if (tm > bm || tn > bn) continue;
        const int64_t per_slice = (bm / tm) * (bn / tn);
        if (per_slice < 32 || per_slice > 256) continue;
        for (int64_t bk : {8, 16}) {
          for (int64_t sk : {1, 2, 4}) {
            if (sk > 1 && (bm * bn > 64 * 64 || per_slice * sk > 512 || s.k < 2 * sk * bk)) continue;
            GemmTile t{bm, bn, bk, tm, tn, sk, vw};
            if (!CheckGemmTile(t, max_vw, "").ok()) continue;
            out.push_back(t);
          }
        }
      }
    }
  }
  return out;
}

GemmTile DefaultGemmTile(const GemmShape& s, int64_t max_vw) {
  // Per k a thread reads tm + tn floats of shared memory for tm * tn
  // multiply-adds: 8x8 keeps an SM's 128 FMA lanes fed by its 128 bytes per
  // clock of shared memory, 4x4 half of them, 2x2 a quarter. Larger tiles
  // also read A and B from memory fewer times; smaller ones make more blocks.
  struct Candidate {
    int64_t bm, bn, tm, tn;
  };
  static const std::vector<Candidate> candidates = {
      {128, 128, 8, 8}, {128, 64, 8, 4}, {64, 128, 4, 8}, {64, 64, 4, 4}, {64, 32, 4, 4}, {32, 64, 4, 4},
      {32, 32, 4, 4},   {16, 64, 2, 4},  {64, 16, 4, 2},  {16, 32, 2, 2}, {32, 16, 2, 2}, {16, 16, 2, 2}};
  const std::vector<int64_t> ms = BlockExtents(s.m), ns = BlockExtents(s.n);
  const int64_t vw = std::min<int64_t>(4, std::max<int64_t>(1, max_vw));
  GemmTile best;
  bool found = false;
  for (const Candidate& c : candidates) {
    // A tile larger than the first that covers the extent only computes padding.
    if (std::find(ms.begin(), ms.end(), c.bm) == ms.end() || std::find(ns.begin(), ns.end(), c.bn) == ns.end()) {
      continue;
    }
    GemmTile t{c.bm, c.bn, 8, c.tm, c.tn, 1, vw};
    if (!found) {
      best = t;
      found = true;
    } else if (best.blocks(s) < kDefaultGpuSms && t.blocks(s) > best.blocks(s)) {
      best = t;
    }
    if (best.blocks(s) >= kDefaultGpuSms) break;
  }
  // Fewer than 256 threads: slices of K give the block more warps to hide
  // the latency of its loads, while each slice still walks 4 steps or more.
  while (best.threads() * 2 <= 256 && best.sk < 4 && s.k >= 4 * best.sk * 2 * best.bk) {
    GemmTile wider = best;
    wider.sk *= 2;
    if (!CheckGemmTile(wider, max_vw, "").ok()) break;
    best = wider;
  }
  return best;
}

absl::StatusOr<Stmt> TiledGemmKernel(const GemmProblem& p, const GemmTile& t) {
  RETURN_IF_ERROR(CheckGemmTile(t, std::max(p.a.max_vw, p.b.max_vw), "tiled GEMM"));
  if (p.shape.batches < 1 || p.shape.m < 1 || p.shape.n < 1 || p.shape.k < 0) {
    return absl::InvalidArgumentError(absl::StrCat("tiled GEMM of an empty shape: ", p.shape.batches, " x ",
                                                   p.shape.m, " x ", p.shape.n, " x ", p.shape.k));
  }
  GemmKernelBuilder b(p, t);
  return b.Build();
}

}  // namespace kiln::loop_ir::gpu
