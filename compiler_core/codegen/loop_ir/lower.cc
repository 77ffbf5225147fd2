// The registry of loop-IR lowerings and the shared knob helpers.
#include "compiler_core/codegen/loop_ir/lower.h"

#include "compiler_core/codegen/loop_ir/lower_conv.h"
#include "compiler_core/codegen/loop_ir/lower_conv_pair.h"
#include "compiler_core/codegen/loop_ir/lower_data_movement.h"
#include "compiler_core/codegen/loop_ir/lower_elementwise.h"
#include "compiler_core/codegen/loop_ir/lower_index.h"
#include "compiler_core/codegen/loop_ir/lower_matmul.h"
#include "compiler_core/codegen/loop_ir/lower_pool.h"
#include "compiler_core/codegen/loop_ir/lower_recurrence.h"
#include "compiler_core/codegen/loop_ir/lower_reduction.h"
#include "compiler_core/codegen/loop_ir/lower_resize.h"
#include "compiler_core/codegen/loop_ir/lower_topk.h"
#include "compiler_core/codegen/loop_ir/lower_winograd.h"

namespace kiln::loop_ir {

const std::vector<WorkloadLowering>& AllLowerings() {
  static const std::vector<WorkloadLowering>* all = new std::vector<WorkloadLowering>{
      ElementwiseLowering(), MatMulLowering(),        ReductionLowering(),     DataMovementLowering(),  ConvLowering(),
      ConvPairLowering(),    ConvTransposeLowering(), PoolLowering(),          ResizeLowering(),        TopKLowering(),
      IndexLowering(),       RecurrenceLowering(),    WinogradInputLowering(), WinogradOutputLowering()};
  return *all;
}

const WorkloadLowering* FindLowering(const Graph& workload, absl::Status* why) {
  absl::Status first = absl::OkStatus(), malformed = absl::OkStatus();
  for (const WorkloadLowering& l : AllLowerings()) {
    absl::Status s = l.match(workload);
    if (s.ok()) return &l;
    if (first.ok()) first = s;
    if (malformed.ok() && s.code() == absl::StatusCode::kInvalidArgument) malformed = s;
  }
  if (why != nullptr) *why = malformed.ok() ? first : malformed;
  return nullptr;
}

}  // namespace kiln::loop_ir
