// GPU lowering of the "matmul" kind: one MatMul/Gemm (batch and broadcast
// batch dims, transA/transB, alpha/beta, C broadcast; the analysis of
// loop_ir/lower_matmul.h) and its elementwise epilogue, fp32.
//
// Three kernels, chosen by the knobs:
//
// Tiled (the default unless M = 1): the tiled GEMM of gpu/gemm_tiling.h,
// knobs bm, bn, bk, tm, tn, sk, vw (see there). Batches are in the grid; A
// and B are read through their strides (a transposed operand is loaded
// along its contiguous axis and transposed into shared memory); the store
// applies alpha, beta * C and the epilogue (lower_matmul.h
// MatMulOutputStores) to each output element.
//
// gv=2, the dot GEMV (M = 1, B's K contiguous: Gemm transB=1, a Linear
// layer's [N, K] weights, the classifier head): a group of gw consecutive
// threads (a warp or part of one) computes gc output columns; its lanes
// walk K in vectors of vw (gw * vw * 4 contiguous bytes of a row of B per
// step: coalesced), each accumulating per column, and warp_reduce sums the
// group's lanes; the group's first lane stores. Knobs: bt (threads per
// block), gw (8, 16, 32), gc (1, 2, 4), vw (1, 2, 4).
//
// gv=1, the column GEMV (M = 1, B's N contiguous: MatMul [1, K] x [K, N]):
// a block takes ct * vw consecutive columns, ct = bt / ks threads across
// them and ks slices of K down them (a warp reads a contiguous row segment
// of B); the slices' sums meet in shared memory. Knobs: bt, ks (1, 4, 8),
// vw (1, 2, 4).
//
// A split of K across blocks (a second pass over partial tiles) needs a
// workspace or atomics the loop IR has not got: tall-K, small-MN shapes
// take small tiles and slices of K (sk) inside a block instead.
#pragma once

#include "compiler_core/codegen/loop_ir/gpu/lower.h"

namespace kiln::loop_ir::gpu {

GpuWorkloadLowering GpuMatMulLowering();

}  // namespace kiln::loop_ir::gpu
