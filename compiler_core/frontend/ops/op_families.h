// Registration of the operator families that make up the operator table
// (compiler_core/frontend/op_registry.cc). One file per family under
// compiler_core/frontend/ops/, cut along the same lines as the lowerings
// (compiler_core/codegen/loop_ir/lower_<family>.cc): an operator's
// definition and its code generation are found under the same name.
#pragma once

#include <vector>

#include "compiler_core/frontend/op_registry.h"

namespace kiln::ops {

void RegisterElementwiseOps(std::vector<OpDef>* defs);   // arithmetic, activations, logic, Cast, BatchNormalization
void RegisterDataMovementOps(std::vector<OpDef>* defs);  // Transpose, Reshape, Slice, Concat, Pad, Tile, Expand, ...
void RegisterIndexOps(std::vector<OpDef>* defs);         // Gather*, GatherND, DepthToSpace, SpaceToDepth, Split, Trilu, ArgMax, CumSum
void RegisterMatMulOps(std::vector<OpDef>* defs);        // MatMul, Gemm, Einsum
void RegisterReductionOps(std::vector<OpDef>* defs);     // Reduce*, Softmax family, LayerNorm, InstanceNorm, global pools
void RegisterConvOps(std::vector<OpDef>* defs);          // Conv, ConvTranspose, kiln.BlockedConv (made by a pass)
void RegisterPoolOps(std::vector<OpDef>* defs);          // MaxPool, AveragePool
void RegisterResizeOps(std::vector<OpDef>* defs);        // Resize, Upsample
void RegisterTopKOps(std::vector<OpDef>* defs);          // TopK
void RegisterShapeOps(std::vector<OpDef>* defs);         // Constant, Shape, Size, ConstantOfShape, Range
void RegisterRnnOps(std::vector<OpDef>* defs);           // LSTM, GRU, RNN (unrolled by a pass)
void RegisterWinogradOps(std::vector<OpDef>* defs);      // kiln.WinogradInput, kiln.WinogradOutput (made by a pass)

// `def` with its traits set: the family files register every operator with
// its class (and the few per-operator flags) through these.
inline OpDef WithClass(OpClass op_class, OpDef def) {
  def.traits.op_class = op_class;
  return def;
}
inline OpDef LayoutOnly(OpDef def) {
  def.traits.op_class = OpClass::kDataMovement;
  def.traits.layout_only = true;
  return def;
}
inline OpDef ReadsOutputSizedInput0(OpDef def) {
  def.traits.reads_output_sized_input0 = true;
  return def;
}

}  // namespace kiln::ops
