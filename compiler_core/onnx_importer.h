// ONNX import: ModelProto bytes -> a verified, shape-inferred Kiln Graph.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler_core/graph.h"

namespace kiln {

struct ImportOptions {
  // Static shapes bound to graph inputs (the CLI's --shape NAME=D0,D1). A name
  // that is not a graph input, or a rank different from the model's, is an
  // error. Binding an input also binds its symbolic dims wherever they occur.
  std::map<std::string, std::vector<int64_t>> input_shapes;
};

// Parses ModelProto bytes and imports the main graph: initializers become
// constant values (also when a graph input of the same name shadows them),
// Constant nodes become constants, empty input names become omitted (nullptr)
// inputs, attributes are converted and the opset comes from the default
// domain's opset_import. Then binds `options.input_shapes`, runs InferShapes
// and VerifyGraph. Every failure is INVALID_ARGUMENT: "malformed ONNX model:
// ..." for bytes that do not parse, otherwise naming the node, op and reason,
// e.g. "node 'conv1' (Conv): unsupported operator".
absl::StatusOr<std::unique_ptr<Graph>> ImportOnnxModel(std::string_view model_bytes,
                                                      const ImportOptions& options);

}  // namespace kiln
