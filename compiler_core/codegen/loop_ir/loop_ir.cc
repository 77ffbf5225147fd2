// Loop IR: node constructors with integer constant folding, scalar types,
// and the kernel's task count.
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

Stmt MakeStmt(StmtKind kind) {
  auto n = std::make_shared<StmtNode>();
  n->kind = kind;
  return n;
}

}  // namespace

bool IsArith(ExprKind k) {
  return k == ExprKind::kAdd || k == ExprKind::kSub || k == ExprKind::kMul || k == ExprKind::kDiv ||
         k == ExprKind::kMod || k == ExprKind::kMin || k == ExprKind::kMax;
}
bool IsCompare(ExprKind k) {
  return k == ExprKind::kLt || k == ExprKind::kLe || k == ExprKind::kGt || k == ExprKind::kGe ||
         k == ExprKind::kEq || k == ExprKind::kNe;
}

int64_t FloorDiv(int64_t a, int64_t b) { return a / b; }

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

const char* ScalarTypeName(ScalarType t) {
  switch (t) {
    case ScalarType::kF32: return "f32";
    case ScalarType::kI64: return "i64";
    case ScalarType::kBool: return "bool";
    case ScalarType::kF64: return "f64";
    case ScalarType::kF16: return "f16";
    case ScalarType::kBF16: return "bf16";
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
  return t == ScalarType::kF32 || t == ScalarType::kF64 || t == ScalarType::kF16 || t == ScalarType::kBF16;
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
    case ScalarType::kBF16:
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
    case ForKind::kGpuBlock: return "gpu_block";
    case ForKind::kGpuThread: return "gpu_thread";
  }
  return "?";
}

const char* BufferRoleName(BufferRole r) {
  switch (r) {
    case BufferRole::kInput: return "input";
    case BufferRole::kOutput: return "output";
    case BufferRole::kTemp: return "temp";
    case BufferRole::kShared: return "shared";
    case BufferRole::kLocal: return "local";
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
                                       "sin", "cos", "atan", "asin", "acos", "ceil", "round", "trunc", "expm1",
                                       "log1p", "exp_nonpositive"};
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

Stmt WarpReduce(Buffer local, const std::string& op, int64_t width) {
  auto n = std::make_shared<StmtNode>();
  n->kind = StmtKind::kWarpReduce;
  n->buffer = std::move(local);
  n->var = op;
  n->extent = IntImm(width);
  return n;
}

Stmt Fence() {
  auto n = std::make_shared<StmtNode>();
  n->kind = StmtKind::kFence;
  return n;
}

bool IsGpuKernel(const LoopFunc& f) {
  return f.body != nullptr && f.body->kind == StmtKind::kFor && f.body->for_kind == ForKind::kGpuBlock;
}

namespace {

void CollectLaunch(const Stmt& s, GpuLaunch* launch) {
  if (s == nullptr) return;
  if (s->kind == StmtKind::kFor && s->for_kind == ForKind::kGpuThread) {
    int64_t e = 1;
    if (AsConst(s->extent, &e)) launch->threads = std::max(launch->threads, e);
  }
  if (s->kind == StmtKind::kAllocate && s->buffer->role == BufferRole::kShared) {
    launch->shared_bytes += (s->buffer->num_elements() * ScalarTypeBytes(s->buffer->dtype) + 15) / 16 * 16;
  }
  for (const Stmt& c : s->body) CollectLaunch(c, launch);
}

}  // namespace

GpuLaunch GpuLaunchOf(const LoopFunc& f) {
  GpuLaunch launch;
  if (!IsGpuKernel(f)) return launch;
  AsConst(f.body->extent, &launch.blocks);
  CollectLaunch(f.body->body[0], &launch);
  return launch;
}

int64_t NumTasks(const LoopFunc& f) {
  int64_t e = 1;
  if (f.body != nullptr && f.body->kind == StmtKind::kFor && f.body->for_kind == ForKind::kParallel &&
      AsConst(f.body->extent, &e)) {
    return e;
  }
  return 1;
}

}  // namespace kiln::loop_ir
