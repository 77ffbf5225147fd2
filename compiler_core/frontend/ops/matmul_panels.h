// A matrix product's constant B stored in column panels: kiln.PackedMatMul.
//
// B [K, N] (a MatMul's, or a Gemm's once transB is applied) stored as
// Bp [P, K, L], P = ceil(N / L): panel p holds columns p*L .. p*L+L-1, row
// after row, so element (k, n) is at (n / L) * K * L + k * L + n % L and the
// columns past N in the last panel are zeros. With L the target's f32 lanes,
// one vector of a panel row is one aligned, contiguous load, and a register
// tile's walk down K reads each of its panels front to back. The CPU's
// matmul kernel reads B's rows in place otherwise, one piece of each row
// N floats apart (a cache line and often a page per row of K), or packs them
// into such panels in every run. The packed_matmul_weights pass
// (compiler_core/passes/packed_matmul_weights.h) makes Bp once at compile
// time; the interpreter evaluates the product through the B it came from.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "compiler_core/ir/tensor.h"

namespace kiln::ops {

// Bp's flat offset of B's element (r, c), its panels `lanes` wide over K
// rows.
inline int64_t PanelOffset(int64_t k, int64_t lanes, int64_t r, int64_t c) {
  return (c / lanes * k + r) * lanes + c % lanes;
}

// Bp [ceil(N / lanes), K, lanes] from f32 B [K, N] (transposed: B [N, K]).
Tensor PackMatMulColumns(const Tensor& b, int64_t lanes, bool transposed);

// B [K, n] from Bp [P, K, L] (the inverse of PackMatMulColumns).
Tensor UnpackMatMulColumns(const Tensor& bp, int64_t n);

// Whether a kiln.PackedMatMul is a Gemm (A 2-D, or a C, or transA) rather
// than a MatMul whose batches of A share B: the interpreter and the CPU
// lowering read it by this one rule.
inline bool PackedProductIsGemm(size_t a_rank, bool has_c, bool trans_a) { return a_rank == 2 || has_c || trans_a; }

// Whether Bp's dims [P, K, L] hold a B of n columns: rank 3, L >= 1, and n
// within the last panel ((P - 1) * L < n <= P * L).
bool HoldsColumns(const std::vector<int64_t>& bp, int64_t n);

}  // namespace kiln::ops
