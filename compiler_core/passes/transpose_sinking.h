// Transpose sinking: a Transpose is moved below the layout-agnostic nodes
// that read it, so that it meets its inverse and both vanish.
//
// Converters from channels-last frameworks (tf2onnx on Keras) leave each
// NCHW Conv wrapped in Transposes to NHWC and back, with the activations,
// padding, squeeze-and-excitation means and residual adds in between:
//
//   Conv -> Transpose(0,2,3,1) -> HardSwish -> Mul(., se) -> Transpose(0,3,1,2) -> Conv
//
// Every one of those full-size transposes is a copy of the feature map.
//
// The pass takes the region of nodes reachable from a Transpose T =
// Transpose(x, p) through elementwise operators (every input broadcast to the
// region's rank), Pad (pads permuted) and keepdims Reduce* (axes permuted),
// and rewrites it to compute on x's layout: side inputs are transposed by the
// inverse of p (folded for constants; a value that is itself a transpose by p
// is read before it), and every value the region hands to a node outside it
// is transposed back by p. It rewrites only when that removes more
// feature-map copies than it adds (Pays): T itself when nothing else reads
// it, and every reader outside that undoes p (algebraic simplification then
// cancels the pair), against large side inputs and large values handed on.
// A residual add between two wrapped convs is why side inputs may be large:
// once the block before is rewritten its output is a transpose by p again.
#pragma once

#include <cstdint>

#include "compiler_core/passes/pass.h"

namespace kiln {

// Side inputs and values leaving the region up to this many elements may take
// a Transpose of their own (a squeeze-and-excitation scale, a per-channel
// vector): far cheaper than the feature-map copies the pass removes.
inline constexpr int64_t kSinkSmallElements = 4096;

class TransposeSinking : public GraphPass {
 public:
  std::string name() const override { return "transpose_sinking"; }
  absl::StatusOr<bool> Run(Graph& graph) override;
};

}  // namespace kiln
