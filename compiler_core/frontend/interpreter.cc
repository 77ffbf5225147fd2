// The reference interpreter: checks the inputs against the graph's declaration,
// then runs each node's kernel from the operator table in topological order.
#include "compiler_core/frontend/interpreter.h"

#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "compiler_core/frontend/op_registry.h"
#include "compiler_core/frontend/ops/op_helpers.h"
#include "compiler_core/frontend/shape_inference.h"

namespace kiln {
namespace {

absl::Status CheckInput(const Value& v, const Tensor& t, std::map<std::string, int64_t>& symbols) {
  const TensorType& type = v.type();
  auto mismatch = [&]() {
    return absl::InvalidArgumentError(absl::StrCat("input '", v.name(), "': expected ", type.ToString(), ", got ",
                                                   DTypeName(t.dtype()), "[", absl::StrJoin(t.dims(), ","), "]"));
  };
  if (t.empty_storage() || t.dtype() != type.dtype || t.rank() != type.rank()) return mismatch();
  for (int i = 0; i < type.rank(); ++i) {
    const Dim& d = type.dims[i];
    int64_t extent = t.dims()[i];
    if (d.is_static()) {
      if (d.value != extent) return mismatch();
    } else if (!d.symbol.empty()) {
      auto [it, inserted] = symbols.emplace(d.symbol, extent);
      if (!inserted && it->second != extent) {
        return absl::InvalidArgumentError(absl::StrCat("input '", v.name(), "' dimension ", i, " is ", extent,
                                                       " but symbol '", d.symbol, "' is already bound to ",
                                                       it->second));
      }
    }
  }
  return absl::OkStatus();
}

// Values by pointer: graph inputs and constants are not copied; node results
// live in `results` (node-based map, so pointers into it stay valid).
struct Env {
  std::unordered_map<const Value*, const Tensor*> values;
  std::unordered_map<const Value*, Tensor> results;
};

// Shape functions read operands that decide shapes (Reshape's shape, Slice's
// starts, ...) from constant inputs (ops::ConstantInts). At run time such an
// operand may be a computed value: then the node is re-created in a scratch
// graph whose small inputs are constants holding the computed values.
bool NeedsOperandValues(const Node& node, const InputTensors& in) {
  for (int i = 0; i < node.num_inputs(); ++i) {
    Value* v = node.input(i);
    if (v != nullptr && !v->is_constant() && in[i]->num_elements() <= ops::kMaxShapeOperandElements) return true;
  }
  return false;
}

absl::StatusOr<std::vector<TensorType>> InferWithOperandValues(const OpDef& def, const Node& node,
                                                               const InputTensors& in, const InputTypes& types) {
  Graph scratch;
  std::vector<Value*> inputs, outputs;
  for (int i = 0; i < node.num_inputs(); ++i) {
    if (in[i] == nullptr) {
      inputs.push_back(nullptr);
      continue;
    }
    std::string name = node.input(i)->name();
    if (Value* seen = scratch.FindValue(name)) {  // the same value twice
      inputs.push_back(seen);
    } else if (in[i]->num_elements() <= ops::kMaxShapeOperandElements) {
      ASSIGN_OR_RETURN(Value * c, scratch.AddConstant(name, *in[i]));
      inputs.push_back(c);
    } else {
      ASSIGN_OR_RETURN(Value * v, scratch.AddInput(name, *types[i]));
      inputs.push_back(v);
    }
  }
  for (Value* o : node.outputs()) {
    ASSIGN_OR_RETURN(Value * v, scratch.AddValue(scratch.UniqueValueName(o->name())));
    outputs.push_back(v);
  }
  ASSIGN_OR_RETURN(Node * copy, scratch.AddNode(node.op_type(), node.name(), inputs, outputs, node.attrs(),
                                                node.domain()));
  return def.infer(*copy, types);
}

absl::Status RunNode(const Node& node, Env& env) {
  const OpDef* def = FindOpDef(node.domain(), node.op_type());
  if (def == nullptr) return absl::InvalidArgumentError("unsupported operator");
  RETURN_IF_ERROR(ValidateNode(*def, node));
  InputTensors in;
  std::vector<TensorType> in_types;
  in_types.reserve(node.num_inputs());
  for (Value* v : node.inputs()) {
    if (v == nullptr) {
      in.push_back(nullptr);
      continue;
    }
    auto it = env.values.find(v);
    if (it == env.values.end()) {
      return absl::InvalidArgumentError(absl::StrCat("input '", v->name(), "' has not been computed"));
    }
    in.push_back(it->second);
  }
  InputTypes types;
  for (const Tensor* t : in) {
    if (t == nullptr) {
      types.push_back(nullptr);
      continue;
    }
    in_types.push_back(TensorType::Static(t->dtype(), t->dims()));
    types.push_back(&in_types.back());
  }
  // The actual output shapes, computed from the actual input shapes (and the
  // values of small operands, for shape functions that read them).
  std::vector<TensorType> out_types;
  if (NeedsOperandValues(node, in)) {
    ASSIGN_OR_RETURN(out_types, InferWithOperandValues(*def, node, in, types));
  } else {
    ASSIGN_OR_RETURN(out_types, def->infer(node, types));
  }
  std::vector<Tensor> outs;
  for (const TensorType& t : out_types) {
    std::vector<int64_t> dims = t.StaticDims();
    RETURN_IF_ERROR(CheckedElementCount(dims).status());
    outs.emplace_back(t.dtype, std::move(dims));
  }
  RETURN_IF_ERROR(def->eval(node, in, outs));
  for (int i = 0; i < node.num_outputs(); ++i) {
    Tensor& stored = env.results[node.output(i)] = std::move(outs[i]);
    env.values[node.output(i)] = &stored;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::map<std::string, Tensor>> Evaluate(const Graph& graph,
                                                       const std::map<std::string, Tensor>& inputs) {
  Env env;
  std::map<std::string, int64_t> symbols;
  for (const auto& [name, t] : inputs) {
    Value* v = graph.FindValue(name);
    if (v == nullptr || !v->is_graph_input()) {
      return absl::InvalidArgumentError(absl::StrCat("input '", name, "' is not an input of the graph"));
    }
  }
  for (Value* v : graph.inputs()) {
    auto it = inputs.find(v->name());
    if (it == inputs.end()) return absl::InvalidArgumentError(absl::StrCat("input '", v->name(), "' is missing"));
    RETURN_IF_ERROR(CheckInput(*v, it->second, symbols));
    env.values[v] = &it->second;
  }
  for (Value* v : graph.constants()) env.values[v] = &v->constant();
  for (const auto& n : graph.nodes()) {
    absl::Status s = RunNode(*n, env);
    if (!s.ok()) return absl::Status(s.code(), absl::StrCat(NodeContext(*n), s.message()));
  }
  std::map<std::string, Tensor> result;
  for (Value* v : graph.outputs()) {
    auto it = env.values.find(v);
    if (it == env.values.end()) {
      return absl::InvalidArgumentError(absl::StrCat("graph output '", v->name(), "' was not computed"));
    }
    result[v->name()] = *it->second;
  }
  return result;
}

}  // namespace kiln
