// Substitution of a loop variable by an expression.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "compiler_core/codegen/loop_ir/loop_ir.h"

namespace kiln::loop_ir {

// Replaces every free use of variable `name` by `value`.
Expr Substitute(const Expr& e, const std::string& name, const Expr& value);
Stmt Substitute(const Stmt& s, const std::string& name, const Expr& value);

}  // namespace kiln::loop_ir
