// The loop IR's textual form (see printer.h).
#include "compiler_core/codegen/loop_ir/printer.h"

#include <cmath>
#include <cstdio>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln::loop_ir {
namespace {

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

}  // namespace

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
      if (e->type == ScalarType::kF16 || e->type == ScalarType::kBF16) {
        return absl::StrCat(ScalarTypeName(e->type), "(", FloatText(e->float_value), ")");
      }
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
    case StmtKind::kAllocate: {
      const BufferRole r = s->buffer->role;
      std::string scope = r == BufferRole::kShared || r == BufferRole::kLocal ? absl::StrCat(BufferRoleName(r), " ") : "";
      return absl::StrCat(pad, "allocate ", scope, s->buffer->name, ": ", ShapeText(s->buffer), " {\n",
                          Print(s->body[0], indent + 1), pad, "}\n");
    }
    case StmtKind::kWarpReduce:
      return absl::StrCat(pad, "warp_reduce ", s->var, "(", s->buffer ? s->buffer->name : "?", ", ", Print(s->extent),
                          ")\n");
    case StmtKind::kFence: return pad + "fence\n";
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

}  // namespace kiln::loop_ir
