// The fusion partitioner. Two greedy phases over the topologically ordered
// nodes, then the groups are put in execution order:
//   A. consumers join a producer's group (loop fusion, reduction fusion,
//      epilogues of anchors), when the rules, the acyclicity check, the size
//      limits and the code generator (options.classify) allow;
//   B. cheap producer groups (elementwise / data movement) are fused into all
//      their consumer groups (prologues, index arithmetic, recompute on
//      fan-out) when the cost model says it moves fewer bytes; a view of a
//      group's input that other groups read is computed in those too.
#include "compiler_core/fusion/partitioner.h"

#include <algorithm>
#include <cassert>
#include <map>
#include <optional>
#include <queue>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler_core/fusion/concat_in_place.h"
#include "compiler_core/fusion/workload.h"

namespace kiln {
namespace {

class Partitioner {
 public:
  Partitioner(const Graph& graph, const FusionOptions& options) : graph_(graph), options_(options) {
    for (const auto& n : graph.nodes()) {
      index_[n.get()] = static_cast<int>(nodes_.size());
      nodes_.push_back(n.get());
      class_.push_back(ClassifyForFusion(*n));
    }
    groups_of_.resize(nodes_.size());
    for (const Value* v : graph.outputs()) graph_outputs_.insert(v);
  }

  Partition Run() {
    for (int i = 0; i < static_cast<int>(nodes_.size()); ++i) PlaceNode(i);
    if (options_.fuse) {
      for (int g = static_cast<int>(groups_.size()) - 1; g >= 0; --g) TryFuseIntoConsumers(g);
      ShareViewsOfInputs();
    }
    return Assemble();
  }

 private:
  struct Group {
    std::vector<int> nodes;  // ascending node index = topological order
    int anchor = -1;
    int num_reductions = 0;
    int64_t iter = 0;  // elements of the group's iteration space
    bool sealed = false;  // takes no other node (opaque, dynamic shapes, no fusion)
    bool alive = true;
  };

  int ProducerOf(const Value* v) const {
    if (!v || !v->producer()) return -1;
    auto it = index_.find(v->producer());
    return it == index_.end() ? -1 : it->second;
  }

  bool InGroup(int g, int node) const {
    const auto& gs = groups_of_[node];
    return std::find(gs.begin(), gs.end(), g) != gs.end();
  }

  // Inputs and outputs of a set of nodes. Precise: a value is an output when a
  // reader sits in a group that does not compute it (final assembly);
  // otherwise when a reader is outside the set (candidate checks).
  void GroupIo(const std::vector<int>& members, bool precise, std::vector<Value*>* inputs,
               std::vector<Value*>* outputs) const {
    std::unordered_set<int> in_set(members.begin(), members.end());
    std::unordered_set<const Value*> seen;
    for (int m : members) {
      for (Value* v : nodes_[m]->inputs()) {
        if (!v || IsStructuralConstant(v)) continue;
        int p = ProducerOf(v);
        if ((p < 0 || !in_set.count(p)) && seen.insert(v).second) inputs->push_back(v);
      }
    }
    for (int m : members) {
      for (Value* v : nodes_[m]->outputs()) {
        bool out = graph_outputs_.count(v) > 0 || v->users().empty();
        for (const Node* u : v->users()) {
          if (out) break;
          int ui = index_.at(u);
          if (in_set.count(ui)) continue;
          if (!precise) {
            out = true;
            break;
          }
          for (int h : groups_of_[ui]) {
            if (!InGroup(h, m)) out = true;
          }
        }
        if (out) outputs->push_back(v);
      }
    }
  }

  FusionGroup MakeFusionGroup(const std::vector<int>& members, bool precise) const {
    FusionGroup fg;
    for (int m : members) fg.nodes.push_back(nodes_[m]);
    GroupIo(members, precise, &fg.inputs, &fg.outputs);
    return fg;
  }

  // Size limits (register pressure) and the code generator's verdict.
  bool Acceptable(const std::vector<int>& members) const {
    if (static_cast<int>(members.size()) > options_.cost.max_group_nodes) return false;
    FusionGroup fg = MakeFusionGroup(members, /*precise=*/false);
    if (static_cast<int>(fg.inputs.size()) > options_.cost.max_group_inputs) return false;
    if (!options_.classify) return true;
    absl::StatusOr<Workload> w = ExtractWorkload(graph_, fg);
    return w.ok() && options_.classify(*w->graph).has_value();
  }

  // Whether group `from` reaches group `to` through the current groups.
  bool Reaches(int from, int to) const {
    std::vector<int> stack = {from};
    std::unordered_set<int> visited = {from};
    while (!stack.empty()) {
      int g = stack.back();
      stack.pop_back();
      for (int m : groups_[g].nodes) {
        for (const Value* v : nodes_[m]->outputs()) {
          for (const Node* u : v->users()) {
            for (int h : groups_of_[index_.at(u)]) {
              if (h == to) return true;
              if (visited.insert(h).second) stack.push_back(h);
            }
          }
        }
      }
    }
    return false;
  }

  static int64_t MaxOutputElements(const Node& n) {
    int64_t e = 0;
    for (const Value* v : n.outputs()) {
      int64_t x = NumElementsOf(v);
      if (x <= 0) return 0;
      e = std::max(e, x);
    }
    return e;
  }

  // The group's iteration space after node `ni` joins it, or nullopt when no
  // rule lets it join.
  std::optional<int64_t> JoinedIter(const Group& g, int ni) const {
    const Node& n = *nodes_[ni];
    OpClass c = class_[ni];
    int64_t out = MaxOutputElements(n);
    if (g.sealed || out <= 0 || g.iter <= 0) return std::nullopt;
    const int64_t small = options_.cost.small_tensor_elements;
    if (IsLayoutFree(n)) return std::max(g.iter, out);  // a view: free after anything
    if (g.anchor >= 0) {  // epilogue: one element per anchor output element
      if (c == OpClass::kElementwise && g.num_reductions == 0 && out == g.iter) return g.iter;
      return std::nullopt;
    }
    if (g.num_reductions > 0) {  // consumers of the reduction, or a sibling reduction
      if (c == OpClass::kElementwise && out <= g.iter) return g.iter;
      if (c == OpClass::kReduction && NumElementsOf(n.input(0)) == g.iter) return g.iter;
      return std::nullopt;
    }
    // An elementwise / data-movement loop nest.
    bool all_data_movement = true;
    for (int m : g.nodes) all_data_movement &= class_[m] == OpClass::kDataMovement;
    switch (c) {
      case OpClass::kElementwise:
        if (out <= g.iter) return g.iter;
        if (g.iter <= small) return out;  // broadcast of a small chain: recompute it
        return std::nullopt;
      case OpClass::kDataMovement:
        if (out <= g.iter) return g.iter;
        if (g.iter <= small || all_data_movement) return out;  // index arithmetic only
        return std::nullopt;
      case OpClass::kReduction: {
        int64_t in = NumElementsOf(n.input(0));
        if (in > 0 && (in <= g.iter || g.iter <= small)) return std::max(in, g.iter);
        return std::nullopt;
      }
      default:
        return std::nullopt;
    }
  }

  int NewGroup(int ni) {
    Group g;
    g.nodes = {ni};
    OpClass c = class_[ni];
    if (c == OpClass::kAnchor) g.anchor = ni;
    if (c == OpClass::kReduction) {
      g.num_reductions = 1;
      g.iter = NumElementsOf(nodes_[ni]->input(0));
    } else {
      g.iter = MaxOutputElements(*nodes_[ni]);
    }
    g.sealed = !options_.fuse || c == OpClass::kOpaque || g.iter <= 0;
    groups_.push_back(std::move(g));
    int id = static_cast<int>(groups_.size()) - 1;
    groups_of_[ni] = {id};
    return id;
  }

  // A 2-D Conv with a 1x1 kernel, unit strides and no padding.
  static bool IsPointwiseConv(const Node& n) {
    if (n.op_type() != "Conv" || !n.domain().empty() || n.num_inputs() < 2 || n.input(1) == nullptr) return false;
    const TensorType& w = n.input(1)->type();
    if (!w.known || !w.IsStatic() || w.rank() != 4 || w.dims[2].value != 1 || w.dims[3].value != 1) return false;
    for (int64_t v : n.GetInts("strides", {})) {
      if (v != 1) return false;
    }
    for (int64_t v : n.GetInts("pads", {})) {
      if (v != 0) return false;
    }
    return n.GetInt("group", 1) == 1;
  }

  // A 2-D Conv with one input and one output channel per group.
  static bool IsDepthwiseConv(const Node& n) {
    if (n.op_type() != "Conv" || !n.domain().empty() || n.num_inputs() < 2 || n.input(1) == nullptr) return false;
    const TensorType& w = n.input(1)->type();
    return w.known && w.IsStatic() && w.rank() == 4 && w.dims[1].value == 1 && n.GetInt("group", 1) > 1 &&
           n.GetInt("group", 1) == w.dims[0].value;
  }

  // Conv-pair fusion: a depthwise conv joins the group of the pointwise conv
  // that expands its input (through that group's elementwise epilogue) when
  // the expanded tensor is at least cost.min_conv_pair_bytes: it then never
  // goes to memory (an inverted residual block's expansion). Not a long
  // reduction over a large input (cost.long_conv_pair_*).
  bool TryJoinConvPair(int ni) {
    const Node& n = *nodes_[ni];
    if (!IsDepthwiseConv(n) || BytesOf(n.input(0)) < options_.cost.min_conv_pair_bytes) return false;
    int p = ProducerOf(n.input(0));
    if (p < 0) return false;
    int g = groups_of_[p].front();
    Group& group = groups_[g];
    if (group.anchor < 0 || group.sealed || !IsPointwiseConv(*nodes_[group.anchor])) return false;
    const Node& pw = *nodes_[group.anchor];
    if (pw.input(1)->type().dims[1].value > options_.cost.long_conv_pair_reduction &&
        BytesOf(pw.input(0)) > options_.cost.long_conv_pair_input_bytes) {
      return false;
    }
    for (int i = 1; i < n.num_inputs(); ++i) {
      int q = ProducerOf(n.input(i));
      if (q >= 0 && groups_of_[q].front() != g && Reaches(g, groups_of_[q].front())) return false;
    }
    std::vector<int> grown = group.nodes;
    grown.push_back(ni);
    if (!Acceptable(grown)) return false;
    group.nodes = std::move(grown);
    group.anchor = ni;
    group.iter = MaxOutputElements(n);
    groups_of_[ni] = {g};
    return true;
  }

  // Phase A: node `ni` joins the producer group that moves the most bytes
  // into it and accepts it, or starts a group.
  void PlaceNode(int ni) {
    OpClass c = class_[ni];
    if (options_.fuse && c == OpClass::kAnchor && TryJoinConvPair(ni)) return;
    if (!options_.fuse || c == OpClass::kOpaque || c == OpClass::kAnchor) {
      NewGroup(ni);
      return;
    }
    std::map<int, double> bytes_from;  // producer group -> bytes it feeds to the node
    for (int i = 0; i < nodes_[ni]->num_inputs(); ++i) {
      int p = ProducerOf(nodes_[ni]->input(i));
      if (p >= 0) bytes_from[groups_of_[p].front()] += InputBytesRead(*nodes_[ni], i);
    }
    std::vector<std::pair<double, int>> candidates;
    for (const auto& [g, b] : bytes_from) candidates.push_back({-b, g});
    std::sort(candidates.begin(), candidates.end());
    for (const auto& [neg_bytes, g] : candidates) {
      std::optional<int64_t> iter = JoinedIter(groups_[g], ni);
      if (!iter) continue;
      bool cycle = false;
      for (const auto& [h, b] : bytes_from) {
        if (h != g && Reaches(g, h)) cycle = true;
      }
      if (cycle) continue;
      std::vector<int> grown = groups_[g].nodes;
      grown.push_back(ni);
      if (!Acceptable(grown)) continue;
      Group& group = groups_[g];
      group.nodes = std::move(grown);
      group.iter = *iter;
      if (c == OpClass::kReduction) ++group.num_reductions;
      groups_of_[ni] = {g};
      return;
    }
    NewGroup(ni);
  }

  // Phase B: fuses producer group `pg` into every group that reads it, when
  // all of them accept it and recomputing moves fewer bytes than writing its
  // results once and reading them back.
  void TryFuseIntoConsumers(int pg) {
    Group& p = groups_[pg];
    if (!p.alive || p.sealed || p.anchor >= 0 || p.num_reductions > 0) return;
    bool all_data_movement = true;
    for (int m : p.nodes) all_data_movement &= class_[m] == OpClass::kDataMovement;
    std::set<int> consumers;
    std::map<int, double> read_by;  // consumer group -> bytes of p's results it reads
    std::unordered_set<int> members(p.nodes.begin(), p.nodes.end());
    double ops_elements = 0;
    for (int m : p.nodes) {
      ops_elements += static_cast<double>(MaxOutputElements(*nodes_[m]));
      for (const Value* v : nodes_[m]->outputs()) {
        if (graph_outputs_.count(v) || v->users().empty()) return;
        std::set<int> readers;
        for (const Node* u : v->users()) {
          int ui = index_.at(u);
          if (members.count(ui)) continue;
          for (int h : groups_of_[ui]) readers.insert(h);
        }
        for (int h : readers) {
          consumers.insert(h);
          read_by[h] += BytesOf(v);
        }
      }
    }
    const FusionCostOptions& cost = options_.cost;
    int k = static_cast<int>(consumers.size());
    if (k == 0 || k > cost.max_recompute_consumers) return;
    for (int c : consumers) {
      const Group& cg = groups_[c];
      if (cg.sealed || !cg.alive) return;
      if (cg.anchor >= 0 && !all_data_movement &&
          !(cost.anchor_elementwise_prologue && k == 1 && p.nodes.size() <= 2)) {
        return;
      }
    }
    FusionGroup pf = MakeFusionGroup(p.nodes, /*precise=*/false);
    double in_bytes = 0, out_bytes = 0, read_back = 0;
    for (const Value* v : pf.inputs) {
      double b = 0;
      for (int m : p.nodes) {
        for (int i = 0; i < nodes_[m]->num_inputs(); ++i) {
          if (nodes_[m]->input(i) == v) b = std::max(b, InputBytesRead(*nodes_[m], i));
        }
      }
      in_bytes += b;
    }
    for (const Value* v : pf.outputs) out_bytes += BytesOf(v);
    for (const auto& [c, b] : read_by) read_back += b;
    double materialise = in_bytes + out_bytes + read_back;
    double recompute = k * in_bytes + (k - 1) * ops_elements * cost.recompute_bytes_per_element_op;
    if (recompute > materialise) return;
    std::map<int, std::vector<int>> grown;
    for (int c : consumers) {
      std::vector<int> nodes = groups_[c].nodes;
      nodes.insert(nodes.end(), p.nodes.begin(), p.nodes.end());
      std::sort(nodes.begin(), nodes.end());
      if (!Acceptable(nodes)) return;
      grown[c] = std::move(nodes);
    }
    for (auto& [c, nodes] : grown) {
      groups_[c].nodes = std::move(nodes);
      groups_[c].iter = std::max(groups_[c].iter, p.iter);
    }
    for (int m : p.nodes) groups_of_[m].assign(consumers.begin(), consumers.end());
    p.alive = false;
  }

  // A view (Reshape, Flatten, Squeeze, Unsqueeze) of a value its group reads
  // moves no bytes where it is computed: each other group that reads the view
  // computes it too, as index arithmetic, instead of the view's group writing
  // a copy of its input for them. ResNeSt's radix split (a conv's 3.2 MB
  // output reshaped into two halves, read by the radix sum and, later, by the
  // attention's product) was the sum's group's second output, a copy that
  // also kept the sum from running in parallel.
  void ShareViewsOfInputs() {
    for (int gi = 0; gi < static_cast<int>(groups_.size()); ++gi) {
      if (!groups_[gi].alive || groups_[gi].nodes.size() < 2) continue;
      const std::vector<int> members = groups_[gi].nodes;
      const std::unordered_set<int> in_group(members.begin(), members.end());
      for (int m : members) {
        const Node& n = *nodes_[m];
        if (!IsLayoutFree(n) || n.num_outputs() != 1 || n.num_inputs() < 1) continue;
        const int producer = ProducerOf(n.input(0));
        if (producer >= 0 && in_group.count(producer) > 0) continue;  // a view of a computed value
        const Value* v = n.output(0);
        if (v == nullptr || graph_outputs_.count(v) > 0) continue;
        std::set<int> readers;
        for (const Node* u : v->users()) {
          const int ui = index_.at(u);
          if (in_group.count(ui) > 0) continue;
          for (int h : groups_of_[ui]) {
            if (!InGroup(h, m)) readers.insert(h);
          }
        }
        if (readers.empty()) continue;
        std::map<int, std::vector<int>> grown;
        for (int h : readers) {
          if (groups_[h].sealed || !groups_[h].alive) break;
          std::vector<int> nodes = groups_[h].nodes;
          nodes.push_back(m);
          std::sort(nodes.begin(), nodes.end());
          if (!Acceptable(nodes)) break;
          grown[h] = std::move(nodes);
        }
        if (grown.size() != readers.size()) continue;
        for (auto& [h, nodes] : grown) {
          groups_[h].nodes = std::move(nodes);
          groups_of_[m].push_back(h);
        }
      }
    }
  }

  // The code generator's kind for a final group (see FusionGroup::kind).
  std::string KindOf(const FusionGroup& fg) const {
    if (!options_.classify) return "";
    absl::StatusOr<Workload> w = ExtractWorkload(graph_, fg);
    std::optional<std::string> kind = w.ok() ? options_.classify(*w->graph) : std::nullopt;
    return kind.value_or("unsupported");
  }

  Partition Assemble() const {
    std::vector<int> alive;
    for (int g = 0; g < static_cast<int>(groups_.size()); ++g) {
      if (groups_[g].alive) alive.push_back(g);
    }
    std::unordered_map<int, FusionGroup> built;
    std::unordered_map<const Value*, int> written_by;
    for (int g : alive) {
      FusionGroup fg = MakeFusionGroup(groups_[g].nodes, /*precise=*/true);
      fg.kind = KindOf(fg);
      if (groups_[g].anchor >= 0) fg.anchor = nodes_[groups_[g].anchor];
      for (int m : groups_[g].nodes) {
        if (groups_of_[m].size() > 1) fg.recomputed.push_back(nodes_[m]);
        fg.bytes_unfused += UnfusedBytes(*nodes_[m]);
      }
      for (const Value* v : fg.inputs) {
        double b = 0;
        for (const Node* n : fg.nodes) {
          for (int i = 0; i < n->num_inputs(); ++i) {
            if (n->input(i) == v) b = std::max(b, InputBytesRead(*n, i));
          }
        }
        fg.bytes_fused += b;
      }
      for (const Value* v : fg.outputs) {
        fg.bytes_fused += BytesOf(v);
        written_by[v] = g;
      }
      built[g] = std::move(fg);
    }
    // Execution order: Kahn's algorithm over group dependencies, earliest
    // first node first.
    std::unordered_map<int, int> pending;
    std::unordered_map<int, std::vector<int>> dependents;
    for (int g : alive) {
      std::set<int> deps;
      for (const Value* v : built[g].inputs) {
        auto it = written_by.find(v);
        if (it != written_by.end() && it->second != g) deps.insert(it->second);
      }
      pending[g] = static_cast<int>(deps.size());
      for (int d : deps) dependents[d].push_back(g);
    }
    using Entry = std::pair<int, int>;  // (first node, group)
    std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> ready;
    for (int g : alive) {
      if (pending[g] == 0) ready.push({groups_[g].nodes.front(), g});
    }
    Partition p;
    while (!ready.empty()) {
      int g = ready.top().second;
      ready.pop();
      FusionGroup fg = std::move(built[g]);
      fg.index = static_cast<int>(p.groups.size());
      p.bytes_fused += fg.bytes_fused;
      p.groups.push_back(std::move(fg));
      for (int d : dependents[g]) {
        if (--pending[d] == 0) ready.push({groups_[d].nodes.front(), d});
      }
    }
    assert(p.groups.size() == alive.size() && "fusion groups form a cycle");
    for (const Node* n : nodes_) p.bytes_unfused += UnfusedBytes(*n);
    return p;
  }

  const Graph& graph_;
  const FusionOptions& options_;
  std::vector<const Node*> nodes_;
  std::unordered_map<const Node*, int> index_;
  std::vector<OpClass> class_;
  std::vector<std::vector<int>> groups_of_;  // node -> the groups computing it
  std::vector<Group> groups_;
  std::unordered_set<const Value*> graph_outputs_;
};

}  // namespace

absl::StatusOr<Partition> PartitionGraph(const Graph& graph, const FusionOptions& options) {
  Partition p = Partitioner(graph, options).Run();
  if (options.view_alignment > 0) PlaceConcatsInPlace(graph, options.view_alignment, &p);
  return p;
}

const Value* Partition::ViewRoot(const Value* v, int64_t* offset) const {
  *offset = 0;
  for (bool moved = true; moved;) {
    moved = false;
    for (const ValueView& view : views) {
      if (view.value != v) continue;
      *offset += view.offset;
      v = view.into;
      moved = true;
      break;
    }
  }
  return v;
}

std::string Partition::ToText() const {
  std::string s;
  for (const FusionGroup& g : groups) {
    std::vector<std::string> nodes, ins, outs;
    for (const Node* n : g.nodes) nodes.push_back(absl::StrCat(n->name(), ":", n->op_type()));
    for (Value* v : g.inputs) ins.push_back(absl::StrCat("%", v->name()));
    for (Value* v : g.outputs) outs.push_back(absl::StrCat("%", v->name()));
    absl::StrAppend(&s, "group ", g.index, " ", g.kind, " [", absl::StrJoin(nodes, ", "), "] (",
                    absl::StrJoin(ins, ", "), ") -> (", absl::StrJoin(outs, ", "), ")\n");
  }
  for (const ValueView& v : views) {
    absl::StrAppend(&s, "view %", v.value->name(), " in %", v.into->name(), " at byte ", v.offset, "\n");
  }
  return s;
}

}  // namespace kiln
