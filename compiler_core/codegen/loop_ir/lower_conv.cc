// "conv" and "conv_transpose" workloads: Conv / ConvTranspose + elementwise
// epilogue lowered to packed, register-blocked loop nests (see lower_conv.h
// for the knobs and task shapes).
#include "compiler_core/codegen/loop_ir/lower_conv.h"

#include <algorithm>
#include <functional>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compiler_core/codegen/loop_ir/depthwise_channels.h"
#include "compiler_core/codegen/loop_ir/depthwise_planes.h"
#include "compiler_core/codegen/loop_ir/graph_expr.h"
#include "compiler_core/codegen/loop_ir/lower_common.h"
#include "compiler_core/codegen/loop_ir/phase_rows.h"
#include "compiler_core/codegen/loop_ir/substitute.h"
#include "compiler_core/frontend/op_registry.h"
#include "compiler_core/frontend/ops/conv_blocking.h"

namespace kiln::loop_ir {
namespace {

// Floats of the per-task input pack (a stack buffer).
constexpr int64_t kMaxPackFloats = ops::kMaxConvPackFloats;

// Vector registers a register block of ur pixel vectors by kb channels takes
// while it accumulates: kb * ur sums, the ur input vectors, one broadcast.
int64_t PixelBlockRegisters(int64_t kb, int64_t ur) { return kb * ur + ur + 1; }

int InputIndex(const Graph& g, const Value* v) {
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    if (g.inputs()[i] == v) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

absl::StatusOr<ConvForm> AnalyzeConv(const Graph& g) {
  ConvForm f;
  for (const auto& n : g.nodes()) {
    const bool blocked = n->op_type() == "BlockedConv" && n->domain() == kKilnDomain;
    if ((n->op_type() == "Conv" && n->domain().empty()) || blocked) {
      if (f.conv != nullptr) return NodeError(*n, "a second Conv in one workload");
      const std::vector<int64_t> wd = DimsOf(n->input(1));
      if (blocked && !wd.empty()) f.weight_block = wd.back();
      if (blocked && ops::ChunkedWeights(wd.size(), DimsOf(n->input(0)).size())) f.weight_chunk = wd[2];
      f.conv = n.get();
      continue;
    }
    if (!IsInlinableElementwise(n->op_type())) return NodeError(*n, "not an elementwise epilogue operator");
  }
  RETURN_IF_ERROR(CheckWorkloadBasics(g, f.weight_block > 0 ? f.conv : nullptr));
  for (const auto& n : g.nodes()) {
    if (n.get() != f.conv) RETURN_IF_ERROR(GraphExpr::CheckNode(*n));
  }
  if (f.conv == nullptr) return absl::UnimplementedError(absl::StrCat("workload ", g.name(), " has no Conv"));
  const Node& conv = *f.conv;
  if (conv.num_outputs() != 1) return NodeError(conv, "more than one output");
  f.x_arg = InputIndex(g, conv.input(0));
  f.w_arg = InputIndex(g, conv.input(1));
  if (f.x_arg < 0 || f.w_arg < 0) return NodeError(conv, "input or weights computed inside the workload");
  if (conv.input(2) != nullptr) {
    f.b_arg = InputIndex(g, conv.input(2));
    if (f.b_arg < 0) return NodeError(conv, "bias computed inside the workload");
  }
  std::vector<int64_t> xd = DimsOf(conv.input(0));
  std::vector<int64_t> wd =
      f.weight_block > 0 ? ops::UnblockedWeightDims(DimsOf(conv.input(1)), xd.size()) : DimsOf(conv.input(1));
  if (wd.size() != xd.size() || wd.size() < 3) return NodeError(conv, "weights and input ranks differ");
  std::vector<int64_t> kernel(wd.begin() + 2, wd.end());
  ASSIGN_OR_RETURN(f.geo, ResolveWindow(conv, kernel));
  f.group = conv.GetInt("group", 1);
  f.k = wd[0];
  if (f.group < 1 || f.geo.c % f.group != 0 || f.k % f.group != 0 || wd[1] != f.geo.c / f.group) {
    return NodeError(conv, "group does not divide the channels");
  }
  if (f.conv->input(2) != nullptr && DimsOf(conv.input(2)) != std::vector<int64_t>{f.k}) {
    return NodeError(conv, "bias is not [M]");
  }
  f.cg = f.geo.c / f.group;
  f.kg = f.k / f.group;
  if (f.weight_block > 0 && (f.geo.one_d || f.geo.three_d || f.kg % f.weight_block != 0)) {
    return NodeError(conv, "blocked weights are not 2-D or their blocks straddle groups");
  }
  if (f.weight_chunk > 0 && (f.group != 1 || f.geo.kh != 1 || f.geo.kw != 1 || f.cg % f.weight_chunk != 0)) {
    return NodeError(conv, "weights chunked by input channel are not those of a 1x1 conv of one group");
  }
  std::vector<int64_t> od = DimsOf(conv.output(0));
  for (const auto& n : g.nodes()) {
    if (n.get() != f.conv && DimsOf(n->output(0)) != od) {
      return NodeError(*n, "epilogue value does not have the convolution's shape");
    }
  }
  for (const Value* v : g.outputs()) {
    if (DimsOf(v) != od) return NodeError(conv, absl::StrCat("output ", v->name(), " is not of the convolution's shape"));
  }
  const WindowGeometry& s = f.geo;
  int64_t rin = (s.kh - 1) * s.dh + 1, din = (s.kd - 1) * s.dd + 1;
  if (din * rin * (s.ow * s.sw + s.kw * s.dw + 16) > kMaxPackFloats) {
    return NodeError(conv, "one output row of one channel reads more input than the stack pack holds");
  }
  return f;
}

namespace {

// Multiply-adds per output element at or below which a direct conv's default
// takes several output rows per task.
constexpr int64_t kShortReduction = 32;

struct Knobs {
  int64_t vw = 1, ur = 1, kb = 1, rows = 1;
  int64_t pw = 0;  // 1: pointwise variant over flattened output pixels
  int64_t dw = 0;  // 1: depthwise plane variant; 2: row variant (input read in place); 3: channel vectors
  int64_t ks = 1;  // pointwise variant: tasks split the output-channel blocks this many ways
  int64_t kv = 0;  // 1: channel-vector variant (output channels in the lanes)
  int64_t cs = 1;  // direct variant: tasks split each output row's register blocks this many ways
  int64_t kc = 0;  // pointwise variant: input channels per reduction chunk (0: all of them at once)
};

Knobs KnobsOf(const ScheduleConfig& c) {
  return Knobs{c.Get("vw", 1), c.Get("ur", 1), c.Get("kb", 1), c.Get("rows", 1), c.Get("pw", 0),
               c.Get("dw", 0), c.Get("ks", 1),   c.Get("kv", 0),   c.Get("cs", 1), c.Get("kc", 0)};
}

// The inverse of KnobsOf (pw, dw, ks, kv, cs and kc only when set).
ScheduleConfig ConfigOf(const Knobs& k) {
  ScheduleConfig c;
  if (k.kv != 0) c.Set("kv", k.kv);
  if (k.pw != 0) c.Set("pw", k.pw);
  if (k.dw != 0) c.Set("dw", k.dw);
  if (k.ks != 1) c.Set("ks", k.ks);
  if (k.cs != 1) c.Set("cs", k.cs);
  if (k.kc != 0) c.Set("kc", k.kc);
  c.Set("vw", k.vw);
  c.Set("ur", k.ur);
  c.Set("kb", k.kb);
  c.Set("rows", k.rows);
  return c;
}

// 1x1 kernel, unit strides, no padding: output pixel p reads input pixel p of
// every channel, and both are contiguous over H*W in NCHW.
bool IsPointwise(const ConvForm& f) {
  const WindowGeometry& s = f.geo;
  return !s.three_d && s.kh == 1 && s.kw == 1 && s.sh == 1 && s.sw == 1 && s.pad_top == 0 && s.pad_left == 0 &&
         s.pad_bottom == 0 && s.pad_right == 0 && s.oh == s.h && s.ow == s.w;
}

// Output pixels per image (H*W, or W for 1-D).
int64_t Pixels(const ConvForm& f) { return f.geo.oh * f.geo.ow; }

// Pointwise variant: the vector width for the pixels that whole vw-wide
// vectors leave (left of them): the narrowest power of two that holds them.
int64_t PointwiseLeftWidth(int64_t left) {
  int64_t w = 1;
  while (w < left) w *= 2;
  return w;
}

// Pointwise variant: whether the pixels the full vw*ur blocks leave need
// lane-masked multiply-adds: the last few pixels do not fill a vector and
// the map is narrower than that vector, so it cannot end at the last pixel
// instead (see LowerPointwise). Masked multiply-adds keep the accumulators
// in memory.
bool PointwiseTailMasked(int64_t pixels, int64_t vw, int64_t ur) {
  const int64_t left = pixels % (vw * ur) % vw;
  return left != 0 && pixels < PointwiseLeftWidth(left);
}

// Pointwise variant: the pixels left after the whole vw-wide vectors are
// computed as dot products over the input channels when there are at most
// this many of them and the group's channels fill whole vectors: one lane
// per pixel would otherwise cost a multiply-add per channel and output
// channel (a 7x7 map's 49th pixel: a third of the map's work).
constexpr int64_t kMaxDotPixels = 4;

// The lanes of those dot products over unblocked weights (`left` pixels):
// vw, or half of it (8 lanes at least) where the channels fill whole half
// vectors only, over at least 8 whole vectors of channels or for one pixel;
// 0 for none. Sapphire Rapids, 1 thread, against the last full block taking
// the pixels as one more vector (PointwiseMergedChannels): Xception's 728 ->
// 728 on 10x10 (4 pixels left) 0.85 -> 0.70 ms; 120 -> 720 on 7x7 (1 left)
// 0.136 -> 0.095; 440 -> 440 on 7x7 0.29 -> 0.20; but 40 -> 240 and 88 ->
// 528 on 14x14 (4 left) 0.92-0.94x: a short reduction does not pay the sums
// across the lanes.
int64_t PointwiseDotLanes(int64_t cg, int64_t vw, int64_t left) {
  if (cg % vw == 0 && cg >= 2 * vw) return vw;
  const int64_t half = vw / 2;
  const bool long_enough = cg >= 8 * vw || (left == 1 && cg >= 2 * vw);
  return half >= 8 && cg % half == 0 && long_enough ? half : 0;
}

// Blocked weights (kiln.BlockedConv) hold each input channel's outputs
// contiguous instead: the dot products then run over the input channels one
// at a time with output channels in the lanes, whatever the channel count.
int64_t PointwiseDotPixels(int64_t pixels, int64_t vw, int64_t ur, int64_t cg, bool blocked) {
  const int64_t left = pixels % (vw * ur) % vw;
  if (left == 0 || left > kMaxDotPixels || vw == 1) return 0;
  return blocked || PointwiseDotLanes(cg, vw, left) > 0 ? left : 0;
}

// Pointwise variant, reduction chunks: a task's full blocks run the input
// channels in chunks of kc, every channel block of the task per chunk, so
// that the chunk's input (kc channels of the task's rows * vw * ur pixels)
// is read from L1 by every channel block, not from L2 (or L3) by each. The
// running sums between chunks live in a per-task buffer of this many floats.
int64_t PointwisePartialFloats(const ConvForm& f, const Knobs& k) {
  const int64_t nkb = f.kg / k.kb, per_split = CeilDiv(nkb, k.ks);
  return per_split * k.kb * k.rows * k.vw * k.ur;
}

// Pointwise variant: floats of the merged last block's running sums between
// reduction chunks (ur + 1 vectors per channel; PointwiseMergedChannels).
int64_t PointwiseMergedFloats(const ConvForm& f, const Knobs& k) {
  return CeilDiv(f.kg / k.kb, k.ks) * k.kb * (k.ur + 1) * k.vw;
}

// Pointwise variant: the channels per pass of the merged last block, 0 for
// none. Where the full vw*ur blocks leave at most one vector's pixels, the
// last full block takes them as one more vector, ending at the last pixel
// (it recomputes pixels of the vector before and stores only its own), in
// passes over the kb channels that fit the registers (the most that divide
// kb). Alone, those pixels are one vector by kb channels: kb chains of
// multiply-adds, a step per input channel, bound by the multiply-add's
// latency; or, as dot products over blocked weights, 4-lane vectors. Zen 3,
// 1 thread, 728 -> 728 over 96 pixels 1.05 ms; over 100 (4 as dots) 1.24,
// merged 1.18; over 104 (a vector of 8) 1.22, merged 1.16. Not for one or
// two pixels as dot products (7x7 maps: 49 pixels 0.64 ms, 48 0.60; 98
// pixels 1.13, merged 1.17), nor dot products over unblocked weights (8
// lanes over the input channels), nor two vectors or more, kb * 2 chains
// already (256 -> 728 on 20x20, 16 pixels left: 1.57 ms, merged 1.60).
int64_t PointwiseMergedChannels(const ConvForm& f, const Knobs& k, int registers) {
  const int64_t np = Pixels(f), bw = k.vw * k.ur, rem = np % bw;
  if (np < bw || rem == 0 || rem > k.vw || PointwiseTailMasked(np, k.vw, k.ur)) return 0;
  const int64_t dots = PointwiseDotPixels(np, k.vw, k.ur, f.cg, f.weight_block > 0);
  if (dots > 0 && (dots < 3 || f.weight_block == 0)) return 0;
  // Its running sums between reduction chunks, beside the full blocks'.
  if (k.kc != 0 && PointwisePartialFloats(f, k) + PointwiseMergedFloats(f, k) > kMaxPackFloats / 2) return 0;
  for (int64_t kb = k.kb; kb >= 1; --kb) {
    if (k.kb % kb == 0 && PixelBlockRegisters(kb, k.ur + 1) <= registers) return kb;
  }
  return 0;
}

// Floats of a 64-byte cache line.
constexpr int64_t kLineFloats = 16;
// Floats of input a reduction chunk keeps in L1 (half of a 32 KiB L1D).
constexpr int64_t kL1InputFloats = 4 * 1024;
// Floats of a direct-variant input pack that L1 holds (a 32 KiB L1D).
constexpr int64_t kL1PackFloats = 8 * 1024;

// The chunk a pointwise point is offered with (0: none): where its task's
// input outgrows L1 (kL1InputFloats twice over), the largest divisor of the
// group's channels of at least 16 whose input fits kL1InputFloats.
int64_t PointwiseChunk(const ConvForm& f, const Knobs& k) {
  const int64_t tw = k.rows * k.vw * k.ur;
  if (f.cg * tw <= 2 * kL1InputFloats) return 0;
  for (int64_t kc = std::min(f.cg - 1, kL1InputFloats / tw); kc >= 16; --kc) {
    if (f.cg % kc == 0) return kc;
  }
  return 0;
}

// Pointwise variant: whether a 2 MiB L2 (Sapphire Rapids) holds what the
// caches-sparing variants below are for: a task's input stays in L2 while
// the weights pass, and the weights come back from L3 for the next task.
// There reduction chunks (PointwiseChunked) do not pay, and a task takes
// every pixel block (PointwiseAllPixels) only where the input takes a
// quarter of the L2 at most (half of it where the epilogue reads a
// residual). Sapphire Rapids, 1 thread, in the models:
// Xception's 728 -> 728 on 20x20 (1.1 MiB of input) 2.81 ms in tasks of one
// block, 3.97 of every block, 3.36 in chunks; its 17 on 10x10 (0.28 MiB)
// 14.3 ms of every block, one 14.2-15.4, chunked 18.8; PoolFormer's 320 ->
// 1280 on 14x14 (0.24 MiB) 1.50 of every block, one 1.97; SqueezeNet 1.1's
// three squeezes and its 512 -> 1000 classifier on 13x13 1.93 ms chunked,
// 1.48 not.
bool PointwiseBlocksFromL2(const CpuTarget& target) { return target.L2Bytes() >= (int64_t{2} << 20); }

// The target's L2 in floats.
int64_t L2Floats(const CpuTarget& target) { return target.L2Bytes() / static_cast<int64_t>(sizeof(float)); }

// Floats of a pointwise conv's weights that its tasks may stream from L2
// again and again: three quarters of the target's L2 (192 Ki floats on Zen 4
// and 5, 96 Ki on Zen 3's 512 KiB). Past it each task streams them from L3.
int64_t L2WeightFloats(const CpuTarget& target) {
  return L2Floats(target) * 3 / 4;
}

// Whether a pointwise conv's weights (one group's) are past that: its tasks
// stream them from L3.
bool PointwiseWeightsFromL3(const ConvForm& f, const CpuTarget& target) {
  return f.kg * f.cg > L2WeightFloats(target);
}

// Pointwise variant, on a 2 MiB L2 (PointwiseBlocksFromL2, where reduction
// chunks do not pay): whether a register block's input column (cg channels
// of bw pixels) starts off a cache line in most channel planes (the planes
// are not whole 64-byte lines) and outgrows L1, so that each channel block
// of a task reads it again from L2, most of its vectors straddling two
// lines. A task then packs its input (PointwisePacksInput): aligned and
// contiguous, the column streams from L2 a line per vector. Sapphire Rapids,
// 1 thread, six 728 -> 728 convs on 19x19 (2.1 MiB of weights each, blocks
// of 8 channels by 3 vectors, the column 140 KiB): 16.2 ms in tasks of 3
// blocks in place, 14.6 in tasks of one packed (ORT 13.3).
bool PointwiseColumnOffLines(const ConvForm& f, int64_t bw, const CpuTarget& target) {
  return PointwiseBlocksFromL2(target) && Pixels(f) % kLineFloats != 0 && f.cg * bw > 2 * kL1InputFloats;
}

// Register blocks of bw pixels per task that the input pack holds (at least 1).
int64_t PointwisePackRows(const ConvForm& f, int64_t bw) {
  return std::max<int64_t>(1, kMaxPackFloats / 2 / (f.cg * bw));
}

// Pointwise variant, input and output past twice the L2: the register
// blocks of pixels per task at which a task's input (cg channels of
// rows * vw * ur pixels) fills kL1InputFloats, as long as 16 tasks remain;
// 1 where one block fills it, or input and output are smaller. Over few
// channels one block per task reads and writes a run of vw * ur floats in
// each channel plane, too short for the prefetchers to fetch from L3 or
// memory ahead of it (Zen 3, 1 thread, in
// the models): SSDlite's 16 -> 16 on 160x160 plus a residual 0.65 ms with
// one block of 24 pixels per task, 0.41 with 4, 0.36 with 16; LCNet's
// 8 -> 16 on 112x112 0.15-0.17 ms with one, 0.085-0.099 with 21. Convs
// on 56x56 (24 -> 36, 72 -> 12: 0.6-1 MiB in and out) measured the same or
// up to 10% slower with longer runs.
// On a 2 MiB L2 (PointwiseBlocksFromL2), over planes that are not whole
// vectors, as many blocks as fill a quarter of the L2 with their input and
// output, as long as the input pack (PointwisePacksInput) holds them and 8
// tasks remain: each task then copies its input into an aligned pack once.
// Sapphire Rapids, 1 thread, in the model: keras Xception's 128 -> 128 on
// 77x77 (5929 pixels) 2.46-2.60 ms in tasks of one block, 1.41-1.49 of 16
// (packed), 1.69 of 8, 1.93 of 32 (too large to pack). Over planes of whole
// vectors the same runs lost (SegFormer's 1024 -> 256 on 32x32 3.33 -> 7.33
// ms in 3 blocks, its input no longer packed; DenseNet's 224 -> 128 and
// ResNeSt's 256 -> 128 on 56x56 7-15%).
// And on a 2 MiB L2, input and output within twice the L2 but weights past
// three quarters of it (L2WeightFloats): as many blocks as fill a quarter
// of the L2 with their input, so that fewer tasks stream the weights from
// L3 again, where that saves 4 passes over them or more (where the input
// stays in a quarter of the L2, tasks take every block: PointwiseAllPixels).
// Sapphire Rapids, 1 thread, in the models: keras Xception's 728 -> 728 on
// 20x20 (25 vectors of pixels; 2.1 MiB of weights) 3.43 ms in tasks of one
// block of 2 vectors, 3.03 of 5; 2.66-3.00 in tasks of 2 to 4 blocks of 3
// vectors; timm Xception-41's 27 on 19x19 (7 blocks) 82.4 -> 78.6 ms in
// tasks of 3. On 14x14 1024 -> 512 in tasks of 2 of its 4 blocks (2 passes
// saved) measured level (DenseNet 1.02x, ResNeSt 0.96x). Where the blocks'
// input columns start off the cache lines (PointwiseColumnOffLines), no
// more blocks than the input pack holds: Xception-41's 19x19 convs now run
// tasks of one packed block, faster than 3 in place.
int64_t PointwiseStreamRows(const ConvForm& f, int64_t vw, int64_t ur, const CpuTarget& target) {
  const int64_t bw = vw * ur, blocks = f.geo.n * f.group * (Pixels(f) / bw);
  if (f.geo.n * f.group * (f.cg + f.kg) * Pixels(f) * 4 <= 2 * target.L2Bytes()) {
    if (!PointwiseBlocksFromL2(target) || !PointwiseWeightsFromL3(f, target)) return 1;
    int64_t rows = std::max<int64_t>(1, std::min(L2Floats(target) / 4 / (f.cg * bw), blocks));
    if (PointwiseColumnOffLines(f, bw, target)) rows = std::min(rows, PointwisePackRows(f, bw));
    return blocks - CeilDiv(blocks, rows) >= 4 ? rows : 1;
  }
  if (PointwiseBlocksFromL2(target) && Pixels(f) % vw != 0) {
    return std::max<int64_t>(
        1, std::min({L2Floats(target) / 4 / ((f.cg + f.kg) * bw), PointwisePackRows(f, bw), blocks / 8}));
  }
  return std::max<int64_t>(1, std::min(kL1InputFloats / (f.cg * bw), blocks / 16));
}

// Pointwise variant: the accumulators its default register block aims at,
// 16, or on a 2 MiB L2 (PointwiseBlocksFromL2: Sapphire Rapids, two
// full-width FMA units and two 512-bit loads a cycle) 24, 8 channels by 3
// vectors, where 11 loads feed 24 multiply-adds instead of 10 feeding 16:
// over 128 input channels or more whose input stays in half of the L2
// (read again by every channel block), or in all of it where the weights
// pass from L3 (past L2WeightFloats: Xception's 728 -> 728 on 20x20, 3.07
// ms in tasks of 5 blocks of 2 vectors, 2.75 of 3 blocks of 3), unless
// blocks of 3 vectors leave more than a sixteenth of the map past them
// beyond what blocks of 2 do.
// Sapphire Rapids, 1 thread, chains of six 512 -> 512 convs: 7x7 1.20 ->
// 1.01 ms, 10x10 2.26 -> 2.06, 14x14 4.25 -> 3.81, 16x16 5.14 -> 4.77 (ORT
// 1.05, 2.04, 3.55, 4.65). Not past half the L2 (Inception's 288 -> 64 on
// 35x35 0.31 -> 0.37-0.39 ms; SegFormer's 1024 -> 256 on 32x32 3.29 ->
// 4.14), nor on 8x8 (FastViT's 384 -> 384, a 48-pixel block and a 16-pixel
// tail, 0.24 -> 0.28).
int64_t PointwiseAccumulators(const ConvForm& f, const CpuTarget& target) {
  const int64_t np = Pixels(f), lanes = target.FloatLanes();
  if (!PointwiseBlocksFromL2(target) || f.cg < 128) return 16;
  const bool weights_from_l3 = PointwiseWeightsFromL3(f, target) && f.cg * np <= L2Floats(target);
  if (f.cg * np > L2Floats(target) / 2 && !weights_from_l3) return 16;
  const int64_t extra = np % (3 * lanes) - np % (2 * lanes);
  return extra * 16 <= np ? 24 : 16;
}

// Pointwise variant over weights chunked by input channel (weight_chunk):
// the reduction chunk its chunked points take, that of the weights (0 where
// the chunk is every channel). Its other points take none (kc=0): they
// run down every chunk of the weights in turn for each block of outputs.
int64_t PointwiseLayoutChunk(const ConvForm& f) { return f.weight_chunk < f.cg ? f.weight_chunk : 0; }

// One input and one output channel per group, 2-D.
bool IsDepthwise(const ConvForm& f) { return f.cg == 1 && f.kg == 1 && !f.geo.one_d && !f.geo.three_d; }

// The depthwise plane variant's geometry (depthwise_planes.h).
PlaneDims PlaneDimsOf(const ConvForm& f, const Knobs& k) { return loop_ir::PlaneDimsOf(f.geo, k.vw, k.ur); }

// Pack geometry: rin input rows, per stride phase wq columns (a multiple of
// vw covering every register block of one column split, padded width owr).
void PackDims(const ConvForm& f, const Knobs& k, int64_t* rin, int64_t* wq, int64_t* owr) {
  const WindowGeometry& s = f.geo;
  *rin = (k.rows - 1) * s.sh + (s.kh - 1) * s.dh + 1;
  *owr = CeilDiv(CeilDiv(s.ow, k.vw * k.ur), k.cs) * k.vw * k.ur;  // one column split's blocks
  *wq = CeilDiv(*owr + ((s.kw - 1) * s.dw) / s.sw, k.vw) * k.vw;
}

// Input channels packed at once: all of the group's when they fit the pack,
// else the largest divisor of them that does (the kernel then accumulates
// over channel chunks in the output); 0 when not even one channel fits.
int64_t ChunkChannels(const ConvForm& f, const Knobs& k) {
  int64_t rin, wq, owr;
  PackDims(f, k, &rin, &wq, &owr);
  const int64_t per_channel = ((f.geo.kd - 1) * f.geo.dd + 1) * rin * f.geo.sw * wq;
  const int64_t cap = kMaxPackFloats / per_channel;
  if (cap >= f.cg) return f.cg;
  for (int64_t cc = cap; cc >= 1; --cc) {
    if (f.cg % cc == 0) return cc;
  }
  return 0;
}

// Direct variant: floats of one task's input pack (ChunkChannels channels).
// Each of the task's output-channel blocks reads the whole pack again, so it
// should stay in L2 (DirectPackFits).
int64_t DirectPackFloats(const ConvForm& f, const Knobs& k) {
  int64_t rin, wq, owr;
  PackDims(f, k, &rin, &wq, &owr);
  return ChunkChannels(f, k) * ((f.geo.kd - 1) * f.geo.dd + 1) * rin * f.geo.sw * wq;
}

// Whether the direct variant's pack takes at most half of L2, leaving the
// rest to the block's weights and the output rows. wav2vec2's 128-channel
// 3-tap stride-2 1-D conv over 1599 columns (Zen 3, 512 KiB L2, 1 thread,
// blocks of 4 channels by 3 vectors): in 4 column splits (434 KiB a pack)
// 2.38 ms, 8 (217 KiB) 2.06, 16 2.10, 32 2.24.
bool DirectPackFits(const ConvForm& f, const Knobs& k, const CpuTarget& target) {
  return DirectPackFloats(f, k) * 4 <= target.L2Bytes() / 2;
}

// Channel-vector variant: floats of its packed weights (the group's input
// channels x taps x kb vectors of output channels; none where they come
// blocked).
int64_t ChannelVectorWeightFloats(const ConvForm& f, const Knobs& k) {
  return f.weight_block > 0 ? 0 : f.cg * f.geo.kh * f.geo.kw * k.kb * k.vw;
}
// Channel-vector variant: whether a task's weights (every input channel)
// outgrow half of a 512 KiB L2, from where each row's blocks would read
// them again from L3.
bool ChannelVectorWeightsPastL2(const ConvForm& f, const Knobs& k) {
  return f.cg * f.geo.kh * f.geo.kw * k.kb * k.vw * 4 > 256 * 1024;
}
// Channel-vector variant: input channels per reduction chunk. A register
// block reads its kb vectors' weights for every input channel and tap; a
// row runs its blocks chunk by chunk, the chunk's weights staying in L1
// for every block of the row and the running sums in a buffer (racc):
// - where a block reads a weight vector for 4 pixels or fewer and the row
//   has several blocks, chunks of at most 12 KiB of weights. Read from L2
//   instead, 32 bytes of weights for 2 FMAs outrun it (Zen 3, 1 thread,
//   blocks of 2 pixels by 4 vectors, input rows still packed, ORT in the
//   same run: 128 -> 256 3x3 stride 2 onto 28x28, 147 KiB of weights,
//   7.05 -> 6.18 ms, ORT 5.75; 64 -> 64 onto 56x56 4.27 -> 3.85, ORT 3.29),
//   and for 4 FMAs still lose to L1 (DeepSpeech2's 32 -> 32 21x11 conv onto
//   100x33, blocks of 4 pixels by 2 vectors, chunks of one channel instead
//   of 16: 24.7 -> 21.7 ms, ORT 19.8);
// - where the weights outgrow half of L2 (HRNet's 512 -> 1024 3x3 onto 7x7:
//   576 KiB, read again by each of a row's blocks, from L3), chunks of at
//   most 24 KiB, at least 16 channels.
// All of them (f.cg) elsewhere.
int64_t ChannelVectorChunk(const ConvForm& f, const Knobs& k) {
  const int64_t per_channel = f.geo.kh * f.geo.kw * k.kb * k.vw * 4;  // bytes of weights per input channel
  const bool streams = k.ur <= 4 && f.geo.ow > k.ur;
  if (!streams && !ChannelVectorWeightsPastL2(f, k)) return f.cg;
  int64_t cc = 1;
  for (int64_t d = 1; d <= f.cg; ++d) {
    if (f.cg % d != 0) continue;
    if (streams ? d * per_channel <= 12 * 1024 : d * per_channel <= 24 * 1024 || d <= 16) cc = d;
  }
  return cc;
}

// Channel-vector variant: whether the reduction chunks run outermost, each
// over every row of the task, the running sums of all its rows in racc
// (at most 32 KiB): where the task's weights outgrow half of L2, so that
// they pass from L3 once per task, not once per row (HRNet's 512 -> 1024
// 3x3 stride 2 onto 7x7, Zen 3, 1 thread, input read in place: 7.66 ->
// 6.16 ms, ORT 6.16).
bool ChannelVectorChunksOuter(const ConvForm& f, const Knobs& k) {
  return ChannelVectorChunk(f, k) < f.cg && ChannelVectorWeightsPastL2(f, k) &&
         k.rows * f.geo.ow * k.kb * k.vw * 4 <= 32 * 1024;
}

absl::Status CheckKnobs(const ConvForm& f, const Knobs& k, const CpuTarget& target) {
  if (k.cs != 1 && (k.kv != 0 || k.dw != 0 || k.pw != 0)) {
    return absl::InvalidArgumentError(absl::StrCat("conv ", f.conv->name(), ": cs needs the direct variant"));
  }
  if (k.kv != 0) {
    bool ok = k.kv == 1 && k.pw == 0 && k.dw == 0 && k.ks == 1 && !f.geo.three_d && !f.geo.one_d && k.vw == target.FloatLanes() &&
              k.kb >= 1 && k.kb <= 4 && f.kg % (k.kb * k.vw) == 0 &&
              (f.weight_block == 0 || (k.kb * k.vw) % f.weight_block == 0) && k.ur >= 1 && k.ur <= 12 &&
              k.kb * k.ur + k.kb + 1 <= target.NumVectorRegisters() && k.rows >= 1 &&
              k.rows <= std::max<int64_t>(f.geo.oh, 1) &&
              ChannelVectorWeightFloats(f, k) <= kMaxPackFloats;
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat("conv ", f.conv->name(), ": channel-vector knobs out of range"));
    }
    return absl::OkStatus();
  }
  if (f.weight_block > 0 &&
      !(k.pw != 0 && IsPointwise(f) && (k.kb % f.weight_block == 0 || f.weight_block % k.kb == 0))) {
    return absl::InvalidArgumentError(absl::StrCat("conv ", f.conv->name(),
                                                   ": blocked weights need kv=1, or pw=1 with channel blocks that "
                                                   "tile the weight blocks"));
  }
  if (f.weight_chunk > 0 && k.kc != 0 && k.kc != PointwiseLayoutChunk(f)) {
    return absl::InvalidArgumentError(absl::StrCat("conv ", f.conv->name(), ": weights chunked by ", f.weight_chunk,
                                                   " input channels need kc=0 or kc=", PointwiseLayoutChunk(f)));
  }
  if (k.dw == 3) {
    // Channel vectors (depthwise_channels.h): rows = blocks of vw channels a
    // task, ur pixels of a row a register block.
    const int64_t blocks = CeilDiv(f.group, k.vw);
    bool ok = IsDepthwise(f) && k.pw == 0 && k.kb == 1 && k.vw == target.FloatLanes() && k.vw >= 4 && k.ur >= 1 &&
              k.ur <= std::min<int64_t>(f.geo.ow, 12) && k.ur + 3 <= target.NumVectorRegisters() && k.rows >= 1 &&
              blocks % k.rows == 0 && DepthwiseChannelFloats(f.geo, k.vw) <= kMaxPackFloats;
    if (!ok) return absl::InvalidArgumentError(absl::StrCat("conv ", f.conv->name(), ": depthwise knobs out of range"));
    return absl::OkStatus();
  }
  if (k.dw != 0) {
    // The row variant reads strides of up to 2 as de-interleaved vectors.
    const bool variant_ok = k.dw == 1 ? PlaneFloats(f.geo, k.vw, k.ur) <= kMaxPackFloats
                                      : k.dw == 2 && !f.geo.three_d && f.geo.sw <= 2;
    bool ok = variant_ok && k.pw == 0 && IsDepthwise(f) && k.vw >= 1 && k.vw <= target.FloatLanes() &&
              (k.vw & (k.vw - 1)) == 0 && k.ur >= 1 && k.ur <= 8 && k.kb == 1 && k.rows >= 1 && f.group % k.rows == 0;
    if (!ok) return absl::InvalidArgumentError(absl::StrCat("conv ", f.conv->name(), ": depthwise knobs out of range"));
    return absl::OkStatus();
  }
  if (k.pw != 0) {
    bool ok = k.pw == 1 && IsPointwise(f) && k.vw >= 1 && k.vw <= target.FloatLanes() && (k.vw & (k.vw - 1)) == 0 &&
              k.ur >= 1 && k.ur <= 8 && k.kb >= 1 && k.kb <= 16 && f.kg % k.kb == 0 && k.rows >= 1 &&
              k.rows <= std::max<int64_t>(1, CeilDiv(Pixels(f), k.vw * k.ur)) && k.ks >= 1 &&
              k.ks <= f.kg / k.kb && (k.kc == 0 || (k.kc >= 1 && k.kc < f.cg && f.cg % k.kc == 0 &&
                                                      PointwisePartialFloats(f, k) <= kMaxPackFloats / 2));
    if (!ok) return absl::InvalidArgumentError(absl::StrCat("conv ", f.conv->name(), ": pointwise knobs out of range"));
    return absl::OkStatus();
  }
  if (k.ks != 1 || k.kc != 0) {
    return absl::InvalidArgumentError(absl::StrCat("conv ", f.conv->name(), ": ks and kc need pw=1"));
  }
  bool ok = k.vw >= 1 && k.vw <= target.FloatLanes() && (k.vw & (k.vw - 1)) == 0 && k.ur >= 1 && k.ur <= 8 &&
            k.kb >= 1 && k.kb <= 16 && f.kg % k.kb == 0 && k.rows >= 1 && k.rows <= std::max<int64_t>(f.geo.oh, 1) &&
            k.cs >= 1 && k.cs <= CeilDiv(f.geo.ow, k.vw * k.ur);
  if (!ok) return absl::InvalidArgumentError(absl::StrCat("conv ", f.conv->name(), ": knobs out of range"));
  if (ChunkChannels(f, k) == 0) {
    return absl::InvalidArgumentError(absl::StrCat("conv ", f.conv->name(), ": rows=", k.rows, " vw=", k.vw,
                                                   " ur=", k.ur, " overflow the input pack"));
  }
  return absl::OkStatus();
}

// Direct variant: tasks of `rows` output rows (before column splits).
int64_t DirectTasks(const ConvForm& f, int64_t rows) { return f.geo.n * f.group * f.geo.od * CeilDiv(f.geo.oh, rows); }

// Channel-vector variant: output channels in the lanes, all rows or half or
// a quarter of them per task. Blocked weights (which need 16 output channels
// per block: four vectors of four lanes on SSE, whose 16 registers then hold
// 2 pixels) take 2-pixel blocks too.
void AddChannelVectorPoints(const ConvForm& f, const CpuTarget& target, std::vector<ScheduleConfig>* out) {
  const int64_t vw = target.FloatLanes();
  std::vector<int64_t> urs = {4, 6, 8, 12};
  if (f.weight_block > 0) urs.insert(urs.begin(), 2);
  for (int64_t kb : {1, 2, 4}) {
    for (int64_t ur : urs) {
      if (ur > 4 && (ur / 2) >= f.geo.ow) break;
      for (int64_t rows : {f.geo.oh, CeilDiv(f.geo.oh, 2), CeilDiv(f.geo.oh, 4)}) {
        Knobs k{vw, ur, kb, rows};
        k.kv = 1;
        if (!CheckKnobs(f, k, target).ok()) continue;
        ScheduleConfig c = ConfigOf(k);
        if (std::find(out->begin(), out->end(), c) == out->end()) out->push_back(c);
      }
    }
  }
}

// The accumulators (ur) of a depthwise conv's register block, in either
// variant: 4, or 8 where the window's weights, 4 accumulators and two
// temporaries do not fit the vector registers (5x5 and 7x7 windows on AVX2).
// There LLVM keeps the broadcast weights in stack slots, and every
// multiply-add reads one besides its input: two loads an FMA. Eight
// accumulators share each weight loaded, and where 8 vectors of the plane
// variant span two plane rows (28x28 maps: 32 positions a row) the lower
// row's taps reuse the upper's input loads. Zen 3, 1 thread: planes, 5x5
// stride 1, 120 channels on 28x28 (MobileNetV3) 0.138 -> 0.073 ms, 672 on
// 14x14 0.155 -> 0.141; stride 2 onto 28x28, 72 channels 0.113 -> 0.101,
// 144 under x * sigmoid(x) 0.255 -> 0.228 (6 accumulators land in
// between); rows, stride 1, 7x7 over 40 channels on 56x56 (ConvNeXt) 0.258
// -> 0.201 (7 vectors: the whole row), 5x5 over 32 on 112x112 0.382 ->
// 0.331.
int64_t DepthwiseAccumulators(const ConvForm& f, const CpuTarget& target) {
  return f.geo.kh * f.geo.kw + 4 + 2 > target.NumVectorRegisters() ? 8 : 4;
}

// The output-channel blocks (kb) of the direct and pointwise variants'
// spaces: 1, 2, 4 and 8, and where 4 does not divide the channels
// (detection heads: 546 = 91 classes x 6 anchors, 255 = 3 x 85, 819 = 91 x
// 9), their divisors from 3 to 8, so that a block still shares each input
// load among several channels. RetinaNet's 256 -> 819 3x3 class logits,
// direct, 1 thread, Sapphire Rapids: on 16x16 32.0 ms in blocks of 1, 8.4
// in blocks of 7; on 4x4 11.1 and 1.4.
std::vector<int64_t> OutputChannelBlocks(const ConvForm& f) {
  std::vector<int64_t> kbs = {1, 2, 4, 8};
  if (f.kg % 4 != 0) {
    for (int64_t d : {3, 5, 6, 7}) {
      if (f.kg % d == 0) kbs.push_back(d);
    }
  }
  return kbs;
}

std::vector<ScheduleConfig> Enumerate(const Graph& g, const CpuTarget& target) {
  absl::StatusOr<ConvForm> f = AnalyzeConv(g);
  if (!f.ok()) return {};
  std::vector<ScheduleConfig> out;
  if (f->weight_block > 0 && !IsPointwise(*f)) {
    AddChannelVectorPoints(*f, target, &out);
    return out;
  }
  std::vector<int64_t> vws = VectorWidths(target, f->geo.ow);
  if (vws.size() > 2) vws.erase(vws.begin(), vws.end() - 2);
  for (int64_t vw : vws) {
    for (int64_t ur : {1, 2, 3, 4}) {
      if (ur > 1 && (ur - 1) * vw >= f->geo.ow) break;
      for (int64_t kb : OutputChannelBlocks(*f)) {
        if (f->kg % kb != 0 || PixelBlockRegisters(kb, ur) > target.NumVectorRegisters()) continue;
        for (int64_t rows : {1, 2, 4}) {
          if (rows > 1 && rows / 2 >= f->geo.oh) break;
          // Fewer row tasks than kMinTasks (1-D convs, maps of a few rows),
          // or packs that outgrow DirectPackFits: tasks split each row's
          // register blocks too, up to the first split count with both.
          for (int64_t cs = 1; cs <= CeilDiv(f->geo.ow, vw * ur); cs *= 2) {
            Knobs k{vw, ur, kb, rows};
            if (cs > 1) {
              k.cs = cs / 2;
              if (DirectTasks(*f, rows) * k.cs >= kMinTasks && DirectPackFits(*f, k, target)) break;
            }
            k.cs = cs;
            if (!CheckKnobs(*f, k, target).ok()) continue;
            out.push_back(ConfigOf(k));
          }
        }
      }
    }
  }
  if (!f->geo.three_d && !f->geo.one_d && !IsDepthwise(*f) && !IsPointwise(*f)) {
    AddChannelVectorPoints(*f, target, &out);
  }
  if (IsPointwise(*f)) {
    // Pointwise variant: vectors over the flattened pixels, rows = register
    // blocks of pixels per task.
    const int64_t p = Pixels(*f);
    // Only the widest vector: pixels are contiguous, lanes are wasted only
    // in the last vector.
    const std::vector<int64_t> kbs = OutputChannelBlocks(*f);
    for (int64_t vw : {VectorWidths(target, p).back()}) {
      for (int64_t ur = 1; ur <= 8; ++ur) {
        if (ur > 1 && (ur - 1) * vw >= p) break;
        for (int64_t kb : kbs) {
          if (f->kg % kb != 0 || PixelBlockRegisters(kb, ur) > target.NumVectorRegisters()) continue;
          // 1 or 2 register blocks of pixels per task, or all of them (each
          // channel block's weights then read once per task, tasks
          // splitting the channels: weights past L2, PointwiseAllPixels).
          const int64_t full_blocks = p / (vw * ur);
          std::vector<int64_t> rows_points = {1, 2};
          const int64_t stream = PointwiseStreamRows(*f, vw, ur, target);
          if (stream > 2 && stream < full_blocks) rows_points.push_back(stream);
          if (full_blocks > 2) rows_points.push_back(full_blocks);
          for (int64_t rows : rows_points) {
            if (rows > 1 && vw * ur >= p) break;
            // Fewer pixel blocks than kMinTasks: the channel blocks are split too.
            const int64_t blocks = f->geo.n * f->group * std::max<int64_t>(1, CeilDiv(full_blocks, rows));
            for (int64_t ks : {1, 2, 4, 8}) {
              if (ks > 1 && (blocks * ks / 2 >= kMinTasks || ks > f->kg / kb)) break;
              Knobs k{vw, ur, kb, rows, 1, 0, ks};
              if (!CheckKnobs(*f, k, target).ok()) continue;
              out.push_back(ConfigOf(k));
              k.kc = f->weight_chunk > 0 ? PointwiseLayoutChunk(*f) : PointwiseChunk(*f, k);
              if (k.kc != 0 && CheckKnobs(*f, k, target).ok()) out.push_back(ConfigOf(k));
            }
          }
        }
      }
    }
  }
  if (IsDepthwise(*f)) {
    // Plane variant: vectors over the flattened padded plane, rows = channels
    // per task; 8 accumulators for windows whose weights do not stay in the
    // registers (DepthwiseAccumulators).
    std::vector<int64_t> dvws = VectorWidths(target, f->geo.oh * (f->geo.ow + f->geo.kw));
    if (dvws.size() > 2) dvws.erase(dvws.begin(), dvws.end() - 2);
    for (int64_t vw : dvws) {
      for (int64_t ur : {1, 2, 3, 4, 5, 6, 8}) {
        for (int64_t rows : {1, 2, 4, 8, 16}) {
          Knobs k{vw, ur, 1, rows, 0, 1};
          if (!CheckKnobs(*f, k, target).ok()) continue;
          out.push_back(ConfigOf(k));
        }
      }
    }
    // Channel-vector variant: the target's widest vectors, blocks of up to
    // 12 pixels of a row (the row, half of it, or 4 or 8), rows = channel
    // blocks per task.
    {
      const int64_t lanes = target.FloatLanes();
      std::vector<int64_t> urs = {4, 8, std::min<int64_t>(f->geo.ow, 12), std::min<int64_t>(CeilDiv(f->geo.ow, 2), 12)};
      std::sort(urs.begin(), urs.end());
      urs.erase(std::unique(urs.begin(), urs.end()), urs.end());
      for (int64_t ur : urs) {
        for (int64_t rows : {1, 2, 4}) {
          Knobs k{lanes, ur, 1, rows, 0, 3};
          if (!CheckKnobs(*f, k, target).ok()) continue;
          out.push_back(ConfigOf(k));
        }
      }
    }
    // Row variant: vectors over each output row, rows = channels per task;
    // blocks of up to 4 vectors, or of up to 8 where DepthwiseAccumulators
    // says so (as many as the row has).
    std::vector<int64_t> rvws = VectorWidths(target, f->geo.ow);
    if (rvws.size() > 2) rvws.erase(rvws.begin(), rvws.end() - 2);
    for (int64_t vw : rvws) {
      std::vector<int64_t> urs;
      for (int64_t ur = 1; ur <= 4; ++ur) {
        if (ur > 1 && (ur - 1) * vw >= f->geo.ow) break;
        urs.push_back(ur);
      }
      const int64_t wide = std::min(DepthwiseAccumulators(*f, target), CeilDiv(f->geo.ow, vw));
      if (wide > urs.back()) urs.push_back(wide);
      for (int64_t ur : urs) {
        for (int64_t rows : {1, 2, 4, 8, 16}) {
          Knobs k{vw, ur, 1, rows, 0, 2};
          if (!CheckKnobs(*f, k, target).ok()) continue;
          out.push_back(ConfigOf(k));
        }
      }
    }
  }
  return out;
}

// Direct variant: modelled cycles per useful output element of a register
// block of kb output channels by ur vectors of vw columns, per input channel
// and tap, on FMA units `native_bits` wide (CpuTarget::NativeVectorBits). The
// FMA pipes retire two native operations a cycle and the load ports two
// vector loads (ur vectors of vw*32/native_bits operations each, those that
// cross a cache line twice) and three loads in all (with the kb weight
// broadcasts); fewer than 8 independent native accumulator chains leave the
// FMA latency uncovered; lanes past a row's end are wasted (17 columns in
// 2x16 lanes run at 53%). Where the task's input pack outgrows L1
// (`from_l2`), each of its output-channel blocks streams the pack from L2
// again: the ur input vectors of a tap at three quarters of a native vector
// a cycle (wav2vec2's 128-channel 3-tap stride-2 1-D conv over 1599
// columns, a 217 KiB pack, on Zen 3: 2 channels by 4 vectors, 128 bytes for
// 8 FMAs, 3.13 ms; 4 by 3 2.20, 4 by 2 2.27; FPN heads' 3x3 256-channel
// convs 8-14% faster at 4 by 2). Else it knows no caches: a block that
// sweeps a long reduction (512 channels x 4 taps) once per few columns
// streams its weights from L2 each time, so the default takes, of the
// blocks within 10% of the cheapest, the one with the fewest blocks per
// row. Measured on 3x3 64ch 56x56, 7x1 160ch 17x17, 3x3 s2 288ch 35x35 and
// 2x2 512ch 2x34 (CRNN): within 10% of the best point; the old "widest
// vectors, about 12 accumulators" took up to 1.5x longer. With full-width units a 16-lane
// vector costs what an 8-lane one does (Whisper's 80 -> 128 1-D conv over
// 300 columns on Zen 5: 8 lanes by 3 by 4 channels 0.148 ms, 16 lanes by 2
// by 8 channels 0.078 ms, ORT 0.093), and nearly every 16-lane input load
// splits a line (7x7 stride-2 stems onto 112 columns: 8 channels by one
// vector 1.22 ms, 2 channels by 4 vectors 1.35; 3x3 ones 8 by 1 0.16 ms, 4
// by 2 0.18).
double DirectBlockCost(int64_t ow, int64_t vw, int64_t ur, int64_t kb, int native_bits, bool from_l2) {
  const double ops = static_cast<double>(std::max<int64_t>(1, vw * 32 / native_bits));
  // A tap's input vector starts at any column: a native load of B bytes
  // crosses a 64-byte line (two accesses) with odds (B - 4) / 64.
  const double split = 1.0 + static_cast<double>(std::min<int64_t>(vw * 4, native_bits / 8) - 4) / 64.0;
  const double fma = static_cast<double>(kb * ur) * ops / 2;
  const double vector_loads = static_cast<double>(ur) * ops * split;
  const double loads = std::max(vector_loads / 2, (vector_loads + static_cast<double>(kb)) / 3);
  const double l2 = from_l2 ? static_cast<double>(ur * vw * 4) / (0.75 * native_bits / 8) : 0.0;
  const double chains = static_cast<double>(kb * ur) * ops;
  const double cycles = std::max({fma, loads, l2}) * std::max(1.0, 8.0 / chains);
  const double lanes = static_cast<double>(kb * ur * vw);
  const double used = static_cast<double>(ow) / static_cast<double>(CeilDiv(ow, vw * ur) * vw * ur);
  return cycles / (lanes * used);
}

// Vector registers a channel-vector block of ur pixels by kb channel vectors
// holds at its peak: the accumulators, a tap's kb weight vectors and its ur
// broadcast pixels, which LLVM's scheduler loads ahead of the tap's FMAs.
// Its taps are fenced from each other (LowerChannelVector), so the next
// taps' loads no longer join them, and a block of kb * ur + kb + 1 fits onto
// wide rows (4 x 6 onto 28 columns: 0 spills, 49 before the fences); onto 14
// or 7 columns 4 x 6 and 2 x 12 still spill 8 to 18 sums, so the defaults
// keep to this count.
int64_t ChannelVectorRegisters(int64_t kb, int64_t ur) { return kb * ur + kb + ur; }

// Channel-vector variant: modelled cycles per output vector of a row of ow
// pixels, taken in blocks of ur pixels (the last one narrower) by kb
// channel vectors, per input channel and tap: the two FMA pipes, two loads
// a cycle (a broadcast per pixel, a weight vector per channel vector, and a
// spill and reload per register the block needs beyond the target's),
// and fewer than 8 accumulators leaving the FMA latency uncovered. Spills
// cost where loads already bound the block: on 16 registers 2 x 6 needs 20
// (DeepSpeech2's 32ch 21x11 conv on Zen 3, blocked weights, whole model at
// 1 thread: 2 x 6 72 ms, 2 x 4 49 ms, ORT 45); on 32, 4 x 6 needs 34 and
// stays FMA-bound (HRNet's 256 -> 512 3x3 onto 14x14 on Zen 5: 1.95 ms,
// the best tuned point 1.88).
double ChannelVectorRowCost(int64_t ow, int64_t ur, int64_t kb, int registers) {
  auto block = [kb, registers](int64_t p) {
    const double acc = static_cast<double>(p * kb);
    const int64_t spills = std::max<int64_t>(0, ChannelVectorRegisters(kb, p) - registers);
    return std::max(acc / 2, static_cast<double>(p + kb + 2 * spills) / 2) * std::max(1.0, 8.0 / acc);
  };
  const double cycles = static_cast<double>(ow / ur) * block(ur) + (ow % ur != 0 ? block(ow % ur) : 0.0);
  return cycles / static_cast<double>(ow * kb);
}

// Floats of a channel-vector task's blocked weights (input channels x taps
// x kb vectors) past which its register blocks, which stream them again and
// again, take fewer channel vectors. HRNet's 512 -> 1024 3x3 stride-2 conv
// onto 7x7: on Zen 5 (1 MiB L2) 4 vectors of channels 2.65 ms, 2 vectors
// 2.13 ms; on Zen 3 (512 KiB) 4 vectors by 2 pixels (576 KiB of weights)
// 7.7 ms, 2 by 4 (288 KiB) 8.3: the wider block's fewer loads a weight
// outweigh the L2 there.
constexpr int64_t kBlockedWeightFloats = 192 * 1024;

// Whether the epilogue reads a tensor of the conv output's size (a residual).
bool ReadsResidual(const Graph& g, const ConvForm& f) {
  const int64_t out = NumElements(DimsOf(f.conv->output(0)));
  for (int i = 0; i < static_cast<int>(g.inputs().size()); ++i) {
    if (i == f.x_arg || i == f.w_arg || i == f.b_arg) continue;
    if (NumElements(DimsOf(g.inputs()[i])) == out) return true;
  }
  return false;
}

// Pointwise variant: whether a task should take every pixel block, the
// tasks splitting the output channels instead: where the weights outgrow L2
// and the input stays in it. A task of one pixel block reads all the
// weights, so each task then streamed them from L3 or memory (Xception's
// 728 -> 728 on 10x10 on Zen 3, weights not in L3 as in the whole model:
// 3.0 ms a conv, ORT 1.4); taking every pixel block, each channel block's
// weights are read once, from L1 for every pixel block after the first.
// Where PointwiseChunked holds (Xception's convs among them since space
// 2019), chunked tasks of one pixel block measured faster still. RegNetX's
// 368 -> 368 on 7x7 (Zen 3, 529 KiB of weights, 2 blocks of 24 pixels and
// a dot product): one block per task 0.21 ms a conv, every block 0.19 (ORT
// 0.18).
// On a 2 MiB L2 (PointwiseBlocksFromL2), input of a quarter of it at most;
// and also where the epilogue adds a residual (ReadsResidual), the weights
// take a quarter of the L2 or the output all of it, and the input half of
// it at most. A task of one block reads the residual in runs of vw * ur
// floats a channel, each a miss the prefetchers do not see coming; a task
// of a channel slice reads each channel's run whole, the input staying in
// L2 for every channel block. Sapphire Rapids, 1 thread, group minima in
// the models (keras ResNet-50): 64 -> 256 plus residual on 56x56 (3 MiB
// out) 0.84-1.00 -> 0.71-0.76 ms; 256 -> 1024 plus residual on 14x14 (1 MiB
// of weights) 0.92-0.93 -> 0.84-0.91; its 9 such groups 8.78 -> 7.99 ms,
// ResNeSt-14d's 2 1.15x, PoolFormer's 6 1.06x. Without the residual the
// same shapes measured level (1024 -> 256 on 14x14 0.76 -> 0.74-0.78 ms)
// or slower (64 -> 256 on 56x56 0.59 -> 0.65; MobileNet, EfficientNet and
// RegNet projections 5-10%).
bool PointwiseAllPixels(const Graph& g, const ConvForm& f, const CpuTarget& target) {
  const int64_t l2 = L2WeightFloats(target);
  if (!PointwiseBlocksFromL2(target)) return PointwiseWeightsFromL3(f, target) && f.cg * Pixels(f) <= l2;
  const int64_t l2_floats = L2Floats(target);
  const int64_t weights = f.kg * f.cg, input = f.cg * Pixels(f), out = f.geo.n * f.k * Pixels(f);
  if (PointwiseWeightsFromL3(f, target) && input <= l2_floats / 4) return true;
  return ReadsResidual(g, f) && (weights >= l2_floats / 4 || out >= l2_floats) && input <= l2_floats / 2;
}

// Pointwise variant: whether the default at point c (its vectors and
// register block) takes one pixel block per task and reduction chunks
// (PointwiseChunk): where a block's input outgrows L1 and the map has 4
// blocks or more. Every channel block then reads the chunk from L1, and
// each task's pass over the weights comes from L3 after the first. Zen 3,
// 1 thread, chains of pointwise convs whose weights outgrow L3 (as in the
// models), against taking every pixel block (PointwiseAllPixels): 40 of
// 512 -> 512 on 14x14 81 -> 63 ms (ORT 56), 16 of Xception's 728 -> 728
// on 10x10 36 -> 25 ms (ORT 23). On 7x7 (2 blocks) a task of every block
// stays ahead (1024 -> 1024: 19.0 ms, chunked 20.6): each block would read
// all the weights again, from memory.
//
// Over weights chunked by input channel (kiln.BlockedConv), a point takes
// the weights' chunks wherever there are several, whatever the map: each
// chunk's weights are then one run, read once per pixel block (Zen 3, 1
// thread, on 7x7: 2048 -> 512 every block per task 1.55 ms, one block per
// task in chunks 1.16, ORT 1.21; 960 -> 160 0.192 and 0.171; 728 -> 728
// 0.625 and 0.583).
//
// Not over unchunked weights on a 2 MiB L2 (PointwiseBlocksFromL2).
bool PointwiseChunked(const ConvForm& f, const ScheduleConfig& c, const CpuTarget& target) {
  if (f.weight_chunk > 0) return c.Get("pw", 0) != 0 && PointwiseLayoutChunk(f) != 0;
  if (PointwiseBlocksFromL2(target)) return false;
  Knobs one_block = KnobsOf(c);
  one_block.rows = 1;
  return one_block.pw != 0 && Pixels(f) / (one_block.vw * one_block.ur) >= 4 && PointwiseChunk(f, one_block) != 0;
}

// The channel-vector variant's rows per task for kb vectors of output
// channels: all the output rows, half or a quarter of them, the first of
// the highest EvenShareRank (Inception's 7x1 conv, 5 channel blocks of 17
// rows: whole, 3 blocks against 2 on two threads, 0.44-0.46 ms; quarters,
// 10 tasks against 10, 0.38; halves 0.36-0.37; at one thread all 0.69-0.71).
int64_t ChannelVectorRows(const ConvForm& f, int64_t kb, int64_t lanes) {
  const int64_t blocks = f.geo.n * f.group * std::max<int64_t>(1, f.kg / (kb * lanes));
  const int64_t oh = f.geo.oh;
  int best = -1;
  int64_t pick = oh;
  for (int64_t rows : {oh, CeilDiv(oh, 2), CeilDiv(oh, 4)}) {
    std::vector<int64_t> work;
    for (int64_t b = 0; b < blocks && work.size() < 4096; ++b) {
      for (int64_t r = 0; r < oh; r += rows) work.push_back(std::min(rows, oh - r));
    }
    const int rank = EvenShareRank(work);
    if (rank > best) {
      best = rank;
      pick = rows;
    }
  }
  return pick;
}

// Whether a register block that needs more vector registers than the
// target has costs little more than its FMAs. LLVM then keeps some of the
// block's accumulators in stack slots, each multiply-add on them a reload,
// the FMA and a spill (4 x 6 on 32 registers: 26-29 spills and as many
// reloads for 72 FMAs, whatever CPU it schedules for). On Zen that stack
// traffic cost little (HRNet's 256 -> 512 3x3 stride 2 onto 14x14 on Zen 5:
// 4 x 6 1.95 ms, the best tuned point 1.88); on an Intel core every spilled
// accumulator's chain waits on store forwarding (Sapphire Rapids, 1 thread,
// in the model: 128 -> 256 onto 28x28 4 x 6 4.27 ms, 4 x 4 2.94, 2 x 8
// 2.78; Inception v3's 48 -> 64 5x5 onto 35x35, 51 spills for 340 FMAs,
// 4 x 4 1.25x faster). Only Zen was measured to pay.
bool SpilledBlocksPay(const CpuTarget& target) { return absl::StartsWith(target.cpu, "znver"); }

// Vector registers a blocked channel-vector block of ur pixels by kb channel
// vectors holds at its peak (ChannelVectorRegisters), except that a window
// of one column loads one broadcast pixel ahead, not ur: each tap is then an
// iteration of its own, with nothing of the next tap to hoist. Sapphire
// Rapids: Inception v3's 7x1 convs onto 17x17 in 4 x 6 spill nothing and
// run 1.05-1.10x faster than in 4 x 4 (its 1x7 ones spill 16 times for 476
// FMAs and still run 1.07x faster in 4 x 6, but count as spilling).
int64_t BlockedRegisters(const ConvForm& f, int64_t kb, int64_t ur) {
  const int64_t px = std::min(ur, f.geo.ow);
  return ChannelVectorRegisters(kb, px) - (f.geo.kw == 1 ? px - 1 : 0);
}

// Blocked weights (channel-vector points only): the most channel vectors
// whose weights stay within kBlockedWeightFloats, then, where spills do not
// pay (SpilledBlocksPay), blocks that fit the registers
// (BlockedRegisters), then the register block of the cheapest row
// (ChannelVectorRowCost), the fewest blocks per row, the narrowest; rows per
// ChannelVectorRows. Measured against 48 tuned points of HRNet's three 3x3
// stride-2 convs (Zen 5, 1 thread): 512 -> 1024 onto 7x7 2 x 8 (one block
// of 7) 2.13 ms, best; 256 -> 512 onto 14x14 4 x 6 1.95 ms, best 1.88; 128
// -> 256 onto 28x28 4 x 6 1.93, best 1.91.
ScheduleConfig DefaultBlocked(const std::vector<ScheduleConfig>& space, const ConvForm& f, const CpuTarget& target) {
  const int64_t lanes = target.FloatLanes(), taps = f.geo.kh * f.geo.kw;
  const bool spills_pay = SpilledBlocksPay(target);
  auto score = [&](const ScheduleConfig& c) {
    const int64_t kb = c.Get("kb", 1), ur = c.Get("ur", 1);
    const bool fits = spills_pay || BlockedRegisters(f, kb, ur) <= target.NumVectorRegisters();
    return std::make_tuple(f.cg * taps * kb * lanes <= kBlockedWeightFloats, fits, kb,
                           -ChannelVectorRowCost(f.geo.ow, ur, kb, target.NumVectorRegisters()),
                           -CeilDiv(f.geo.ow, ur), -ur,
                           c.Get("rows", 1) == ChannelVectorRows(f, kb, lanes));
  };
  return BestBy(space, score);
}

// Whether every node of the epilogue is a few vector instructions a value:
// no division, no exponential or other polynomial.
bool CheapEpilogue(const Graph& g, const ConvForm& f) {
  static const std::set<std::string> kCheap = {"Relu", "Clip", "LeakyRelu", "PRelu", "Add", "Sub", "Mul", "Max",
                                               "Min", "Neg", "Abs", "HardSigmoid", "HardSwish", "Identity"};
  return std::all_of(g.nodes().begin(), g.nodes().end(),
                     [&](const auto& n) { return n.get() == f.conv || kCheap.count(n->op_type()) != 0; });
}

// Whether the epilogue reads a tensor of more than one value per output
// channel (a residual, a map-sized operand): after the channel-vector
// variant's output transpose, such an operand is read one lane at a time.
bool EpilogueReadsMaps(const Graph& g, const ConvForm& f) {
  for (const auto& n : g.nodes()) {
    if (n.get() == f.conv) continue;
    for (const Value* v : n->inputs()) {
      if (v == nullptr || v->producer() != nullptr || !v->type().IsStatic()) continue;
      if (NumElements(v->type().StaticDims()) > f.k) return true;
    }
  }
  return false;
}

// Whether a depthwise conv's default is the row variant (dw=2) rather than
// the plane variant (dw=1): output rows of 4 of the target's vectors or
// more at stride 1 (or of 48 columns under windows of up to 3 columns), of
// 32 columns or more at stride 2 with windows of up to 3 columns. Zen 3,
// 1 thread, in place against planes: 3x3 over 16 and 32 channels on
// 112x112 0.072 against 0.127 ms and 0.144 against 0.246, over 96 on 56x56
// 0.094 against 0.175; 7x7 over 40 on 56x56 (ConvNeXt) 0.264 against 0.488;
// 3x3 stride 2 onto 56x56 0.281 against 0.342. At stride 2 the row variant
// de-interleaves every tap's columns anew (two shuffles a tap and vector),
// the planes once: 5x5 stride 2 onto 28x28 0.355 against 0.223. Onto
// 28x28 (3.5 vectors) 3x3 stride 2 measured 0.103 against 0.115 and 7x7
// 0.234 against 0.296, but 5x5 0.294 against 0.271; onto 14x14 and 7x7
// the planes win (0.035 against 0.048, 0.038 against 0.049). At stride 2
// only under an epilogue of a few instructions (CheapEpilogue): the
// de-interleaving shuffles and a sigmoid's divide share ports, where the
// planes shuffle in a loop of their own and apply the epilogue in another
// (Zen 3, 3x3 stride 2 over 96 channels onto 56x56 under x * sigmoid(x),
// EfficientNet-B0's: 0.50 ms in rows, 0.39 in planes; under Clip,
// MobileNetV2's: 0.27 against 0.38; at stride 1 under x * sigmoid(x) the
// two are within 15%, rows ahead). On AVX2 the direct variant takes such
// stride-2 convs first (DepthwiseDirectPays). At stride 2 the rows need
// 32 output columns, not 4 vectors, where vectors hold 16 floats (Zen 5, 1
// thread, bench/binary_ab.py --changed, planes against rows: Xception-41's
// 3x3 over 256 onto 38x38 0.193 against 0.149 ms, GhostNet's 2 groups 0.114
// against 0.069, MobileNetV3-Small's onto 56x56 0.025 against 0.016; onto
// 28x28 the two are even, 0.115 against 0.114 for four 3x3 over 96). At
// stride 1 under 3x3, rows of 48 columns or more (three vectors of 16; six
// chained convs, planes against rows: 64 channels on 48x48 0.171 against
// 0.145 ms, 48 on 56x56 0.197 against 0.171, 72 on 56x56 0.295 against
// 0.231, ORT 0.164, 0.157, 0.278; on 40x40 0.296 against 0.276, on 38x38
// 0.470 against 0.530, on 28x28 0.119 against 0.145); under 5x5 on 56x56
// the planes stay ahead (32 channels, 0.266 against 0.319).
bool DepthwiseRowsPay(const Graph& g, const ConvForm& f, const CpuTarget& target) {
  if (f.geo.three_d) return false;
  if (f.geo.sw == 2) return f.geo.kw <= 3 && CheapEpilogue(g, f) && f.geo.ow >= 32;
  return f.geo.sw == 1 && (f.geo.ow >= 4 * target.FloatLanes() || (f.geo.kw <= 3 && f.geo.ow >= 48));
}

// Whether a depthwise conv's default is the channel-vector variant (dw=3,
// depthwise_channels.h) rather than planes or rows, on 16-lane targets at
// stride 1: onto maps of 7x7 or less (windows of 2x2 or more), onto rows
// of 12 columns or less under 3x3 windows or wider, onto rows of 16 to 24
// columns under 5x5 or wider, and onto rows of 14 columns under 7x7 or
// wider, or under 5x5 over 96 channels or more with a cheap epilogue; past
// maps of 7x7, the first two only where the epilogue reads no map-sized
// operand (EpilogueReadsMaps). There the planes compute a
// position for every column of the padded row (a 7x7 map's 49 pixels take
// 80 under 5x5, 64 under 3x3) and nearly every tap's load splits a cache
// line; the channel vectors pay two transposes per element instead, which
// the taps of larger maps and of strided convs (four input pixels
// transposed per output) do not repay, nor, on 14x14 under 5x5, a
// x * sigmoid(x) epilogue (evaluated for a whole run of pixels before its
// transpose) or fewer channels (a tail block of masked transposes). Zen 5,
// 1 thread, planes against channel vectors (bench/binary_ab.py --profile
// over 25 corpus models' 190 such groups): MNASNet's 5x5 over 576 channels
// on 7x7 0.025 against 0.015 ms, EfficientNet-B0's 3x3 over 1152 on 7x7
// under x * sigmoid(x) 0.049 against 0.024, NASNet's 3x3 over 176 on 7x7
// (no bias) 0.004 against 0.003; on 14x14 5x5 over 240 under a Relu 0.027
// against 0.019 (MNASNet), ConvNeXt's 7x7 over 160 0.030 against 0.020;
// and where the planes stay: 5x5 on 14x14 over 480 under x * sigmoid(x)
// 0.053 against 0.057, over 88 channels 0.008 against 0.009; MNASNet's
// 3x3 over 240 on 14x14, 2 groups, 0.008 against 0.011, 5x5 over 72 on
// 28x28, 2 groups, 0.036 against 0.050; stride 2 onto 7x7 and 14x14, 5x5
// over 144 and 48, 0.020 against 0.022 and 0.023 against 0.029
// (bench/schedule_ab.py --profile). Rows of 8 to 12 columns under 3x3:
// each channel's plane is a few vectors, its copy and padding cost more than
// its taps (Zen 5, 1 thread, 6 chained convs under a Relu, planes against
// channel vectors: 256 channels on 8x8 0.040 against 0.018 ms, on 10x10
// 0.088 against 0.029, on 11x11 0.056 against 0.037, 1024 on 10x10 0.342
// against 0.122 (ORT 0.141), 576 on 12x12 0.240 against 0.093; 240 on 10x10
// under x * sigmoid(x) 0.247 against 0.046; on 13x13 0.053 against 0.051, on
// 14x14 to 16x16 and 20x20 and 24x24 the planes win by 10-20%). Under 5x5:
// 256 on 16x16 0.168 against 0.145, 20x20 0.284 against 0.236, 24x24 0.421
// against 0.371, 28x28 0.403 against 0.523; 672 on 20x20 under x *
// sigmoid(x) 1.000 against 0.793; 7x7 over 128 on 20x20 0.293 against
// 0.214. In the corpus (bench/binary_ab.py --changed, 10 models, 58
// groups): Xception-41's 3x3 on 10x10 over 1024 and 1536 channels 0.260
// against 0.123 ms, keras Xception's 26 over 728 on 10x10 0.674 against
// 0.571, keras MobileNetV2's 6 over 288 and 432 on 10x10 0.104 against
// 0.053, MobileNetV3-Large's 5x5 over 672 and 960 on 16x16 (DeepLabV3,
// LR-ASPP) 0.386 against 0.334, FastViT's 7x7 over 192 on 16x16 0.050
// against 0.035; but FastViT's 3x3 over 384 on 8x8, whose epilogue
// subtracts a map and adds the conv's input, 0.012 against 0.018.
bool DepthwiseChannelsPay(const Graph& g, const ConvForm& f, const CpuTarget& target) {
  const WindowGeometry& s = f.geo;
  if (!IsDepthwise(f) || target.FloatLanes() != 16 || s.sh != 1 || s.sw != 1) return false;
  const int64_t taps = s.kh * s.kw;
  if (s.oh <= 7 && s.ow <= 7) return taps >= 4;
  if (s.ow <= 12) return taps >= 9 && !EpilogueReadsMaps(g, f);
  if (s.ow >= 16 && s.ow <= 24) return taps >= 25 && !EpilogueReadsMaps(g, f);
  return s.ow <= 14 && (taps >= 49 || (taps >= 25 && f.group >= 96 && CheapEpilogue(g, f)));
}

// Whether a stride-2 depthwise conv's default is the direct variant (input
// rows staged per task, each de-interleaved once) rather than planes or
// rows: onto output rows of 28 columns or more. Zen 3, 1 thread, in the
// models (bench/schedule_ab.py --profile), direct against the default of
// before: SSDlite's 3x3 over 64 channels onto 80x80 0.377 against 0.501 ms
// (rows), MNASNet's over 24 onto 56x56 0.049 against 0.059 (rows),
// MobileNetV2's over 144 onto 28x28 0.087 against 0.109 (planes),
// MobileNetV3's 5x5 over 72 onto 28x28 0.078 against 0.101 (planes),
// EfficientNet-B0's 5x5 over 144 onto 28x28 under x * sigmoid(x) 0.217 against 0.234
// (planes); MobileNetV2's 3x3 over 96 onto 56x56 0.266 against 0.263
// (rows). Onto 14x14 the planes win (standalone, 5x5 over 144 and 240
// channels: 0.044 against 0.055, 0.075 against 0.091). Measured on AVX2
// only: targets with wider vectors keep rows and planes.
bool DepthwiseDirectPays(const ConvForm& f, const CpuTarget& target) {
  return IsDepthwise(f) && f.geo.sh == 2 && f.geo.sw == 2 && f.geo.ow >= 28 && target.FloatLanes() == 8;
}

// Pointwise convs: the pointwise variant, widest vectors, a pixel tail
// without masked multiply-adds, 14 to 18 accumulators (kb 8 over 128 input
// channels or more, else kb 4, or the nearest divisor of the channels),
// PointwiseStreamRows pixel blocks per task. Depthwise convs: the direct
// variant where DepthwiseDirectPays (as below), else the row
// variant where DepthwiseRowsPay (widest vectors, blocks of
// DepthwiseAccumulators of them at stride 1, of 1 at stride 2), else the
// plane variant (widest vectors, DepthwiseAccumulators); the most channels
// per task that still leaves 8 tasks.
// Others: of the register blocks within 10% (5% when no such block covers a
// whole output row) of the cheapest by DirectBlockCost, the fewest per row
// (then about 12 accumulators), one row per task, unless the channel-vector
// variant is preferred. Blocked weights: DefaultBlocked.
ScheduleConfig Default(const Graph& g, const CpuTarget& target) {
  std::vector<ScheduleConfig> space = Enumerate(g, target);
  absl::StatusOr<ConvForm> f = AnalyzeConv(g);
  if (f.ok() && f->weight_block > 0 && !IsPointwise(*f) && !space.empty()) return DefaultBlocked(space, *f, target);
  const int64_t planes = f.ok() ? f->geo.n * f->group : 1;
  // Pointwise: the fewest channel splits that reach kMinTasks (or the most there are).
  // Direct: the fewest column splits that reach kMinTasks (1-D convs: one
  // task without) and whose pack DirectPackFits (or the most there are). Not
  // the splits two threads share most evenly: SqueezeNet's
  // 512 -> 1000 on 13x13 runs 5 pixel blocks (the last with the 9-pixel
  // tail) 0.46-0.49 ms on two threads, split in 10 tasks 0.49-0.53 (each
  // split reads the input again).
  auto split_score = [&](const ScheduleConfig& c) -> std::pair<bool, int64_t> {
    if (!f.ok() || c.Get("dw", 0) != 0 || c.Get("kv", 0) != 0) return {true, 0};
    const Knobs k = KnobsOf(c);
    const int64_t blocks = k.pw != 0 ? planes * std::max<int64_t>(1, CeilDiv(Pixels(*f) / (k.vw * k.ur), k.rows))
                                     : DirectTasks(*f, k.rows);
    const int64_t split = k.pw != 0 ? k.ks : k.cs;
    const bool enough = blocks * split >= kMinTasks && (k.pw != 0 || DirectPackFits(*f, k, target));
    return {enough, enough ? -split : split};
  };
  const int64_t reduction = f.ok() ? f->cg * f->geo.kd * f->geo.kh * f->geo.kw : 1;
  const bool short_reduction = reduction <= kShortReduction;
  // Pointwise register blocks: 8 output channels by 2 pixel vectors over
  // long reductions, where the block's weights no longer stay in L1 (tuned
  // on Zen 5, 13x13 to 56x56 maps: SqueezeNet's 512->1000 on 13x13 0.89 ->
  // 0.70 ms, 480->80 and 672->112 on 14x14 15% faster; 128 channels and
  // more gain 0-28%, fewer are within 3% either way); 4 by 4 otherwise.
  // Accumulators: PointwiseAccumulators.
  const int64_t pw_kb = reduction >= 128 ? 8 : 4;
  const int64_t pw_acc = f.ok() ? PointwiseAccumulators(*f, target) : 16;
  const int64_t pixels = f.ok() ? Pixels(*f) : 1;
  const int64_t ow = f.ok() ? f->geo.ow : 1;
  const int native_bits = target.NativeVectorBits();
  auto direct_cost = [&f, ow, native_bits](const ScheduleConfig& c) {
    const bool from_l2 = f.ok() && DirectPackFloats(*f, KnobsOf(c)) > kL1PackFloats;
    return DirectBlockCost(ow, c.Get("vw", 1), c.Get("ur", 1), c.Get("kb", 1), native_bits, from_l2);
  };
  // Channel-vector variant where ops::PrefersChannelVectors holds, 6 pixels
  // by 2 vectors of output channels, rows per ChannelVectorRows: 64x56x56 3x3
  // 1.17 -> 1.04 ms, Inception's 17x17 1x7/7x1 convs 0.66 -> 0.57 ms,
  // Inception v3 whole 73 -> 54 ms. Not on maps of fewer than 36 pixels,
  // where packing a task's weights is not paid back (SegFormer's 8x8
  // stride-8 patch embedding onto 4x4: 0.05 ms direct, 0.26 ms as channel
  // vectors), nor on one row (CRNN's 1x33: 0.96 ms direct, 1.2 ms).
  const int64_t lanes = target.FloatLanes();
  const bool prefer_kv = f.ok() && ops::PrefersChannelVectors(reduction, f->geo.oh, ow, lanes);
  const int64_t kv_rows = f.ok() ? ChannelVectorRows(*f, 2, lanes) : 1;
  // 2: the preferred channel-vector point; 1: any other variant; 0: other
  // channel-vector points (only tuning picks them).
  // Where a task's packs of 2 channel vectors would not fit (512 input
  // channels of 3x3 taps), 12 pixels by one vector: HRNet's 512->1024 3x3
  // stride-2 conv onto 7x7 4.32 ms direct, 3.64 ms so. Fewer pixels where
  // the block, as wide as the row at most, would spill (ChannelVectorRegisters):
  // 4 and 6 on 16 registers (Zen 3, RegNetY-400MF's group convs onto 14x14,
  // 1 by 12 against 1 by 6: 0.20-0.34 ms against 0.14-0.27; onto 7x7, where
  // 12 pixels are one block of 7 that fits, 0.074-0.11 against 0.10-0.11).
  auto fits = [&](int64_t kb, int64_t ur) {
    return ChannelVectorRegisters(kb, std::min(ur, ow)) <= target.NumVectorRegisters();
  };
  const int64_t kb2_ur = fits(2, 6) ? 6 : 4;
  const int64_t kb1_ur = fits(1, 12) ? 12 : 6;
  const bool kb2 = std::any_of(space.begin(), space.end(), [&](const ScheduleConfig& c) {
    return c.Get("kv", 0) == 1 && c.Get("kb", 1) == 2 && c.Get("ur", 1) == kb2_ur && c.Get("rows", 1) == kv_rows;
  });
  auto kv_first = [&](const ScheduleConfig& c) {
    if (c.Get("kv", 0) == 0) return 1;
    const bool preferred =
        kb2 ? c.Get("ur", 1) == kb2_ur && c.Get("kb", 1) == 2 : c.Get("ur", 1) == kb1_ur && c.Get("kb", 1) == 1;
    return prefer_kv && preferred && c.Get("rows", 1) == kv_rows ? 2 : 0;
  };
  double cheapest = HUGE_VAL;
  auto is_direct = [](const ScheduleConfig& c) { return c.Get("pw", 0) == 0 && c.Get("dw", 0) == 0 && c.Get("kv", 0) == 0; };
  for (const ScheduleConfig& c : space) {
    if (is_direct(c)) cheapest = std::min(cheapest, direct_cost(c));
  }
  // How close to the cheapest modelled block a direct block must be. Where a
  // block within 10% covers a whole output row, the row streams each output
  // channel's weights once: 10% (CRNN's 2x2 512ch on 1x33: one 16x3 block
  // 0.96 ms, five 8-lane blocks 1.24 ms). Wider rows take several blocks
  // anyway: 5%, which keeps the FMA-bound model's choice (DeepSpeech2's
  // 21x11 32ch on 41x100: 7 blocks of 16 lanes 17.7 ms, 5 blocks of 8x3
  // 20.0 ms; 7x7 stems over 112 columns 2.4 ms, not 2.8).
  double tolerance = 1.05;
  for (const ScheduleConfig& c : space) {
    if (is_direct(c) && direct_cost(c) <= 1.1 * cheapest &&
        c.Get("vw", 1) * c.Get("ur", 1) >= ow) {
      tolerance = 1.1;
    }
  }
  // Depthwise plane variant: the positions it computes (np, a multiple of
  // vw * ur: on a 7x7 map with a 5x5 window, 77 are needed, 16 x 4 lanes
  // compute 128, 8 x 5 compute 80) bound its time; points within 15% of the
  // fewest, then vectors no wider than an output row (its copies and stores
  // are a vector per row: 7 columns in 16 lanes measured 0.13 ms where 8
  // lanes took 0.10), or, for windows of 25 taps or more, as wide as one
  // native FMA operation (Zen 5: a 5x5 window on 7x7 over 576 channels, 80
  // positions in 16 lanes by 5 0.026 ms, in 8 by 5 twice 0.031; 3x3 ones
  // onto 7x7 lose 7% at stride 1, 20% at stride 2), then the widest of
  // those vectors (the multiply-adds a position costs are 1 / vw of a
  // vector's: Zen 3, the same 576 channels in 8 lanes by 5 0.045 ms, in 4 by
  // 4 five times 0.076), then DepthwiseAccumulators.
  int64_t fewest = INT64_MAX;
  auto positions = [&f](const ScheduleConfig& c) { return f.ok() ? PlaneDimsOf(*f, KnobsOf(c)).np : 0; };
  for (const ScheduleConfig& c : space) {
    if (c.Get("dw", 0) == 1) fewest = std::min(fewest, positions(c));
  }
  int64_t row_lanes = 1;
  while (f.ok() && row_lanes < f->geo.ow) row_lanes *= 2;
  if (f.ok() && f->geo.kh * f->geo.kw >= 25) row_lanes = std::max<int64_t>(row_lanes, native_bits / 32);
  // Depthwise: the row variant where DepthwiseRowsPay, at the target's
  // widest vector, DepthwiseAccumulators vectors a block at stride 1 (as
  // many as the row has) and 1 at stride 2; else the plane variant.
  const int64_t want_dw = !f.ok() || !IsDepthwise(*f)           ? 1
                         : DepthwiseChannelsPay(g, *f, target)    ? 3
                         : DepthwiseRowsPay(g, *f, target)        ? 2
                                                                  : 1;
  const int64_t depthwise_ur = f.ok() ? DepthwiseAccumulators(*f, target) : 4;
  auto dw_score = [&](const ScheduleConfig& c) {
    const int64_t dw = c.Get("dw", 0);
    if (dw == 0) return std::make_tuple(int64_t{0}, false, false, int64_t{0}, int64_t{0});
    if (dw == 3) {  // a block of channels a task (the most tasks), a row's pixels a block, up to 8
      return std::make_tuple(int64_t{dw == want_dw ? 2 : 0}, true, true, -c.Get("rows", 1),
                             -std::abs(c.Get("ur", 1) - std::min<int64_t>(f->geo.ow, 8)));
    }
    if (dw == 2) {
      const int64_t want_ur = f->geo.sw == 1 ? std::min(depthwise_ur, CeilDiv(f->geo.ow, c.Get("vw", 1))) : 1;
      return std::make_tuple(int64_t{dw == want_dw ? 2 : 1}, true, c.Get("vw", 1) == target.FloatLanes(), int64_t{0},
                             -std::abs(c.Get("ur", 1) - want_ur));
    }
    const bool within_row = c.Get("vw", 1) <= row_lanes;
    return std::make_tuple(int64_t{dw == want_dw ? 2 : 1},
                           static_cast<double>(positions(c)) <= 1.15 * static_cast<double>(fewest), within_row,
                           within_row ? c.Get("vw", 1) : int64_t{0}, -std::abs(c.Get("ur", 1) - depthwise_ur));
  };
  const bool all_pixels = f.ok() && IsPointwise(*f) && PointwiseAllPixels(g, *f, target);
  const bool direct_depthwise = f.ok() && DepthwiseDirectPays(*f, target);
  // Pointwise: where the best block is wider than the map, it leaves no
  // full block and the map runs as passes of one vector by kb channels over
  // all the weights; the best block within the map whose leftover is one
  // vector at most (it joins the last block: PointwiseMergedChannels) takes
  // its place. Zen 5, 1 thread: 720 -> 240 on 5x5, 8 channels by 2 vectors
  // 0.059 ms, by 1 (its 9 leftover pixels join it) 0.042, ORT 0.045 (5x5
  // maps of 5 models 1.32-1.38x); on 7x7, 4 by 3 (one pixel left) for 4 by
  // 4, 0.94-1.12x over 7 models, 1.06x summed (8 by 2, 17 pixels left
  // apart, lost: 0.91-0.94x).
  bool prefer_within_map = false;
  auto within_map = [&](const ScheduleConfig& c) {
    const int64_t bw = c.Get("vw", 1) * c.Get("ur", 1);
    return bw <= pixels && pixels % bw <= c.Get("vw", 1);
  };
  auto score = [planes, pixels, ow, short_reduction, pw_kb, pw_acc, all_pixels, direct_depthwise, cheapest, tolerance, &f,
                &target, &direct_cost, &split_score, &dw_score, &kv_first, &prefer_within_map,
                &within_map](const ScheduleConfig& c) {
    int64_t acc = c.Get("kb", 1) * c.Get("ur", 1);
    int64_t pw = c.Get("pw", 0), dw = c.Get("dw", 0);
    bool unmasked = pw == 0 || !PointwiseTailMasked(pixels, c.Get("vw", 1), c.Get("ur", 1));
    const bool block_fits = pw == 0 || !prefer_within_map || within_map(c);
    int64_t want = pw ? pw_acc : dw ? 4 : 12;
    int64_t rows = c.Get("rows", 1);
    // A short reduction (a stem conv over 3 channels) spends as much on
    // packing its input rows as on the taps: more rows per task share them.
    // Pointwise: nearest PointwiseStreamRows.
    const int64_t stream = pw && f.ok() ? PointwiseStreamRows(*f, c.Get("vw", 1), c.Get("ur", 1), target) : 0;
    int64_t rows_score = dw                      ? (planes / rows >= 8 ? rows : -rows)
                         : stream > 0            ? -std::abs(rows - stream)
                         : short_reduction && !pw ? rows
                                                 : -rows;
    const bool chunked = pw && f.ok() && PointwiseChunked(*f, c, target);
    // Where PointwiseAllPixels holds, an unchunked point takes every pixel
    // block; it scores as a chunked point at its stream rows does, so that
    // the channel block decides between them, not the pixel block (which
    // chunking depends on): Zen 5, 1 thread, PoolFormer's 320 -> 1280 on
    // 14x14 as 4 channels by 4 vectors over all 3 blocks 0.96-1.00 ms, as 8
    // by 2 chunked 0.79-0.80 (2 vectors make 6 blocks, enough to chunk);
    // SqueezeNet's 512 -> 1000 on 13x13 1.03 -> 0.72.
    if (pw && all_pixels && !chunked) rows_score = rows >= pixels / (c.Get("vw", 1) * c.Get("ur", 1)) ? 0 : -rows;
    // Pointwise, long reductions: reduction chunks where PointwiseChunked says so, none elsewhere.
    const bool chunk_score = chunked == (c.Get("kc", 0) != 0);
    // Direct variant: within the tolerance of the cheapest modelled block,
    // then the fewest blocks per row (a short reduction's weights stay in L1:
    // then the cheapest).
    const bool near = dw || pw || direct_cost(c) <= tolerance * cheapest;
    const int64_t blocks = dw || pw ? 0
                           : short_reduction ? static_cast<int64_t>(1e6 * direct_cost(c))
                                             : CeilDiv(ow, c.Get("vw", 1) * c.Get("ur", 1));
    // Pointwise: 14 to 18 accumulators count alike, so that the channel
    // block (below) decides where 4 does not divide the channels (7 by 2
    // rather than 2 by 8 for 546 output channels).
    const int64_t acc_off = pw ? std::max<int64_t>(0, std::abs(acc - want) - 2) : std::abs(acc - want);
    // Channel blocks: pointwise, nearest pw_kb; depthwise, the fewest;
    // direct, the most, each input vector loaded feeding more of them
    // (wav2vec2's 128-channel 3-tap stride-2 1-D conv over 1599 columns: 2
    // channels by 4 vectors 1.07 ms, 4 by 4 0.75, its rows outgrowing L2;
    // 7x7 stems 8-11% faster, 3x3 ones over 3 channels 3-24%, but for VGG's
    // at stride 1, 4 by 2 0.82 ms, 8 by 1 0.91).
    const int64_t kb = c.Get("kb", 1);
    const int64_t kb_score = pw ? -std::abs(kb - pw_kb) : dw ? -kb : kb;
    return std::make_tuple(kv_first(c), direct_depthwise ? dw == 0 : dw != 0, pw, dw_score(c), near, -blocks,
                           c.Get("vw", 1), unmasked, block_fits, -acc_off,
                           rows_score, chunk_score, kb_score, c.Get("kb", 1), split_score(c));
  };
  ScheduleConfig best = BestBy(space, score);
  if (best.Get("pw", 0) != 0 && best.Get("vw", 1) * best.Get("ur", 1) > pixels &&
      std::any_of(space.begin(), space.end(),
                  [&](const ScheduleConfig& c) { return c.Get("pw", 0) != 0 && within_map(c); })) {
    prefer_within_map = true;
    best = BestBy(space, score);
  }
  return best;
}

absl::Status Validate(const Graph& g, const ScheduleConfig& c, const CpuTarget& target) {
  ASSIGN_OR_RETURN(ConvForm f, AnalyzeConv(g));
  for (const auto& [key, v] : c.knobs) {
    if (key != "vw" && key != "ur" && key != "kb" && key != "rows" && key != "pw" && key != "dw" && key != "ks" &&
        key != "kv" && key != "cs" && key != "kc") {
      return absl::InvalidArgumentError(absl::StrCat("schedule ", c.ToString(), ": knob ", key,
                                                     " does not apply to conv ", f.conv->name()));
    }
  }
  return CheckKnobs(f, KnobsOf(c), target);
}

Expr I(int64_t v) { return IntImm(v); }

// a * b + c, fused where the IR offers it.
Expr MulAdd(Expr a, Expr b, Expr c) {
  if (IsKnownCall("fma", 3)) return Call("fma", {std::move(a), std::move(b), std::move(c)});
  return Add(Mul(std::move(a), std::move(b)), std::move(c));
}

}  // namespace

bool FlatSpatialIndexOk(const Graph& g, const ConvForm& f) {
  for (const auto& node : g.nodes()) {
    if (node.get() == f.conv) continue;
    for (int i = 0; i < node->num_inputs(); ++i) {
      const Value* v = node->input(i);
      if (v == nullptr) continue;
      std::vector<int64_t> d = DimsOf(v);
      int64_t h = d.size() >= 2 ? d[d.size() - 2] : 1;
      int64_t w = d.empty() ? 1 : d.back();
      if (!(h == 1 && w == 1) && !(h == f.geo.oh && w == f.geo.ow)) return false;
    }
  }
  return true;
}

namespace {

// The conv's operand buffers among the workload's arguments, and the buffer
// its raw (pre-epilogue) values go to, bound as the conv's value in `ge`.
struct ConvBuffers {
  Buffer x, w, bias, raw;  // bias: null when the conv has none
  AnchorOutputs outs;
};

ConvBuffers BindConvBuffers(const Graph& g, const ConvForm& f, GraphExpr& ge) {
  const std::vector<Buffer>& args = ge.args();
  ConvBuffers b;
  b.x = args[f.x_arg];
  b.w = args[f.w_arg];
  b.bias = f.b_arg >= 0 ? args[f.b_arg] : nullptr;
  b.outs = PlanAnchorOutputs(g, f.conv->output(0));
  b.raw = ge.output_buffer(b.outs.raw);
  ge.Bind(f.conv->output(0), b.raw);
  return b;
}

// Pointwise variant: whether a task packs its full blocks' input (cg
// channels of rows * vw * ur pixels) once, contiguous, before its blocks of
// output channels read it: at least 4 channel blocks per task read the
// pack, it fits the stack pack, and either the input's channel planes are
// 4 KiB or more (in place, every channel step of a block is a new page and
// a new cache line), or a block's input column starts off the cache lines
// and outgrows L1 (PointwiseColumnOffLines), or the task runs reduction
// chunks (kc): each channel block then reads the chunk's kc rows of vw * ur
// pixels from L1, and in place those rows start a plane apart, half of
// their vectors straddling two cache lines. Zen 3, 1 thread, Xception's
// 728 -> 728 (chunks of 104) alternated 6 times: on 10x10 1.78-2.05 ms in
// place, 1.31-1.57 packed (ORT 1.3-1.6); on 19x19 5.67-5.79 and 4.65-5.55.
// Without chunks a task's input stays in L1 whole and packing it bought
// nothing measurable (96 -> 576 on 14x14, 256 -> 256 on 28x28), or lost
// where few channel blocks share it (144 -> 24 on 28x28: 0.063-0.078 ms,
// packed 0.077-0.108).
bool PointwisePacksInput(const ConvForm& f, const Knobs& k, const CpuTarget& target) {
  const int64_t per_task = CeilDiv(f.kg / k.kb, k.ks);
  return (Pixels(f) >= 1024 || k.kc != 0 || PointwiseColumnOffLines(f, k.vw * k.ur, target)) && per_task >= 4 &&
         f.cg * k.rows * k.vw * k.ur <= kMaxPackFloats / 2;
}

// Pointwise variant: a task is (image, group, `rows` register blocks of
// vw*ur pixels); per block of kb output channels it accumulates over the
// group's input channels reading x and the weights in place, or a pack of
// its input (PointwisePacksInput). The
// pixels the full blocks leave (fewer than vw*ur) form one narrower block in
// the last task: whole vw-wide vectors, then the pixels left in the
// narrowest power-of-two vector that holds them (an 8-lane vector costs
// half a 16-lane one). That last vector ends at the last pixel, overlapping
// the vector before it, and stores only the pixels it adds: its loads and
// multiply-adds need no lane mask, so its accumulators stay in registers.
// Only a map narrower than that vector leaves the multiply-adds masked.
// Where PointwiseMergedChannels says so, the last full block takes those
// pixels instead, as one more vector.
// With reduction chunks (kc, PointwiseChunk) the full blocks run chunk by
// chunk, every channel block of the task per chunk, their running sums kept
// in `part` between chunks; the tail runs whole, after them.
absl::StatusOr<LoopFunc> LowerPointwise(const Graph& g, const ConvForm& f, const Knobs& kn, const CpuTarget& target) {
  const int registers = target.NumVectorRegisters();
  const WindowGeometry& s = f.geo;
  const int64_t np = Pixels(f);
  const int64_t vw = kn.vw, ur = kn.ur, kb = kn.kb, rows = kn.rows;
  const int64_t bw = vw * ur;
  const int64_t nbf = np / bw, rem = np % bw;
  const int64_t chunks = std::max<int64_t>(1, CeilDiv(nbf, rows));
  const int64_t nkb = f.kg / kb, per_split = CeilDiv(nkb, kn.ks), splits = CeilDiv(nkb, per_split);
  const int64_t tasks = s.n * f.group * chunks * splits;
  const int64_t kc = kn.kc != 0 ? kn.kc : f.cg, reduction_chunks = f.cg / kc;
  const bool flat_ok = s.one_d || FlatSpatialIndexOk(g, f);

  GraphExpr ge(g);
  const std::vector<Buffer>& args = ge.args();
  const ConvBuffers bufs = BindConvBuffers(g, f, ge);
  const Buffer &x = bufs.x, &w = bufs.w, &bias = bufs.bias;
  const AnchorOutputs& outs = bufs.outs;

  Expr n = Var("n_"), grp = Var("g_"), pc = Var("pc_"), kbo = Var("kbo_");
  // Where the weights of weight block `blk` (output channels blk*B ..) and
  // input channel c0 + cl within the group start (c0 null: 0): Wb [K/B, cg,
  // B]; chunked by L < cg, Wb [cg/L, K/B, L, B], c0 = wc * L and cl < L.
  const int64_t wb = f.weight_block, wl = f.weight_chunk;
  const bool chunked_weights = wl > 0 && wl < f.cg;
  auto block_row = [&](Expr blk, Expr c0, Expr wc, Expr cl) {
    if (chunked_weights) return Mul(Add(Mul(Add(Mul(wc, I(f.k / wb)), blk), I(wl)), cl), I(wb));
    return Mul(Add(Mul(blk, I(f.cg)), c0 != nullptr ? Add(c0, cl) : cl), I(wb));
  };
  // The weight of output channel k and input channel c0 + cl: W [K, cg] or Wb.
  auto weight_index = [&](Expr k, Expr c0, Expr wc, Expr cl) {
    if (wb == 0) return Add(Mul(k, I(f.cg)), c0 != nullptr ? Add(c0, cl) : cl);
    return Add(block_row(Div(k, I(wb)), c0, wc, cl), Mod(k, I(wb)));
  };
  // The epilogue's index of output channel k, flattened pixel p.
  auto out_index = [&](Expr k, Expr p) -> std::vector<Expr> {
    if (s.one_d) return {n, k, p};
    if (flat_ok) return {n, k, I(0), p};
    return {n, k, Div(p, I(s.ow)), Mod(p, I(s.ow))};
  };
  // One register block: pixels p0 + u*lw + v (u < nu, v < lw) of channels
  // kbo*kb + kk. guard: lanes at or past np are off throughout;
  // store_from > 0: only pixels from store_from on are stored.
  // The task's full blocks' input, packed once per task where
  // PointwisePacksInput says so: xs[cl * tw + q] = x[n, g*cg + cl, pc*tw + q].
  const int64_t tw = rows * bw;
  const bool pack_x = nbf > 0 && PointwisePacksInput(f, kn, target);
  Buffer xs = pack_x ? MakeBuffer("xs", {f.cg * tw}, BufferRole::kTemp) : nullptr;
  // A full block's running sums between reduction chunks:
  // part[((kl * kb + kk) * rows + ob) * bw + u * vw + v], kl the channel
  // block's place in the task's share.
  Buffer part = reduction_chunks > 1 ? MakeBuffer("part", {PointwisePartialFloats(f, kn)}, BufferRole::kTemp) : nullptr;
  // The merged last block: the last full block and the pixels after it,
  // merged_kb channels at a time, nu_merged vectors; its running sums:
  // part_merged[((kl * kb + kk) * nu_merged + u) * vw + v].
  const int64_t merged_kb = PointwiseMergedChannels(f, kn, registers);
  const int64_t nu_merged = ur + 1;
  Buffer part_merged = merged_kb > 0 && reduction_chunks > 1
                           ? MakeBuffer("part_merged", {PointwiseMergedFloats(f, kn)}, BufferRole::kTemp)
                           : nullptr;
  Expr kl = splits == 1 ? kbo : Var("kbi_");
  // Which input channels a block sums: all of them, or one reduction chunk
  // from c0 (the first starts from the bias, the last stores through the
  // epilogue, the others start from and end in `part`).
  enum class Chunk { kAll, kFirst, kMiddle, kLast };
  // xq: the block's first pixel within xs (null: the block reads x in place).
  // wc: chunk c0's index, c0 / kc. kk0, kbn: the block's channels are kk0 ..
  // kk0 + kbn of the channel block (kbn 0: all kb). merged: the merged last
  // block (PointwiseMergedChannels), its last vector ending at the last
  // pixel and its running sums in `part_merged`.
  auto block = [&](const std::string& acc_name, Expr p0, int64_t nu, int64_t lw, bool guard,
                   int64_t store_from, Expr xq = nullptr, Chunk chunk = Chunk::kAll, Expr c0 = nullptr,
                   Expr wc = nullptr, int64_t kk0 = 0, int64_t kbn = 0, bool merged = false) -> absl::StatusOr<Stmt> {
    if (kbn == 0) kbn = kb;
    Buffer acc = MakeBuffer(acc_name, {kbn * nu * lw}, BufferRole::kTemp);
    Expr kk = Var("kk_"), u = Var("u_"), v = Var("v_"), cl = Var("cl_");
    Expr kkb = Add(I(kk0), kk);  // the channel within the channel block
    Expr k = Add(Add(Mul(grp, I(f.kg)), Mul(kbo, I(kb))), kkb);
    Expr ai = Add(Mul(Add(Mul(kk, I(nu)), u), I(lw)), v);
    Expr start = Add(p0, Mul(u, I(lw)));  // vector u's first pixel, unless merged
    Expr p = Add(merged ? Min(start, I(np - lw)) : start, v);
    auto lanes = [&](Stmt body, Expr cond) {
      if (cond != nullptr) body = IfThen(cond, std::move(body));
      return For("v_", I(lw),
                 For("kk_", I(kbn), For("u_", I(nu), std::move(body), ForKind::kUnrolled), ForKind::kUnrolled),
                 ForKind::kVectorized);
    };
    Expr in_map = guard ? Lt(p, I(np)) : nullptr;
    const Buffer& sums = merged ? part_merged : part;
    Expr pi = merged ? Add(Mul(Add(Mul(Add(Mul(kl, I(kb)), kkb), I(nu)), u), I(lw)), v)
                     : Add(Mul(Add(Mul(Add(Mul(kl, I(kb)), kkb), I(rows)), Var("ob_")), I(bw)), Add(Mul(u, I(lw)), v));
    const bool from_part = chunk == Chunk::kMiddle || chunk == Chunk::kLast;
    Stmt init = lanes(Store(acc, ai, from_part ? Load(sums, pi) : bias ? Load(bias, k) : FloatImm(0)), nullptr);
    // Every channel over weights chunked by L < cg: chunk by chunk (wc_).
    const bool by_weight_chunk = chunk == Chunk::kAll && chunked_weights;
    if (by_weight_chunk) {
      wc = Var("wc_");
      c0 = Mul(wc, I(wl));
    }
    Expr ci = c0 != nullptr ? Add(c0, cl) : cl;  // the input channel within the group
    Expr xi = Add(Mul(Add(Mul(n, I(s.c)), Add(Mul(grp, I(f.cg)), ci)), I(np)), p);
    Expr wi = weight_index(k, c0, wc, cl);
    Expr xv = xq != nullptr ? Load(xs, Add(Mul(ci, I(tw)), Add(Add(xq, Mul(u, I(lw))), v))) : Load(x, xi);
    Stmt mac = For("cl_", I(by_weight_chunk ? wl : chunk == Chunk::kAll ? f.cg : kc),
                   lanes(Store(acc, ai, MulAdd(xv, Load(w, wi), Load(acc, ai))), in_map));
    if (by_weight_chunk) mac = For("wc_", I(f.cg / wl), mac);
    Stmt store;
    if (chunk == Chunk::kFirst || chunk == Chunk::kMiddle) {
      store = lanes(Store(sums, pi, Load(acc, ai)), nullptr);
    } else {
      Expr oi = Add(Mul(Add(Mul(n, I(f.k)), k), I(np)), p);
      const std::vector<Expr> idx = out_index(k, p);
      ASSIGN_OR_RETURN(Stmt st, StoreThroughEpilogue(g, ge, f.conv->output(0), outs, Load(acc, ai), idx, oi));
      store = lanes(st, merged ? Ge(p, start) : store_from > 0 ? Ge(p, I(store_from)) : in_map);
    }
    return Allocate(acc, Block({init, mac, store}));
  };
  // The last `dots` pixels as dot products (PointwiseDotPixels): their input
  // columns are packed once per task (xcol[l * cg + cl], contiguous over the
  // channels); per block of kb output channels, kb * dots vector accumulators
  // run down the weight rows and the packed columns, and are summed across
  // their lanes in halving steps before the epilogue stores one pixel each.
  // With blocked weights, blocked_dot_block instead.
  const int64_t dots = merged_kb > 0 ? 0 : PointwiseDotPixels(np, vw, ur, f.cg, wb > 0);
  Buffer xcol = dots > 0 ? MakeBuffer("xcol", {dots * f.cg}, BufferRole::kTemp) : nullptr;
  // Blocked weights: a block's output channels in the lanes, vl = min(kb, B)
  // of them (one weight block's run for one input channel), kb / vl such
  // vectors per pixel; per input channel each multiplies the pixel's
  // broadcast input. The input channels are dealt round-robin to ns
  // independent partial sums (one sum would be a chain of dependent
  // multiply-adds as long as the reduction: 960 -> 160 on 7x7 0.18 ->
  // 0.24 ms), which are added up at the end. No sums across lanes; the
  // epilogue stores each lane in its own channel plane.
  auto blocked_dot_block = [&]() -> absl::StatusOr<Stmt> {
    const int64_t vl = std::min(kb, wb), nq = kb / vl;
    const int64_t run = chunked_weights ? wl : f.cg;  // input channels per pass over the weights
    int64_t ns = std::clamp<int64_t>(8 / (nq * dots), 1, 4);
    while (run % ns != 0) --ns;
    const int64_t per = nq * dots * vl;  // floats of one partial sum
    Buffer acc = MakeBuffer("acc_dot", {ns * per}, BufferRole::kTemp);
    Expr q = Var("q_"), l = Var("l_"), v = Var("v_"), cl = Var("cl_"), sp = Var("s_");
    Expr kfirst = Add(Add(Mul(grp, I(f.kg)), Mul(kbo, I(kb))), Mul(q, I(vl)));  // the vector's first channel
    Expr k = Add(kfirst, v);
    Expr ai = Add(Mul(Add(Mul(q, I(dots)), l), I(vl)), v);
    auto lanes = [&](Stmt body) {
      return For("v_", I(vl),
                 For("q_", I(nq), For("l_", I(dots), std::move(body), ForKind::kUnrolled), ForKind::kUnrolled),
                 ForKind::kVectorized);
    };
    auto lanes_by_sum = [&](Stmt body) {
      return For("v_", I(vl),
                 For("s_", I(ns),
                     For("q_", I(nq), For("l_", I(dots), std::move(body), ForKind::kUnrolled), ForKind::kUnrolled),
                     ForKind::kUnrolled),
                 ForKind::kVectorized);
    };
    Expr si = Add(Mul(sp, I(per)), ai);
    Expr start = bias ? Select(Eq(sp, I(0)), Load(bias, k), FloatImm(0)) : FloatImm(0);
    Stmt init = lanes_by_sum(Store(acc, si, start));
    // The vector's weight block and its first lane there: kb a multiple of B
    // (vector q of the channel block is block kbo * kb/B + q), or kb
    // dividing B (B/kb channel blocks share a weight block).
    Expr blk = kb >= wb ? Add(Add(Mul(grp, I(f.kg / wb)), Mul(kbo, I(kb / wb))), q)
                        : Add(Mul(grp, I(f.kg / wb)), Div(kbo, I(wb / kb)));
    Expr lane0 = kb >= wb ? I(0) : Mul(Mod(kbo, I(wb / kb)), I(kb));
    // Over the weights' chunks (or all channels at once).
    Expr wc = chunked_weights ? Var("wc_") : nullptr;
    Expr c0 = chunked_weights ? Mul(wc, I(wl)) : nullptr;
    Expr c = Add(Mul(cl, I(ns)), sp);  // the input channel within the run
    Expr wi = Add(Add(block_row(blk, c0, wc, c), lane0), v);
    Expr ci = c0 != nullptr ? Add(c0, c) : c;
    Expr xv = Load(xcol, Add(Mul(l, I(f.cg)), ci));
    Stmt mac = For("cl_", I(run / ns), lanes_by_sum(Store(acc, si, MulAdd(Load(w, wi), xv, Load(acc, si)))));
    if (chunked_weights) mac = For("wc_", I(f.cg / wl), mac);
    std::vector<Stmt> steps = {init, mac};
    for (int64_t t = 1; t < ns; ++t) {
      Expr other = Add(I(t * per), ai);
      steps.push_back(lanes(Store(acc, ai, Add(Load(acc, ai), Load(acc, other)))));
    }
    Expr p = Add(I(np - dots), l);
    Expr oi = Add(Mul(Add(Mul(n, I(f.k)), k), I(np)), p);
    ASSIGN_OR_RETURN(Stmt st, StoreThroughEpilogue(g, ge, f.conv->output(0), outs, Load(acc, ai), out_index(k, p), oi));
    steps.push_back(lanes(st));
    return Allocate(acc, Block(steps));
  };
  auto dot_block = [&]() -> absl::StatusOr<Stmt> {
    if (wb > 0) return blocked_dot_block();
    const int64_t dl = PointwiseDotLanes(f.cg, vw, dots);
    Buffer acc = MakeBuffer("acc_dot", {kb * dots * dl}, BufferRole::kTemp);
    Expr kk = Var("kk_"), l = Var("l_"), v = Var("v_"), co = Var("co_");
    Expr k = Add(Add(Mul(grp, I(f.kg)), Mul(kbo, I(kb))), kk);
    Expr slot = Add(Mul(kk, I(dots)), l);
    Expr ai = Add(Mul(slot, I(dl)), v);
    auto lanes = [&](Stmt body) {
      return For("v_", I(dl),
                 For("kk_", I(kb), For("l_", I(dots), std::move(body), ForKind::kUnrolled), ForKind::kUnrolled),
                 ForKind::kVectorized);
    };
    Stmt init = lanes(Store(acc, ai, FloatImm(0)));
    Expr cl = Add(Mul(co, I(dl)), v);
    Stmt mac = For(
        "co_", I(f.cg / dl),
        lanes(Store(acc, ai,
                    MulAdd(Load(w, Add(Mul(k, I(f.cg)), cl)), Load(xcol, Add(Mul(l, I(f.cg)), cl)), Load(acc, ai)))));
    std::vector<Stmt> sum;
    for (int64_t half = dl / 2; half >= 1; half /= 2) {
      Expr h = Var("h_");
      Expr at = Add(Mul(slot, I(dl)), h);
      Stmt step = Store(acc, at, Add(Load(acc, at), Load(acc, Add(at, I(half)))));
      sum.push_back(For("kk_", I(kb),
                        For("l_", I(dots), For("h_", I(half), step, half > 1 ? ForKind::kVectorized : ForKind::kSerial),
                            ForKind::kUnrolled),
                        ForKind::kUnrolled));
    }
    Expr p = Add(I(np - dots), l);
    Expr value = Load(acc, Mul(slot, I(dl)));
    if (bias) value = Add(value, Load(bias, k));
    Expr oi = Add(Mul(Add(Mul(n, I(f.k)), k), I(np)), p);
    const std::vector<Expr> idx = out_index(k, p);
    ASSIGN_OR_RETURN(Stmt st, StoreThroughEpilogue(g, ge, f.conv->output(0), outs, value, idx, oi));
    Stmt store = For("kk_", I(kb), For("l_", I(dots), st, ForKind::kUnrolled), ForKind::kUnrolled);
    std::vector<Stmt> all = {init, mac};
    all.insert(all.end(), sum.begin(), sum.end());
    all.push_back(store);
    return Allocate(acc, Block(all));
  };
  // The task's full blocks of one channel block: every input channel, or one reduction chunk.
  // wc: reduction chunk c0's index.
  // With a merged last block, block nbf - 1 is that one.
  auto full_blocks = [&](Chunk chunk, Expr c0, Expr wc = nullptr) -> absl::StatusOr<Stmt> {
    Expr bi = Add(Mul(pc, I(rows)), Var("ob_"));
    ASSIGN_OR_RETURN(Stmt full, block("acc", Mul(bi, I(bw)), ur, vw, false, 0,
                                      pack_x ? Mul(Var("ob_"), I(bw)) : nullptr, chunk, c0, wc));
    if (merged_kb > 0) {
      std::vector<Stmt> passes;
      for (int64_t kk0 = 0; kk0 < kb; kk0 += merged_kb) {
        ASSIGN_OR_RETURN(Stmt pass, block("acc_m", I((nbf - 1) * bw), nu_merged, vw, false, 0, nullptr, chunk, c0,
                                          wc, kk0, merged_kb, true));
        passes.push_back(pass);
      }
      Stmt last = Block(std::move(passes));
      if (nbf % rows != 0) last = IfThen(Eq(bi, I(nbf - 1)), last);
      full = IfThen(Lt(bi, I(nbf - 1)), full, last);
    } else if (nbf % rows != 0) {
      full = IfThen(Lt(bi, I(nbf)), full);
    }
    return For("ob_", I(rows), full);
  };
  std::vector<Stmt> per_kb;
  if (nbf > 0 && reduction_chunks == 1) {
    ASSIGN_OR_RETURN(Stmt full, full_blocks(Chunk::kAll, nullptr));
    per_kb.push_back(full);
  }
  if (rem > 0 && merged_kb == 0) {
    std::vector<Stmt> tail;
    const int64_t whole = rem / vw, left = rem % vw, lw = PointwiseLeftWidth(left);
    if (PointwiseTailMasked(np, vw, ur)) {
      ASSIGN_OR_RETURN(Stmt t, block("acc_tail", I(nbf * bw), CeilDiv(rem, vw), vw, true, 0));
      tail.push_back(t);
    } else {
      if (whole > 0) {
        ASSIGN_OR_RETURN(Stmt t, block("acc_tail", I(nbf * bw), whole, vw, false, 0));
        tail.push_back(t);
      }
      if (dots > 0) {
        ASSIGN_OR_RETURN(Stmt t, dot_block());
        tail.push_back(t);
      } else if (left > 0) {
        ASSIGN_OR_RETURN(Stmt t, block("acc_left", I(np - lw), 1, lw, false, lw > left ? np - left : 0));
        tail.push_back(t);
      }
    }
    Stmt t = Block(tail);
    per_kb.push_back(chunks > 1 ? IfThen(Eq(pc, I(chunks - 1)), t) : t);
  }
  // `per` for every channel block of the task's share.
  auto over_channel_blocks = [&](Stmt per) -> Stmt {
    if (splits == 1) return For("kbo_", I(nkb), std::move(per));
    // Task t's share of the channel blocks: kp_ * per_split + kbi_.
    Expr kbo_at = Add(Mul(Var("kp_"), I(per_split)), Var("kbi_"));
    Stmt one = LetStmt("kbo_", kbo_at, std::move(per));
    if (nkb % per_split != 0) one = IfThen(Lt(kbo_at, I(nkb)), one);
    return For("kbi_", I(per_split), one);
  };
  Stmt body;
  if (reduction_chunks == 1) {
    body = over_channel_blocks(Block(per_kb));
  } else {
    std::vector<Stmt> steps;
    if (nbf > 0) {
      ASSIGN_OR_RETURN(Stmt first, full_blocks(Chunk::kFirst, I(0), I(0)));
      steps.push_back(over_channel_blocks(first));
      if (reduction_chunks > 2) {
        ASSIGN_OR_RETURN(Stmt middle,
                         full_blocks(Chunk::kMiddle, Mul(Add(Var("rc_"), I(1)), I(kc)), Add(Var("rc_"), I(1))));
        steps.push_back(For("rc_", I(reduction_chunks - 2), over_channel_blocks(middle)));
      }
      ASSIGN_OR_RETURN(Stmt last,
                       full_blocks(Chunk::kLast, I((reduction_chunks - 1) * kc), I(reduction_chunks - 1)));
      steps.push_back(over_channel_blocks(last));
    }
    if (!per_kb.empty()) steps.push_back(over_channel_blocks(Block(per_kb)));
    body = Allocate(part, Block(steps));
    if (part_merged != nullptr) body = Allocate(part_merged, body);
  }
  // Tasks run channel split by channel split, each over every pixel chunk:
  // a thread's contiguous range of tasks then takes whole splits, the same
  // work as the others', where chunk by chunk the last, shorter chunk fell to
  // one thread (timm Xception-41's 728 -> 728 on 19x19 before its input was
  // packed, 3 chunks of 3, 3 and 1 blocks by 2 splits: 9 blocks' work on one
  // thread, 5 on the other).
  const int64_t chunk_tasks = s.n * f.group * chunks;
  if (splits > 1) body = LetStmt("kp_", Div(Var("t_"), I(chunk_tasks)), body);
  if (dots > 0) {
    // xcol: the last `dots` pixels of the group's input channels, once per task.
    Expr l = Var("l_"), cl = Var("cl_");
    Expr xi = Add(Mul(Add(Mul(n, I(s.c)), Add(Mul(grp, I(f.cg)), cl)), I(np)), Add(I(np - dots), l));
    Stmt pack = For("l_", I(dots), For("cl_", I(f.cg), Store(xcol, Add(Mul(l, I(f.cg)), cl), Load(x, xi))));
    if (chunks > 1) pack = IfThen(Eq(pc, I(chunks - 1)), pack);
    body = Allocate(xcol, Block({pack, body}));
  }
  if (pack_x) {
    Expr cl = Var("xc_"), qo = Var("xq_"), v = Var("xv_");
    Expr q = Add(Mul(qo, I(vw)), v);
    Expr xi = Add(Mul(Add(Mul(n, I(s.c)), Add(Mul(grp, I(f.cg)), cl)), I(np)), Add(Mul(pc, I(tw)), q));
    Stmt copy = For("xv_", I(vw), Store(xs, Add(Mul(cl, I(tw)), q), Load(x, xi)), ForKind::kVectorized);
    // The last task's blocks may end before its share: copy whole blocks only.
    if (nbf % rows != 0) copy = IfThen(Lt(Add(Mul(pc, I(tw)), Mul(qo, I(vw))), I(nbf * bw)), copy);
    body = Allocate(xs, Block({For("xc_", I(f.cg), For("xq_", I(tw / vw), copy)), body}));
  }
  Expr t = splits == 1 ? Var("t_") : Mod(Var("t_"), I(chunk_tasks));  // (image, group, pixel chunk)
  body = LetStmt("pc_", Mod(t, I(chunks)), body);
  body = LetStmt("n_", Div(t, I(f.group * chunks)), LetStmt("g_", Mod(Div(t, I(chunks)), I(f.group)), body));
  return LoopFunc{"conv", args, For("t_", I(tasks), body, ForKind::kParallel)};
}

// Depthwise plane variant (depthwise_planes.h): a task is (image, `rows`
// channels). It zeroes its phase planes once; per channel it copies the input
// plane's rows into their interiors (the padding stays zero), accumulates
// every register block of vw*ur flattened positions over the taps at
// constant offsets, keeps the sums in a result plane, and stores each output
// row from it through the epilogue.
absl::StatusOr<LoopFunc> LowerDepthwise(const Graph& g, const ConvForm& f, const Knobs& kn) {
  const WindowGeometry& s = f.geo;
  const int64_t cb = kn.rows, tasks = s.n * (f.group / cb);
  GraphExpr ge(g);
  const std::vector<Buffer>& args = ge.args();
  const ConvBuffers bufs = BindConvBuffers(g, f, ge);
  Expr n = Var("n_"), ch = Add(Mul(Var("bufs"), I(cb)), Var("c_"));
  Expr plane = Add(Mul(n, I(s.c)), ch);
  auto read = [&](Expr ih, Expr iw) { return Load(bufs.x, Add(Mul(Add(Mul(plane, I(s.h)), ih), I(s.w)), iw)); };
  ASSIGN_OR_RETURN(DepthwisePlanes dp, LowerDepthwisePlanes(g, ge, f.conv->output(0), bufs.outs, s, bufs.w, bufs.bias,
                                                            n, ch, kn.vw, kn.ur, read));
  Stmt body = Block({dp.zero, For("c_", I(cb), dp.channel)});
  body = Allocate(dp.xp, Allocate(dp.yp, body));
  body = LetStmt("n_", Div(Var("t_"), I(f.group / cb)), LetStmt("bufs", Mod(Var("t_"), I(f.group / cb)), body));
  return LoopFunc{"conv", args, For("t_", I(tasks), body, ForKind::kParallel)};
}

// Depthwise channel-vector variant (depthwise_channels.h): a task is
// (image, `rows` blocks of vw channels).
absl::StatusOr<LoopFunc> LowerDepthwiseChannelVectors(const Graph& g, const ConvForm& f, const Knobs& kn) {
  const WindowGeometry& s = f.geo;
  const int64_t blocks = CeilDiv(f.group, kn.vw), tasks = s.n * (blocks / kn.rows);
  GraphExpr ge(g);
  const std::vector<Buffer>& args = ge.args();
  const ConvBuffers bufs = BindConvBuffers(g, f, ge);
  Expr c0 = Mul(Add(Mul(Var("bufs"), I(kn.rows)), Var("c_")), I(kn.vw));
  ASSIGN_OR_RETURN(DepthwiseChannels dc, LowerDepthwiseChannels(g, ge, f.conv->output(0), bufs.outs, s, bufs.x, bufs.w,
                                                                bufs.bias, Var("n_"), c0, kn.vw, kn.ur));
  Stmt per_block = dc.tail ? IfThen(Le(Add(c0, I(kn.vw)), I(s.c)), dc.full, dc.tail) : dc.full;
  Stmt body = Block({dc.zero, For("c_", I(kn.rows), per_block)});
  body = Allocate(dc.wt, Allocate(dc.xc, Allocate(dc.xt, Allocate(dc.yt, body))));
  body = LetStmt("n_", Div(Var("t_"), I(blocks / kn.rows)), LetStmt("bufs", Mod(Var("t_"), I(blocks / kn.rows)), body));
  return LoopFunc{"conv", args, For("t_", I(tasks), body, ForKind::kParallel)};
}

// Whether output columns [ow0, ow0 + px) read only input columns inside the
// row: from ow0*sw - pl to (ow0 + px - 1)*sw + (kw - 1)*dw - pl.
bool ColumnsInside(const WindowGeometry& s, int64_t ow0, int64_t px) {
  return ow0 * s.sw - s.pad_left >= 0 && (ow0 + px - 1) * s.sw + (s.kw - 1) * s.dw - s.pad_left < s.w;
}

// A register block of an output row from column ow0, guarded where its
// columns reach into the padding, its buffers named with `tag`.
using RowBlock = std::function<absl::StatusOr<Stmt>(const Expr& ow0, bool guard, const std::string& tag)>;

// The ow / bw full blocks of bw columns of an output row: those reaching
// into the padding (usually the first and the last) one by one at constant
// columns, so that their guards are constants (tags _l<b> and _r<b>), those
// between in a loop over owo_ without guards (tag _f). The columns past the
// last full block are the caller's.
absl::StatusOr<std::vector<Stmt>> FullRowBlocks(const WindowGeometry& s, int64_t bw, const RowBlock& block) {
  const int64_t nfull = s.ow / bw;
  int64_t b0 = 0, b1 = nfull;
  while (b0 < nfull && !ColumnsInside(s, b0 * bw, bw)) ++b0;
  while (b1 > b0 && !ColumnsInside(s, (b1 - 1) * bw, bw)) --b1;
  std::vector<Stmt> out;
  for (int64_t b = 0; b < b0; ++b) {
    ASSIGN_OR_RETURN(Stmt st, block(IntImm(b * bw), true, absl::StrCat("_l", b)));
    out.push_back(std::move(st));
  }
  if (b1 > b0) {
    ASSIGN_OR_RETURN(Stmt full, block(Mul(Add(Var("owo_"), IntImm(b0)), IntImm(bw)), false, "_f"));
    out.push_back(For("owo_", IntImm(b1 - b0), full));
  }
  for (int64_t b = std::max(b0, b1); b < nfull; ++b) {
    ASSIGN_OR_RETURN(Stmt st, block(IntImm(b * bw), true, absl::StrCat("_r", b)));
    out.push_back(std::move(st));
  }
  return out;
}

// Depthwise row variant (dw=2): a task is `rows` channels of one image; each
// output row of a channel runs in register blocks of ur vectors of vw
// columns that read the input in place, a tap's vw columns one vector (a
// stride-2 row's de-interleaved). Blocks whose windows stay inside the row
// run in a loop without guards; those reaching into the padding are emitted
// one by one at constant columns, so their lane guards are constant masks;
// tap rows in the padding are skipped; the row's last columns form a block
// of whole vectors and one narrower vector. Sums go to the output through
// the epilogue at once. The plane variant (dw=1) instead copies each
// channel's padded plane into stride phases and keeps its sums in a result
// plane: three passes over the plane where this makes one, which pays on
// small maps only (a 7x7 map's 49 positions fill 56 lanes; its rows, 7 of 8).
absl::StatusOr<LoopFunc> LowerDepthwiseRows(const Graph& g, const ConvForm& f, const Knobs& kn) {
  const WindowGeometry& s = f.geo;
  const int64_t vw = kn.vw, ur = kn.ur, cb = kn.rows, tasks = s.n * (f.group / cb), bw = vw * ur;
  GraphExpr ge(g);
  const std::vector<Buffer>& args = ge.args();
  const ConvBuffers bufs = BindConvBuffers(g, f, ge);
  const Value* conv_out = f.conv->output(0);
  Expr n = Var("n_"), ch = Add(Mul(Var("bufs"), I(cb)), Var("c_")), oh = Var("oh_");
  Expr plane = Add(Mul(n, I(s.c)), ch);
  // A block of uu vectors of lw lanes from column ow0: acc[u*lw + v].
  auto block = [&](const Expr& ow0, int64_t uu, int64_t lw, bool guard,
                   const std::string& tag) -> absl::StatusOr<Stmt> {
    Buffer acc = MakeBuffer("acc" + tag, {uu * lw}, BufferRole::kTemp);
    Expr u = Var("u_"), v = Var("v_"), r = Var("kh_"), c = Var("kw_");
    Expr ai = Add(Mul(u, I(lw)), v);
    Expr col = Add(ow0, ai);
    auto lanes = [&](Stmt body) {
      return For("v_", I(lw), For("u_", I(uu), std::move(body), ForKind::kUnrolled), ForKind::kVectorized);
    };
    Stmt init = lanes(Store(acc, ai, bufs.bias ? Load(bufs.bias, ch) : FloatImm(0)));
    Expr ih = Sub(Add(Mul(oh, I(s.sh)), Mul(r, I(s.dh))), I(s.pad_top));
    Expr iw = Sub(Add(Mul(col, I(s.sw)), Mul(c, I(s.dw))), I(s.pad_left));
    Expr xv = Load(bufs.x, Add(Mul(Add(Mul(plane, I(s.h)), ih), I(s.w)), iw));
    Expr wv = Load(bufs.w, Add(Mul(Add(Mul(ch, I(s.kh)), r), I(s.kw)), c));
    Stmt upd = Store(acc, ai, Call("fma", {xv, wv, Load(acc, ai)}));
    if (guard) upd = IfThen(And(Ge(iw, I(0)), Lt(iw, I(s.w))), upd);
    const bool unroll_taps = s.kw <= 8 || (guard && s.kw <= 32);  // guarded: the lane masks fold
    Stmt per_kh = For("kw_", I(s.kw), lanes(upd), unroll_taps ? ForKind::kUnrolled : ForKind::kSerial);
    if (s.pad_top > 0 || s.pad_bottom > 0) per_kh = IfThen(And(Ge(ih, I(0)), Lt(ih, I(s.h))), per_kh);
    Stmt mac = For("kh_", I(s.kh), per_kh, s.kh <= 8 ? ForKind::kUnrolled : ForKind::kSerial);
    std::vector<Expr> out_idx = {n, ch, oh, col};
    ASSIGN_OR_RETURN(Stmt st, StoreThroughEpilogue(g, ge, conv_out, bufs.outs, Load(acc, ai), out_idx,
                                                   FlatIndex(DimsOf(conv_out), out_idx)));
    return Allocate(acc, Block({init, mac, lanes(st)}));
  };
  ASSIGN_OR_RETURN(std::vector<Stmt> blocks,
                   FullRowBlocks(s, bw, [&](const Expr& ow0, bool guard, const std::string& tag) {
                     return block(ow0, ur, vw, guard, tag);
                   }));
  auto one = [&](int64_t ow0, int64_t uu, int64_t lw, const std::string& tag) -> absl::Status {
    ASSIGN_OR_RETURN(Stmt st, block(I(ow0), uu, lw, !ColumnsInside(s, ow0, uu * lw), tag));
    blocks.push_back(std::move(st));
    return absl::OkStatus();
  };
  const int64_t nfull = s.ow / bw, rest = s.ow % bw;
  if (rest >= vw) RETURN_IF_ERROR(one(nfull * bw, rest / vw, vw, "_t"));
  if (rest % vw != 0) RETURN_IF_ERROR(one(s.ow - rest % vw, 1, rest % vw, "_e"));
  Stmt body = For("c_", I(cb), For("oh_", I(s.oh), Block(std::move(blocks))));
  body = LetStmt("n_", Div(Var("t_"), I(f.group / cb)), LetStmt("bufs", Mod(Var("t_"), I(f.group / cb)), body));
  return LoopFunc{"conv", args, For("t_", I(tasks), body, ForKind::kParallel)};
}

// Channel-vector variant: the lanes hold vw consecutive output channels, as
// in a blocked (NCHWc) layout, so no lane is wasted however narrow the map
// (17 columns of Inception's 17x17 convs filled 17 of 24 row lanes). A task
// is (image, group, kb*vw output channels, `rows` output rows). It packs its
// channels' weights once, tap-major with the channels innermost
// (wp[cl][r][s][j*vw + v]), unless they come so from compile time
// (kiln.BlockedConv: read in place). It reads the input in place too: a
// row's blocks whose columns stay inside the input run in a loop without
// guards, those reaching into the padding one by one, their columns (and so
// their guards) constant; tap rows in the padding are skipped. Packing each
// output row's input rows had cost every task (one per kb*vw output
// channels) a copy of them: 9% of the samples of HRNet's 128 -> 256 3x3
// stride-2 conv onto 28x28 on Zen 3 (`perf record`). A register block of
// ur output pixels by kb channel vectors accumulates, per input channel and
// tap, the broadcast input pixel times a weight vector; the pixels a row's
// full blocks leave form one narrower block. Stores go out channel by
// channel (lane v to plane k0 + v) through the epilogue.
absl::StatusOr<LoopFunc> LowerChannelVector(const Graph& g, const ConvForm& f, const Knobs& kn) {
  const WindowGeometry& s = f.geo;
  const int64_t vw = kn.vw, ur = kn.ur, kb = kn.kb, rows = kn.rows;
  const int64_t cw = kb * vw;  // output channels per task
  const int64_t nkb = f.kg / cw, ohb = CeilDiv(s.oh, rows);
  const int64_t tasks = s.n * f.group * nkb * ohb;
  const int64_t taps = s.kh * s.kw;
  const int64_t cc = ChannelVectorChunk(f, kn), nch = f.cg / cc;  // reduction chunks of cc input channels

  GraphExpr ge(g);
  const std::vector<Buffer>& args = ge.args();
  const ConvBuffers bufs = BindConvBuffers(g, f, ge);
  const Value* conv_out = f.conv->output(0);
  Expr n = Var("n_"), grp = Var("g_"), kbo = Var("kbo_"), hb = Var("hb_"), rr = Var("rr_");
  Expr k0 = Add(Mul(grp, I(f.kg)), Mul(kbo, I(cw)));  // first output channel of the task
  Expr oh = Add(Mul(hb, I(rows)), rr);

  // ---- weights: wp[((cl*kh + r)*kw + c)*cw + j*vw + v] = w[k0 + j*vw + v, cl, r, c]
  Buffer wp = MakeBuffer("wp", {ChannelVectorWeightFloats(f, kn)}, BufferRole::kTemp);
  Stmt wpack;
  {
    Expr cl = Var("wc_"), tap = Var("wt_"), j = Var("wj_"), v = Var("wv_");
    Expr k = Add(Add(k0, Mul(j, I(vw))), v);
    Expr src = Add(Mul(Add(Mul(k, I(f.cg)), cl), I(taps)), tap);
    Expr dst = Add(Mul(Add(Mul(cl, I(taps)), tap), I(cw)), Add(Mul(j, I(vw)), v));
    wpack = For("wc_", I(f.cg),
                For("wt_", I(taps), For("wj_", I(kb), For("wv_", I(vw), Store(wp, dst, Load(bufs.w, src)), ForKind::kVectorized))));
  }
  // ---- the running sums between reduction chunks: racc[(rr*ow + col)*cw + j*vw + v]
  // over the task's rows where the chunks run outermost, else over one row.
  const bool chunks_outer = ChannelVectorChunksOuter(f, kn);
  Buffer racc = MakeBuffer("racc", {(chunks_outer ? rows : 1) * s.ow * cw}, BufferRole::kTemp);
  // ---- a register block of `px` pixels from column ow0: acc[(u*kb + j)*vw + v]
  auto block = [&](const Expr& ow0, int64_t px, bool guard, const std::string& tag) -> absl::StatusOr<Stmt> {
    Buffer acc = MakeBuffer("acc" + tag, {px * cw}, BufferRole::kTemp);
    Expr u = Var("u_"), j = Var("j_"), v = Var("v_");
    Expr ai = Add(Mul(Add(Mul(u, I(kb)), j), I(vw)), v);
    Expr k = Add(Add(k0, Mul(j, I(vw))), v);
    auto lanes = [&](Stmt body) {
      return For("v_", I(vw), For("j_", I(kb), For("u_", I(px), std::move(body), ForKind::kUnrolled), ForKind::kUnrolled),
                 ForKind::kVectorized);
    };
    // With chunks, racc holds the sums of the chunks before.
    Expr col = Add(ow0, u);
    if (chunks_outer) col = Add(Mul(rr, I(s.ow)), col);
    Expr ri = Add(Mul(col, I(cw)), Add(Mul(j, I(vw)), v));
    Expr start = bufs.bias ? Load(bufs.bias, k) : FloatImm(0);
    if (nch > 1) start = Select(Eq(Var("ch_"), I(0)), start, Load(racc, ri));
    Stmt init = lanes(Store(acc, ai, start));
    Expr cl = nch > 1 ? Add(Mul(Var("ch_"), I(cc)), Var("cl_")) : Var("cl_"), r = Var("kh_"), c = Var("kw_");
    // The input pixel in place: its row is inside (tap rows in the padding
    // are skipped below); its column is checked only in guarded blocks.
    Expr ih = Sub(Add(Mul(oh, I(s.sh)), Mul(r, I(s.dh))), I(s.pad_top));
    Expr iw = Sub(Add(Mul(Add(ow0, u), I(s.sw)), Mul(c, I(s.dw))), I(s.pad_left));
    Expr plane = Add(Mul(n, I(s.c)), Add(Mul(grp, I(f.cg)), cl));
    Expr x_row = Mul(Add(Mul(plane, I(s.h)), ih), I(s.w));
    // A guarded block skips the pixels whose tap column is in the padding
    // (below): with the taps unrolled the skips are constant, and no
    // multiply-add by zero holds a register.
    Expr xv = Load(bufs.x, Add(x_row, iw));
    Expr inside = guard ? And(Ge(iw, I(0)), Lt(iw, I(s.w))) : nullptr;
    Expr wi = Add(Mul(Add(Mul(cl, I(taps)), Add(Mul(r, I(s.kw)), c)), I(cw)), Add(Mul(j, I(vw)), v));
    Expr wv = Load(wp, wi);
    if (f.weight_block > 0) {
      // In place: Wb[(k / B, cl, r, c, k % B)] for k = k0 + j*vw + v, k0 a
      // multiple of B (cw is).
      const int64_t bk = f.weight_block;
      Expr jv = Mul(j, I(vw));
      Expr blk = Add(Add(Mul(grp, I(f.kg / bk)), Mul(kbo, I(cw / bk))), Div(jv, I(bk)));
      Expr tapi = Add(Mul(Add(Mul(blk, I(f.cg)), cl), I(taps)), Add(Mul(r, I(s.kw)), c));
      wv = Load(bufs.w, Add(Mul(tapi, I(bk)), Add(Mod(jv, I(bk)), v)));
    }
    // Pixel by pixel, each pixel's broadcast feeding all kb channel vectors
    // before the next one loads, so that the IR needs one broadcast at a time
    // (LLVM may still load a tap's broadcasts ahead: ChannelVectorRegisters),
    // and a fence after each tap, which keeps the next taps' loads behind it.
    Stmt pixel = For("j_", I(kb), Store(acc, ai, MulAdd(xv, wv, Load(acc, ai))), ForKind::kUnrolled);
    if (inside != nullptr) pixel = IfThen(inside, pixel);
    Stmt upd = Block({For("v_", I(vw), For("u_", I(px), pixel, ForKind::kUnrolled), ForKind::kVectorized), Fence()});
    // Taps unrolled up to 8, and up to 32 in guarded blocks, whose guards
    // then fold (DeepSpeech2's 21-column window padded by 10: 4 of a row's
    // 9 blocks are guarded).
    const bool unroll_taps = s.kw <= 8 || (guard && s.kw <= 32);
    Stmt per_kh = For("kw_", I(s.kw), upd, unroll_taps ? ForKind::kUnrolled : ForKind::kSerial);
    // A tap row in the padding adds nothing. Undilated, the loop runs over
    // the tap rows inside the map, kh_lo + khi_, with no branch in it;
    // dilated, it skips the others.
    Stmt rows_of_taps = For("kh_", I(s.kh), per_kh);
    if (s.pad_top > 0 || s.pad_bottom > 0) {
      if (s.dh == 1) {
        Expr top = Sub(I(s.pad_top), Mul(oh, I(s.sh)));  // the first tap row inside, before clamping at 0
        Expr lo = Max(top, I(0)), hi = Min(Add(top, I(s.h)), I(s.kh));
        rows_of_taps = For("khi_", Max(Sub(hi, lo), I(0)), LetStmt("kh_", Add(lo, Var("khi_")), per_kh));
      } else {
        rows_of_taps = For("kh_", I(s.kh), IfThen(And(Ge(ih, I(0)), Lt(ih, I(s.h))), per_kh));
      }
    }
    Stmt mac = For("cl_", I(cc), rows_of_taps);
    std::vector<Expr> out_idx = {n, k, oh, Add(ow0, u)};
    Expr oi = FlatIndex(DimsOf(conv_out), out_idx);
    ASSIGN_OR_RETURN(Stmt st, StoreThroughEpilogue(g, ge, conv_out, bufs.outs, Load(acc, ai), out_idx, oi));
    if (nch > 1) st = IfThen(Eq(Var("ch_"), I(nch - 1)), st, Store(racc, ri, Load(acc, ai)));
    return Allocate(acc, Block({init, mac, lanes(st)}));
  };
  // The full blocks (FullRowBlocks), then the pixels they leave.
  ASSIGN_OR_RETURN(std::vector<Stmt> blocks,
                   FullRowBlocks(s, ur, [&](const Expr& ow0, bool guard, const std::string& tag) {
                     return block(ow0, ur, guard, tag);
                   }));
  if (s.ow % ur != 0) {
    const int64_t ow0 = s.ow / ur * ur, px = s.ow % ur;
    ASSIGN_OR_RETURN(Stmt st, block(I(ow0), px, !ColumnsInside(s, ow0, px), "_t"));
    blocks.push_back(std::move(st));
  }
  Stmt per_row;
  if (chunks_outer) {
    Stmt rows_of_chunk = For("rr_", I(rows), IfThen(Lt(oh, I(s.oh)), Block(std::move(blocks))));
    per_row = Allocate(racc, For("ch_", I(nch), rows_of_chunk));
  } else {
    Stmt row = nch > 1 ? Allocate(racc, For("ch_", I(nch), Block(std::move(blocks)))) : Block(std::move(blocks));
    per_row = For("rr_", I(rows), IfThen(Lt(oh, I(s.oh)), row));
  }
  Stmt body = f.weight_block > 0 ? per_row : Allocate(wp, Block({wpack, per_row}));
  Expr t = Var("t_");
  body = LetStmt("hb_", Mod(t, I(ohb)),
                 LetStmt("kbo_", Mod(Div(t, I(ohb)), I(nkb)),
                         LetStmt("g_", Mod(Div(t, I(ohb * nkb)), I(f.group)),
                                 LetStmt("n_", Div(t, I(ohb * nkb * f.group)), body))));
  return LoopFunc{"conv", args, For("t_", I(tasks), body, ForKind::kParallel)};
}

absl::StatusOr<LoopFunc> Lower(const Graph& g, const ScheduleConfig& config, const CpuTarget& target) {
  ASSIGN_OR_RETURN(ConvForm f, AnalyzeConv(g));
  Knobs kn = KnobsOf(config);
  RETURN_IF_ERROR(CheckKnobs(f, kn, target));
  if (kn.kv != 0) return LowerChannelVector(g, f, kn);
  if (kn.dw == 3) return LowerDepthwiseChannelVectors(g, f, kn);
  if (kn.dw == 2) return LowerDepthwiseRows(g, f, kn);
  if (kn.dw != 0) return LowerDepthwise(g, f, kn);
  if (kn.pw != 0) return LowerPointwise(g, f, kn, target);
  const WindowGeometry& s = f.geo;
  int64_t rin, wq, owr;
  PackDims(f, kn, &rin, &wq, &owr);
  const int64_t vw = kn.vw, ur = kn.ur, kb = kn.kb, rows = kn.rows;
  const int64_t ohb = CeilDiv(s.oh, rows);
  // Column splits: task share cb_ of each row's register blocks, bpc each
  // (owr / (vw * ur)), from output column col0 on.
  const int64_t nblocks = CeilDiv(s.ow, vw * ur), bpc = owr / (vw * ur), csplits = CeilDiv(nblocks, bpc);
  const int64_t tasks = DirectTasks(f, rows) * csplits;
  Expr col0 = csplits > 1 ? Mul(Var("cb_"), I(bpc * vw * ur)) : I(0);
  const int64_t din = (s.kd - 1) * s.dd + 1;  // input depth slices per output slice
  // Input channels per pack; more than one chunk accumulates partial sums in
  // the raw output between chunks (big channel counts, wide dilated windows).
  const int64_t cc = ChunkChannels(f, kn), nch = f.cg / cc;

  GraphExpr ge(g);
  const std::vector<Buffer>& args = ge.args();
  const ConvBuffers bufs = BindConvBuffers(g, f, ge);
  const Buffer &x = bufs.x, &w = bufs.w, &bias = bufs.bias, &raw = bufs.raw;
  const AnchorOutputs& outs = bufs.outs;
  const Value* conv_out = f.conv->output(0);

  Expr n = Var("n_"), grp = Var("g_"), hb = Var("hb_"), odv = s.three_d ? Var("od_") : I(0);
  Expr ch0 = nch > 1 ? Mul(Var("ch_"), I(cc)) : I(0);  // first channel of the chunk
  // ---- pack: xp[cl][z][r][phase][q] = x[n, g*cg + ch0 + cl, od*sd + z - pf, hb*rows*sh + r - pt, q*sw + phase - pl]
  // or 0 (z only for 3-D)
  Buffer xp = MakeBuffer("xp", {cc * din * rin * s.sw * wq}, BufferRole::kTemp);
  Stmt pack;
  {
    Expr cl = Var("pc_"), z = s.three_d ? Var("pz_") : I(0), r = Var("pr_");
    Expr id = Sub(Add(Mul(odv, I(s.sd)), z), I(s.pad_front));
    Expr ih = Sub(Add(Mul(hb, I(rows * s.sh)), r), I(s.pad_top));
    Expr row_inside = And(Ge(ih, I(0)), Lt(ih, I(s.h)));
    if (s.three_d) row_inside = And(And(Ge(id, I(0)), Lt(id, I(s.d))), row_inside);
    Expr chan = Add(Add(Mul(grp, I(f.cg)), ch0), cl);
    Expr plane = Add(Mul(n, I(s.c)), chan);
    if (s.three_d) plane = Add(Mul(plane, I(s.d)), id);
    PhaseRowPack row{.x = x,
                     .xp = xp,
                     .x_row = Mul(Add(Mul(plane, I(s.h)), ih), I(s.w)),
                     .row_inside = row_inside,
                     .prow = s.three_d ? Add(Mul(Add(Mul(cl, I(din)), z), I(rin)), r) : Add(Mul(cl, I(rin)), r),
                     .col0 = col0,
                     .w = s.w,
                     .sw = s.sw,
                     .pad_left = s.pad_left,
                     .wq = wq,
                     .vw = vw};
    Stmt rowsl = For("pr_", I(rin), PackPhaseRow(row));
    if (s.three_d) rowsl = For("pz_", I(din), rowsl);
    pack = For("pc_", I(cc), rowsl);
  }
  // ---- compute one register block: acc[kk][u][v] for output channels
  // g*kg + kbo*kb + kk, row oh, columns owo*vw*ur + u*vw + v.
  Buffer acc = MakeBuffer("acc", {kb * ur * vw}, BufferRole::kTemp);
  Expr kbo = Var("kbo_"), rr = Var("rr_"), owo = Var("owo_"), v = Var("v_"), kk = Var("kk_"), u = Var("u_");
  Expr oh = Add(Mul(hb, I(rows)), rr);
  Expr k = Add(Add(Mul(grp, I(f.kg)), Mul(kbo, I(kb))), kk);
  Expr ai = Add(Mul(Add(Mul(kk, I(ur)), u), I(vw)), v);
  Expr ow_local = Add(Add(Mul(owo, I(vw * ur)), Mul(u, I(vw))), v);  // within the column split
  Expr ow = Add(col0, ow_local);
  auto lanes = [&](Stmt body) {
    return For("v_", I(vw), For("kk_", I(kb), For("u_", I(ur), std::move(body), ForKind::kUnrolled), ForKind::kUnrolled),
               ForKind::kVectorized);
  };
  std::vector<Expr> out_idx = s.one_d     ? std::vector<Expr>{n, k, ow}
                              : s.three_d ? std::vector<Expr>{n, k, odv, oh, ow}
                                          : std::vector<Expr>{n, k, oh, ow};
  Expr start = bias ? Load(bias, k) : FloatImm(0);
  if (nch > 1) {
    // Later chunks go on from the partial sums in the raw output (read at a
    // clamped column in the tail lanes, which are not stored).
    std::vector<Expr> clamped = out_idx;
    clamped.back() = Min(ow, I(s.ow - 1));
    Expr partial = Select(Lt(ow, I(s.ow)), Load(raw, FlatIndex(DimsOf(conv_out), clamped)), FloatImm(0));
    start = Select(Eq(Var("ch_"), I(0)), start, partial);
  }
  Stmt init = lanes(Store(acc, ai, start));
  Stmt mac;
  {
    Expr cl = Var("cl_"), kd = s.three_d ? Var("kd_") : I(0), kh = Var("kh_"), kw = Var("kw_");
    Expr off = Mul(kw, I(s.dw));
    Expr row = Add(Mul(rr, I(s.sh)), Mul(kh, I(s.dh)));
    Expr col = Add(ow_local, Div(off, I(s.sw)));
    Expr prow = s.three_d ? Add(Mul(Add(Mul(cl, I(din)), Mul(kd, I(s.dd))), I(rin)), row) : Add(Mul(cl, I(rin)), row);
    Expr xi = Add(Mul(Add(Mul(prow, I(s.sw)), Mod(off, I(s.sw))), I(wq)), col);
    Expr wch = Add(Add(Mul(k, I(f.cg)), ch0), cl);
    if (s.three_d) wch = Add(Mul(wch, I(s.kd)), kd);
    Expr wi = Add(Mul(Add(Mul(wch, I(s.kh)), kh), I(s.kw)), kw);
    Stmt upd = Store(acc, ai, MulAdd(Load(xp, xi), Load(w, wi), Load(acc, ai)));
    Stmt per_kh = For("kw_", I(s.kw), lanes(upd), s.kw <= 8 ? ForKind::kUnrolled : ForKind::kSerial);
    if (!s.three_d && (s.pad_top > 0 || s.pad_bottom > 0)) {
      // A tap row that falls in the padding packed zeros: skip it (a dilated
      // 3x3 on a small map, DeepLab's ASPP, reads padding for half its taps).
      Expr ih = Sub(Add(Mul(oh, I(s.sh)), Mul(kh, I(s.dh))), I(s.pad_top));
      per_kh = IfThen(And(Ge(ih, I(0)), Lt(ih, I(s.h))), per_kh);
    }
    Stmt taps = For("kh_", I(s.kh), per_kh);
    if (s.three_d) taps = For("kd_", I(s.kd), taps);
    mac = For("cl_", I(cc), taps);
  }
  // The stores of the block at output column `at` (per lane).
  auto store_at = [&](Expr at) -> absl::StatusOr<Stmt> {
    std::vector<Expr> idx = out_idx;
    idx.back() = at;
    Expr flat = FlatIndex(DimsOf(conv_out), idx);
    ASSIGN_OR_RETURN(Stmt body, StoreThroughEpilogue(g, ge, conv_out, outs, Load(acc, ai), idx, flat));
    // Before the last chunk only the partial sums are stored.
    if (nch > 1) body = IfThen(Eq(Var("ch_"), I(nch - 1)), body, Store(raw, flat, Load(acc, ai)));
    return body;
  };
  ASSIGN_OR_RETURN(Stmt store, store_at(ow));
  store = lanes(store);
  if (s.ow % (vw * ur) != 0) {
    // Only a row's last block runs past the map: a block that ends inside it
    // stores unguarded, and the last one, at its constant column, under a
    // constant mask (a guard per block was a masked store per vector,
    // microcoded on Zen 3: masked_stores.h).
    Expr last = Add(I((nblocks - 1) * vw * ur), Add(Mul(u, I(vw)), v));
    ASSIGN_OR_RETURN(Stmt tail, store_at(last));
    Expr block_end = Add(col0, Mul(Add(owo, I(1)), I(vw * ur)));
    store = IfThen(Le(block_end, I(s.ow)), store, lanes(IfThen(Lt(last, I(s.ow)), tail)));
  }
  Stmt block = Allocate(acc, Block({init, mac, store}));
  // The last column split may hold fewer blocks than its share.
  if (nblocks % bpc != 0) block = IfThen(Lt(Add(Mul(Var("cb_"), I(bpc)), owo), I(nblocks)), block);
  block = For("owo_", I(bpc), block);
  Stmt per_rows = For("kbo_", I(f.kg / kb), For("rr_", I(rows), IfThen(Lt(oh, I(s.oh)), block)));
  Stmt chunk = Block({pack, per_rows});
  if (nch > 1) chunk = For("ch_", I(nch), chunk);
  Stmt body = Allocate(xp, chunk);
  // Tasks are (n, g, [od,] hb, cb).
  Expr t = csplits == 1 ? Var("t_") : Div(Var("t_"), I(csplits));
  if (s.three_d) {
    body = LetStmt("n_", Div(t, I(f.group * s.od * ohb)),
                   LetStmt("g_", Mod(Div(t, I(s.od * ohb)), I(f.group)),
                           LetStmt("od_", Mod(Div(t, I(ohb)), I(s.od)), LetStmt("hb_", Mod(t, I(ohb)), body))));
  } else {
    body = LetStmt("n_", Div(t, I(f.group * ohb)),
                   LetStmt("g_", Mod(Div(t, I(ohb)), I(f.group)), LetStmt("hb_", Mod(t, I(ohb)), body)));
  }
  if (csplits > 1) body = LetStmt("cb_", Mod(Var("t_"), I(csplits)), body);
  return LoopFunc{"conv", args, For("t_", I(tasks), body, ForKind::kParallel)};
}

// ---- ConvTranspose -----------------------------------------------------------

absl::Status CheckEpilogue(const Graph& g, const Node* op) {
  std::vector<int64_t> od = DimsOf(op->output(0));
  for (const auto& n : g.nodes()) {
    if (n.get() == op) continue;
    if (!IsInlinableElementwise(n->op_type())) return NodeError(*n, "not an elementwise epilogue operator");
    RETURN_IF_ERROR(GraphExpr::CheckNode(*n));
    if (DimsOf(n->output(0)) != od) return NodeError(*n, "epilogue value does not have the convolution's shape");
  }
  for (const Value* v : g.outputs()) {
    if (DimsOf(v) != od) return NodeError(*op, absl::StrCat("output ", v->name(), " is not of the convolution's shape"));
  }
  return absl::OkStatus();
}

// Output columns per stride phase (the most: phase 0).
int64_t PhaseColumns(const ConvTransposeForm& f, int64_t rw) { return CeilDiv(f.out[2] - rw, f.s[2]); }

// Pack geometry: din depth slices, rin rows, wpk columns (a multiple of vw).
void TransposePackDims(const ConvTransposeForm& f, const Knobs& k, int64_t* din, int64_t* rin, int64_t* wpk) {
  *din = (f.s[0] - 1 + (f.k[0] - 1) * f.d[0] + f.c0[0]) / f.s[0] + 1;
  *rin = (k.rows - 1 + (f.k[1] - 1) * f.d[1] + f.c0[1]) / f.s[1] + 1;
  int64_t nqr = CeilDiv(PhaseColumns(f, 0), k.vw * k.ur) * k.vw * k.ur;
  *wpk = CeilDiv(nqr + f.off_max + f.left, k.vw) * k.vw;
}

}  // namespace

absl::StatusOr<ConvTransposeForm> AnalyzeConvTranspose(const Graph& g) {
  RETURN_IF_ERROR(CheckWorkloadBasics(g));
  ConvTransposeForm f;
  for (const auto& n : g.nodes()) {
    if (n->op_type() != "ConvTranspose") continue;
    if (f.node != nullptr) return NodeError(*n, "a second ConvTranspose in one workload");
    f.node = n.get();
  }
  if (f.node == nullptr) {
    return absl::UnimplementedError(absl::StrCat("workload ", g.name(), " has no ConvTranspose"));
  }
  const Node& ct = *f.node;
  RETURN_IF_ERROR(CheckEpilogue(g, f.node));
  if (ct.num_outputs() != 1) return NodeError(ct, "more than one output");
  f.x_arg = InputIndex(g, ct.input(0));
  f.w_arg = InputIndex(g, ct.input(1));
  if (f.x_arg < 0 || f.w_arg < 0) return NodeError(ct, "input or weights computed inside the workload");
  if (ct.num_inputs() > 2 && ct.input(2) != nullptr) {
    f.b_arg = InputIndex(g, ct.input(2));
    if (f.b_arg < 0) return NodeError(ct, "bias computed inside the workload");
  }
  std::vector<int64_t> xd = DimsOf(ct.input(0)), wd = DimsOf(ct.input(1)), od = DimsOf(ct.output(0));
  if (xd.size() < 3 || xd.size() > 5 || wd.size() != xd.size() || od.size() != xd.size()) {
    return NodeError(ct, "only 1-D, 2-D and 3-D (NCW, NCHW, NCDHW) with weights of the input's rank");
  }
  const int sp = static_cast<int>(xd.size()) - 2;
  f.nsp = sp;
  f.n = xd[0];
  f.c = xd[1];
  f.group = ct.GetInt("group", 1);
  if (f.group < 1 || wd[0] != f.c || f.c % f.group != 0) return NodeError(ct, "group does not divide the channels");
  f.cg = f.c / f.group;
  f.mg = wd[1];
  f.m = f.mg * f.group;
  if (od[1] != f.m) return NodeError(ct, "output channels differ from the weights");
  if (f.b_arg >= 0 && DimsOf(ct.input(2)) != std::vector<int64_t>{f.m}) return NodeError(ct, "bias is not [M]");
  std::vector<int64_t> strides = ct.GetInts("strides", std::vector<int64_t>(sp, 1));
  std::vector<int64_t> dil = ct.GetInts("dilations", std::vector<int64_t>(sp, 1));
  std::vector<int64_t> pads = ct.GetInts("pads", std::vector<int64_t>(2 * sp, 0));
  std::vector<int64_t> opad = ct.GetInts("output_padding", std::vector<int64_t>(sp, 0));
  std::vector<int64_t> oshape = ct.GetInts("output_shape", {});
  if (oshape.size() == static_cast<size_t>(sp + 2)) oshape.erase(oshape.begin(), oshape.begin() + 2);
  if (static_cast<int>(strides.size()) != sp || static_cast<int>(dil.size()) != sp ||
      static_cast<int>(pads.size()) != 2 * sp || static_cast<int>(opad.size()) != sp ||
      (!oshape.empty() && static_cast<int>(oshape.size()) != sp)) {
    return NodeError(ct, "strides, dilations, pads, output_padding or output_shape do not match the rank");
  }
  const std::string auto_pad = ct.GetString("auto_pad", "NOTSET");
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  if (!same && auto_pad != "NOTSET" && auto_pad != "VALID") return NodeError(ct, absl::StrCat("auto_pad ", auto_pad));
  for (int i = 0; i < sp; ++i) {
    const int a = 3 - sp + i;
    const int64_t kernel = wd[2 + i];
    if (strides[i] < 1 || dil[i] < 1 || kernel < 1 || pads[i] < 0 || pads[i + sp] < 0 || opad[i] < 0) {
      return NodeError(ct, "non-positive kernel, stride or dilation, or negative pad");
    }
    const int64_t full = strides[i] * (xd[2 + i] - 1) + opad[i] + (kernel - 1) * dil[i] + 1;
    int64_t out, pb;
    if (!oshape.empty() || same) {
      out = !oshape.empty() ? oshape[i] : xd[2 + i] * strides[i];
      const int64_t total = full - out;
      pb = total < 0 ? 0 : (auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2);
    } else {
      pb = auto_pad == "NOTSET" ? pads[i] : 0;
      const int64_t pe = auto_pad == "NOTSET" ? pads[i + sp] : 0;
      out = full - pb - pe;
    }
    if (out != od[2 + i]) return NodeError(ct, "output extent differs from the attributes");
    f.in[a] = xd[2 + i];
    f.out[a] = out;
    f.k[a] = kernel;
    f.s[a] = strides[i];
    f.d[a] = dil[i];
    f.pb[a] = pb;
  }
  if (f.n * f.m * f.out[0] * f.out[1] * f.out[2] == 0 || f.c * f.in[0] * f.in[1] * f.in[2] == 0) {
    return NodeError(ct, "empty tensor");
  }
  for (int a = 0; a < 2; ++a) {
    int64_t lo = f.pb[a] - (f.k[a] - 1) * f.d[a];
    f.base[a] = FloorDiv(lo, f.s[a]);
    f.c0[a] = lo - f.s[a] * f.base[a];
  }
  f.left = std::max<int64_t>(0, -FloorDiv(f.pb[2] - (f.k[2] - 1) * f.d[2], f.s[2]));
  f.off_max = FloorDiv(f.s[2] - 1 + f.pb[2], f.s[2]);
  int64_t din, rin, wpk;
  TransposePackDims(f, Knobs{1, 1, 1, f.s[1]}, &din, &rin, &wpk);
  if (f.cg * din * rin * wpk > kMaxPackFloats) {
    return NodeError(ct, "one output row reads more input than the stack pack holds");
  }
  return f;
}

namespace {

absl::Status CheckTransposeKnobs(const ConvTransposeForm& f, const Knobs& k, const CpuTarget& target) {
  bool ok = k.pw == 0 && k.vw >= 1 && k.vw <= target.FloatLanes() && (k.vw & (k.vw - 1)) == 0 && k.ur >= 1 &&
            k.ur <= 8 && k.kb >= 1 && k.kb <= 16 && f.mg % k.kb == 0 && k.rows >= 1 && k.rows % f.s[1] == 0 &&
            k.rows <= CeilDiv(f.out[1], f.s[1]) * f.s[1];
  if (!ok) return absl::InvalidArgumentError(absl::StrCat("conv_transpose ", f.node->name(), ": knobs out of range"));
  int64_t din, rin, wpk;
  TransposePackDims(f, k, &din, &rin, &wpk);
  if (f.cg * din * rin * wpk > kMaxPackFloats) {
    return absl::InvalidArgumentError(absl::StrCat("conv_transpose ", f.node->name(), ": rows=", k.rows, " vw=", k.vw,
                                                   " ur=", k.ur, " overflow the input pack"));
  }
  return absl::OkStatus();
}

std::vector<ScheduleConfig> EnumerateTranspose(const Graph& g, const CpuTarget& target) {
  absl::StatusOr<ConvTransposeForm> f = AnalyzeConvTranspose(g);
  if (!f.ok()) return {};
  const int64_t nq = PhaseColumns(*f, 0);
  std::vector<int64_t> vws = VectorWidths(target, nq);
  if (vws.size() > 2) vws.erase(vws.begin(), vws.end() - 2);
  const int64_t sh = f->s[1];
  std::vector<ScheduleConfig> out;
  for (int64_t vw : vws) {
    for (int64_t ur : {1, 2, 3, 4}) {
      if (ur > 1 && (ur - 1) * vw >= nq) break;
      for (int64_t kb : {1, 2, 4, 8}) {
        if (f->mg % kb != 0 || PixelBlockRegisters(kb, ur) > target.NumVectorRegisters()) continue;
        for (int64_t rows : {sh, 2 * sh, 4 * sh}) {
          if (rows > sh && rows / 2 >= f->out[1]) break;
          Knobs k{vw, ur, kb, rows};
          if (!CheckTransposeKnobs(*f, k, target).ok()) continue;
          out.push_back(ConfigOf(k));
        }
      }
    }
  }
  return out;
}

// Widest vectors, about 12 accumulators (more output channels before more
// columns), the fewest rows per task.
ScheduleConfig DefaultTranspose(const Graph& g, const CpuTarget& target) {
  std::vector<ScheduleConfig> space = EnumerateTranspose(g, target);
  auto score = [](const ScheduleConfig& c) {
    int64_t acc = c.Get("kb", 1) * c.Get("ur", 1);
    return std::make_tuple(c.Get("vw", 1), -std::abs(acc - 12), -c.Get("rows", 1), c.Get("kb", 1));
  };
  return BestBy(space, score);
}

absl::Status ValidateTranspose(const Graph& g, const ScheduleConfig& c, const CpuTarget& target) {
  ASSIGN_OR_RETURN(ConvTransposeForm f, AnalyzeConvTranspose(g));
  for (const auto& [key, v] : c.knobs) {
    if (key != "vw" && key != "ur" && key != "kb" && key != "rows") {
      return absl::InvalidArgumentError(absl::StrCat("schedule ", c.ToString(), ": knob ", key,
                                                     " does not apply to conv_transpose ", f.node->name()));
    }
  }
  return CheckTransposeKnobs(f, KnobsOf(c), target);
}

// for (var, 0, extent) body, or body[var := 0] when the extent is 1.
Stmt LoopOrZero(const std::string& var, int64_t extent, Stmt body, ForKind kind = ForKind::kSerial) {
  if (extent == 1) return Substitute(body, var, I(0));
  return For(var, I(extent), std::move(body), kind);
}

// Gather form: a task is (image, group, block of s_d output depth slices,
// block of `rows` output rows). It packs the input it reads (zero padded),
// then per output-channel block, output row and width stride phase runs
// register blocks of kb channels x ur vectors of vw phase columns. The taps
// of a phase are static (no divisibility test in the vector loop); the D/H
// taps are chosen by a scalar test per (row, tap).
absl::StatusOr<LoopFunc> LowerTranspose(const Graph& g, const ScheduleConfig& config, const CpuTarget& target) {
  ASSIGN_OR_RETURN(ConvTransposeForm f, AnalyzeConvTranspose(g));
  Knobs kn = KnobsOf(config);
  RETURN_IF_ERROR(CheckTransposeKnobs(f, kn, target));
  const int64_t vw = kn.vw, ur = kn.ur, kb = kn.kb, rows = kn.rows;
  int64_t din, rin, wpk;
  TransposePackDims(f, kn, &din, &rin, &wpk);
  const int64_t sd = f.s[0], sh = f.s[1], sw = f.s[2];
  const int64_t db_count = CeilDiv(f.out[0], sd), hb_count = CeilDiv(f.out[1], rows);
  const int64_t tasks = f.n * f.group * db_count * hb_count;

  GraphExpr ge(g);
  const std::vector<Buffer>& args = ge.args();
  Buffer x = args[f.x_arg], w = args[f.w_arg];
  Buffer bias = f.b_arg >= 0 ? args[f.b_arg] : nullptr;
  const Value* ct_out = f.node->output(0);
  const AnchorOutputs outs = PlanAnchorOutputs(g, ct_out);
  Buffer raw = ge.output_buffer(outs.raw);
  ge.Bind(ct_out, raw);

  Expr n = Var("n_"), grp = Var("g_"), db = Var("db_"), hb = Var("hb_");
  // ---- pack: xp[cl][z][r][j] = x[n, g*cg + cl, db + base_d + z, hb*rows/sh + base_h + r, j - left] or 0
  Buffer xp = MakeBuffer("xp", {f.cg * din * rin * wpk}, BufferRole::kTemp);
  Stmt pack;
  {
    Expr cl = Var("pc_"), z = Var("pz_"), r = Var("pr_"), jo = Var("pq_"), ji = Var("pv_");
    Expr j = Add(Mul(jo, I(vw)), ji);
    Expr id = Add(Add(db, I(f.base[0])), z);
    Expr ih = Add(Add(Mul(hb, I(rows / sh)), I(f.base[1])), r);
    Expr iw = Sub(j, I(f.left));
    Expr inside = And(And(And(Ge(id, I(0)), Lt(id, I(f.in[0]))), And(Ge(ih, I(0)), Lt(ih, I(f.in[1])))),
                      And(Ge(iw, I(0)), Lt(iw, I(f.in[2]))));
    Expr chan = Add(Mul(n, I(f.c)), Add(Mul(grp, I(f.cg)), cl));
    Expr xi = Add(Mul(Add(Mul(Add(Mul(chan, I(f.in[0])), id), I(f.in[1])), ih), I(f.in[2])), iw);
    Expr pi = Add(Mul(Add(Mul(Add(Mul(cl, I(din)), z), I(rin)), r), I(wpk)), j);
    Stmt body = IfThen(inside, Store(xp, pi, Load(x, xi)), Store(xp, pi, FloatImm(0)));
    pack = For("pq_", I(wpk / vw), For("pv_", I(vw), body, ForKind::kVectorized));
    pack = LoopOrZero("pc_", f.cg, LoopOrZero("pz_", din, LoopOrZero("pr_", rin, pack)));
  }
  Expr kbo = Var("kbo_"), dr = Var("dr_"), rr = Var("rr_"), qo = Var("qo_"), v = Var("v_"), kk = Var("kk_"),
       u = Var("u_");
  Expr od = Add(Mul(db, I(sd)), dr);
  Expr oh = Add(Mul(hb, I(rows)), rr);
  Expr kl = Add(Mul(kbo, I(kb)), kk);
  Expr k = Add(Mul(grp, I(f.mg)), kl);
  Expr ai = Add(Mul(Add(Mul(kk, I(ur)), u), I(vw)), v);
  Expr q = Add(Add(Mul(qo, I(vw * ur)), Mul(u, I(vw))), v);
  auto lanes = [&](Stmt body) {
    return For("v_", I(vw), For("kk_", I(kb), For("u_", I(ur), std::move(body), ForKind::kUnrolled), ForKind::kUnrolled),
               ForKind::kVectorized);
  };
  std::vector<Stmt> phases;
  for (int64_t rw = 0; rw < sw && rw < f.out[2]; ++rw) {
    const int64_t nq = PhaseColumns(f, rw);
    Buffer acc = MakeBuffer(absl::StrCat("acc", rw), {kb * ur * vw}, BufferRole::kTemp);
    Stmt init = lanes(Store(acc, ai, bias ? Load(bias, k) : FloatImm(0)));
    // The width taps of this phase and their input column offsets.
    std::vector<std::pair<int64_t, int64_t>> taps;
    for (int64_t kw = 0; kw < f.k[2]; ++kw) {
      int64_t num = rw + f.pb[2] - kw * f.d[2];
      if (FloorDiv(num, sw) * sw == num) taps.push_back({kw, FloorDiv(num, sw)});
    }
    std::vector<Stmt> body = {init};
    if (!taps.empty()) {
      Expr cl = Var("cl_"), kdv = Var("kd_"), khv = Var("kh_");
      Expr numd = Add(Add(dr, Mul(Sub(I(f.k[0] - 1), kdv), I(f.d[0]))), I(f.c0[0]));
      Expr numh = Add(Add(rr, Mul(Sub(I(f.k[1] - 1), khv), I(f.d[1]))), I(f.c0[1]));
      Expr row = Add(Mul(Add(Mul(cl, I(din)), Div(numd, I(sd))), I(rin)), Div(numh, I(sh)));
      Expr wrow = Add(Mul(Add(Mul(Add(Mul(Add(Mul(grp, I(f.cg)), cl), I(f.mg)), kl), I(f.k[0])), kdv), I(f.k[1])), khv);
      std::vector<Stmt> per_tap;
      for (const auto& [kw, off] : taps) {
        Expr xi = Add(Mul(row, I(wpk)), Add(q, I(off + f.left)));
        Expr wi = Add(Mul(wrow, I(f.k[2])), I(kw));
        per_tap.push_back(lanes(Store(acc, ai, MulAdd(Load(xp, xi), Load(w, wi), Load(acc, ai)))));
      }
      Stmt mac = LoopOrZero("cl_", f.cg, Block(per_tap));
      Expr cond;
      if (sd > 1) cond = Eq(Mod(numd, I(sd)), I(0));
      if (sh > 1) cond = cond ? And(cond, Eq(Mod(numh, I(sh)), I(0))) : Eq(Mod(numh, I(sh)), I(0));
      if (cond) mac = IfThen(cond, mac);
      body.push_back(LoopOrZero("kd_", f.k[0], LoopOrZero("kh_", f.k[1], mac)));
    }
    {
      Expr ow = Add(Mul(q, I(sw)), I(rw));
      std::vector<Expr> idx = {n, k};
      if (f.nsp == 3) idx.push_back(od);
      if (f.nsp >= 2) idx.push_back(oh);
      idx.push_back(ow);
      Expr oi = FlatIndex(DimsOf(ct_out), idx);
      ASSIGN_OR_RETURN(Stmt s, StoreThroughEpilogue(g, ge, ct_out, outs, Load(acc, ai), idx, oi));
      if (nq % (vw * ur) != 0) s = IfThen(Lt(q, I(nq)), s);
      body.push_back(lanes(s));
    }
    phases.push_back(LoopOrZero("qo_", CeilDiv(nq, vw * ur), Allocate(acc, Block(body))));
  }
  Stmt per_row = Block(phases);
  Expr valid;
  if (f.out[0] % sd != 0) valid = Lt(od, I(f.out[0]));
  if (f.out[1] % rows != 0) valid = valid ? And(valid, Lt(oh, I(f.out[1]))) : Lt(oh, I(f.out[1]));
  if (valid) per_row = IfThen(valid, per_row);
  Stmt compute = LoopOrZero("kbo_", f.mg / kb, LoopOrZero("dr_", sd, LoopOrZero("rr_", rows, per_row)));
  Stmt body = Allocate(xp, Block({pack, compute}));
  Expr t = Var("t_");
  body = LetStmt("hb_", Mod(t, I(hb_count)), body);
  body = LetStmt("db_", Mod(Div(t, I(hb_count)), I(db_count)), body);
  body = LetStmt("g_", Mod(Div(t, I(db_count * hb_count)), I(f.group)), body);
  body = LetStmt("n_", Div(t, I(f.group * db_count * hb_count)), body);
  return LoopFunc{"conv_transpose", args, For("t_", I(tasks), body, ForKind::kParallel)};
}

}  // namespace

absl::StatusOr<WindowGeometry> ResolveWindow(const Node& node, const std::vector<int64_t>& kernel) {
  std::vector<int64_t> xd = DimsOf(node.input(0));
  std::vector<int64_t> od = DimsOf(node.output(0));
  size_t rank = xd.size();
  if (rank < 3 || rank > 5 || od.size() != rank || kernel.size() != rank - 2) {
    return NodeError(node, "only 1-D, 2-D and 3-D windows (NCW, NCHW, NCDHW)");
  }
  size_t sp = rank - 2;
  std::vector<int64_t> strides = node.GetInts("strides", std::vector<int64_t>(sp, 1));
  std::vector<int64_t> dil = node.GetInts("dilations", std::vector<int64_t>(sp, 1));
  std::vector<int64_t> pads = node.GetInts("pads", std::vector<int64_t>(2 * sp, 0));
  if (strides.size() != sp || dil.size() != sp || pads.size() != 2 * sp) {
    return NodeError(node, "strides, dilations or pads do not match the rank");
  }
  std::string auto_pad = node.GetString("auto_pad", "NOTSET");
  for (size_t i = 0; i < sp; ++i) {
    if (strides[i] < 1 || dil[i] < 1 || kernel[i] < 1 || pads[i] < 0 || pads[i + sp] < 0) {
      return NodeError(node, "non-positive kernel, stride or dilation, or negative pad");
    }
    int64_t in = xd[2 + i], out = od[2 + i];
    if (auto_pad == "VALID") {
      pads[i] = pads[i + sp] = 0;
    } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      int64_t total = std::max<int64_t>(0, (out - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1 - in);
      pads[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pads[i + sp] = total - pads[i];
    } else if (auto_pad != "NOTSET") {
      return NodeError(node, absl::StrCat("auto_pad ", auto_pad));
    }
  }
  // Axes D, H, W; missing leading axes keep extent 1.
  WindowGeometry s;
  s.one_d = rank == 3;
  s.three_d = rank == 5;
  s.n = xd[0];
  s.c = xd[1];
  int64_t* fields[3][8] = {{&s.d, &s.od, &s.kd, &s.sd, &s.dd, &s.pad_front, &s.pad_back, nullptr},
                           {&s.h, &s.oh, &s.kh, &s.sh, &s.dh, &s.pad_top, &s.pad_bottom, nullptr},
                           {&s.w, &s.ow, &s.kw, &s.sw, &s.dw, &s.pad_left, &s.pad_right, nullptr}};
  for (size_t i = 0; i < sp; ++i) {
    int64_t** f = fields[3 - sp + i];
    *f[0] = xd[2 + i];
    *f[1] = od[2 + i];
    *f[2] = kernel[i];
    *f[3] = strides[i];
    *f[4] = dil[i];
    *f[5] = pads[i];
    *f[6] = pads[i + sp];
  }
  if (s.n * s.c * s.od * s.oh * s.ow == 0) return NodeError(node, "empty tensor");
  return s;
}

WorkloadLowering ConvLowering() {
  WorkloadLowering l;
  l.kind = "conv";
  l.match = [](const Graph& g) { return AnalyzeConv(g).status(); };
  l.enumerate = Enumerate;
  l.default_schedule = Default;
  l.validate = Validate;
  l.lower = Lower;
  return l;
}

WorkloadLowering ConvTransposeLowering() {
  WorkloadLowering l;
  l.kind = "conv_transpose";
  l.match = [](const Graph& g) { return AnalyzeConvTranspose(g).status(); };
  l.enumerate = EnumerateTranspose;
  l.default_schedule = DefaultTranspose;
  l.validate = ValidateTranspose;
  l.lower = LowerTranspose;
  return l;
}

}  // namespace kiln::loop_ir
