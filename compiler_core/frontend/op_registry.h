// The operator table: one entry per supported ONNX operator, giving its arity,
// attribute kinds and defaults/validation, shape function, reference kernel and
// traits. Shape inference and the interpreter are generic loops over this
// table; fusion, its cost model and code generation read the traits. Adding an
// operator means adding one entry in its family's file under ops/ (see
// docs/adding-an-operator.md).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compiler_core/ir/graph.h"
#include "compiler_core/ir/tensor.h"

namespace kiln {

// Attribute kinds; the numeric value is the AttrValue variant index.
enum class AttrKind : int { kInt = 0, kFloat, kString, kTensor, kInts, kFloats, kStrings };
const char* AttrKindName(AttrKind k);

struct AttrSpec {
  std::string name;
  AttrKind kind;
};

// Input types in operator order; nullptr for an omitted optional input.
using InputTypes = std::vector<const TensorType*>;
using InputTensors = std::vector<const Tensor*>;

// What an operator is to fusion and code generation.
enum class OpClass {
  kOpaque,        // no fusion rule takes it: a group of its own (TopK, CumSum, Trilu, Einsum, ...)
  kElementwise,   // output element i from element i (broadcast) of every input: fused into
                  // loops, anchor epilogues and prologues, inlined as an expression
  kDataMovement,  // every output element is some input element (Transpose, Slice, Concat,
                  // Gather, Resize, ...): fused as index arithmetic
  kReduction,     // a loop over reduced axes (Reduce*, Softmax, the norms, pools): fuses
                  // elementwise producers and consumers
  kAnchor,        // compute-heavy (Conv, ConvTranspose, MatMul, Gemm): takes an epilogue
  kShape,         // depends only on shapes and constants (Shape, Range, ...): folded before
                  // code generation
};
const char* OpClassName(OpClass c);

struct OpTraits {
  OpClass op_class = OpClass::kOpaque;
  // A new view of the same contiguous bytes (Reshape, Flatten, Squeeze,
  // Unsqueeze, Identity): free after anything, also after an anchor.
  bool layout_only = false;
  // Reads from input 0 only the elements it writes (Gather's table, Slice's
  // source): the cost model counts output bytes for it.
  bool reads_output_sized_input0 = false;
};

// The domain of Kiln's internal operators: passes make them (kiln.Recurrence
// from LSTM/GRU/RNN), the interpreter and code generation run them, and the
// ONNX importer never accepts them from a model.
inline constexpr std::string_view kKilnDomain = "kiln";

struct OpDef {
  std::string op_type;
  std::string domain;  // "" for ONNX's default domain, else kKilnDomain
  int min_inputs = 1;
  int max_inputs = 1;
  // Outputs accepted: [min_outputs, num_outputs]; min_outputs -1 means exactly
  // num_outputs, num_outputs -1 means any number (Split). The shape function
  // returns one type per output the node has.
  int num_outputs = 1;
  int min_outputs = -1;
  // Every attribute the operator accepts; others are rejected (they could change
  // semantics, e.g. the legacy `broadcast` of opset < 7).
  std::vector<AttrSpec> attrs;
  // Checks attribute values (kinds are already checked). Optional.
  std::function<absl::Status(const Node&)> validate;
  // Output types from input types. Errors carry no node prefix (the caller adds it).
  std::function<absl::StatusOr<std::vector<TensorType>>(const Node&, const InputTypes&)> infer;
  // Fills `outputs`, which the caller allocated with the inferred static types.
  std::function<absl::Status(const Node&, const InputTensors&, std::vector<Tensor>&)> eval;
  OpTraits traits;
};

// The entry for (domain, op_type), or nullptr. "" and "ai.onnx" are the
// default domain; kKilnDomain holds the internal operators.
const OpDef* FindOpDef(std::string_view domain, std::string_view op_type);
bool IsDefaultDomain(std::string_view domain);
// "Op" for the default domain, "domain.Op" otherwise (the table's key).
std::string QualifiedOpName(std::string_view domain, std::string_view op_type);
// Every entry, ordered by qualified name.
std::vector<const OpDef*> AllOpDefs();

// Checks arity, omitted required inputs, attribute names/kinds and op-specific
// attribute validation. Errors carry no node prefix.
absl::Status ValidateNode(const OpDef& def, const Node& node);

// The tensor a Constant node's attributes describe (exactly one of value,
// value_float(s), value_int(s)).
absl::StatusOr<Tensor> ConstantValueFromAttrs(const std::map<std::string, AttrValue>& attrs);

// "node 'NAME' (OP): " — the prefix of every per-node error message.
std::string NodeContext(const Node& node);

}  // namespace kiln
