// The loop-IR verifier (see verifier.h).
#include "compiler_core/codegen/loop_ir/verifier.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "compiler_core/codegen/loop_ir/printer.h"

namespace kiln::loop_ir {
namespace {

struct Interval {
  bool known = false;
  int64_t lo = 0, hi = 0;
};

class Verifier {
 public:
  explicit Verifier(const LoopFunc& f) : f_(f) {}

  absl::Status Run() {
    if (f_.body == nullptr) return Error("kernel has no body");
    std::set<std::string> names;
    for (size_t i = 0; i < f_.args.size(); ++i) {
      const Buffer& b = f_.args[i];
      if (b == nullptr) return Error(absl::StrCat("argument ", i, " is null"));
      if (b->role == BufferRole::kTemp) return Error(absl::StrCat("argument ", b->name, " is a temp buffer"));
      if (b->arg != static_cast<int>(i)) {
        return Error(absl::StrCat("argument ", b->name, " has arg index ", b->arg, ", expected ", i));
      }
      if (!names.insert(b->name).second) return Error(absl::StrCat("buffer ", b->name, " is declared twice"));
      buffers_.insert(b.get());
    }
    gpu_ = IsGpuKernel(f_);
    RETURN_IF_ERROR(VisitStmt(f_.body, /*top=*/true));
    if (gpu_) {
      GpuLaunch launch = GpuLaunchOf(f_);
      if (launch.threads > kMaxGpuThreads) {
        return Error(absl::StrCat("a block of ", launch.threads, " threads exceeds ", kMaxGpuThreads));
      }
      if (launch.shared_bytes > kMaxGpuSharedBytes) {
        return Error(absl::StrCat(launch.shared_bytes, " bytes of shared memory exceed ", kMaxGpuSharedBytes));
      }
      if (warp_reduce_ && launch.threads % 32 != 0) {
        return Error(absl::StrCat("warp_reduce in a block of ", launch.threads, " threads (not whole warps)"));
      }
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Error(const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat("loop ir of kernel ", f_.name, ": ", what));
  }

  absl::StatusOr<ScalarType> VisitExpr(const Expr& e) {
    if (e == nullptr) return Error("null expression");
    std::vector<ScalarType> at;
    for (const Expr& a : e->args) {
      auto t = VisitExpr(a);
      if (!t.ok()) return t.status();
      at.push_back(*t);
    }
    auto need = [&](size_t n) -> absl::Status {
      if (e->args.size() != n) return Error(absl::StrCat("expression ", Print(e), " has ", e->args.size(), " operands"));
      return absl::OkStatus();
    };
    switch (e->kind) {
      case ExprKind::kIntImm:
        if (IsFloat(e->type)) return Error(absl::StrCat("integer constant ", Print(e), " has a float type"));
        return e->type;
      case ExprKind::kFloatImm:
        if (!IsFloat(e->type)) return Error(absl::StrCat("float constant ", Print(e), " has a non-float type"));
        return e->type;
      case ExprKind::kVar: {
        auto it = vars_.find(e->name);
        if (it == vars_.end()) return Error(absl::StrCat("variable ", e->name, " is used before it is defined"));
        if (it->second != e->type) {
          return Error(absl::StrCat("variable ", e->name, " is used as ", ScalarTypeName(e->type), " but is ",
                                    ScalarTypeName(it->second)));
        }
        return e->type;
      }
      case ExprKind::kNot:
        if (auto s = need(1); !s.ok()) return s;
        if (at[0] != ScalarType::kBool) return Error(absl::StrCat("operand of ", Print(e), " is not bool"));
        return ScalarType::kBool;
      case ExprKind::kSelect:
        if (auto s = need(3); !s.ok()) return s;
        if (at[0] != ScalarType::kBool || at[1] != at[2]) {
          return Error(absl::StrCat("operand types of ", Print(e), " do not agree"));
        }
        return at[1];
      case ExprKind::kLoad: {
        if (auto s = need(1); !s.ok()) return s;
        if (at[0] != ScalarType::kI64) return Error(absl::StrCat("index of ", Print(e), " is not i64"));
        RETURN_IF_ERROR(CheckAccess(e->buffer, e->args[0], Print(e)));
        return e->buffer->dtype;
      }
      case ExprKind::kCast:
        if (auto s = need(1); !s.ok()) return s;
        return e->type;
      case ExprKind::kCall:
        if (!IsKnownCall(e->name, static_cast<int>(e->args.size()))) {
          return Error(absl::StrCat("unknown call ", e->name, "/", e->args.size()));
        }
        if (e->name == "ipow") {
          if (at[0] != e->type || !IsInteger(e->type) || at[1] != ScalarType::kI64) {
            return Error(absl::StrCat("operands of ", Print(e), " are not (integer base, i64 exponent)"));
          }
          return e->type;
        }
        for (ScalarType t : at) {
          if (t != e->type || (t != ScalarType::kF32 && t != ScalarType::kF64)) {
            return Error(absl::StrCat("operand of ", Print(e), " is not ", ScalarTypeName(e->type),
                                      " (calls take f32 or f64)"));
          }
        }
        return e->type;
      default:
        break;
    }
    if (auto s = need(2); !s.ok()) return s;
    if (at[0] != at[1]) return Error(absl::StrCat("operand types of ", Print(e), " do not agree"));
    if (e->kind == ExprKind::kAnd || e->kind == ExprKind::kOr) {
      if (at[0] != ScalarType::kBool) return Error(absl::StrCat("operands of ", Print(e), " are not bool"));
      return ScalarType::kBool;
    }
    if (at[0] == ScalarType::kBool && e->kind != ExprKind::kEq && e->kind != ExprKind::kNe) {
      return Error(absl::StrCat("operands of ", Print(e), " are bool"));
    }
    return IsCompare(e->kind) ? ScalarType::kBool : at[0];
  }


  absl::Status CheckAccess(const Buffer& b, const Expr& index, const std::string& what) {
    if (b == nullptr) return Error(absl::StrCat("access without a buffer: ", what));
    if (buffers_.count(b.get()) == 0) {
      return Error(absl::StrCat("buffer ", b->name, " is not an argument or an enclosing allocation in ", what));
    }
    if (gpu_ && !in_thread_) return Error(absl::StrCat(what, " is outside every gpu_thread loop"));
    if (guarded_ > 0) return absl::OkStatus();
    Interval r = Range(index);
    if (r.known && (r.lo < 0 || r.hi >= b->num_elements())) {
      return Error(absl::StrCat("index of ", what, " ranges over [", r.lo, ", ", r.hi, "] outside ", b->name,
                                " (", b->num_elements(), " elements)"));
    }
    return absl::OkStatus();
  }

  Interval Range(const Expr& e) {
    Interval r;
    switch (e->kind) {
      case ExprKind::kIntImm: return {true, e->int_value, e->int_value};
      case ExprKind::kVar: {
        auto it = ranges_.find(e->name);
        return it == ranges_.end() ? r : it->second;
      }
      case ExprKind::kMin: case ExprKind::kMax: case ExprKind::kAdd: case ExprKind::kSub:
      case ExprKind::kMul: case ExprKind::kDiv: case ExprKind::kMod: {
        Interval a = Range(e->args[0]), b = Range(e->args[1]);
        if (e->kind == ExprKind::kMod && b.known && b.lo == b.hi && b.lo > 0 && a.known && a.lo >= 0) {
          return {true, 0, std::min(a.hi, b.lo - 1)};
        }
        if (!a.known || !b.known) return r;
        switch (e->kind) {
          case ExprKind::kAdd: return {true, a.lo + b.lo, a.hi + b.hi};
          case ExprKind::kSub: return {true, a.lo - b.hi, a.hi - b.lo};
          case ExprKind::kMin: return {true, std::min(a.lo, b.lo), std::min(a.hi, b.hi)};
          case ExprKind::kMax: return {true, std::max(a.lo, b.lo), std::max(a.hi, b.hi)};
          case ExprKind::kMul: {
            int64_t c[4] = {a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi};
            return {true, *std::min_element(c, c + 4), *std::max_element(c, c + 4)};
          }
          case ExprKind::kDiv:
            if (b.lo == b.hi && b.lo > 0 && a.lo >= 0) return {true, a.lo / b.lo, a.hi / b.lo};
            return r;
          default: return r;
        }
      }
      case ExprKind::kSelect: {
        Interval a = Range(e->args[1]), b = Range(e->args[2]);
        if (!a.known || !b.known) return r;
        return {true, std::min(a.lo, b.lo), std::max(a.hi, b.hi)};
      }
      default: return r;
    }
  }

  absl::Status Define(const std::string& var, ScalarType t, Interval range) {
    if (var.empty()) return Error("a loop or let without a variable name");
    if (vars_.count(var) > 0) return Error(absl::StrCat("variable ", var, " is redefined in its own scope"));
    vars_[var] = t;
    ranges_[var] = range;
    return absl::OkStatus();
  }
  void Undefine(const std::string& var) {
    vars_.erase(var);
    ranges_.erase(var);
  }

  absl::Status VisitStmt(const Stmt& s, bool top) {
    if (s == nullptr) return Error("null statement");
    switch (s->kind) {
      case StmtKind::kFor: {
        if (s->body.size() != 1) return Error(absl::StrCat("loop ", s->var, " has no body"));
        auto et = VisitExpr(s->extent);
        if (!et.ok()) return et.status();
        if (*et != ScalarType::kI64) return Error(absl::StrCat("extent of loop ", s->var, " is not i64"));
        int64_t ext = 0;
        bool is_const = AsConst(s->extent, &ext);
        if (is_const && ext <= 0) return Error(absl::StrCat("loop ", s->var, " has extent ", ext));
        if (s->for_kind != ForKind::kSerial && !is_const) {
          return Error(absl::StrCat(ForKindName(s->for_kind), " loop ", s->var, " needs a constant extent"));
        }
        if (s->for_kind == ForKind::kParallel && !top) {
          return Error(absl::StrCat("parallel loop ", s->var, " is not the outermost statement"));
        }
        if (s->for_kind == ForKind::kParallel && gpu_) {
          return Error(absl::StrCat("parallel loop ", s->var, " in a GPU kernel"));
        }
        if (s->for_kind == ForKind::kGpuBlock && (!top || !gpu_)) {
          return Error(absl::StrCat("gpu_block loop ", s->var, " is not the outermost statement"));
        }
        if (s->for_kind == ForKind::kGpuBlock && ext > kMaxGpuBlocks) {
          return Error(absl::StrCat("gpu_block loop ", s->var, " has ", ext, " blocks, more than ", kMaxGpuBlocks));
        }
        if (s->for_kind == ForKind::kGpuThread) {
          if (!gpu_) return Error(absl::StrCat("gpu_thread loop ", s->var, " outside a GPU kernel"));
          if (in_thread_) return Error(absl::StrCat("gpu_thread loop ", s->var, " inside another gpu_thread loop"));
          if (in_vector_) return Error(absl::StrCat("gpu_thread loop ", s->var, " inside a vectorized loop"));
        }
        if (s->for_kind == ForKind::kVectorized) {
          if (in_vector_) return Error(absl::StrCat("vectorized loop ", s->var, " inside another vectorized loop"));
          if (ext > 64) return Error(absl::StrCat("vectorized loop ", s->var, " is wider than 64 lanes"));
        }
        Interval r = Range(s->extent);
        Interval vr = r.known ? Interval{true, 0, r.hi - 1} : Interval{};
        RETURN_IF_ERROR(Define(s->var, ScalarType::kI64, vr));
        bool was_vector = in_vector_, was_thread = in_thread_;
        if (s->for_kind == ForKind::kVectorized) in_vector_ = true;
        if (s->for_kind == ForKind::kGpuThread) in_thread_ = true;
        absl::Status st = VisitStmt(s->body[0], false);
        in_vector_ = was_vector;
        in_thread_ = was_thread;
        Undefine(s->var);
        return st;
      }
      case StmtKind::kStore: {
        auto vt = VisitExpr(s->value);
        if (!vt.ok()) return vt.status();
        auto it = VisitExpr(s->index);
        if (!it.ok()) return it.status();
        std::string what = absl::StrCat("store ", s->buffer ? s->buffer->name : "?", "[", Print(s->index), "]");
        if (*it != ScalarType::kI64) return Error(absl::StrCat("index of ", what, " is not i64"));
        RETURN_IF_ERROR(CheckAccess(s->buffer, s->index, what));
        if (s->buffer->role == BufferRole::kInput) return Error(absl::StrCat(what, " writes an input"));
        if (*vt != s->buffer->dtype) return Error(absl::StrCat(what, " stores a ", ScalarTypeName(*vt)));
        return absl::OkStatus();
      }
      case StmtKind::kLet: {
        auto vt = VisitExpr(s->value);
        if (!vt.ok()) return vt.status();
        if (s->body.size() != 1) return Error(absl::StrCat("let ", s->var, " has no body"));
        RETURN_IF_ERROR(Define(s->var, *vt, *vt == ScalarType::kI64 ? Range(s->value) : Interval{}));
        absl::Status st = VisitStmt(s->body[0], false);
        Undefine(s->var);
        return st;
      }
      case StmtKind::kAllocate: {
        if (s->buffer == nullptr || s->buffer->role == BufferRole::kInput || s->buffer->role == BufferRole::kOutput) {
          return Error("allocate of a buffer that is not a temp");
        }
        const bool block_scope = s->buffer->role == BufferRole::kShared || s->buffer->role == BufferRole::kLocal;
        if (block_scope && (!gpu_ || in_thread_)) {
          return Error(absl::StrCat("allocate ", BufferRoleName(s->buffer->role), " ", s->buffer->name,
                                    " is not at a GPU block's level (inside gpu_block, outside gpu_thread)"));
        }
        if (!block_scope && gpu_ && !in_thread_) {
          return Error(absl::StrCat("allocate ", s->buffer->name, " at a GPU block's level is not shared or local"));
        }
        if (s->body.size() != 1) return Error(absl::StrCat("allocate ", s->buffer->name, " has no body"));
        if (s->buffer->num_elements() <= 0) return Error(absl::StrCat("allocate ", s->buffer->name, " is empty"));
        buffers_.insert(s->buffer.get());
        absl::Status st = VisitStmt(s->body[0], false);
        buffers_.erase(s->buffer.get());
        return st;
      }
      case StmtKind::kBlock:
        for (const Stmt& c : s->body) RETURN_IF_ERROR(VisitStmt(c, false));
        return absl::OkStatus();
      case StmtKind::kIf: {
        auto ct = VisitExpr(s->value);
        if (!ct.ok()) return ct.status();
        if (*ct != ScalarType::kBool) return Error(absl::StrCat("condition ", Print(s->value), " is not bool"));
        if (s->body.empty() || s->body.size() > 2) return Error("if without a then-branch");
        ++guarded_;
        absl::Status st = absl::OkStatus();
        for (const Stmt& c : s->body) {
          if (c != nullptr && st.ok()) st = VisitStmt(c, false);
        }
        --guarded_;
        return st;
      }
      case StmtKind::kWarpReduce: {
        int64_t width = 0;
        const Buffer& b = s->buffer;
        if (!gpu_ || in_thread_) return Error("warp_reduce outside a GPU block's uniform code");
        if (b == nullptr || b->role != BufferRole::kLocal || buffers_.count(b.get()) == 0) {
          return Error("warp_reduce of a buffer that is not an enclosing local allocation");
        }
        if (s->var != "sum" && s->var != "max" && s->var != "min") {
          return Error(absl::StrCat("warp_reduce ", s->var, " is not sum, max or min"));
        }
        if (!AsConst(s->extent, &width) || width < 2 || width > 32 || (width & (width - 1)) != 0) {
          return Error(absl::StrCat("warp_reduce width ", Print(s->extent), " is not a power of two in [2, 32]"));
        }
        if (b->dtype != ScalarType::kF32 && b->dtype != ScalarType::kI32 && b->dtype != ScalarType::kI64) {
          return Error(absl::StrCat("warp_reduce of ", ScalarTypeName(b->dtype), " (f32, i32 or i64)"));
        }
        warp_reduce_ = true;
        return absl::OkStatus();
      }
      case StmtKind::kFence: return absl::OkStatus();
    }
    return Error("unknown statement kind");
  }

  const LoopFunc& f_;
  std::map<std::string, ScalarType> vars_;
  std::map<std::string, Interval> ranges_;
  std::set<const BufferNode*> buffers_;
  bool in_vector_ = false;
  bool gpu_ = false;         // the kernel's body is a gpu_block loop
  bool in_thread_ = false;   // inside a gpu_thread loop
  bool warp_reduce_ = false;
  int guarded_ = 0;
};

}  // namespace

absl::Status Verify(const LoopFunc& f) { return Verifier(f).Run(); }

}  // namespace kiln::loop_ir
