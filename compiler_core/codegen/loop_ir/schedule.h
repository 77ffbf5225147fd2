// Schedule primitives on loop IR: each rewrites the loops named `var` (every
// loop of that name in the statement) and returns the new tree, or
// INVALID_ARGUMENT when no such loop exists or the rewrite does not apply.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler_core/codegen/loop_ir/loop_ir.h"

namespace kiln::loop_ir {

// How split handles an extent that the factor does not divide.
enum class TailStrategy {
  kGuard,  // ceil(extent/factor) outer iterations, the body guarded by an If
           // (vectorized: the If becomes a lane mask: masked loads/stores)
  kPeel,   // floor(extent/factor) full blocks, then a serial loop `<inner>_tail`
};

// for (v, 0, N) B  ->  for (outer, 0, ceil(N/f)) for (inner, 0, f) B[v := outer*f + inner]
// (with the tail strategy when f does not divide N; N must be constant).
absl::StatusOr<Stmt> Split(const Stmt& s, const std::string& var, int64_t factor,
                           const std::string& outer, const std::string& inner,
                           TailStrategy tail = TailStrategy::kGuard);
// Permutes a perfect nest of the loops `order` (outermost first): the loops
// must be directly nested in some order, with the body under the innermost.
absl::StatusOr<Stmt> Reorder(const Stmt& s, const std::vector<std::string>& order);
// for (outer, 0, A) for (inner, 0, B) body  ->  for (fused, 0, A*B) body[outer := fused / B, inner := fused % B]
absl::StatusOr<Stmt> Fuse(const Stmt& s, const std::string& outer, const std::string& inner,
                          const std::string& fused);
// Marks loops; vectorize and unroll need a constant extent (vectorize: <= 64,
// unroll: <= 64); parallel must be the outermost loop of the kernel (checked
// by Verify).
absl::StatusOr<Stmt> Vectorize(const Stmt& s, const std::string& var);
absl::StatusOr<Stmt> Unroll(const Stmt& s, const std::string& var);
absl::StatusOr<Stmt> Parallel(const Stmt& s, const std::string& var);

}  // namespace kiln::loop_ir
