// Graph <-> kiln.v1.Graph, Tensor <-> kiln.v1.Tensor, onnx.TensorProto -> Tensor.
#include "compiler_core/frontend/graph_proto.h"

#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compiler_core/frontend/op_registry.h"
#include "compiler_core/frontend/shape_inference.h"
#include "compiler_core/frontend/verifier.h"

namespace kiln {
namespace {

// ---------------------------------------------------------------------------
// Types.

void TypeToProto(const TensorType& t, kiln::v1::TensorType* p) {
  p->set_dtype(t.known ? static_cast<kiln::v1::DataType>(static_cast<int>(t.dtype))
                       : kiln::v1::DATA_TYPE_UNSPECIFIED);
  for (const Dim& d : t.dims) {
    kiln::v1::Dim* pd = p->add_dims();
    if (!d.symbol.empty()) {
      pd->set_symbol(d.symbol);
    } else if (d.value >= 0) {
      pd->set_value(d.value);
    }  // neither: an unknown, unnamed dim
  }
}

absl::StatusOr<TensorType> TypeFromProto(const kiln::v1::TensorType& p, const std::string& what) {
  TensorType t;
  if (p.dtype() == kiln::v1::DATA_TYPE_UNSPECIFIED) {
    if (p.dims_size() > 0) return absl::InvalidArgumentError(absl::StrCat(what, ": dims given without a dtype"));
    return t;  // unknown
  }
  if (!kiln::v1::DataType_IsValid(p.dtype())) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": invalid dtype ", p.dtype()));
  }
  t.dtype = static_cast<DType>(static_cast<int>(p.dtype()));
  t.known = true;
  for (const kiln::v1::Dim& pd : p.dims()) {
    switch (pd.kind_case()) {
      case kiln::v1::Dim::kValue:
        if (pd.value() < 0) {
          return absl::InvalidArgumentError(absl::StrCat(what, ": negative dimension ", pd.value()));
        }
        t.dims.push_back(Dim::Static(pd.value()));
        break;
      case kiln::v1::Dim::kSymbol:
        if (pd.symbol().empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": empty dimension symbol"));
        t.dims.push_back(Dim::Symbol(pd.symbol()));
        break;
      case kiln::v1::Dim::KIND_NOT_SET:
        t.dims.push_back(Dim{});
        break;
    }
  }
  return t;
}

// ---------------------------------------------------------------------------
// Attributes.

void AttrToProto(const std::string& name, const AttrValue& v, kiln::v1::Attribute* p) {
  p->set_name(name);
  struct Visitor {
    kiln::v1::Attribute* p;
    void operator()(int64_t i) const { p->set_i(i); }
    void operator()(float f) const { p->set_f(f); }
    void operator()(const std::string& s) const { p->set_s(s); }
    void operator()(const Tensor& t) const { TensorToProto(t, p->mutable_t()); }
    void operator()(const std::vector<int64_t>& v) const {
      auto* l = p->mutable_ints();
      for (int64_t x : v) l->add_values(x);
    }
    void operator()(const std::vector<float>& v) const {
      auto* l = p->mutable_floats();
      for (float x : v) l->add_values(x);
    }
    void operator()(const std::vector<std::string>& v) const {
      auto* l = p->mutable_strings();
      for (const std::string& x : v) l->add_values(x);
    }
  };
  std::visit(Visitor{p}, v);
}

absl::StatusOr<AttrValue> AttrFromProto(const kiln::v1::Attribute& p) {
  switch (p.value_case()) {
    case kiln::v1::Attribute::kI: return AttrValue(p.i());
    case kiln::v1::Attribute::kF: return AttrValue(p.f());
    case kiln::v1::Attribute::kS: return AttrValue(p.s());
    case kiln::v1::Attribute::kT: {
      ASSIGN_OR_RETURN(Tensor t, TensorFromProto(p.t()));
      return AttrValue(std::move(t));
    }
    case kiln::v1::Attribute::kInts:
      return AttrValue(std::vector<int64_t>(p.ints().values().begin(), p.ints().values().end()));
    case kiln::v1::Attribute::kFloats:
      return AttrValue(std::vector<float>(p.floats().values().begin(), p.floats().values().end()));
    case kiln::v1::Attribute::kStrings:
      return AttrValue(std::vector<std::string>(p.strings().values().begin(), p.strings().values().end()));
    case kiln::v1::Attribute::VALUE_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat("attribute '", p.name(), "' has no value"));
}

// Copies `count` elements of a repeated ONNX field into a tensor of element type E.
template <typename E, typename Field>
Tensor FromField(DType dtype, std::vector<int64_t> dims, const Field& field) {
  Tensor t(dtype, std::move(dims));
  E* out = t.data<E>();
  int64_t i = 0;
  for (const auto& x : field) out[i++] = static_cast<E>(x);
  return t;
}

}  // namespace

// ---------------------------------------------------------------------------
// Tensors.

void TensorToProto(const Tensor& t, kiln::v1::Tensor* proto) {
  proto->set_dtype(static_cast<kiln::v1::DataType>(static_cast<int>(t.dtype())));
  for (int64_t d : t.dims()) proto->add_dims(d);
  if (!t.empty_storage()) proto->set_data(std::string(t.bytes()));
}

absl::StatusOr<Tensor> TensorFromProto(const kiln::v1::Tensor& proto) {
  const std::string what = absl::StrCat("tensor '", proto.name(), "'");
  if (proto.dtype() == kiln::v1::DATA_TYPE_UNSPECIFIED || !kiln::v1::DataType_IsValid(proto.dtype())) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": invalid dtype ", proto.dtype()));
  }
  DType dtype = static_cast<DType>(static_cast<int>(proto.dtype()));
  std::vector<int64_t> dims(proto.dims().begin(), proto.dims().end());
  auto count = CheckedElementCount(dims);
  if (!count.ok()) return absl::InvalidArgumentError(absl::StrCat(what, ": ", count.status().message()));
  const int64_t expected = *count * DTypeSize(dtype);
  if (static_cast<int64_t>(proto.data().size()) != expected) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": data has ", proto.data().size(), " bytes, expected ",
                                                   expected));
  }
  return Tensor::FromBytes(dtype, std::move(dims), proto.data());
}

absl::StatusOr<Tensor> TensorFromOnnx(const onnx::TensorProto& proto) {
  const std::string what = absl::StrCat("tensor '", proto.name(), "'");
  auto err = [&](absl::string_view msg) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", msg));
  };
  if (proto.data_location() == onnx::TensorProto::EXTERNAL || proto.external_data_size() > 0) {
    return err("external data is not supported");
  }
  if (proto.has_segment()) return err("segmented tensors are not supported");
  auto dtype_or = DTypeFromOnnx(proto.data_type());
  if (!dtype_or.ok()) return err(dtype_or.status().message());
  const DType dtype = *dtype_or;
  std::vector<int64_t> dims(proto.dims().begin(), proto.dims().end());
  auto count_or = CheckedElementCount(dims);
  if (!count_or.ok()) return err(count_or.status().message());
  const int64_t n = *count_or;

  if (proto.has_raw_data()) {
    const int64_t expected = n * DTypeSize(dtype);
    if (static_cast<int64_t>(proto.raw_data().size()) != expected) {
      return err(absl::StrCat("raw_data has ", proto.raw_data().size(), " bytes, expected ", expected));
    }
    return Tensor::FromBytes(dtype, std::move(dims), proto.raw_data());  // little-endian host assumed
  }
  auto check_count = [&](int64_t have, const char* field) -> absl::Status {
    if (have != n) return err(absl::StrCat(field, " has ", have, " elements, expected ", n));
    return absl::OkStatus();
  };
  switch (dtype) {
    case DType::kFloat32:
      RETURN_IF_ERROR(check_count(proto.float_data_size(), "float_data"));
      return FromField<float>(dtype, std::move(dims), proto.float_data());
    case DType::kFloat64:
      RETURN_IF_ERROR(check_count(proto.double_data_size(), "double_data"));
      return FromField<double>(dtype, std::move(dims), proto.double_data());
    case DType::kInt64:
      RETURN_IF_ERROR(check_count(proto.int64_data_size(), "int64_data"));
      return FromField<int64_t>(dtype, std::move(dims), proto.int64_data());
    case DType::kInt32:
      RETURN_IF_ERROR(check_count(proto.int32_data_size(), "int32_data"));
      return FromField<int32_t>(dtype, std::move(dims), proto.int32_data());
    case DType::kInt16:
      RETURN_IF_ERROR(check_count(proto.int32_data_size(), "int32_data"));
      return FromField<int16_t>(dtype, std::move(dims), proto.int32_data());
    case DType::kInt8:
      RETURN_IF_ERROR(check_count(proto.int32_data_size(), "int32_data"));
      return FromField<int8_t>(dtype, std::move(dims), proto.int32_data());
    case DType::kUInt8:
    case DType::kBool:
      RETURN_IF_ERROR(check_count(proto.int32_data_size(), "int32_data"));
      return FromField<uint8_t>(dtype, std::move(dims), proto.int32_data());
    case DType::kFloat16:   // IEEE half bit patterns in int32_data
    case DType::kBFloat16:  // bf16 bit patterns in int32_data
    case DType::kUInt16:
      RETURN_IF_ERROR(check_count(proto.int32_data_size(), "int32_data"));
      return FromField<uint16_t>(dtype, std::move(dims), proto.int32_data());
    case DType::kUInt32:
      RETURN_IF_ERROR(check_count(proto.uint64_data_size(), "uint64_data"));
      return FromField<uint32_t>(dtype, std::move(dims), proto.uint64_data());
    case DType::kUInt64:
      RETURN_IF_ERROR(check_count(proto.uint64_data_size(), "uint64_data"));
      return FromField<uint64_t>(dtype, std::move(dims), proto.uint64_data());
    case DType::kUnknown:
      break;
  }
  return err("unsupported element type");
}

// ---------------------------------------------------------------------------
// Graphs.

void GraphToProto(const Graph& graph, kiln::v1::Graph* proto) {
  proto->Clear();
  proto->set_name(graph.name());
  proto->set_opset_version(graph.opset_version());
  for (Value* v : graph.inputs()) {
    kiln::v1::ValueInfo* vi = proto->add_inputs();
    vi->set_name(v->name());
    TypeToProto(v->type(), vi->mutable_type());
  }
  for (Value* v : graph.outputs()) {
    kiln::v1::ValueInfo* vi = proto->add_outputs();
    vi->set_name(v->name());
    TypeToProto(v->type(), vi->mutable_type());
  }
  for (Value* c : graph.constants()) {
    kiln::v1::Tensor* t = proto->add_initializers();
    TensorToProto(c->constant(), t);
    t->set_name(c->name());
  }
  for (const auto& n : graph.nodes()) {
    kiln::v1::Node* pn = proto->add_nodes();
    pn->set_name(n->name());
    pn->set_op_type(n->op_type());
    pn->set_domain(n->domain());
    for (Value* in : n->inputs()) pn->add_inputs(in ? in->name() : "");
    for (Value* out : n->outputs()) {
      pn->add_outputs(out->name());
      kiln::v1::ValueInfo* vi = proto->add_value_info();
      vi->set_name(out->name());
      TypeToProto(out->type(), vi->mutable_type());
    }
    for (const auto& [name, value] : n->attrs()) AttrToProto(name, value, pn->add_attributes());
  }
}

absl::StatusOr<std::unique_ptr<Graph>> GraphFromProto(const kiln::v1::Graph& proto) {
  auto graph = std::make_unique<Graph>();
  graph->set_name(proto.name().empty() ? "main" : proto.name());
  graph->set_opset_version(proto.opset_version());
  for (const kiln::v1::ValueInfo& vi : proto.inputs()) {
    ASSIGN_OR_RETURN(TensorType t, TypeFromProto(vi.type(), absl::StrCat("graph input '", vi.name(), "'")));
    auto v = graph->AddInput(vi.name(), std::move(t));
    if (!v.ok()) return absl::InvalidArgumentError(absl::StrCat("graph input: ", v.status().message()));
  }
  for (const kiln::v1::Tensor& init : proto.initializers()) {
    ASSIGN_OR_RETURN(Tensor t, TensorFromProto(init));
    auto v = graph->AddConstant(init.name(), std::move(t));
    if (!v.ok()) return absl::InvalidArgumentError(absl::StrCat("initializer: ", v.status().message()));
  }
  // Declared types of node outputs; checked against the inferred ones below.
  std::vector<std::pair<std::string, TensorType>> declared;
  for (const kiln::v1::ValueInfo& vi : proto.value_info()) {
    ASSIGN_OR_RETURN(TensorType t, TypeFromProto(vi.type(), absl::StrCat("value_info '", vi.name(), "'")));
    declared.emplace_back(vi.name(), std::move(t));
  }
  // Node outputs first, so that an out-of-order reference is reported as such by the verifier.
  for (const kiln::v1::Node& pn : proto.nodes()) {
    for (const std::string& out : pn.outputs()) {
      auto v = graph->AddValue(out);
      if (!v.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("node '", pn.name(), "' (", pn.op_type(), "): output ",
                                                       v.status().message()));
      }
    }
  }
  for (const kiln::v1::Node& pn : proto.nodes()) {
    const std::string ctx = absl::StrCat("node '", pn.name(), "' (", pn.op_type(), "): ");
    std::vector<Value*> ins, outs;
    for (const std::string& in : pn.inputs()) {
      if (in.empty()) {
        ins.push_back(nullptr);
        continue;
      }
      Value* v = graph->FindValue(in);
      if (v == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat(ctx, "input '", in, "' is not defined by any node, input or initializer"));
      }
      ins.push_back(v);
    }
    for (const std::string& out : pn.outputs()) outs.push_back(graph->FindValue(out));
    std::map<std::string, AttrValue> attrs;
    for (const kiln::v1::Attribute& pa : pn.attributes()) {
      auto a = AttrFromProto(pa);
      if (!a.ok()) return absl::InvalidArgumentError(absl::StrCat(ctx, a.status().message()));
      if (!attrs.emplace(pa.name(), std::move(*a)).second) {
        return absl::InvalidArgumentError(absl::StrCat(ctx, "attribute '", pa.name(), "' is given twice"));
      }
    }
    auto n = graph->AddNode(pn.op_type(), pn.name(), std::move(ins), std::move(outs), std::move(attrs),
                            pn.domain());
    if (!n.ok()) return n.status();
  }
  for (const kiln::v1::ValueInfo& vi : proto.outputs()) {
    Value* v = graph->FindValue(vi.name());
    if (v == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("graph output '", vi.name(), "' is not defined by any node, input or initializer"));
    }
    graph->AddOutput(v);
    if (v->producer() != nullptr) {
      ASSIGN_OR_RETURN(TensorType t, TypeFromProto(vi.type(), absl::StrCat("graph output '", vi.name(), "'")));
      if (t.known) declared.emplace_back(vi.name(), std::move(t));
    }
  }
  RETURN_IF_ERROR(VerifyGraphStructure(*graph));
  RETURN_IF_ERROR(InferShapes(*graph));
  for (const auto& [name, t] : declared) {
    Value* v = graph->FindValue(name);
    if (v == nullptr || v->producer() == nullptr || !t.known) continue;
    if (!(v->type() == t)) {
      return absl::InvalidArgumentError(absl::StrCat(NodeContext(*v->producer()), "declared type ", t.ToString(),
                                                     " of '", name, "' differs from inferred ",
                                                     v->type().ToString()));
    }
  }
  RETURN_IF_ERROR(VerifyGraph(*graph));
  return graph;
}

}  // namespace kiln
