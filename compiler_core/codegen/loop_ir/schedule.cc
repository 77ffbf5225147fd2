// Schedule primitives: tree rewrites of the loops named by the caller.
#include "compiler_core/codegen/loop_ir/schedule.h"
#include "compiler_core/codegen/loop_ir/printer.h"
#include "compiler_core/codegen/loop_ir/substitute.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace kiln::loop_ir {
namespace {

using Rewrite = std::function<absl::StatusOr<Stmt>(const Stmt&)>;

// Applies `f` to every loop named `var` (outermost match; its body is not
// searched further) and counts the matches.
absl::StatusOr<Stmt> MapLoops(const Stmt& s, const std::string& var, const Rewrite& f, int* count) {
  if (s == nullptr) return s;
  if (s->kind == StmtKind::kFor && s->var == var) {
    ++*count;
    return f(s);
  }
  if (s->body.empty()) return s;
  auto n = std::make_shared<StmtNode>(*s);
  for (Stmt& c : n->body) {
    ASSIGN_OR_RETURN(c, MapLoops(c, var, f, count));
  }
  return Stmt(n);
}

absl::StatusOr<Stmt> OnLoops(const Stmt& s, const std::string& var, const std::string& what, const Rewrite& f) {
  int count = 0;
  ASSIGN_OR_RETURN(Stmt out, MapLoops(s, var, f, &count));
  if (count == 0) return absl::InvalidArgumentError(absl::StrCat(what, ": no loop named ", var));
  return out;
}

Stmt WithKind(const Stmt& loop, ForKind kind) {
  auto n = std::make_shared<StmtNode>(*loop);
  n->for_kind = kind;
  return n;
}

absl::StatusOr<int64_t> ConstExtent(const Stmt& loop, const std::string& what) {
  int64_t e = 0;
  if (!AsConst(loop->extent, &e)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": loop ", loop->var, " has a non-constant extent ", Print(loop->extent)));
  }
  return e;
}

}  // namespace

absl::StatusOr<Stmt> Split(const Stmt& s, const std::string& var, int64_t factor, const std::string& outer,
                           const std::string& inner, TailStrategy tail) {
  std::string what = absl::StrCat("split ", var, " by ", factor);
  if (factor <= 0) return absl::InvalidArgumentError(absl::StrCat(what, ": factor must be positive"));
  if (outer.empty() || inner.empty() || outer == inner) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": outer and inner need distinct names"));
  }
  return OnLoops(s, var, what, [&](const Stmt& loop) -> absl::StatusOr<Stmt> {
    ASSIGN_OR_RETURN(int64_t n, ConstExtent(loop, what));
    const Stmt& body = loop->body[0];
    Expr x = Add(Mul(Var(outer), IntImm(factor)), Var(inner));
    Stmt inner_body = Substitute(body, var, x);
    if (n % factor == 0) {
      return For(outer, IntImm(n / factor), For(inner, IntImm(factor), inner_body), loop->for_kind);
    }
    if (tail == TailStrategy::kGuard) {
      Stmt guarded = IfThen(Lt(x, IntImm(n)), inner_body);
      return For(outer, IntImm((n + factor - 1) / factor), For(inner, IntImm(factor), guarded), loop->for_kind);
    }
    std::vector<Stmt> parts;
    if (n / factor > 0) {
      parts.push_back(For(outer, IntImm(n / factor), For(inner, IntImm(factor), inner_body), loop->for_kind));
    }
    std::string tail_var = inner + "_tail";
    parts.push_back(For(tail_var, IntImm(n % factor),
                        Substitute(body, var, Add(IntImm(n / factor * factor), Var(tail_var)))));
    return Block(std::move(parts));
  });
}

absl::StatusOr<Stmt> Reorder(const Stmt& s, const std::vector<std::string>& order) {
  std::string what = absl::StrCat("reorder ", absl::StrJoin(order, ", "));
  std::set<std::string> names(order.begin(), order.end());
  if (order.empty() || names.size() != order.size()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": needs distinct loop names"));
  }
  // Find the outermost loop of the set, wherever it is.
  int found = 0;
  std::function<absl::StatusOr<Stmt>(const Stmt&)> visit = [&](const Stmt& st) -> absl::StatusOr<Stmt> {
    if (st == nullptr) return st;
    if (st->kind == StmtKind::kFor && names.count(st->var) > 0) {
      ++found;
      std::map<std::string, Stmt> loops;
      Stmt cur = st;
      for (size_t i = 0; i < order.size(); ++i) {
        if (cur == nullptr || cur->kind != StmtKind::kFor || names.count(cur->var) == 0) {
          return absl::InvalidArgumentError(
              absl::StrCat(what, ": the loops are not perfectly nested under ", st->var));
        }
        loops[cur->var] = cur;
        if (i + 1 < order.size()) cur = cur->body[0];
      }
      Stmt body = cur->body[0];
      for (size_t i = order.size(); i-- > 0;) {
        const Stmt& l = loops[order[i]];
        body = For(l->var, l->extent, body, l->for_kind);
      }
      return body;
    }
    if (st->body.empty()) return st;
    auto n = std::make_shared<StmtNode>(*st);
    for (Stmt& c : n->body) {
      ASSIGN_OR_RETURN(c, visit(c));
    }
    return Stmt(n);
  };
  ASSIGN_OR_RETURN(Stmt out, visit(s));
  if (found == 0) return absl::InvalidArgumentError(absl::StrCat(what, ": no such loops"));
  return out;
}

absl::StatusOr<Stmt> Fuse(const Stmt& s, const std::string& outer, const std::string& inner,
                          const std::string& fused) {
  std::string what = absl::StrCat("fuse ", outer, " and ", inner);
  return OnLoops(s, outer, what, [&](const Stmt& loop) -> absl::StatusOr<Stmt> {
    const Stmt& in = loop->body[0];
    if (in->kind != StmtKind::kFor || in->var != inner) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": ", inner, " is not directly inside ", outer));
    }
    ASSIGN_OR_RETURN(int64_t a, ConstExtent(loop, what));
    ASSIGN_OR_RETURN(int64_t b, ConstExtent(in, what));
    Stmt body = Substitute(in->body[0], outer, Div(Var(fused), IntImm(b)));
    body = Substitute(body, inner, Mod(Var(fused), IntImm(b)));
    return For(fused, IntImm(a * b), body, loop->for_kind);
  });
}

absl::StatusOr<Stmt> Vectorize(const Stmt& s, const std::string& var) {
  std::string what = absl::StrCat("vectorize ", var);
  return OnLoops(s, var, what, [&](const Stmt& loop) -> absl::StatusOr<Stmt> {
    ASSIGN_OR_RETURN(int64_t e, ConstExtent(loop, what));
    if (e > 64) return absl::InvalidArgumentError(absl::StrCat(what, ": extent ", e, " is wider than 64 lanes"));
    return WithKind(loop, ForKind::kVectorized);
  });
}

absl::StatusOr<Stmt> Unroll(const Stmt& s, const std::string& var) {
  std::string what = absl::StrCat("unroll ", var);
  return OnLoops(s, var, what, [&](const Stmt& loop) -> absl::StatusOr<Stmt> {
    ASSIGN_OR_RETURN(int64_t e, ConstExtent(loop, what));
    if (e > 64) return absl::InvalidArgumentError(absl::StrCat(what, ": extent ", e, " is over 64"));
    return WithKind(loop, ForKind::kUnrolled);
  });
}

absl::StatusOr<Stmt> Parallel(const Stmt& s, const std::string& var) {
  std::string what = absl::StrCat("parallel ", var);
  return OnLoops(s, var, what, [&](const Stmt& loop) -> absl::StatusOr<Stmt> {
    RETURN_IF_ERROR(ConstExtent(loop, what).status());
    return WithKind(loop, ForKind::kParallel);
  });
}

}  // namespace kiln::loop_ir
