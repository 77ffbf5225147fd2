// Session: buffer binding and step execution over the thread pool.
#include "client/runtime/session.h"

#include <sys/mman.h>

#include <chrono>
#include <cstdlib>
#include <cstring>

#include "client/runtime/float_control.h"

namespace kiln::runtime {
namespace {


// Large buffers come from mmap: zeroed lazily, so an unused arena costs nothing.
constexpr int64_t kMmapThreshold = int64_t{1} << 20;

void* AllocateZeroed(int64_t bytes) {
  if (bytes >= kMmapThreshold) {
    void* p = mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
  }
  size_t rounded = static_cast<size_t>((bytes + 63) / 64 * 64);
  if (rounded == 0) rounded = 64;
  void* p = std::aligned_alloc(64, rounded);
  if (p != nullptr) std::memset(p, 0, rounded);
  return p;
}

void FreeZeroed(void* p, int64_t bytes) {
  if (bytes >= kMmapThreshold) {
    munmap(p, static_cast<size_t>(bytes));
  } else {
    std::free(p);
  }
}

std::string Describe(const ManifestTensor& t) {
  std::string dims;
  for (int64_t d : t.dims) dims += (dims.empty() ? "" : ",") + std::to_string(d);
  return Cat(DataTypeName(t.dtype), "[", dims, "]");
}

}  // namespace

Result<std::unique_ptr<Session>> Session::Create(std::shared_ptr<const Package> package, ThreadPool* pool,
                                                 const CudaSessionOptions& cuda) {
  if (package == nullptr) return InvalidArgumentError("session: null package");
  const Manifest& m = package->manifest();
  std::unique_ptr<Session> s(new Session());
  s->package_ = package;
  s->pool_ = pool;
  s->input_bound_.assign(m.inputs.size(), false);
  if (package->is_cuda()) {
    RT_ASSIGN_OR_RETURN(const CudaModule* module, package->Cuda(cuda.device));
    RT_ASSIGN_OR_RETURN(s->cuda_, CudaSession::Create(package, module, static_cast<cu::Stream>(cuda.stream)));
    return s;
  }
  if (cuda.device != 0 || cuda.stream != nullptr) {
    return FailedPreconditionError(
        Cat("package '", package->name(), "' is for the CPU: it takes no CUDA device or stream"));
  }
  auto allocate = [&](int64_t bytes, const std::string& what) -> Result<void*> {
    void* p = AllocateZeroed(bytes);
    if (p == nullptr) {
      return ResourceExhaustedError(
          Cat("package '", package->name(), "': cannot allocate ", bytes, " bytes for ", what));
    }
    s->owned_.push_back({p, bytes});
    return p;
  };
  RT_ASSIGN_OR_RETURN(void* arena, allocate(m.arena_bytes, "the arena"));
  s->buffers_.resize(m.buffers.size(), nullptr);
  s->own_buffers_.resize(m.buffers.size(), nullptr);
  for (size_t i = 0; i < m.buffers.size(); ++i) {
    const ManifestBuffer& b = m.buffers[i];
    switch (b.kind) {
      case ManifestBuffer::kInput:
      case ManifestBuffer::kOutput: {
        RT_ASSIGN_OR_RETURN(s->buffers_[i], allocate(b.size_bytes, Cat("buffer ", i)));
        s->own_buffers_[i] = s->buffers_[i];
        break;
      }
      case ManifestBuffer::kConstant:
        // The kernels' ABI passes void* const*; constants are never written.
        s->buffers_[i] = const_cast<uint8_t*>(package->weights()) + b.offset;
        break;
      case ManifestBuffer::kScratch:
        s->buffers_[i] = static_cast<uint8_t*>(arena) + b.offset;
        break;
      default:
        return InternalError("unverified buffer kind");
    }
  }
  if (!m.steps.empty()) {
    RT_ASSIGN_OR_RETURN(const LoadedObject* object, package->Object());
    for (size_t i = 0; i < m.steps.size(); ++i) {
      const ManifestStep& ps = m.steps[i];
      auto fn = object->Lookup(ps.symbol);
      if (!fn.ok()) {
        return InvalidArgumentError(
            Cat("package '", package->name(), "': step ", i, ": kernel '", ps.symbol, "' is not in the code object"));
      }
      Step step;
      step.kernel = reinterpret_cast<Kernel>(*fn);
      step.num_tasks = ps.num_tasks;
      for (int a : ps.args) {
        step.arg_buffers.push_back(a);
        step.args.push_back(s->buffers_[a]);
      }
      s->steps_.push_back(std::move(step));
    }
  }
  return s;
}

Session::~Session() {
  for (const auto& [p, bytes] : owned_) FreeZeroed(p, bytes);
}

Result<int> Session::CheckInput(const std::string& name, const void* data, size_t bytes) const {
  const Manifest& m = package_->manifest();
  for (size_t i = 0; i < m.inputs.size(); ++i) {
    const ManifestTensor& t = m.inputs[i];
    if (t.name != name) continue;
    const int64_t expected = m.buffers[t.buffer].size_bytes;
    if (static_cast<int64_t>(bytes) != expected) {
      return InvalidArgumentError(
          Cat("input '", name, "': expected ", expected, " bytes (", Describe(t), "), got ", bytes));
    }
    if (bytes > 0 && data == nullptr) return InvalidArgumentError(Cat("input '", name, "': null data"));
    return static_cast<int>(i);
  }
  std::string names;
  for (const ManifestTensor& t : m.inputs) names += (names.empty() ? "" : ", ") + t.name;
  return NotFoundError(Cat("no input named '", name, "' (inputs: ", names, ")"));
}

void Session::Rebind(int index, void* data) {
  if (buffers_[index] == data) return;
  buffers_[index] = data;
  for (Step& step : steps_) {
    for (size_t a = 0; a < step.arg_buffers.size(); ++a) {
      if (step.arg_buffers[a] == index) step.args[a] = data;
    }
  }
}

Status Session::CheckDisjointBinding(int index, const void* data, size_t bytes, bool writes) const {
  const Manifest& m = package_->manifest();
  const auto* begin = static_cast<const uint8_t*>(data);
  const uint8_t* end = begin + bytes;
  for (size_t j = 0; j < m.buffers.size(); ++j) {
    const ManifestBuffer& b = m.buffers[j];
    const bool output = b.kind == ManifestBuffer::kOutput;
    const bool checked = output || (writes && b.kind == ManifestBuffer::kInput);
    if (static_cast<int>(j) == index || !checked) continue;
    const auto* other = static_cast<const uint8_t*>(buffers_[j]);
    if (other == nullptr || b.size_bytes == 0 || !(begin < other + b.size_bytes && other < end)) continue;
    return InvalidArgumentError(Cat(m.buffers[index].kind == ManifestBuffer::kOutput ? "output '" : "input '",
                                    m.buffers[index].name, "': memory at ", data, " (", bytes, " bytes) overlaps ",
                                    output ? "output '" : "input '", b.name, "' at ", buffers_[j], " (",
                                    b.size_bytes, " bytes): kernels read inputs while they write outputs"));
  }
  return OkStatus();
}

Status Session::SetInput(const std::string& name, const void* data, size_t bytes) {
  RT_ASSIGN_OR_RETURN(int i, CheckInput(name, data, bytes));
  const int buffer = input_info(i).buffer;
  if (cuda_ != nullptr) {
    RT_RETURN_IF_ERROR(cuda_->SetInput(buffer, data, bytes));
    input_bound_[i] = true;
    return OkStatus();
  }
  Rebind(buffer, own_buffers_[buffer]);
  if (bytes > 0) std::memcpy(buffers_[buffer], data, bytes);
  input_bound_[i] = true;
  return OkStatus();
}

Status Session::BindInput(const std::string& name, const void* data, size_t bytes) {
  RT_ASSIGN_OR_RETURN(int i, CheckInput(name, data, bytes));
  const ManifestTensor& t = input_info(i);
  const int64_t element = DataTypeSize(t.dtype);
  if (bytes > 0 && reinterpret_cast<uintptr_t>(data) % static_cast<uintptr_t>(element) != 0) {
    return InvalidArgumentError(
        Cat("input '", name, "': data at ", data, " is not aligned to its ", element, "-byte elements"));
  }
  if (cuda_ != nullptr) {
    if (bytes > 0) {
      cuda_->BindHostInput(t.buffer, data);
    } else {
      RT_RETURN_IF_ERROR(cuda_->SetInput(t.buffer, data, 0));
    }
    input_bound_[i] = true;
    return OkStatus();
  }
  if (bytes > 0) RT_RETURN_IF_ERROR(CheckDisjointBinding(t.buffer, data, bytes, false));
  // Kernels take void* const*, and never write an input buffer.
  Rebind(t.buffer, bytes > 0 ? const_cast<void*>(data) : own_buffers_[t.buffer]);
  input_bound_[i] = true;
  return OkStatus();
}

Status Session::CheckBindableOutput(int index) const {
  if (index < 0 || index >= num_outputs()) return OutOfRangeError(Cat("output index ", index, " out of range"));
  const Manifest& m = package_->manifest();
  const ManifestTensor& t = m.outputs[index];
  const ManifestBuffer& b = m.buffers[t.buffer];
  int sharing = 0;
  for (const ManifestTensor& o : m.outputs) sharing += o.buffer == t.buffer ? 1 : 0;
  if (b.kind != ManifestBuffer::kOutput || sharing > 1) {
    return FailedPreconditionError(Cat("output '", t.name, "' is not computed into a buffer of its own (",
                                       b.name.empty() ? "a shared buffer" : "buffer '" + b.name + "'",
                                       "); read it after the run instead of binding it"));
  }
  return OkStatus();
}

Status Session::BindOutput(int index, void* data, size_t bytes) {
  RT_RETURN_IF_ERROR(CheckBindableOutput(index));
  const Manifest& m = package_->manifest();
  const ManifestTensor& t = m.outputs[index];
  const ManifestBuffer& b = m.buffers[t.buffer];
  if (data == nullptr) {
    if (cuda_ != nullptr) {
      cuda_->BindHostOutput(t.buffer, nullptr);
    } else {
      Rebind(t.buffer, own_buffers_[t.buffer]);
    }
    return OkStatus();
  }
  if (static_cast<int64_t>(bytes) != b.size_bytes) {
    return InvalidArgumentError(
        Cat("output '", t.name, "': expected ", b.size_bytes, " bytes (", Describe(t), "), got ", bytes));
  }
  const int64_t element = DataTypeSize(t.dtype);
  if (reinterpret_cast<uintptr_t>(data) % static_cast<uintptr_t>(element) != 0) {
    return InvalidArgumentError(
        Cat("output '", t.name, "': data at ", data, " is not aligned to its ", element, "-byte elements"));
  }
  if (cuda_ != nullptr) {
    cuda_->BindHostOutput(t.buffer, data);
    return OkStatus();
  }
  RT_RETURN_IF_ERROR(CheckDisjointBinding(t.buffer, data, bytes, true));
  Rebind(t.buffer, data);
  return OkStatus();
}

Status Session::CheckCuda(const char* call) const {
  if (cuda_ != nullptr) return OkStatus();
  return FailedPreconditionError(
      Cat(call, ": package '", package_->name(), "' runs on the CPU; device memory is for CUDA packages"));
}

Status Session::BindInputDevice(const std::string& name, uint64_t data, size_t bytes) {
  RT_RETURN_IF_ERROR(CheckCuda("binding an input to device memory"));
  // The size check; `data` is not a host pointer, only its nullness counts.
  RT_ASSIGN_OR_RETURN(int i, CheckInput(name, reinterpret_cast<const void*>(static_cast<uintptr_t>(data)), bytes));
  const ManifestTensor& t = input_info(i);
  if (bytes == 0) {
    RT_RETURN_IF_ERROR(cuda_->SetInput(t.buffer, nullptr, 0));
  } else {
    RT_RETURN_IF_ERROR(cuda_->BindDevice(t.buffer, data, Cat("input '", name, "'")));
  }
  input_bound_[i] = true;
  return OkStatus();
}

Status Session::BindOutputDevice(int index, uint64_t data, size_t bytes) {
  RT_RETURN_IF_ERROR(CheckCuda("binding an output to device memory"));
  RT_RETURN_IF_ERROR(CheckBindableOutput(index));
  const ManifestTensor& t = output_info(index);
  const int64_t expected = package_->manifest().buffers[t.buffer].size_bytes;
  if (data != 0 && static_cast<int64_t>(bytes) != expected) {
    return InvalidArgumentError(
        Cat("output '", t.name, "': expected ", expected, " bytes (", Describe(t), "), got ", bytes));
  }
  return cuda_->BindDevice(t.buffer, data, Cat("output '", t.name, "'"));
}

Status Session::KeepOutputOnDevice(int index, bool keep) {
  RT_RETURN_IF_ERROR(CheckCuda("keeping an output on the device"));
  RT_RETURN_IF_ERROR(CheckBindableOutput(index));
  cuda_->KeepOnDevice(output_info(index).buffer, keep);
  return OkStatus();
}

Result<uint64_t> Session::OutputDevicePtr(int index) const {
  RT_RETURN_IF_ERROR(CheckCuda("an output's device memory"));
  if (index < 0 || index >= num_outputs()) return OutOfRangeError(Cat("output index ", index, " out of range"));
  return static_cast<uint64_t>(cuda_->DeviceData(output_info(index).buffer));
}

void* Session::cuda_stream() const { return cuda_ != nullptr ? static_cast<void*>(cuda_->stream()) : nullptr; }

Status Session::CheckInputsBound() const {
  for (int i = 0; i < num_inputs(); ++i) {
    if (!input_bound_[i]) {
      return FailedPreconditionError(Cat("input '", input_info(i).name, "' is not bound"));
    }
  }
  return OkStatus();
}

Status Session::RunAsync() {
  if (cuda_ == nullptr) return Run();
  RT_RETURN_IF_ERROR(CheckInputsBound());
  return cuda_->Run(/*wait=*/false, nullptr);
}

Status Session::Run(std::vector<double>* step_seconds) {
  RT_RETURN_IF_ERROR(CheckInputsBound());
  if (cuda_ != nullptr) return cuda_->Run(/*wait=*/true, step_seconds);
  if (step_seconds != nullptr) step_seconds->resize(steps_.size(), 0.0);
  const ScopedFloatControl float_control(WithDenormals(FloatControl(), flush_denormals_));
  for (size_t i = 0; i < steps_.size(); ++i) {
    const Step& step = steps_[i];
    if (step.num_tasks == 0) continue;
    auto start = step_seconds != nullptr ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
    void* const* args = step.args.data();
    if (pool_ != nullptr && pool_->num_threads() > 1 && step.num_tasks > 1) {
      Kernel kernel = step.kernel;
      pool_->ParallelFor(step.num_tasks, [kernel, args](int64_t b, int64_t e) { kernel(args, b, e); });
    } else {
      step.kernel(args, 0, step.num_tasks);
    }
    if (step_seconds != nullptr) {
      (*step_seconds)[i] += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
  }
  return OkStatus();
}

const void* Session::OutputData(int index) const {
  if (cuda_ != nullptr) return cuda_->HostData(output_info(index).buffer);
  return buffers_[output_info(index).buffer];
}

size_t Session::OutputBytes(int index) const {
  return static_cast<size_t>(package_->manifest().buffers[output_info(index).buffer].size_bytes);
}

}  // namespace kiln::runtime
