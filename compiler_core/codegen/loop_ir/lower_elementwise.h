// The elementwise family's code generation (the operators of
// compiler_core/frontend/ops/elementwise_ops.cc): one expression rule per
// operator, which GraphExpr inlines wherever the operator appears (loop
// nests, anchor epilogues and prologues, reduction producers), and the
// "elementwise" lowering: a DAG of such operators over any Kiln dtype as one
// loop nest per output.
//
// Knobs of the elementwise and data_movement kinds: vw (lanes of the innermost
// loop, masked tail; at most a vector of the widest element), tasks (parallel
// split of the outermost loop; 1 = serial).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "compiler_core/codegen/loop_ir/loop_ir.h"
#include "compiler_core/codegen/loop_ir/lower.h"
#include "compiler_core/ir/graph.h"

namespace kiln::loop_ir {

class GraphExpr;

// What an elementwise rule computes from: the node, its operands' values at
// the element (nullptr for an omitted optional input), the type the node
// computes in (ComputeTypeOf its first input) and its output dtype.
struct ElementwiseOperands {
  const Node& node;
  const std::vector<Expr>& a;
  ScalarType t;
  DType out_dtype;

  Expr x() const { return a[0]; }
  Expr k(double v) const { return Const(t, v); }        // a constant of the compute type
  bool fl() const { return IsFloat(t); }
  Expr call(const char* f, std::vector<Expr> args) const { return Call(f, std::move(args), t); }
};

struct ElementwiseRule {
  // The value of output 0 at the element.
  std::function<Expr(const ElementwiseOperands&)> expr;
  // OK when the node's attributes and constant operands are understood
  // (UNIMPLEMENTED naming the node otherwise); optional.
  std::function<absl::Status(const Node&)> check;
  // How many inputs are operands (-1: all); the rest are read at compile time.
  int operands = -1;
  // Inputs 1.. are [C] vectors read at the channel index (axis 1).
  bool per_channel_operands = false;
  // Output 1, if present, is all true (Dropout's mask).
  bool true_mask_output = false;
};

// The rule of `op_type`, or nullptr when the operator is not inlined.
const ElementwiseRule* FindElementwiseRule(const std::string& op_type);

// An f32-computed f16 value rounded to f16 (unchanged for other dtypes).
Expr RoundTo(DType d, Expr e);

// An output of an inlined DAG in boxes, each written by one loop nest: a
// Concat output is the slab of each of its inputs at its offset on the axis,
// so that each element is computed from the one input it comes from (no
// select chain over every input, no clamped reads of the others). So is an
// output computed elementwise from a Concat of its shape whose other
// operands are workload inputs (DenseNet's Concat, BatchNormalization,
// Relu): each box evaluates the output with the Concat pinned to its input
// (GraphExpr::PinConcatInput). Any other output is one box.
struct OutputSegment {
  const Value* source;        // the value whose element idx is stored
  std::vector<int64_t> dims;  // the box's extents
  int axis = 0;               // where the box starts in the output: offset on axis
  int64_t offset = 0;
  std::string name;           // loop-variable prefix suffix ("" or "c<i>_")
  const Node* concat = nullptr;  // with `input`: the Concat to pin while evaluating source
  int input = -1;
};
std::vector<OutputSegment> OutputSegments(const Value* result);
// The value a segment's nest stores at its box index `idx`, and (in `at`)
// the output index it stores it at.
absl::StatusOr<Expr> SegmentValue(GraphExpr& ge, const OutputSegment& seg, const std::vector<Expr>& idx,
                                  std::vector<Expr>* at);

// The loop nest of an inlined DAG, one per output: the "elementwise" kind
// (no data movement) or, with `movement`, the "data_movement" kind.
WorkloadLowering InlinedNestLowering(bool movement);

WorkloadLowering ElementwiseLowering();

}  // namespace kiln::loop_ir
