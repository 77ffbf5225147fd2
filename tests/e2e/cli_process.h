// Running Kiln's binaries as real processes in the end-to-end tests: a command
// to completion (its exit code and output), or a daemon in the background; and
// reading their --json output.
#pragma once

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln::e2e {

inline const std::string kBin = KILN_BINARY_DIR;

inline std::string ReadWholeFile(const std::filesystem::path& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct CommandResult {
  int exit_code;
  std::string output;  // stdout and stderr
};

// Runs `cmd` through the shell, stdout and stderr together into `log`.
inline CommandResult RunCommand(const std::string& cmd, const std::filesystem::path& log) {
  int rc = std::system((cmd + " >" + log.string() + " 2>&1").c_str());
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, ReadWholeFile(log)};
}

struct SplitResult {
  int exit_code;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs `cmd` through the shell with stdout and stderr kept apart (in
// `log_stem`.out and `log_stem`.err).
inline SplitResult RunCommandSplit(const std::string& cmd, const std::filesystem::path& log_stem) {
  const std::string out = log_stem.string() + ".out", err = log_stem.string() + ".err";
  int rc = std::system((cmd + " >" + out + " 2>" + err).c_str());
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, ReadWholeFile(out), ReadWholeFile(err)};
}

// Starts argv[0] (a path) in the background, stdout and stderr into `log`.
inline pid_t Spawn(const std::vector<std::string>& argv, const std::filesystem::path& log) {
  pid_t pid = fork();
  if (pid == 0) {
    FILE* f = std::fopen(log.c_str(), "w");
    if (f) {
      dup2(fileno(f), 1);
      dup2(fileno(f), 2);
    }
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

// The port a kiln-server wrote to its --port-file, waiting up to 15 s; 0 if none.
inline int WaitForPortFile(const std::filesystem::path& port_file) {
  for (int i = 0; i < 300 && !std::filesystem::exists(port_file); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::ifstream pf(port_file);
  int port = 0;
  pf >> port;
  return port;
}

// SIGTERM, then the exit status (as waitpid gives it).
inline int StopProcess(pid_t pid) {
  int status = 0;
  if (pid > 0) {
    kill(pid, SIGTERM);
    waitpid(pid, &status, 0);
  }
  return status;
}

// One JSON object (a command's --json line) as a protobuf Struct: numbers are
// number_value, null is null_value; INVALID_ARGUMENT if it is not JSON.
inline absl::StatusOr<google::protobuf::Struct> ParseJson(const std::string& text) {
  google::protobuf::Struct object;
  auto status = google::protobuf::util::JsonStringToMessage(text, &object);
  if (!status.ok()) return absl::InvalidArgumentError(status.ToString());
  return object;
}

}  // namespace kiln::e2e
