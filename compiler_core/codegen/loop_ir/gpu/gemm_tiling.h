// The tiled GEMM kernel of the GPU back end, shared by the matmul lowering
// and the implicit-GEMM conv (gpu/lower_matmul.h, gpu/lower_conv.h).
//
// C[b] = A[b] x B[b] (M x K by K x N, b < batches) is cut into bm x bn tiles
// of C, one block each (batch, tile row, tile column in the grid, columns
// fastest, so that consecutive blocks share A's rows). The block walks K in
// steps of sk * bk:
//
//   gpu_block for (blk): batch, m0, n0
//     allocate a_tile: shared [sk*bk][bm + 4], b_tile: shared [sk*bk][bn + 4],
//              acc: local [tm * tn] (sk > 1: partial: shared [sk-1][bm][bn])
//       gpu_thread: acc = 0
//       for kt: k0 = kt * sk * bk
//         gpu_thread: A's bm x (sk*bk) and B's (sk*bk) x bn slices into the
//           tiles, k-major (a_tile[k][m], b_tile[k][n]); every thread loads
//           chunks of vw elements along the operand's contiguous axis
//           (consecutive threads take consecutive chunks: coalesced, ld.v4
//           where the layout allows; A's chunks then B's in one space, so
//           that no thread idles while others load), transposing on the
//           store when the contiguous axis is K; zeros past M, N, K
//         gpu_thread: slice s of the threads (s = tid / (bm/tm * bn/tn))
//           takes its bk rows of the tiles: per k, tm values of a_tile and
//           tn of b_tile into registers (ld.shared.v4), tm x tn fma into acc
//       [sk > 1] gpu_thread: slices 1.. put acc into partial
//       gpu_thread: (slice 0) acc (+ the partials) -> the problem's store,
//         tn columns as vectors of 4 (coalesced st.v4 along N)
//
// A thread's tm rows are tm/4 groups of 4 consecutive rows bm/(tm/4) apart,
// its tn columns likewise: the fragment loads are 16-byte vectors that the
// threads of a quarter warp take from consecutive addresses (no bank
// conflicts), and its output columns are 16 bytes next to its neighbours'.
// The tile rows are padded by 4 floats: the transposing store of a K-major
// operand (at sk * bk = 8 and vw = 4 a warp takes 16 rows x 2 chunks, and
// lane l of each chunk goes to row k + l) then spreads a warp's 32 stores
// over 32 banks, and rows stay 16-byte aligned for the vector loads. (At
// sk * bk = 16 or more, 4 chunks per row, those stores are 2-way conflicted:
// a pad that is a multiple of 4 cannot separate them.)
//
// sk (slice-K) is split-K inside a block: sk thread slices walk disjoint
// K rows of each step and are summed through shared memory before the
// store. It gives a tile more warps when M x N makes few tiles and K is
// long. A split across blocks (partial tiles summed by a second kernel or
// by atomics) needs a workspace or atomics the loop IR has not got; here
// tall-K, small-MN shapes take small tiles (more blocks) and slices.
//
// fp32 on the CUDA cores only. Tensor cores (mma.sync on sm_80, wgmma on
// sm_90, with TF32/BF16/F16 operands) are a later step: they keep this
// kernel's shape (block tile, K walk through shared memory, epilogue through
// the problem's store) and replace the per-thread tm x tn fma tile by a warp
// tile of mma fragments, which needs fragment types and the mma operations
// in the loop IR.
//
// Knobs (ScheduleConfig keys):
//   bm, bn  block tile of C: 16, 32, 64, 128
//   bk      K rows per slice and step: 8, 16, 32
//   tm, tn  register tile of a thread: 1, 2, 4, 8 (bm/tm * bn/tn * sk threads,
//           a multiple of 32, at most 1024)
//   sk      thread slices of K: 1, 2, 4, 8
//   vw      widest global load vector (1, 2, 4); an operand whose layout
//           does not allow it loads narrower vectors or scalars
// Static shared memory: 4 * sk*bk * (bm + bn + 8) (+ 4 * (sk-1)*bm*bn) bytes,
// at most 48 KiB.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compiler_core/codegen/loop_ir/gpu/lower.h"
#include "compiler_core/codegen/loop_ir/loop_ir.h"
#include "compiler_core/codegen/schedule_config.h"

namespace kiln::loop_ir::gpu {

// Where one element of an operand is: `buffer` at `index`, or 0 where
// `inside` (if not null) is false (a convolution's padding).
struct GemmAccess {
  Buffer buffer;
  Expr index;
  Expr inside;
};

// One operand as the kernel reads it: element (row, k) of batch `batch`,
// row an A row (m) or a B column (n). `at` is called with row and k inside
// the matrix and may assume so.
struct GemmOperand {
  std::function<GemmAccess(const Expr& batch, const Expr& row, const Expr& k)> at;
  // Consecutive k are consecutive elements in memory (else consecutive rows are).
  bool k_contiguous = true;
  // The widest vector (1, 2 or 4 lanes) a load along the contiguous axis may
  // take: the index of a chunk's first element is then a provable multiple
  // of it (KnownMultiple), the contiguous extent a multiple of it, and
  // `inside` is null.
  int64_t max_vw = 1;
};

struct GemmShape {
  int64_t batches = 1, m = 1, n = 1, k = 1;
};

// The stores of C[batch][row][col] = value, row < M and col < N. Called
// inside a thread loop, with col lane-varying in a vectorized loop of
// consecutive columns.
using GemmStore =
    std::function<absl::StatusOr<Stmt>(const Expr& batch, const Expr& row, const Expr& col, const Expr& value)>;

struct GemmProblem {
  GemmShape shape;
  GemmOperand a, b;  // a: rows are M; b: rows are N
  GemmStore store;
};

struct GemmTile {
  int64_t bm = 64, bn = 64, bk = 8, tm = 4, tn = 4, sk = 1, vw = 4;
  int64_t threads() const { return (bm / tm) * (bn / tn) * sk; }
  int64_t shared_bytes() const;
  int64_t blocks(const GemmShape& s) const;
};

// The knob names of a GemmTile.
const std::vector<std::string>& GemmKnobs();
// The tile of `c` (missing knobs take GemmTile's defaults, vw the widest
// up to 4 that `max_vw` allows), and back.
GemmTile GemmTileOf(const ScheduleConfig& c, int64_t max_vw);
void SetGemmTile(const GemmTile& t, ScheduleConfig* c);

// INVALID_ARGUMENT naming the knob (and `what`, the workload's node) when
// `t` is out of range, has a block of threads that is not whole warps or
// too many, or more than 48 KiB of shared memory; `max_vw` is the widest
// vector any operand takes.
absl::Status CheckGemmTile(const GemmTile& t, int64_t max_vw, const std::string& what);

// The space over `s`: block tiles up to the first that covers M (N), register
// tiles of 64..256 threads per slice, bk 8 and 16, slices where the tile is
// at most 64 x 64 and K makes two steps of them; vw the widest allowed.
std::vector<GemmTile> EnumerateGemmTiles(const GemmShape& s, int64_t max_vw);

// The default: of the block tiles (most reuse first: 128x128 with 8x8 per
// thread, 128x64, 64x128, 64x64 with 4x4, then smaller), the first that
// makes kDefaultGpuSms blocks, else the one making the most; a block of
// fewer than 256 threads takes slices of K (up to 4) while K gives each at
// least 4 steps; bk 8; vw the widest allowed. A member of the space.
GemmTile DefaultGemmTile(const GemmShape& s, int64_t max_vw);

// The kernel (a gpu_block loop, "blk") of `p` at tile `t` (checked).
absl::StatusOr<Stmt> TiledGemmKernel(const GemmProblem& p, const GemmTile& t);

}  // namespace kiln::loop_ir::gpu
