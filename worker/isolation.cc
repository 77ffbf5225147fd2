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
#include "worker/measurer.h"
#include "absl/time/clock.h"

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

[[noreturn]] void ChildMain(int write_fd, const std::function<kiln::v1::MeasureResult()>& measure) {
  // Die with the parent; do not inherit the daemon's shutdown handlers.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  signal(SIGPIPE, SIG_DFL);
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
  WriteAll(write_fd, bytes);
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

}  // namespace

absl::StatusOr<kiln::v1::MeasureResult> RunIsolated(
    const std::string& task_id, const std::function<kiln::v1::MeasureResult()>& measure,
    absl::Duration timeout, const std::atomic<bool>* cancel) {
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
    ChildMain(fds[1], measure);
  }
  close(fds[1]);
  const int read_fd = fds[0];

  std::string bytes;
  bool eof = false;
  bool timed_out = false;
  char buf[4096];
  while (!eof) {
    if (cancel != nullptr && cancel->load()) {
      close(read_fd);
      KillAndReap(pid);
      return absl::CancelledError(absl::StrCat("measurement of task ", task_id, " cancelled"));
    }
    absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      timed_out = true;
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
      bytes.append(buf, static_cast<size_t>(n));
    }
  }
  close(read_fd);

  int status = 0;
  // The child closes the pipe only by exiting; give it a moment to be reaped.
  if (timed_out || !WaitUntil(pid, std::max(deadline, absl::Now() + absl::Seconds(1)), &status)) {
    KillAndReap(pid);
    return FailedMeasurement(task_id, kiln::v1::TIMEOUT,
                       absl::StrCat("measurement exceeded its deadline of ",
                                    absl::FormatDuration(timeout), "; killed"));
  }
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char* name = strsignal(sig);
    return FailedMeasurement(task_id, kiln::v1::RUNTIME_ERROR,
                       absl::StrCat("kernel crashed: signal ", sig, " (", name ? name : "?", ")"));
  }
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  kiln::v1::MeasureResult result;
  if (code != 0 || !result.ParseFromString(bytes)) {
    return FailedMeasurement(task_id, kiln::v1::RUNTIME_ERROR,
                       absl::StrCat("measurement process exited with code ", code,
                                    code == 0 ? " without a result" : ""));
  }
  result.set_task_id(task_id);
  return result;
}

}  // namespace kiln::worker
