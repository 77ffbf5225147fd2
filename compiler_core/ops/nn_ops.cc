// Neural-network operators: convolution, pooling, normalisation, Softmax, Resize.
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler_core/ops/op_families.h"
#include "compiler_core/ops/op_helpers.h"
#include "compiler_core/shape_inference.h"
#include "compiler_core/status_macros.h"

namespace kiln::ops {

void RegisterNnOps(std::vector<OpDef>* defs) {}

}  // namespace kiln::ops
