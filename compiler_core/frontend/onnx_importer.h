// ONNX import: ModelProto bytes -> a verified, shape-inferred Kiln Graph.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler_core/ir/graph.h"

namespace kiln {

// Default-domain opsets the importer accepts (ONNX IR version 3 or later).
// Opsets 7+ are the supported range; an older model imports when none of its
// operators changed meaning since (legacy attributes such as `broadcast` or
// Pad-1's `paddings` are rejected by the operator table).
inline constexpr int64_t kMinOnnxOpset = 1;
// Opsets 22 to 28 changed the operators Kiln supports only by new element
// types and attributes (which the operator table rejects, naming them).
inline constexpr int64_t kMaxOnnxOpset = 28;

// Int attribute the importer sets to the model's opset on Softmax, LogSoftmax
// and Hardmax nodes of opset < 13 (their old coerce-to-2D semantics).
inline constexpr char kOpsetAttr[] = "_kiln_opset";

// Canonical operand forms. Operators whose operands moved from attributes to
// inputs across opsets import into ONE form, the newest opset's (inputs), so
// shape functions and kernels handle a single form:
//   Pad (< 11: pads, value), Squeeze / Unsqueeze (< 13: axes), Split (< 13:
//   split), Slice (< 10: starts, ends, axes), Clip (< 11: min, max),
//   ReduceSum (< 13: axes), other Reduce* (< 18: axes), TopK (< 10: k),
//   Upsample (< 9: scales), Dropout (< 12: ratio)
// become constant inputs named "<node>_<attr>" (ints -> i64[n], TopK's k ->
// i64[1], float -> f32 scalar, floats -> f32[n]); the attribute is removed and
// omitted inputs are nullptr. Resize-10's (X, scales) becomes (X, <omitted>,
// scales). Split with n outputs becomes n single-output Split nodes
// ("<node>#k") carrying ops::kSplitOutputIndexAttr / kSplitNumOutputsAttr;
// opset 18's num_outputs attribute is checked and dropped.
struct ImportOptions {
  // Static shapes bound to graph inputs (the CLI's --shape NAME=D0,D1). A name
  // that is not a graph input, or a rank different from the model's, is an
  // error. Binding an input also binds its symbolic dims wherever they occur.
  std::map<std::string, std::vector<int64_t>> input_shapes;
  // Values of graph inputs known at import (`kiln eval`'s inputs): each such
  // input becomes a constant, so that shape operands computed from it
  // (Reshape's shape, Range's bounds, TopK's k, ...) are evaluated as ONNX
  // Runtime does. Its dtype and shape must agree with the model's declaration
  // (INVALID_ARGUMENT naming the input otherwise); it takes no --shape.
  std::map<std::string, Tensor> input_values;
};

// Parses ModelProto bytes and imports the main graph. A model using operators
// Kiln does not support fails before anything else is checked, with one
// INVALID_ARGUMENT naming every such node ("unsupported operators: node 'nms'
// (NonMaxSuppression), node 'loop' (Loop); see docs/operators.md"). Then: initializers become
// constant values (also when a graph input of the same name shadows them),
// Constant nodes become constants, empty input names become omitted (nullptr)
// inputs, attributes are converted, the opset comes from the default domain's
// opset_import (kMinOnnxOpset..kMaxOnnxOpset), operands are put in their
// canonical form (above) and nodes of other domains are rejected. Then binds
// `options.input_shapes`, runs InferShapes (which folds shape subgraphs to
// constants) and VerifyGraph. Every failure is INVALID_ARGUMENT: "malformed
// ONNX model: ..." for bytes that do not parse, otherwise naming the node, op
// and reason, e.g. "node 'conv1' (Conv): unsupported operator".
absl::StatusOr<std::unique_ptr<Graph>> ImportOnnxModel(std::string_view model_bytes,
                                                      const ImportOptions& options);

}  // namespace kiln
