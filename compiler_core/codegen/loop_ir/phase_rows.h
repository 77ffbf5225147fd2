// Input rows packed by stride phase, shared by the direct and channel-vector
// convs (lower_conv.h), the pool (lower_pool.h) and the Winograd input
// transform's padded plane (lower_winograd.h, stride 1). One input row of a
// strided window is stored as sw phase rows of wq columns, xp[(prow*sw +
// ph)*wq + q] = x[row + (col0 + q)*sw + ph - pad_left], so that tap kw of
// vector column q reads phase (kw*dw) % sw at q + (kw*dw) / sw: unit-stride
// vectors for any stride. A row inside the input stores, per phase, the
// vectors whose columns all lie inside as plain loads (no per-lane test, no
// masked load) and tests each lane's column only in the vectors at the
// row's ends; a row in the padding stores `fill` throughout.
#pragma once

#include <cstdint>

#include "compiler_core/codegen/loop_ir/loop_ir.h"

namespace kiln::loop_ir {

struct PhaseRowPack {
  Buffer x, xp;
  Expr x_row;       // flat index in x of the input row's column 0 (unused where the row is outside)
  Expr row_inside;  // whether the input row lies inside the input
  Expr prow;        // the packed row: phase rows prow*sw .. prow*sw + sw - 1
  Expr col0 = IntImm(0);  // the first packed output column (a column split's start), constant or not
  int64_t w = 1, sw = 1, pad_left = 0;  // input width, stride, left pad
  int64_t wq = 1, vw = 1;               // packed columns per phase row (a multiple of vw), vector width
  double fill = 0.0;                    // the value of the padding
};

// The statement that packs one row (loops "pp_", "pq_" and "pv_", vectorized
// over "pv_"). Where col0 is not a constant, every vector tests its lanes.
Stmt PackPhaseRow(const PhaseRowPack& p);

}  // namespace kiln::loop_ir
