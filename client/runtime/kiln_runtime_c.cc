// The C API of kiln_runtime.h over Package, Session and ThreadPool.
#include "client/runtime/kiln_runtime.h"

#include <memory>
#include <string>

#include "client/runtime/package_reader.h"
#include "client/runtime/session.h"
#include "client/runtime/status.h"
#include "client/runtime/thread_pool.h"

struct kiln_package_t {
  std::shared_ptr<const kiln::runtime::Package> package;
  std::string target;  // kiln_package_target's answer
};

struct kiln_session_t {
  std::unique_ptr<kiln::runtime::ThreadPool> pool;  // outlives session (declared first)
  std::unique_ptr<kiln::runtime::Session> session;
};

namespace {

using kiln::runtime::Cat;

static_assert(KILN_DEVICE_CPU == static_cast<int>(kiln::runtime::Device::kCpu) &&
              KILN_DEVICE_CUDA == static_cast<int>(kiln::runtime::Device::kCuda));

thread_local std::string t_last_error;

kiln_status_t Fail(kiln_status_t code, std::string message) {
  t_last_error = std::move(message);
  return code;
}

kiln_status_t FromStatus(const kiln::runtime::Status& s) {
  if (s.ok()) return KILN_OK;
  return Fail(static_cast<kiln_status_t>(s.code()), std::string(s.message()));
}

kiln_status_t TensorInfo(const kiln::runtime::ManifestTensor& t, kiln_dtype_t* dtype, int64_t* dims, int* rank) {
  const int n = static_cast<int>(t.dims.size());
  if (dims != nullptr && n > KILN_MAX_RANK) {
    return Fail(KILN_OUT_OF_RANGE, Cat("tensor '", t.name, "' has rank ", n, ", more than KILN_MAX_RANK"));
  }
  if (dtype != nullptr) *dtype = static_cast<kiln_dtype_t>(t.dtype);
  if (rank != nullptr) *rank = n;
  if (dims != nullptr) {
    for (int i = 0; i < n; ++i) dims[i] = t.dims[i];
  }
  return KILN_OK;
}

kiln_package_t* NewPackage(std::unique_ptr<kiln::runtime::Package> package) {
  auto* handle = new kiln_package_t{std::shared_ptr<const kiln::runtime::Package>(std::move(package)), ""};
  const kiln::runtime::Manifest& m = handle->package->manifest();
  if (handle->package->is_cuda()) {
    handle->target = Cat("cuda:sm_", m.cuda.sm);
    return handle;
  }
  // A level target's CPU is the level itself: say it once.
  handle->target = m.isa_level.empty() || m.isa_level == m.target_cpu ? m.target_cpu
                                                                      : m.isa_level + " " + m.target_cpu;
  return handle;
}

kiln_status_t NewSession(kiln_package_t* package, int num_threads, const kiln::runtime::CudaSessionOptions& cuda,
                         kiln_session_t** out_session) {
  *out_session = nullptr;
  auto handle = std::make_unique<kiln_session_t>();
  // A CUDA session runs nothing on the pool: it gets no threads.
  handle->pool = std::make_unique<kiln::runtime::ThreadPool>(package->package->is_cuda() ? 1 : num_threads);
  auto session = kiln::runtime::Session::Create(package->package, handle->pool.get(), cuda);
  if (!session.ok()) return FromStatus(session.status());
  handle->session = std::move(*session);
  *out_session = handle.release();
  return KILN_OK;
}

}  // namespace

extern "C" {

const char* kiln_last_error_message(void) { return t_last_error.c_str(); }

// KILN_RUNTIME_VERSION_STRING: the CMake project version (client/runtime/CMakeLists.txt).
const char* kiln_runtime_version(void) { return KILN_RUNTIME_VERSION_STRING; }

int kiln_runtime_abi_version(void) { return KILN_RUNTIME_ABI_MAJOR * 1000 + KILN_RUNTIME_ABI_MINOR; }

kiln_status_t kiln_package_load(const char* path, kiln_package_t** out_package) {
  if (path == nullptr || out_package == nullptr) return Fail(KILN_INVALID_ARGUMENT, "kiln_package_load: null argument");
  *out_package = nullptr;
  auto pkg = kiln::runtime::Package::Load(path);
  if (!pkg.ok()) return FromStatus(pkg.status());
  *out_package = NewPackage(std::move(*pkg));
  return KILN_OK;
}

kiln_status_t kiln_package_load_bytes(const void* data, size_t bytes, kiln_package_t** out_package) {
  if ((data == nullptr && bytes > 0) || out_package == nullptr) {
    return Fail(KILN_INVALID_ARGUMENT, "kiln_package_load_bytes: null argument");
  }
  *out_package = nullptr;
  auto pkg = kiln::runtime::Package::FromBytes(std::string_view(static_cast<const char*>(data), bytes));
  if (!pkg.ok()) return FromStatus(pkg.status());
  *out_package = NewPackage(std::move(*pkg));
  return KILN_OK;
}

const char* kiln_package_target(const kiln_package_t* package) {
  return package == nullptr ? "" : package->target.c_str();
}

const char* kiln_package_digest(const kiln_package_t* package) {
  return package == nullptr ? "" : package->package->digest().c_str();
}

void kiln_package_release(kiln_package_t* package) { delete package; }

kiln_status_t kiln_session_create(kiln_package_t* package, int num_threads, kiln_session_t** out_session) {
  if (package == nullptr || out_session == nullptr) {
    return Fail(KILN_INVALID_ARGUMENT, "kiln_session_create: null argument");
  }
  if (num_threads < 0) return Fail(KILN_INVALID_ARGUMENT, Cat("kiln_session_create: ", num_threads, " threads"));
  return NewSession(package, num_threads, {}, out_session);
}

int kiln_session_num_inputs(const kiln_session_t* session) {
  return session == nullptr ? 0 : session->session->num_inputs();
}

int kiln_session_num_outputs(const kiln_session_t* session) {
  return session == nullptr ? 0 : session->session->num_outputs();
}

const char* kiln_session_input_name(const kiln_session_t* session, int index) {
  if (session == nullptr || index < 0 || index >= session->session->num_inputs()) return nullptr;
  return session->session->input_info(index).name.c_str();
}

const char* kiln_session_output_name(const kiln_session_t* session, int index) {
  if (session == nullptr || index < 0 || index >= session->session->num_outputs()) return nullptr;
  return session->session->output_info(index).name.c_str();
}

kiln_status_t kiln_session_input_info(const kiln_session_t* session, int index, kiln_dtype_t* dtype,
                                      int64_t* dims, int* rank) {
  if (session == nullptr) return Fail(KILN_INVALID_ARGUMENT, "kiln_session_input_info: null session");
  if (index < 0 || index >= session->session->num_inputs()) {
    return Fail(KILN_OUT_OF_RANGE, Cat("input index ", index, " out of range"));
  }
  return TensorInfo(session->session->input_info(index), dtype, dims, rank);
}

kiln_status_t kiln_session_set_input(kiln_session_t* session, const char* name, const void* data, size_t bytes) {
  if (session == nullptr || name == nullptr) return Fail(KILN_INVALID_ARGUMENT, "kiln_session_set_input: null argument");
  return FromStatus(session->session->SetInput(name, data, bytes));
}

kiln_status_t kiln_session_bind_input(kiln_session_t* session, const char* name, const void* data, size_t bytes) {
  if (session == nullptr || name == nullptr) {
    return Fail(KILN_INVALID_ARGUMENT, "kiln_session_bind_input: null argument");
  }
  return FromStatus(session->session->BindInput(name, data, bytes));
}

kiln_status_t kiln_session_bind_output(kiln_session_t* session, int index, void* data, size_t bytes) {
  if (session == nullptr) return Fail(KILN_INVALID_ARGUMENT, "kiln_session_bind_output: null session");
  return FromStatus(session->session->BindOutput(index, data, bytes));
}

kiln_status_t kiln_session_run(kiln_session_t* session) {
  if (session == nullptr) return Fail(KILN_INVALID_ARGUMENT, "kiln_session_run: null session");
  return FromStatus(session->session->Run());
}

kiln_status_t kiln_session_flush_denormals(kiln_session_t* session, int flush) {
  if (session == nullptr) return Fail(KILN_INVALID_ARGUMENT, "kiln_session_flush_denormals: null session");
  session->session->set_flush_denormals(flush != 0);
  return KILN_OK;
}

kiln_status_t kiln_session_output(const kiln_session_t* session, int index, const void** data, size_t* bytes,
                                  kiln_dtype_t* dtype, int64_t* dims, int* rank) {
  if (session == nullptr) return Fail(KILN_INVALID_ARGUMENT, "kiln_session_output: null session");
  if (index < 0 || index >= session->session->num_outputs()) {
    return Fail(KILN_OUT_OF_RANGE, Cat("output index ", index, " out of range"));
  }
  kiln_status_t s = TensorInfo(session->session->output_info(index), dtype, dims, rank);
  if (s != KILN_OK) return s;
  if (data != nullptr) *data = session->session->OutputData(index);
  if (bytes != nullptr) *bytes = session->session->OutputBytes(index);
  return KILN_OK;
}

void kiln_session_release(kiln_session_t* session) { delete session; }

kiln_device_t kiln_package_device(const kiln_package_t* package, int* sm) {
  const bool cuda = package != nullptr && package->package->is_cuda();
  if (sm != nullptr) *sm = cuda ? package->package->manifest().cuda.sm : 0;
  return cuda ? KILN_DEVICE_CUDA : KILN_DEVICE_CPU;
}

kiln_status_t kiln_session_create_cuda(kiln_package_t* package, int device, void* stream,
                                       kiln_session_t** out_session) {
  if (package == nullptr || out_session == nullptr) {
    return Fail(KILN_INVALID_ARGUMENT, "kiln_session_create_cuda: null argument");
  }
  *out_session = nullptr;
  if (!package->package->is_cuda()) {
    return Fail(KILN_FAILED_PRECONDITION, Cat("kiln_session_create_cuda: package '", package->package->name(),
                                              "' is for the CPU (", package->target, "), not a CUDA GPU"));
  }
  kiln::runtime::CudaSessionOptions cuda;
  cuda.device = device;
  cuda.stream = stream;
  return NewSession(package, 1, cuda, out_session);
}

kiln_status_t kiln_session_bind_input_device(kiln_session_t* session, const char* name, kiln_device_ptr_t data,
                                             size_t bytes) {
  if (session == nullptr || name == nullptr) {
    return Fail(KILN_INVALID_ARGUMENT, "kiln_session_bind_input_device: null argument");
  }
  return FromStatus(session->session->BindInputDevice(name, data, bytes));
}

kiln_status_t kiln_session_bind_output_device(kiln_session_t* session, int index, kiln_device_ptr_t data,
                                              size_t bytes) {
  if (session == nullptr) return Fail(KILN_INVALID_ARGUMENT, "kiln_session_bind_output_device: null session");
  return FromStatus(session->session->BindOutputDevice(index, data, bytes));
}

kiln_status_t kiln_session_keep_output_on_device(kiln_session_t* session, int index, int keep) {
  if (session == nullptr) return Fail(KILN_INVALID_ARGUMENT, "kiln_session_keep_output_on_device: null session");
  return FromStatus(session->session->KeepOutputOnDevice(index, keep != 0));
}

kiln_status_t kiln_session_output_device(const kiln_session_t* session, int index, kiln_device_ptr_t* data) {
  if (session == nullptr || data == nullptr) {
    return Fail(KILN_INVALID_ARGUMENT, "kiln_session_output_device: null argument");
  }
  auto ptr = session->session->OutputDevicePtr(index);
  if (!ptr.ok()) return FromStatus(ptr.status());
  *data = *ptr;
  return KILN_OK;
}

kiln_status_t kiln_session_run_async(kiln_session_t* session) {
  if (session == nullptr) return Fail(KILN_INVALID_ARGUMENT, "kiln_session_run_async: null session");
  return FromStatus(session->session->RunAsync());
}

void* kiln_session_cuda_stream(const kiln_session_t* session) {
  return session == nullptr ? nullptr : session->session->cuda_stream();
}

}  // extern "C"
