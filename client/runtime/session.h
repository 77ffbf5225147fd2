// One execution context for a package: bound inputs, owned outputs, the arena,
// and the kernel steps to run over them, on the CPU or on a CUDA GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "client/runtime/cuda_session.h"
#include "client/runtime/package_reader.h"
#include "client/runtime/status.h"
#include "client/runtime/thread_pool.h"

namespace kiln::runtime {

// Where a CUDA package's session runs.
struct CudaSessionOptions {
  int device = 0;  // CUDA device ordinal
  // A CUstream (a cudaStream_t) of that device's primary context, which the
  // caller owns and keeps alive while the session lives; null: the session
  // creates its own.
  void* stream = nullptr;
};

// A session owns 64-byte aligned memory for every INPUT and OUTPUT buffer and
// the SCRATCH arena (manifest.arena_bytes); CONSTANT buffers point into the
// package's weights. The package's code object is loaded once per Package and
// shared by its sessions. Run() executes the steps in order, each over all its
// tasks [0, num_tasks), split across the pool's threads. A session is used by
// one thread at a time; several sessions may share a package and a pool.
//
// A session of a CUDA package (package.is_cuda()) runs on a GPU instead
// (CudaSession: one device arena, one stream): the same calls work with host
// memory, copying inputs to the device and outputs back at each run, and the
// *Device calls let inputs and outputs stay in device memory. The pool is
// not used.
class Session {
 public:
  // `pool` may be null (run on the calling thread) and must outlive the session.
  // `cuda`: a CUDA package's device and stream; a CPU package takes only
  // the defaults (FAILED_PRECONDITION otherwise).
  static Result<std::unique_ptr<Session>> Create(std::shared_ptr<const Package> package, ThreadPool* pool,
                                                 const CudaSessionOptions& cuda = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Copies `bytes` bytes into the input named `name`. NOT_FOUND for an unknown
  // name, INVALID_ARGUMENT if the size differs from the manifest's.
  Status SetInput(const std::string& name, const void* data, size_t bytes);
  // Zero-copy: runs read the input named `name` from `data` itself until it is
  // bound or set again. Same checks as SetInput, and `data` must be aligned to
  // the element size (INVALID_ARGUMENT). Kernels never write inputs.
  Status BindInput(const std::string& name, const void* data, size_t bytes);
  // Zero-copy: runs write output `index` into `data` (null: back into the
  // session's own memory). FAILED_PRECONDITION for an output that is not
  // computed into a buffer of its own (an input or a constant passed through).
  // On the CPU, INVALID_ARGUMENT where `data` overlaps the memory of another
  // output or of an input (bound or the session's), as BindInput does for an
  // input's memory that overlaps an output's: a run never reads and writes
  // the same bytes through two buffers.
  Status BindOutput(int index, void* data, size_t bytes);
  // FAILED_PRECONDITION if an input was never bound. With `step_seconds`
  // (resized to the number of steps), each step's wall time (on a GPU: its
  // device time) is added to its entry: the profile `kiln run --profile`
  // prints by fusion group. On a GPU, returns when the run has finished.
  Status Run(std::vector<double>* step_seconds = nullptr);
  // Whether a CPU session's runs treat denormal floats as zero
  // (float_control.h): true by default; false keeps IEEE gradual underflow.
  // Runs set the mode on their threads and leave the caller's as it was. A
  // CUDA session's kernels are unaffected.
  void set_flush_denormals(bool flush) { flush_denormals_ = flush; }
  bool flush_denormals() const { return flush_denormals_; }

  // ---- CUDA sessions only (FAILED_PRECONDITION for a CPU package) ----
  bool on_cuda() const { return cuda_ != nullptr; }
  // Zero-copy on the device: kernels read the input named `name` from the
  // caller's device memory `data` (a CUdeviceptr) at every run, until it is
  // bound or set again. `bytes` must be the input's size; `data` must be
  // aligned to the package's device buffer alignment (256: what cuMemAlloc
  // gives) and lie inside one allocation (INVALID_ARGUMENT).
  Status BindInputDevice(const std::string& name, uint64_t data, size_t bytes);
  // Kernels write output `index` straight into the caller's device memory
  // `data` (same rules), and runs copy nothing of it to the host; data 0
  // returns it to the session's memory. FAILED_PRECONDITION as BindOutput.
  Status BindOutputDevice(int index, uint64_t data, size_t bytes);
  // keep: runs leave output `index` in the session's device memory
  // (OutputDevicePtr), copying nothing to the host; false: copied back (the
  // default). Undoes a binding. FAILED_PRECONDITION as BindOutput.
  Status KeepOutputOnDevice(int index, bool keep);
  // Enqueues a run on the session's stream and returns without waiting:
  // outputs are ready, and the caller's bound memory free to change, once
  // the stream has finished it (cuStreamSynchronize). A CPU session runs.
  Status RunAsync();
  // Where output `index` is in device memory after a run: the session's
  // (kept or copied from) or the caller's bound memory.
  Result<uint64_t> OutputDevicePtr(int index) const;
  // The CUstream runs go on (null for a CPU session).
  void* cuda_stream() const;
  // "cpu", or the GPU: "CUDA device 0 (NVIDIA H100 80GB HBM3, sm_90)".
  std::string device() const { return cuda_ != nullptr ? cuda_->module().description() : "cpu"; }
  // The manifest's group of step `index` (PackageStep.group).
  int step_group(int index) const { return package_->manifest().steps[index].group; }
  int num_steps() const { return static_cast<int>(package_->manifest().steps.size()); }

  int num_inputs() const { return static_cast<int>(package_->manifest().inputs.size()); }
  int num_outputs() const { return static_cast<int>(package_->manifest().outputs.size()); }
  const ManifestTensor& input_info(int index) const { return package_->manifest().inputs[index]; }
  const ManifestTensor& output_info(int index) const { return package_->manifest().outputs[index]; }
  // Valid after Run(), until the next Run() or the session's end. index must be
  // in [0, num_outputs()). Null for an output of a CUDA session that is not
  // on the host (bound to or kept in device memory).
  const void* OutputData(int index) const;
  size_t OutputBytes(int index) const;
  const Package& package() const { return *package_; }

 private:
  using Kernel = void (*)(void* const* args, int64_t task_begin, int64_t task_end);
  struct Step {
    Kernel kernel;
    std::vector<int> arg_buffers;  // manifest buffer indices
    std::vector<void*> args;       // their current addresses
    int64_t num_tasks;
  };
  Session() = default;
  // The input named `name` and the size check shared by SetInput and BindInput.
  Result<int> CheckInput(const std::string& name, const void* data, size_t bytes) const;
  // Output `index` if it has a buffer of its own (what binding needs).
  Status CheckBindableOutput(int index) const;
  // FAILED_PRECONDITION unless this is a CUDA session; `call` names the caller.
  Status CheckCuda(const char* call) const;
  // FAILED_PRECONDITION naming the first input never set or bound.
  Status CheckInputsBound() const;
  // INVALID_ARGUMENT if [data, data + bytes), bound to buffer `index`, would
  // overlap the memory of an output (or, where `writes`: of any input or
  // output) other than `index`: kernels take their buffers as noalias.
  Status CheckDisjointBinding(int index, const void* data, size_t bytes, bool writes) const;
  // Points buffer `index` at `data` and every step argument naming it.
  void Rebind(int index, void* data);

  std::shared_ptr<const Package> package_;
  ThreadPool* pool_ = nullptr;
  std::vector<void*> buffers_;           // current address of every manifest buffer
  std::vector<void*> own_buffers_;       // the session's own memory for each (null for constants)
  std::vector<std::pair<void*, int64_t>> owned_;  // allocations to free, with sizes
  std::vector<bool> input_bound_;
  bool flush_denormals_ = true;
  std::vector<Step> steps_;
  std::unique_ptr<CudaSession> cuda_;  // CUDA packages: the GPU half; the members above are unused
};

}  // namespace kiln::runtime
