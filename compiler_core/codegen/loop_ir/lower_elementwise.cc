// The elementwise family's expression rules and the inlined-nest lowering
// ("elementwise" and, via lower_data_movement.cc, "data_movement").
#include "compiler_core/codegen/loop_ir/lower_elementwise.h"

#include <cmath>
#include <limits>
#include <map>
#include <numbers>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compiler_core/codegen/loop_ir/graph_expr.h"
#include "compiler_core/codegen/loop_ir/lower_common.h"
#include "compiler_core/codegen/loop_ir/substitute.h"
#include "compiler_core/frontend/ops/op_helpers.h"
#include "compiler_core/ir/float16.h"

namespace kiln::loop_ir {
namespace {

using Operands = ElementwiseOperands;

DType InDType(const Node& n, int i) { return n.input(i)->type().dtype; }

ElementwiseRule Rule(std::function<Expr(const Operands&)> expr) {
  ElementwiseRule r;
  r.expr = std::move(expr);
  return r;
}

// A unary call of the same name in the compute type.
ElementwiseRule CallRule(const char* f) {
  return Rule([f](const Operands& o) { return o.call(f, {o.x()}); });
}

Expr Clamp01(const Operands& o, Expr y) {
  y = Select(Lt(y, o.k(0)), o.k(0), y);
  return Select(Gt(y, o.k(1)), o.k(1), y);
}

// log(1 + e^x) without overflow.
Expr Softplus(const Operands& o, Expr x) {
  Expr pos = Add(x, o.call("log1p", {o.call("exp", {o.call("neg", {x})})}));
  return Select(Gt(x, o.k(0)), pos, o.call("log1p", {o.call("exp", {x})}));
}

// Training mode is the identity only with a constant zero ratio.
absl::Status CheckDropout(const Node& n) {
  if (n.num_inputs() <= 2 || n.input(2) == nullptr) return absl::OkStatus();
  const Value* tm = n.input(2);
  const Value* ratio = n.input(1);
  bool inference = tm->is_constant() && ops::ElementAsDouble(tm->constant(), 0) == 0;
  bool zero_ratio = ratio != nullptr && ratio->is_constant() && ops::ElementAsDouble(ratio->constant(), 0) == 0;
  if (!inference && !zero_ratio) return NodeError(n, "training_mode is not a constant false");
  return absl::OkStatus();
}

absl::Status CheckGelu(const Node& n) {
  std::string approximate = n.GetString("approximate", "none");
  if (approximate != "none" && approximate != "tanh") {
    return NodeError(n, absl::StrCat("unknown approximate '", approximate, "'"));
  }
  return absl::OkStatus();
}

absl::Status CheckClipBounds(const Node& n) {
  for (int i = 1; i < 3 && i < n.num_inputs(); ++i) {
    if (n.input(i) != nullptr && NumElements(DimsOf(n.input(i))) != 1) return NodeError(n, "non-scalar bound");
  }
  return absl::OkStatus();
}

std::map<std::string, ElementwiseRule> MakeRules() {
  std::map<std::string, ElementwiseRule> r;
  r["Add"] = Rule([](const Operands& o) { return Add(o.a[0], o.a[1]); });
  r["Sub"] = Rule([](const Operands& o) { return Sub(o.a[0], o.a[1]); });
  r["Mul"] = Rule([](const Operands& o) { return Mul(o.a[0], o.a[1]); });
  r["Div"] = Rule([](const Operands& o) { return Div(o.a[0], o.a[1]); });
  r["Relu"] = Rule([](const Operands& o) { return Select(Lt(o.x(), o.k(0)), o.k(0), o.x()); });
  r["Neg"] = Rule([](const Operands& o) { return o.fl() ? o.call("neg", {o.x()}) : Sub(o.k(0), o.x()); });
  r["Abs"] = Rule([](const Operands& o) {
    if (o.fl()) return o.call("abs", {o.x()});
    return IsSigned(o.t) ? Select(Lt(o.x(), o.k(0)), Sub(o.k(0), o.x()), o.x()) : o.x();
  });
  r["Sign"] = Rule([](const Operands& o) {
    Expr x = o.x();
    Expr s = Select(Gt(x, o.k(0)), o.k(1), o.k(0));
    if (IsSigned(o.t)) s = Select(Lt(x, o.k(0)), o.k(-1), s);
    if (o.fl()) s = Select(Ne(x, x), x, s);
    return s;
  });
  for (const auto& [op, f] : std::map<std::string, const char*>{{"Sigmoid", "sigmoid"},
                                                                {"Sqrt", "sqrt"},
                                                                {"Exp", "exp"},
                                                                {"Log", "log"},
                                                                {"Tanh", "tanh"},
                                                                {"Sin", "sin"},
                                                                {"Cos", "cos"},
                                                                {"Atan", "atan"},
                                                                {"Asin", "asin"},
                                                                {"Acos", "acos"},
                                                                {"Floor", "floor"},
                                                                {"Ceil", "ceil"},
                                                                {"Round", "round"}}) {
    r[op] = CallRule(f);
  }
  r["Tan"] = Rule([](const Operands& o) { return Div(o.call("sin", {o.x()}), o.call("cos", {o.x()})); });
  r["Sinh"] = Rule([](const Operands& o) {
    return Mul(o.k(0.5), Sub(o.call("expm1", {o.x()}), o.call("expm1", {o.call("neg", {o.x()})})));
  });
  r["Cosh"] = Rule([](const Operands& o) {
    return Mul(o.k(0.5), Add(o.call("exp", {o.x()}), o.call("exp", {o.call("neg", {o.x()})})));
  });
  // Past 2^20, x^2 + 1 rounds to x^2 in f32: asinh(x) = log(2|x|) there,
  // which also keeps x^2 from overflowing.
  r["Asinh"] = Rule([](const Operands& o) {
    Expr a = o.call("abs", {o.x()});
    Expr a2 = Mul(a, a);
    Expr near = o.call("log1p", {Add(a, Div(a2, Add(o.k(1), o.call("sqrt", {Add(a2, o.k(1))}))))});
    Expr far = Add(o.call("log", {a}), o.k(std::numbers::ln2));
    Expr y = Select(Gt(a, o.k(1 << 20)), far, near);
    return Select(Lt(o.x(), o.k(0)), o.call("neg", {y}), y);
  });
  // log(x + sqrt(x^2 - 1)) written around t = x - 1 (accurate near 1).
  r["Acosh"] = Rule([](const Operands& o) {
    Expr t = Sub(o.x(), o.k(1));
    Expr near = o.call("log1p", {Add(t, o.call("sqrt", {Mul(t, Add(o.x(), o.k(1)))}))});
    Expr far = Add(o.call("log", {o.x()}), o.k(std::numbers::ln2));
    return Select(Gt(o.x(), o.k(1 << 20)), far, near);
  });
  r["Atanh"] = Rule([](const Operands& o) {
    return Mul(o.k(0.5), o.call("log1p", {Div(Add(o.x(), o.x()), Sub(o.k(1), o.x()))}));
  });
  // trunc(erf(x)) in double for integer x: 0 unless erf rounds to +-1 (|x| >= 6).
  r["Erf"] = Rule([](const Operands& o) {
    if (o.fl()) return o.call("erf", {o.x()});
    Expr s = Select(Ge(o.x(), o.k(6)), o.k(1), o.k(0));
    return IsSigned(o.t) ? Select(Le(o.x(), o.k(-6)), o.k(-1), s) : s;
  });
  r["Reciprocal"] = Rule([](const Operands& o) { return Div(o.k(1), o.x()); });
  r["Softsign"] = Rule([](const Operands& o) { return Div(o.x(), Add(o.k(1), o.call("abs", {o.x()}))); });
  r["Softplus"] = Rule([](const Operands& o) { return Softplus(o, o.x()); });
  r["Mish"] = Rule([](const Operands& o) { return Mul(o.x(), o.call("tanh", {Softplus(o, o.x())})); });
  r["Not"] = Rule([](const Operands& o) { return Not(o.x()); });
  r["And"] = Rule([](const Operands& o) { return And(o.a[0], o.a[1]); });
  r["Or"] = Rule([](const Operands& o) { return Or(o.a[0], o.a[1]); });
  r["Xor"] = Rule([](const Operands& o) { return Ne(o.a[0], o.a[1]); });
  r["Equal"] = Rule([](const Operands& o) { return Eq(o.a[0], o.a[1]); });
  r["Less"] = Rule([](const Operands& o) { return Lt(o.a[0], o.a[1]); });
  r["Greater"] = Rule([](const Operands& o) { return Gt(o.a[0], o.a[1]); });
  r["LessOrEqual"] = Rule([](const Operands& o) { return Le(o.a[0], o.a[1]); });
  r["GreaterOrEqual"] = Rule([](const Operands& o) { return Ge(o.a[0], o.a[1]); });
  r["Where"] = Rule([](const Operands& o) { return Select(o.a[0], o.a[1], o.a[2]); });
  r["PRelu"] = Rule([](const Operands& o) { return Select(Lt(o.x(), o.k(0)), Mul(o.x(), o.a[1]), o.x()); });
  r["Cast"] = Rule([](const Operands& o) { return RoundTo(o.out_dtype, Cast(ComputeTypeOf(o.out_dtype), o.x())); });
  r["CastLike"] = r["Cast"];
  r["Dropout"] = Rule([](const Operands& o) { return o.x(); });
  r["Dropout"].operands = 1;
  r["Dropout"].true_mask_output = true;
  r["Dropout"].check = CheckDropout;
  for (const char* op : {"Max", "Min"}) {
    const bool max = std::string(op) == "Max";
    r[op] = Rule([max](const Operands& o) {
      Expr m = o.a[0];
      for (size_t i = 1; i < o.a.size(); ++i) {
        if (o.a[i] == nullptr) continue;
        m = o.fl() ? o.call(max ? "fmax" : "fmin", {m, o.a[i]}) : (max ? Max(m, o.a[i]) : Min(m, o.a[i]));
      }
      return m;
    });
  }
  for (const char* op : {"Sum", "Mean"}) {
    const bool mean = std::string(op) == "Mean";
    r[op] = Rule([mean](const Operands& o) {
      Expr s = o.a[0];
      int count = 1;
      for (size_t i = 1; i < o.a.size(); ++i) {
        if (o.a[i] == nullptr) continue;
        s = Add(s, o.a[i]);
        ++count;
      }
      return mean ? Div(s, o.k(count)) : s;
    });
  }
  r["Mod"] = Rule([](const Operands& o) {
    Expr m = Mod(o.a[0], o.a[1]);
    if (o.fl() || o.node.GetInt("fmod", 0) == 1 || !IsSigned(o.t)) return m;
    Expr fix = And(Ne(m, o.k(0)), Ne(Lt(m, o.k(0)), Lt(o.a[1], o.k(0))));
    return Select(fix, Add(m, o.a[1]), m);
  });
  r["Pow"] = Rule([](const Operands& o) {
    ScalarType et = ComputeTypeOf(InDType(o.node, 1));
    if (o.fl()) return o.call("pow", {o.x(), Cast(o.t, o.a[1])});
    if (!IsFloat(et)) return Call("ipow", {o.x(), Cast(ScalarType::kI64, o.a[1])}, o.t);
    return Cast(o.t, Call("pow", {Cast(ScalarType::kF64, o.x()), Cast(ScalarType::kF64, o.a[1])}, ScalarType::kF64));
  });
  r["Pow"].check = [](const Node& n) -> absl::Status {
    if (InDType(n, 1) == DType::kUInt64 && !IsFloat(ComputeTypeOf(InDType(n, 0)))) {
      return NodeError(n, "u64 exponent of an integer base");
    }
    return absl::OkStatus();
  };
  r["Clip"] = Rule([](const Operands& o) {
    Expr x = o.x();
    Expr lo = o.a.size() > 1 ? o.a[1] : nullptr, hi = o.a.size() > 2 ? o.a[2] : nullptr;
    const Node& n = o.node;
    if (o.t == ScalarType::kF32) {
      float alo = n.GetFloat("min", -std::numeric_limits<float>::infinity());
      float ahi = n.GetFloat("max", std::numeric_limits<float>::infinity());
      if (lo == nullptr && !std::isinf(alo)) lo = FloatImm(alo);
      if (hi == nullptr && !std::isinf(ahi)) hi = FloatImm(ahi);
    } else {
      if (lo == nullptr && n.has_attr("min")) lo = o.k(n.GetFloat("min", 0));
      if (hi == nullptr && n.has_attr("max")) hi = o.k(n.GetFloat("max", 0));
    }
    if (lo) x = Select(Lt(x, lo), lo, x);
    if (hi) x = Select(Gt(x, hi), hi, x);
    return x;
  });
  r["Clip"].check = CheckClipBounds;
  r["LeakyRelu"] = Rule([](const Operands& o) {
    return Select(Lt(o.x(), o.k(0)), Mul(o.x(), o.k(o.node.GetFloat("alpha", 0.01f))), o.x());
  });
  r["Elu"] = Rule([](const Operands& o) {
    Expr neg = Mul(o.k(o.node.GetFloat("alpha", 1.0f)), o.call("expm1", {o.x()}));
    return Select(Lt(o.x(), o.k(0)), neg, o.x());
  });
  r["Selu"] = Rule([](const Operands& o) {
    double alpha = o.node.GetFloat("alpha", 1.67326319217681884765625f);
    double gamma = o.node.GetFloat("gamma", 1.05070102214813232421875f);
    return Select(Gt(o.x(), o.k(0)), Mul(o.k(gamma), o.x()), Mul(o.k(gamma * alpha), o.call("expm1", {o.x()})));
  });
  r["BatchNormalization"] = Rule([](const Operands& o) {
    double eps = o.node.GetFloat("epsilon", 1e-5f);
    Expr scale = Div(o.a[1], o.call("sqrt", {Add(o.a[4], o.k(eps))}));
    return Add(Mul(Sub(o.x(), o.a[3]), scale), o.a[2]);
  });
  r["BatchNormalization"].per_channel_operands = true;
  r["BatchNormalization"].check = [](const Node& n) -> absl::Status {
    if (n.GetInt("training_mode", 0) != 0 || n.num_inputs() != 5) return NodeError(n, "not inference mode");
    return absl::OkStatus();
  };
  r["HardSigmoid"] = Rule([](const Operands& o) {
    return Clamp01(o, Add(Mul(o.x(), o.k(o.node.GetFloat("alpha", 0.2f))), o.k(o.node.GetFloat("beta", 0.5f))));
  });
  r["HardSwish"] = Rule([](const Operands& o) {
    return Mul(o.x(), Clamp01(o, Add(Mul(o.x(), o.k(1.0 / 6.0)), o.k(0.5))));
  });
  r["Gelu"] = Rule([](const Operands& o) {
    Expr x = o.x();
    Expr inner;
    if (o.node.GetString("approximate", "none") == "tanh") {
      Expr x3 = Mul(Mul(x, x), x);
      inner = o.call("tanh", {Mul(Add(x, Mul(x3, o.k(0.044715))), o.k(0.7978845608028654))});
    } else {
      inner = o.call("erf", {Mul(x, o.k(0.7071067811865476))});
    }
    return Mul(Mul(x, o.k(0.5)), Add(o.k(1), inner));
  });
  r["Gelu"].check = CheckGelu;
  return r;
}

// OK when every node inlines and the workload has data movement (or has
// none, for the elementwise kind).
absl::Status Match(const Graph& g, bool want_movement) {
  RETURN_IF_ERROR(CheckWorkloadTypes(g));
  bool movement = false;
  for (const auto& n : g.nodes()) {
    RETURN_IF_ERROR(GraphExpr::CheckNode(*n));
    movement = movement || IsInlinableDataMovement(n->op_type());
  }
  if (movement != want_movement) {
    return absl::UnimplementedError(absl::StrCat("workload ", g.name(), movement ? " moves data" : " only computes"));
  }
  return absl::OkStatus();
}

std::vector<int64_t> OutDims(const Graph& g) { return DimsOf(g.outputs()[0]); }

std::vector<ScheduleConfig> Enumerate(const Graph& g, const CpuTarget& target) {
  std::vector<int64_t> d = OutDims(g);
  int64_t inner = d.empty() ? 1 : d.back();
  std::vector<ScheduleConfig> out;
  for (int64_t vw : VectorWidthsFor(target, inner, WidestElementBytes(g))) {
    for (int64_t tasks : TaskCounts(NumElements(d), g.outputs().size() == 1)) {
      ScheduleConfig c;
      c.Set("vw", vw);
      c.Set("tasks", tasks);
      out.push_back(c);
    }
  }
  return out;
}

// The nests of one output's segments as one statement with at most one
// parallel loop, outermost (the runtime splits only that one): the segments'
// task loops become one loop whose iteration t runs chunk t of every segment,
// so each task gets its share of each slab; a serial nest runs in task 0.
Stmt OneParallelLoop(const std::vector<Stmt>& nests) {
  int64_t tasks = 0;
  for (const Stmt& n : nests) {
    int64_t e = 0;
    if (n->kind == StmtKind::kFor && n->for_kind == ForKind::kParallel && AsConst(n->extent, &e)) {
      tasks = std::max(tasks, e);
    }
  }
  if (nests.size() == 1 || tasks == 0) return Block(nests);
  Expr t = Var("task");
  std::vector<Stmt> body;
  for (const Stmt& n : nests) {
    int64_t e = 0;
    if (n->kind == StmtKind::kFor && n->for_kind == ForKind::kParallel && AsConst(n->extent, &e)) {
      Stmt chunk = Substitute(n->body[0], n->var, t);
      body.push_back(e == tasks ? chunk : IfThen(Lt(t, IntImm(e)), chunk));
    } else {
      body.push_back(IfThen(Eq(t, IntImm(0)), n));
    }
  }
  return For("task", IntImm(tasks), Block(body), ForKind::kParallel);
}

absl::StatusOr<LoopFunc> Lower(const Graph& g, const ScheduleConfig& config, const CpuTarget& target) {
  RETURN_IF_ERROR(CheckWorkloadTypes(g));
  for (const auto& n : g.nodes()) RETURN_IF_ERROR(GraphExpr::CheckNode(*n));
  GraphExpr ge(g);
  int64_t vw = config.Get("vw", 1);
  int64_t tasks = g.outputs().size() == 1 ? config.Get("tasks", 1) : 1;
  std::vector<Stmt> stmts;
  for (size_t j = 0; j < g.outputs().size(); ++j) {
    const Value* result = g.outputs()[j];
    std::vector<Stmt> nests;
    const Buffer& out = ge.output_buffer(static_cast<int>(j));
    for (const OutputSegment& seg : OutputSegments(result)) {
      if (NumElements(seg.dims) == 0) continue;
      absl::Status err = absl::OkStatus();
      std::string prefix = absl::StrCat("o", j, "_", seg.name);
      Stmt nest = ForEachIndex(seg.dims, prefix, [&](const std::vector<Expr>& idx) -> Stmt {
        std::vector<Expr> at;
        absl::StatusOr<Expr> v = SegmentValue(ge, seg, idx, &at);
        if (!v.ok()) {
          err = v.status();
          return Block({});
        }
        return Store(out, at, Cast(out->dtype, *v));
      });
      RETURN_IF_ERROR(err);
      ASSIGN_OR_RETURN(nest, ScheduleNest(nest, seg.dims, prefix, vw, tasks));
      nests.push_back(nest);
    }
    stmts.push_back(OneParallelLoop(nests));
  }
  return LoopFunc{"data_movement", ge.args(), Block(stmts)};
}

}  // namespace

WorkloadLowering InlinedNestLowering(bool movement) {
  WorkloadLowering l;
  l.kind = movement ? "data_movement" : "elementwise";
  l.match = [movement](const Graph& g) { return Match(g, movement); };
  l.enumerate = Enumerate;
  l.default_schedule = [](const Graph& g, const CpuTarget& t) {
    return PickDefault(Enumerate(g, t), t);
  };
  l.validate = [](const Graph& g, const ScheduleConfig& c, const CpuTarget& t) {
    RETURN_IF_ERROR(ValidateKnobs(g, c, t, {"vw", "tasks"}));
    int64_t lanes = MaxLanesFor(t, WidestElementBytes(g));
    if (c.Get("vw", 1) > lanes) {
      return absl::InvalidArgumentError(absl::StrCat("schedule ", c.ToString(), ": knob vw=", c.Get("vw", 1),
                                                     " is wider than ", lanes, " lanes of workload ", g.name()));
    }
    return absl::OkStatus();
  };
  l.lower = Lower;
  return l;
}


namespace {

// The Concat of `result`'s shape that `result` is computed from elementwise,
// through nodes whose other operands are workload inputs (or null): the
// Concat is then read only at the element being computed.
const Node* ConcatUnderElementwise(const Value* result) {
  const std::vector<int64_t> dims = DimsOf(result);
  const Value* v = result;
  while (const Node* p = v->producer()) {
    if (p->op_type() == "Concat") return p;
    if (FindElementwiseRule(p->op_type()) == nullptr || p->num_outputs() != 1) return nullptr;
    const Value* next = nullptr;
    for (int i = 0; i < p->num_inputs(); ++i) {
      const Value* x = p->input(i);
      if (x == nullptr || x->producer() == nullptr) continue;
      if (next != nullptr || DimsOf(x) != dims) return nullptr;
      next = x;
    }
    if (next == nullptr) return nullptr;
    v = next;
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<Expr> SegmentValue(GraphExpr& ge, const OutputSegment& seg, const std::vector<Expr>& idx,
                                  std::vector<Expr>* at) {
  *at = idx;
  if (seg.offset != 0) (*at)[seg.axis] = Add((*at)[seg.axis], IntImm(seg.offset));
  if (seg.concat == nullptr) return ge.At(seg.source, idx);
  // A computation over a pinned Concat is evaluated at the output's index.
  ge.PinConcatInput(seg.concat, seg.input);
  absl::StatusOr<Expr> v = ge.At(seg.source, *at);
  ge.PinConcatInput(nullptr, -1);
  return v;
}

std::vector<OutputSegment> OutputSegments(const Value* result) {
  const Node* p = ConcatUnderElementwise(result);
  if (p == nullptr || p->num_inputs() < 2) return {{result, DimsOf(result)}};
  std::vector<int64_t> dims = DimsOf(result);
  int64_t axis = p->GetInt("axis", 0);
  if (axis < 0) axis += static_cast<int64_t>(dims.size());
  const bool direct = p->output(0) == result;
  std::vector<OutputSegment> segs;
  int64_t off = 0;
  for (int i = 0; i < p->num_inputs(); ++i) {
    OutputSegment s{direct ? p->input(i) : result, DimsOf(p->input(i)), static_cast<int>(axis), off,
                    absl::StrCat("c", i, "_")};
    if (!direct) s.concat = p, s.input = i;
    off += s.dims[axis];
    segs.push_back(std::move(s));
  }
  return segs;
}

const ElementwiseRule* FindElementwiseRule(const std::string& op_type) {
  static const auto* rules = new std::map<std::string, ElementwiseRule>(MakeRules());
  auto it = rules->find(op_type);
  return it == rules->end() ? nullptr : &it->second;
}

Expr RoundTo(DType d, Expr e) {
  if (!IsNarrowFloat(d)) return e;
  return Cast(ScalarType::kF32, Cast(ScalarTypeOf(d), std::move(e)));
}

WorkloadLowering ElementwiseLowering() { return InlinedNestLowering(false); }

}  // namespace kiln::loop_ir
