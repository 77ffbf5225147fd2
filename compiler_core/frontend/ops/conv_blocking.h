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
#pragma once

#include <cstdint>
#include <vector>

#include "compiler_core/ir/tensor.h"

namespace kiln::ops {

// B: 16 output channels, one AVX-512 vector of f32 (two of AVX2, four of
// SSE). Every block lies within one group (the pass requires K/group % B == 0).
inline constexpr int64_t kConvWeightBlock = 16;

// Wb from f32 W [K, C/group, k...] with K % block == 0.
Tensor BlockConvWeights(const Tensor& w, int64_t block);

// W from Wb (the inverse of BlockConvWeights; the block is Wb's last dim).
Tensor UnblockConvWeights(const Tensor& wb);

// W's dims from Wb's: [K/B, C/g, k..., B] -> [K, C/g, k...]. Empty when
// `wb` has fewer than 4 dims.
std::vector<int64_t> UnblockedWeightDims(const std::vector<int64_t>& wb);

// Floats the CPU's conv kernels may pack on their stack for one task.
inline constexpr int64_t kMaxConvPackFloats = 128 * 1024;

// Floats of the channel-vector kernel's pack of the input rows one output
// row reads: `cg` channels of (kh - 1) * dh + 1 rows, each wide enough for
// ow outputs at stride sw of a kw-tap window dilated by dw, rounded up to
// whole vectors of `lanes`. It must stay within kMaxConvPackFloats.
int64_t ChannelVectorRowFloats(int64_t cg, int64_t kh, int64_t dh, int64_t ow, int64_t sw, int64_t kw, int64_t dw,
                               int64_t lanes);

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
