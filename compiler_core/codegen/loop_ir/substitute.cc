// Substitution of a variable in loop-IR expressions and statements.
#include "compiler_core/codegen/loop_ir/substitute.h"

namespace kiln::loop_ir {

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
