// Loop IR: node constructors with integer constant folding, the printer, the
// verifier and substitution.
#include "compiler_core/codegen/loop_ir/loop_ir.h"

#include <cmath>
#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace kiln::loop_ir {
namespace {

Expr MakeExpr(ExprKind kind, ScalarType type, std::vector<Expr> args) {
  auto n = std::make_shared<ExprNode>();
  n->kind = kind;
  n->type = type;
  n->args = std::move(args);
  return n;
}

bool IsArith(ExprKind k) {
  return k == ExprKind::kAdd || k == ExprKind::kSub || k == ExprKind::kMul || k == ExprKind::kDiv ||
         k == ExprKind::kMod || k == ExprKind::kMin || k == ExprKind::kMax;
}
bool IsCompare(ExprKind k) {
  return k == ExprKind::kLt || k == ExprKind::kLe || k == ExprKind::kGt || k == ExprKind::kGe ||
         k == ExprKind::kEq || k == ExprKind::kNe;
}

int64_t FloorDiv(int64_t a, int64_t b) { return a / b; }

// Builds a binary node, folding integer constants and identities.
Expr Binary(ExprKind kind, Expr a, Expr b) {
  int64_t x = 0, y = 0;
  bool ca = AsConst(a, &x), cb = AsConst(b, &y);
  if (a->type == ScalarType::kI64 && b->type == ScalarType::kI64) {
    if (ca && cb) {
      switch (kind) {
        case ExprKind::kAdd: return IntImm(x + y);
        case ExprKind::kSub: return IntImm(x - y);
        case ExprKind::kMul: return IntImm(x * y);
        case ExprKind::kDiv: if (y != 0) return IntImm(FloorDiv(x, y)); break;
        case ExprKind::kMod: if (y != 0) return IntImm(x % y); break;
        case ExprKind::kMin: return IntImm(std::min(x, y));
        case ExprKind::kMax: return IntImm(std::max(x, y));
        default: break;
      }
    }
    if (kind == ExprKind::kAdd && ca && x == 0) return b;
    if ((kind == ExprKind::kAdd || kind == ExprKind::kSub) && cb && y == 0) return a;
    if (kind == ExprKind::kMul && ((ca && x == 0) || (cb && y == 0))) return IntImm(0);
    if (kind == ExprKind::kMul && ca && x == 1) return b;
    if ((kind == ExprKind::kMul || kind == ExprKind::kDiv) && cb && y == 1) return a;
    if (kind == ExprKind::kMod && cb && y == 1) return IntImm(0);
  }
  ScalarType t = IsCompare(kind) || kind == ExprKind::kAnd || kind == ExprKind::kOr ? ScalarType::kBool
                                                                                    : a->type;
  return MakeExpr(kind, t, {std::move(a), std::move(b)});
}

const char* BinarySymbol(ExprKind k) {
  switch (k) {
    case ExprKind::kAdd: return "+";
    case ExprKind::kSub: return "-";
    case ExprKind::kMul: return "*";
    case ExprKind::kDiv: return "/";
    case ExprKind::kMod: return "%";
    case ExprKind::kLt: return "<";
    case ExprKind::kLe: return "<=";
    case ExprKind::kGt: return ">";
    case ExprKind::kGe: return ">=";
    case ExprKind::kEq: return "==";
    case ExprKind::kNe: return "!=";
    case ExprKind::kAnd: return "&&";
    case ExprKind::kOr: return "||";
    default: return nullptr;
  }
}

std::string FloatText(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s + "f";
}

std::string ShapeText(const Buffer& b) {
  return absl::StrCat(ScalarTypeName(b->dtype), "[", absl::StrJoin(b->shape, ","), "]");
}

Stmt MakeStmt(StmtKind kind) {
  auto n = std::make_shared<StmtNode>();
  n->kind = kind;
  return n;
}

// ---- verifier -----------------------------------------------------------------

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
    return VisitStmt(f_.body, /*top=*/true);
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
        if (s->for_kind == ForKind::kVectorized) {
          if (in_vector_) return Error(absl::StrCat("vectorized loop ", s->var, " inside another vectorized loop"));
          if (ext > 64) return Error(absl::StrCat("vectorized loop ", s->var, " is wider than 64 lanes"));
        }
        Interval r = Range(s->extent);
        Interval vr = r.known ? Interval{true, 0, r.hi - 1} : Interval{};
        RETURN_IF_ERROR(Define(s->var, ScalarType::kI64, vr));
        bool was_vector = in_vector_;
        if (s->for_kind == ForKind::kVectorized) in_vector_ = true;
        absl::Status st = VisitStmt(s->body[0], false);
        in_vector_ = was_vector;
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
        if (s->buffer == nullptr || s->buffer->role != BufferRole::kTemp) {
          return Error("allocate of a buffer that is not a temp");
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
    }
    return Error("unknown statement kind");
  }

  const LoopFunc& f_;
  std::map<std::string, ScalarType> vars_;
  std::map<std::string, Interval> ranges_;
  std::set<const BufferNode*> buffers_;
  bool in_vector_ = false;
  int guarded_ = 0;
};

}  // namespace

const char* ScalarTypeName(ScalarType t) {
  switch (t) {
    case ScalarType::kF32: return "f32";
    case ScalarType::kI64: return "i64";
    case ScalarType::kBool: return "bool";
    case ScalarType::kF64: return "f64";
    case ScalarType::kF16: return "f16";
    case ScalarType::kI8: return "i8";
    case ScalarType::kI16: return "i16";
    case ScalarType::kI32: return "i32";
    case ScalarType::kU8: return "u8";
    case ScalarType::kU16: return "u16";
    case ScalarType::kU32: return "u32";
    case ScalarType::kU64: return "u64";
  }
  return "?";
}

bool IsFloat(ScalarType t) {
  return t == ScalarType::kF32 || t == ScalarType::kF64 || t == ScalarType::kF16;
}
bool IsInteger(ScalarType t) { return !IsFloat(t) && t != ScalarType::kBool; }
bool IsSigned(ScalarType t) {
  return IsFloat(t) || t == ScalarType::kI8 || t == ScalarType::kI16 || t == ScalarType::kI32 ||
         t == ScalarType::kI64;
}
int ScalarTypeBytes(ScalarType t) {
  switch (t) {
    case ScalarType::kBool:
    case ScalarType::kI8:
    case ScalarType::kU8: return 1;
    case ScalarType::kF16:
    case ScalarType::kI16:
    case ScalarType::kU16: return 2;
    case ScalarType::kF32:
    case ScalarType::kI32:
    case ScalarType::kU32: return 4;
    case ScalarType::kF64:
    case ScalarType::kI64:
    case ScalarType::kU64: return 8;
  }
  return 4;
}

const char* ForKindName(ForKind k) {
  switch (k) {
    case ForKind::kSerial: return "serial";
    case ForKind::kVectorized: return "vectorized";
    case ForKind::kUnrolled: return "unrolled";
    case ForKind::kParallel: return "parallel";
  }
  return "?";
}

int64_t BufferNode::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Buffer MakeBuffer(std::string name, std::vector<int64_t> shape, BufferRole role, int arg, ScalarType dtype) {
  auto b = std::make_shared<BufferNode>();
  b->name = std::move(name);
  b->shape = std::move(shape);
  b->role = role;
  b->arg = arg;
  b->dtype = dtype;
  return b;
}

bool IsKnownCall(const std::string& name, int n) {
  static const char* const kUnary[] = {"exp", "log", "sqrt", "tanh", "erf", "sigmoid", "abs", "neg", "floor",
                                       "sin", "cos", "ceil", "round", "trunc", "expm1", "log1p"};
  for (const char* u : kUnary) {
    if (name == u) return n == 1;
  }
  if (name == "fmax" || name == "fmin" || name == "pow" || name == "fmod" || name == "ipow") return n == 2;
  if (name == "fma") return n == 3;
  return false;
}

Expr IntImm(int64_t v) {
  auto n = std::make_shared<ExprNode>();
  n->kind = ExprKind::kIntImm;
  n->type = ScalarType::kI64;
  n->int_value = v;
  return n;
}
Expr FloatImm(double v) {
  auto n = std::make_shared<ExprNode>();
  n->kind = ExprKind::kFloatImm;
  n->type = ScalarType::kF32;
  n->float_value = static_cast<float>(v);
  return n;
}
Expr Const(ScalarType t, double v) {
  if (IsFloat(t)) {
    auto n = std::make_shared<ExprNode>();
    n->kind = ExprKind::kFloatImm;
    n->type = t;
    n->float_value = t == ScalarType::kF64 ? v : static_cast<float>(v);
    return n;
  }
  if (t == ScalarType::kBool) return IntConst(t, v != 0 ? 1 : 0);
  if (std::isnan(v)) return IntConst(t, 0);
  if (t == ScalarType::kU64 && v >= 9223372036854775808.0) {
    return IntConst(t, static_cast<int64_t>(static_cast<uint64_t>(std::min(v, 18446744073709549568.0))));
  }
  return IntConst(t, static_cast<int64_t>(std::clamp(std::trunc(v), -9223372036854775808.0, 9223372036854774784.0)));
}
Expr IntConst(ScalarType t, int64_t bits) {
  if (t == ScalarType::kI64) return IntImm(bits);
  if (IsFloat(t)) return Const(t, static_cast<double>(bits));
  auto n = std::make_shared<ExprNode>();
  n->kind = ExprKind::kIntImm;
  n->type = t;
  n->int_value = t == ScalarType::kBool ? (bits != 0) : bits;
  return n;
}
Expr Var(const std::string& name, ScalarType type) {
  auto n = std::make_shared<ExprNode>();
  n->kind = ExprKind::kVar;
  n->type = type;
  n->name = name;
  return n;
}
Expr Add(Expr a, Expr b) { return Binary(ExprKind::kAdd, std::move(a), std::move(b)); }
Expr Sub(Expr a, Expr b) { return Binary(ExprKind::kSub, std::move(a), std::move(b)); }
Expr Mul(Expr a, Expr b) { return Binary(ExprKind::kMul, std::move(a), std::move(b)); }
Expr Div(Expr a, Expr b) { return Binary(ExprKind::kDiv, std::move(a), std::move(b)); }
Expr Mod(Expr a, Expr b) { return Binary(ExprKind::kMod, std::move(a), std::move(b)); }
Expr Min(Expr a, Expr b) { return Binary(ExprKind::kMin, std::move(a), std::move(b)); }
Expr Max(Expr a, Expr b) { return Binary(ExprKind::kMax, std::move(a), std::move(b)); }
Expr Lt(Expr a, Expr b) { return Binary(ExprKind::kLt, std::move(a), std::move(b)); }
Expr Le(Expr a, Expr b) { return Binary(ExprKind::kLe, std::move(a), std::move(b)); }
Expr Gt(Expr a, Expr b) { return Binary(ExprKind::kGt, std::move(a), std::move(b)); }
Expr Ge(Expr a, Expr b) { return Binary(ExprKind::kGe, std::move(a), std::move(b)); }
Expr Eq(Expr a, Expr b) { return Binary(ExprKind::kEq, std::move(a), std::move(b)); }
Expr Ne(Expr a, Expr b) { return Binary(ExprKind::kNe, std::move(a), std::move(b)); }
Expr And(Expr a, Expr b) { return Binary(ExprKind::kAnd, std::move(a), std::move(b)); }
Expr Or(Expr a, Expr b) { return Binary(ExprKind::kOr, std::move(a), std::move(b)); }
Expr Not(Expr a) { return MakeExpr(ExprKind::kNot, ScalarType::kBool, {std::move(a)}); }
Expr Select(Expr c, Expr a, Expr b) {
  ScalarType t = a->type;
  return MakeExpr(ExprKind::kSelect, t, {std::move(c), std::move(a), std::move(b)});
}
Expr Cast(ScalarType to, Expr v) {
  if (v->type == to) return v;
  return MakeExpr(ExprKind::kCast, to, {std::move(v)});
}
Expr Call(const std::string& name, std::vector<Expr> args, ScalarType type) {
  auto n = MakeExpr(ExprKind::kCall, type, std::move(args));
  std::const_pointer_cast<ExprNode>(n)->name = name;
  return n;
}
Expr Load(Buffer buffer, Expr flat_index) {
  auto n = std::make_shared<ExprNode>();
  n->kind = ExprKind::kLoad;
  n->type = buffer->dtype;
  n->buffer = std::move(buffer);
  n->args = {std::move(flat_index)};
  return n;
}
Expr FlatIndex(const std::vector<int64_t>& shape, const std::vector<Expr>& index) {
  Expr flat = IntImm(0);
  for (size_t d = 0; d < index.size(); ++d) {
    flat = Add(Mul(flat, IntImm(d < shape.size() ? shape[d] : 1)), index[d]);
  }
  return flat;
}
Expr Load(Buffer buffer, const std::vector<Expr>& index) {
  Expr flat = FlatIndex(buffer->shape, index);
  return Load(std::move(buffer), std::move(flat));
}

bool AsConst(const Expr& e, int64_t* value) {
  if (e == nullptr || e->kind != ExprKind::kIntImm) return false;
  *value = e->int_value;
  return true;
}

Expr Simplify(const Expr& e) {
  if (e == nullptr || e->args.empty()) return e;
  std::vector<Expr> args;
  for (const Expr& a : e->args) args.push_back(Simplify(a));
  if (IsArith(e->kind) || IsCompare(e->kind) || e->kind == ExprKind::kAnd || e->kind == ExprKind::kOr) {
    return Binary(e->kind, args[0], args[1]);
  }
  auto n = std::make_shared<ExprNode>(*e);
  n->args = std::move(args);
  return n;
}

Stmt For(const std::string& var, Expr extent, Stmt body, ForKind kind) {
  auto n = std::make_shared<StmtNode>();
  n->kind = StmtKind::kFor;
  n->var = var;
  n->extent = std::move(extent);
  n->for_kind = kind;
  n->body = {std::move(body)};
  return n;
}
Stmt Store(Buffer buffer, Expr flat_index, Expr value) {
  auto n = std::make_shared<StmtNode>();
  n->kind = StmtKind::kStore;
  n->buffer = std::move(buffer);
  n->index = std::move(flat_index);
  n->value = std::move(value);
  return n;
}
Stmt Store(Buffer buffer, const std::vector<Expr>& index, Expr value) {
  Expr flat = FlatIndex(buffer->shape, index);
  return Store(std::move(buffer), std::move(flat), std::move(value));
}
Stmt LetStmt(const std::string& var, Expr value, Stmt body) {
  auto n = std::make_shared<StmtNode>();
  n->kind = StmtKind::kLet;
  n->var = var;
  n->value = std::move(value);
  n->body = {std::move(body)};
  return n;
}
Stmt Allocate(Buffer temp, Stmt body) {
  auto n = std::make_shared<StmtNode>();
  n->kind = StmtKind::kAllocate;
  n->buffer = std::move(temp);
  n->body = {std::move(body)};
  return n;
}
Stmt Block(std::vector<Stmt> stmts) {
  if (stmts.size() == 1) return stmts[0];
  auto n = std::make_shared<StmtNode>();
  n->kind = StmtKind::kBlock;
  n->body = std::move(stmts);
  return n;
}
Stmt IfThen(Expr cond, Stmt then_case, Stmt else_case) {
  auto n = std::make_shared<StmtNode>();
  n->kind = StmtKind::kIf;
  n->value = std::move(cond);
  n->body = {std::move(then_case)};
  if (else_case != nullptr) n->body.push_back(std::move(else_case));
  return n;
}

std::string Print(const Expr& e) {
  if (e == nullptr) return "<null>";
  switch (e->kind) {
    case ExprKind::kIntImm:
      if (e->type == ScalarType::kI64) return absl::StrCat(e->int_value);
      if (e->type == ScalarType::kBool) return e->int_value != 0 ? "true" : "false";
      if (e->type == ScalarType::kU64) return absl::StrCat(static_cast<uint64_t>(e->int_value), "u64");
      return absl::StrCat(e->int_value, ScalarTypeName(e->type));
    case ExprKind::kFloatImm:
      if (e->type == ScalarType::kF64) {
        std::string t = FloatText(e->float_value);
        if (std::isfinite(e->float_value)) {
          char buf[64];
          std::snprintf(buf, sizeof(buf), "%.17g", e->float_value);
          t = buf;
          if (t.find_first_of(".e") == std::string::npos) t += ".0";
        }
        return t;
      }
      if (e->type == ScalarType::kF16) return absl::StrCat("f16(", FloatText(e->float_value), ")");
      return FloatText(e->float_value);
    case ExprKind::kVar: return e->type == ScalarType::kI64 ? e->name : absl::StrCat(e->name);
    case ExprKind::kMin: return absl::StrCat("min(", Print(e->args[0]), ", ", Print(e->args[1]), ")");
    case ExprKind::kMax: return absl::StrCat("max(", Print(e->args[0]), ", ", Print(e->args[1]), ")");
    case ExprKind::kNot: return absl::StrCat("!", Print(e->args[0]));
    case ExprKind::kSelect:
      return absl::StrCat("select(", Print(e->args[0]), ", ", Print(e->args[1]), ", ", Print(e->args[2]), ")");
    case ExprKind::kLoad: return absl::StrCat(e->buffer ? e->buffer->name : "?", "[", Print(e->args[0]), "]");
    case ExprKind::kCast: return absl::StrCat(ScalarTypeName(e->type), "(", Print(e->args[0]), ")");
    case ExprKind::kCall: {
      std::vector<std::string> a;
      for (const Expr& x : e->args) a.push_back(Print(x));
      return absl::StrCat(e->name, "(", absl::StrJoin(a, ", "), ")");
    }
    default:
      break;
  }
  const char* sym = BinarySymbol(e->kind);
  return absl::StrCat("(", Print(e->args[0]), " ", sym ? sym : "?", " ", Print(e->args[1]), ")");
}

std::string Print(const Stmt& s, int indent) {
  std::string pad(indent * 2, ' ');
  if (s == nullptr) return pad + "<null>\n";
  switch (s->kind) {
    case StmtKind::kFor: {
      std::string kind = s->for_kind == ForKind::kSerial ? "" : absl::StrCat(ForKindName(s->for_kind), " ");
      return absl::StrCat(pad, kind, "for (", s->var, ", 0, ", Print(s->extent), ") {\n",
                          Print(s->body[0], indent + 1), pad, "}\n");
    }
    case StmtKind::kStore:
      return absl::StrCat(pad, s->buffer ? s->buffer->name : "?", "[", Print(s->index), "] = ", Print(s->value),
                          "\n");
    case StmtKind::kLet:
      return absl::StrCat(pad, "let ", s->var, " = ", Print(s->value), " {\n", Print(s->body[0], indent + 1), pad,
                          "}\n");
    case StmtKind::kAllocate:
      return absl::StrCat(pad, "allocate ", s->buffer->name, ": ", ShapeText(s->buffer), " {\n",
                          Print(s->body[0], indent + 1), pad, "}\n");
    case StmtKind::kBlock: {
      std::string out;
      for (const Stmt& c : s->body) out += Print(c, indent);
      return out;
    }
    case StmtKind::kIf: {
      std::string out = absl::StrCat(pad, "if (", Print(s->value), ") {\n", Print(s->body[0], indent + 1));
      if (s->body.size() > 1 && s->body[1] != nullptr) {
        absl::StrAppend(&out, pad, "} else {\n", Print(s->body[1], indent + 1));
      }
      return absl::StrCat(out, pad, "}\n");
    }
  }
  return pad + "?\n";
}

std::string Print(const LoopFunc& f) {
  std::vector<std::string> args;
  for (const Buffer& b : f.args) {
    args.push_back(absl::StrCat(b->name, ": ", ShapeText(b), b->role == BufferRole::kOutput ? " output" : " input"));
  }
  return absl::StrCat("kernel ", f.name, "(", absl::StrJoin(args, ", "), ") {\n", Print(f.body, 1), "}\n");
}

absl::Status Verify(const LoopFunc& f) { return Verifier(f).Run(); }

int64_t NumTasks(const LoopFunc& f) {
  int64_t e = 1;
  if (f.body != nullptr && f.body->kind == StmtKind::kFor && f.body->for_kind == ForKind::kParallel &&
      AsConst(f.body->extent, &e)) {
    return e;
  }
  return 1;
}

Expr Substitute(const Expr& e, const std::string& name, const Expr& value) {
  if (e == nullptr) return e;
  if (e->kind == ExprKind::kVar) return e->name == name ? value : e;
  if (e->args.empty()) return e;
  std::vector<Expr> args;
  bool changed = false;
  for (const Expr& a : e->args) {
    args.push_back(Substitute(a, name, value));
    changed = changed || args.back() != a;
  }
  if (!changed) return e;
  if (IsArith(e->kind) || IsCompare(e->kind) || e->kind == ExprKind::kAnd || e->kind == ExprKind::kOr) {
    return Binary(e->kind, args[0], args[1]);
  }
  auto n = std::make_shared<ExprNode>(*e);
  n->args = std::move(args);
  return n;
}

Stmt Substitute(const Stmt& s, const std::string& name, const Expr& value) {
  if (s == nullptr) return s;
  auto n = std::make_shared<StmtNode>(*s);
  if (n->extent) n->extent = Substitute(n->extent, name, value);
  if (n->value) n->value = Substitute(n->value, name, value);
  if (n->index) n->index = Substitute(n->index, name, value);
  // A loop or let that rebinds `name` shadows it in its body.
  bool shadows = (s->kind == StmtKind::kFor || s->kind == StmtKind::kLet) && s->var == name;
  if (!shadows) {
    for (Stmt& c : n->body) c = Substitute(c, name, value);
  }
  return n;
}

}  // namespace kiln::loop_ir
