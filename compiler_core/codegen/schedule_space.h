// Schedule spaces of the CPU back end, for a workload on a target: its kind,
// whether it compiles, a deterministic enumeration of its valid points, a
// heuristic default, and validation of any config. Each answer comes from the
// lowering that takes the workload (compiler_core/codegen/loop_ir/lower.h:
// AllLowerings), which owns its knobs and space.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "compiler_core/codegen/schedule_config.h"
#include "compiler_core/codegen/target.h"
#include "compiler_core/ir/graph.h"

namespace kiln {

// The version every tuning record is filed under and every measurement task
// carries. Bump it whenever any lowering's space or the meaning of a knob
// changes, so that a record of an older space misses instead of steering the
// new code generator. 2002: every dtype and elementwise DAGs on the loop IR
// (the number kept its old spelling, matmul version * 1000 + loop-IR version,
// so that records written before the spaces were unified still hit). 2003:
// matmul batches sharing B fold into M (mc counts their rows). 2004: the
// depthwise conv plane variant (dw=1). 2005: matmul mr up to 12. 2006: column
// blocks (nc) for matmuls of up to 64 rows; the pointwise conv variant splits
// its output-channel blocks across tasks (ks). 2007: the row-streaming GEMV
// (gv); the pointwise conv variant's pixel tail ends at the last pixel.
// 2008: resizes of H and W whose rows do not shrink run separably (tasks
// split planes, not elements); the pointwise conv variant computes up to 4
// left pixels as dot products; conv_pair workloads; the dot-form GEMV (gv=2).
// 2009: matmuls of up to 64 rows pack a B beyond 4 MiB (kc, mc points); an
// unpacked task whose B slice exceeds an L2 walks column panels outermost.
// 2010: the conv channel-vector variant (kv=1); the GPU spaces of every
// kind (loop_ir/gpu/lower_<family>.h documents each one's knobs). 2011: the
// pointwise conv variant blocks output channels by 3, 5, 6 or 7 where 4 does
// not divide them. 2012: kiln.BlockedConv (weights blocked at compile time
// for the channel-vector variant, its only points; 2-pixel blocks); the
// direct conv variant's column splits (cs); pointwise input packs; few-row
// MatMuls pack B from 2 MiB. 2013: reductions whose trailing reduced axes
// run as one flat axis offer vector widths up to that run's length (a 7x7
// map's 49), not the last axis's. 2014: conv pairs in bands of output rows
// (rb), a task per band running every channel block over its input rows.
// 2015: unpacked MatMuls of more than 64 rows offer row tasks of one or two
// register blocks (mc); packed column blocks narrow to split tasks evenly
// between threads; GEMVs offer two half-width tasks. 2016: recurrences
// stream their recurrent weights in passes of kb rows. 2017: direct convs'
// defaults model FMA units as wide as the target's (16 lanes cost what 8 do
// on Zen 5), as do depthwise planes under windows of 25 taps or more.
// 2018: pointwise convs offer a task of every pixel block (tasks split the
// output channels), their default where the weights outgrow L2 and the input
// fits it. 2019: pointwise convs run long reductions in chunks (kc).
// 2020: channel-vector convs' defaults take register blocks that do not
// spill on 16 registers (accumulators, weight vectors and broadcast pixels).
// 2021: channel-vector convs whose weights outgrow half of L2 run a row's
// register blocks chunk by chunk of input channels (ChannelVectorChunk); on
// AVX2, stores under constant masks are plain stores (masked_stores.h), and
// Winograd transforms and direct convs guard only a row's last chunk or block
// (so that packages compiled before are not served from the cache).
// 2022: contiguous vector accesses are addressed with scalar arithmetic
// (llvm_lowering.cc FirstLane): AVX2 GEMMs unrolled in K no longer spill, so
// records measured before (which ranked those schedules low) retire; MatMuls
// pack B from three quarters of an L2 under 1 MiB (CpuTarget::L2Bytes).
// 2023: pointwise convs over few channels whose input and output pass twice
// the L2 offer, and default to, tasks of several pixel blocks
// (PointwiseStreamRows in lower_conv.cc).
// 2024: a MatMul's M % mr last rows are one register tile (were row by row);
// a nest's innermost rows that are not whole vectors end in one narrower
// vector instead of lane masks on every vector (ScheduleNest); exp's
// polynomial in Estrin's form. The same schedules are other kernels. No
// conv pairs on 16-register CPUs; grouped 3x3 convs through Winograd.
// 2025: direct convs offer, and default to, column splits until a task's
// input pack fits half of L2, and their block cost counts that pack streamed
// from L2 where it outgrows L1 (DirectPackFits, DirectBlockCost).
// 2026: whether a pointwise conv's weights pass L2 (its tasks then take
// every pixel block, PointwiseAllPixels) is judged against the target's own
// L2, no longer against 1 MiB on every CPU.
// 2027: channel-vector convs read their input in place (no row packs), run
// blocks of fewer than 4 pixels over chunks whose weights stay in L1, and
// run the chunks outermost where a task's weights outgrow half of L2
// (ChannelVectorChunk, ChannelVectorChunksOuter). The same schedules are
// other kernels.
// 2028: depthwise convs gain the row variant (dw=2: the input read in place,
// sums stored through the epilogue at once), their default on rows of 4
// vectors or more (DepthwiseRowsPay); strided vector loads read whole
// vectors and shuffle.
// 2029: the pixels a pointwise conv's full blocks leave, one vector at most,
// join its last full block (PointwiseMergedChannels); exp, sigmoid and tanh
// inline in fewer multiply-adds (vector_math.cc). The same schedules are
// other kernels.
// 2030: a product's constant B in column panels made at compile time
// (kiln.PackedMatMul, the packed_matmul_weights pass): the same models are
// other workloads and other packages.
// 2031: softmax's exp(x - max) in fewer instructions (exp_nonpositive);
// pointwise convs whose output channels 4 does not divide blocked by 6, 5
// or 3 (other workloads): the same schedules are other kernels.
// 2032: depthwise convs gain blocks of 8 vectors (plane variant) and of up
// to 8 (row variant), their default where the window's weights do not stay
// in the registers (DepthwiseAccumulators).
// 2033: stride-2 depthwise convs onto rows of 28 columns or more default to
// the direct variant on AVX2 (DepthwiseDirectPays): untuned packages built
// before are other kernels.
// 2034: pointwise tasks that run reduction chunks pack their input on maps
// of any size (PointwisePacksInput): the same schedules are other kernels.
// 2035: matmul tasks of one or two column panels copy each tile row's strip
// of A before its tiles (MatMulTiling::pack_a): the same schedules are other
// kernels.
// 2036: pointwise convs default to tasks of one pixel block, without
// reduction chunks, on a 2 MiB L2 (PointwiseBlocksFromL2): untuned packages
// built before are other kernels.
// 2037: blocked channel-vector convs default to register blocks that fit the
// registers where spills do not pay (SpilledBlocksPay: every target but Zen);
// a host with AMX tiles that LLVM names after a core without them is named
// sapphirerapids or graniterapids (CpuNameForFeatures): untuned packages
// built before are other kernels.
// 2038: on a 2 MiB L2, pointwise convs that add a residual default to tasks
// of a channel slice over every pixel block where their weights take a
// quarter of the L2 or their output all of it (PointwiseAllPixels); past
// twice the L2 over planes that are not whole vectors, to packed runs of
// blocks that fill a quarter of it (PointwiseStreamRows): untuned packages
// built before are other kernels.
// 2039: on a 2 MiB L2, pointwise convs over 128 input channels or more
// default to 24 accumulators (8 channels by 3 vectors) instead of 16:
// untuned packages built before are other kernels.
// 2040: pointwise convs whose channels fill whole half vectors only take the
// pixels past the full blocks as 8-lane dot products (PointwiseDotLanes):
// the same schedules are other kernels.
// 2041: on a 2 MiB L2, pointwise convs whose weights pass from L3 and whose
// input stays in the L2 default to tasks of the blocks whose input fills a
// quarter of it, of 24 accumulators: untuned packages built before are
// other kernels.
// 2042: those tasks wherever they save 4 passes over the weights or more
// (timm Xception-41's 728 -> 728 on 19x19, 7 blocks), not only over 8
// blocks: untuned packages built before are other kernels.
// 2043: direct convs whose output channels 4 does not divide take blocks of
// their divisors from 3 to 8 (OutputChannelBlocks), as pointwise ones do:
// new points, and such convs' defaults change.
// 2044: pointwise tasks run channel split by channel split over the pixel
// chunks, not chunk by chunk: the same schedules are other kernels.
// 2045: pointwise tasks pack their input where a block's input column starts
// off the cache lines and outgrows L1 (PointwiseColumnOffLines), and such
// convs whose weights pass from L3 take no more blocks per task than the
// pack holds: the same schedules are other kernels, and defaults change.
// 2046: channel-vector conv blocks fence their taps, run their tap rows
// inside the map without a branch and skip the padding's pixels: the same
// schedules are other kernels (4 x 6 onto 28 columns no longer spills).
// 2047: Winograd output transforms write a tile row's columns interleaved,
// as contiguous vectors, not scatters: the same schedules are other kernels;
// pointwise convs that take every pixel block from L2 over weights from L3
// no longer prefer it to reduction chunks, and some defaults change (8 by 2
// chunked for 4 by 4 over every block); a pointwise default block wider
// than the map gives way to one within it (5x5: 8 by 1 for 8 by 2).
// 2048: depthwise convs gain the channel-vector variant (dw=3), the default
// at stride 1 onto small maps on 16-lane targets; store groups at lane
// strides past 8 are transposes by shuffles (no scatters).
// 2049: the channel-vector variant is also the default onto rows of up to
// 12 columns under 3x3 windows and of 16 to 24 under 5x5 or wider, unless
// the epilogue reads a map-sized operand; at stride 2 the row variant (dw=2)
// is the default onto rows of 32 columns or more on every target, at stride
// 1 under 3x3 onto rows of 48 or more.
// 2050: a matmul of more than 64 rows whose register block cuts no row
// tasks that two threads share evenly defaults to a taller block whose tasks
// do (65 rows: 12-row tasks of 12 x 2, not 32-row tasks of 8 x 2).
// 2051: multi-stage reductions whose rows are not their leading axis (a
// batch of one) or pass through data movement run row blocks in parallel:
// new points (tasks=16) and defaults for such workloads.
// 2052: matmuls of 65 to 128 rows also take all rows in one row block with
// the columns in halves or quarters (new points), the default where no
// row tasks of a block that fits share evenly (65 rows in 8 x 3 blocks).
inline constexpr int kScheduleSpaceVersion = 2052;

// The kind of the lowering that takes the workload ("matmul", "elementwise",
// "data_movement", "reduction", "conv", "conv_transpose", "pool", "resize",
// "topk", "index"), or "unsupported" when none does (operators no lowering
// takes, dynamic shapes, a malformed workload). The one vocabulary of kinds:
// fusion groups, reports and the tuning database use it.
std::string WorkloadKind(const Graph& workload);

// WorkloadKind, with nullopt for "unsupported": the classifier the fusion
// partitioner grows groups by (FusionOptions::classify).
std::optional<std::string> LoweringKind(const Graph& workload);

// True exactly when the CPU back end compiles the workload (WorkloadKind is
// not "unsupported"): the fusion partitioner asks this before it hands a
// multi-node group to codegen.
bool CanCompile(const Graph& workload);

// Every point of the workload's space, in a deterministic order; points that
// can only repeat a smaller one on this shape (a vector wider than the data, a
// register block taller than the matrix, ...) are left out. Empty for an
// unsupported workload.
std::vector<ScheduleConfig> EnumerateSchedules(const Graph& workload, const CpuTarget& target);

// Heuristic choice, always a member of EnumerateSchedules (or empty if none).
ScheduleConfig DefaultSchedule(const Graph& workload, const CpuTarget& target);

// OK when `config` can be compiled for the workload on `target` (knobs known
// and in range; it need not be a point of the enumerated space).
absl::Status ValidateSchedule(const Graph& workload, const ScheduleConfig& config,
                              const CpuTarget& target);

// The same questions for a CUDA GPU, answered by the GPU lowering of the
// workload's kind (loop_ir/gpu/lower.h). The kind is the same on every
// target; CanCompile(workload, gpu) is false also for a kind without a GPU
// lowering, and ValidateSchedule then says so (UNIMPLEMENTED), and for a
// workload no schedule of whose space fits the GPU (a multi-stage
// reduction whose intermediate results overflow a block's shared memory):
// the partitioner then groups its nodes otherwise.
bool CanCompile(const Graph& workload, const GpuTarget& target);
std::vector<ScheduleConfig> EnumerateSchedules(const Graph& workload, const GpuTarget& target);
ScheduleConfig DefaultSchedule(const Graph& workload, const GpuTarget& target);
absl::Status ValidateSchedule(const Graph& workload, const ScheduleConfig& config, const GpuTarget& target);

// The same questions for either kind of target.
bool CanCompile(const Graph& workload, const Target& target);
std::vector<ScheduleConfig> EnumerateSchedules(const Graph& workload, const Target& target);
ScheduleConfig DefaultSchedule(const Graph& workload, const Target& target);
absl::Status ValidateSchedule(const Graph& workload, const ScheduleConfig& config, const Target& target);

}  // namespace kiln
