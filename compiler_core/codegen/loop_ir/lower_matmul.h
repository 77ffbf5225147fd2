// "matmul" workloads on loop IR: one MatMul/Gemm (batched, broadcast batch
// dims, transA/transB, alpha/beta, C broadcast), or a kiln.PackedMatMul (B
// in column panels: ops/matmul_panels.h), followed by a fused elementwise
// epilogue, f32. The lowering owns its schedule space:
//
//   knob  meaning                                                  default
//   mr    rows of the register block (1..12)                      ~8 (32 registers; else 6),
//                                                                  12 when N fits one vector
//   nr    vectors (of the target's f32 lanes) of the register block ~3 (32 registers; 2 where
//                                                                  that covers more columns in
//                                                                  whole panels; else 2), 4 for one row
//   ku    unroll of the reduction loop                             ~1 (32 registers; else 4)
//   mc    rows per task (rounded up to mr); 0 or missing: ~32       0; B read in place by more
//                                                                  than 64 rows: 1 or 2 register
//                                                                  blocks where those tasks split
//                                                                  more evenly over 2 and 4 threads
//   nc    columns per task (rounded up to nr * lanes); 0 or        0; packed: the widest block
//         missing: all of N                                        that fits, or down to half of
//                                                                  it where tasks split more evenly;
//                                                                  GEMVs: 512, or two halves up to
//                                                                  1024 columns (dot form: any N)
//   kc    K block; 0 or missing: no K blocking, B read in place;   0
//         else B is packed per task and K block into a buffer of
//         kc x columns-per-task floats (at most kMaxPackedBytes);
//         kiln.PackedMatMul's B, in panels since compile time, is
//         read from them in place, K block by K block
//   gv    1: the row-streaming GEMV variant (one row of A, B's     1 for one row and
//         columns contiguous; mr = nr = 1, no kc): B is read row   B beyond kGemvStreamBytes
//         after row, ku rows at a time (default 8), into a task's
//         column accumulators held in a stack buffer (L1)
//         2: the dot-form GEMV (one row of A, B's K contiguous:     2 for one row and
//         Gemm transB=1; mr = nr = 1, no kc): output column j is   B^T beyond kGemvStreamBytes
//         A's row dotted with B's row j, ku rows at a time
//         (default 8) in lane accumulators summed across their
//         lanes; a task's columns are contiguous rows of B, streamed
//         whole
//
// The loop nest (TileMatMul cuts the work up):
//
//   parallel for task in (batch x row block x column block):
//     allocate packed_b[kc x cols]                    (kc > 0)
//     for each K block (the last one peeled):
//       pack B's kc x cols slice into panels of nb = nr * lanes columns
//       for each mr-row block, for each nb-column panel:
//         allocate acc[mr x nb]: init 0 (first block) or the partial sums
//           cached in output 0; for k (unrolled by ku): for i (unrolled mr):
//           for j (vectorized nb): acc = fma(A[m+i, k], B[k, n+j], acc)
//         not the last block: output 0 = acc (partial sums)
//         last block: every output = epilogue(alpha * acc + beta * C)
//   Row tails (M % mr) run 1-row tiles; the column tail (N % nb) runs a tile
//   whose vectorized loop is N % nb lanes wide.
//
// The GEMV variant (gv=1) instead streams B: a register tile walks B down a
// column panel, K rows each nb columns wide and N floats apart, which the
// prefetchers follow at about half of memory bandwidth (a classifier's
// 1280x1000 weights); here every pass over ku rows of B reads them whole:
//
//   parallel for task in (batch x column block):
//     allocate acc[cols]: 0
//     for k in steps of ku: for each vector of the task's columns:
//       acc[j] = fma(A[k+ku-1], B[k+ku-1, n+j], ... fma(A[k], B[k, n+j], acc[j]))
//     every output = epilogue(alpha * acc + beta * C)
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler_core/codegen/loop_ir/graph_expr.h"
#include "compiler_core/codegen/loop_ir/lower.h"
#include "compiler_core/codegen/schedule_config.h"
#include "compiler_core/codegen/target.h"
#include "compiler_core/ir/graph.h"

namespace kiln::loop_ir {

// MatMul (numpy) and Gemm of a workload: Out[b, m, n] = alpha * sum_k A[b, m, k]
// * B[b, k, n] + beta * C[m, n], with the element strides of A, B and C.
struct MatMulSpec {
  const Node* anchor = nullptr;
  int a_arg = 0, b_arg = 1, c_arg = -1;  // workload inputs holding A, B (and C)
  int64_t m = 1, n = 1, k = 1;
  std::vector<int64_t> batch_dims;      // output batch dims (broadcast)
  std::vector<int64_t> a_batch_strides; // per batch dim, 0 where broadcast
  std::vector<int64_t> b_batch_strides;
  int64_t a_stride_m = 0, a_stride_k = 1;  // element strides inside one batch
  int64_t b_stride_k = 0, b_stride_n = 1;
  // kiln.PackedMatMul: B [K, N] stored in column panels of this many
  // columns, element (k, n) at (n / b_panel) * K * b_panel + k * b_panel +
  // n % b_panel (ops/matmul_panels.h); the B strides then do not apply.
  // 0: B at its strides.
  int64_t b_panel = 0;
  bool has_c = false;
  int64_t c_stride_m = 0, c_stride_n = 0;  // C broadcast to [M, N]
  float alpha = 1.0f, beta = 1.0f;
  std::vector<int64_t> out_dims;  // the anchor's output dims: batch_dims, then M, N
  bool has_m_dim = true;          // false for a 1-D A (numpy MatMul drops M)
  // Batch dims of A folded into M because B is the same matrix for all of
  // them (x[T, B, K] @ W[K, N]): M counts the rows of every such batch, row i
  // is batch i / m_rows, row i % m_rows. Empty when nothing was folded.
  std::vector<int64_t> folded_batch_dims;
  int64_t m_rows = 0;
  bool has_n_dim = true;          // false for a 1-D B (drops N)
  int64_t num_batches() const;
};

// The anchor and shapes of a matmul workload. UNIMPLEMENTED when the workload
// is not one (no anchor, two anchors, a node that is no elementwise epilogue),
// INVALID_ARGUMENT when it is one but malformed (shapes that do not agree,
// inputs that are not static f32, outputs not of the anchor's shape).
absl::StatusOr<MatMulSpec> AnalyzeMatMul(const Graph& workload);

// The index over spec.batch_dims (one expression per dim) of the flat batch
// number `batch` (row-major over batch_dims).
std::vector<Expr> MatMulBatchIndex(const MatMulSpec& spec, const Expr& batch);

// The stores of every workload output at row mi, column nj of the batch at
// `batch_idx` (MatMulBatchIndex), flat output offset out_idx, from the raw
// product v = sum_k A*B: alpha * v + beta * C (C broadcast), then the
// epilogue, which reads the anchor's value as that. Shared by the CPU and
// GPU (loop_ir/gpu/lower_matmul.h) lowerings; binds the anchor's value in `ge`.
absl::StatusOr<Stmt> MatMulOutputStores(const Graph& workload, const MatMulSpec& spec, GraphExpr& ge,
                                        const std::vector<Expr>& batch_idx, Expr v, const Expr& mi, const Expr& nj,
                                        const Expr& out_idx);

// Largest buffer a matmul kernel packs B into.
inline constexpr int64_t kMaxPackedBytes = 256 * 1024;

// A GEMV whose B is larger than this defaults to the row-streaming variant
// (gv=1): B comes from memory, not from a cache, whichever way it is read.
inline constexpr int64_t kGemvStreamBytes = 512 * 1024;

// How a matmul kernel is cut up for one schedule: register block, tasks over
// (batch, row block, column block), K blocking.
struct MatMulTiling {
  int64_t mr = 6, nr = 2, ku = 4;
  int64_t nb = 0;             // nr * lanes: columns of a register panel
  int64_t rows_per_task = 0;  // a multiple of mr
  int64_t cols_per_task = 0;  // a multiple of nb
  int64_t kc = 0;             // 0: no K blocking
  bool gemv = false;          // the row-streaming GEMV variant (gv=1)
  bool gemv_dot = false;      // the dot-form GEMV variant (gv=2)
  int64_t row_blocks = 0, col_blocks = 1, num_tasks = 0;
  int64_t pack_floats = 0;    // kc * min(cols_per_task, N rounded up to nb)
  // Unpacked B (kc = 0) whose columns of one task exceed kColsOuterBytes: the
  // task walks column panels outermost and its row blocks within each, so a
  // panel's K x nb strip of B is read from memory once and then from L2,
  // not once per row block. (Row blocks outermost keep A's rows in L1, which
  // is the better order while B's task slice stays in L2.)
  bool cols_outer = false;
  // Each register tile row's mr x K strip of A copied, rows front to back,
  // into a stack buffer that its tiles then read (kAPackMaxFloats at most):
  // where a task's columns are one or two register panels, so that each A
  // row is read by few tiles. Its tiles' broadcasts walk mr rows side by
  // side, mr short streams the prefetchers do not follow; from memory
  // (a Winograd conv's constant U, cold in a model: 16 x 128 x 128 by 128 x
  // 16 tiles) every line then costs a miss's latency. The copy reads the
  // strip as one stream. Zen 3, 1 thread, 40 Winograd 128 -> 128 3x3 convs
  // on 7x7 in a chain: 14.5 -> 8.1 ms (ORT 8.6). Wider tasks read each A row
  // for several panels, from L1 after the first: there the copy only costs
  // (VGG-11's 36 x 256 x 256 by 256 x 196, 12 panels: 13.0 -> 16.5 ms).
  bool pack_a = false;
};

// Floats of A's mr x K strip past which a tile row reads A in place.
inline constexpr int64_t kAPackMaxFloats = 8192;

// B's bytes per task beyond which an unpacked task walks its column panels
// outermost (MatMulTiling::cols_outer): a 1 MiB L2 (a 192 x 768 slice
// in L2 ran as fast or faster rows outermost).
inline constexpr int64_t kColsOuterBytes = 1024 * 1024;
MatMulTiling TileMatMul(const MatMulSpec& spec, const ScheduleConfig& config, const CpuTarget& target);

WorkloadLowering MatMulLowering();

}  // namespace kiln::loop_ir
