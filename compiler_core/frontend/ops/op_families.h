// Registration of the operator families that make up the operator table
// (compiler_core/frontend/op_registry.cc). One file per family under compiler_core/ops/.
#pragma once

#include <vector>

#include "compiler_core/frontend/op_registry.h"

namespace kiln::ops {

void RegisterElementwiseOps(std::vector<OpDef>* defs);  // arithmetic, activations, logic, Cast, ...
void RegisterLinalgOps(std::vector<OpDef>* defs);       // MatMul, Gemm, Einsum
void RegisterNnOps(std::vector<OpDef>* defs);           // Conv, pooling, normalisation, Softmax, Resize, ...
void RegisterReduceOps(std::vector<OpDef>* defs);       // Reduce*, ArgMax/ArgMin, TopK, CumSum
void RegisterTensorOps(std::vector<OpDef>* defs);       // data movement, shape ops, Constant, ...

}  // namespace kiln::ops
