// The operator table and the definitions of the supported operators: float32
// elementwise arithmetic with numpy broadcasting, activations, MatMul, Gemm,
// Identity and Constant.
#include "compiler_core/op_registry.h"

#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler_core/shape_inference.h"
#include "compiler_core/status_macros.h"

namespace kiln {
namespace {

// ---------------------------------------------------------------------------
// Type and shape helpers.

TensorType MakeType(DType dtype, std::vector<Dim> dims) {
  TensorType t;
  t.dtype = dtype;
  t.dims = std::move(dims);
  t.known = true;
  return t;
}

std::string InputName(const Node& node, int i) {
  Value* v = node.input(i);
  return v ? v->name() : std::string("<omitted>");
}

std::string DimString(const Dim& d) {
  if (d.is_static()) return absl::StrCat(d.value);
  return d.symbol.empty() ? std::string("?") : d.symbol;
}

// Two dims that are certainly equal: same static extent or same named symbol.
bool SameDim(const Dim& a, const Dim& b) {
  if (a.is_static() && b.is_static()) return a.value == b.value;
  return !a.is_static() && !b.is_static() && !a.symbol.empty() && a.symbol == b.symbol;
}

bool IsOne(const Dim& d) { return d.is_static() && d.value == 1; }

absl::Status SymbolicError(const Node& node, int input, int axis, const Dim& d, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(
      "input '", InputName(node, input), "' dimension ", axis, " is symbolic ('", DimString(d),
      "') but ", why, ": bind it to a static extent (--shape)"));
}

absl::Status RequireF32(const Node& node, const InputTypes& in) {
  for (int i = 0; i < static_cast<int>(in.size()); ++i) {
    if (in[i] && in[i]->dtype != DType::kFloat32) {
      return absl::InvalidArgumentError(absl::StrCat("input '", InputName(node, i), "' has dtype ",
                                                     DTypeName(in[i]->dtype), "; only f32 is supported"));
    }
  }
  return absl::OkStatus();
}

// Numpy broadcast of the (symbolic) shapes of inputs ia and ib. `what` names the
// operands in the mismatch message.
absl::StatusOr<std::vector<Dim>> BroadcastDims(const Node& node, int ia, const std::vector<Dim>& a,
                                               int ib, const std::vector<Dim>& b,
                                               const std::string& mismatch) {
  size_t rank = std::max(a.size(), b.size());
  std::vector<Dim> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    // Position from the right.
    bool has_a = i < a.size(), has_b = i < b.size();
    int axis_a = static_cast<int>(a.size()) - 1 - static_cast<int>(i);
    int axis_b = static_cast<int>(b.size()) - 1 - static_cast<int>(i);
    Dim& o = out[rank - 1 - i];
    if (!has_a) { o = b[axis_b]; continue; }
    if (!has_b) { o = a[axis_a]; continue; }
    const Dim& da = a[axis_a];
    const Dim& db = b[axis_b];
    if (SameDim(da, db)) { o = da; continue; }
    if (IsOne(da)) { o = db; continue; }
    if (IsOne(db)) { o = da; continue; }
    if (da.is_static() && db.is_static()) return absl::InvalidArgumentError(mismatch);
    if (!da.is_static()) {
      return SymbolicError(node, ia, axis_a, da, absl::StrCat("is broadcast against ", DimString(db)));
    }
    return SymbolicError(node, ib, axis_b, db, absl::StrCat("is broadcast against ", DimString(da)));
  }
  return out;
}

// Row-major strides of `dims` aligned to an output of rank `out_rank`, with 0
// for broadcast (size-1 or missing) axes.
std::vector<int64_t> BroadcastStrides(const std::vector<int64_t>& dims, size_t out_rank) {
  std::vector<int64_t> strides(out_rank, 0);
  int64_t s = 1;
  for (int i = static_cast<int>(dims.size()) - 1; i >= 0; --i) {
    size_t o = out_rank - dims.size() + i;
    strides[o] = dims[i] == 1 ? 0 : s;
    s *= dims[i];
  }
  return strides;
}

// Offset in a broadcast operand of the output element with linear index `linear`.
int64_t BroadcastOffset(int64_t linear, const std::vector<int64_t>& out_dims,
                        const std::vector<int64_t>& strides) {
  int64_t offset = 0;
  for (int i = static_cast<int>(out_dims.size()) - 1; i >= 0; --i) {
    int64_t coord = linear % out_dims[i];
    linear /= out_dims[i];
    offset += coord * strides[i];
  }
  return offset;
}

// ---------------------------------------------------------------------------
// Elementwise operators.

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

// ---------------------------------------------------------------------------
// MatMul: numpy matmul. A 1-D first operand is [1,K] with the 1 removed from the
// result, a 1-D second operand is [K,1] likewise; batch dims broadcast.

OpDef MatMulOp() {
  OpDef def;
  def.op_type = "MatMul";
  def.min_inputs = def.max_inputs = 2;
  def.infer = [](const Node& node, const InputTypes& in) -> absl::StatusOr<std::vector<TensorType>> {
    RETURN_IF_ERROR(RequireF32(node, in));
    const TensorType& a = *in[0];
    const TensorType& b = *in[1];
    if (a.rank() == 0 || b.rank() == 0) {
      return absl::InvalidArgumentError(absl::StrCat("operands must have rank >= 1, got ", a.ToString(),
                                                     " and ", b.ToString()));
    }
    std::vector<Dim> ad = a.dims, bd = b.dims;
    bool squeeze_m = ad.size() == 1, squeeze_n = bd.size() == 1;
    if (squeeze_m) ad.insert(ad.begin(), Dim::Static(1));
    if (squeeze_n) bd.push_back(Dim::Static(1));
    const Dim& ka = ad[ad.size() - 1];
    const Dim& kb = bd[bd.size() - 2];
    if (!SameDim(ka, kb)) {
      if (ka.is_static() && kb.is_static()) {
        return absl::InvalidArgumentError(absl::StrCat("inner dimensions of ", a.ToString(), " and ",
                                                       b.ToString(), " do not match"));
      }
      if (!ka.is_static()) return SymbolicError(node, 0, a.rank() - 1, ka, "is a contracted dimension");
      return SymbolicError(node, 1, squeeze_n ? 0 : b.rank() - 2, kb, "is a contracted dimension");
    }
    std::vector<Dim> abatch(ad.begin(), ad.end() - 2), bbatch(bd.begin(), bd.end() - 2);
    std::string mismatch = absl::StrCat("batch dimensions of ", a.ToString(), " and ", b.ToString(),
                                        " cannot be broadcast");
    ASSIGN_OR_RETURN(std::vector<Dim> dims, BroadcastDims(node, 0, abatch, 1, bbatch, mismatch));
    if (!squeeze_m) dims.push_back(ad[ad.size() - 2]);
    if (!squeeze_n) dims.push_back(bd[bd.size() - 1]);
    return std::vector<TensorType>{MakeType(DType::kFloat32, std::move(dims))};
  };
  def.eval = [](const Node&, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    std::vector<int64_t> ad = in[0]->dims(), bd = in[1]->dims();
    if (ad.size() == 1) ad.insert(ad.begin(), 1);
    if (bd.size() == 1) bd.push_back(1);
    const int64_t m = ad[ad.size() - 2], k = ad[ad.size() - 1], n = bd[bd.size() - 1];
    std::vector<int64_t> abatch(ad.begin(), ad.end() - 2), bbatch(bd.begin(), bd.end() - 2);
    ASSIGN_OR_RETURN(std::vector<int64_t> batch, BroadcastShapes(abatch, bbatch));
    std::vector<int64_t> sa = BroadcastStrides(abatch, batch.size());
    std::vector<int64_t> sb = BroadcastStrides(bbatch, batch.size());
    const float* a = in[0]->data<float>();
    const float* b = in[1]->data<float>();
    float* y = out[0].data<float>();
    const int64_t num_batches = NumElements(batch);
    for (int64_t bi = 0; bi < num_batches; ++bi) {
      const float* pa = a + BroadcastOffset(bi, batch, sa) * m * k;
      const float* pb = b + BroadcastOffset(bi, batch, sb) * k * n;
      float* py = y + bi * m * n;
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double acc = 0;
          for (int64_t p = 0; p < k; ++p) acc += static_cast<double>(pa[i * k + p]) * pb[p * n + j];
          py[i * n + j] = static_cast<float>(acc);
        }
      }
    }
    return absl::OkStatus();
  };
  return def;
}

// ---------------------------------------------------------------------------
// Gemm: Y = alpha * A' * B' + beta * C, A' = transA ? A^T : A (2-D), C optional
// and unidirectionally broadcast to [M,N].

OpDef GemmOp() {
  OpDef def;
  def.op_type = "Gemm";
  def.min_inputs = 2;
  def.max_inputs = 3;
  def.attrs = {{"alpha", AttrKind::kFloat}, {"beta", AttrKind::kFloat},
               {"transA", AttrKind::kInt}, {"transB", AttrKind::kInt}};
  def.validate = [](const Node& node) -> absl::Status {
    for (const char* name : {"transA", "transB"}) {
      int64_t v = node.GetInt(name, 0);
      if (v != 0 && v != 1) {
        return absl::InvalidArgumentError(absl::StrCat("attribute '", name, "' must be 0 or 1, got ", v));
      }
    }
    return absl::OkStatus();
  };
  def.infer = [](const Node& node, const InputTypes& in) -> absl::StatusOr<std::vector<TensorType>> {
    RETURN_IF_ERROR(RequireF32(node, in));
    const TensorType& a = *in[0];
    const TensorType& b = *in[1];
    if (a.rank() != 2 || b.rank() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("A and B must be 2-D, got ", a.ToString(), " and ", b.ToString()));
    }
    bool ta = node.GetInt("transA", 0) != 0, tb = node.GetInt("transB", 0) != 0;
    const Dim& m = a.dims[ta ? 1 : 0];
    const Dim& ka = a.dims[ta ? 0 : 1];
    const Dim& kb = b.dims[tb ? 1 : 0];
    const Dim& n = b.dims[tb ? 0 : 1];
    if (!SameDim(ka, kb)) {
      if (ka.is_static() && kb.is_static()) {
        return absl::InvalidArgumentError(absl::StrCat("inner dimensions of A ", a.ToString(), " and B ",
                                                       b.ToString(), " do not match (transA=", ta,
                                                       ", transB=", tb, ")"));
      }
      if (!ka.is_static()) return SymbolicError(node, 0, ta ? 0 : 1, ka, "is a contracted dimension");
      return SymbolicError(node, 1, tb ? 1 : 0, kb, "is a contracted dimension");
    }
    std::vector<Dim> out = {m, n};
    if (const TensorType* c = in.size() > 2 ? in[2] : nullptr) {
      if (c->rank() > 2) {
        return absl::InvalidArgumentError(absl::StrCat("C must have rank <= 2, got ", c->ToString()));
      }
      for (int i = 0; i < c->rank(); ++i) {
        const Dim& cd = c->dims[i];
        const Dim& target = out[2 - c->rank() + i];
        if (SameDim(cd, target) || IsOne(cd)) continue;
        if (cd.is_static() && target.is_static()) {
          return absl::InvalidArgumentError(absl::StrCat("C ", c->ToString(), " cannot be broadcast to [",
                                                         DimString(out[0]), ",", DimString(out[1]), "]"));
        }
        return SymbolicError(node, 2, i, cd, "is broadcast to the result");
      }
    }
    return std::vector<TensorType>{MakeType(DType::kFloat32, std::move(out))};
  };
  def.eval = [](const Node& node, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    const bool ta = node.GetInt("transA", 0) != 0, tb = node.GetInt("transB", 0) != 0;
    const double alpha = node.GetFloat("alpha", 1.0f), beta = node.GetFloat("beta", 1.0f);
    const std::vector<int64_t>& ad = in[0]->dims();
    const std::vector<int64_t>& bd = in[1]->dims();
    const int64_t m = ta ? ad[1] : ad[0], k = ta ? ad[0] : ad[1], n = tb ? bd[0] : bd[1];
    const float* a = in[0]->data<float>();
    const float* b = in[1]->data<float>();
    const Tensor* c = in.size() > 2 ? in[2] : nullptr;
    std::vector<int64_t> sc;
    if (c) sc = BroadcastStrides(c->dims(), 2);
    float* y = out[0].data<float>();
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p) {
          double va = ta ? a[p * m + i] : a[i * k + p];
          double vb = tb ? b[j * k + p] : b[p * n + j];
          acc += va * vb;
        }
        double v = alpha * acc;
        if (c) v += beta * c->data<float>()[i * sc[0] + j * sc[1]];
        y[i * n + j] = static_cast<float>(v);
      }
    }
    return absl::OkStatus();
  };
  return def;
}

// ---------------------------------------------------------------------------
// Identity and Constant.

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

OpDef ConstantOp() {
  OpDef def;
  def.op_type = "Constant";
  def.min_inputs = def.max_inputs = 0;
  def.attrs = {{"value", AttrKind::kTensor},      {"value_float", AttrKind::kFloat},
               {"value_floats", AttrKind::kFloats}, {"value_int", AttrKind::kInt},
               {"value_ints", AttrKind::kInts}};
  def.validate = [](const Node& node) -> absl::Status {
    return ConstantValueFromAttrs(node.attrs()).status();
  };
  def.infer = [](const Node& node, const InputTypes&) -> absl::StatusOr<std::vector<TensorType>> {
    ASSIGN_OR_RETURN(Tensor t, ConstantValueFromAttrs(node.attrs()));
    return std::vector<TensorType>{TensorType::Static(t.dtype(), t.dims())};
  };
  def.eval = [](const Node& node, const InputTensors&, std::vector<Tensor>& out) -> absl::Status {
    ASSIGN_OR_RETURN(out[0], ConstantValueFromAttrs(node.attrs()));
    return absl::OkStatus();
  };
  return def;
}

double AttrAlpha(const Node& node, float def) { return node.GetFloat("alpha", def); }

std::map<std::string, OpDef, std::less<>> BuildTable() {
  std::vector<OpDef> defs = {
      BinaryOp("Add", [](double a, double b) { return a + b; }),
      BinaryOp("Sub", [](double a, double b) { return a - b; }),
      BinaryOp("Mul", [](double a, double b) { return a * b; }),
      BinaryOp("Div", [](double a, double b) { return a / b; }),
      UnaryOp("Relu", [](const Node&, double x) { return x > 0 ? x : 0.0; }),
      UnaryOp("Sigmoid", [](const Node&, double x) { return SigmoidOf(x); }),
      UnaryOp("Abs", [](const Node&, double x) { return std::fabs(x); }),
      UnaryOp("Neg", [](const Node&, double x) { return -x; }),
      UnaryOp("Exp", [](const Node&, double x) { return std::exp(x); }),
      UnaryOp("Log", [](const Node&, double x) { return std::log(x); }),
      UnaryOp("Sqrt", [](const Node&, double x) { return std::sqrt(x); }),
      UnaryOp("Tanh", [](const Node&, double x) { return std::tanh(x); }),
      UnaryOp("Reciprocal", [](const Node&, double x) { return 1.0 / x; }),
      UnaryOp("LeakyRelu",
              [](const Node& n, double x) { return x >= 0 ? x : AttrAlpha(n, 0.01f) * x; },
              {{"alpha", AttrKind::kFloat}}),
      MatMulOp(),
      GemmOp(),
      IdentityOp(),
      ConstantOp(),
  };
  std::map<std::string, OpDef, std::less<>> table;
  for (OpDef& d : defs) {
    std::string name = d.op_type;
    table.emplace(std::move(name), std::move(d));
  }
  return table;
}

}  // namespace

const char* AttrKindName(AttrKind k) {
  switch (k) {
    case AttrKind::kInt: return "int";
    case AttrKind::kFloat: return "float";
    case AttrKind::kString: return "string";
    case AttrKind::kTensor: return "tensor";
    case AttrKind::kInts: return "ints";
    case AttrKind::kFloats: return "floats";
    case AttrKind::kStrings: return "strings";
  }
  return "?";
}

bool IsDefaultDomain(std::string_view domain) { return domain.empty() || domain == "ai.onnx"; }

const OpDef* FindOpDef(std::string_view domain, std::string_view op_type) {
  static const auto* table = new std::map<std::string, OpDef, std::less<>>(BuildTable());
  if (!IsDefaultDomain(domain)) return nullptr;
  auto it = table->find(op_type);
  return it == table->end() ? nullptr : &it->second;
}

std::string NodeContext(const Node& node) {
  std::string op = IsDefaultDomain(node.domain()) ? node.op_type()
                                                  : absl::StrCat(node.domain(), ".", node.op_type());
  return absl::StrCat("node '", node.name(), "' (", op, "): ");
}

absl::Status ValidateNode(const OpDef& def, const Node& node) {
  const int n = node.num_inputs();
  if (n < def.min_inputs || n > def.max_inputs) {
    std::string expected = def.min_inputs == def.max_inputs
                               ? absl::StrCat(def.min_inputs)
                               : absl::StrCat(def.min_inputs, " to ", def.max_inputs);
    return absl::InvalidArgumentError(absl::StrCat("expects ", expected, " inputs, got ", n));
  }
  for (int i = 0; i < def.min_inputs; ++i) {
    if (node.input(i) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("required input ", i, " is omitted"));
    }
  }
  if (node.num_outputs() != def.num_outputs) {
    return absl::InvalidArgumentError(
        absl::StrCat("expects ", def.num_outputs, " outputs, got ", node.num_outputs()));
  }
  for (const auto& [name, value] : node.attrs()) {
    const AttrSpec* spec = nullptr;
    for (const AttrSpec& s : def.attrs) {
      if (s.name == name) spec = &s;
    }
    if (spec == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unsupported attribute '", name, "'"));
    }
    if (static_cast<int>(value.index()) != static_cast<int>(spec->kind)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "attribute '", name, "' must be of kind ", AttrKindName(spec->kind), ", got ",
          AttrKindName(static_cast<AttrKind>(value.index()))));
    }
  }
  if (def.validate) RETURN_IF_ERROR(def.validate(node));
  return absl::OkStatus();
}

absl::StatusOr<Tensor> ConstantValueFromAttrs(const std::map<std::string, AttrValue>& attrs) {
  if (attrs.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "exactly one of value, value_float, value_floats, value_int, value_ints must be set, got ",
        attrs.size(), " attributes"));
  }
  const auto& [name, v] = *attrs.begin();
  if (name == "value" && std::holds_alternative<Tensor>(v)) return std::get<Tensor>(v);
  if (name == "value_float" && std::holds_alternative<float>(v)) {
    return Tensor::FromVector(DType::kFloat32, {}, std::vector<float>{std::get<float>(v)});
  }
  if (name == "value_floats" && std::holds_alternative<std::vector<float>>(v)) {
    const auto& f = std::get<std::vector<float>>(v);
    return Tensor::FromVector(DType::kFloat32, {static_cast<int64_t>(f.size())}, f);
  }
  if (name == "value_int" && std::holds_alternative<int64_t>(v)) {
    return Tensor::FromVector(DType::kInt64, {}, std::vector<int64_t>{std::get<int64_t>(v)});
  }
  if (name == "value_ints" && std::holds_alternative<std::vector<int64_t>>(v)) {
    const auto& i = std::get<std::vector<int64_t>>(v);
    return Tensor::FromVector(DType::kInt64, {static_cast<int64_t>(i.size())}, i);
  }
  return absl::InvalidArgumentError(absl::StrCat("unsupported constant attribute '", name, "'"));
}

}  // namespace kiln
