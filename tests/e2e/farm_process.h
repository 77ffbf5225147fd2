// A tuning farm of real processes for the end-to-end fault tests: kiln-server
// and kiln-worker on 127.0.0.1, what their logs say, a worker caught while it
// holds a lease, and the tuning database read with SQLite alone (to count
// records without trusting the code under test).
#pragma once

#include <dirent.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/e2e/cli_process.h"
#include "worker/isolation.h"

namespace kiln::e2e {

// Polls `done` every 20 ms until it holds or `timeout` passes; true if it held.
inline bool WaitUntil(const std::function<bool()>& done, std::chrono::seconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done();
}

// Waits up to `timeout` for `pid` (a child of this process) to exit; its exit
// code, 128+N when killed by signal N, or -1 if it is still running.
inline int WaitExit(pid_t pid, std::chrono::seconds timeout) {
  int status = 0, code = -1;
  WaitUntil(
      [&] {
        if (waitpid(pid, &status, WNOHANG) != pid) return false;
        code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return true;
      },
      timeout);
  return code;
}

// A process's state letter from /proc/PID/stat (R, S, T, Z, ...), or 0 if gone.
inline char ProcessState(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() ? 0 : stat[paren + 2];
}

// The processes whose parent is `pid`, zombies included.
inline std::vector<pid_t> ChildrenOf(pid_t pid) {
  std::vector<pid_t> out;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return out;
  while (dirent* e = readdir(proc)) {
    const pid_t p = static_cast<pid_t>(std::atoi(e->d_name));
    if (p <= 0) continue;
    std::ifstream f("/proc/" + std::to_string(p) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream rest(stat.substr(paren + 2));
    char state = 0;
    pid_t parent = 0;
    rest >> state >> parent;
    if (parent == pid) out.push_back(p);
  }
  closedir(proc);
  return out;
}

// The name of process `pid` (/proc/PID/comm); "" if it is gone.
inline std::string ProcessName(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(f, name);
  return name;
}

// Stops `worker` (SIGSTOP) at a moment it measures a leased task: a
// kiln-worker that isolates measurements has a live child named
// "kiln-measure" exactly then (the lease is taken before the child is forked
// and reported after it ends; the child that computes a task's reference
// first is named "kiln-reference", and a fault inflicted on it is not the
// measurement's). Tries until `timeout`, letting the worker run a few
// milliseconds between tries. Returns the measuring child (still running; the
// worker stays stopped), or 0 with the worker running again.
inline pid_t StopWhileMeasuring(pid_t worker, std::chrono::seconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    kill(worker, SIGSTOP);
    WaitUntil([&] { return ProcessState(worker) == 'T'; }, std::chrono::seconds(5));
    for (pid_t child : ChildrenOf(worker)) {
      const char state = ProcessState(child);
      if (state != 0 && state != 'Z' && ProcessName(child) == worker::kMeasureChildName) return child;
    }
    kill(worker, SIGCONT);
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
  }
  return 0;
}

// Like StopWhileMeasuring, but the measuring child is stopped too, so that it
// cannot finish (or exit) between being found and what the caller does to it
// next. Returns the child in state T with the worker stopped, or 0 with both
// running.
inline pid_t FreezeWhileMeasuring(pid_t worker, std::chrono::seconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    const auto left = std::chrono::duration_cast<std::chrono::seconds>(end - std::chrono::steady_clock::now());
    const pid_t child = StopWhileMeasuring(worker, std::max(left, std::chrono::seconds(1)));
    if (child == 0) return 0;
    kill(child, SIGSTOP);
    WaitUntil(
        [&] {
          const char state = ProcessState(child);
          return state == 'T' || state == 'Z' || state == 0;
        },
        std::chrono::seconds(5));
    if (ProcessState(child) == 'T') return child;
    kill(worker, SIGCONT);  // it had finished already: try the next measurement
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
  }
  return 0;
}

// The value of `key` in a logfmt line (key=value or key="value"); "" if absent.
inline std::string LogField(const std::string& line, const std::string& key) {
  size_t at = line.find(" " + key + "=");
  if (at == std::string::npos) return "";
  at += key.size() + 2;
  if (at < line.size() && line[at] == '"') {
    const size_t close = line.find('"', at + 1);
    return line.substr(at + 1, close == std::string::npos ? std::string::npos : close - at - 1);
  }
  return line.substr(at, line.find(' ', at) - at);
}

// The lines of a log file with msg `msg` (and, when given, field key=value).
inline std::vector<std::string> LogLines(const std::filesystem::path& log, const std::string& msg,
                                         const std::string& key = "", const std::string& value = "") {
  std::vector<std::string> out;
  std::istringstream lines(ReadWholeFile(log));
  for (std::string line; std::getline(lines, line);) {
    if (LogField(line, "msg") != msg) continue;
    if (!key.empty() && LogField(line, key) != value) continue;
    out.push_back(line);
  }
  return out;
}

// The tuning database as SQLite alone reads it: records, jobs and their
// candidates, and PRAGMA integrity_check.
struct DbRecord {
  int64_t id = 0;
  std::string workload, config, worker;
  int error = 0;
};
struct DbJob {
  int64_t id = 0;
  std::string workload;
  int state = 0;                                            // 0 running, 1 done, 2 failed
  std::vector<std::pair<std::string, int64_t>> candidates;  // config, record id (0: unmeasured)
};
struct DbSnapshot {
  std::string error;      // why it could not be read; "" when read
  std::string integrity;  // "ok" when sound
  std::vector<DbRecord> records;
  std::vector<DbJob> jobs;
  std::map<int64_t, const DbRecord*> by_id() const {
    std::map<int64_t, const DbRecord*> m;
    for (const DbRecord& r : records) m[r.id] = &r;
    return m;
  }
};

inline DbSnapshot ReadDb(const std::filesystem::path& path) {
  DbSnapshot snap;
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    snap.error = db ? sqlite3_errmsg(db) : "cannot open";
    sqlite3_close(db);
    return snap;
  }
  sqlite3_busy_timeout(db, 10000);
  auto query = [&](const std::string& sql, const std::function<void(sqlite3_stmt*)>& row) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) != SQLITE_OK) {
      if (snap.error.empty()) snap.error = sql + ": " + sqlite3_errmsg(db);
      return;
    }
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) row(s);
    if (rc != SQLITE_DONE && snap.error.empty()) snap.error = sql + ": " + sqlite3_errmsg(db);
    sqlite3_finalize(s);
  };
  auto text = [](sqlite3_stmt* s, int i) {
    const unsigned char* t = sqlite3_column_text(s, i);
    return t ? std::string(reinterpret_cast<const char*>(t)) : std::string();
  };
  query("BEGIN", [](sqlite3_stmt*) {});
  query("PRAGMA integrity_check", [&](sqlite3_stmt* s) { snap.integrity += text(s, 0); });
  query("SELECT id, workload_key, config, worker_id, error FROM records ORDER BY id", [&](sqlite3_stmt* s) {
    snap.records.push_back({sqlite3_column_int64(s, 0), text(s, 1), text(s, 2), text(s, 3), sqlite3_column_int(s, 4)});
  });
  std::map<int64_t, size_t> job_at;
  query("SELECT id, workload_key, state FROM tuning_jobs ORDER BY id", [&](sqlite3_stmt* s) {
    job_at[sqlite3_column_int64(s, 0)] = snap.jobs.size();
    snap.jobs.push_back({sqlite3_column_int64(s, 0), text(s, 1), sqlite3_column_int(s, 2), {}});
  });
  query("SELECT job_id, config, IFNULL(record_id, 0) FROM tuning_job_candidates ORDER BY job_id, position",
        [&](sqlite3_stmt* s) {
          auto it = job_at.find(sqlite3_column_int64(s, 0));
          if (it != job_at.end()) snap.jobs[it->second].candidates.emplace_back(text(s, 1), sqlite3_column_int64(s, 2));
        });
  query("COMMIT", [](sqlite3_stmt*) {});
  sqlite3_close(db);
  return snap;
}

// A farm of real processes in `dir`: one kiln-server and any number of
// kiln-workers; every process still running is SIGKILLed when it goes.
class ProcessFarm {
 public:
  explicit ProcessFarm(std::filesystem::path dir) : dir_(std::move(dir)) {}
  ~ProcessFarm() {
    for (pid_t pid : pids_) {
      if (pid <= 0) continue;
      kill(pid, SIGCONT);
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
  ProcessFarm(const ProcessFarm&) = delete;
  ProcessFarm& operator=(const ProcessFarm&) = delete;

  // kiln-server on `listen` (127.0.0.1:0 by default) with this database and
  // flags; its log is `log_name`.log. The port, or 0 when it did not start.
  int StartServer(const std::filesystem::path& db, const std::vector<std::string>& flags,
                  const std::string& log_name = "server", const std::string& listen = "127.0.0.1:0") {
    const std::filesystem::path port_file = dir_ / (log_name + ".port");
    std::filesystem::remove(port_file);
    std::vector<std::string> argv = {
        kBin + "/server/kiln-server", "--listen", listen, "--db", db.string(), "--port-file", port_file.string()};
    argv.insert(argv.end(), flags.begin(), flags.end());
    server_ = Track(Spawn(argv, dir_ / (log_name + ".log")));
    const int port = WaitForPortFile(port_file);
    if (port > 0) address_ = "127.0.0.1:" + std::to_string(port);
    return port;
  }

  // kiln-worker named `name` (its log: `name`.log), serving this farm's server.
  pid_t StartWorker(const std::string& name, const std::vector<std::string>& flags = {}) {
    std::vector<std::string> argv = {kBin + "/worker/kiln-worker", "--server", address_, "--name", name};
    argv.insert(argv.end(), flags.begin(), flags.end());
    return Track(Spawn(argv, Log(name)));
  }

  // `kiln ARGS...` in the background, output into `log_name`.log.
  pid_t StartKiln(const std::vector<std::string>& args, const std::string& log_name) {
    std::vector<std::string> argv = {kBin + "/client/kiln"};
    argv.insert(argv.end(), args.begin(), args.end());
    return Track(Spawn(argv, Log(log_name)));
  }

  // `kiln compile MODEL --shape SHAPE --trials N --server ADDRESS -o NAME.kpkg -q`
  // in the background (log: NAME.log).
  pid_t StartCompile(const std::filesystem::path& model, const std::string& shape, int trials,
                     const std::string& name) {
    return StartKiln({"compile", model.string(), "--shape", shape, "--trials", std::to_string(trials), "--server",
                      address_, "--connect-timeout", "30", "-o", (dir_ / (name + ".kpkg")).string(), "-q"},
                     name);
  }

  // The id a worker registered as, the last time (from its log); "" if none yet.
  std::string WorkerId(const std::string& name) const {
    auto lines = LogLines(Log(name), "registered");
    return lines.empty() ? "" : LogField(lines.back(), "worker");
  }

  // SIGKILL and reap; the pid is no longer tracked.
  void Kill(pid_t pid) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    Forget(pid);
  }
  // SIGTERM and reap: its exit status (see StopProcess); no longer tracked.
  int Stop(pid_t pid) {
    const int status = StopProcess(pid);
    Forget(pid);
    return status;
  }
  // Reaps a process that exits by itself: its exit code (see WaitExit).
  int Wait(pid_t pid, std::chrono::seconds timeout) {
    const int code = WaitExit(pid, timeout);
    if (code >= 0) Forget(pid);
    return code;
  }

  std::filesystem::path Log(const std::string& name) const { return dir_ / (name + ".log"); }
  const std::string& address() const { return address_; }
  pid_t server() const { return server_; }

 private:
  pid_t Track(pid_t pid) {
    pids_.push_back(pid);
    return pid;
  }
  void Forget(pid_t pid) {
    for (pid_t& p : pids_) {
      if (p == pid) p = 0;
    }
  }

  std::filesystem::path dir_;
  std::string address_;
  pid_t server_ = 0;
  std::vector<pid_t> pids_;
};

}  // namespace kiln::e2e
