// EmulateOnCpu: GPU loop IR -> CPU loop IR of the same meaning.
#include "compiler_core/codegen/loop_ir/gpu_emulation.h"

#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compiler_core/codegen/loop_ir/verifier.h"

namespace kiln::loop_ir {
namespace {

class Emulator {
 public:
  explicit Emulator(int64_t threads) : threads_(threads) {}

  absl::StatusOr<Stmt> Rewrite(const Stmt& s) {
    switch (s->kind) {
      case StmtKind::kFor: {
        ForKind kind = s->for_kind;
        std::string saved = thread_var_;
        if (kind == ForKind::kGpuBlock) kind = ForKind::kParallel;
        if (kind == ForKind::kGpuThread) {
          kind = ForKind::kSerial;
          thread_var_ = s->var;
        }
        ASSIGN_OR_RETURN(Stmt body, Rewrite(s->body[0]));
        thread_var_ = saved;
        return For(s->var, s->extent, body, kind);
      }
      case StmtKind::kStore: {
        ASSIGN_OR_RETURN(Buffer b, Mapped(s->buffer));
        return Store(b, LocalIndex(s->buffer, Expr(RewriteExpr(s->index))), RewriteExpr(s->value));
      }
      case StmtKind::kLet: {
        ASSIGN_OR_RETURN(Stmt body, Rewrite(s->body[0]));
        return LetStmt(s->var, RewriteExpr(s->value), body);
      }
      case StmtKind::kIf: {
        ASSIGN_OR_RETURN(Stmt then_case, Rewrite(s->body[0]));
        Stmt else_case;
        if (s->body.size() > 1 && s->body[1] != nullptr) {
          ASSIGN_OR_RETURN(else_case, Rewrite(s->body[1]));
        }
        return IfThen(RewriteExpr(s->value), then_case, else_case);
      }
      case StmtKind::kBlock: {
        std::vector<Stmt> body;
        for (const Stmt& c : s->body) {
          ASSIGN_OR_RETURN(Stmt r, Rewrite(c));
          body.push_back(r);
        }
        auto n = std::make_shared<StmtNode>(*s);
        n->body = std::move(body);
        return Stmt(n);
      }
      case StmtKind::kAllocate: return RewriteAllocate(s);
      case StmtKind::kWarpReduce: return RewriteWarpReduce(s);
      case StmtKind::kFence: return s;
    }
    return absl::InvalidArgumentError("unknown statement");
  }

 private:
  // Shared and local buffers become temps (a local one with a slot per
  // thread), filled with the poison value first.
  absl::StatusOr<Stmt> RewriteAllocate(const Stmt& s) {
    const Buffer& b = s->buffer;
    if (b->role != BufferRole::kShared && b->role != BufferRole::kLocal) {
      ASSIGN_OR_RETURN(Stmt body, Rewrite(s->body[0]));
      return Allocate(b, body);
    }
    std::vector<int64_t> shape = {b->role == BufferRole::kLocal ? b->num_elements() * threads_ : b->num_elements()};
    Buffer temp = MakeBuffer(absl::StrCat(b->name, b->role == BufferRole::kLocal ? "_per_thread" : "_shared"), shape,
                             BufferRole::kTemp, -1, b->dtype);
    mapped_[b.get()] = temp;
    ASSIGN_OR_RETURN(Stmt body, Rewrite(s->body[0]));
    mapped_.erase(b.get());
    const std::string i = absl::StrCat("poison_", b->name);
    Stmt fill = For(i, IntImm(shape[0]), Store(temp, Var(i), Poison(b->dtype)));
    return Allocate(temp, Block({fill, body}));
  }

  static Expr Poison(ScalarType t) {
    if (IsFloat(t)) return Const(t, std::nan(""));
    if (t == ScalarType::kBool) return IntConst(t, 1);
    return IntConst(t, static_cast<int64_t>(0x5A5A5A5A5A5A5A5Aull));
  }

  // for each group of `width` threads, for each element: fold, then write
  // the result to every thread of the group.
  absl::StatusOr<Stmt> RewriteWarpReduce(const Stmt& s) {
    const Buffer& b = s->buffer;
    ASSIGN_OR_RETURN(Buffer temp, Mapped(b));
    int64_t width = 0;
    AsConst(s->extent, &width);
    const int64_t n = b->num_elements();
    const std::string tag = absl::StrCat(b->name, "_", serial_++);
    Expr g = Var("wr_g_" + tag), j = Var("wr_j_" + tag), l = Var("wr_l_" + tag);
    auto at = [&](const Expr& lane) { return Add(Mul(Add(Mul(g, IntImm(width)), lane), IntImm(n)), j); };
    Buffer acc = MakeBuffer("wr_acc_" + tag, {1}, BufferRole::kTemp, -1, b->dtype);
    Expr a = Load(acc, IntImm(0)), x = Load(temp, at(l));
    Expr combined;
    const bool fp = IsFloat(b->dtype);
    if (s->var == "sum") combined = Add(a, x);
    if (s->var == "max") combined = fp ? Call("fmax", {a, x}, b->dtype) : Max(a, x);
    if (s->var == "min") combined = fp ? Call("fmin", {a, x}, b->dtype) : Min(a, x);
    if (combined == nullptr) return absl::InvalidArgumentError(absl::StrCat("warp_reduce ", s->var));
    Stmt fold = Block({Store(acc, IntImm(0), Load(temp, at(IntImm(0)))),
                       For(l->name, IntImm(width - 1),
                           LetStmt(l->name + "_", Add(l, IntImm(1)),
                                   Store(acc, IntImm(0), Substitute1(combined, l->name, Var(l->name + "_"))))),
                       For(l->name, IntImm(width), Store(temp, at(l), Load(acc, IntImm(0))))});
    return For(g->name, IntImm(threads_ / width), For(j->name, IntImm(n), Allocate(acc, fold)));
  }

  // `e` with the variable `name` replaced (only the fold's lane needs it).
  static Expr Substitute1(const Expr& e, const std::string& name, const Expr& value) {
    if (e->kind == ExprKind::kVar) return e->name == name ? value : e;
    if (e->args.empty()) return e;
    auto n = std::make_shared<ExprNode>(*e);
    for (auto& a : n->args) a = Substitute1(a, name, value);
    return n;
  }

  absl::StatusOr<Buffer> Mapped(const Buffer& b) {
    auto it = mapped_.find(b.get());
    return it == mapped_.end() ? b : it->second;
  }

  // A local buffer's element `index` of the current thread.
  Expr LocalIndex(const Buffer& b, const Expr& index) {
    if (b->role != BufferRole::kLocal) return index;
    return Add(Mul(Var(thread_var_), IntImm(b->num_elements())), index);
  }

  Expr RewriteExpr(const Expr& e) {
    if (e == nullptr) return e;
    if (e->kind == ExprKind::kLoad) {
      auto it = mapped_.find(e->buffer.get());
      Expr index = RewriteExpr(e->args[0]);
      if (it == mapped_.end()) return index == e->args[0] ? e : Load(e->buffer, index);
      return Load(it->second, LocalIndex(e->buffer, index));
    }
    if (e->args.empty()) return e;
    std::vector<Expr> args;
    bool changed = false;
    for (const Expr& a : e->args) {
      args.push_back(RewriteExpr(a));
      changed = changed || args.back() != a;
    }
    if (!changed) return e;
    auto n = std::make_shared<ExprNode>(*e);
    n->args = std::move(args);
    return n;
  }

  int64_t threads_;
  std::string thread_var_;
  std::map<const BufferNode*, Buffer> mapped_;
  int serial_ = 0;
};

}  // namespace

absl::StatusOr<LoopFunc> EmulateOnCpu(const LoopFunc& gpu) {
  RETURN_IF_ERROR(Verify(gpu));
  if (!IsGpuKernel(gpu)) return absl::InvalidArgumentError(absl::StrCat("kernel ", gpu.name, " is not a GPU kernel"));
  Emulator e(GpuLaunchOf(gpu).threads);
  ASSIGN_OR_RETURN(Stmt body, e.Rewrite(gpu.body));
  LoopFunc cpu{gpu.name + "_emulated", gpu.args, body};
  RETURN_IF_ERROR(Verify(cpu));
  return cpu;
}

}  // namespace kiln::loop_ir
