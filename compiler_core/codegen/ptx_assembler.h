// PTX -> cubin with ptxas, the CUDA toolkit's assembler, run as a child
// process (Kiln never links the toolkit). A cubin runs on GPUs of exactly
// its SM version; the package keeps the PTX beside it for newer ones.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler_core/codegen/target.h"

namespace kiln {

class PtxAssembler {
 public:
  // `path` when given (it must be an executable file); else the first
  // ptxas on the PATH, then /usr/local/cuda/bin/ptxas. NOT_FOUND naming
  // every place looked at when there is none.
  static absl::StatusOr<PtxAssembler> Find(const std::string& path = "");

  const std::string& path() const { return path_; }

  // The cubin (ELF bytes) of `ptx` for target.Arch(), assembled at -O3.
  // INVALID_ARGUMENT with ptxas's own message when it refuses the PTX (a
  // code generator bug, or a PTX ISA newer than this ptxas), INTERNAL when
  // it cannot be run.
  absl::StatusOr<std::string> Assemble(const std::string& ptx, const GpuTarget& target) const;

  // What `ptxas --version` prints last ("Cuda compilation tools, release
  // 12.9, V12.9.86"): the toolkit version a package and a record name.
  absl::StatusOr<std::string> Version() const;

 private:
  explicit PtxAssembler(std::string path) : path_(std::move(path)) {}
  // Runs ptxas with `args`; its exit status, stdout and stderr.
  struct Run {
    int status = 0;
    std::string out;
  };
  absl::StatusOr<Run> Execute(const std::vector<std::string>& args) const;

  std::string path_;
};

}  // namespace kiln
