// The CUDA half of a Session: one device arena, the package's steps launched
// in order on one stream, inputs copied to the device and outputs back, or
// read and written in place in device memory the caller owns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "client/runtime/cuda_driver.h"
#include "client/runtime/cuda_module.h"
#include "client/runtime/package_reader.h"
#include "client/runtime/status.h"

namespace kiln::runtime {

// Buffers are the manifest's, by index; Session checks names, sizes and
// kinds before it calls here. The arena (PackageCuda.arena_bytes, zeroed
// once) holds every INPUT, OUTPUT and SCRATCH buffer at its planned offset;
// CONSTANT buffers are the package's weights on the device (CudaModule).
//
// Where a buffer's data is:
//   INPUT   SetInput: copied into the session's pinned host memory, and from
//           there to its arena slot at each run; BindHost: copied from the
//           caller's host memory at each run; BindDevice: the caller's device
//           memory, read in place.
//   OUTPUT  by default: the arena slot, copied to the session's pinned host
//           memory after each run; BindHost: copied to the caller's host
//           memory instead; BindDevice: written in place in the caller's
//           device memory; KeepOnDevice: left in the arena slot.
// A run: host-to-device copies, every step's kernel (steps of zero blocks
// are skipped), device-to-host copies, all in order on the stream; Run waits
// for the stream when asked to. Before a run whose arguments involve the
// caller's device memory, every step's arguments are checked not to overlap
// (INVALID_ARGUMENT): the kernels assume they do not. Every driver call runs
// with the module's context pushed, so any thread (one at a time) may use the
// session.
class CudaSession {
 public:
  // `stream`: a stream of the module's context that the caller owns and
  // keeps alive, or null for one the session creates (non-blocking).
  static Result<std::unique_ptr<CudaSession>> Create(std::shared_ptr<const Package> package,
                                                     const CudaModule* module, cu::Stream stream);
  ~CudaSession();
  CudaSession(const CudaSession&) = delete;
  CudaSession& operator=(const CudaSession&) = delete;

  // Input buffer `buffer` from the caller's `bytes` bytes (copied now).
  Status SetInput(int buffer, const void* data, size_t bytes);
  // Input buffer `buffer` read from the caller's host memory at each run.
  void BindHostInput(int buffer, const void* data);
  // Output buffer `buffer` copied to the caller's host memory after each
  // run; null: to the session's.
  void BindHostOutput(int buffer, void* data);
  // Input or output buffer `buffer` in the caller's device memory `data`
  // (`what` names it in messages). INVALID_ARGUMENT when `data` is not
  // aligned to the plan's buffer_alignment or [data, data + size) is not
  // inside one allocation the driver knows. data 0 returns an output to the
  // session's memory (copied to the host).
  Status BindDevice(int buffer, cu::DevicePtr data, const std::string& what);
  // Output buffer `buffer` left in the arena after each run (true), or
  // copied to the session's host memory (false).
  void KeepOnDevice(int buffer, bool keep);

  // One run. `wait`: return when the stream has finished it (outputs are
  // then on the host); else return once it is enqueued. `step_seconds`
  // (needs `wait`): each step's device time, from events, added.
  Status Run(bool wait, std::vector<double>* step_seconds);

  // The host copy of buffer `buffer` (after a run that waited), or null
  // when it is not kept on the host (in device memory only).
  const void* HostData(int buffer) const { return buffers_[static_cast<size_t>(buffer)].host; }
  // Where the kernels find buffer `buffer` in device memory.
  cu::DevicePtr DeviceData(int buffer) const { return buffers_[static_cast<size_t>(buffer)].device; }
  cu::Stream stream() const { return stream_; }
  const CudaModule& module() const { return *module_; }

 private:
  struct Buffer {
    int64_t bytes = 0;
    cu::DevicePtr own_device = 0;  // its arena slot, or its place in the weights
    void* own_host = nullptr;      // INPUT and OUTPUT: pinned host memory of the session
    cu::DevicePtr device = 0;      // where kernels find it now
    void* host = nullptr;          // its host side now (null: none)
    bool copy_in = false;          // host -> device before the steps
    bool copy_out = false;         // device -> host after the steps
    bool caller_device = false;    // `device` is the caller's memory
  };
  struct Step {
    cu::Function function = nullptr;
    ManifestLaunch launch;
    std::vector<int> buffers;           // manifest buffer indices
    std::vector<cu::DevicePtr> values;  // their device addresses now
    std::vector<void*> params;          // cuLaunchKernel's: &values[i]
  };
  explicit CudaSession(const CudaModule* module) : module_(module), driver_(module->driver()) {}
  // Points buffer `index` at `device`, in every step that takes it.
  void SetDevice(int index, cu::DevicePtr device);
  // INVALID_ARGUMENT naming the first step whose arguments overlap.
  Status CheckArgumentsDisjoint() const;
  // Waits until the last run has read the session's pinned input memory.
  Status WaitForInputCopies();

  std::shared_ptr<const Package> package_;
  const CudaModule* module_;
  const CudaDriver& driver_;
  cu::DevicePtr arena_ = 0;
  cu::Stream stream_ = nullptr;
  bool own_stream_ = false;
  cu::Event inputs_read_ = nullptr;   // recorded after a run's host-to-device copies
  bool inputs_pending_ = false;       // a run may still be copying from pinned memory
  std::vector<cu::Event> step_events_;  // profiling: before each step, and after the last
  std::vector<Buffer> buffers_;
  std::vector<Step> steps_;
  bool check_overlap_ = false;  // the caller's device memory changed since the last check
};

}  // namespace kiln::runtime
