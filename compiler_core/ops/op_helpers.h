// Shared helpers of the operator definitions: types, symbolic-dim errors and
// numpy broadcasting, for shape functions and reference kernels alike.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "compiler_core/graph.h"
#include "compiler_core/op_registry.h"

namespace kiln::ops {

TensorType MakeType(DType dtype, std::vector<Dim> dims);
// The name of input i, or "<omitted>".
std::string InputName(const Node& node, int i);
std::string DimString(const Dim& d);
// Two dims that are certainly equal: same static extent or same named symbol.
bool SameDim(const Dim& a, const Dim& b);
bool IsOne(const Dim& d);
// "input 'x' dimension 1 is symbolic ('k') but <why>: bind it ... (--shape)".
absl::Status SymbolicError(const Node& node, int input, int axis, const Dim& d, absl::string_view why);
// Every present input is f32.
absl::Status RequireF32(const Node& node, const InputTypes& in);
// Numpy broadcast of the (symbolic) shapes of inputs ia and ib; `mismatch` is the
// message for incompatible static extents.
absl::StatusOr<std::vector<Dim>> BroadcastDims(const Node& node, int ia, const std::vector<Dim>& a,
                                               int ib, const std::vector<Dim>& b,
                                               const std::string& mismatch);
// Row-major strides of `dims` aligned to an output of rank `out_rank`, 0 on
// broadcast (size-1 or missing) axes.
std::vector<int64_t> BroadcastStrides(const std::vector<int64_t>& dims, size_t out_rank);
// Offset in a broadcast operand of the output element with linear index `linear`.
int64_t BroadcastOffset(int64_t linear, const std::vector<int64_t>& out_dims,
                        const std::vector<int64_t>& strides);

// Calls `f(T{})` with T the C++ element type of `dtype` (bool is stored as one
// byte and dispatched as `bool`); UNIMPLEMENTED for f16 and unknown types, so a
// kernel written once as a template covers every dtype it is instantiated for.
template <typename F>
absl::Status DispatchDType(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFloat32: return f(float{});
    case DType::kFloat64: return f(double{});
    case DType::kInt64: return f(int64_t{});
    case DType::kInt32: return f(int32_t{});
    case DType::kInt16: return f(int16_t{});
    case DType::kInt8: return f(int8_t{});
    case DType::kUInt8: return f(uint8_t{});
    case DType::kBool: return f(bool{});
    default:
      return absl::UnimplementedError(absl::StrCat("dtype ", DTypeName(dtype), " is not supported here"));
  }
}

}  // namespace kiln::ops
