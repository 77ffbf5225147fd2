// The fuzz targets that import a model (ONNX bytes, a kiln.v1.Graph) take
// what imports on through the compiler driver.
#pragma once

#include <memory>

#include "compiler_core/codegen/target.h"
#include "compiler_core/driver/compile_driver.h"
#include "tests/fuzz/fuzz_check.h"

namespace kiln::fuzz {

// A verified graph goes on through the passes and the compilability check:
// from here on an error is allowed (e.g. a model too big to fold), a crash is
// not, and an error says what it is.
inline void PrepareAndCheck(std::unique_ptr<Graph> graph, const CpuTarget& target) {
  absl::StatusOr<PreparedModel> prepared = PrepareModel(std::move(graph));
  if (!prepared.ok()) {
    if (prepared.status().message().empty()) Fail("PrepareModel: error without a message");
    return;
  }
  (void)CheckCompilable(*prepared, target);
}

}  // namespace kiln::fuzz
