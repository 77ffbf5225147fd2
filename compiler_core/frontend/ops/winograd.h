// Winograd minimal filtering F(m x m, 3 x 3) (Lavin & Gray, "Fast Algorithms
// for Convolutional Neural Networks", 2015): a 3x3, stride-1 convolution over
// tiles of m x m outputs, each read from an alpha x alpha (alpha = m + 2)
// input tile, as
//
//   Y_tile = A^T [ (G g G^T) (.) (B^T d B) ] A       (.) elementwise, per channel pair
//
// summed over the input channels, which turns the alpha^2 elementwise products
// into alpha^2 matrix products [K x C] x [C x tiles]. The winograd_convolution
// pass rewrites a Conv into kiln.WinogradInput (B^T d B of every tile),
// a batched MatMul with the transformed weights U = G g G^T (a constant) and
// kiln.WinogradOutput (A^T M A, plus the bias); the interpreter and the
// lowerings (codegen/loop_ir/lower_winograd.h) take the matrices from here.
#pragma once

#include <cstdint>
#include <vector>

#include "compiler_core/ir/tensor.h"

namespace kiln::ops {

struct WinogradTransform {
  int64_t m = 0;      // output tile
  int64_t alpha = 0;  // input tile, m + 2
  std::vector<std::vector<double>> bt;  // B^T, alpha x alpha
  std::vector<std::vector<double>> g;   // G, alpha x 3
  std::vector<std::vector<double>> at;  // A^T, m x alpha
};

// F(2x2, 3x3) and F(4x4, 3x3); nullptr for another m.
const WinogradTransform* FindWinogradTransform(int64_t m);

// The tile grid of a Winograd convolution over X [N, C, H, W] padded by
// pad_top/pad_left (and what the output extent leaves at the bottom/right):
// output [N, K, OH, OW] in tiles_h x tiles_w tiles of m x m per image; tile t
// (of N * tiles_h * tiles_w) is image t / (tiles_h * tiles_w), row
// (t / tiles_w) % tiles_h, column t % tiles_w.
struct WinogradGrid {
  int64_t n = 0, c = 0, h = 0, w = 0;
  int64_t pad_top = 0, pad_left = 0;
  int64_t oh = 0, ow = 0;
  int64_t m = 0, alpha = 0;
  int64_t tiles_h = 0, tiles_w = 0;
  int64_t tiles() const { return n * tiles_h * tiles_w; }
};
WinogradGrid MakeWinogradGrid(int64_t n, int64_t c, int64_t h, int64_t w, int64_t pad_top, int64_t pad_left,
                              int64_t oh, int64_t ow, int64_t m);

// U [alpha^2, K, C]: U[a * alpha + b, k, c] = sum_ij G[a][i] G[b][j] W[k, c, i, j]
// for f32 weights W [K, C, 3, 3] (computed in double).
Tensor WinogradWeights(const Tensor& w, const WinogradTransform& t);

}  // namespace kiln::ops
