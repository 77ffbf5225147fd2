// Kiln's graph IR: a dataflow graph of tensor operators (ONNX semantics) over
// typed, shaped values. Owned by Graph; Node and Value pointers stay valid for
// the graph's lifetime. Nodes are kept in topological order.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler_core/ir/dtype.h"
#include "compiler_core/ir/tensor.h"

namespace kiln {

// One dimension: a known extent (value >= 0) or a named symbol bound later.
struct Dim {
  int64_t value = -1;
  std::string symbol;

  static Dim Static(int64_t v) { return Dim{v, ""}; }
  static Dim Symbol(std::string s) { return Dim{-1, std::move(s)}; }
  bool is_static() const { return symbol.empty() && value >= 0; }
  bool operator==(const Dim& o) const { return value == o.value && symbol == o.symbol; }
};

struct TensorType {
  DType dtype = DType::kUnknown;
  std::vector<Dim> dims;
  bool known = false;  // false until the importer or shape inference sets it

  static TensorType Static(DType dtype, const std::vector<int64_t>& dims);
  bool IsStatic() const;
  // Extents; only meaningful when IsStatic().
  std::vector<int64_t> StaticDims() const;
  int64_t rank() const { return static_cast<int64_t>(dims.size()); }
  // "f32[1,3,224,224]", "f32[batch,128]", "?" when unknown.
  std::string ToString() const;
  bool operator==(const TensorType& o) const {
    return known == o.known && dtype == o.dtype && dims == o.dims;
  }
};

class Node;

class Value {
 public:
  const std::string& name() const { return name_; }
  const TensorType& type() const { return type_; }
  void set_type(TensorType t) { type_ = std::move(t); }
  // The node computing this value; nullptr for graph inputs and constants.
  Node* producer() const { return producer_; }
  const std::vector<Node*>& users() const { return users_; }
  bool is_constant() const { return constant_.has_value(); }
  const Tensor& constant() const { return *constant_; }
  void set_constant(Tensor t);
  bool is_graph_input() const { return is_graph_input_; }

 private:
  friend class Graph;
  friend class Node;
  std::string name_;
  TensorType type_;
  Node* producer_ = nullptr;
  std::vector<Node*> users_;
  std::optional<Tensor> constant_;
  bool is_graph_input_ = false;
};

using AttrValue = std::variant<int64_t, float, std::string, Tensor, std::vector<int64_t>,
                               std::vector<float>, std::vector<std::string>>;

class Node {
 public:
  const std::string& name() const { return name_; }
  const std::string& op_type() const { return op_type_; }
  const std::string& domain() const { return domain_; }
  // Inputs in operator order; nullptr marks an omitted optional input.
  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  Value* input(int i) const { return i < static_cast<int>(inputs_.size()) ? inputs_[i] : nullptr; }
  Value* output(int i) const { return outputs_[i]; }
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  int num_outputs() const { return static_cast<int>(outputs_.size()); }

  const std::map<std::string, AttrValue>& attrs() const { return attrs_; }
  bool has_attr(std::string_view name) const { return attrs_.count(std::string(name)) > 0; }
  void set_attr(std::string name, AttrValue v) { attrs_[std::move(name)] = std::move(v); }
  int64_t GetInt(std::string_view name, int64_t def) const;
  float GetFloat(std::string_view name, float def) const;
  std::string GetString(std::string_view name, std::string def) const;
  std::vector<int64_t> GetInts(std::string_view name, std::vector<int64_t> def) const;
  std::vector<float> GetFloats(std::string_view name, std::vector<float> def) const;
  std::vector<std::string> GetStrings(std::string_view name, std::vector<std::string> def) const;

  // Replaces input i (keeps users lists consistent).
  void ReplaceInput(int i, Value* v);

 private:
  friend class Graph;
  std::string name_;
  std::string op_type_;
  std::string domain_;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  std::map<std::string, AttrValue> attrs_;
};

class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  // Deep copy (values, nodes, constants).
  std::unique_ptr<Graph> Clone() const;

  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }
  int64_t opset_version() const { return opset_version_; }
  void set_opset_version(int64_t v) { opset_version_ = v; }

  // Creates a value; fails if the name is taken. An empty name is not allowed.
  absl::StatusOr<Value*> AddValue(std::string name, TensorType type = {});
  Value* FindValue(std::string_view name) const;
  // A value name not used yet, derived from `hint`.
  std::string UniqueValueName(std::string_view hint) const;

  absl::StatusOr<Value*> AddInput(std::string name, TensorType type);
  absl::StatusOr<Value*> AddConstant(std::string name, Tensor t);
  void AddOutput(Value* v) { outputs_.push_back(v); }
  void ClearOutputs() { outputs_.clear(); }

  // Appends a node; outputs must not already have a producer. Topological order
  // is the caller's responsibility (the verifier checks it).
  absl::StatusOr<Node*> AddNode(std::string op_type, std::string name, std::vector<Value*> inputs,
                                std::vector<Value*> outputs,
                                std::map<std::string, AttrValue> attrs = {},
                                std::string domain = "");
  // Removes a node whose outputs have no users and are not graph outputs.
  void RemoveNode(Node* node);
  // Every reader of `from` (node inputs and graph outputs) reads `to` instead.
  void ReplaceAllUses(Value* from, Value* to);
  // Drops values with no producer, no users, not an input/output (unused constants).
  void RemoveDeadValues();

  const std::vector<std::unique_ptr<Node>>& nodes() const { return nodes_; }
  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  std::vector<Value*> constants() const;
  std::vector<Value*> values() const;

  // The textual dump, e.g.
  //   graph main(%x: f32[2,3]) -> (%y) {
  //     %w: f32[3,4] = const f32[3,4]
  //     %t: f32[2,4] = MatMul(%x, %w) {name="mm"}
  //     %y: f32[2,4] = Relu(%t) {name="r"}
  //   }
  std::string ToText() const;

 private:
  std::string name_ = "main";
  int64_t opset_version_ = 0;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<std::unique_ptr<Value>> values_;
  std::unordered_map<std::string, Value*> by_name_;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
};

// Renders an attribute value for dumps and canonical keys: 3, 0.5, "s", [1,2].
std::string AttrValueToString(const AttrValue& v);

}  // namespace kiln
