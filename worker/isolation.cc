// Fork-based isolation of one measurement: pipe back the result, enforce a
// deadline with SIGKILL, classify crashes.
#include "worker/isolation.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <exception>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "compiler_core/frontend/graph_proto.h"
#include "worker/measurer.h"
#include "worker/reference_cache.h"

namespace kiln::worker {
namespace {

void WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    done += static_cast<size_t>(n);
  }
}

// The child: takes the name `comm` (what ps and /proc/PID/comm show, at most
// 15 characters), runs `work`, pipes back what it returns, _exits 0.
[[noreturn]] void ChildMain(int write_fd, const char* comm, const std::function<std::string()>& work) {
  // Die with the parent; do not inherit the daemon's shutdown handlers.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  prctl(PR_SET_NAME, comm);
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  signal(SIGPIPE, SIG_DFL);
  WriteAll(write_fd, work());
  close(write_fd);
  _exit(0);
}

// Waits for `pid` until `deadline`; returns true and the wait status if it ended.
bool WaitUntil(pid_t pid, absl::Time deadline, int* status) {
  while (true) {
    pid_t r = waitpid(pid, status, WNOHANG);
    if (r == pid) return true;
    if (r < 0 && errno != EINTR) return false;
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
}

void KillAndReap(pid_t pid) {
  kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

// How a child ended, and what it piped back.
struct ChildEnd {
  bool timed_out = false;
  int status = 0;  // waitpid's, when it did not time out
  std::string bytes;
};

// Runs `work` in a forked child (ChildMain) named `comm` for at most
// `timeout`, reading its bytes as they come. `what` names the work in a
// cancellation.
absl::StatusOr<ChildEnd> RunChild(const char* comm, const std::function<std::string()>& work,
                                  absl::Duration timeout, const std::atomic<bool>* cancel, const std::string& what) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("isolation: pipe failed: ", strerror(errno)));
  }
  const absl::Time deadline = absl::Now() + timeout;
  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    close(fds[0]);
    close(fds[1]);
    return absl::InternalError(absl::StrCat("isolation: fork failed: ", strerror(err)));
  }
  if (pid == 0) {
    close(fds[0]);
    ChildMain(fds[1], comm, work);
  }
  close(fds[1]);
  const int read_fd = fds[0];

  ChildEnd end;
  bool eof = false;
  char buf[4096];
  while (!eof) {
    if (cancel != nullptr && cancel->load()) {
      close(read_fd);
      KillAndReap(pid);
      return absl::CancelledError(absl::StrCat(what, " cancelled"));
    }
    absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      end.timed_out = true;
      break;
    }
    int wait_ms = static_cast<int>(
        std::clamp<int64_t>(absl::ToInt64Milliseconds(left) + 1, 1, 100));
    pollfd p{read_fd, POLLIN, 0};
    int r = poll(&p, 1, wait_ms);
    if (r < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (r == 0) continue;
    ssize_t n = read(read_fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      break;
    }
    if (n == 0) {
      eof = true;
    } else {
      end.bytes.append(buf, static_cast<size_t>(n));
    }
  }
  close(read_fd);
  // The child closes the pipe only by exiting; give it a moment to be reaped.
  if (end.timed_out || !WaitUntil(pid, std::max(deadline, absl::Now() + absl::Seconds(1)), &end.status)) {
    KillAndReap(pid);
    end.timed_out = true;
  }
  return end;
}

// "signal 11 (Segmentation fault)", "exit code 3": how a child that did not
// end cleanly ended.
std::string HowItEnded(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = strsignal(sig);
    return absl::StrCat("signal ", sig, " (", name ? name : "?", ")");
  }
  return absl::StrCat("exit code ", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

}  // namespace

absl::StatusOr<kiln::v1::MeasureResult> RunIsolated(
    const std::string& task_id, const std::function<kiln::v1::MeasureResult()>& measure,
    absl::Duration timeout, const std::atomic<bool>* cancel) {
  auto work = [&]() -> std::string {
    kiln::v1::MeasureResult result;
    try {
      result = measure();
    } catch (const std::exception& e) {
      result.Clear();
      result.set_error(kiln::v1::RUNTIME_ERROR);
      result.set_error_message(absl::StrCat("measurement threw: ", e.what()));
    } catch (...) {
      result.Clear();
      result.set_error(kiln::v1::RUNTIME_ERROR);
      result.set_error_message("measurement threw an unknown exception");
    }
    std::string bytes;
    if (!result.SerializeToString(&bytes)) _exit(3);
    return bytes;
  };
  absl::StatusOr<ChildEnd> end =
      RunChild(kMeasureChildName, work, timeout, cancel, absl::StrCat("measurement of task ", task_id));
  if (!end.ok()) return end.status();
  if (end->timed_out) {
    return FailedMeasurement(task_id, kiln::v1::TIMEOUT,
                             absl::StrCat("measurement exceeded its deadline of ", absl::FormatDuration(timeout),
                                          "; killed"));
  }
  if (WIFSIGNALED(end->status)) {
    return FailedMeasurement(task_id, kiln::v1::RUNTIME_ERROR, "kernel crashed: " + HowItEnded(end->status));
  }
  const int code = WIFEXITED(end->status) ? WEXITSTATUS(end->status) : -1;
  kiln::v1::MeasureResult result;
  if (code != 0 || !result.ParseFromString(end->bytes)) {
    return FailedMeasurement(task_id, kiln::v1::RUNTIME_ERROR,
                             absl::StrCat("measurement process exited with code ", code,
                                          code == 0 ? " without a result" : ""));
  }
  result.set_task_id(task_id);
  return result;
}

absl::Status CacheReferenceIsolated(const kiln::v1::MeasureTask& task, absl::Duration timeout,
                                    const std::atomic<bool>* cancel) {
  ReferenceCache& cache = ReferenceCache::Process();
  const std::string key = ReferenceKey(task);
  if (cache.Contains(key)) return absl::OkStatus();
  // The child answers a MeasureReference, or nothing when the workload does
  // not import or the interpreter refuses it.
  auto work = [&]() -> std::string {
    absl::StatusOr<std::unique_ptr<Graph>> graph = GraphFromProto(task.workload());
    if (!graph.ok()) return "";
    absl::StatusOr<Reference> reference = ComputeReference(**graph, task.workload_key());
    if (!reference.ok()) return "";
    kiln::v1::MeasureReference proto;
    for (const auto& [name, input] : reference->inputs) {
      kiln::v1::Tensor* t = proto.add_inputs();
      TensorToProto(input, t);
      t->set_name(name);
    }
    for (const Tensor& out : reference->outputs) TensorToProto(out, proto.add_outputs());
    return proto.SerializeAsString();
  };
  absl::StatusOr<ChildEnd> end =
      RunChild(kReferenceChildName, work, timeout, cancel,
               absl::StrCat("reference of workload ", task.workload_key()));
  if (!end.ok()) return end.status();
  if (end->timed_out) {
    return absl::DeadlineExceededError(absl::StrCat("the reference of workload ", task.workload_key(),
                                                    " took longer than ", absl::FormatDuration(timeout)));
  }
  kiln::v1::MeasureReference proto;
  if (!WIFEXITED(end->status) || WEXITSTATUS(end->status) != 0 || end->bytes.empty() ||
      !proto.ParseFromString(end->bytes)) {
    return absl::InternalError(absl::StrCat("no reference for workload ", task.workload_key(), ": its child ended with ",
                                            HowItEnded(end->status),
                                            end->bytes.empty() ? " and no reference" : ""));
  }
  Reference reference;
  for (const kiln::v1::Tensor& t : proto.inputs()) {
    absl::StatusOr<Tensor> input = TensorFromProto(t);
    if (!input.ok()) return input.status();
    reference.inputs.emplace(t.name(), *std::move(input));
  }
  for (const kiln::v1::Tensor& t : proto.outputs()) {
    absl::StatusOr<Tensor> output = TensorFromProto(t);
    if (!output.ok()) return output.status();
    reference.outputs.push_back(*std::move(output));
  }
  cache.Put(key, std::make_shared<const Reference>(std::move(reference)));
  return absl::OkStatus();
}

}  // namespace kiln::worker
