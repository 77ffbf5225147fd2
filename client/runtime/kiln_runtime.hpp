// The Kiln runtime for C++: a header-only layer over the C API of
// kiln_runtime.h, so a C++ program gets RAII handles and exceptions while the
// library's ABI stays the C one (no C++ type crosses it; docs/runtime-abi.md).
#ifndef KILN_RUNTIME_HPP_
#define KILN_RUNTIME_HPP_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kiln_runtime.h"

namespace kiln_rt {

// A failed call: the status code and the runtime's message.
class Error : public std::runtime_error {
 public:
  Error(kiln_status_t code, const std::string& message) : std::runtime_error(message), code_(code) {}
  kiln_status_t code() const { return code_; }

 private:
  kiln_status_t code_;
};

inline void Check(kiln_status_t status) {
  if (status != KILN_OK) throw Error(status, kiln_last_error_message());
}

struct TensorInfo {
  std::string name;
  kiln_dtype_t dtype = KILN_DTYPE_UNSPECIFIED;
  std::vector<int64_t> dims;
};

// A loaded, verified package; cheap to copy (shared).
class Package {
 public:
  static Package Load(const std::string& path) {
    kiln_package_t* p = nullptr;
    Check(kiln_package_load(path.c_str(), &p));
    return Package(p);
  }
  static Package FromBytes(const void* data, size_t bytes) {
    kiln_package_t* p = nullptr;
    Check(kiln_package_load_bytes(data, bytes, &p));
    return Package(p);
  }
  std::string digest() const { return kiln_package_digest(handle_.get()); }
  std::string target() const { return kiln_package_target(handle_.get()); }
  kiln_device_t device() const { return kiln_package_device(handle_.get(), nullptr); }
  // A CUDA package's SM (90 for sm_90); 0 for a CPU package.
  int cuda_sm() const {
    int sm = 0;
    kiln_package_device(handle_.get(), &sm);
    return sm;
  }
  kiln_package_t* get() const { return handle_.get(); }

 private:
  explicit Package(kiln_package_t* p) : handle_(p, kiln_package_release) {}
  std::shared_ptr<kiln_package_t> handle_;
};

// One execution context; used by one thread at a time.
class Session {
 public:
  // threads: 1 runs on the calling thread, 0 on every hardware thread.
  explicit Session(const Package& package, int threads = 1) {
    kiln_session_t* s = nullptr;
    Check(kiln_session_create(package.get(), threads, &s));
    handle_.reset(s);
  }
  // A CUDA package's session on CUDA device `device`, running on `stream`
  // (a CUstream or cudaStream_t the caller owns; null: the session's own).
  static Session OnCuda(const Package& package, int device = 0, void* stream = nullptr) {
    kiln_session_t* s = nullptr;
    Check(kiln_session_create_cuda(package.get(), device, stream, &s));
    return Session(s);
  }

  std::vector<TensorInfo> inputs() const {
    std::vector<TensorInfo> out;
    for (int i = 0; i < kiln_session_num_inputs(handle_.get()); ++i) {
      TensorInfo t;
      t.name = kiln_session_input_name(handle_.get(), i);
      int64_t dims[KILN_MAX_RANK];
      int rank = 0;
      Check(kiln_session_input_info(handle_.get(), i, &t.dtype, dims, &rank));
      t.dims.assign(dims, dims + rank);
      out.push_back(std::move(t));
    }
    return out;
  }
  std::vector<TensorInfo> outputs() const {
    std::vector<TensorInfo> out;
    for (int i = 0; i < kiln_session_num_outputs(handle_.get()); ++i) {
      TensorInfo t;
      t.name = kiln_session_output_name(handle_.get(), i);
      int64_t dims[KILN_MAX_RANK];
      int rank = 0;
      Check(kiln_session_output(handle_.get(), i, nullptr, nullptr, &t.dtype, dims, &rank));
      t.dims.assign(dims, dims + rank);
      out.push_back(std::move(t));
    }
    return out;
  }

  // Copies the input.
  void SetInput(const std::string& name, const void* data, size_t bytes) {
    Check(kiln_session_set_input(handle_.get(), name.c_str(), data, bytes));
  }
  // No copy: `data` must outlive the runs that read it.
  void BindInput(const std::string& name, const void* data, size_t bytes) {
    Check(kiln_session_bind_input(handle_.get(), name.c_str(), data, bytes));
  }
  void BindOutput(int index, void* data, size_t bytes) {
    Check(kiln_session_bind_output(handle_.get(), index, data, bytes));
  }
  void Run() { Check(kiln_session_run(handle_.get())); }
  // false: keep denormal floats (IEEE) instead of flushing them (the default).
  void FlushDenormals(bool flush) { Check(kiln_session_flush_denormals(handle_.get(), flush ? 1 : 0)); }

  // CUDA sessions (kiln_runtime.h has the rules): device memory the caller
  // owns, read or written in place; outputs left on the device; runs that
  // return before the stream has run them.
  void BindInputDevice(const std::string& name, kiln_device_ptr_t data, size_t bytes) {
    Check(kiln_session_bind_input_device(handle_.get(), name.c_str(), data, bytes));
  }
  void BindOutputDevice(int index, kiln_device_ptr_t data, size_t bytes) {
    Check(kiln_session_bind_output_device(handle_.get(), index, data, bytes));
  }
  void KeepOutputOnDevice(int index, bool keep = true) {
    Check(kiln_session_keep_output_on_device(handle_.get(), index, keep ? 1 : 0));
  }
  kiln_device_ptr_t OutputDevice(int index) const {
    kiln_device_ptr_t data = 0;
    Check(kiln_session_output_device(handle_.get(), index, &data));
    return data;
  }
  void RunAsync() { Check(kiln_session_run_async(handle_.get())); }
  void* cuda_stream() const { return kiln_session_cuda_stream(handle_.get()); }

  // Output `index` of the last run: valid until the next run.
  std::pair<const void*, size_t> Output(int index) const {
    const void* data = nullptr;
    size_t bytes = 0;
    Check(kiln_session_output(handle_.get(), index, &data, &bytes, nullptr, nullptr, nullptr));
    return {data, bytes};
  }

 private:
  explicit Session(kiln_session_t* s) { handle_.reset(s); }
  struct Release {
    void operator()(kiln_session_t* s) const { kiln_session_release(s); }
  };
  std::unique_ptr<kiln_session_t, Release> handle_;
};

}  // namespace kiln_rt

#endif  // KILN_RUNTIME_HPP_
