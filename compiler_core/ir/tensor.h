// A dense, row-major, host-memory tensor: the unit of constants, interpreter
// values and test data. Storage is 64-byte aligned so kernels may use aligned loads.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "compiler_core/ir/dtype.h"

namespace kiln {

int64_t NumElements(const std::vector<int64_t>& dims);

class Tensor {
 public:
  Tensor() = default;
  // Zero-filled tensor of the given type and shape.
  Tensor(DType dtype, std::vector<int64_t> dims);
  // Copies `bytes`, which must hold exactly NumElements(dims) * DTypeSize(dtype).
  static Tensor FromBytes(DType dtype, std::vector<int64_t> dims, std::string_view bytes);
  template <typename T>
  static Tensor FromVector(DType dtype, std::vector<int64_t> dims, const std::vector<T>& v) {
    return FromBytes(dtype, std::move(dims),
                     std::string_view(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T)));
  }

  Tensor(const Tensor& other);
  Tensor& operator=(const Tensor& other);
  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&&) noexcept = default;

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& dims() const { return dims_; }
  int64_t rank() const { return static_cast<int64_t>(dims_.size()); }
  int64_t num_elements() const { return NumElements(dims_); }
  int64_t size_bytes() const { return num_elements() * DTypeSize(dtype_); }
  bool empty_storage() const { return data_ == nullptr; }

  void* raw() { return data_.get(); }
  const void* raw() const { return data_.get(); }
  template <typename T> T* data() { return reinterpret_cast<T*>(data_.get()); }
  template <typename T> const T* data() const { return reinterpret_cast<const T*>(data_.get()); }
  std::string_view bytes() const {
    return std::string_view(reinterpret_cast<const char*>(data_.get()), size_bytes());
  }
  // Same bytes, new shape (element count must match).
  Tensor Reshaped(std::vector<int64_t> dims) const;

  // "f32[2,3]" plus, for small tensors, the values: for dumps and test messages.
  std::string DebugString(int max_elements = 8) const;

 private:
  struct Free { void operator()(uint8_t* p) const; };
  DType dtype_ = DType::kUnknown;
  std::vector<int64_t> dims_;
  std::unique_ptr<uint8_t[], Free> data_;
};

}  // namespace kiln
