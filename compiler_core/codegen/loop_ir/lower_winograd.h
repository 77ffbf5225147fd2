// "winograd_input" and "winograd_output" workloads on loop IR: the two
// transforms of a Winograd convolution (compiler_core/frontend/ops/winograd.h;
// the GEMMs between them are matmul workloads).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler_core/codegen/loop_ir/lower.h"
#include "compiler_core/frontend/ops/winograd.h"

namespace kiln::loop_ir {

// A Winograd transform node of a workload: its matrices, its tile grid (for
// the output transform the grid's c is the output channels K), and the
// workload inputs holding X (input) or M (output) and the bias (-1: none).
// Shared with the GPU lowering (loop_ir/gpu/lower_winograd.h).
struct WinogradForm {
  const Node* node = nullptr;
  const ops::WinogradTransform* t = nullptr;
  ops::WinogradGrid grid;
  int x_arg = -1, bias_arg = -1;
};

// The kinds' matches: a kiln.WinogradInput alone; a kiln.WinogradOutput (+
// bias) with an elementwise epilogue of the output's shape.
absl::StatusOr<WinogradForm> AnalyzeWinogradInput(const Graph& workload);
absl::StatusOr<WinogradForm> AnalyzeWinogradOutput(const Graph& workload);

// The transforms' arithmetic on expressions, shared by the CPU and GPU
// lowerings. sum_i coef[i] * e[i] over the non-zero coefficients (adds and
// subtracts for +-1, fma otherwise); 0 when every coefficient is.
Expr WinogradCombine(const std::vector<double>& coef, const std::vector<Expr>& e);

// Values computed once: each binding a let (an f32 variable named prefix +
// number) around the statements that read it, so that shared terms of the
// transforms are not lowered again at every use.
class WinogradBindings {
 public:
  explicit WinogradBindings(std::string prefix) : prefix_(std::move(prefix)) {}
  Expr Bind(Expr value);
  Stmt Around(Stmt body) const;

 private:
  std::string prefix_;
  std::vector<std::string> names_;
  std::vector<Expr> values_;
};

// coef x (a matrix of expressions), every element bound once.
std::vector<std::vector<Expr>> WinogradLeftMultiply(const std::vector<std::vector<double>>& coef,
                                                    const std::vector<std::vector<Expr>>& x, WinogradBindings& let);

// One kiln.WinogradInput. One task per (image, channel) plane:
//
//   parallel for plane:
//     allocate xp[(tiles_h*m + 2) x wp]: the zero-padded plane
//     for th (tile row), for tw in vw-lane chunks (vectorized):
//       d[i][j] = xp[th*m + i, tw*m + j]     (lane stride m: de-interleaved loads)
//       V[a*alpha + b, c, tile] = (B^T d B)[a][b]   (36 or 16 contiguous stores)
//
// Knob: vw (tiles per vector: 4, 8, 16; default the fewest covering a tile row).
WorkloadLowering WinogradInputLowering();

// One kiln.WinogradOutput (+ bias) and an elementwise epilogue (the
// convolution's Relu, residual Add, ...). One task per (image, output channel):
//
//   parallel for (n, k):
//     for th, for tw in vw-lane chunks (vectorized):
//       y = (A^T M[:, k, tile] A) + bias[k]   -> raw[n, k, th*m + i, tw*m + j]
//                                                (lane stride m: masked scatter)
//     epilogue over the tile row's m output rows, contiguous vectors
//
// Knob: vw, as for the input transform.
WorkloadLowering WinogradOutputLowering();

}  // namespace kiln::loop_ir
