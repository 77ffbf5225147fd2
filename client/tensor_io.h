// Tensor files for the CLI and tests: NumPy .npy (read and write) and serialized
// ONNX TensorProto .pb (read) <-> kiln::Tensor.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compiler_core/ir/tensor.h"

namespace kiln {

// Reads a tensor by extension: ".npy" or ".pb" (ONNX TensorProto). NOT_FOUND if
// the file cannot be read; INVALID_ARGUMENT, naming the file, for a malformed or
// unsupported file (big-endian, Fortran order, unsupported dtype, bad size).
absl::StatusOr<Tensor> ReadTensorFile(const std::string& path);
// The `name` field of the TensorProto in a .pb file ("" when unset).
absl::StatusOr<std::string> TensorProtoName(const std::string& path);

// .npy format versions 1.0, 2.0 and 3.0, C order, little-endian; dtypes
// '<f4' '<f8' '<f2' '<i8' '<i4' '<i2' '|i1' '|u1' '|b1'.
absl::StatusOr<Tensor> DecodeNpy(std::string_view bytes, const std::string& name_for_errors);
// Version 1.0 (2.0 if the header needs it), header padded to 64 bytes as NumPy does.
absl::StatusOr<std::string> EncodeNpy(const Tensor& tensor);
absl::Status WriteNpy(const std::string& path, const Tensor& tensor);

// A serialized onnx::TensorProto with raw_data or typed data fields
// (float_data, double_data, int32_data, int64_data). External data is unsupported.
absl::StatusOr<Tensor> DecodeTensorProto(std::string_view bytes, const std::string& name_for_errors);

}  // namespace kiln
