// Output-channel-blocked convolution weights: kiln.BlockedConv.
//
// A Conv's weights W [K, C/group, k...] stored as Wb [K/B, C/group, k..., B]:
// block b holds output channels b*B .. b*B+B-1 innermost, so the B output
// channels of one input channel and tap are one contiguous run (one vector
// of B floats, or B/vw vectors of vw). The CPU's channel-vector conv kernel
// (codegen/loop_ir/lower_conv.cc, kv=1) multiplies a broadcast input pixel
// by exactly such vectors; with Wb made once at compile time (a constant)
// it reads them in place, where a Conv's kernel packs them from W in every
// run (a transposing gather of every weight once per task). The
// blocked_conv_weights pass makes these
// (compiler_core/passes/blocked_conv_weights.h); the interpreter evaluates
// one through the Conv it came from.
//
// A pointwise conv's weights (1x1, one group) are blocked in chunks of L
// input channels as well: Wb [C/L, K/B, L, 1..., B], one dim more. The
// pointwise kernel's task runs the reduction chunk by chunk (kc = L), every
// block of output channels per chunk, so it then reads each chunk's weights
// as one contiguous run, front to back, which the prefetchers fetch ahead;
// blocked by output channel only, each block's part of a chunk is a short
// run of its own, which the prefetchers do not fetch ahead (Zen 3, 1
// thread, 16 chained 728 -> 728 1x1 convs + ReLU on 8x12, kc = 104, the
// whole chain: from W's rows 19.8 ms, blocked by 4 output channels only
// 19.7, in chunks as well 17.3; ORT 18.6). Which form Wb has follows from
// its rank against X's.
#pragma once

#include <cstdint>
#include <vector>

#include "compiler_core/ir/tensor.h"

namespace kiln::ops {

// B: 16 output channels, one AVX-512 vector of f32 (two of AVX2, four of
// SSE). Every block lies within one group (the pass requires K/group % B == 0).
inline constexpr int64_t kConvWeightBlock = 16;

// B of a pointwise (1x1) conv's blocked weights: 4 output channels, the
// pointwise kernel's block of kb output channels (kb 4, or 8 where the
// target has 32 vector registers), broadcast one at a time against vectors
// of pixels, then reads 16 bytes per 4 channels and input channel, one run
// per weight chunk (above).
inline constexpr int64_t kPointwiseWeightBlock = 4;

// B for a pointwise conv of k output channels: kPointwiseWeightBlock where
// it divides k, else the first of 6, 5 and 3 that does (detection heads:
// 546 = 91 classes x 6 anchors, 255 = 3 x 85), the pointwise kernel's
// channel blocks for such k; 0 where none does (the conv keeps W).
int64_t PointwiseWeightBlock(int64_t k);

// Wb from f32 W [K, C/group, k...] with K % block == 0.
Tensor BlockConvWeights(const Tensor& w, int64_t block);

// L for a pointwise conv of C input and K output channels: all of them up
// to 256; past that the largest divisor of C from 16 to 128 (all of them if
// none, or where the kernel's running sums between chunks, K by a block of
// up to 32 pixels, would outgrow half of kMaxConvPackFloats). The pointwise
// kernel keeps a chunk of its input in L1 (4 Ki floats) for every block of
// output channels: 128 channels of a block of 32 pixels (16 lanes by 2, or
// 8 by 4) or 170 of 24 (8 lanes by 3: Zen 3's default).
int64_t PointwiseWeightChunk(int64_t c, int64_t k);

// Wb [C/L, K/B, L, 1..., B] from a pointwise conv's f32 W [K, C, 1...] with
// K % block == 0 and C % chunk == 0.
Tensor BlockPointwiseWeights(const Tensor& w, int64_t block, int64_t chunk);

// Whether Wb of `wb_rank` dims, the weights of a BlockedConv whose X has
// `x_rank`, is chunked by input channel (BlockPointwiseWeights).
inline bool ChunkedWeights(size_t wb_rank, size_t x_rank) { return wb_rank == x_rank + 2; }

// W from Wb of a BlockedConv whose X has `x_rank` dims (the inverse of
// BlockConvWeights or BlockPointwiseWeights; the block is Wb's last dim).
Tensor UnblockConvWeights(const Tensor& wb, size_t x_rank);

// W's dims from Wb's: [K/B, C/g, k..., B] or [C/L, K/B, L, k..., B] ->
// [K, C/g, k...]. Empty when `wb` is neither for an X of `x_rank` dims.
std::vector<int64_t> UnblockedWeightDims(const std::vector<int64_t>& wb, size_t x_rank);

// Floats the CPU's conv kernels may pack on their stack for one task.
inline constexpr int64_t kMaxConvPackFloats = 128 * 1024;

// Whether a 2-D conv of `reduction` multiply-adds per output (C/group x
// taps) onto oh x ow outputs runs best with output channels in the vector
// lanes (`lanes` of them) rather than output pixels: maps whose rows leave
// more than a tenth of the lanes of whole pixel vectors idle (17 columns in
// two vectors of 16, 56 in four), over reductions of more than 32 (a stem
// over 3 channels spends as much on its input rows as on the taps). Where
// the kernel packs its weights in every run (not `blocked`), only maps of 4
// rows or more and 36 pixels or more, which pay that pack back. The
// channel-vector kernel's default follows it, and the blocked_conv_weights
// pass blocks the weights of such convs (lanes = kConvWeightBlock,
// `blocked`: DLA-34's 512 -> 512 3x3 onto 5x5 1.43 -> 0.49 ms, onto 3x3
// 0.76 -> 0.24, CRNN's 2x2 512 -> 512 onto 1x33 0.28 ms; ORT 0.48, 0.24,
// 0.28).
bool PrefersChannelVectors(int64_t reduction, int64_t oh, int64_t ow, int64_t lanes, bool blocked = false);

}  // namespace kiln::ops
