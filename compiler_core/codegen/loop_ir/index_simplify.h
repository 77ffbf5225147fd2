// Index simplification on loop IR: integer division and remainder of index
// expressions, cancelled where the loop bounds prove them away. Data movement
// composes its index rules (Reshape unflattens a flat index with / and %,
// Transpose permutes, Concat selects), so a Reshape -> Transpose -> Reshape
// shuffle reads x[((c*784 + h*28 + w) / 28) % 28 ...] per element; knowing
// 0 <= w < 28 (the loop, or the guard of a split loop's tail) that is h, and
// the inner loop becomes a contiguous vector access instead of a gather with a
// division per lane.
//
// Rules, for an i64 expression a = c*q + r whose parts are both provably
// non-negative (so C's truncating division is floor division):
//   a / c  ->  q + r / c,  and q + k when k*c <= r < (k+1)*c
//   a % c  ->  r % c,      and r - k*c then
//   (x / a) / b  ->  x / (a*b)  for x >= 0
// Ranges come from loop extents, Let values, and If guards of the form
// `e < N` (the tail guard Split adds), which bound exactly the expression e.
#pragma once

#include "compiler_core/codegen/loop_ir/loop_ir.h"

namespace kiln::loop_ir {

LoopFunc SimplifyIndices(const LoopFunc& f);

}  // namespace kiln::loop_ir
