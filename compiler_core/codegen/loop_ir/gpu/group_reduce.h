// Block-level code of the GPU lowerings whose threads work in groups (a row
// of a reduction, of a TopK): the sequence of a block's thread loops and the
// uniform statements between them, and the combine of one value per thread
// over each group of `tr` consecutive threads (warp shuffles, then shared
// memory across the group's warps).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "compiler_core/codegen/loop_ir/gpu/lower.h"
#include "compiler_core/codegen/loop_ir/loop_ir.h"

namespace kiln::loop_ir::gpu {


// The smallest power of two >= n (1 for n <= 1).
int64_t Pow2Ceil(int64_t n);

// The statements of a block (inside its gpu_block loop): thread loops
// (variable "tid", `bt` threads), each wrapped in a common per-thread
// prologue (the Lets every thread loop needs), and uniform statements
// between them. Consecutive thread loops are separated by a barrier in a
// kernel with shared memory.
class ThreadLoops {
 public:
  ThreadLoops(int64_t bt, std::function<Stmt(Stmt)> prologue);

  // A statement of the open thread loop (opening one, which starts with the
  // pending statements, if none is open).
  void Emit(Stmt s);
  // Ends the open thread loop: the next Emit opens another.
  void Close();
  // Uniform code between thread loops (a warp_reduce).
  void Uniform(Stmt s);
  // What the next thread loop starts with (a fold of shared partials).
  void StartNextWith(Stmt s);
  // Every statement, in order.
  Stmt Finish();

 private:
  int64_t bt_;
  std::function<Stmt(Stmt)> prologue_;
  std::vector<Stmt> out_, open_, pending_;
};

// How groups of `tr` consecutive threads of a block of `bt` combine the
// one-element local buffer `part` that every thread wrote in the open
// thread loop: from the next thread loop on, every thread of a group holds
// the combination of its group's values in `part`. `op` is "sum", "max",
// "min" (floats: NaN-propagating, as warp_reduce) or "prod" (floats only).
// Groups of up to a warp use warp shuffles; wider groups then put one
// partial per warp into `partials` (shared, PartialsNeeded elements) and
// the next thread loop folds the group's slots in order. A product, which
// warp_reduce has not, goes through `partials` from every thread. `tag`
// prefixes the fold's loop variable.
void CombineInGroups(ThreadLoops& tl, const Buffer& part, const std::string& op, int64_t tr, int64_t bt,
                     const Buffer& partials, const std::string& tag);

// Elements of `partials` CombineInGroups needs (0: none).
int64_t PartialsNeeded(const std::string& op, int64_t tr, int64_t bt);

}  // namespace kiln::loop_ir::gpu
