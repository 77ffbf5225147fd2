// Index simplification (see index_simplify.h).
#include "compiler_core/codegen/loop_ir/index_simplify.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kiln::loop_ir {
namespace {

struct Interval {
  int64_t lo = 0, hi = 0;  // inclusive
};

// An i64 expression as sum(coef * atom) + constant; atoms are variables
// (equal by name) or other subexpressions (equal by identity).
struct Linear {
  std::vector<std::pair<Expr, int64_t>> terms;
  int64_t constant = 0;
};

bool SameAtom(const Expr& a, const Expr& b) {
  if (a == b) return true;
  return a->kind == ExprKind::kVar && b->kind == ExprKind::kVar && a->name == b->name;
}

void AddTerm(Linear* l, const Expr& atom, int64_t coef) {
  for (auto& [a, c] : l->terms) {
    if (SameAtom(a, atom)) {
      c += coef;
      return;
    }
  }
  l->terms.emplace_back(atom, coef);
}

Linear ToLinear(const Expr& e) {
  Linear l;
  int64_t k = 0;
  if (AsConst(e, &k)) {
    l.constant = k;
    return l;
  }
  if (e->type == ScalarType::kI64 && (e->kind == ExprKind::kAdd || e->kind == ExprKind::kSub)) {
    Linear a = ToLinear(e->args[0]), b = ToLinear(e->args[1]);
    const int64_t sign = e->kind == ExprKind::kAdd ? 1 : -1;
    for (auto& [atom, c] : b.terms) AddTerm(&a, atom, sign * c);
    a.constant += sign * b.constant;
    return a;
  }
  if (e->type == ScalarType::kI64 && e->kind == ExprKind::kMul) {
    for (int side : {0, 1}) {
      if (AsConst(e->args[side], &k)) {
        Linear a = ToLinear(e->args[1 - side]);
        for (auto& [atom, c] : a.terms) c *= k;
        a.constant *= k;
        return a;
      }
    }
  }
  AddTerm(&l, e, 1);
  return l;
}

Expr FromLinear(const Linear& l) {
  Expr out;
  for (const auto& [atom, c] : l.terms) {
    if (c == 0) continue;
    Expr t = c == 1 ? atom : Mul(atom, IntImm(c));
    out = out ? Add(out, t) : t;
  }
  if (!out) return IntImm(l.constant);
  return l.constant == 0 ? out : Add(out, IntImm(l.constant));
}

// Structural equality (the same subexpression built twice).
bool SameExpr(const Expr& a, const Expr& b) {
  if (a == b) return true;
  if (a == nullptr || b == nullptr || a->kind != b->kind || a->type != b->type || a->int_value != b->int_value ||
      a->float_value != b->float_value || a->name != b->name || a->buffer != b->buffer ||
      a->args.size() != b->args.size()) {
    return false;
  }
  for (size_t i = 0; i < a->args.size(); ++i) {
    if (!SameExpr(a->args[i], b->args[i])) return false;
  }
  return true;
}

// `e` is x / c with a constant c > 0 (or x / a / b as x / (a*b) with a | c):
// sets *x and returns true when e is (x / d) for the given divisor d.
bool IsDivBy(const Expr& e, int64_t d, Expr* x) {
  int64_t c = 0;
  if (e->kind != ExprKind::kDiv || !AsConst(e->args[1], &c) || c <= 0) return false;
  if (c == d) {
    *x = e->args[0];
    return true;
  }
  return false;
}

class IndexSimplifier {
 public:
  Stmt Run(const Stmt& s) {
    switch (s->kind) {
      case StmtKind::kFor: {
        Expr extent = Simp(s->extent);
        std::optional<Interval> r = Range(extent);
        std::optional<Interval> saved = Bind(s->var, r && r->hi >= 1 ? std::optional<Interval>(Interval{0, r->hi - 1})
                                                                     : std::nullopt);
        Stmt body = Run(s->body[0]);
        Restore(s->var, saved);
        return For(s->var, extent, body, s->for_kind);
      }
      case StmtKind::kLet: {
        Expr value = Simp(s->value);
        std::optional<Interval> saved =
            Bind(s->var, value->type == ScalarType::kI64 ? Range(value) : std::nullopt);
        Stmt body = Run(s->body[0]);
        Restore(s->var, saved);
        return LetStmt(s->var, value, body);
      }
      case StmtKind::kIf: {
        Expr cond = Simp(s->value);
        int64_t bound = 0;
        const bool guard = cond->kind == ExprKind::kLt && cond->args[0]->type == ScalarType::kI64 &&
                           AsConst(cond->args[1], &bound);
        if (guard) {
          guards_.emplace_back(ToLinear(cond->args[0]), bound);
          memo_.clear();
        }
        Stmt then_case = Run(s->body[0]);
        if (guard) {
          guards_.pop_back();
          memo_.clear();
        }
        Stmt else_case = s->body.size() > 1 ? Run(s->body[1]) : nullptr;
        return IfThen(cond, then_case, else_case);
      }
      case StmtKind::kStore: {
        Expr index = Simp(s->index);
        Expr value = Simp(s->value);
        return Store(s->buffer, index, value);
      }
      case StmtKind::kAllocate: return Allocate(s->buffer, Run(s->body[0]));
      case StmtKind::kWarpReduce:
      case StmtKind::kFence: return s;
      case StmtKind::kBlock: {
        std::vector<Stmt> body;
        for (const Stmt& b : s->body) body.push_back(Run(b));
        auto n = std::make_shared<StmtNode>(*s);
        n->body = std::move(body);
        return n;
      }
    }
    return s;
  }

 private:
  std::optional<Interval> Bind(const std::string& var, std::optional<Interval> r) {
    memo_.clear();
    std::optional<Interval> saved;
    if (auto it = vars_.find(var); it != vars_.end()) saved = it->second;
    if (r) {
      vars_[var] = *r;
    } else {
      vars_.erase(var);
    }
    return saved;
  }
  void Restore(const std::string& var, const std::optional<Interval>& saved) {
    memo_.clear();
    if (saved) {
      vars_[var] = *saved;
    } else {
      vars_.erase(var);
    }
  }

  std::optional<Interval> Range(const Expr& e) {
    int64_t k = 0;
    if (AsConst(e, &k)) return Interval{k, k};
    if (e->type != ScalarType::kI64) return std::nullopt;
    switch (e->kind) {
      case ExprKind::kVar: {
        auto it = vars_.find(e->name);
        if (it == vars_.end()) return std::nullopt;
        return it->second;
      }
      case ExprKind::kAdd:
      case ExprKind::kSub:
      case ExprKind::kMul: return RangeOf(ToLinear(e));
      case ExprKind::kDiv:
      case ExprKind::kMod: {
        std::optional<Interval> x = Range(e->args[0]);
        if (!AsConst(e->args[1], &k) || k <= 0 || !x || x->lo < 0) return std::nullopt;
        if (e->kind == ExprKind::kDiv) return Interval{x->lo / k, x->hi / k};
        return Interval{0, std::min(k - 1, x->hi)};
      }
      case ExprKind::kMin:
      case ExprKind::kMax: {
        std::optional<Interval> a = Range(e->args[0]), b = Range(e->args[1]);
        if (!a || !b) return std::nullopt;
        if (e->kind == ExprKind::kMin) return Interval{std::min(a->lo, b->lo), std::min(a->hi, b->hi)};
        return Interval{std::max(a->lo, b->lo), std::max(a->hi, b->hi)};
      }
      case ExprKind::kSelect: {
        std::optional<Interval> a = Range(e->args[1]), b = Range(e->args[2]);
        if (!a || !b) return std::nullopt;
        return Interval{std::min(a->lo, b->lo), std::max(a->hi, b->hi)};
      }
      default: return std::nullopt;
    }
  }

  // The range of l: the sum of its terms' ranges, narrowed by each guard
  // `g < bound` whose terms are a part of l (l = g + rest: the split loop's
  // guarded o*vw + v inside a longer index such as c*91 + o*16 + v).
  std::optional<Interval> RangeOf(const Linear& l) {
    std::optional<Interval> r = TermRange(l);
    if (!r) return r;
    for (const auto& [g, bound] : guards_) {
      std::optional<Linear> rest = Remainder(l, g);
      if (!rest) continue;
      std::optional<Interval> gr = TermRange(g), rr = TermRange(*rest);
      if (!gr || !rr) continue;
      r->hi = std::min(r->hi, rr->hi + std::min(gr->hi, bound - 1));
    }
    return r;
  }

  // l - g when every term of g appears in l with the same coefficient.
  static std::optional<Linear> Remainder(const Linear& l, const Linear& g) {
    Linear rest = l;
    rest.constant -= g.constant;
    int live = 0;
    for (const auto& [atom, c] : g.terms) {
      if (c == 0) continue;
      ++live;
      bool found = false;
      for (auto& [a, d] : rest.terms) {
        if (!found && d == c && SameAtom(a, atom)) {
          d = 0;
          found = true;
        }
      }
      if (!found) return std::nullopt;
    }
    if (live == 0) return std::nullopt;
    return rest;
  }

  std::optional<Interval> TermRange(const Linear& l) {
    Interval r{l.constant, l.constant};
    for (const auto& [atom, c] : l.terms) {
      if (c == 0) continue;
      std::optional<Interval> a = atom->kind == ExprKind::kAdd || atom->kind == ExprKind::kSub ||
                                          atom->kind == ExprKind::kMul
                                      ? std::nullopt
                                      : Range(atom);
      if (!a) return std::nullopt;
      r.lo += c > 0 ? c * a->lo : c * a->hi;
      r.hi += c > 0 ? c * a->hi : c * a->lo;
    }
    return r;
  }

  Expr Simp(const Expr& e) {
    if (e == nullptr || e->args.empty()) return e;
    if (auto it = memo_.find(e.get()); it != memo_.end()) return it->second;
    std::vector<Expr> args;
    for (const Expr& a : e->args) args.push_back(Simp(a));
    Expr out;
    if (IsArith(e->kind) || IsCompare(e->kind) || e->kind == ExprKind::kAnd || e->kind == ExprKind::kOr) {
      out = Binary(e->kind, args[0], args[1]);
    } else {
      auto n = std::make_shared<ExprNode>(*e);
      n->args = args;
      out = n;
    }
    int64_t c = 0;
    if (out->type == ScalarType::kI64 && (out->kind == ExprKind::kDiv || out->kind == ExprKind::kMod) &&
        AsConst(out->args[1], &c) && c > 0) {
      out = DivMod(out, c);
    }
    if (out->type == ScalarType::kI64 && (out->kind == ExprKind::kAdd || out->kind == ExprKind::kSub)) {
      out = Reflatten(out);
    }
    memo_[e.get()] = out;
    return out;
  }

  // A flat index unflattened by a Reshape and flattened again by the load of
  // a contiguous buffer: in the sum, k*c*(x / c) + k*(x % c) is k*x, and
  // k*a*((x / a) % b) + k*(x % a) is k*(x % (a*b)) for x >= 0, repeated until
  // nothing pairs (so ((F/3136)*56 + (F/56)%56)*56 + F%56 is F).
  Expr Reflatten(const Expr& e) {
    Linear l = ToLinear(e);
    bool changed = false;
    for (bool again = true; again;) {
      again = false;
      for (size_t i = 0; i < l.terms.size() && !again; ++i) {
        const Expr mod = l.terms[i].first;
        const int64_t k = l.terms[i].second;
        int64_t a = 0;
        if (k == 0 || mod->kind != ExprKind::kMod || !AsConst(mod->args[1], &a) || a <= 0) continue;
        const Expr& x = mod->args[0];
        for (size_t j = 0; j < l.terms.size() && !again; ++j) {
          const Expr other = l.terms[j].first;
          if (j == i || l.terms[j].second != k * a) continue;
          Expr y;
          int64_t b = 0;
          Expr merged;
          if (IsDivBy(other, a, &y) && SameExpr(y, x)) {
            merged = x;  // truncating division: x == (x / a) * a + x % a for every x
          } else if (other->kind == ExprKind::kMod && AsConst(other->args[1], &b) && b > 0 &&
                     IsDivBy(other->args[0], a, &y) && SameExpr(y, x)) {
            std::optional<Interval> r = Range(x);
            if (!r || r->lo < 0 || a > (int64_t{1} << 31) || b > (int64_t{1} << 31)) continue;
            merged = Mod(x, IntImm(a * b));
          } else {
            continue;
          }
          l.terms[i].second = 0;
          l.terms[j].second = 0;
          l.terms.emplace_back(merged, k);
          again = changed = true;
        }
      }
    }
    return changed ? FromLinear(l) : e;
  }

  // `e` is a / c or a % c with a constant c > 0 (arguments simplified).
  Expr DivMod(const Expr& e, int64_t c) {
    const bool div = e->kind == ExprKind::kDiv;
    const Expr& a = e->args[0];
    int64_t inner = 0;
    if (div && a->kind == ExprKind::kDiv && AsConst(a->args[1], &inner) && inner > 0) {
      std::optional<Interval> x = Range(a->args[0]);
      if (x && x->lo >= 0 && inner <= (int64_t{1} << 31) && c <= (int64_t{1} << 31)) {
        return DivMod(Div(a->args[0], IntImm(inner * c)), inner * c);
      }
    }
    const Linear l = ToLinear(a);
    Linear q, r;
    for (const auto& [atom, coef] : l.terms) {
      if (coef % c == 0) {
        AddTerm(&q, atom, coef / c);
      } else {
        AddTerm(&r, atom, coef);
      }
    }
    if (l.constant >= 0) {
      q.constant = l.constant / c;
      r.constant = l.constant % c;
    } else {
      r.constant = l.constant;
    }
    std::optional<Interval> qr = RangeOf(q), rr = RangeOf(r);
    if (!qr || !rr || qr->lo < 0 || rr->lo < 0) return e;  // truncation is floor only for x >= 0
    const int64_t k = rr->lo / c;
    const bool one_block = rr->hi / c == k;
    if (div) {
      Expr qe = FromLinear(q);
      if (one_block) return Simplify(Add(qe, IntImm(k)));
      return Simplify(Add(qe, Div(FromLinear(r), IntImm(c))));
    }
    if (one_block) {
      r.constant -= k * c;
      return Simplify(FromLinear(r));
    }
    return Mod(FromLinear(r), IntImm(c));
  }

  std::map<std::string, Interval> vars_;
  std::vector<std::pair<Linear, int64_t>> guards_;
  std::map<const ExprNode*, Expr> memo_;
};

}  // namespace

LoopFunc SimplifyIndices(const LoopFunc& f) {
  LoopFunc out = f;
  if (f.body != nullptr) out.body = IndexSimplifier().Run(f.body);
  return out;
}

}  // namespace kiln::loop_ir
