// One execution context for a package: bound inputs, owned outputs, the arena,
// and the kernel steps to run over them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "client/runtime/package_reader.h"
#include "client/runtime/status.h"
#include "client/runtime/thread_pool.h"

namespace kiln::runtime {

// A session owns 64-byte aligned memory for every INPUT and OUTPUT buffer and
// the SCRATCH arena (manifest.arena_bytes); CONSTANT buffers point into the
// package's weights. The package's code object is loaded once per Package and
// shared by its sessions. Run() executes the steps in order, each over all its
// tasks [0, num_tasks), split across the pool's threads. A session is used by
// one thread at a time; several sessions may share a package and a pool.
class Session {
 public:
  // `pool` may be null (run on the calling thread) and must outlive the session.
  static Result<std::unique_ptr<Session>> Create(std::shared_ptr<const Package> package, ThreadPool* pool);
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
  Status BindOutput(int index, void* data, size_t bytes);
  // FAILED_PRECONDITION if an input was never bound. With `step_seconds`
  // (resized to the number of steps), each step's wall time is added to its
  // entry: the profile `kiln run --profile` prints by fusion group.
  Status Run(std::vector<double>* step_seconds = nullptr);
  // The manifest's group of step `index` (PackageStep.group).
  int step_group(int index) const { return package_->manifest().steps[index].group; }
  int num_steps() const { return static_cast<int>(steps_.size()); }

  int num_inputs() const { return static_cast<int>(package_->manifest().inputs.size()); }
  int num_outputs() const { return static_cast<int>(package_->manifest().outputs.size()); }
  const ManifestTensor& input_info(int index) const { return package_->manifest().inputs[index]; }
  const ManifestTensor& output_info(int index) const { return package_->manifest().outputs[index]; }
  // Valid after Run(), until the next Run() or the session's end. index must be
  // in [0, num_outputs()).
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
  // Points buffer `index` at `data` and every step argument naming it.
  void Rebind(int index, void* data);

  std::shared_ptr<const Package> package_;
  ThreadPool* pool_ = nullptr;
  std::vector<void*> buffers_;           // current address of every manifest buffer
  std::vector<void*> own_buffers_;       // the session's own memory for each (null for constants)
  std::vector<std::pair<void*, int64_t>> owned_;  // allocations to free, with sizes
  std::vector<bool> input_bound_;
  std::vector<Step> steps_;
};

}  // namespace kiln::runtime
