// Legacy-form canonicalization: operators whose semantics changed across ONNX
// opsets are imported with a marker of their old form (the interpreter and
// shape inference honour it); once shapes are known this pass rewrites them
// into the newest form, so that fusion and code generation see one form:
//   Softmax / LogSoftmax / Hardmax of opset < 13 (input coerced to 2-D at
//   `axis`): Flatten(axis) -> op(axis=1) -> Reshape back to the input's shape,
//   or just op(axis=-1) when `axis` is the last one.
#pragma once

#include "compiler_core/passes/pass.h"

namespace kiln {

class LegacyFormCanonicalization : public GraphPass {
 public:
  std::string name() const override { return "legacy_forms"; }
  absl::StatusOr<bool> Run(Graph& graph) override;
};

}  // namespace kiln
