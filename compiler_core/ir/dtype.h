// Element types of Kiln tensors and their sizes and names.
#pragma once

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"

namespace kiln {

// Matches kiln.v1.DataType numerically.
enum class DType : int {
  kUnknown = 0,
  kFloat32 = 1,
  kFloat16 = 2,
  kFloat64 = 3,
  kInt8 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kUInt8 = 8,
  kBool = 9,
  kUInt16 = 10,
  kUInt32 = 11,
  kUInt64 = 12,
  kBFloat16 = 13,
};

// Bytes per element; 0 for kUnknown.
int64_t DTypeSize(DType t);
// "f32", "i64", "bool", ...: the spelling used in every textual dump.
const char* DTypeName(DType t);
absl::StatusOr<DType> DTypeFromName(std::string_view name);
// ONNX TensorProto.DataType <-> DType. Unsupported ONNX types give an error.
absl::StatusOr<DType> DTypeFromOnnx(int onnx_type);
int DTypeToOnnx(DType t);

}  // namespace kiln
