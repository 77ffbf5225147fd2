// GraphExpr: inlining of elementwise and data-movement nodes into loop-IR
// expressions, through the rules of their families (lower_elementwise.h,
// lower_data_movement.h).
#include "compiler_core/codegen/loop_ir/graph_expr.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compiler_core/codegen/loop_ir/lower_data_movement.h"
#include "compiler_core/codegen/loop_ir/lower_elementwise.h"
#include "compiler_core/codegen/loop_ir/schedule.h"
#include "compiler_core/frontend/ops/op_helpers.h"
#include "compiler_core/ir/float16.h"

namespace kiln::loop_ir {

absl::Status NodeError(const Node& n, const std::string& why) {
  return absl::UnimplementedError(absl::StrCat("node ", n.name(), " (", n.op_type(), "): ", why));
}

Expr ScalarConstant(const Tensor& t) {
  ScalarType st = ComputeTypeOf(t.dtype());
  switch (t.dtype()) {
    case DType::kInt8: return IntConst(st, t.data<int8_t>()[0]);
    case DType::kInt16: return IntConst(st, t.data<int16_t>()[0]);
    case DType::kInt32: return IntConst(st, t.data<int32_t>()[0]);
    case DType::kInt64: return IntConst(st, t.data<int64_t>()[0]);
    case DType::kUInt8: return IntConst(st, t.data<uint8_t>()[0]);
    case DType::kUInt16: return IntConst(st, t.data<uint16_t>()[0]);
    case DType::kUInt32: return IntConst(st, t.data<uint32_t>()[0]);
    case DType::kUInt64: return IntConst(st, static_cast<int64_t>(t.data<uint64_t>()[0]));
    case DType::kBool: return IntConst(st, t.data<uint8_t>()[0] != 0);
    default: return Const(st, ops::ElementAsDouble(t, 0));
  }
}

std::vector<int64_t> DimsOf(const Value* v) { return v->type().StaticDims(); }

ScalarType ScalarTypeOf(DType t) {
  switch (t) {
    case DType::kFloat64: return ScalarType::kF64;
    case DType::kFloat16: return ScalarType::kF16;
    case DType::kBFloat16: return ScalarType::kBF16;
    case DType::kInt8: return ScalarType::kI8;
    case DType::kInt16: return ScalarType::kI16;
    case DType::kInt32: return ScalarType::kI32;
    case DType::kInt64: return ScalarType::kI64;
    case DType::kUInt8: return ScalarType::kU8;
    case DType::kUInt16: return ScalarType::kU16;
    case DType::kUInt32: return ScalarType::kU32;
    case DType::kUInt64: return ScalarType::kU64;
    case DType::kBool: return ScalarType::kBool;
    default: return ScalarType::kF32;
  }
}

ScalarType ComputeTypeOf(DType t) { return IsNarrowFloat(t) ? ScalarType::kF32 : ScalarTypeOf(t); }

bool IsInlinableElementwise(const std::string& op) { return FindElementwiseRule(op) != nullptr; }

bool IsInlinableDataMovement(const std::string& op) { return FindDataMovementRule(op) != nullptr; }

absl::Status GraphExpr::CheckNode(const Node& n) {
  const ElementwiseRule* elementwise = FindElementwiseRule(n.op_type());
  const DataMovementRule* movement = FindDataMovementRule(n.op_type());
  if (elementwise == nullptr && movement == nullptr) return NodeError(n, "not inlinable");
  const bool mask = elementwise != nullptr && elementwise->true_mask_output;
  if (n.num_outputs() != 1 && !(mask && n.num_outputs() == 2)) return NodeError(n, "extra outputs");
  for (int i = 0; i < n.num_outputs(); ++i) {
    if (n.output(i) == nullptr) return NodeError(n, "missing output");
  }
  for (int i = 0; i < n.num_inputs(); ++i) {
    if (n.input(i) != nullptr && !n.input(i)->type().known) return NodeError(n, "input of unknown type");
  }
  const auto& check = elementwise != nullptr ? elementwise->check : movement->check;
  return check ? check(n) : absl::OkStatus();
}

GraphExpr::GraphExpr(const Graph& g) : g_(g) {
  inputs_ = static_cast<int>(g.inputs().size());
  int arg = 0;
  for (const Value* v : g.inputs()) {
    Buffer b = MakeBuffer(absl::StrCat("in", arg), DimsOf(v), BufferRole::kInput, arg, ScalarTypeOf(v->type().dtype));
    input_buf_[v] = b;
    args_.push_back(b);
    ++arg;
  }
  for (size_t j = 0; j < g.outputs().size(); ++j) {
    args_.push_back(MakeBuffer(absl::StrCat("out", j), DimsOf(g.outputs()[j]), BufferRole::kOutput, arg++,
                               ScalarTypeOf(g.outputs()[j]->type().dtype)));
  }
}

absl::StatusOr<Expr> GraphExpr::AtBroadcast(const Value* x, const std::vector<Expr>& out_index) {
  std::vector<int64_t> d = DimsOf(x);
  const size_t rank = out_index.size();
  std::vector<Expr> sub;
  for (size_t k = 0; k < d.size(); ++k) sub.push_back(d[k] == 1 ? IntImm(0) : out_index[k + rank - d.size()]);
  return At(x, sub);
}

absl::StatusOr<Expr> GraphExpr::At(const Value* v, const std::vector<Expr>& idx) {
  ScalarType ct = ComputeTypeOf(v->type().dtype);
  if (auto it = values_.find(v); it != values_.end()) return RoundTo(v->type().dtype, Cast(ct, it->second));
  if (auto it = bound_.find(v); it != bound_.end()) return Cast(ct, Load(it->second, idx));
  if (auto it = input_buf_.find(v); it != input_buf_.end()) return Cast(ct, Load(it->second, idx));
  const Node* n = v->producer();
  if (n == nullptr) {
    if (v->is_constant() && NumElements(DimsOf(v)) == 1) return ScalarConstant(v->constant());
    return absl::UnimplementedError(absl::StrCat("value ", v->name(), " has no producer"));
  }
  RETURN_IF_ERROR(CheckNode(*n));
  if (const DataMovementRule* movement = FindDataMovementRule(n->op_type())) {
    return movement->at(*this, *n, idx);
  }
  const ElementwiseRule& rule = *FindElementwiseRule(n->op_type());
  if (rule.true_mask_output && n->num_outputs() > 1 && v == n->output(1)) return IntConst(ScalarType::kBool, 1);
  const int operands = rule.operands >= 0 ? rule.operands : n->num_inputs();
  std::vector<Expr> a;
  for (int i = 0; i < operands; ++i) {
    const Value* x = n->input(i);
    if (x == nullptr) {
      a.push_back(nullptr);
      continue;
    }
    // Per-channel operands ([C] vectors of BatchNormalization) are read at the
    // channel index; the others broadcast as numpy does.
    absl::StatusOr<Expr> e = i > 0 && rule.per_channel_operands
                                 ? At(x, {DimsOf(x)[0] == 1 ? IntImm(0) : idx[1]})
                                 : AtBroadcast(x, idx);
    if (!e.ok()) return e.status();
    a.push_back(*e);
  }
  ElementwiseOperands ops{*n, a, ComputeTypeOf(n->input(0)->type().dtype), n->output(0)->type().dtype};
  return RoundTo(v->type().dtype, rule.expr(ops));
}

Stmt ForEachIndex(const std::vector<int64_t>& dims, const std::string& prefix,
                  const std::function<Stmt(const std::vector<Expr>&)>& body) {
  std::vector<Expr> idx;
  for (size_t d = 0; d < dims.size(); ++d) {
    idx.push_back(dims[d] == 1 ? IntImm(0) : Var(absl::StrCat(prefix, d)));
  }
  Stmt s = body(idx);
  for (size_t d = dims.size(); d-- > 0;) {
    if (dims[d] != 1) s = For(absl::StrCat(prefix, d), IntImm(dims[d]), s);
  }
  return s;
}

absl::StatusOr<Stmt> ScheduleNest(Stmt nest, const std::vector<int64_t>& dims, const std::string& prefix,
                                  int64_t vw, int64_t tasks) {
  int inner = -1, outer = -1;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] != 1) {
      if (outer < 0) outer = static_cast<int>(d);
      inner = static_cast<int>(d);
    }
  }
  if (inner < 0) return nest;
  std::string outer_name = absl::StrCat(prefix, outer);
  int64_t outer_ext = dims[outer];
  if (vw > 1) {
    std::string v = absl::StrCat(prefix, inner);
    // A row of vw lanes and a rest: whole vectors, then one narrower vector,
    // unless the row's vectors are the loop split into tasks (the rest would
    // sit outside it). A guarded split masks every vector of the row at run
    // time, and Zen 3 runs each masked store as microcode (a softmax's output
    // pass over 196-wide rows: 25 masked loads and stores a row).
    const int64_t n = dims[inner], rest = n % vw;
    const bool peel = rest != 0 && !(inner == outer && tasks > 1);
    ASSIGN_OR_RETURN(nest, Split(nest, v, vw, v + "o", v + "v", peel ? TailStrategy::kPeel : TailStrategy::kGuard));
    if (n >= vw) {
      ASSIGN_OR_RETURN(nest, Vectorize(nest, v + "v"));
    }
    if (peel && rest > 1) {
      ASSIGN_OR_RETURN(nest, Vectorize(nest, v + "v_tail"));
    }
    if (inner == outer) {
      outer_name = v + "o";
      outer_ext = (dims[inner] + vw - 1) / vw;
    }
  }
  if (tasks > 1 && outer_ext > 1) {
    int64_t per = (outer_ext + tasks - 1) / tasks;
    if (per > 1) {
      ASSIGN_OR_RETURN(nest, Split(nest, outer_name, per, "task", outer_name + "t"));
      ASSIGN_OR_RETURN(nest, Parallel(nest, "task"));
    } else {
      ASSIGN_OR_RETURN(nest, Parallel(nest, outer_name));
    }
  }
  return nest;
}

}  // namespace kiln::loop_ir
