// Winograd convolution: a 3x3, stride-1, undilated f32 Conv with constant
// weights and enough channels (per group) becomes
//   V = kiln.WinogradInput(X)            B^T d B of every input tile
//   M = MatMul(U, V)                     alpha^2 products [K x C] x [C x tiles],
//                                        U = G g G^T made here (a constant)
//   Y = kiln.WinogradOutput(M, bias)     A^T M A of every tile, plus the bias
// (compiler_core/frontend/ops/winograd.h). A grouped Conv (ResNeSt's and
// ResNeXt's, a few groups of 16 channels or more) makes the same transforms
// over all channels and one MatMul batched over (alpha^2, groups), U
// [alpha^2, groups, K/groups, C/groups] by V viewed as [alpha^2, groups,
// C/groups, tiles] (ResNeSt-14d's 128 -> 256 in 2 groups on 56x56 with its
// ReLU, 1 thread, Zen 3: 16.6 ms direct, 8.7 Winograd, ORT 11.4; the whole
// model 79.8 -> 60.3 ms, ORT 75.0). F(4x4, 3x3) does the 9 multiply-adds
// of a direct 3x3 window per output in 36 / 16 = 2.25 (4x fewer) and F(2x2, 3x3)
// in 16 / 4 = 4 (2.25x fewer), at the price of the transforms (memory-bound,
// a fraction of the GEMMs) and U's size (alpha^2 / 9 times the weights).
//
// When it pays (measured on this CPU, bench/models.py): C and K (per group)
// at least kMinWinogradChannels, and a GEMM at least kMinWinogradTiles tiles wide (one
// full vector): F(4x4) when its tiles are that many, else F(2x2) when its are,
// else the Conv stays direct (a 4x4 or smaller map of a few tiles loses the
// vector width and reads alpha^2 / 9 times the weights for nothing). A Conv
// of at most kFewWinogradOutputChannels output channels whose tiles overhang
// its output by a quarter or more stays direct too: the input transform is
// paid per input channel and tile and earns per output channel, and the
// overhang is computed for nothing (1 thread, Zen 5: 128 -> 32 on 14x14 0.057
// ms direct, 0.066 Winograd; on 7x7 0.014 and 0.020; 256 -> 32 on 14x14 0.111
// and 0.145; but 128 -> 48 on 14x14 0.108 and 0.062-0.077, 128 -> 32 on 10x10
// in exact 2x2 tiles 0.029 and 0.027, 64 -> 16 on 56x56 0.265 and 0.19).
// Where the target's f32 lanes are known (`lanes`, the CPU's vector width),
// the tiles must also fill more than one vector, or the GEMM multiplies each
// of U's weights into one vector of products per load and streams U at that
// rate: F(2x2) then stays direct, and F(4x4) where U is over
// kMaxWinogradWeightBytes; F(2x2) stays direct too where U is over it
// (2.25x fewer multiply-adds do not pay for 16/9 the weights from memory).
// The bound, 12 MiB, lies between the U that paid (9.4 MB) and the least
// that did not (16.8 MB). Sapphire Rapids (16 lanes), chains of four 3x3
// C -> C convs plus Relu, Winograd's time over the direct conv's (above 1:
// direct is faster), 1 and 2 threads: on 7x7 (F(2x2), 16 tiles) 1.45 and
// 1.43 at C = 64, 1.29-1.59 at 128 to 512; on 8x8 at 256 1.04 and 1.14; on
// 10x10 (25 tiles) at 256 1.01 and 0.99, at 512 (U 16.8 MB) 1.17 and 1.13;
// on 12x12 (36 tiles) at 256 0.90 and 0.96. F(4x4) over 16 tiles: on 14x14
// at 256 (U 9.4 MB) 0.81 and 0.76, at 512 (37.7 MB) 1.15 and 1.01; on 13x13
// at 384 (21 MB) 1.27 and 1.14; over 25 tiles (20x20) at 384 0.75 and 0.63.
// ResNet-18's three 512 -> 512 on 7x7 direct: the model 1.2x at 1 thread.
// These rules hold where the direct conv's register blocks take
// kDirectChannelBlock output channels; other channel counts leave it
// narrower blocks, and Winograd as above: RetinaNet's 256 -> 819 class
// logits (blocks of 7) on 16x16 (U 30 MB) 8.4 ms direct, 5.2 Winograd; on
// 8x8 3.0 and 2.0.
// Numerics: the transforms are exact in f32 for F(2x2) and lose about one
// decimal digit for F(4x4) (errors of ~1e-6 relative at C = 512, measured by
// WinogradConvolutionTest against the direct Conv).
#pragma once

#include <cstdint>

#include "compiler_core/passes/pass.h"

namespace kiln {

inline constexpr int64_t kMinWinogradChannels = 16;
inline constexpr int64_t kMinWinogradTiles = 16;
inline constexpr int64_t kFewWinogradOutputChannels = 32;
inline constexpr int64_t kMaxWinogradWeightBytes = int64_t{12} << 20;
inline constexpr int64_t kDirectChannelBlock = 8;

class WinogradConvolution : public GraphPass {
 public:
  // `lanes`: the target's f32 lanes; 0 leaves the vector rules out.
  explicit WinogradConvolution(int64_t lanes = 0) : lanes_(lanes) {}
  std::string name() const override { return "winograd_convolution"; }
  absl::StatusOr<bool> Run(Graph& graph) override;

 private:
  int64_t lanes_;
};

}  // namespace kiln
