// ONNX ModelProto -> Graph: parsing, initializers and Constant nodes as constants,
// input types and --shape bindings, a stable topological order, attribute
// conversion; then shape inference and the verifier.
#include "compiler_core/frontend/onnx_importer.h"

#include <climits>
#include <functional>
#include <queue>
#include <set>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "compiler_core/frontend/graph_proto.h"
#include "compiler_core/frontend/op_registry.h"
#include "compiler_core/frontend/ops/index_ops.h"
#include "compiler_core/frontend/ops/op_helpers.h"
#include "compiler_core/frontend/shape_inference.h"
#include "compiler_core/frontend/verifier.h"
#include "onnx/onnx.pb.h"

namespace kiln {
namespace {

absl::Status Invalid(absl::string_view ctx, absl::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat(ctx, msg));
}

const char* OnnxAttrTypeName(int type) {
  switch (type) {
    case onnx::AttributeProto::GRAPH: return "GRAPH";
    case onnx::AttributeProto::GRAPHS: return "GRAPHS";
    case onnx::AttributeProto::TENSORS: return "TENSORS";
    case onnx::AttributeProto::SPARSE_TENSOR: return "SPARSE_TENSOR";
    case onnx::AttributeProto::SPARSE_TENSORS: return "SPARSE_TENSORS";
    case onnx::AttributeProto::TYPE_PROTO: return "TYPE_PROTO";
    case onnx::AttributeProto::TYPE_PROTOS: return "TYPE_PROTOS";
    default: return "UNDEFINED";
  }
}

// Attribute type for protos that leave `type` unset (old exporters).
int DeduceAttrType(const onnx::AttributeProto& a) {
  if (a.has_f()) return onnx::AttributeProto::FLOAT;
  if (a.has_i()) return onnx::AttributeProto::INT;
  if (a.has_s()) return onnx::AttributeProto::STRING;
  if (a.has_t()) return onnx::AttributeProto::TENSOR;
  if (a.has_g()) return onnx::AttributeProto::GRAPH;
  if (a.floats_size() > 0) return onnx::AttributeProto::FLOATS;
  if (a.ints_size() > 0) return onnx::AttributeProto::INTS;
  if (a.strings_size() > 0) return onnx::AttributeProto::STRINGS;
  if (a.graphs_size() > 0) return onnx::AttributeProto::GRAPHS;
  if (a.tensors_size() > 0) return onnx::AttributeProto::TENSORS;
  return onnx::AttributeProto::UNDEFINED;
}

absl::StatusOr<AttrValue> ConvertAttr(const onnx::AttributeProto& a) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("attribute '", a.name(), "' ", why));
  };
  if (a.has_ref_attr_name()) return bad("refers to a function attribute, which is not supported");
  int type = a.has_type() ? a.type() : DeduceAttrType(a);
  switch (type) {
    case onnx::AttributeProto::FLOAT: return AttrValue(a.f());
    case onnx::AttributeProto::INT: return AttrValue(static_cast<int64_t>(a.i()));
    case onnx::AttributeProto::STRING: return AttrValue(a.s());
    case onnx::AttributeProto::TENSOR: {
      auto t = TensorFromOnnx(a.t());
      if (!t.ok()) return bad(t.status().message());
      return AttrValue(std::move(*t));
    }
    case onnx::AttributeProto::FLOATS: return AttrValue(std::vector<float>(a.floats().begin(), a.floats().end()));
    case onnx::AttributeProto::INTS: return AttrValue(std::vector<int64_t>(a.ints().begin(), a.ints().end()));
    case onnx::AttributeProto::STRINGS:
      return AttrValue(std::vector<std::string>(a.strings().begin(), a.strings().end()));
    default:
      return bad(absl::StrCat("has unsupported type ", OnnxAttrTypeName(type)));
  }
}

absl::StatusOr<std::map<std::string, AttrValue>> ConvertAttrs(const onnx::NodeProto& n) {
  std::map<std::string, AttrValue> attrs;
  for (const onnx::AttributeProto& a : n.attribute()) {
    ASSIGN_OR_RETURN(AttrValue v, ConvertAttr(a));
    if (!attrs.emplace(a.name(), std::move(v)).second) {
      return absl::InvalidArgumentError(absl::StrCat("attribute '", a.name(), "' is given twice"));
    }
  }
  return attrs;
}

// The declared type of a graph input. `has_shape` is false when the model gives
// no shape at all (then a --shape binding must supply the rank).
struct InputDecl {
  TensorType type;
  bool has_shape = true;
};

absl::StatusOr<InputDecl> ConvertInputType(const onnx::ValueInfoProto& vi, int* unknown_counter) {
  const std::string ctx = absl::StrCat("graph input '", vi.name(), "': ");
  if (!vi.has_type() || vi.type().value_case() != onnx::TypeProto::kTensorType) {
    return Invalid(ctx, "only tensor types are supported");
  }
  const onnx::TypeProto::Tensor& tt = vi.type().tensor_type();
  auto dtype = DTypeFromOnnx(tt.elem_type());
  if (!dtype.ok()) return Invalid(ctx, dtype.status().message());
  InputDecl decl;
  decl.type.dtype = *dtype;
  decl.type.known = true;
  decl.has_shape = tt.has_shape();
  for (const onnx::TensorShapeProto::Dimension& d : tt.shape().dim()) {
    switch (d.value_case()) {
      case onnx::TensorShapeProto::Dimension::kDimValue:
        if (d.dim_value() < 0) return Invalid(ctx, absl::StrCat("negative dimension ", d.dim_value()));
        decl.type.dims.push_back(Dim::Static(d.dim_value()));
        break;
      case onnx::TensorShapeProto::Dimension::kDimParam:
        if (!d.dim_param().empty()) {
          decl.type.dims.push_back(Dim::Symbol(d.dim_param()));
          break;
        }
        [[fallthrough]];
      case onnx::TensorShapeProto::Dimension::VALUE_NOT_SET:
        // An anonymous unknown dim gets a fresh symbol so that it equals no other.
        decl.type.dims.push_back(Dim::Symbol(absl::StrCat("unk__", (*unknown_counter)++)));
        break;
    }
  }
  return decl;
}

// A value given for graph input `name` agrees with its declaration.
absl::Status CheckInputValue(const std::string& name, const InputDecl& decl, const Tensor& value) {
  const std::string ctx = absl::StrCat("graph input '", name, "': ");
  if (value.dtype() != decl.type.dtype) {
    return Invalid(ctx, absl::StrCat("the value given is ", DTypeName(value.dtype()), ", the model declares ",
                                     decl.type.ToString()));
  }
  if (!decl.has_shape) return absl::OkStatus();
  bool agrees = decl.type.rank() == value.rank();
  for (int64_t d = 0; agrees && d < value.rank(); ++d) {
    agrees = !decl.type.dims[d].is_static() || decl.type.dims[d].value == value.dims()[d];
  }
  if (!agrees) {
    return Invalid(ctx, absl::StrCat("the value given is ", value.DebugString(0), ", the model declares ",
                                     decl.type.ToString()));
  }
  return absl::OkStatus();
}

// Applies --shape bindings: fixes the bound inputs' dims, and binds each
// symbol they had wherever else it occurs.
absl::Status BindInputShapes(Graph& graph, const std::map<std::string, InputDecl>& decls,
                             const ImportOptions& options) {
  std::map<std::string, int64_t> symbols;
  for (const auto& [name, dims] : options.input_shapes) {
    const std::string ctx = absl::StrCat("--shape ", name, ": ");
    Value* v = graph.FindValue(name);
    if (v == nullptr || !v->is_graph_input()) return Invalid(ctx, "not an input of the graph");
    RETURN_IF_ERROR(CheckedElementCount(dims).status());
    const InputDecl& decl = decls.at(name);
    TensorType t = v->type();
    if (decl.has_shape) {
      if (t.rank() != static_cast<int64_t>(dims.size())) {
        return Invalid(ctx, absl::StrCat("rank ", dims.size(), " differs from the model's ", t.ToString()));
      }
      for (size_t i = 0; i < dims.size(); ++i) {
        const Dim& d = t.dims[i];
        if (d.is_static() && d.value != dims[i]) {
          return Invalid(ctx, absl::StrCat("dimension ", i, " is ", d.value, " in the model (", t.ToString(),
                                           "), not ", dims[i]));
        }
        if (!d.is_static()) {
          auto [it, inserted] = symbols.emplace(d.symbol, dims[i]);
          if (!inserted && it->second != dims[i]) {
            return Invalid(ctx, absl::StrCat("dimension ", i, " binds '", d.symbol, "' to ", dims[i],
                                             " but another binding gave ", it->second));
          }
        }
      }
    }
    v->set_type(TensorType::Static(t.dtype, dims));
  }
  for (Value* v : graph.inputs()) {
    TensorType t = v->type();
    if (!decls.at(v->name()).has_shape && !options.input_shapes.count(v->name())) {
      return absl::InvalidArgumentError(
          absl::StrCat("graph input '", v->name(), "' has no shape in the model: bind one with --shape"));
    }
    for (Dim& d : t.dims) {
      auto it = d.is_static() ? symbols.end() : symbols.find(d.symbol);
      if (it != symbols.end()) d = Dim::Static(it->second);
    }
    v->set_type(std::move(t));
  }
  return absl::OkStatus();
}

std::string NodeCtx(const std::string& name, const onnx::NodeProto& n) {
  return absl::StrCat("node '", name, "' (", QualifiedOpName(n.domain(), n.op_type()), "): ");
}


// ---- Canonical operand forms (see onnx_importer.h) ----

// An attribute of older opsets that newer opsets take as input `input`.
struct AttrToInput {
  const char* op_type;
  int64_t below_opset;  // the attribute form applies to opsets < this
  const char* attr;
  int input;
};

constexpr AttrToInput kAttrToInput[] = {
    {"Pad", 11, "pads", 1},          {"Pad", 11, "value", 2},
    {"Squeeze", 13, "axes", 1},      {"Unsqueeze", 13, "axes", 1},
    {"Split", 13, "split", 1},       {"Slice", 10, "starts", 1},
    {"Slice", 10, "ends", 2},        {"Slice", 10, "axes", 3},
    {"Clip", 11, "min", 1},          {"Clip", 11, "max", 2},
    {"ReduceSum", 13, "axes", 1},    {"ReduceMean", 18, "axes", 1},
    {"ReduceMax", 18, "axes", 1},    {"ReduceMin", 18, "axes", 1},
    {"ReduceProd", 18, "axes", 1},   {"ReduceL1", 18, "axes", 1},
    {"ReduceL2", 18, "axes", 1},     {"ReduceLogSum", 18, "axes", 1},
    {"ReduceLogSumExp", 18, "axes", 1}, {"ReduceSumSquare", 18, "axes", 1},
    {"TopK", 10, "k", 1},            {"Upsample", 9, "scales", 1},
    {"Dropout", 12, "ratio", 1},     {"Reshape", 5, "shape", 1},
};

// The binary operators whose opset < 7 versions take `broadcast` and `axis`.
bool HasLegacyBroadcast(const std::string& op_type) {
  static const char* const kOps[] = {"Add", "Sub", "Mul", "Div", "Pow", "And",
                                     "Or", "Xor", "Equal", "Greater", "Less"};
  for (const char* op : kOps) {
    if (op_type == op) return true;
  }
  return false;
}

// Attribute forms of opsets 1-8 that a newer form expresses (before operands
// are canonicalized). `inputs` are the node's, for PRelu's slope rank.
absl::Status CanonicalizeLegacyAttributes(int64_t opset, const std::string& op_type,
                                          const std::vector<Value*>& inputs,
                                          std::map<std::string, AttrValue>& attrs) {
  auto int_attr = [&](const char* name, int64_t def) {
    auto it = attrs.find(name);
    const int64_t* v = it == attrs.end() ? nullptr : std::get_if<int64_t>(&it->second);
    return v == nullptr ? def : *v;
  };
  if (opset < 7) {
    attrs.erase("consumed_inputs");  // a buffer-reuse hint of opsets 1-5, no semantics
    if (HasLegacyBroadcast(op_type)) {
      // broadcast=1 with `axis`: input 1 aligned at `axis`; without `axis`
      // (or broadcast=0, equal shapes) the numpy broadcast of opset 7 is the same.
      const bool broadcast = int_attr("broadcast", 0) != 0;
      if (broadcast && attrs.count("axis")) attrs[ops::kBroadcastAxisAttr] = int_attr("axis", 0);
      attrs.erase("broadcast");
      attrs.erase("axis");
    }
    if (op_type == "Gemm") attrs.erase("broadcast");  // Gemm-7 broadcasts C unidirectionally
    if (op_type == "Dropout" || op_type == "BatchNormalization") attrs.erase("is_test");
    if (op_type == "PRelu" && inputs.size() > 1 && inputs[1] != nullptr && inputs[1]->type().known &&
        inputs[1]->type().dims.size() == 1) {
      attrs[ops::kBroadcastAxisAttr] = int64_t{1};  // a [C] slope is per channel
    }
    if (op_type == "Pad" && attrs.count("paddings")) {  // Pad-1's name for `pads`
      attrs["pads"] = attrs["paddings"];
      attrs.erase("paddings");
    }
  }
  if (opset < 9 && op_type == "BatchNormalization") {
    if (int_attr("spatial", 1) == 0) {
      return absl::InvalidArgumentError("attribute 'spatial' 0 (statistics per activation) is not supported");
    }
    attrs.erase("spatial");
  }
  return absl::OkStatus();
}

// The operand tensor an attribute becomes: ints -> i64[n] (TopK's k -> i64[1]),
// float -> f32 scalar, floats -> f32[n].
absl::StatusOr<Tensor> AttrAsOperand(const std::string& op_type, const std::string& name, const AttrValue& v) {
  // An empty list is an empty tensor (no copy from an empty vector's null data()).
  if (const auto* ints = std::get_if<std::vector<int64_t>>(&v)) {
    if (ints->empty()) return Tensor(DType::kInt64, {0});
    return Tensor::FromVector(DType::kInt64, {static_cast<int64_t>(ints->size())}, *ints);
  }
  if (const auto* i = std::get_if<int64_t>(&v)) {
    return Tensor::FromVector(DType::kInt64, {1}, std::vector<int64_t>{*i});
  }
  if (const auto* f = std::get_if<float>(&v)) {
    return Tensor::FromVector(DType::kFloat32, {}, std::vector<float>{*f});
  }
  if (const auto* fs = std::get_if<std::vector<float>>(&v)) {
    if (fs->empty()) return Tensor(DType::kFloat32, {0});
    return Tensor::FromVector(DType::kFloat32, {static_cast<int64_t>(fs->size())}, *fs);
  }
  return absl::InvalidArgumentError(absl::StrCat("attribute '", name, "' of ", op_type, " has an unexpected kind"));
}

// Rewrites one node into its canonical form: attribute operands of older
// opsets become constant inputs, Resize-10's scales moves to input 2, and
// Softmax-family nodes of opset < 13 remember the opset.
absl::Status CanonicalizeOperands(Graph& graph, int64_t opset, const std::string& node_name,
                                  const std::string& op_type, std::vector<Value*>& inputs,
                                  std::map<std::string, AttrValue>& attrs) {
  RETURN_IF_ERROR(CanonicalizeLegacyAttributes(opset, op_type, inputs, attrs));
  bool rewritten = false;
  for (const AttrToInput& r : kAttrToInput) {
    if (op_type != r.op_type || opset >= r.below_opset) continue;
    auto it = attrs.find(r.attr);
    if (it == attrs.end()) continue;
    if (static_cast<int>(inputs.size()) > r.input && inputs[r.input] != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("attribute '", r.attr, "' and input ", r.input, " are both given"));
    }
    ASSIGN_OR_RETURN(Tensor t, AttrAsOperand(op_type, r.attr, it->second));
    ASSIGN_OR_RETURN(Value * c, graph.AddConstant(graph.UniqueValueName(absl::StrCat(node_name, "_", r.attr)),
                                                  std::move(t)));
    if (static_cast<int>(inputs.size()) <= r.input) inputs.resize(r.input + 1, nullptr);
    inputs[r.input] = c;
    attrs.erase(it);
    rewritten = true;
  }
  while (rewritten && !inputs.empty() && inputs.back() == nullptr) inputs.pop_back();
  if (op_type == "Resize" && opset < 11) {
    // Resize-10 is Resize-11 with asymmetric coordinates and floor rounding
    // (what ONNX's version converter writes).
    if (inputs.size() == 2) inputs = {inputs[0], nullptr, inputs[1]};
    attrs["coordinate_transformation_mode"] = std::string("asymmetric");
    auto mode = attrs.find("mode");
    if (mode == attrs.end() || AttrValueToString(mode->second) == "\"nearest\"") {
      attrs["nearest_mode"] = std::string("floor");
    }
  }
  if ((op_type == "Softmax" || op_type == "LogSoftmax" || op_type == "Hardmax") && opset < 13) {
    attrs[kOpsetAttr] = opset;
  }
  return absl::OkStatus();
}

// Adds `n` in canonical form: Split becomes one single-output Split per output.
absl::Status AddCanonicalNode(Graph& graph, int64_t opset, const std::string& name, const onnx::NodeProto& n,
                              std::vector<Value*> inputs, std::map<std::string, AttrValue> attrs,
                              std::vector<Value*> outs, const std::string& domain) {
  const std::string ctx = NodeCtx(name, n);
  if (!domain.empty()) {
    return Invalid(ctx, absl::StrCat("unsupported domain '", domain, "'"));
  }
  absl::Status s = CanonicalizeOperands(graph, opset, name, n.op_type(), inputs, attrs);
  if (!s.ok()) return Invalid(ctx, s.message());
  if (n.op_type() != "Split") {
    return graph.AddNode(n.op_type(), name, std::move(inputs), std::move(outs), std::move(attrs), domain).status();
  }
  const int64_t count = static_cast<int64_t>(outs.size());
  auto num = attrs.find("num_outputs");
  if (num != attrs.end()) {
    const int64_t* v = std::get_if<int64_t>(&num->second);
    if (v == nullptr || *v != count) {
      return Invalid(ctx, absl::StrCat("attribute 'num_outputs' does not match the ", count, " outputs"));
    }
    attrs.erase(num);
  }
  for (int64_t k = 0; k < count; ++k) {
    std::map<std::string, AttrValue> a = attrs;
    a[ops::kSplitOutputIndexAttr] = k;
    a[ops::kSplitNumOutputsAttr] = count;
    std::string part = count == 1 ? name : absl::StrCat(name, "#", k);
    RETURN_IF_ERROR(graph.AddNode("Split", part, inputs, {outs[k]}, std::move(a), domain).status());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Graph>> ImportGraph(const onnx::GraphProto& gp, int64_t opset,
                                                   const ImportOptions& options) {
  auto graph = std::make_unique<Graph>();
  graph->set_name(gp.name().empty() ? "main" : gp.name());
  graph->set_opset_version(opset);

  if (gp.sparse_initializer_size() > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("sparse initializer '", gp.sparse_initializer(0).values().name(), "' is not supported"));
  }
  for (const onnx::TensorProto& init : gp.initializer()) {
    if (init.name().empty()) return absl::InvalidArgumentError("initializer with an empty name");
    ASSIGN_OR_RETURN(Tensor t, TensorFromOnnx(init));
    if (graph->FindValue(init.name())) {
      return absl::InvalidArgumentError(absl::StrCat("initializer '", init.name(), "' is defined twice"));
    }
    RETURN_IF_ERROR(graph->AddConstant(init.name(), std::move(t)).status());
  }

  std::map<std::string, InputDecl> decls;
  int unknown_counter = 0;
  for (const onnx::ValueInfoProto& vi : gp.input()) {
    if (vi.name().empty()) return absl::InvalidArgumentError("graph input with an empty name");
    Value* existing = graph->FindValue(vi.name());
    if (existing && existing->is_constant()) continue;  // an initializer's declaration: stays a constant
    if (existing) return absl::InvalidArgumentError(absl::StrCat("graph input '", vi.name(), "' is listed twice"));
    ASSIGN_OR_RETURN(InputDecl decl, ConvertInputType(vi, &unknown_counter));
    if (auto value = options.input_values.find(vi.name()); value != options.input_values.end()) {
      RETURN_IF_ERROR(CheckInputValue(vi.name(), decl, value->second));
      RETURN_IF_ERROR(graph->AddConstant(vi.name(), value->second).status());
      continue;
    }
    RETURN_IF_ERROR(graph->AddInput(vi.name(), decl.type).status());
    decls[vi.name()] = std::move(decl);
  }
  RETURN_IF_ERROR(BindInputShapes(*graph, decls, options));

  // Node names (generated for unnamed nodes) and outputs: Constant nodes become
  // constants, other outputs become values so names resolve in any order.
  const int num_nodes = gp.node_size();
  std::vector<std::string> names(num_nodes);
  std::vector<bool> is_constant(num_nodes, false);
  for (int i = 0; i < num_nodes; ++i) {
    const onnx::NodeProto& n = gp.node(i);
    names[i] = n.name().empty() ? absl::StrCat(n.op_type(), "_", i) : n.name();
    const std::string ctx = NodeCtx(names[i], n);
    int num_outputs = n.output_size();
    while (num_outputs > 0 && n.output(num_outputs - 1).empty()) --num_outputs;  // omitted trailing outputs
    if (num_outputs == 0) return Invalid(ctx, "node has no outputs");
    for (int o = 0; o < num_outputs; ++o) {
      if (n.output(o).empty()) continue;  // an omitted output before a present one: named below
      if (graph->FindValue(n.output(o))) {
        return Invalid(ctx, absl::StrCat("output '", n.output(o), "' is already defined"));
      }
    }
    if (IsDefaultDomain(n.domain()) && n.op_type() == "Constant") {
      is_constant[i] = true;
      if (n.input_size() != 0 || num_outputs != 1) return Invalid(ctx, "expects 0 inputs and 1 output");
      auto attrs = ConvertAttrs(n);
      if (!attrs.ok()) return Invalid(ctx, attrs.status().message());
      auto t = ConstantValueFromAttrs(*attrs);
      if (!t.ok()) return Invalid(ctx, t.status().message());
      RETURN_IF_ERROR(graph->AddConstant(n.output(0), std::move(*t)).status());
      continue;
    }
    for (int o = 0; o < num_outputs; ++o) {
      if (!n.output(o).empty()) RETURN_IF_ERROR(graph->AddValue(n.output(o)).status());
    }
  }
  // Omitted outputs followed by present ones (LSTM's Y when only Y_h is
  // wanted) get a fresh name once every named value exists, so nothing can
  // collide with it; nothing reads them.
  std::vector<std::vector<Value*>> node_outputs(num_nodes);
  for (int i = 0; i < num_nodes; ++i) {
    const onnx::NodeProto& n = gp.node(i);
    if (is_constant[i]) continue;
    int num_outputs = n.output_size();
    while (num_outputs > 0 && n.output(num_outputs - 1).empty()) --num_outputs;
    for (int o = 0; o < num_outputs; ++o) {
      if (!n.output(o).empty()) {
        node_outputs[i].push_back(graph->FindValue(n.output(o)));
        continue;
      }
      ASSIGN_OR_RETURN(Value * unused,
                       graph->AddValue(graph->UniqueValueName(absl::StrCat(names[i], "_omitted_output", o))));
      node_outputs[i].push_back(unused);
    }
  }

  // Resolve inputs and order the nodes (Kahn's algorithm, ties by model order).
  std::unordered_map<std::string, int> producer_index;
  for (int i = 0; i < num_nodes; ++i) {
    if (is_constant[i]) continue;
    for (const std::string& o : gp.node(i).output()) {
      if (!o.empty()) producer_index[o] = i;
    }
  }
  std::vector<std::vector<Value*>> inputs(num_nodes);
  std::vector<int> pending(num_nodes, 0);
  std::vector<std::vector<int>> dependents(num_nodes);
  for (int i = 0; i < num_nodes; ++i) {
    if (is_constant[i]) continue;
    const onnx::NodeProto& n = gp.node(i);
    std::set<int> deps;
    for (const std::string& in : n.input()) {
      if (in.empty()) {
        inputs[i].push_back(nullptr);
        continue;
      }
      Value* v = graph->FindValue(in);
      if (v == nullptr) {
        return Invalid(NodeCtx(names[i], n),
                       absl::StrCat("input '", in, "' is not defined by any node, input or initializer"));
      }
      inputs[i].push_back(v);
      auto it = producer_index.find(in);
      if (it != producer_index.end()) deps.insert(it->second);
    }
    pending[i] = static_cast<int>(deps.size());
    for (int d : deps) dependents[d].push_back(i);
  }
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int i = 0; i < num_nodes; ++i) {
    if (!is_constant[i] && pending[i] == 0) ready.push(i);
  }
  std::vector<int> order;
  while (!ready.empty()) {
    int i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int d : dependents[i]) {
      if (--pending[d] == 0) ready.push(d);
    }
  }
  for (int i = 0; i < num_nodes; ++i) {
    if (!is_constant[i] && pending[i] > 0) {
      return Invalid(NodeCtx(names[i], gp.node(i)), "node is part of a cycle");
    }
  }

  // Every operator the table does not have, named at once.
  std::vector<std::string> unsupported;
  for (int i : order) {
    const onnx::NodeProto& n = gp.node(i);
    if (FindOpDef(n.domain(), n.op_type()) == nullptr || n.domain() == kKilnDomain) {
      unsupported.push_back(NodeCtx(names[i], n).substr(0, NodeCtx(names[i], n).size() - 2));
    }
  }
  if (!unsupported.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("unsupported operator", unsupported.size() > 1 ? "s" : "", ": ",
                                                   absl::StrJoin(unsupported, ", "),
                                                   " (the supported ones: docs/operators.md)"));
  }

  for (int i : order) {
    const onnx::NodeProto& n = gp.node(i);
    const std::string ctx = NodeCtx(names[i], n);
    auto attrs = ConvertAttrs(n);
    if (!attrs.ok()) return Invalid(ctx, attrs.status().message());
    std::vector<Value*> outs = std::move(node_outputs[i]);
    std::string domain = IsDefaultDomain(n.domain()) ? "" : n.domain();
    RETURN_IF_ERROR(AddCanonicalNode(*graph, opset, names[i], n, std::move(inputs[i]), std::move(*attrs),
                                     std::move(outs), domain));
  }

  for (const onnx::ValueInfoProto& vi : gp.output()) {
    Value* v = graph->FindValue(vi.name());
    if (v == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("graph output '", vi.name(), "' is not defined by any node, input or initializer"));
    }
    graph->AddOutput(v);
  }
  return graph;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Graph>> ImportOnnxModel(std::string_view model_bytes,
                                                      const ImportOptions& options) {
  onnx::ModelProto model;
  if (model_bytes.size() > static_cast<size_t>(INT_MAX)) {
    return absl::InvalidArgumentError("malformed ONNX model: larger than 2 GiB (external data is not supported)");
  }
  if (!model.ParseFromArray(model_bytes.data(), static_cast<int>(model_bytes.size()))) {
    return absl::InvalidArgumentError("malformed ONNX model: bytes do not parse as onnx.ModelProto");
  }
  if (!model.has_graph()) return absl::InvalidArgumentError("malformed ONNX model: no graph");
  int64_t opset = -1;
  for (const onnx::OperatorSetIdProto& o : model.opset_import()) {
    if (IsDefaultDomain(o.domain())) opset = o.version();
  }
  if (opset < 1) {
    return absl::InvalidArgumentError("malformed ONNX model: no opset_import for the default ONNX domain");
  }
  if (opset < kMinOnnxOpset || opset > kMaxOnnxOpset) {
    return absl::InvalidArgumentError(absl::StrCat("ONNX opset ", opset, " is not supported (supported: ",
                                                   kMinOnnxOpset, " to ", kMaxOnnxOpset, ")"));
  }
  if (model.ir_version() < 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("ONNX IR version ", model.ir_version(), " is not supported (3 or later)"));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Graph> graph, ImportGraph(model.graph(), opset, options));
  RETURN_IF_ERROR(VerifyGraphStructure(*graph));
  RETURN_IF_ERROR(InferShapes(*graph));
  RETURN_IF_ERROR(VerifyGraph(*graph));
  return graph;
}

}  // namespace kiln
