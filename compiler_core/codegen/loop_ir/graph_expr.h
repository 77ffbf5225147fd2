// Loop-IR expressions for the values of a workload graph: elementwise and
// data-movement nodes are inlined through their family's rules
// (lower_elementwise.h, lower_data_movement.h: data movement becomes index
// arithmetic), graph inputs are loads, and values bound to a buffer
// (materialized results such as reductions) are loads from it. Shared by the
// lowerings of every kind.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler_core/codegen/loop_ir/loop_ir.h"
#include "compiler_core/ir/graph.h"

namespace kiln::loop_ir {

// True for operators GraphExpr inlines: those with an elementwise rule
// (lower_elementwise.h) or a data-movement rule (lower_data_movement.h).
bool IsInlinableElementwise(const std::string& op_type);
bool IsInlinableDataMovement(const std::string& op_type);

class GraphExpr {
 public:
  // Argument buffers: in<i> for the workload's inputs, out<j> for its outputs.
  explicit GraphExpr(const Graph& workload);

  const std::vector<Buffer>& args() const { return args_; }
  const Buffer& output_buffer(int j) const { return args_[inputs_ + j]; }
  // Reads of `v` load from `b` from now on.
  void Bind(const Value* v, Buffer b) { bound_[v] = std::move(b); }
  // Reads of `v` are `e` from now on, whatever the index: for an anchor's
  // result inside its own store loop, where every read of it is at the
  // element being stored (the epilogue takes the accumulator, not a reload).
  void BindValue(const Value* v, Expr e) { values_[v] = std::move(e); }
  bool IsBound(const Value* v) const { return bound_.count(v) > 0; }
  // Reads of Concat `concat` take its input `input` (the element's index on
  // the axis less the input's offset), no select over the inputs: for a loop
  // nest that covers only that input's slab of the Concat (OutputSegments).
  // -1 unpins.
  void PinConcatInput(const Node* concat, int input) { pinned_concat_ = concat, pinned_input_ = input; }
  int PinnedConcatInput(const Node* concat) const { return concat == pinned_concat_ ? pinned_input_ : -1; }

  // The value at a multi-dimensional index (one expression per dim of v), of
  // type ComputeTypeOf(v's dtype) (Cast to the buffer's dtype to store it).
  // UNIMPLEMENTED for a producer that is neither inlinable nor bound.
  absl::StatusOr<Expr> At(const Value* v, const std::vector<Expr>& index);
  // `x` read by numpy broadcasting at `out_index`, an index into a value of
  // rank out_index.size() >= x's rank.
  absl::StatusOr<Expr> AtBroadcast(const Value* x, const std::vector<Expr>& out_index);

  // OK when `node` inlines: an inlinable operator whose attributes and
  // constant operands its rule understands.
  static absl::Status CheckNode(const Node& node);

 private:
  const Graph& g_;
  int inputs_ = 0;
  std::vector<Buffer> args_;
  std::map<const Value*, Buffer> bound_;
  std::map<const Value*, Expr> values_;
  std::map<const Value*, Buffer> input_buf_;
  const Node* pinned_concat_ = nullptr;
  int pinned_input_ = -1;
};

// UNIMPLEMENTED "node N (Op): why": a node a lowering cannot take.
absl::Status NodeError(const Node& n, const std::string& why);

// Static dims of a value (its type must be static).
std::vector<int64_t> DimsOf(const Value* v);

// The loop-IR type of a Kiln dtype (kUnknown -> f32), and the type values of
// that dtype are computed in: f16 is computed in f32 (rounded to f16 after
// every node, as the interpreter does), everything else in itself.
ScalarType ScalarTypeOf(DType t);
ScalarType ComputeTypeOf(DType t);

// The scalar constant `t` holds at element 0, in its compute type.
Expr ScalarConstant(const Tensor& t);

// Loops over every index of `dims` (loop vars prefix0, prefix1, ...; size-1
// dims get index 0 and no loop) around body(index).
Stmt ForEachIndex(const std::vector<int64_t>& dims, const std::string& prefix,
                  const std::function<Stmt(const std::vector<Expr>&)>& body);

// Schedules a nest built by ForEachIndex: the innermost loop split by `vw`
// and vectorized when vw > 1 (whole vectors, then the rest as one narrower
// vector; a guarded, lane-masked tail where that loop is also the one split
// into tasks), the outermost loop split into at
// most `tasks` parallel iterations when tasks > 1. Returns the nest unchanged
// where a step does not apply.
absl::StatusOr<Stmt> ScheduleNest(Stmt nest, const std::vector<int64_t>& dims, const std::string& prefix,
                                  int64_t vw, int64_t tasks);

}  // namespace kiln::loop_ir
