// CudaSession: the device arena, bindings, and a run on one stream.
#include "client/runtime/cuda_session.h"

#include <cstring>

namespace kiln::runtime {
namespace {

std::string Hex(uint64_t v) { return Cat("0x", std::hex, v); }

}  // namespace

Result<std::unique_ptr<CudaSession>> CudaSession::Create(std::shared_ptr<const Package> package,
                                                         const CudaModule* module, cu::Stream stream) {
  const Manifest& m = package->manifest();
  const CudaEntryPoints& cu = module->driver().api();
  std::unique_ptr<CudaSession> s(new CudaSession(module));
  s->package_ = package;
  const std::string ctx = Cat("package '", package->name(), "' on ", module->description());
  ScopedCudaContext scope(s->driver_, module->context());
  RT_RETURN_IF_ERROR(scope.status());

  if (stream != nullptr) {
    s->stream_ = stream;
  } else {
    cu::Stream own = nullptr;
    RT_RETURN_IF_ERROR(s->driver_.Check(cu.cuStreamCreate(&own, cu::kStreamNonBlocking), "cuStreamCreate"));
    s->stream_ = own;
    s->own_stream_ = true;
  }
  cu::Event event = nullptr;
  RT_RETURN_IF_ERROR(s->driver_.Check(cu.cuEventCreate(&event, cu::kEventDisableTiming), "cuEventCreate"));
  s->inputs_read_ = event;
  const auto arena_bytes = static_cast<size_t>(m.cuda.arena_bytes);
  if (arena_bytes > 0) {
    // Handles are kept only once made: the destructor frees what is kept.
    cu::DevicePtr arena = 0;
    RT_RETURN_IF_ERROR(s->driver_.Check(cu.cuMemAlloc(&arena, arena_bytes),
                                        Cat(ctx, ": cuMemAlloc of the ", arena_bytes, "-byte device arena")));
    s->arena_ = arena;
    // Zeroed as the CPU arena is, so that no run depends on an earlier one's
    // bytes; on the session's stream, which orders it before every run.
    RT_RETURN_IF_ERROR(s->driver_.Check(cu.cuMemsetD8Async(s->arena_, 0, arena_bytes, s->stream_),
                                        "cuMemsetD8Async (the device arena)"));
  }

  s->buffers_.resize(m.buffers.size());
  for (size_t i = 0; i < m.buffers.size(); ++i) {
    const ManifestBuffer& mb = m.buffers[i];
    Buffer& b = s->buffers_[i];
    b.bytes = mb.size_bytes;
    if (mb.kind == ManifestBuffer::kConstant) {
      b.own_device = module->weights() + static_cast<cu::DevicePtr>(mb.offset);
      b.host = const_cast<uint8_t*>(package->weights()) + mb.offset;
    } else {
      b.own_device = s->arena_ + static_cast<cu::DevicePtr>(mb.offset);
    }
    b.device = b.own_device;
    if (mb.kind == ManifestBuffer::kInput || mb.kind == ManifestBuffer::kOutput) {
      // Pinned, so that the copies run asynchronously at full speed.
      void* pinned = nullptr;
      RT_RETURN_IF_ERROR(s->driver_.Check(cu.cuMemAllocHost(&pinned, static_cast<size_t>(b.bytes > 0 ? b.bytes : 1)),
                                          Cat(ctx, ": cuMemAllocHost of ", b.bytes, " bytes for buffer ", i)));
      b.own_host = pinned;
      std::memset(b.own_host, 0, static_cast<size_t>(b.bytes));
      b.host = b.own_host;
      b.copy_out = mb.kind == ManifestBuffer::kOutput;
    }
  }

  s->steps_.resize(m.steps.size());
  for (size_t i = 0; i < m.steps.size(); ++i) {
    Step& step = s->steps_[i];
    step.function = module->function(static_cast<int>(i));
    step.launch = m.steps[i].launch;
    for (int32_t a : m.steps[i].args) {
      step.buffers.push_back(a);
      step.values.push_back(s->buffers_[static_cast<size_t>(a)].device);
    }
    for (cu::DevicePtr& v : step.values) step.params.push_back(&v);
  }
  return s;
}

CudaSession::~CudaSession() {
  const CudaEntryPoints& cu = driver_.api();
  ScopedCudaContext scope(driver_, module_->context());
  if (!scope.status().ok()) return;
  // Work in flight may still read or write what is freed below.
  if (stream_ != nullptr) (void)cu.cuStreamSynchronize(stream_);
  for (cu::Event e : step_events_) {
    if (e != nullptr) (void)cu.cuEventDestroy(e);
  }
  if (inputs_read_ != nullptr) (void)cu.cuEventDestroy(inputs_read_);
  if (own_stream_) (void)cu.cuStreamDestroy(stream_);
  for (Buffer& b : buffers_) {
    if (b.own_host != nullptr) (void)cu.cuMemFreeHost(b.own_host);
  }
  if (arena_ != 0) (void)cu.cuMemFree(arena_);
}

void CudaSession::SetDevice(int index, cu::DevicePtr device) {
  buffers_[static_cast<size_t>(index)].device = device;
  for (Step& step : steps_) {
    for (size_t a = 0; a < step.buffers.size(); ++a) {
      if (step.buffers[a] == index) step.values[a] = device;
    }
  }
}

Status CudaSession::WaitForInputCopies() {
  if (!inputs_pending_) return OkStatus();
  ScopedCudaContext scope(driver_, module_->context());
  RT_RETURN_IF_ERROR(scope.status());
  RT_RETURN_IF_ERROR(driver_.Check(driver_.api().cuEventSynchronize(inputs_read_), "cuEventSynchronize"));
  inputs_pending_ = false;
  return OkStatus();
}

Status CudaSession::SetInput(int buffer, const void* data, size_t bytes) {
  RT_RETURN_IF_ERROR(WaitForInputCopies());
  Buffer& b = buffers_[static_cast<size_t>(buffer)];
  if (bytes > 0) std::memcpy(b.own_host, data, bytes);
  b.host = b.own_host;
  b.copy_in = true;
  if (b.caller_device) check_overlap_ = true;
  b.caller_device = false;
  SetDevice(buffer, b.own_device);
  return OkStatus();
}

void CudaSession::BindHostInput(int buffer, const void* data) {
  Buffer& b = buffers_[static_cast<size_t>(buffer)];
  b.host = const_cast<void*>(data);
  b.copy_in = true;
  if (b.caller_device) check_overlap_ = true;
  b.caller_device = false;
  SetDevice(buffer, b.own_device);
}

void CudaSession::BindHostOutput(int buffer, void* data) {
  Buffer& b = buffers_[static_cast<size_t>(buffer)];
  b.host = data != nullptr ? data : b.own_host;
  b.copy_out = true;
  if (b.caller_device) check_overlap_ = true;
  b.caller_device = false;
  SetDevice(buffer, b.own_device);
}

void CudaSession::KeepOnDevice(int buffer, bool keep) {
  Buffer& b = buffers_[static_cast<size_t>(buffer)];
  b.host = keep ? nullptr : b.own_host;
  b.copy_out = !keep;
  if (b.caller_device) check_overlap_ = true;
  b.caller_device = false;
  SetDevice(buffer, b.own_device);
}

Status CudaSession::BindDevice(int buffer, cu::DevicePtr data, const std::string& what) {
  Buffer& b = buffers_[static_cast<size_t>(buffer)];
  const bool input = package_->manifest().buffers[static_cast<size_t>(buffer)].kind == ManifestBuffer::kInput;
  if (data == 0) {
    if (input) return InvalidArgumentError(Cat(what, ": null device pointer"));
    KeepOnDevice(buffer, false);
    return OkStatus();
  }
  const int64_t align = package_->manifest().cuda.buffer_alignment;
  if (data % static_cast<cu::DevicePtr>(align) != 0) {
    return InvalidArgumentError(Cat(what, ": device pointer ", Hex(data), " is not aligned to ", align,
                                    " bytes, as the package's kernels assume (cuMemAlloc and cudaMalloc give that)"));
  }
  {
    const CudaEntryPoints& cu = driver_.api();
    ScopedCudaContext scope(driver_, module_->context());
    RT_RETURN_IF_ERROR(scope.status());
    cu::DevicePtr start = 0;
    size_t size = 0;
    const cu::Result r1 = cu.cuPointerGetAttribute(&start, cu::kPointerAttributeRangeStartAddr, data);
    const cu::Result r2 = r1 != cu::kSuccess ? r1 : cu.cuPointerGetAttribute(&size, cu::kPointerAttributeRangeSize, data);
    if (r2 != cu::kSuccess) {
      return InvalidArgumentError(Cat(what, ": ", Hex(data), " is not device memory the CUDA driver knows (",
                                      "cuPointerGetAttribute: ", driver_.Describe(r2), ")"));
    }
    if (data + static_cast<cu::DevicePtr>(b.bytes) > start + size) {
      return InvalidArgumentError(Cat(what, ": its ", b.bytes, " bytes at ", Hex(data), " run past the end of the ",
                                      size, "-byte allocation at ", Hex(start)));
    }
    // Memory of another GPU would be read through peer access at best, and
    // fault at worst: refused.
    int ordinal = -1;
    if (cu.cuPointerGetAttribute(&ordinal, cu::kPointerAttributeDeviceOrdinal, data) == cu::kSuccess &&
        ordinal != module_->ordinal()) {
      return InvalidArgumentError(Cat(what, ": ", Hex(data), " is memory of CUDA device ", ordinal,
                                      "; this session runs on ", module_->description()));
    }
  }
  if (input) {
    // Runs wait for nothing of the caller's: a bound input is read in place.
    b.copy_in = false;
  } else {
    b.copy_out = false;
  }
  b.host = nullptr;
  b.caller_device = true;
  check_overlap_ = true;
  SetDevice(buffer, data);
  return OkStatus();
}

Status CudaSession::CheckArgumentsDisjoint() const {
  const Manifest& m = package_->manifest();
  for (size_t s = 0; s < steps_.size(); ++s) {
    const Step& step = steps_[s];
    std::vector<DeviceRange> ranges;
    for (size_t a = 0; a < step.buffers.size(); ++a) {
      const uint64_t begin = step.values[a];
      ranges.push_back(DeviceRange{0, begin, begin + static_cast<uint64_t>(buffers_[step.buffers[a]].bytes)});
    }
    const auto [x, y] = FirstOverlap(ranges);
    if (x < 0) continue;
    auto name = [&](int a) {
      const ManifestBuffer& b = m.buffers[static_cast<size_t>(step.buffers[static_cast<size_t>(a)])];
      return Cat(a, " ('", b.name, "' at ", Hex(step.values[static_cast<size_t>(a)]), ", ", b.size_bytes, " bytes)");
    };
    return InvalidArgumentError(Cat("step ", s, " ('", m.steps[s].symbol, "'): arguments ", name(x), " and ", name(y),
                                    " overlap in device memory, and its kernel assumes they do not: bind them to "
                                    "separate memory"));
  }
  return OkStatus();
}

Status CudaSession::Run(bool wait, std::vector<double>* step_seconds) {
  if (step_seconds != nullptr && !wait) return InternalError("a profiled run must wait for its stream");
  if (check_overlap_) {
    RT_RETURN_IF_ERROR(CheckArgumentsDisjoint());
    check_overlap_ = false;
  }
  const CudaEntryPoints& cu = driver_.api();
  ScopedCudaContext scope(driver_, module_->context());
  RT_RETURN_IF_ERROR(scope.status());
  if (step_seconds != nullptr && step_events_.empty()) {
    step_events_.resize(steps_.size() + 1, nullptr);
    for (cu::Event& e : step_events_) {
      cu::Event made = nullptr;
      RT_RETURN_IF_ERROR(driver_.Check(cu.cuEventCreate(&made, cu::kEventDefault), "cuEventCreate"));
      e = made;
    }
  }

  bool copied_pinned = false;
  for (size_t i = 0; i < buffers_.size(); ++i) {
    const Buffer& b = buffers_[i];
    if (!b.copy_in || b.bytes == 0) continue;
    RT_RETURN_IF_ERROR(driver_.Check(cu.cuMemcpyHtoDAsync(b.device, b.host, static_cast<size_t>(b.bytes), stream_),
                                     Cat("cuMemcpyHtoDAsync (input buffer ", i, ", ", b.bytes, " bytes)")));
    copied_pinned = copied_pinned || b.host == b.own_host;
  }
  RT_RETURN_IF_ERROR(driver_.Check(cu.cuEventRecord(inputs_read_, stream_), "cuEventRecord"));
  inputs_pending_ = copied_pinned;

  const Manifest& m = package_->manifest();
  for (size_t i = 0; i < steps_.size(); ++i) {
    Step& step = steps_[i];
    if (step_seconds != nullptr) {
      RT_RETURN_IF_ERROR(driver_.Check(cu.cuEventRecord(step_events_[i], stream_), "cuEventRecord"));
    }
    if (step.launch.blocks == 0) continue;
    const cu::Result launched = cu.cuLaunchKernel(
        step.function, static_cast<unsigned>(step.launch.blocks), 1, 1, static_cast<unsigned>(step.launch.threads),
        1, 1, /*shared_bytes: static, in the kernel*/ 0, stream_, step.params.data(), nullptr);
    RT_RETURN_IF_ERROR(driver_.Check(
        launched, Cat("step ", i, " ('", m.steps[i].symbol, "'): cuLaunchKernel (", step.launch.blocks,
                      " blocks of ", step.launch.threads, " threads)")));
  }
  if (step_seconds != nullptr) {
    RT_RETURN_IF_ERROR(driver_.Check(cu.cuEventRecord(step_events_.back(), stream_), "cuEventRecord"));
  }

  for (size_t i = 0; i < buffers_.size(); ++i) {
    const Buffer& b = buffers_[i];
    if (!b.copy_out || b.bytes == 0) continue;
    RT_RETURN_IF_ERROR(driver_.Check(cu.cuMemcpyDtoHAsync(b.host, b.device, static_cast<size_t>(b.bytes), stream_),
                                     Cat("cuMemcpyDtoHAsync (output buffer ", i, ", ", b.bytes, " bytes)")));
  }
  if (!wait) return OkStatus();
  // Kernel faults surface here (sticky: the context is unusable after one).
  RT_RETURN_IF_ERROR(driver_.Check(cu.cuStreamSynchronize(stream_), "cuStreamSynchronize (the run)"));
  inputs_pending_ = false;
  if (step_seconds != nullptr) {
    step_seconds->resize(steps_.size(), 0.0);
    for (size_t i = 0; i < steps_.size(); ++i) {
      float ms = 0;
      RT_RETURN_IF_ERROR(
          driver_.Check(cu.cuEventElapsedTime(&ms, step_events_[i], step_events_[i + 1]), "cuEventElapsedTime"));
      (*step_seconds)[i] += static_cast<double>(ms) / 1e3;
    }
  }
  return OkStatus();
}

}  // namespace kiln::runtime
