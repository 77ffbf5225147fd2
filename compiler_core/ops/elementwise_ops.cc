// Elementwise operators: arithmetic with numpy broadcasting, activations, Identity.
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler_core/ops/op_families.h"
#include "compiler_core/ops/op_helpers.h"
#include "compiler_core/shape_inference.h"
#include "compiler_core/status_macros.h"

namespace kiln::ops {
namespace {

OpDef BinaryOp(std::string op_type, std::function<double(double, double)> f) {
  OpDef def;
  def.op_type = std::move(op_type);
  def.min_inputs = def.max_inputs = 2;
  def.infer = [](const Node& node, const InputTypes& in) -> absl::StatusOr<std::vector<TensorType>> {
    RETURN_IF_ERROR(RequireF32(node, in));
    std::string mismatch = absl::StrCat("shapes ", in[0]->ToString(), " and ", in[1]->ToString(),
                                        " cannot be broadcast");
    ASSIGN_OR_RETURN(std::vector<Dim> dims, BroadcastDims(node, 0, in[0]->dims, 1, in[1]->dims, mismatch));
    return std::vector<TensorType>{MakeType(DType::kFloat32, std::move(dims))};
  };
  def.eval = [f](const Node&, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    Tensor& y = out[0];
    const std::vector<int64_t>& od = y.dims();
    std::vector<int64_t> sa = BroadcastStrides(in[0]->dims(), od.size());
    std::vector<int64_t> sb = BroadcastStrides(in[1]->dims(), od.size());
    const float* a = in[0]->data<float>();
    const float* b = in[1]->data<float>();
    float* py = y.data<float>();
    for (int64_t i = 0; i < y.num_elements(); ++i) {
      double va = a[BroadcastOffset(i, od, sa)];
      double vb = b[BroadcastOffset(i, od, sb)];
      py[i] = static_cast<float>(f(va, vb));
    }
    return absl::OkStatus();
  };
  return def;
}

// A unary float op; `f` gets the node so that attributes (alpha, ...) are visible.
OpDef UnaryOp(std::string op_type, std::function<double(const Node&, double)> f,
              std::vector<AttrSpec> attrs = {}) {
  OpDef def;
  def.op_type = std::move(op_type);
  def.attrs = std::move(attrs);
  def.infer = [](const Node& node, const InputTypes& in) -> absl::StatusOr<std::vector<TensorType>> {
    RETURN_IF_ERROR(RequireF32(node, in));
    return std::vector<TensorType>{*in[0]};
  };
  def.eval = [f](const Node& node, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    const float* x = in[0]->data<float>();
    float* y = out[0].data<float>();
    for (int64_t i = 0; i < out[0].num_elements(); ++i) y[i] = static_cast<float>(f(node, x[i]));
    return absl::OkStatus();
  };
  return def;
}

double SigmoidOf(double x) {
  // Stable on both tails.
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  double e = std::exp(x);
  return e / (1.0 + e);
}

OpDef IdentityOp() {
  OpDef def;
  def.op_type = "Identity";
  def.infer = [](const Node&, const InputTypes& in) -> absl::StatusOr<std::vector<TensorType>> {
    return std::vector<TensorType>{*in[0]};
  };
  def.eval = [](const Node&, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    out[0] = *in[0];
    return absl::OkStatus();
  };
  return def;
}

double AttrAlpha(const Node& node, float def) { return node.GetFloat("alpha", def); }

}  // namespace

void RegisterElementwiseOps(std::vector<OpDef>* defs) {
  defs->push_back(BinaryOp("Add", [](double a, double b) { return a + b; }));
  defs->push_back(BinaryOp("Sub", [](double a, double b) { return a - b; }));
  defs->push_back(BinaryOp("Mul", [](double a, double b) { return a * b; }));
  defs->push_back(BinaryOp("Div", [](double a, double b) { return a / b; }));
  defs->push_back(UnaryOp("Relu", [](const Node&, double x) { return x > 0 ? x : 0.0; }));
  defs->push_back(UnaryOp("Sigmoid", [](const Node&, double x) { return SigmoidOf(x); }));
  defs->push_back(UnaryOp("Abs", [](const Node&, double x) { return std::fabs(x); }));
  defs->push_back(UnaryOp("Neg", [](const Node&, double x) { return -x; }));
  defs->push_back(UnaryOp("Exp", [](const Node&, double x) { return std::exp(x); }));
  defs->push_back(UnaryOp("Log", [](const Node&, double x) { return std::log(x); }));
  defs->push_back(UnaryOp("Sqrt", [](const Node&, double x) { return std::sqrt(x); }));
  defs->push_back(UnaryOp("Tanh", [](const Node&, double x) { return std::tanh(x); }));
  defs->push_back(UnaryOp("Reciprocal", [](const Node&, double x) { return 1.0 / x; }));
  defs->push_back(UnaryOp("LeakyRelu",
                          [](const Node& n, double x) { return x >= 0 ? x : AttrAlpha(n, 0.01f) * x; },
                          {{"alpha", AttrKind::kFloat}}));
  defs->push_back(IdentityOp());
}

}  // namespace kiln::ops
