// Reading an ONNX model file as the CLI sends it: one serialized ModelProto.
// Tensors stored as ONNX external data (beside the model, as exporters write
// models with large weights) are read from their files and inlined.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace kiln {

// The bytes of the model at `path`, every external tensor inlined. External
// files are resolved against the model's folder and must stay inside it
// (no absolute paths, no '..'). Errors name the tensor and the file; a model
// whose inlined size exceeds protobuf's 2 GiB message limit is refused with
// its size.
absl::StatusOr<std::string> ReadOnnxModelFile(const std::string& path);

}  // namespace kiln
