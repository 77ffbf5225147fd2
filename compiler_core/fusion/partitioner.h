// The fusion partitioner: cuts an optimised graph into fusion groups, each of
// which becomes one kernel. Loop fusion of elementwise/broadcast chains,
// reduction (input) fusion, epilogue fusion into Conv/MatMul anchors and data
// movement as index arithmetic, steered by the cost model in
// cost_model.h; docs/fusion.md has the rules.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler_core/fusion/cost_model.h"
#include "compiler_core/ir/graph.h"

namespace kiln {

struct FusionGroup {
  int index = 0;
  // The kind of the lowering that compiles the group ("matmul", "elementwise",
  // "reduction", ...: compiler_core/codegen/schedule_space.h WorkloadKind), the
  // one vocabulary of kinds for reports, packages and the tuning database;
  // "unsupported" when no lowering takes the group; empty when the partition
  // was made without FusionOptions::classify.
  std::string kind;
  std::vector<const Node*> nodes;  // topological order
  // Values read from outside the group (graph inputs, constants, other groups'
  // results) in order of first use; and values the group writes that are read
  // outside it or are graph outputs.
  std::vector<Value*> inputs;
  std::vector<Value*> outputs;
  // The Conv/ConvTranspose/MatMul/Gemm node of an anchor group, else nullptr.
  const Node* anchor = nullptr;
  // Nodes this group recomputes that another group also computes (a cheap
  // producer fused into several consumers instead of written once).
  std::vector<const Node*> recomputed;
  // Estimated memory traffic: the group as one kernel (inputs read + outputs
  // written) and its nodes as separate kernels.
  double bytes_fused = 0;
  double bytes_unfused = 0;
};

// A value stored inside another value's buffer from byte `offset` on
// (concat_in_place.h): the group computing `value` writes it there, and
// `into` needs no kernel of its own.
struct ValueView {
  const Value* value = nullptr;
  const Value* into = nullptr;
  int64_t offset = 0;
};

struct Partition {
  std::vector<FusionGroup> groups;  // in execution (topological) order
  // Values written in place into others' buffers, outermost first.
  std::vector<ValueView> views;
  // Traffic of the whole graph: sum over groups, and every node as a kernel.
  double bytes_fused = 0;
  double bytes_unfused = 0;
  // The value whose buffer holds `v` (following views down to one that is
  // no view; `v` itself if it is none) and `v`'s byte offset in it.
  const Value* ViewRoot(const Value* v, int64_t* offset) const;
  // One line per group: "group 0 matmul [mm0:MatMul] (%x, %w) -> (%t)",
  // then one per view: "view %a in %c at byte 0".
  std::string ToText() const;
};

struct FusionOptions {
  // false: one group per node (no fusion).
  bool fuse = true;
  // The code generator's verdict on a candidate group, given as its workload
  // graph (ExtractWorkload): the kind of the lowering that takes it, or
  // nullopt when none does. A group only grows by a node when the grown group
  // still compiles, so a group the code generator cannot take is split into
  // smaller ones, ultimately single nodes (kept, with kind "unsupported").
  // Every group's kind is its verdict. nullptr: no restriction, no kinds.
  std::function<std::optional<std::string>(const Graph& workload)> classify;
  FusionCostOptions cost;
  // Over 0: Concats are placed in place (PlaceConcatsInPlace) with slices
  // this many bytes apart, the memory plan's alignment.
  int64_t view_alignment = 0;
};

// Partitions `graph` under `options`. Never fails for a verified graph with
// static shapes; a value without a static shape keeps its nodes unfused.
absl::StatusOr<Partition> PartitionGraph(const Graph& graph, const FusionOptions& options);

}  // namespace kiln
