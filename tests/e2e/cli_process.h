// Running Kiln's binaries as real processes in the end-to-end tests: a command
// to completion (its exit code and output), or a daemon in the background;
// reading their --json output, and checking what `kiln run` wrote against the
// reference interpreter.
#pragma once

#include <google/protobuf/struct.pb.h>
#include <gtest/gtest.h>
#include <google/protobuf/util/json_util.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "client/example_models.h"
#include "client/tensor_io.h"
#include "compiler_core/frontend/interpreter.h"
#include "compiler_core/frontend/onnx_importer.h"

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

// The outputs `kiln run` wrote into `out_dir` (NAME.npy each) for the example
// model `example` (as `kiln example` writes it) run on `inputs` (input name ->
// .npy file), against the reference interpreter in this process: every
// element within atol + rtol * |want|. Fatal failures; callers wrap it in
// ASSERT_NO_FATAL_FAILURE.
inline void ExpectRunOutputsMatchInterpreter(const std::string& example,
                                             const std::map<std::string, std::filesystem::path>& inputs,
                                             const std::filesystem::path& out_dir, double atol, double rtol) {
  absl::StatusOr<client::ExampleModel> model = client::MakeExampleModel(example);
  ASSERT_TRUE(model.ok()) << model.status();
  ImportOptions io;
  io.input_shapes = model->shapes;
  auto graph = ImportOnnxModel(model->onnx_bytes, io);
  ASSERT_TRUE(graph.ok()) << graph.status();
  std::map<std::string, Tensor> feeds;
  for (const auto& [name, path] : inputs) {
    absl::StatusOr<Tensor> t = ReadTensorFile(path.string());
    ASSERT_TRUE(t.ok()) << t.status();
    feeds.emplace(name, std::move(*t));
  }
  auto ref = Evaluate(**graph, feeds);
  ASSERT_TRUE(ref.ok()) << ref.status();
  for (const auto& [name, want] : *ref) {
    auto got = ReadTensorFile((out_dir / (name + ".npy")).string());
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->dims(), want.dims());
    for (int64_t i = 0; i < want.num_elements(); ++i) {
      ASSERT_NEAR(got->data<float>()[i], want.data<float>()[i], atol + rtol * std::fabs(want.data<float>()[i]))
          << name << "[" << i << "]";
    }
  }
}

}  // namespace kiln::e2e
