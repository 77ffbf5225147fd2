// Shared helpers of the operator definitions: types, symbolic-dim errors and
// numpy broadcasting, for shape functions and reference kernels alike.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "compiler_core/frontend/op_registry.h"
#include "compiler_core/ir/graph.h"

namespace kiln::ops {

// The broadcast of opset < 7 binary operators (`broadcast` 1 with `axis` k)
// and of PRelu < 7's per-channel slope: input 1's dims align with input 0's
// starting at axis k. The importer records k under this attribute; shape
// inference and the interpreter honour it, and the legacy_forms pass turns the
// node into a Reshape of input 1 and the numpy-broadcasting form.
inline constexpr char kBroadcastAxisAttr[] = "_kiln_broadcast_axis";
// Input 1's dims padded with trailing ones so that numpy broadcasting aligns
// them at the node's kBroadcastAxisAttr (unchanged without it).
absl::StatusOr<std::vector<Dim>> AlignedAtBroadcastAxis(const Node& node, size_t rank0, std::vector<Dim> dims1);

using TypesOr = absl::StatusOr<std::vector<TensorType>>;

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
    case DType::kUInt16: return f(uint16_t{});
    case DType::kUInt32: return f(uint32_t{});
    case DType::kUInt64: return f(uint64_t{});
    case DType::kBool: return f(bool{});
    default:
      return absl::UnimplementedError(absl::StrCat("dtype ", DTypeName(dtype), " is not supported here"));
  }
}

// Axis `axis` of a rank-`rank` tensor, negative counting from the end; `what`
// names it in the error ("attribute 'axis'"), e.g. "attribute 'axis' is 3 but
// the input has rank 2".
absl::StatusOr<int64_t> ResolveAxis(int64_t axis, int64_t rank, absl::string_view what);
// The integer (i64 or i32) elements of input i, which must be a constant
// (initializer or folded Constant) because the output shape depends on it.
absl::StatusOr<std::vector<int64_t>> ConstantIntInput(const Node& node, int i);

// --- Shape-operand helpers (tensor ops; usable by any family) ---

// Largest constant that a shape function reads as a shape operand (axes, pads,
// shape, repeats, scalars); the interpreter presents computed inputs up to this
// size to shape functions as constants (interpreter.cc).
inline constexpr int64_t kMaxShapeOperandElements = 4096;

// Input i as integers (i32 or i64); it must be a constant once shapes are bound
// and shape subgraphs folded. When it is not, the error says why: which graph
// input and symbolic dimension it depends on, or that it is computed at run time.
absl::StatusOr<std::vector<int64_t>> ConstantInts(const Node& node, int i, absl::string_view what);
// Input i as one number (any numeric dtype, read as double), constant as above.
absl::StatusOr<double> ConstantScalar(const Node& node, int i, absl::string_view what);
// Element `k` of a numeric tensor as double / int64 (any dtype DispatchDType knows).
double ElementAsDouble(const Tensor& t, int64_t k);
int64_t ElementAsInt(const Tensor& t, int64_t k);
// `axis` in [-rank, rank) -> [0, rank); `what` names it in the error.
absl::StatusOr<int64_t> NormalizeAxis(int64_t axis, int64_t rank, absl::string_view what);
// The static extents of input i, or SymbolicError for its first symbolic dim.
absl::StatusOr<std::vector<int64_t>> StaticDimsOf(const Node& node, int i, const TensorType& t,
                                                  absl::string_view why);
// Row-major strides of `dims`.
std::vector<int64_t> RowMajorStrides(const std::vector<int64_t>& dims);

// Data movement by index mapping: for every output element in row-major order
// `src(coords)` gives the linear index of the input element to copy, or -1 to
// write `fill` (one element's bytes). Works on bytes, so on every dtype.
template <typename F>
void MapElements(const Tensor& in, Tensor& out, const void* fill, F&& src) {
  const int64_t es = DTypeSize(out.dtype());
  const std::vector<int64_t>& od = out.dims();
  const int64_t n = out.num_elements();
  std::vector<int64_t> c(od.size(), 0);
  const char* ip = static_cast<const char*>(in.raw());
  char* op = static_cast<char*>(out.raw());
  for (int64_t i = 0; i < n; ++i) {
    int64_t s = src(c);
    std::memcpy(op + i * es, s >= 0 ? ip + s * es : static_cast<const char*>(fill), es);
    for (int k = static_cast<int>(od.size()) - 1; k >= 0; --k) {
      if (++c[k] < od[k]) break;
      c[k] = 0;
    }
  }
}

// f32, f64, i32 or i64 (the reductions' and index operators' types).
bool IsNumeric(DType t);
absl::Status RequireNumeric(const Node& node, const TensorType& t, int i);
// Int attribute `name` (default `def`) is 0 or 1.
absl::Status RequireBool01(const Node& node, const char* name, int64_t def);
// Outer x axis x inner decomposition of `dims` around `axis`.
struct AxisSplit {
  int64_t outer = 1, n = 1, inner = 1;
};
AxisSplit SplitAt(const std::vector<int64_t>& dims, int64_t axis);
// Input i, if present, is [C] for x's channel axis 1 (normalisation parameters).
absl::Status RequireVector(const Node& node, const InputTypes& in, int i, const TensorType& x);

}  // namespace kiln::ops
