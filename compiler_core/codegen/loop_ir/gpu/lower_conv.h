// GPU lowerings of the "conv" and "conv_transpose" kinds (the analyses of
// loop_ir/lower_conv.h): a Conv or ConvTranspose, 1-D, 2-D or 3-D, with
// groups, strides, pads, dilations, a bias and an elementwise epilogue, fp32.
//
// conv, implicit GEMM (the default except for depthwise convs): per image
// and group, output channels x output pixels = W x im2col(X), a GEMM of
// M = K/group, N = OD*OH*OW, K = C/group * KD*KH*KW on the tiled GEMM of
// gpu/gemm_tiling.h (knobs bm, bn, bk, tm, tn, sk, vw), images and groups in
// the grid. im2col is never materialised: the B tile's loader gathers
// X[n, g*cg + ci, od*sd - pf + kd*dd, ...] for its (tap, pixel) elements,
// zero in the padding. Pixels take GEMM's N, the axis the threads of a
// warp share, because NCHW keeps them contiguous: the gathers read
// neighbouring pixels of one row together, stores write whole vectors of
// consecutive pixels (im2col(X) x W^T, pixels as M, would scatter the
// stores across channel planes). A pointwise conv (1x1, unit strides, no
// pads) reads X as a plain matrix, with vector loads where H*W allows.
//
// conv, depthwise direct (dw=1: one input and one output channel per group,
// 1-D or 2-D, at most 64 taps): a block takes `rows` output rows of one
// channel plane. Its threads copy the input rows those read (zero padded)
// into shared memory and the channel's taps into registers, then each
// thread computes output pixels (consecutive threads, consecutive pixels)
// as a fma chain over the taps from shared memory. Knobs: dw=1, rows
// (1..16), bt (threads per block: 128, 256).
//
// conv_transpose, gather form: one thread per output element (consecutive
// threads along W), summing over the group's input channels and the taps
// whose input position o + pad - t*dil divides by the stride. Knobs: bt
// (128, 256, 512), un (outputs per thread, 1 or 2).
#pragma once

#include "compiler_core/codegen/loop_ir/gpu/lower.h"

namespace kiln::loop_ir::gpu {

GpuWorkloadLowering GpuConvLowering();
GpuWorkloadLowering GpuConvTransposeLowering();

}  // namespace kiln::loop_ir::gpu
