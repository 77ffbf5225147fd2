// kiln_conformance: runs the ONNX node-test suite through the interpreter and
// the compiled path and prints "N passed, N failed, N skipped".
//   kiln_conformance [--data DIR] [--filter SUBSTR] [--verbose] [--no-compiled]
//                    [--target cuda:sm_XY [--ptxas PATH] [--real-gpu]]
//                    [--expected FILE]... [--write-expected FILE]
// With --target the compiled path builds CUDA packages and runs them on the
// fake CUDA driver (their kernels' CPU emulations; no GPU needed), or with
// --real-gpu on this machine's GPU.
// With --expected (repeatable: the lists are merged), exits 1 when a failure,
// or an interpreter pass the compiled path does not match, is not listed, or
// when a listed test passes.
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler_core/codegen/target.h"
#include "tests/conformance/conformance_runner.h"

namespace {

int Usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--data DIR] [--filter SUBSTR] [--verbose] [--no-compiled]\n"
               "          [--target cuda:sm_XY [--ptxas PATH] [--real-gpu]] [--expected FILE]\n"
               "          [--write-expected FILE]\n"
               "  --data DIR            ONNX node tests (default %s)\n"
               "  --filter SUBSTR       only tests whose name contains SUBSTR\n"
               "  --verbose             one line per test with its outcome and reason\n"
               "  --no-compiled         skip the compiled (package + runtime) path\n"
               "  --target cuda:sm_XY   compiled path for this GPU: CUDA packages with the default GPU\n"
               "                        schedules, run on a fake CUDA device by their kernels' CPU\n"
               "                        emulations (default: this CPU)\n"
               "  --ptxas PATH          with --target: assemble each package's cubin with this ptxas\n"
               "                        (default: PTX only)\n"
               "  --real-gpu            with --target: run the packages on this machine's GPU through\n"
               "                        the CUDA driver (libcuda.so.1) instead of the fake device\n"
               "  --expected FILE       reviewed expected failures (repeatable); exit 1 on any difference\n"
               "  --write-expected FILE write the current failures and compiled-path gaps, with\n"
               "                        reasons, to FILE\n",
               argv0, kiln::conformance::kDefaultDataDir);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace kiln::conformance;
  Options options;
  bool verbose = false;
  std::vector<std::string> expected_paths;
  std::string write_path, expected_arg;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (a == "--verbose") {
      verbose = true;
    } else if (a == "--real-gpu") {
      options.real_gpu = true;
    } else if (a == "--no-compiled") {
      options.compiled = false;
    } else if (a == "--target") {
      const char* v = next();
      if (v == nullptr) return Usage(argv[0]);
      auto gpu = kiln::GpuTarget::Named(v);
      if (!gpu.ok()) {
        std::fprintf(stderr, "kiln_conformance: --target: %s\n", std::string(gpu.status().message()).c_str());
        return 2;
      }
      options.gpu = *gpu;
    } else if (a == "--ptxas") {
      const char* v = next();
      if (v == nullptr) return Usage(argv[0]);
      options.ptxas = v;
    } else if (a == "--data" || a == "--filter" || a == "--expected" || a == "--write-expected") {
      const char* v = next();
      if (v == nullptr) return Usage(argv[0]);
      (a == "--data" ? options.data_dir : a == "--filter" ? options.filter
                                          : a == "--expected" ? expected_arg : write_path) = v;
      if (a == "--expected") expected_paths.push_back(expected_arg);
    } else {
      return Usage(argv[0]);
    }
  }
  if ((!options.ptxas.empty() || options.real_gpu) && !options.gpu) {
    std::fprintf(stderr, "kiln_conformance: --ptxas and --real-gpu need --target cuda:sm_XY\n");
    return 2;
  }
  auto report = RunSuite(options);
  if (!report.ok()) {
    std::fprintf(stderr, "kiln_conformance: %s\n", std::string(report.status().message()).c_str());
    return 1;
  }
  for (const CaseResult& c : report->cases) {
    if (verbose) {
      std::printf("%-60s %-7s %s\n", c.name.c_str(), OutcomeName(c.outcome), c.message.c_str());
      if (c.outcome == Outcome::kPassed) {
        std::printf("%-60s %-7s %s\n", (c.name + kCompiledSuffix).c_str(), OutcomeName(c.compiled),
                    c.compiled_message.c_str());
      }
    } else if (c.outcome == Outcome::kFailed) {
      std::printf("FAILED %s: %s\n", c.name.c_str(), c.message.c_str());
    }
    if (!verbose && c.compiled == Outcome::kFailed) {
      std::printf("FAILED %s%s: %s\n", c.name.c_str(), kCompiledSuffix, c.compiled_message.c_str());
    }
  }
  int status = 0;
  if (!write_path.empty()) {
    std::ofstream out(write_path);
    out << "# ONNX node tests expected to fail (kiln_conformance --expected); one name per line, # reason.\n";
    for (const CaseResult& c : report->cases) {
      if (c.outcome == Outcome::kFailed) out << c.name << "  # " << c.message.substr(0, 160) << "\n";
      if (c.compiled == Outcome::kFailed || (c.outcome == Outcome::kPassed && c.compiled != Outcome::kPassed)) {
        out << c.name << kCompiledSuffix << "  # " << c.compiled_message.substr(0, 160) << "\n";
      }
    }
  }
  if (!expected_paths.empty()) {
    std::map<std::string, std::string> expected;
    for (const std::string& path : expected_paths) {
      auto list = ReadExpectedFailures(path);
      if (!list.ok()) {
        std::fprintf(stderr, "kiln_conformance: %s\n", std::string(list.status().message()).c_str());
        return 1;
      }
      for (const auto& [name, reason] : *list) {
        if (!expected.emplace(name, reason).second) {
          std::fprintf(stderr, "kiln_conformance: %s: '%s' is also listed in an earlier file\n", path.c_str(),
                       name.c_str());
          return 1;
        }
      }
    }
    std::string lists = absl::StrJoin(expected_paths, ", ");
    ExpectationCheck check = CheckExpectations(*report, expected);
    for (const std::string& n : check.unexpected_failures) {
      std::printf("UNEXPECTED FAILURE (not in %s): %s\n", lists.c_str(), n.c_str());
    }
    for (const std::string& n : check.unexpected_passes) {
      std::printf("UNEXPECTED PASS (remove it from %s): %s\n", lists.c_str(), n.c_str());
    }
    if (!check.ok()) status = 1;
  }
  std::printf("interpreter time: %.3f s\n", report->interpreter_seconds);
  const std::string compiled_for = options.gpu ? absl::StrCat(" for ", options.gpu->Key()) : "";
  std::printf("compiled%s: %d passed, %d failed, %d skipped\n", compiled_for.c_str(), report->compiled.passed,
              report->compiled.failed, report->compiled.skipped);
  std::printf("%d passed, %d failed, %d skipped\n", report->interpreted.passed, report->interpreted.failed,
              report->interpreted.skipped);
  return status;
}
