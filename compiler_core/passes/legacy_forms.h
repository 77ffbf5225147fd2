// Legacy-form canonicalization: operators whose semantics changed across ONNX
// opsets are imported with a marker of their old form (the interpreter and
// shape inference honour it); once shapes are known this pass rewrites them
// into the newest form, so that fusion and code generation see one form:
//   Softmax / LogSoftmax / Hardmax of opset < 13 (input coerced to 2-D at
//   `axis`): Flatten(axis) -> op(axis=1) -> Reshape back to the input's shape,
//   or just op(axis=-1) when `axis` is the last one.
//   Binary operators of opset < 7 with `broadcast` and `axis`, and PRelu < 7
//   with a per-channel slope (input 1 aligned with input 0 at an axis):
//   Unsqueeze(input 1) to trailing unit dims -> the numpy-broadcasting op.
#pragma once

#include "compiler_core/passes/pass.h"

namespace kiln {

class LegacyFormCanonicalization : public GraphPass {
 public:
  std::string name() const override { return "legacy_forms"; }
  absl::StatusOr<bool> Run(Graph& graph) override;
};

}  // namespace kiln
