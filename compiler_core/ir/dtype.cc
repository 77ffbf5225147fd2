// Element types: sizes, names, ONNX codes.
#include "compiler_core/ir/dtype.h"

#include "absl/strings/str_cat.h"

namespace kiln {

int64_t DTypeSize(DType t) {
  switch (t) {
    case DType::kFloat32: return 4;
    case DType::kFloat16: return 2;
    case DType::kBFloat16: return 2;
    case DType::kFloat64: return 8;
    case DType::kInt8: return 1;
    case DType::kInt16: return 2;
    case DType::kInt32: return 4;
    case DType::kInt64: return 8;
    case DType::kUInt8: return 1;
    case DType::kBool: return 1;
    case DType::kUInt16: return 2;
    case DType::kUInt32: return 4;
    case DType::kUInt64: return 8;
    case DType::kUnknown: return 0;
  }
  return 0;
}

const char* DTypeName(DType t) {
  switch (t) {
    case DType::kFloat32: return "f32";
    case DType::kFloat16: return "f16";
    case DType::kBFloat16: return "bf16";
    case DType::kFloat64: return "f64";
    case DType::kInt8: return "i8";
    case DType::kInt16: return "i16";
    case DType::kInt32: return "i32";
    case DType::kInt64: return "i64";
    case DType::kUInt8: return "u8";
    case DType::kBool: return "bool";
    case DType::kUInt16: return "u16";
    case DType::kUInt32: return "u32";
    case DType::kUInt64: return "u64";
    case DType::kUnknown: return "unknown";
  }
  return "unknown";
}

absl::StatusOr<DType> DTypeFromName(std::string_view name) {
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kFloat64, DType::kInt8, DType::kInt16,
                  DType::kInt32, DType::kInt64, DType::kUInt8, DType::kBool, DType::kUInt16,
                  DType::kUInt32, DType::kUInt64, DType::kBFloat16}) {
    if (name == DTypeName(t)) return t;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown dtype '", std::string(name), "'"));
}

// ONNX TensorProto.DataType codes.
absl::StatusOr<DType> DTypeFromOnnx(int onnx_type) {
  switch (onnx_type) {
    case 1: return DType::kFloat32;
    case 2: return DType::kUInt8;
    case 3: return DType::kInt8;
    case 5: return DType::kInt16;
    case 6: return DType::kInt32;
    case 7: return DType::kInt64;
    case 9: return DType::kBool;
    case 10: return DType::kFloat16;
    case 16: return DType::kBFloat16;
    case 11: return DType::kFloat64;
    case 4: return DType::kUInt16;
    case 12: return DType::kUInt32;
    case 13: return DType::kUInt64;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("unsupported ONNX element type ", onnx_type));
  }
}

int DTypeToOnnx(DType t) {
  switch (t) {
    case DType::kFloat32: return 1;
    case DType::kUInt8: return 2;
    case DType::kInt8: return 3;
    case DType::kInt16: return 5;
    case DType::kInt32: return 6;
    case DType::kInt64: return 7;
    case DType::kBool: return 9;
    case DType::kFloat16: return 10;
    case DType::kBFloat16: return 16;
    case DType::kFloat64: return 11;
    case DType::kUInt16: return 4;
    case DType::kUInt32: return 12;
    case DType::kUInt64: return 13;
    case DType::kUnknown: return 0;
  }
  return 0;
}

}  // namespace kiln
