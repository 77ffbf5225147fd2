// Dense host tensors with aligned storage.
#include "compiler_core/ir/tensor.h"

#include <cstdlib>
#include <new>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln {

int64_t NumElements(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

void Tensor::Free::operator()(uint8_t* p) const { std::free(p); }

namespace {
uint8_t* AllocateAligned(int64_t bytes) {
  size_t rounded = static_cast<size_t>((bytes + 63) / 64 * 64);
  if (rounded == 0) rounded = 64;
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(64, rounded));
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, rounded);
  return p;
}
}  // namespace

Tensor::Tensor(DType dtype, std::vector<int64_t> dims)
    : dtype_(dtype), dims_(std::move(dims)), data_(AllocateAligned(size_bytes())) {}

Tensor Tensor::FromBytes(DType dtype, std::vector<int64_t> dims, std::string_view bytes) {
  Tensor t(dtype, std::move(dims));
  // memcpy from an empty view's data() (which may be null) is undefined even for 0 bytes.
  const size_t n = std::min<size_t>(bytes.size(), t.size_bytes());
  if (n > 0) std::memcpy(t.raw(), bytes.data(), n);
  return t;
}

Tensor::Tensor(const Tensor& other) : dtype_(other.dtype_), dims_(other.dims_) {
  if (other.data_) {
    data_.reset(AllocateAligned(size_bytes()));
    std::memcpy(data_.get(), other.data_.get(), size_bytes());
  }
}

Tensor& Tensor::operator=(const Tensor& other) {
  if (this != &other) *this = Tensor(other);
  return *this;
}

Tensor Tensor::Reshaped(std::vector<int64_t> dims) const {
  return FromBytes(dtype_, std::move(dims), bytes());
}

std::string Tensor::DebugString(int max_elements) const {
  std::string s = absl::StrCat(DTypeName(dtype_), "[", absl::StrJoin(dims_, ","), "]");
  if (!data_ || num_elements() > max_elements) return s;
  std::vector<std::string> vals;
  for (int64_t i = 0; i < num_elements(); ++i) {
    switch (dtype_) {
      case DType::kFloat32: vals.push_back(absl::StrCat(data<float>()[i])); break;
      case DType::kFloat64: vals.push_back(absl::StrCat(data<double>()[i])); break;
      case DType::kInt64: vals.push_back(absl::StrCat(data<int64_t>()[i])); break;
      case DType::kInt32: vals.push_back(absl::StrCat(data<int32_t>()[i])); break;
      case DType::kBool: vals.push_back(data<uint8_t>()[i] ? "true" : "false"); break;
      default: vals.push_back("?"); break;
    }
  }
  return absl::StrCat(s, "{", absl::StrJoin(vals, ","), "}");
}

}  // namespace kiln
