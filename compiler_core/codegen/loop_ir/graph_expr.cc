// GraphExpr: inlining of elementwise and data-movement nodes into loop-IR
// expressions.
#include "compiler_core/codegen/loop_ir/graph_expr.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "compiler_core/frontend/ops/op_helpers.h"
#include "compiler_core/codegen/loop_ir/schedule.h"
#include "base/status_macros.h"

namespace kiln::loop_ir {
namespace {

absl::Status NodeError(const Node& n, const std::string& why) {
  return absl::UnimplementedError(absl::StrCat("node ", n.name(), " (", n.op_type(), "): ", why));
}

// Per-axis start and step of a Slice, after ONNX clamping.
absl::Status SliceParams(const Node& n, std::vector<int64_t>* start, std::vector<int64_t>* step) {
  std::vector<int64_t> in = DimsOf(n.input(0));
  int64_t rank = static_cast<int64_t>(in.size());
  std::vector<int64_t> starts, ends, axes, steps;
  if (n.input(1) != nullptr) {
    ASSIGN_OR_RETURN(starts, ops::ConstantIntInput(n, 1));
    ASSIGN_OR_RETURN(ends, ops::ConstantIntInput(n, 2));
    if (n.input(3) != nullptr) {
      ASSIGN_OR_RETURN(axes, ops::ConstantIntInput(n, 3));
    }
    if (n.input(4) != nullptr) {
      ASSIGN_OR_RETURN(steps, ops::ConstantIntInput(n, 4));
    }
  } else {
    starts = n.GetInts("starts", {});
    ends = n.GetInts("ends", {});
    axes = n.GetInts("axes", {});
  }
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
    return NodeError(n, "starts, ends, axes and steps differ in length");
  }
  start->assign(rank, 0);
  step->assign(rank, 1);
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (a < 0 || a >= rank) return NodeError(n, "axis out of range");
    int64_t d = in[a], s = starts[i], st = steps[i];
    if (st == 0) return NodeError(n, "step 0");
    if (s < 0) s += d;
    if (st > 0) s = std::clamp<int64_t>(s, 0, d);
    else s = std::clamp<int64_t>(s, 0, d - 1);
    (*start)[a] = s;
    (*step)[a] = st;
  }
  return absl::OkStatus();
}

absl::Status PadParams(const Node& n, std::vector<int64_t>* begin, double* value) {
  std::vector<int64_t> in = DimsOf(n.input(0));
  size_t rank = in.size();
  if (n.GetString("mode", "constant") != "constant") return NodeError(n, "only constant padding");
  std::vector<int64_t> pads;
  *value = 0;
  if (n.input(1) != nullptr) {
    ASSIGN_OR_RETURN(pads, ops::ConstantIntInput(n, 1));
    if (n.input(2) != nullptr) {
      if (!n.input(2)->is_constant()) return NodeError(n, "pad value is not a constant");
      *value = ops::ElementAsDouble(n.input(2)->constant(), 0);
    }
    if (n.input(3) != nullptr) {
      ASSIGN_OR_RETURN(std::vector<int64_t> axes, ops::ConstantIntInput(n, 3));
      std::vector<int64_t> full(2 * rank, 0);
      for (size_t i = 0; i < axes.size(); ++i) {
        int64_t a = axes[i] < 0 ? axes[i] + static_cast<int64_t>(rank) : axes[i];
        if (a < 0 || a >= static_cast<int64_t>(rank) || pads.size() != 2 * axes.size()) {
          return NodeError(n, "bad axes");
        }
        full[a] = pads[i];
        full[a + rank] = pads[i + axes.size()];
      }
      pads = full;
    }
  } else {
    pads = n.GetInts("pads", {});
    *value = n.GetFloat("value", 0.0f);
  }
  if (pads.size() != 2 * rank) return NodeError(n, "pads do not match the rank");
  begin->assign(pads.begin(), pads.begin() + rank);
  return absl::OkStatus();
}

Expr Clamp(Expr x, int64_t lo, int64_t hi) { return Min(Max(std::move(x), IntImm(lo)), IntImm(hi)); }

// The scalar constant `t` holds at element 0, in its exact type.
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

DType OutDType(const Node& n) { return n.output(0)->type().dtype; }
DType InDType(const Node& n, int i) { return n.input(i)->type().dtype; }

// Rounds an f32-computed f16 value to f16 (a no-op for other types).
Expr RoundTo(DType d, Expr e) {
  if (d != DType::kFloat16) return e;
  return Cast(ScalarType::kF32, Cast(ScalarType::kF16, std::move(e)));
}

absl::StatusOr<Expr> ElementwiseExpr(const Node& n, const std::vector<Expr>& a) {
  const std::string& op = n.op_type();
  DType od = OutDType(n);
  DType id = InDType(n, 0);
  ScalarType t = ComputeTypeOf(id);
  auto k = [&](double v) { return Const(t, v); };
  bool fl = IsFloat(t);
  Expr x = a[0];
  auto call = [&](const char* f, std::vector<Expr> args) { return Call(f, std::move(args), t); };
  if (op == "Add") return Add(a[0], a[1]);
  if (op == "Sub") return Sub(a[0], a[1]);
  if (op == "Mul") return Mul(a[0], a[1]);
  if (op == "Div") return Div(a[0], a[1]);
  if (op == "Relu") return Select(Lt(x, k(0)), k(0), x);
  if (op == "Neg") return fl ? call("neg", {x}) : Sub(k(0), x);
  if (op == "Abs") {
    if (fl) return call("abs", {x});
    return IsSigned(t) ? Select(Lt(x, k(0)), Sub(k(0), x), x) : x;
  }
  if (op == "Sign") {
    Expr r = Select(Gt(x, k(0)), k(1), k(0));
    if (IsSigned(t)) r = Select(Lt(x, k(0)), k(-1), r);
    if (fl) r = Select(Ne(x, x), x, r);
    return r;
  }
  // trunc(erf(x)) in double for integer x: 0 unless erf rounds to +-1 (|x| >= 6).
  if (op == "Erf" && !fl) {
    Expr r = Select(Ge(x, k(6)), k(1), k(0));
    return IsSigned(t) ? Select(Le(x, k(-6)), k(-1), r) : r;
  }
  static const std::map<std::string, const char*> kCalls = {
      {"Sigmoid", "sigmoid"}, {"Sqrt", "sqrt"}, {"Exp", "exp"},     {"Log", "log"},     {"Tanh", "tanh"},
      {"Erf", "erf"},         {"Sin", "sin"},   {"Cos", "cos"},     {"Floor", "floor"}, {"Ceil", "ceil"},
      {"Round", "round"}};
  if (auto it = kCalls.find(op); it != kCalls.end()) return call(it->second, {x});
  if (op == "Reciprocal") return Div(k(1), x);
  if (op == "Softsign") return Div(x, Add(k(1), call("abs", {x})));
  if (op == "Softplus") {
    Expr pos = Add(x, call("log1p", {call("exp", {call("neg", {x})})}));
    return Select(Gt(x, k(0)), pos, call("log1p", {call("exp", {x})}));
  }
  if (op == "Not") return Not(x);
  if (op == "And") return And(a[0], a[1]);
  if (op == "Or") return Or(a[0], a[1]);
  if (op == "Xor") return Ne(a[0], a[1]);
  if (op == "Equal") return Eq(a[0], a[1]);
  if (op == "Less") return Lt(a[0], a[1]);
  if (op == "Greater") return Gt(a[0], a[1]);
  if (op == "LessOrEqual") return Le(a[0], a[1]);
  if (op == "GreaterOrEqual") return Ge(a[0], a[1]);
  if (op == "Where") return Select(a[0], a[1], a[2]);
  if (op == "PRelu") return Select(Lt(x, k(0)), Mul(x, a[1]), x);
  if (op == "Cast" || op == "CastLike") return RoundTo(od, Cast(ComputeTypeOf(od), x));
  if (op == "Dropout") return x;
  if (op == "Expand") return x;
  if (op == "Max" || op == "Min") {
    Expr r = a[0];
    for (size_t i = 1; i < a.size(); ++i) {
      if (a[i] == nullptr) continue;
      if (fl) {
        r = call(op == "Max" ? "fmax" : "fmin", {r, a[i]});
      } else {
        r = op == "Max" ? Max(r, a[i]) : Min(r, a[i]);
      }
    }
    return r;
  }
  if (op == "Sum" || op == "Mean") {
    Expr r = a[0];
    int count = 1;
    for (size_t i = 1; i < a.size(); ++i) {
      if (a[i] == nullptr) continue;
      r = Add(r, a[i]);
      ++count;
    }
    return op == "Mean" ? Div(r, k(count)) : r;
  }
  if (op == "Mod") {
    if (fl) return Mod(a[0], a[1]);
    Expr r = Mod(a[0], a[1]);
    if (n.GetInt("fmod", 0) == 1 || !IsSigned(t)) return r;
    Expr fix = And(Ne(r, k(0)), Ne(Lt(r, k(0)), Lt(a[1], k(0))));
    return Select(fix, Add(r, a[1]), r);
  }
  if (op == "Pow") {
    ScalarType et = ComputeTypeOf(InDType(n, 1));
    if (fl) return call("pow", {x, Cast(t, a[1])});
    if (!IsFloat(et)) return Call("ipow", {x, Cast(ScalarType::kI64, a[1])}, t);
    return Cast(t, Call("pow", {Cast(ScalarType::kF64, x), Cast(ScalarType::kF64, a[1])}, ScalarType::kF64));
  }
  if (op == "Clip") {
    Expr lo = a.size() > 1 ? a[1] : nullptr, hi = a.size() > 2 ? a[2] : nullptr;
    if (t == ScalarType::kF32) {
      float alo = n.GetFloat("min", -std::numeric_limits<float>::infinity());
      float ahi = n.GetFloat("max", std::numeric_limits<float>::infinity());
      if (lo == nullptr && !std::isinf(alo)) lo = FloatImm(alo);
      if (hi == nullptr && !std::isinf(ahi)) hi = FloatImm(ahi);
    } else {
      if (lo == nullptr && n.has_attr("min")) lo = k(n.GetFloat("min", 0));
      if (hi == nullptr && n.has_attr("max")) hi = k(n.GetFloat("max", 0));
    }
    if (lo) x = Select(Lt(x, lo), lo, x);
    if (hi) x = Select(Gt(x, hi), hi, x);
    return x;
  }
  if (op == "LeakyRelu") return Select(Lt(x, k(0)), Mul(x, k(n.GetFloat("alpha", 0.01f))), x);
  if (op == "Elu") {
    Expr neg = Mul(k(n.GetFloat("alpha", 1.0f)), call("expm1", {x}));
    return Select(Lt(x, k(0)), neg, x);
  }
  if (op == "Selu") {
    double alpha = n.GetFloat("alpha", 1.67326319217681884765625f);
    double gamma = n.GetFloat("gamma", 1.05070102214813232421875f);
    return Select(Gt(x, k(0)), Mul(k(gamma), x), Mul(k(gamma * alpha), call("expm1", {x})));
  }
  if (op == "BatchNormalization") {
    double eps = n.GetFloat("epsilon", 1e-5f);
    Expr scale = Div(a[1], call("sqrt", {Add(a[4], k(eps))}));
    return Add(Mul(Sub(x, a[3]), scale), a[2]);
  }
  auto clamp01 = [&](Expr y) {
    y = Select(Lt(y, k(0)), k(0), y);
    return Select(Gt(y, k(1)), k(1), y);
  };
  if (op == "HardSigmoid") {
    return clamp01(Add(Mul(x, k(n.GetFloat("alpha", 0.2f))), k(n.GetFloat("beta", 0.5f))));
  }
  if (op == "HardSwish") return Mul(x, clamp01(Add(Mul(x, k(1.0 / 6.0)), k(0.5))));
  if (op == "Gelu") {
    Expr inner;
    if (n.GetString("approximate", "none") == "tanh") {
      Expr x3 = Mul(Mul(x, x), x);
      inner = call("tanh", {Mul(Add(x, Mul(x3, k(0.044715))), k(0.7978845608028654))});
    } else {
      inner = call("erf", {Mul(x, k(0.7071067811865476))});
    }
    return Mul(Mul(x, k(0.5)), Add(k(1), inner));
  }
  return NodeError(n, "not inlinable");
}

}  // namespace

std::vector<int64_t> DimsOf(const Value* v) { return v->type().StaticDims(); }

ScalarType ScalarTypeOf(DType t) {
  switch (t) {
    case DType::kFloat64: return ScalarType::kF64;
    case DType::kFloat16: return ScalarType::kF16;
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

ScalarType ComputeTypeOf(DType t) { return t == DType::kFloat16 ? ScalarType::kF32 : ScalarTypeOf(t); }

bool IsInlinableElementwise(const std::string& op) {
  static const char* const kOps[] = {
      "Add", "Sub", "Mul", "Div", "Relu", "Sigmoid", "Neg", "Abs", "Max", "Min", "Sqrt", "Exp", "Log", "Tanh",
      "Clip", "LeakyRelu", "HardSigmoid", "HardSwish", "Reciprocal", "Erf", "Gelu", "Sign", "Sin", "Cos",
      "Floor", "Ceil", "Round", "Softsign", "Softplus", "Elu", "Selu", "Not", "And", "Or", "Xor", "Equal",
      "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Where", "PRelu", "Cast", "CastLike", "Dropout",
      "Sum", "Mean", "Mod", "Pow", "BatchNormalization", "Expand"};
  for (const char* o : kOps) {
    if (op == o) return true;
  }
  return false;
}

bool IsInlinableDataMovement(const std::string& op) {
  static const char* const kOps[] = {"Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze",
                                     "Identity",  "Slice",   "Concat",  "Pad",     "Tile"};
  for (const char* o : kOps) {
    if (op == o) return true;
  }
  return false;
}

absl::Status GraphExpr::CheckNode(const Node& n) {
  const std::string& op = n.op_type();
  if (n.num_outputs() != 1 && !(op == "Dropout" && n.num_outputs() == 2)) return NodeError(n, "extra outputs");
  for (int i = 0; i < n.num_outputs(); ++i) {
    if (n.output(i) == nullptr) return NodeError(n, "missing output");
  }
  for (int i = 0; i < n.num_inputs(); ++i) {
    if (n.input(i) != nullptr && !n.input(i)->type().known) return NodeError(n, "input of unknown type");
  }
  if (op == "Dropout" && n.num_inputs() > 2 && n.input(2) != nullptr) {
    // Training mode is the identity only with a constant zero ratio.
    const Value* tm = n.input(2);
    const Value* ratio = n.input(1);
    bool inference = tm->is_constant() && ops::ElementAsDouble(tm->constant(), 0) == 0;
    bool zero_ratio = ratio != nullptr && ratio->is_constant() && ops::ElementAsDouble(ratio->constant(), 0) == 0;
    if (!inference && !zero_ratio) return NodeError(n, "training_mode is not a constant false");
  }
  if (op == "Gelu") {
    std::string approximate = n.GetString("approximate", "none");
    if (approximate != "none" && approximate != "tanh") {
      return NodeError(n, absl::StrCat("unknown approximate '", approximate, "'"));
    }
  }
  if (op == "BatchNormalization" && (n.GetInt("training_mode", 0) != 0 || n.num_inputs() != 5)) {
    return NodeError(n, "not inference mode");
  }
  if (op == "Pow" && InDType(n, 1) == DType::kUInt64 && !IsFloat(ComputeTypeOf(InDType(n, 0)))) {
    return NodeError(n, "u64 exponent of an integer base");
  }
  if (op == "Slice") {
    std::vector<int64_t> a, b;
    return SliceParams(n, &a, &b);
  }
  if (op == "Pad") {
    std::vector<int64_t> a;
    double v;
    return PadParams(n, &a, &v);
  }
  if (op == "Clip" && (n.input(1) != nullptr || n.input(2) != nullptr)) {
    for (int i = 1; i < 3; ++i) {
      if (n.input(i) != nullptr && NumElements(DimsOf(n.input(i))) != 1) return NodeError(n, "non-scalar bound");
    }
  }
  if (IsInlinableElementwise(op) || IsInlinableDataMovement(op)) return absl::OkStatus();
  return NodeError(n, "not inlinable");
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

absl::StatusOr<Expr> GraphExpr::At(const Value* v, const std::vector<Expr>& idx) {
  ScalarType ct = ComputeTypeOf(v->type().dtype);
  if (auto it = bound_.find(v); it != bound_.end()) return Cast(ct, Load(it->second, idx));
  if (auto it = input_buf_.find(v); it != input_buf_.end()) return Cast(ct, Load(it->second, idx));
  const Node* n = v->producer();
  if (n == nullptr) {
    if (v->is_constant() && NumElements(DimsOf(v)) == 1) return ScalarConstant(v->constant());
    return absl::UnimplementedError(absl::StrCat("value ", v->name(), " has no producer"));
  }
  RETURN_IF_ERROR(CheckNode(*n));
  const std::string& op = n->op_type();
  std::vector<int64_t> out = DimsOf(v);
  size_t rank = out.size();
  // Broadcast index of input i.
  auto in_at = [&](int i) -> absl::StatusOr<Expr> {
    const Value* x = n->input(i);
    std::vector<int64_t> d = DimsOf(x);
    std::vector<Expr> sub;
    for (size_t k = 0; k < d.size(); ++k) sub.push_back(d[k] == 1 ? IntImm(0) : idx[k + rank - d.size()]);
    return At(x, sub);
  };
  if (op == "Dropout" && n->num_outputs() > 1 && v == n->output(1)) return IntConst(ScalarType::kBool, 1);
  if (op == "BatchNormalization") {
    std::vector<Expr> a;
    ASSIGN_OR_RETURN(Expr xe, At(n->input(0), idx));
    a.push_back(xe);
    for (int i = 1; i < 5; ++i) {
      ASSIGN_OR_RETURN(Expr e, At(n->input(i), {DimsOf(n->input(i))[0] == 1 ? IntImm(0) : idx[1]}));
      a.push_back(e);
    }
    ASSIGN_OR_RETURN(Expr r, ElementwiseExpr(*n, a));
    return RoundTo(v->type().dtype, r);
  }
  if (IsInlinableElementwise(op)) {
    std::vector<Expr> a;
    int used = op == "Expand" ? 1 : n->num_inputs();
    if (op == "Dropout") used = 1;
    for (int i = 0; i < used; ++i) {
      if (n->input(i) == nullptr) {
        a.push_back(nullptr);
        continue;
      }
      ASSIGN_OR_RETURN(Expr e, in_at(i));
      a.push_back(e);
    }
    ASSIGN_OR_RETURN(Expr r, ElementwiseExpr(*n, a));
    return RoundTo(v->type().dtype, r);
  }
  const Value* x = n->input(0);
  std::vector<int64_t> in = DimsOf(x);
  if (op == "Tile") {
    // out[i] = in[i mod in_dim] per axis (the repeats are out_dim / in_dim).
    std::vector<Expr> sub(in.size());
    for (size_t i = 0; i < in.size(); ++i) sub[i] = in[i] == out[i] ? idx[i] : Mod(idx[i], IntImm(in[i]));
    return At(x, sub);
  }
  if (op == "Transpose") {
    std::vector<int64_t> perm = n->GetInts("perm", {});
    if (perm.empty()) {
      for (size_t i = 0; i < in.size(); ++i) perm.push_back(static_cast<int64_t>(in.size() - 1 - i));
    }
    std::vector<Expr> sub(in.size());
    for (size_t i = 0; i < perm.size(); ++i) sub[perm[i]] = idx[i];
    return At(x, sub);
  }
  if (op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze" || op == "Identity") {
    Expr flat = FlatIndex(out, idx);
    std::vector<Expr> sub(in.size());
    for (size_t d = in.size(); d-- > 0;) {
      sub[d] = d == 0 ? flat : Mod(flat, IntImm(in[d]));
      if (d > 0) flat = Div(flat, IntImm(in[d]));
    }
    if (!in.empty() && in.size() == 1) sub[0] = FlatIndex(out, idx);
    return At(x, sub);
  }
  if (op == "Slice") {
    std::vector<int64_t> start, step;
    RETURN_IF_ERROR(SliceParams(*n, &start, &step));
    std::vector<Expr> sub;
    for (size_t d = 0; d < in.size(); ++d) sub.push_back(Add(IntImm(start[d]), Mul(idx[d], IntImm(step[d]))));
    return At(x, sub);
  }
  if (op == "Pad") {
    std::vector<int64_t> begin;
    double value = 0;
    RETURN_IF_ERROR(PadParams(*n, &begin, &value));
    std::vector<Expr> sub;
    Expr inside;
    for (size_t d = 0; d < in.size(); ++d) {
      Expr s = Sub(idx[d], IntImm(begin[d]));
      if (begin[d] != 0 || out[d] != in[d]) {
        Expr ok = And(Ge(s, IntImm(0)), Lt(s, IntImm(in[d])));
        inside = inside ? And(inside, ok) : ok;
        s = Clamp(s, 0, in[d] - 1);
      }
      sub.push_back(s);
    }
    ASSIGN_OR_RETURN(Expr e, At(x, sub));
    return inside ? Select(inside, e, Const(ct, value)) : e;
  }
  // Concat
  int64_t axis = n->GetInt("axis", 0);
  if (axis < 0) axis += static_cast<int64_t>(rank);
  std::vector<int64_t> offs;
  int64_t off = 0;
  for (int i = 0; i < n->num_inputs(); ++i) {
    offs.push_back(off);
    off += DimsOf(n->input(i))[axis];
  }
  Expr r;
  for (int i = n->num_inputs(); i-- > 0;) {
    int64_t ext = DimsOf(n->input(i))[axis];
    if (ext == 0) continue;
    std::vector<Expr> sub = idx;
    sub[axis] = Clamp(Sub(idx[axis], IntImm(offs[i])), 0, ext - 1);
    ASSIGN_OR_RETURN(Expr e, At(n->input(i), sub));
    r = r ? Select(Lt(idx[axis], IntImm(offs[i] + ext)), e, r) : e;
  }
  if (r == nullptr) return NodeError(*n, "empty concat");
  return r;
}

}  // namespace kiln::loop_ir

namespace kiln::loop_ir {

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
    ASSIGN_OR_RETURN(nest, Split(nest, v, vw, v + "o", v + "v"));
    ASSIGN_OR_RETURN(nest, Vectorize(nest, v + "v"));
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
