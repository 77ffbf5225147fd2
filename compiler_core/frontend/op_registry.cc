// The operator table: the families under compiler_core/frontend/ops/ register their
// definitions; this file owns lookup and the generic node checks.
#include "compiler_core/frontend/op_registry.h"

#include <algorithm>
#include <cassert>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "compiler_core/frontend/ops/op_families.h"
#include "compiler_core/frontend/shape_inference.h"

namespace kiln {
namespace {

std::map<std::string, OpDef, std::less<>> BuildTable() {
  std::vector<OpDef> defs;
  ops::RegisterElementwiseOps(&defs);
  ops::RegisterDataMovementOps(&defs);
  ops::RegisterIndexOps(&defs);
  ops::RegisterMatMulOps(&defs);
  ops::RegisterReductionOps(&defs);
  ops::RegisterConvOps(&defs);
  ops::RegisterPoolOps(&defs);
  ops::RegisterResizeOps(&defs);
  ops::RegisterTopKOps(&defs);
  ops::RegisterShapeOps(&defs);
  ops::RegisterRnnOps(&defs);
  ops::RegisterWinogradOps(&defs);
  std::map<std::string, OpDef, std::less<>> table;
  for (OpDef& d : defs) {
    std::string name = QualifiedOpName(d.domain, d.op_type);
    bool inserted = table.emplace(std::move(name), std::move(d)).second;
    assert(inserted && "operator registered twice");
    (void)inserted;
  }
  return table;
}

}  // namespace

const char* AttrKindName(AttrKind k) {
  switch (k) {
    case AttrKind::kInt: return "int";
    case AttrKind::kFloat: return "float";
    case AttrKind::kString: return "string";
    case AttrKind::kTensor: return "tensor";
    case AttrKind::kInts: return "ints";
    case AttrKind::kFloats: return "floats";
    case AttrKind::kStrings: return "strings";
  }
  return "?";
}

const char* OpClassName(OpClass c) {
  switch (c) {
    case OpClass::kOpaque: return "opaque";
    case OpClass::kElementwise: return "elementwise";
    case OpClass::kDataMovement: return "data_movement";
    case OpClass::kReduction: return "reduction";
    case OpClass::kAnchor: return "anchor";
    case OpClass::kShape: return "shape";
  }
  return "opaque";
}

bool IsDefaultDomain(std::string_view domain) { return domain.empty() || domain == "ai.onnx"; }

const std::map<std::string, OpDef, std::less<>>& Table() {
  static const auto* table = new std::map<std::string, OpDef, std::less<>>(BuildTable());
  return *table;
}

std::string QualifiedOpName(std::string_view domain, std::string_view op_type) {
  return IsDefaultDomain(domain) ? std::string(op_type) : std::string(domain) + "." + std::string(op_type);
}

const OpDef* FindOpDef(std::string_view domain, std::string_view op_type) {
  if (!IsDefaultDomain(domain) && domain != kKilnDomain) return nullptr;
  // ONNX operator names have no '.', so a default-domain lookup never finds an
  // internal entry.
  auto it = Table().find(QualifiedOpName(domain, op_type));
  return it == Table().end() ? nullptr : &it->second;
}

std::vector<const OpDef*> AllOpDefs() {
  std::vector<const OpDef*> defs;
  for (const auto& [name, def] : Table()) defs.push_back(&def);
  return defs;
}

std::string NodeContext(const Node& node) {
  return absl::StrCat("node '", node.name(), "' (", QualifiedOpName(node.domain(), node.op_type()), "): ");
}

absl::Status ValidateNode(const OpDef& def, const Node& node) {
  const int n = node.num_inputs();
  if (n < def.min_inputs || n > def.max_inputs) {
    std::string expected = def.min_inputs == def.max_inputs
                               ? absl::StrCat(def.min_inputs)
                               : absl::StrCat(def.min_inputs, " to ", def.max_inputs);
    return absl::InvalidArgumentError(absl::StrCat("expects ", expected, " inputs, got ", n));
  }
  for (int i = 0; i < def.min_inputs; ++i) {
    if (node.input(i) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("required input ", i, " is omitted"));
    }
  }
  const int min_out = def.min_outputs >= 0 ? def.min_outputs : std::max(def.num_outputs, 1);
  const int max_out = def.num_outputs;
  if (node.num_outputs() < min_out || (max_out >= 0 && node.num_outputs() > max_out)) {
    std::string expected = min_out == max_out ? absl::StrCat(min_out)
                           : max_out < 0      ? absl::StrCat("at least ", min_out)
                                              : absl::StrCat(min_out, " to ", max_out);
    return absl::InvalidArgumentError(
        absl::StrCat("expects ", expected, " outputs, got ", node.num_outputs()));
  }
  for (const auto& [name, value] : node.attrs()) {
    const AttrSpec* spec = nullptr;
    for (const AttrSpec& s : def.attrs) {
      if (s.name == name) spec = &s;
    }
    if (spec == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unsupported attribute '", name, "'"));
    }
    if (static_cast<int>(value.index()) != static_cast<int>(spec->kind)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "attribute '", name, "' must be of kind ", AttrKindName(spec->kind), ", got ",
          AttrKindName(static_cast<AttrKind>(value.index()))));
    }
  }
  if (def.validate) RETURN_IF_ERROR(def.validate(node));
  return absl::OkStatus();
}

absl::StatusOr<Tensor> ConstantValueFromAttrs(const std::map<std::string, AttrValue>& attrs) {
  if (attrs.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "exactly one of value, value_float, value_floats, value_int, value_ints must be set, got ",
        attrs.size(), " attributes"));
  }
  const auto& [name, v] = *attrs.begin();
  if (name == "value" && std::holds_alternative<Tensor>(v)) return std::get<Tensor>(v);
  if (name == "value_float" && std::holds_alternative<float>(v)) {
    return Tensor::FromVector(DType::kFloat32, {}, std::vector<float>{std::get<float>(v)});
  }
  if (name == "value_floats" && std::holds_alternative<std::vector<float>>(v)) {
    const auto& f = std::get<std::vector<float>>(v);
    return Tensor::FromVector(DType::kFloat32, {static_cast<int64_t>(f.size())}, f);
  }
  if (name == "value_int" && std::holds_alternative<int64_t>(v)) {
    return Tensor::FromVector(DType::kInt64, {}, std::vector<int64_t>{std::get<int64_t>(v)});
  }
  if (name == "value_ints" && std::holds_alternative<std::vector<int64_t>>(v)) {
    const auto& i = std::get<std::vector<int64_t>>(v);
    return Tensor::FromVector(DType::kInt64, {static_cast<int64_t>(i.size())}, i);
  }
  return absl::InvalidArgumentError(absl::StrCat("unsupported constant attribute '", name, "'"));
}

}  // namespace kiln
