// A measurement process for a device that cannot share the worker's process:
// a CUDA GPU, whose driver does not survive a fork and whose context a
// faulting kernel destroys. The worker starts it as a fresh program
// (`kiln-worker --serve-device cuda:N`: exec'd, nothing inherited but two
// pipes), which opens the device once, describes it, and then measures the
// tasks it is sent, one at a time. A task that crashes it or outlives its
// deadline costs one typed result (RUNTIME_ERROR, TIMEOUT) and the process;
// the next task starts a new one. The worker's own process never loads the
// driver.
//
// Wire: each message is a little-endian uint32 length and that many bytes.
// Child -> parent first: a DeviceHello; then, per MeasureTask received, one
// MeasureResult.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kiln/v1/worker.pb.h"

namespace kiln::worker {

class DeviceProcess {
 public:
  struct Options {
    std::string executable = "/proc/self/exe";  // a kiln-worker (a bare name: on the PATH)
    std::string device;                         // "cuda:0"
    std::vector<std::string> extra_args;        // passed after --serve-device DEVICE
    absl::Duration start_timeout = absl::Seconds(60);
  };

  // Starts the process and waits for its description of the device.
  // UNAVAILABLE with the child's reason when it cannot open the device ("no
  // CUDA driver: ..."), INTERNAL when it cannot be started.
  static absl::StatusOr<std::unique_ptr<DeviceProcess>> Start(Options options);
  ~DeviceProcess();
  DeviceProcess(const DeviceProcess&) = delete;
  DeviceProcess& operator=(const DeviceProcess&) = delete;

  const kiln::v1::DeviceInfo& device() const { return device_; }

  // Measures `task` in the process, (re)starting it first when an earlier
  // task killed it. Within `timeout`: the child's result; past it, the child
  // is killed and the result is TIMEOUT; a child that dies mid-task gives
  // RUNTIME_ERROR naming its signal or exit code. CANCELLED (nothing to
  // report) when *cancel becomes true.
  absl::StatusOr<kiln::v1::MeasureResult> Measure(const kiln::v1::MeasureTask& task, absl::Duration timeout,
                                                  const std::atomic<bool>* cancel = nullptr);

  // How many processes were started (1 + restarts), and the current one's
  // pid (-1 when none runs).
  int starts() const { return starts_; }
  pid_t pid() const { return pid_; }

 private:
  explicit DeviceProcess(Options options) : options_(std::move(options)) {}
  absl::Status Spawn();
  void Kill();
  // The child's exit, as a result for `task_id` ("device process crashed:
  // signal 11 (Segmentation fault)").
  kiln::v1::MeasureResult DeathResult(const std::string& task_id);

  Options options_;
  kiln::v1::DeviceInfo device_;
  pid_t pid_ = -1;
  int to_child_ = -1;
  int from_child_ = -1;
  int starts_ = 0;
};

// The child's side: opens the device (`open` describes it or says why it
// cannot be used), writes the hello to `out_fd`, then reads tasks from
// `in_fd` and answers each with `measure`, until `in_fd` closes or, after an
// answer, `usable` (optional) turns false (a CUDA context lost to a fault:
// the parent starts a new process for the next task). Its exit code.
int ServeDevice(int in_fd, int out_fd, const std::function<absl::StatusOr<kiln::v1::DeviceInfo>()>& open,
                const std::function<kiln::v1::MeasureResult(const kiln::v1::MeasureTask&)>& measure,
                const std::function<bool()>& usable = nullptr);

}  // namespace kiln::worker
