// Primitives the rewriting passes share: reading small constants, checking that
// a matched subgraph is private to the pattern, replacing a node while keeping
// graph-output names, and restoring topological order after new nodes.
#pragma once

#include <functional>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler_core/ir/graph.h"

namespace kiln {

// The elements of a constant f32/f64/i32/i64 value as doubles; nullopt for
// non-constants, other dtypes and tensors larger than `max_elements`.
std::optional<std::vector<double>> ConstantValues(const Value* v, int64_t max_elements = 1 << 20);

// True when `v` is a constant whose every element is within `tol` (relative to
// max(1, |expected|)) of `expected`. `v` must have at least one element.
bool IsConstantNear(const Value* v, double expected, double tol = 1e-5);

// True when `v` is a constant with exactly one element within `tol` of
// `expected` (a scalar, [1], [1,1], ...).
bool IsScalarNear(const Value* v, double expected, double tol = 1e-5);

bool IsGraphOutput(const Graph& graph, const Value* v);

// True when `n` is non-null and has op type `op` in the default domain.
bool IsOp(const Node* n, const char* op);

// A Conv's operands when the algorithm-selection rewrites can take it: X a
// static f32 tensor, W an f32 constant, the bias (null when absent) f32.
struct ConstantWeightConv {
  Value* x = nullptr;
  Value* w = nullptr;
  Value* bias = nullptr;
};
std::optional<ConstantWeightConv> MatchConstantWeightConv(const Node& conv);

// y = scale[c] * x + shift[c] along the channel axis.
struct ChannelAffine {
  std::vector<double> scale, shift;
};

// The per-channel map an inference-mode BatchNormalization applies to its
// `channels` channels (axis 1), from its constant f32 parameters; nullopt
// in training mode or when a parameter is not a constant [channels].
std::optional<ChannelAffine> BatchNormAffine(const Node& bn, int64_t channels);

// The permutation of a Transpose node, its default (reversed axes) resolved;
// nullopt when its input's rank is unknown or perm does not match it.
std::optional<std::vector<int64_t>> TransposePermutation(const Node* t);

// The producer of `v` when it has op type `op` (default domain), else nullptr.
Node* ProducerIs(const Value* v, const char* op);

// The only user of `v`, or nullptr when `v` has zero or several users or is a
// graph output.
Node* SoleUser(const Graph& graph, const Value* v);

// For a binary node whose inputs are {a, other} in either order (commutative
// ops), returns `other`; nullptr when `a` is not one of its two inputs.
Value* OtherOperand(const Node* binary, const Value* a);

// True when every output of every node of `pattern` but `root` is read only by
// nodes of `pattern` and is not a graph output: the subgraph computing root's
// result can be replaced without changing anything else.
bool IsPrivateToPattern(const Graph& graph, const std::vector<Node*>& pattern, const Node* root);

// Removes `nodes` (in any order; their outputs must be read by nobody outside
// them, except `keep` which may still be read and becomes producer-less).
void RemoveNodes(Graph& graph, const std::vector<Node*>& nodes);

// Replaces the pattern `pattern` whose result is `root->output(0)` by a new
// node computing that same value (same name, type and readers). The pattern's
// nodes are removed; the new node is called `name` (default: `root`'s name). Call
// RestoreTopologicalOrder before returning from the pass.
absl::StatusOr<Node*> ReplacePatternWithNode(Graph& graph, const std::vector<Node*>& pattern, Node* root,
                                             std::string op_type, std::vector<Value*> inputs,
                                             std::map<std::string, AttrValue> attrs = {},
                                             std::string name = "");

// Makes every reader of node `n`'s output 0 read `replacement` instead and
// removes `n` (whose other outputs must be unused). When that output is a graph
// output, its name is kept by re-creating `replacement`'s producer with the
// output renamed; that is possible only when `replacement` is computed by a
// node and read by `n` alone. Returns false (changing nothing) otherwise.
bool ForwardOutput(Graph& graph, Node* n, Value* replacement);

// Adds a constant with a fresh name derived from `hint`.
Value* AddFreshConstant(Graph& graph, const std::string& hint, Tensor t);

// Builds the nodes replacing one node, named after it ("<prefix>/<Op>_<n>"),
// each with one fresh output value whose type shape inference fills in.
// Small constants of equal value are made once.
class NodeBuilder {
 public:
  NodeBuilder(Graph& graph, std::string prefix) : graph_(graph), prefix_(std::move(prefix)) {}

  absl::StatusOr<Value*> Op(const std::string& op, std::vector<Value*> inputs,
                            std::map<std::string, AttrValue> attrs = {});
  Value* Constant(Tensor t);
  Value* Int64s(const std::vector<int64_t>& v);  // 1-D i64
  Value* Int64(int64_t v);                       // i64 scalar
  Value* Float(float v);                         // f32 scalar
  absl::StatusOr<Value*> Reshape(Value* v, const std::vector<int64_t>& dims);
  // v[start:end] along `axis`.
  absl::StatusOr<Value*> Slice(Value* v, int64_t axis, int64_t start, int64_t end);

 private:
  Graph& graph_;
  std::string prefix_;
  int count_ = 0;
  std::map<std::vector<int64_t>, Value*> int64s_;
  std::map<int64_t, Value*> int64_;
  std::map<float, Value*> floats_;
};

// Makes `target` (a value whose producer was removed; its name, type and
// readers stay) the output of the node computing `computed`: that node is
// re-created writing `target` when nothing else reads `computed`; otherwise
// (or when `computed` is an input or constant) an Identity copies it.
absl::Status ProduceInto(Graph& graph, Value* computed, Value* target);

// Re-creates nodes so that `graph.nodes()` is in topological order again
// (AddNode appends). Node pointers of moved nodes change. A no-op when the
// order already holds.
void RestoreTopologicalOrder(Graph& graph);

// What a pass that rewrote the graph does before it returns: restores the
// topological order and drops values nothing reads any more.
void FinishRewrites(Graph& graph);

// The loop of a pass that rewrites nodes one at a time: runs `rewrite` on
// every node `select` picks (collected first, as rewrites add and remove
// nodes); when any rewrote, finishes the rewrites and infers the new values'
// types. Returns whether any node was rewritten.
absl::StatusOr<bool> RewriteSelectedNodes(Graph& graph, const std::function<bool(const Node&)>& select,
                                          const std::function<absl::StatusOr<bool>(Graph&, Node*)>& rewrite);

}  // namespace kiln
