// The loop IR's textual dump: deterministic, and the format of its tests.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "compiler_core/codegen/loop_ir/loop_ir.h"

namespace kiln::loop_ir {

// Textual dumps (deterministic; the test format).
std::string Print(const Expr& e);
std::string Print(const Stmt& s, int indent = 0);
std::string Print(const LoopFunc& f);

}  // namespace kiln::loop_ir
