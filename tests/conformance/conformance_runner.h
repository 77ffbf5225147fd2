// The ONNX node-test conformance runner: runs every test case of ONNX's node
// test suite (libonnx-testdata) whose operators Kiln claims, through the
// reference interpreter and, where the code generator handles every node,
// through a compiled package and the runtime, and compares with the expected
// outputs. The compiled path is for this CPU, or for a CUDA GPU: a CUDA
// package run by the runtime on the fake CUDA driver, whose launches run each
// kernel's CPU emulation (tests/client/runtime/fake_cuda/fake_cuda_driver.h).
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler_core/codegen/target.h"

namespace kiln::conformance {

inline constexpr char kDefaultDataDir[] = "/usr/share/libonnx-testdata/data/node";

struct Options {
  std::string data_dir = kDefaultDataDir;
  std::string filter;   // run only cases whose name contains this
  bool compiled = true;  // also run the compiled path
  // Set: the compiled path prepares for this GPU (PrepareOptionsFor), builds a
  // CUDA package with the default GPU schedules and runs it through
  // runtime::Session on the fake CUDA driver, for a device of this SM.
  std::optional<GpuTarget> gpu;
  // With `gpu`: the ptxas that assembles the package's cubin (a failure to
  // assemble fails the case); empty: the package carries PTX only.
  std::string ptxas;
  // With `gpu`: run the packages on this machine's GPU through the CUDA
  // driver (libcuda.so.1) instead of the fake one; the suite fails at once,
  // saying why, when no driver or device is there.
  bool real_gpu = false;
};

enum class Outcome { kPassed, kFailed, kSkipped };
const char* OutcomeName(Outcome o);

struct CaseResult {
  std::string name;        // the test folder's name, e.g. "test_slice_neg"
  Outcome outcome = Outcome::kSkipped;
  std::string message;     // why it failed or was skipped
  Outcome compiled = Outcome::kSkipped;
  std::string compiled_message;
  double interpreter_seconds = 0;  // Evaluate only, summed over data sets
};

struct Counts {
  int passed = 0, failed = 0, skipped = 0;
};

struct Report {
  std::vector<CaseResult> cases;  // sorted by name
  Counts interpreted, compiled;
  bool compiled_ran = true;  // false with Options.compiled off: no compiled-path checks
  double interpreter_seconds = 0;
};

// Runs one case folder (model.onnx + test_data_set_*/) as `options` say
// (compiled, gpu, ptxas; not data_dir or filter). A case whose nodes use an
// operator outside the operator table is skipped ("not covered").
CaseResult RunCase(const std::string& case_dir, const Options& options);

// Runs every case folder under options.data_dir (sorted by name).
absl::StatusOr<Report> RunSuite(const Options& options);

// Tolerances of the comparison: |got - want| <= atol + rtol * |want| for
// floats, NaN equals NaN; exact for integers and bools.
inline constexpr double kRtol = 1e-3;
inline constexpr double kAtol = 1e-7;

// The reviewed list of expected failures: one test name per line, optionally
// followed by "# reason"; blank lines and lines starting with '#' are ignored.
// A failure of the compiled path is listed as "<test name>@compiled".
inline constexpr char kCompiledSuffix[] = "@compiled";
absl::StatusOr<std::map<std::string, std::string>> ReadExpectedFailures(const std::string& path);

// Differences between a report and the expected-failure list: failures not
// listed (a case the interpreter passes but the compiled path does not run,
// "<name>@compiled", counts as a failure of the compiled path), and listed
// cases that now pass. Listed cases that were filtered out
// or skipped are not differences.
struct ExpectationCheck {
  std::vector<std::string> unexpected_failures;
  std::vector<std::string> unexpected_passes;
  bool ok() const { return unexpected_failures.empty() && unexpected_passes.empty(); }
};
ExpectationCheck CheckExpectations(const Report& report, const std::map<std::string, std::string>& expected);

}  // namespace kiln::conformance
