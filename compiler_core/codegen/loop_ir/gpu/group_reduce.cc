// Thread-loop sequences and group combines of block-level GPU code.
#include "compiler_core/codegen/loop_ir/gpu/group_reduce.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "compiler_core/codegen/loop_ir/substitute.h"

namespace kiln::loop_ir::gpu {

int64_t Pow2Ceil(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

ThreadLoops::ThreadLoops(int64_t bt, std::function<Stmt(Stmt)> prologue) : bt_(bt), prologue_(std::move(prologue)) {}

void ThreadLoops::Emit(Stmt s) {
  if (open_.empty()) {
    open_ = std::move(pending_);
    pending_.clear();
  }
  open_.push_back(std::move(s));
}

void ThreadLoops::Close() {
  if (open_.empty()) return;
  out_.push_back(For("tid", IntImm(bt_), prologue_(Block(open_)), ForKind::kGpuThread));
  open_.clear();
}

void ThreadLoops::Uniform(Stmt s) {
  Close();
  out_.push_back(std::move(s));
}

void ThreadLoops::StartNextWith(Stmt s) { pending_.push_back(std::move(s)); }

Stmt ThreadLoops::Finish() {
  Close();
  return Block(out_);
}

int64_t PartialsNeeded(const std::string& op, int64_t tr, int64_t bt) {
  if (tr <= 1) return 0;
  if (op == "prod") return bt;
  return tr > kWarpSize ? bt / kWarpSize : 0;
}

void CombineInGroups(ThreadLoops& tl, const Buffer& part, const std::string& op, int64_t tr, int64_t bt,
                     const Buffer& partials, const std::string& tag) {
  if (tr <= 1) return;
  Expr tid = Var("tid");
  int64_t per = 1;  // threads whose value one shared slot holds
  if (op != "prod") {
    tl.Uniform(WarpReduce(part, op, std::min(tr, kWarpSize)));
    if (tr <= kWarpSize) return;
    per = kWarpSize;
    tl.Emit(IfThen(Eq(Mod(tid, IntImm(per)), IntImm(0)),
                   Store(partials, Div(tid, IntImm(per)), Load(part, IntImm(0)))));
  } else {
    tl.Emit(Store(partials, tid, Load(part, IntImm(0))));
  }
  tl.Close();
  const int64_t n = tr / per;
  const bool fp = IsFloat(part->dtype);
  auto combine = [&](Expr a, Expr b) -> Expr {
    if (op == "sum") return Add(a, b);
    if (op == "prod") return Mul(a, b);
    if (op == "max") return fp ? Call("fmax", {a, b}, part->dtype) : Max(a, b);
    return fp ? Call("fmin", {a, b}, part->dtype) : Min(a, b);
  };
  Expr base = tr == bt ? IntImm(0) : Mul(Div(tid, IntImm(tr)), IntImm(n));
  const std::string w = tag + "w";
  Stmt rest =
      Store(part, IntImm(0), combine(Load(part, IntImm(0)), Load(partials, Add(Add(base, Var(w)), IntImm(1)))));
  rest = n == 2 ? Substitute(rest, w, IntImm(0)) : For(w, IntImm(n - 1), rest, ForKind::kUnrolled);
  tl.StartNextWith(Block({Store(part, IntImm(0), Load(partials, base)), rest}));
}

}  // namespace kiln::loop_ir::gpu
