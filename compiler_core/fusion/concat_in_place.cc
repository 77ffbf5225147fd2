// Concatenation in place (see concat_in_place.h).
#include "compiler_core/fusion/concat_in_place.h"

#include <unordered_set>
#include <vector>

namespace kiln {
namespace {

int64_t StaticBytes(const Value* v) { return NumElements(v->type().StaticDims()) * DTypeSize(v->type().dtype); }

class ConcatPlacer {
 public:
  ConcatPlacer(const Graph& graph, int64_t alignment, Partition* partition)
      : alignment_(alignment), partition_(*partition) {
    for (const Value* v : graph.outputs()) graph_outputs_.insert(v);
    for (const FusionGroup& g : partition_.groups) {
      for (const Value* v : g.outputs) written_.insert(v);
    }
  }

  void Run() {
    std::vector<bool> removed(partition_.groups.size(), false);
    for (size_t i = partition_.groups.size(); i-- > 0;) {
      removed[i] = PlaceGroup(partition_.groups[i]);
    }
    std::vector<FusionGroup> kept;
    for (size_t i = 0; i < partition_.groups.size(); ++i) {
      if (removed[i]) {
        partition_.bytes_fused -= partition_.groups[i].bytes_fused;
        continue;
      }
      kept.push_back(std::move(partition_.groups[i]));
      kept.back().index = static_cast<int>(kept.size()) - 1;
    }
    partition_.groups = std::move(kept);
  }

 private:
  // The byte offsets of a Concat's inputs in its output, or empty where its
  // slices are not contiguous runs of the output.
  std::vector<int64_t> SliceOffsets(const Node& concat) const {
    const Value* out = concat.output(0);
    if (!out->type().IsStatic()) return {};
    const std::vector<int64_t> dims = out->type().StaticDims();
    const int64_t rank = static_cast<int64_t>(dims.size());
    int64_t axis = concat.GetInt("axis", 0);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) return {};
    for (int64_t d = 0; d < axis; ++d) {
      if (dims[d] != 1) return {};
    }
    std::vector<int64_t> offsets;
    int64_t at = 0;
    for (const Value* in : concat.inputs()) {
      if (in == nullptr || !in->type().IsStatic() || in->type().dtype != out->type().dtype) return {};
      offsets.push_back(at);
      at += StaticBytes(in);
    }
    if (at != StaticBytes(out)) return {};
    return offsets;
  }

  // Whether `v` may be a view: a group writes it, or a Concat of the group
  // being placed (which then writes nothing).
  bool Viewable(const Value* v) const {
    const bool written = written_.count(v) != 0 || inner_.count(v) != 0;
    return written && !v->is_graph_input() && !v->is_constant() && graph_outputs_.count(v) == 0;
  }

  // A group of Concats only (the partitioner joins a Concat of Concats into
  // one group: Inception's blocks), placed last node first, all or none.
  bool PlaceGroup(const FusionGroup& g) {
    inner_.clear();
    for (const Node* n : g.nodes) {
      if (n->op_type() != "Concat") return false;
      inner_.insert(n->output(0));
    }
    const std::unordered_set<const Value*> before = viewed_;
    const size_t placed = partition_.views.size();
    for (size_t k = g.nodes.size(); k-- > 0;) {
      if (!Place(*g.nodes[k])) {
        viewed_ = before;
        partition_.views.resize(placed);
        return false;
      }
    }
    return true;
  }

  void AddView(const Value* value, const Value* into, int64_t offset) {
    viewed_.insert(value);
    partition_.views.push_back(ValueView{value, into, offset});
  }

  bool Place(const Node& concat) {
    const Value* out = concat.output(0);
    if (graph_outputs_.count(out) != 0) return false;
    const std::vector<int64_t> offsets = SliceOffsets(concat);
    if (offsets.empty()) return false;
    const std::vector<Value*>& ins = concat.inputs();
    std::unordered_set<const Value*> seen;
    int viewed = 0;
    for (size_t i = 0; i < ins.size(); ++i) {
      if (!Viewable(ins[i]) || !seen.insert(ins[i]).second) return false;
      viewed += viewed_.count(ins[i]) != 0 ? 1 : 0;
    }
    if (viewed == 0) {
      for (int64_t offset : offsets) {
        if (offset % alignment_ != 0) return false;
      }
      for (size_t i = 0; i < ins.size(); ++i) AddView(ins[i], out, offsets[i]);
      return true;
    }
    // All already views, back to back in one buffer: the output is that run.
    if (viewed != static_cast<int>(ins.size()) || viewed_.count(out) != 0 || !Viewable(out)) return false;
    int64_t first = 0;
    const Value* root = partition_.ViewRoot(ins[0], &first);
    for (size_t i = 1; i < ins.size(); ++i) {
      int64_t at = 0;
      if (partition_.ViewRoot(ins[i], &at) != root || at != first + offsets[i]) return false;
    }
    // The output's own readers must not see it as a view of itself.
    if (root == out) return false;
    AddView(out, root, first);
    return true;
  }

  const int64_t alignment_;
  Partition& partition_;
  std::unordered_set<const Value*> graph_outputs_;
  std::unordered_set<const Value*> written_;
  std::unordered_set<const Value*> inner_;  // outputs of the group being placed
  std::unordered_set<const Value*> viewed_;  // the values partition_.views places
};

}  // namespace

void PlaceConcatsInPlace(const Graph& graph, int64_t alignment, Partition* partition) {
  ConcatPlacer(graph, alignment, partition).Run();
}

}  // namespace kiln
