// Fuzz target: ONNX ModelProto bytes -> ImportModel (parse, import, verify,
// shape inference) and, for a model that imports, PrepareModel (graph passes,
// partitioning, workloads) and CheckCompilable (lowering to loop IR, no LLVM).
// A bad model must give INVALID_ARGUMENT, never a crash, a hang or an OOM.
#include <cstddef>
#include <cstdint>
#include <string>

#include "compiler_core/codegen/target.h"
#include "compiler_core/driver/compile_driver.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/prepare_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const kiln::CpuTarget* target = new kiln::CpuTarget(*kiln::CpuTarget::Named("x86-64-v3"));
  kiln::ModelSource source;
  source.onnx_model.assign(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::unique_ptr<kiln::Graph>> graph = kiln::ImportModel(source);
  if (!graph.ok()) {
    kiln::fuzz::CheckInputError(graph.status(), "ImportModel");
    return 0;
  }
  kiln::fuzz::PrepareAndCheck(std::move(*graph), *target);
  return 0;
}
