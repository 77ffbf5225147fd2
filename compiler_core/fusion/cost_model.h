// The fusion cost model: how the partitioner sees operators (from their OpDef
// traits), and the memory traffic (bytes read + written) of a node or a group on which its
// decisions rest — fuse or materialise, recompute or write once, how large a
// group may grow. docs/fusion.md explains the rules and the numbers.
#pragma once

#include <cstdint>
#include <vector>

#include "compiler_core/frontend/op_registry.h"
#include "compiler_core/ir/graph.h"

namespace kiln {

// What `node` is to the partitioner: its operator's class (OpDef traits),
// except that an operator of another domain, a shape operator, and a
// non-anchor node with extra outputs (Dropout's mask, MaxPool's indices,
// LayerNormalization's mean) are opaque: only an anchor keeps its class
// whatever its outputs.
OpClass ClassifyForFusion(const Node& node);

// A new view of the same contiguous bytes (the layout_only trait): free
// anywhere, also after an anchor or a reduction.
bool IsLayoutFree(const Node& node);

// Knobs of the cost model. Defaults are what docs/fusion.md describes.
struct FusionCostOptions {
  // Register pressure: a group's loop body holds one live stream per input and
  // one temporary per node. Past these limits a group stops growing.
  int max_group_nodes = 64;
  int max_group_inputs = 16;
  // A producer chain this small (elements) may be recomputed per element of a
  // larger broadcast consumer instead of being materialised.
  int64_t small_tensor_elements = 4096;
  // A cheap producer group is recomputed inside at most this many consumer
  // groups (fan-out); beyond, its result is written once (multi-output).
  int max_recompute_consumers = 4;
  // Cost of recomputing one element of one operator, in bytes of traffic.
  double recompute_bytes_per_element_op = 0.5;
  // Fuse a small elementwise producer (e.g. squeeze-and-excitation gating)
  // into a compute anchor as a prologue.
  bool anchor_elementwise_prologue = true;
  // A depthwise conv joins the pointwise conv that expands its input when
  // the expanded tensor has at least this many bytes (a conv pair kernel
  // keeps it on the stack); below, it stays in cache between two kernels
  // anyway. 0 fuses every such pair.
  double min_conv_pair_bytes = 1 << 20;
  // Not, though, where the pointwise conv reduces over more than
  // long_conv_pair_reduction input channels and its input has more than
  // long_conv_pair_input_bytes: the pair kernel then runs in bands of rows
  // (lower_conv_pair.cc's kBandFromBytes), expanding each band's halo rows
  // again, and a long reduction makes that recompute cost more than the
  // traffic the pair saves. Sapphire Rapids, 1 thread, keras Xception: 64 ->
  // 128 on 77x77 1.70 ms paired, 0.85 + 0.54 apart; 128 -> 256 on 39x39
  // 1.51, 0.71 + 0.21 apart; but 256 -> 728 on 20x20 (whole maps) 1.15,
  // 1.12 + 0.16 apart, and MobileNets' 16 -> 96 on 112x112 (bands) win.
  int64_t long_conv_pair_reduction = 48;
  double long_conv_pair_input_bytes = 512 * 1024;
};

// Elements of a static value; 0 when unknown or dynamic.
int64_t NumElementsOf(const Value* v);
// Bytes of a static value; 0 when unknown or dynamic.
double BytesOf(const Value* v);
// Bytes `node` reads from input `i`: the whole tensor, except where the
// operator reads only what it writes (Gather's table, Slice's source).
double InputBytesRead(const Node& node, int i);
// Traffic of `node` run as a kernel of its own: inputs read + outputs written.
double UnfusedBytes(const Node& node);

}  // namespace kiln
