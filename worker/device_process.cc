// DeviceProcess: spawn, framed messages over pipes, deadlines, restarts.
#include "worker/device_process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "worker/measurer.h"
#include "absl/time/clock.h"
#include "base/log.h"
#include "base/status_macros.h"

extern char** environ;

namespace kiln::worker {
namespace {

// The largest message either side accepts (a task carries its workload graph
// with constants; a result is small).
constexpr uint32_t kMaxMessageBytes = 512u << 20;

bool WriteAll(int fd, const char* data, size_t size) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = write(fd, data + done, size - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

bool WriteMessage(int fd, const google::protobuf::MessageLite& m) {
  std::string bytes;
  if (!m.SerializeToString(&bytes)) return false;
  const uint32_t n = static_cast<uint32_t>(bytes.size());
  const char header[4] = {static_cast<char>(n & 0xff), static_cast<char>((n >> 8) & 0xff),
                          static_cast<char>((n >> 16) & 0xff), static_cast<char>((n >> 24) & 0xff)};
  return WriteAll(fd, header, 4) && WriteAll(fd, bytes.data(), bytes.size());
}

enum class ReadOutcome { kOk, kEof, kTimeout, kCancelled, kError };

// Reads exactly `size` bytes before `deadline` (absl::InfiniteFuture: no
// deadline), giving up when *cancel becomes true.
ReadOutcome ReadExactly(int fd, char* out, size_t size, absl::Time deadline, const std::atomic<bool>* cancel) {
  size_t done = 0;
  while (done < size) {
    if (cancel != nullptr && cancel->load()) return ReadOutcome::kCancelled;
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return ReadOutcome::kTimeout;
    const int wait_ms = static_cast<int>(std::clamp<int64_t>(absl::ToInt64Milliseconds(left) + 1, 1, 100));
    pollfd p{fd, POLLIN, 0};
    const int r = poll(&p, 1, wait_ms);
    if (r < 0) {
      if (errno == EINTR) continue;
      return ReadOutcome::kError;
    }
    if (r == 0) continue;
    const ssize_t n = read(fd, out + done, size - done);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return ReadOutcome::kError;
    }
    if (n == 0) return ReadOutcome::kEof;
    done += static_cast<size_t>(n);
  }
  return ReadOutcome::kOk;
}

ReadOutcome ReadMessage(int fd, std::string* bytes, absl::Time deadline, const std::atomic<bool>* cancel) {
  unsigned char header[4];
  ReadOutcome r = ReadExactly(fd, reinterpret_cast<char*>(header), 4, deadline, cancel);
  if (r != ReadOutcome::kOk) return r;
  const uint32_t n = header[0] | (header[1] << 8) | (header[2] << 16) | (static_cast<uint32_t>(header[3]) << 24);
  if (n > kMaxMessageBytes) return ReadOutcome::kError;
  bytes->assign(n, '\0');
  return ReadExactly(fd, bytes->data(), n, deadline, cancel);
}

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceProcess>> DeviceProcess::Start(Options options) {
  std::unique_ptr<DeviceProcess> p(new DeviceProcess(std::move(options)));
  RETURN_IF_ERROR(p->Spawn());
  return p;
}

DeviceProcess::~DeviceProcess() { Kill(); }

absl::Status DeviceProcess::Spawn() {
  int to[2], from[2];
  if (pipe2(to, O_CLOEXEC) != 0) return absl::InternalError(absl::StrCat("device process: pipe: ", strerror(errno)));
  if (pipe2(from, O_CLOEXEC) != 0) {
    close(to[0]);
    close(to[1]);
    return absl::InternalError(absl::StrCat("device process: pipe: ", strerror(errno)));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, to[0], 0);
  posix_spawn_file_actions_adddup2(&actions, from[1], 1);
  std::vector<std::string> args = {options_.executable, "--serve-device", options_.device};
  args.insert(args.end(), options_.extra_args.begin(), options_.extra_args.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  // A bare name is looked up on the PATH, as a shell would.
  const bool bare = options_.executable.find('/') == std::string::npos;
  const int rc = bare ? posix_spawnp(&pid, options_.executable.c_str(), &actions, nullptr, argv.data(), environ)
                      : posix_spawn(&pid, options_.executable.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(to[0]);
  close(from[1]);
  if (rc != 0) {
    close(to[1]);
    close(from[0]);
    return absl::InternalError(absl::StrCat("device process: cannot start ", options_.executable, ": ", strerror(rc)));
  }
  pid_ = pid;
  to_child_ = to[1];
  from_child_ = from[0];
  ++starts_;
  std::string bytes;
  const ReadOutcome r = ReadMessage(from_child_, &bytes, absl::Now() + options_.start_timeout, nullptr);
  kiln::v1::DeviceHello hello;
  if (r != ReadOutcome::kOk || !hello.ParseFromString(bytes)) {
    kiln::v1::MeasureResult death = DeathResult("");
    return absl::UnavailableError(absl::StrCat("the device process for ", options_.device, " did not describe it (",
                                               r == ReadOutcome::kTimeout ? "timed out" : death.error_message(), ")"));
  }
  if (!hello.error().empty()) {
    Kill();
    return absl::UnavailableError(hello.error());
  }
  device_ = hello.device();
  return absl::OkStatus();
}

void DeviceProcess::Kill() {
  if (to_child_ >= 0) close(to_child_);
  if (from_child_ >= 0) close(from_child_);
  to_child_ = from_child_ = -1;
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  pid_ = -1;
}

kiln::v1::MeasureResult DeviceProcess::DeathResult(const std::string& task_id) {
  int status = 0;
  std::string how = "it closed its pipe";
  if (pid_ > 0) {
    // It closed its end: it is exiting. Wait a moment for its status.
    const absl::Time until = absl::Now() + absl::Seconds(2);
    pid_t r = 0;
    while ((r = waitpid(pid_, &status, WNOHANG)) == 0 && absl::Now() < until) absl::SleepFor(absl::Milliseconds(5));
    if (r == pid_) {
      pid_ = -1;
      if (WIFSIGNALED(status)) {
        const char* name = strsignal(WTERMSIG(status));
        how = absl::StrCat("signal ", WTERMSIG(status), " (", name ? name : "?", ")");
      } else if (WIFEXITED(status)) {
        how = absl::StrCat("exit code ", WEXITSTATUS(status));
      }
    }
  }
  Kill();
  return FailedMeasurement(task_id, kiln::v1::RUNTIME_ERROR, absl::StrCat("device process died: ", how));
}

absl::StatusOr<kiln::v1::MeasureResult> DeviceProcess::Measure(const kiln::v1::MeasureTask& task,
                                                                absl::Duration timeout,
                                                                const std::atomic<bool>* cancel) {
  if (pid_ < 0) RETURN_IF_ERROR(Spawn());
  const absl::Time deadline = absl::Now() + timeout;
  if (!WriteMessage(to_child_, task)) return DeathResult(task.task_id());
  std::string bytes;
  switch (ReadMessage(from_child_, &bytes, deadline, cancel)) {
    case ReadOutcome::kOk: break;
    case ReadOutcome::kCancelled:
      Kill();
      return absl::CancelledError(absl::StrCat("measurement of task ", task.task_id(), " cancelled"));
    case ReadOutcome::kTimeout:
      Kill();
      return FailedMeasurement(task.task_id(), kiln::v1::TIMEOUT,
                         absl::StrCat("measurement exceeded its deadline of ", absl::FormatDuration(timeout),
                                      "; the device process was killed"));
    case ReadOutcome::kEof:
    case ReadOutcome::kError: return DeathResult(task.task_id());
  }
  kiln::v1::MeasureResult result;
  if (!result.ParseFromString(bytes)) {
    Kill();
    return FailedMeasurement(task.task_id(), kiln::v1::RUNTIME_ERROR, "the device process sent an unreadable result");
  }
  result.set_task_id(task.task_id());
  return result;
}

int ServeDevice(int in_fd, int out_fd, const std::function<absl::StatusOr<kiln::v1::DeviceInfo>()>& open,
                const std::function<kiln::v1::MeasureResult(const kiln::v1::MeasureTask&)>& measure,
                const std::function<bool()>& usable) {
  // Die with the worker.
  signal(SIGPIPE, SIG_DFL);
  kiln::v1::DeviceHello hello;
  absl::StatusOr<kiln::v1::DeviceInfo> device = open();
  if (device.ok()) {
    *hello.mutable_device() = *device;
  } else {
    hello.set_error(std::string(device.status().message()));
  }
  if (!WriteMessage(out_fd, hello) || !device.ok()) return device.ok() ? 1 : 0;
  std::string bytes;
  while (ReadMessage(in_fd, &bytes, absl::InfiniteFuture(), nullptr) == ReadOutcome::kOk) {
    kiln::v1::MeasureTask task;
    kiln::v1::MeasureResult result;
    if (!task.ParseFromString(bytes)) {
      result = FailedMeasurement("", kiln::v1::BUILD_ERROR, "the device process received an unreadable task");
    } else {
      result = measure(task);
      result.set_task_id(task.task_id());
    }
    if (!WriteMessage(out_fd, result)) return 1;
    if (usable && !usable()) return 2;
  }
  return 0;
}

}  // namespace kiln::worker
