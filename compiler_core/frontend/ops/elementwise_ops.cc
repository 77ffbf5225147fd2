// Elementwise operators with ONNX semantics over every dtype ONNX allows for
// them: unary math and activations, numpy-broadcasting arithmetic, comparison
// and logic, variadic Max/Min/Sum/Mean, Pow, Mod, Where, PRelu, Clip, Cast,
// inference-mode Dropout and BatchNormalization (per channel). Code generation
// inlines them as expressions (codegen/loop_ir/lower_elementwise.cc).
//
// Kernels are templates over the element type (DispatchDType); float math is
// done in double. f16 tensors are widened to f32, computed, and narrowed back.
// Integer arithmetic wraps (two's complement) as numpy does; integer division
// or remainder by zero is INVALID_ARGUMENT; float -> int conversion truncates
// toward zero and saturates (NaN gives 0), where C++ would be undefined.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <numbers>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "compiler_core/frontend/ops/op_families.h"
#include "compiler_core/frontend/ops/op_helpers.h"
#include "compiler_core/frontend/shape_inference.h"
#include "compiler_core/ir/float16.h"

namespace kiln::ops {
namespace {

// ---------------------------------------------------------------------------
// Dtype sets and checks

using DTypeSet = std::vector<DType>;

const DTypeSet kFloatTypes = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16};
const DTypeSet kSignedTypes = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16, DType::kInt8,
                               DType::kInt16,   DType::kInt32,   DType::kInt64};
const DTypeSet kNumericTypes = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16, DType::kInt8,
                                DType::kInt16,   DType::kInt32,   DType::kInt64,   DType::kUInt8,
                                DType::kUInt16,  DType::kUInt32,  DType::kUInt64};
const DTypeSet kAllTypes = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16, DType::kInt8,   DType::kInt16,
                            DType::kInt32,   DType::kInt64,   DType::kUInt8,   DType::kUInt16, DType::kUInt32,
                            DType::kUInt64,  DType::kBool};
const DTypeSet kBoolTypes = {DType::kBool};

bool Contains(const DTypeSet& set, DType t) { return std::find(set.begin(), set.end(), t) != set.end(); }

// Input i (when present) has a dtype in `allowed`.
absl::Status CheckDType(const Node& node, const InputTypes& in, int i, const DTypeSet& allowed) {
  if (i >= static_cast<int>(in.size()) || in[i] == nullptr || Contains(allowed, in[i]->dtype)) {
    return absl::OkStatus();
  }
  std::vector<std::string> names;
  for (DType t : allowed) names.push_back(DTypeName(t));
  return absl::InvalidArgumentError(absl::StrCat("input '", InputName(node, i), "' has dtype ",
                                                 DTypeName(in[i]->dtype), "; ", node.op_type(),
                                                 " accepts ", absl::StrJoin(names, ", ")));
}

// Input j (when present) has the dtype of input i.
absl::Status CheckSameDType(const Node& node, const InputTypes& in, int i, int j) {
  if (j >= static_cast<int>(in.size()) || in[i] == nullptr || in[j] == nullptr ||
      in[i]->dtype == in[j]->dtype) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("input '", InputName(node, j), "' has dtype ",
                                                 DTypeName(in[j]->dtype), " but input '", InputName(node, i),
                                                 "' has dtype ", DTypeName(in[i]->dtype)));
}

// Every present input has a dtype in `allowed`, and all have the same one.
absl::Status CheckAllSameDType(const Node& node, const InputTypes& in, const DTypeSet& allowed) {
  for (int i = 0; i < static_cast<int>(in.size()); ++i) {
    RETURN_IF_ERROR(CheckDType(node, in, i, allowed));
    RETURN_IF_ERROR(CheckSameDType(node, in, 0, i));
  }
  return absl::OkStatus();
}

// Numpy broadcast of the shapes of all present inputs.
absl::StatusOr<std::vector<Dim>> BroadcastInputs(const Node& node, const InputTypes& in) {
  std::vector<std::string> shapes;
  int first = -1;
  for (int i = 0; i < static_cast<int>(in.size()); ++i) {
    if (in[i] == nullptr) continue;
    shapes.push_back(in[i]->ToString());
    if (first < 0) first = i;
  }
  if (first < 0) return absl::InvalidArgumentError("no inputs");
  std::string listed = shapes.size() <= 2
                           ? absl::StrJoin(shapes, " and ")
                           : absl::StrCat(absl::StrJoin(shapes.begin(), shapes.end() - 1, ", "), " and ",
                                          shapes.back());
  const std::string mismatch = absl::StrCat("shapes ", listed, " cannot be broadcast");
  std::vector<Dim> dims = in[first]->dims;
  for (int i = first + 1; i < static_cast<int>(in.size()); ++i) {
    if (in[i] == nullptr) continue;
    ASSIGN_OR_RETURN(dims, BroadcastDims(node, first, dims, i, in[i]->dims, mismatch));
  }
  return dims;
}

// A present input must hold exactly one element (a scalar bound such as Clip's min).
absl::Status CheckScalar(const Node& node, const InputTypes& in, int i) {
  if (i >= static_cast<int>(in.size()) || in[i] == nullptr) return absl::OkStatus();
  for (const Dim& d : in[i]->dims) {
    if (!d.is_static() || d.value != 1) {
      return absl::InvalidArgumentError(absl::StrCat("input '", InputName(node, i), "' must be a scalar, got ",
                                                     in[i]->ToString()));
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Element access and arithmetic with defined behaviour for every input

// bool is stored as one byte; any non-zero byte reads as true.
template <typename T>
T Load(const Tensor& t, int64_t i) {
  if constexpr (std::is_same_v<T, bool>) {
    return t.data<uint8_t>()[i] != 0;
  } else {
    return t.data<T>()[i];
  }
}

template <typename T>
void Store(Tensor& t, int64_t i, T v) {
  if constexpr (std::is_same_v<T, bool>) {
    t.data<uint8_t>()[i] = v ? 1 : 0;
  } else {
    t.data<T>()[i] = v;
  }
}

template <typename T>
constexpr bool kIsInt = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// Converts like ONNX Cast: to bool is "!= 0"; float to integer truncates toward
// zero, saturating out-of-range values and mapping NaN to 0; integer to
// narrower integer wraps; everything else is the C++ conversion.
template <typename To, typename From>
To Convert(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_floating_point_v<From> && kIsInt<To>) {
    if (std::isnan(v)) return To(0);
    const double t = std::trunc(static_cast<double>(v));
    if (t <= static_cast<double>(std::numeric_limits<To>::lowest())) return std::numeric_limits<To>::lowest();
    if (t >= static_cast<double>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    return static_cast<To>(t);
  } else {
    return static_cast<To>(v);
  }
}

// Unsigned type wide enough that integer promotion cannot make it signed.
template <typename T>
using WrapType = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

// Two's-complement wrapping +, -, *, negation (signed overflow is UB in C++).
template <typename T>
T WrapAdd(T a, T b) {
  if constexpr (kIsInt<T>) {
    return static_cast<T>(static_cast<WrapType<T>>(a) + static_cast<WrapType<T>>(b));
  } else {
    return static_cast<T>(a + b);
  }
}
template <typename T>
T WrapSub(T a, T b) {
  if constexpr (kIsInt<T>) {
    return static_cast<T>(static_cast<WrapType<T>>(a) - static_cast<WrapType<T>>(b));
  } else {
    return static_cast<T>(a - b);
  }
}
template <typename T>
T WrapMul(T a, T b) {
  if constexpr (kIsInt<T>) {
    return static_cast<T>(static_cast<WrapType<T>>(a) * static_cast<WrapType<T>>(b));
  } else {
    return static_cast<T>(a * b);
  }
}
template <typename T>
T WrapNeg(T a) {
  return WrapSub(T(0), a);
}

// Integer division truncating toward zero (C, and the ONNX reference's
// astype of numpy's true division). The caller rules out b == 0.
template <typename T>
T DivOf(T a, T b) {
  if constexpr (kIsInt<T> && std::is_signed_v<T>) {
    if (b == -1) return WrapNeg(a);  // INT_MIN / -1 traps on x86
    return static_cast<T>(a / b);
  } else if constexpr (std::is_same_v<T, bool>) {
    return a;
  } else {
    return static_cast<T>(a / b);
  }
}

// ONNX Mod: fmod=1 is C's remainder (sign of the dividend); fmod=0 is
// Python's (sign of the divisor). The caller rules out integer b == 0.
template <typename T>
T ModOf(T a, T b, bool fmod) {
  if constexpr (std::is_floating_point_v<T>) {
    T r = std::fmod(a, b);
    if (!fmod && r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
  } else if constexpr (kIsInt<T>) {
    if constexpr (std::is_signed_v<T>) {
      if (b == -1) return T(0);  // INT_MIN % -1 traps on x86
    }
    T r = static_cast<T>(a % b);
    if constexpr (std::is_signed_v<T>) {
      if (!fmod && r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
    }
    return r;
  } else {
    return a;
  }
}

template <typename T>
T MaxOf(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  }
  return a < b ? b : a;
}
template <typename T>
T MinOf(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  }
  return b < a ? b : a;
}

// Pow with the base's type. Integer ** non-negative integer is exact (wrapping)
// repeated multiplication; everything else is pow in double, converted back.
template <typename B, typename E>
B PowOf(B b, E e) {
  if constexpr (kIsInt<B> && kIsInt<E>) {
    if constexpr (std::is_signed_v<E>) {
      if (e < 0) {  // trunc(b ** e): only 1 and -1 survive
        if (b == 1) return B(1);
        if constexpr (std::is_signed_v<B>) {
          if (b == -1) return e % 2 == 0 ? B(1) : B(-1);
        }
        return B(0);
      }
    }
    B result = 1, base = b;
    for (uint64_t n = static_cast<uint64_t>(e); n > 0; n >>= 1) {
      if (n & 1) result = WrapMul(result, base);
      base = WrapMul(base, base);
    }
    return result;
  } else {
    return Convert<B>(std::pow(static_cast<double>(b), static_cast<double>(e)));
  }
}

// Round half to even.
double RoundHalfEven(double x) {
  double r = std::round(x);  // half away from zero
  if (std::fabs(x - std::trunc(x)) == 0.5) r = 2.0 * std::round(x / 2.0);
  return r;
}

// Calls fn(i, offsets) for every element i (row-major) of a tensor of shape
// `out_dims`, offsets[k] being the element of operands[k] that broadcasts to it.
template <typename F>
void ForEachBroadcast(const std::vector<int64_t>& out_dims, const std::vector<const Tensor*>& operands, F&& fn) {
  const size_t rank = out_dims.size();
  const size_t n = operands.size();
  std::vector<std::vector<int64_t>> strides;
  for (const Tensor* t : operands) strides.push_back(BroadcastStrides(t->dims(), rank));
  std::vector<int64_t> coord(rank, 0), off(n, 0);
  const int64_t total = NumElements(out_dims);
  for (int64_t i = 0; i < total; ++i) {
    fn(i, off.data());
    for (size_t d = rank; d-- > 0;) {
      for (size_t k = 0; k < n; ++k) off[k] += strides[k][d];
      if (++coord[d] < out_dims[d]) break;
      for (size_t k = 0; k < n; ++k) off[k] -= strides[k][d] * out_dims[d];
      coord[d] = 0;
    }
  }
}

// body(tag, i, offsets) for every element i of `y` (ForEachBroadcast over
// `operands`), tag being a value of the C++ type of `dtype`.
template <typename Body>
absl::Status ForEachTypedElement(DType dtype, const Tensor& y, const std::vector<const Tensor*>& operands,
                                 Body body) {
  return DispatchDType(dtype, [&](auto tag) -> absl::Status {
    ForEachBroadcast(y.dims(), operands, [&](int64_t i, const int64_t* off) { body(tag, i, off); });
    return absl::OkStatus();
  });
}

// The broadcast of every input's shape, as a tensor of `dtype`.
absl::StatusOr<std::vector<TensorType>> BroadcastResult(const Node& node, const InputTypes& in, DType dtype) {
  ASSIGN_OR_RETURN(std::vector<Dim> dims, BroadcastInputs(node, in));
  return std::vector<TensorType>{MakeType(dtype, std::move(dims))};
}

std::vector<const Tensor*> Present(const InputTensors& in) {
  std::vector<const Tensor*> out;
  for (const Tensor* t : in) {
    if (t != nullptr) out.push_back(t);
  }
  return out;
}

// Non-zero check of an integer divisor (Div, Mod).
absl::Status CheckIntDivisor(const Node& node, const Tensor& b) {
  return DispatchDType(b.dtype(), [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    if constexpr (kIsInt<T>) {
      for (int64_t i = 0; i < b.num_elements(); ++i) {
        if (Load<T>(b, i) == 0) {
          return absl::InvalidArgumentError(
              absl::StrCat("integer division by zero (input '", InputName(node, 1), "')"));
        }
      }
    }
    return absl::OkStatus();
  });
}

using EvalFn = std::function<absl::Status(const Node&, const InputTensors&, std::vector<Tensor>&)>;

// f16/bf16 <-> f32 (`to` f32 widens, otherwise narrows f32 to `to`).
Tensor ConvertNarrow(const Tensor& t, DType to) {
  Tensor out(to, t.dims());
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    if (to == DType::kFloat32) {
      out.data<float>()[i] = NarrowToFloat(t.dtype(), t.data<uint16_t>()[i]);
    } else {
      out.data<uint16_t>()[i] = FloatToNarrow(to, t.data<float>()[i]);
    }
  }
  return out;
}

// Runs `eval` with f16/bf16 inputs widened to f32 and f16/bf16 outputs
// computed as f32 and narrowed back, so kernels need no 16-bit arithmetic.
EvalFn WidenNarrowFloats(EvalFn eval) {
  return [eval](const Node& node, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    bool any = false;
    for (const Tensor* t : in) any |= t != nullptr && IsNarrowFloat(t->dtype());
    for (const Tensor& t : out) any |= IsNarrowFloat(t.dtype());
    if (!any) return eval(node, in, out);
    std::vector<Tensor> widened;
    widened.reserve(in.size());
    InputTensors in2;
    for (const Tensor* t : in) {
      if (t != nullptr && IsNarrowFloat(t->dtype())) {
        widened.push_back(ConvertNarrow(*t, DType::kFloat32));
        in2.push_back(&widened.back());
      } else {
        in2.push_back(t);
      }
    }
    std::vector<Tensor> out2;
    for (const Tensor& t : out) out2.emplace_back(IsNarrowFloat(t.dtype()) ? DType::kFloat32 : t.dtype(), t.dims());
    RETURN_IF_ERROR(eval(node, in2, out2));
    for (size_t i = 0; i < out.size(); ++i) {
      out[i] = IsNarrowFloat(out[i].dtype()) ? ConvertNarrow(out2[i], out[i].dtype()) : std::move(out2[i]);
    }
    return absl::OkStatus();
  };
}

absl::Status WrongKernelType(DType t) {
  return absl::InternalError(absl::StrCat("kernel instantiated for unsupported dtype ", DTypeName(t)));
}

// ---------------------------------------------------------------------------
// Unary operators

// The per-element function of a unary float operator, made once per node
// from its attributes.
using UnaryFn = std::function<double(double)>;
using UnaryFactory = std::function<UnaryFn(const Node&)>;

UnaryFactory Fixed(double (*f)(double)) {
  return [f](const Node&) { return UnaryFn(f); };
}

// A unary operator computed in double (integer types, where allowed, are
// converted back with truncation).
OpDef UnaryMath(std::string op_type, DTypeSet types, UnaryFactory make, std::vector<AttrSpec> attrs = {}) {
  OpDef def;
  def.op_type = std::move(op_type);
  def.attrs = std::move(attrs);
  def.infer = [types](const Node& node, const InputTypes& in) -> absl::StatusOr<std::vector<TensorType>> {
    RETURN_IF_ERROR(CheckDType(node, in, 0, types));
    return std::vector<TensorType>{MakeType(in[0]->dtype, in[0]->dims)};
  };
  def.eval = WidenNarrowFloats([make](const Node& node, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    const UnaryFn f = make(node);
    const Tensor& x = *in[0];
    Tensor& y = out[0];
    return DispatchDType(x.dtype(), [&](auto tag) -> absl::Status {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, bool>) {
        return WrongKernelType(x.dtype());
      } else {
        for (int64_t i = 0; i < y.num_elements(); ++i) {
          Store<T>(y, i, Convert<T>(f(static_cast<double>(Load<T>(x, i)))));
        }
        return absl::OkStatus();
      }
    });
  });
  return def;
}

// A unary operator computed exactly in the element type: `f` is a generic
// lambda T -> T (Abs, Neg, Sign, Relu, Not).
template <typename F>
OpDef UnaryExact(std::string op_type, DTypeSet types, F f) {
  OpDef def;
  def.op_type = std::move(op_type);
  def.infer = [types](const Node& node, const InputTypes& in) -> absl::StatusOr<std::vector<TensorType>> {
    RETURN_IF_ERROR(CheckDType(node, in, 0, types));
    return std::vector<TensorType>{MakeType(in[0]->dtype, in[0]->dims)};
  };
  def.eval = WidenNarrowFloats([f](const Node&, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    const Tensor& x = *in[0];
    Tensor& y = out[0];
    return DispatchDType(x.dtype(), [&](auto tag) -> absl::Status {
      using T = decltype(tag);
      for (int64_t i = 0; i < y.num_elements(); ++i) Store<T>(y, i, static_cast<T>(f(Load<T>(x, i))));
      return absl::OkStatus();
    });
  });
  return def;
}

double SigmoidOf(double x) {
  // Stable on both tails.
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  double e = std::exp(x);
  return e / (1.0 + e);
}

double SoftplusOf(double x) {
  // log(1 + e^x) without overflow.
  return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}

double ErfOf(double x) { return std::erf(x); }

absl::Status ValidateGelu(const Node& node) {
  std::string a = node.GetString("approximate", "none");
  if (a != "none" && a != "tanh") {
    return absl::InvalidArgumentError(
        absl::StrCat("attribute 'approximate' must be \"none\" or \"tanh\", got \"", a, "\""));
  }
  return absl::OkStatus();
}

void RegisterUnary(std::vector<OpDef>* defs) {
  defs->push_back(UnaryExact("Abs", kNumericTypes, [](auto x) {
    if constexpr (kIsInt<decltype(x)> && std::is_signed_v<decltype(x)>) {
      return x < 0 ? WrapNeg(x) : x;
    } else if constexpr (std::is_floating_point_v<decltype(x)>) {
      return std::fabs(x);
    } else {
      return x;
    }
  }));
  defs->push_back(UnaryExact("Neg", kSignedTypes, [](auto x) { return WrapNeg(x); }));
  defs->push_back(UnaryExact("Sign", kNumericTypes, [](auto x) {
    using T = decltype(x);
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(x)) return x;
    }
    if constexpr (std::is_signed_v<T>) {
      if (x < T(0)) return static_cast<T>(-1);
    }
    return x > T(0) ? T(1) : T(0);
  }));
  defs->push_back(UnaryExact("Relu", kSignedTypes, [](auto x) {
    using T = decltype(x);
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(x)) return x;  // numpy.maximum(x, 0) keeps NaN
    }
    return x > T(0) ? x : T(0);
  }));
  defs->push_back(UnaryExact("Not", kBoolTypes, [](auto x) { return !x; }));

  defs->push_back(UnaryMath("Exp", kFloatTypes, Fixed([](double x) { return std::exp(x); })));
  defs->push_back(UnaryMath("Log", kFloatTypes, Fixed([](double x) { return std::log(x); })));
  defs->push_back(UnaryMath("Sqrt", kFloatTypes, Fixed([](double x) { return std::sqrt(x); })));
  defs->push_back(UnaryMath("Reciprocal", kFloatTypes, Fixed([](double x) { return 1.0 / x; })));
  defs->push_back(UnaryMath("Sigmoid", kFloatTypes, Fixed(SigmoidOf)));
  defs->push_back(UnaryMath("Tanh", kFloatTypes, Fixed([](double x) { return std::tanh(x); })));
  defs->push_back(UnaryMath("Softplus", kFloatTypes, Fixed(SoftplusOf)));
  // Mish (opset 18): x * tanh(softplus(x)).
  defs->push_back(UnaryMath("Mish", kFloatTypes, Fixed([](double x) { return x * std::tanh(SoftplusOf(x)); })));
  defs->push_back(UnaryMath("Softsign", kFloatTypes, Fixed([](double x) { return x / (1.0 + std::fabs(x)); })));
  defs->push_back(UnaryMath("Erf", kNumericTypes, Fixed(ErfOf)));
  defs->push_back(UnaryMath("Sin", kFloatTypes, Fixed([](double x) { return std::sin(x); })));
  defs->push_back(UnaryMath("Cos", kFloatTypes, Fixed([](double x) { return std::cos(x); })));
  defs->push_back(UnaryMath("Tan", kFloatTypes, Fixed([](double x) { return std::tan(x); })));
  defs->push_back(UnaryMath("Asin", kFloatTypes, Fixed([](double x) { return std::asin(x); })));
  defs->push_back(UnaryMath("Acos", kFloatTypes, Fixed([](double x) { return std::acos(x); })));
  defs->push_back(UnaryMath("Atan", kFloatTypes, Fixed([](double x) { return std::atan(x); })));
  defs->push_back(UnaryMath("Sinh", kFloatTypes, Fixed([](double x) { return std::sinh(x); })));
  defs->push_back(UnaryMath("Cosh", kFloatTypes, Fixed([](double x) { return std::cosh(x); })));
  defs->push_back(UnaryMath("Asinh", kFloatTypes, Fixed([](double x) { return std::asinh(x); })));
  defs->push_back(UnaryMath("Acosh", kFloatTypes, Fixed([](double x) { return std::acosh(x); })));
  defs->push_back(UnaryMath("Atanh", kFloatTypes, Fixed([](double x) { return std::atanh(x); })));
  defs->push_back(UnaryMath("Floor", kFloatTypes, Fixed([](double x) { return std::floor(x); })));
  defs->push_back(UnaryMath("Ceil", kFloatTypes, Fixed([](double x) { return std::ceil(x); })));
  defs->push_back(UnaryMath("Round", kFloatTypes, Fixed(RoundHalfEven)));

  defs->push_back(UnaryMath(
      "LeakyRelu", kFloatTypes,
      [](const Node& n) -> UnaryFn {
        double alpha = n.GetFloat("alpha", 0.01f);
        return [alpha](double x) { return x >= 0 ? x : alpha * x; };
      },
      {{"alpha", AttrKind::kFloat}}));
  defs->push_back(UnaryMath(
      "Elu", kFloatTypes,
      [](const Node& n) -> UnaryFn {
        double alpha = n.GetFloat("alpha", 1.0f);
        return [alpha](double x) { return x >= 0 ? x : alpha * std::expm1(x); };
      },
      {{"alpha", AttrKind::kFloat}}));
  defs->push_back(UnaryMath(
      "Selu", kFloatTypes,
      [](const Node& n) -> UnaryFn {
        double alpha = n.GetFloat("alpha", 1.67326319217681884765625f);
        double gamma = n.GetFloat("gamma", 1.05070102214813232421875f);
        return [alpha, gamma](double x) { return x > 0 ? gamma * x : gamma * alpha * std::expm1(x); };
      },
      {{"alpha", AttrKind::kFloat}, {"gamma", AttrKind::kFloat}}));
  defs->push_back(UnaryMath(
      "HardSigmoid", kFloatTypes,
      [](const Node& n) -> UnaryFn {
        double alpha = n.GetFloat("alpha", 0.2f);
        double beta = n.GetFloat("beta", 0.5f);
        return [alpha, beta](double x) { return std::clamp(alpha * x + beta, 0.0, 1.0); };
      },
      {{"alpha", AttrKind::kFloat}, {"beta", AttrKind::kFloat}}));
  defs->push_back(UnaryMath("HardSwish", kFloatTypes, Fixed([](double x) {
                              return x * std::clamp(x / 6.0 + 0.5, 0.0, 1.0);
                            })));
  OpDef gelu = UnaryMath(
      "Gelu", kFloatTypes,
      [](const Node& n) -> UnaryFn {
        if (n.GetString("approximate", "none") == "tanh") {
          return [](double x) {
            const double k = std::sqrt(2.0 / std::numbers::pi);
            return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
          };
        }
        return [](double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); };
      },
      {{"approximate", AttrKind::kString}});
  gelu.validate = ValidateGelu;
  defs->push_back(std::move(gelu));
}

// ---------------------------------------------------------------------------
// Broadcasting binary and variadic operators

// Input 1 as numpy broadcasting should see it (see kBroadcastAxisAttr): `b`
// itself, or its aligned copy in `storage`.
absl::StatusOr<const Tensor*> AlignedSecondOperand(const Node& node, const Tensor& a, const Tensor& b,
                                                   Tensor* storage) {
  if (!node.has_attr(kBroadcastAxisAttr)) return &b;
  std::vector<Dim> dims;
  for (int64_t d : b.dims()) dims.push_back(Dim::Static(d));
  ASSIGN_OR_RETURN(dims, AlignedAtBroadcastAxis(node, a.dims().size(), std::move(dims)));
  std::vector<int64_t> aligned;
  for (const Dim& d : dims) aligned.push_back(d.value);
  *storage = b.Reshaped(aligned);
  return storage;
}

// A broadcasting binary operator over inputs of one dtype from `types`: `f` is
// a generic lambda (T, T) -> T, or -> bool with `bool_out`.
template <typename F>
OpDef Binary(std::string op_type, DTypeSet types, bool bool_out, F f, bool int_divisor = false) {
  OpDef def;
  def.op_type = std::move(op_type);
  def.min_inputs = def.max_inputs = 2;
  def.attrs = {{kBroadcastAxisAttr, AttrKind::kInt}};
  def.infer = [types, bool_out](const Node& node,
                                const InputTypes& in) -> absl::StatusOr<std::vector<TensorType>> {
    RETURN_IF_ERROR(CheckAllSameDType(node, in, types));
    TensorType b = *in[1];
    ASSIGN_OR_RETURN(b.dims, AlignedAtBroadcastAxis(node, in[0]->dims.size(), b.dims));
    return BroadcastResult(node, {in[0], &b}, bool_out ? DType::kBool : in[0]->dtype);
  };
  def.eval = WidenNarrowFloats([f, bool_out, int_divisor](const Node& node, const InputTensors& in,
                                                 std::vector<Tensor>& out) -> absl::Status {
    if (int_divisor && out[0].num_elements() > 0) RETURN_IF_ERROR(CheckIntDivisor(node, *in[1]));
    const Tensor& a = *in[0];
    Tensor aligned;
    ASSIGN_OR_RETURN(const Tensor* b_ptr, AlignedSecondOperand(node, a, *in[1], &aligned));
    const Tensor& b = *b_ptr;
    Tensor& y = out[0];
    return ForEachTypedElement(a.dtype(), y, {&a, &b}, [&](auto tag, int64_t i, const int64_t* off) {
      using T = decltype(tag);
      auto r = f(Load<T>(a, off[0]), Load<T>(b, off[1]));
      if (bool_out) {
        Store<bool>(y, i, static_cast<bool>(r));
      } else {
        Store<T>(y, i, static_cast<T>(r));
      }
    });
  });
  return def;
}

enum class Fold { kMax, kMin, kSum, kMean };

// Max, Min, Sum, Mean: one or more inputs of one dtype, broadcast together.
OpDef Variadic(std::string op_type, DTypeSet types, Fold fold) {
  OpDef def;
  def.op_type = std::move(op_type);
  def.min_inputs = 1;
  def.max_inputs = INT_MAX;
  def.infer = [types](const Node& node, const InputTypes& in) -> absl::StatusOr<std::vector<TensorType>> {
    RETURN_IF_ERROR(CheckAllSameDType(node, in, types));
    return BroadcastResult(node, in, in[0]->dtype);
  };
  def.eval = WidenNarrowFloats([fold](const Node&, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    const std::vector<const Tensor*> ops = Present(in);
    Tensor& y = out[0];
    return ForEachTypedElement(y.dtype(), y, ops, [&](auto tag, int64_t i, const int64_t* off) {
      using T = decltype(tag);
      if (fold == Fold::kSum || fold == Fold::kMean) {
        double acc = 0;
        for (size_t k = 0; k < ops.size(); ++k) acc += static_cast<double>(Load<T>(*ops[k], off[k]));
        if (fold == Fold::kMean) acc /= static_cast<double>(ops.size());
        Store<T>(y, i, Convert<T>(acc));
        return;
      }
      T acc = Load<T>(*ops[0], off[0]);
      for (size_t k = 1; k < ops.size(); ++k) {
        T v = Load<T>(*ops[k], off[k]);
        acc = fold == Fold::kMax ? MaxOf(acc, v) : MinOf(acc, v);
      }
      Store<T>(y, i, acc);
    });
  });
  return def;
}

OpDef PowOp() {
  OpDef def;
  def.op_type = "Pow";
  def.min_inputs = def.max_inputs = 2;
  def.infer = [](const Node& node, const InputTypes& in) -> absl::StatusOr<std::vector<TensorType>> {
    RETURN_IF_ERROR(CheckDType(node, in, 0, {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16, DType::kInt32,
                                             DType::kInt64}));
    RETURN_IF_ERROR(CheckDType(node, in, 1, kNumericTypes));
    return BroadcastResult(node, in, in[0]->dtype);
  };
  def.eval = WidenNarrowFloats([](const Node&, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    const Tensor& a = *in[0];
    const Tensor& b = *in[1];
    Tensor& y = out[0];
    return DispatchDType(a.dtype(), [&](auto base_tag) -> absl::Status {
      using B = decltype(base_tag);
      return DispatchDType(b.dtype(), [&](auto exp_tag) -> absl::Status {
        using E = decltype(exp_tag);
        ForEachBroadcast(y.dims(), {&a, &b}, [&](int64_t i, const int64_t* off) {
          Store<B>(y, i, PowOf(Load<B>(a, off[0]), Load<E>(b, off[1])));
        });
        return absl::OkStatus();
      });
    });
  });
  return def;
}

OpDef ModOp() {
  OpDef def;
  def.op_type = "Mod";
  def.min_inputs = def.max_inputs = 2;
  def.attrs = {{"fmod", AttrKind::kInt}};
  def.validate = [](const Node& node) -> absl::Status {
    int64_t fmod = node.GetInt("fmod", 0);
    if (fmod != 0 && fmod != 1) {
      return absl::InvalidArgumentError(absl::StrCat("attribute 'fmod' must be 0 or 1, got ", fmod));
    }
    return absl::OkStatus();
  };
  def.infer = [](const Node& node, const InputTypes& in) -> absl::StatusOr<std::vector<TensorType>> {
    RETURN_IF_ERROR(CheckAllSameDType(node, in, kNumericTypes));
    if (Contains(kFloatTypes, in[0]->dtype) && node.GetInt("fmod", 0) != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("attribute 'fmod' must be 1 for floating-point inputs (", DTypeName(in[0]->dtype), ")"));
    }
    return BroadcastResult(node, in, in[0]->dtype);
  };
  def.eval = WidenNarrowFloats([](const Node& node, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    if (out[0].num_elements() > 0) RETURN_IF_ERROR(CheckIntDivisor(node, *in[1]));
    const bool fmod = node.GetInt("fmod", 0) == 1;
    const Tensor& a = *in[0];
    const Tensor& b = *in[1];
    Tensor& y = out[0];
    return ForEachTypedElement(a.dtype(), y, {&a, &b}, [&](auto tag, int64_t i, const int64_t* off) {
      using T = decltype(tag);
      Store<T>(y, i, ModOf(Load<T>(a, off[0]), Load<T>(b, off[1]), fmod));
    });
  });
  return def;
}

OpDef WhereOp() {
  OpDef def;
  def.op_type = "Where";
  def.min_inputs = def.max_inputs = 3;
  def.infer = [](const Node& node, const InputTypes& in) -> absl::StatusOr<std::vector<TensorType>> {
    RETURN_IF_ERROR(CheckDType(node, in, 0, kBoolTypes));
    RETURN_IF_ERROR(CheckDType(node, in, 1, kAllTypes));
    RETURN_IF_ERROR(CheckSameDType(node, in, 1, 2));
    return BroadcastResult(node, in, in[1]->dtype);
  };
  def.eval = WidenNarrowFloats([](const Node&, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    const Tensor& c = *in[0];
    const Tensor& x = *in[1];
    const Tensor& z = *in[2];
    Tensor& y = out[0];
    return ForEachTypedElement(x.dtype(), y, {&c, &x, &z}, [&](auto tag, int64_t i, const int64_t* off) {
      using T = decltype(tag);
      Store<T>(y, i, Load<bool>(c, off[0]) ? Load<T>(x, off[1]) : Load<T>(z, off[2]));
    });
  });
  return def;
}

// PRelu: slope broadcasts to X's shape (unidirectionally).
OpDef PReluOp() {
  OpDef def;
  def.op_type = "PRelu";
  def.min_inputs = def.max_inputs = 2;
  def.attrs = {{kBroadcastAxisAttr, AttrKind::kInt}};
  def.infer = [](const Node& node, const InputTypes& in) -> absl::StatusOr<std::vector<TensorType>> {
    RETURN_IF_ERROR(CheckAllSameDType(node, in, {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                                                 DType::kInt32, DType::kInt64}));
    TensorType slope = *in[1];
    ASSIGN_OR_RETURN(slope.dims, AlignedAtBroadcastAxis(node, in[0]->dims.size(), slope.dims));
    ASSIGN_OR_RETURN(std::vector<Dim> dims, BroadcastInputs(node, {in[0], &slope}));
    bool same = dims.size() == in[0]->dims.size();
    for (size_t i = 0; same && i < dims.size(); ++i) same = SameDim(dims[i], in[0]->dims[i]);
    if (!same) {
      return absl::InvalidArgumentError(absl::StrCat("slope ", slope.ToString(),
                                                     " does not broadcast to the shape of X ", in[0]->ToString()));
    }
    return std::vector<TensorType>{MakeType(in[0]->dtype, in[0]->dims)};
  };
  def.eval = WidenNarrowFloats([](const Node& node, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    const Tensor& x = *in[0];
    Tensor aligned;
    ASSIGN_OR_RETURN(const Tensor* s_ptr, AlignedSecondOperand(node, x, *in[1], &aligned));
    const Tensor& s = *s_ptr;
    Tensor& y = out[0];
    return ForEachTypedElement(x.dtype(), y, {&x, &s}, [&](auto tag, int64_t i, const int64_t* off) {
      using T = decltype(tag);
      T v = Load<T>(x, off[0]);
      Store<T>(y, i, v < T(0) ? WrapMul(v, Load<T>(s, off[1])) : v);
    });
  });
  return def;
}

void RegisterBinary(std::vector<OpDef>* defs) {
  defs->push_back(Binary("Add", kNumericTypes, false, [](auto a, auto b) { return WrapAdd(a, b); }));
  defs->push_back(Binary("Sub", kNumericTypes, false, [](auto a, auto b) { return WrapSub(a, b); }));
  defs->push_back(Binary("Mul", kNumericTypes, false, [](auto a, auto b) { return WrapMul(a, b); }));
  defs->push_back(Binary("Div", kNumericTypes, false, [](auto a, auto b) { return DivOf(a, b); },
                         /*int_divisor=*/true));
  defs->push_back(Binary("Equal", kAllTypes, true, [](auto a, auto b) { return a == b; }));
  defs->push_back(Binary("Less", kNumericTypes, true, [](auto a, auto b) { return a < b; }));
  defs->push_back(Binary("Greater", kNumericTypes, true, [](auto a, auto b) { return a > b; }));
  defs->push_back(Binary("LessOrEqual", kNumericTypes, true, [](auto a, auto b) { return a <= b; }));
  defs->push_back(Binary("GreaterOrEqual", kNumericTypes, true, [](auto a, auto b) { return a >= b; }));
  defs->push_back(Binary("And", kBoolTypes, true, [](auto a, auto b) { return a && b; }));
  defs->push_back(Binary("Or", kBoolTypes, true, [](auto a, auto b) { return a || b; }));
  defs->push_back(Binary("Xor", kBoolTypes, true, [](auto a, auto b) { return a != b; }));
  defs->push_back(Variadic("Max", kNumericTypes, Fold::kMax));
  defs->push_back(Variadic("Min", kNumericTypes, Fold::kMin));
  defs->push_back(Variadic("Sum", kFloatTypes, Fold::kSum));
  defs->push_back(Variadic("Mean", kFloatTypes, Fold::kMean));
  defs->push_back(PowOp());
  defs->push_back(ModOp());
  defs->push_back(WhereOp());
  defs->push_back(PReluOp());
}

// ---------------------------------------------------------------------------
// Clip, Cast, Identity, Dropout

// Clip: bounds as attributes min/max (opset < 11, floats) or as optional
// scalar inputs 1 and 2 (opset >= 11, the input's dtype); omitted bounds are
// the dtype's range. min > max gives max everywhere, as numpy.clip.
OpDef ClipOp() {
  OpDef def;
  def.op_type = "Clip";
  def.min_inputs = 1;
  def.max_inputs = 3;
  def.attrs = {{"min", AttrKind::kFloat}, {"max", AttrKind::kFloat}};
  def.infer = [](const Node& node, const InputTypes& in) -> absl::StatusOr<std::vector<TensorType>> {
    RETURN_IF_ERROR(CheckAllSameDType(node, in, kNumericTypes));
    const char* names[] = {"", "min", "max"};
    for (int i = 1; i <= 2; ++i) {
      RETURN_IF_ERROR(CheckScalar(node, in, i));
      if (i < static_cast<int>(in.size()) && in[i] != nullptr && node.has_attr(names[i])) {
        return absl::InvalidArgumentError(
            absl::StrCat("'", names[i], "' is given both as attribute and as input '", InputName(node, i), "'"));
      }
    }
    return std::vector<TensorType>{MakeType(in[0]->dtype, in[0]->dims)};
  };
  def.eval = WidenNarrowFloats([](const Node& node, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    const Tensor& x = *in[0];
    Tensor& y = out[0];
    return DispatchDType(x.dtype(), [&](auto tag) -> absl::Status {
      using T = decltype(tag);
      T lo = std::numeric_limits<T>::lowest();
      T hi = std::numeric_limits<T>::max();
      if constexpr (std::is_floating_point_v<T>) {
        lo = -std::numeric_limits<T>::infinity();
        hi = std::numeric_limits<T>::infinity();
      }
      if (node.has_attr("min")) lo = Convert<T>(node.GetFloat("min", 0));
      if (node.has_attr("max")) hi = Convert<T>(node.GetFloat("max", 0));
      if (in.size() > 1 && in[1] != nullptr) lo = Load<T>(*in[1], 0);
      if (in.size() > 2 && in[2] != nullptr) hi = Load<T>(*in[2], 0);
      for (int64_t i = 0; i < y.num_elements(); ++i) {
        T v = Load<T>(x, i);
        if (v < lo) v = lo;
        if (v > hi) v = hi;
        Store<T>(y, i, v);
      }
      return absl::OkStatus();
    });
  });
  return def;
}

// The Cast kernel: converts x into y's dtype (f16 handled by WidenF16).
absl::Status CastKernel(const Node&, const InputTensors& in, std::vector<Tensor>& out) {
  const Tensor& x = *in[0];
  Tensor& y = out[0];
  return DispatchDType(x.dtype(), [&](auto from_tag) -> absl::Status {
    using From = decltype(from_tag);
    return DispatchDType(y.dtype(), [&](auto to_tag) -> absl::Status {
      using To = decltype(to_tag);
      for (int64_t i = 0; i < y.num_elements(); ++i) Store<To>(y, i, Convert<To>(Load<From>(x, i)));
      return absl::OkStatus();
    });
  });
}

constexpr int kOnnxString = 8;

absl::StatusOr<DType> CastTarget(const Node& node) {
  if (!node.has_attr("to")) return absl::InvalidArgumentError("missing required attribute 'to'");
  int64_t to = node.GetInt("to", 0);
  if (to == kOnnxString) return absl::InvalidArgumentError("casting to string is not supported");
  auto t = DTypeFromOnnx(static_cast<int>(to));
  if (!t.ok() || to != static_cast<int>(to)) {
    return absl::InvalidArgumentError(absl::StrCat("attribute 'to' is ONNX element type ", to,
                                                   ", which is not supported"));
  }
  return *t;
}

OpDef CastOp() {
  OpDef def;
  def.op_type = "Cast";
  def.attrs = {{"to", AttrKind::kInt}, {"saturate", AttrKind::kInt}};
  def.validate = [](const Node& node) { return CastTarget(node).status(); };
  def.infer = [](const Node& node, const InputTypes& in) -> absl::StatusOr<std::vector<TensorType>> {
    RETURN_IF_ERROR(CheckDType(node, in, 0, kAllTypes));
    ASSIGN_OR_RETURN(DType to, CastTarget(node));
    return std::vector<TensorType>{MakeType(to, in[0]->dims)};
  };
  def.eval = WidenNarrowFloats(CastKernel);
  return def;
}

OpDef CastLikeOp() {
  OpDef def;
  def.op_type = "CastLike";
  def.min_inputs = def.max_inputs = 2;
  def.attrs = {{"saturate", AttrKind::kInt}};
  def.infer = [](const Node& node, const InputTypes& in) -> absl::StatusOr<std::vector<TensorType>> {
    RETURN_IF_ERROR(CheckDType(node, in, 0, kAllTypes));
    RETURN_IF_ERROR(CheckDType(node, in, 1, kAllTypes));
    return std::vector<TensorType>{MakeType(in[1]->dtype, in[0]->dims)};
  };
  def.eval = WidenNarrowFloats(CastKernel);
  return def;
}

// Dropout in inference: Y = X and the optional mask is all true. Training
// (input training_mode true with a non-zero ratio) needs randomness and is
// rejected. The ratio is an attribute before opset 12 and an input after.
OpDef DropoutOp() {
  OpDef def;
  def.op_type = "Dropout";
  def.min_inputs = 1;
  def.max_inputs = 3;
  def.min_outputs = 1;  // the mask output is optional
  def.num_outputs = 2;
  def.attrs = {{"ratio", AttrKind::kFloat}, {"seed", AttrKind::kInt}, {"is_test", AttrKind::kInt}};
  def.validate = [](const Node& node) -> absl::Status {
    float ratio = node.GetFloat("ratio", 0.5f);
    if (!(ratio >= 0 && ratio < 1)) {
      return absl::InvalidArgumentError(absl::StrCat("attribute 'ratio' must be in [0, 1), got ", ratio));
    }
    return absl::OkStatus();
  };
  def.infer = [](const Node& node, const InputTypes& in) -> absl::StatusOr<std::vector<TensorType>> {
    RETURN_IF_ERROR(CheckDType(node, in, 0, kFloatTypes));
    RETURN_IF_ERROR(CheckDType(node, in, 1, kFloatTypes));
    RETURN_IF_ERROR(CheckDType(node, in, 2, kBoolTypes));
    RETURN_IF_ERROR(CheckScalar(node, in, 1));
    RETURN_IF_ERROR(CheckScalar(node, in, 2));
    std::vector<TensorType> out = {MakeType(in[0]->dtype, in[0]->dims)};
    if (node.num_outputs() > 1) out.push_back(MakeType(DType::kBool, in[0]->dims));
    return out;
  };
  def.eval = [](const Node& node, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    bool training = in.size() > 2 && in[2] != nullptr && Load<bool>(*in[2], 0);
    if (training) {
      double ratio = node.GetFloat("ratio", 0.5f);
      if (in.size() > 1 && in[1] != nullptr) {
        ratio = IsNarrowFloat(in[1]->dtype()) ? NarrowToFloat(in[1]->dtype(), in[1]->data<uint16_t>()[0])
                : in[1]->dtype() == DType::kFloat64 ? in[1]->data<double>()[0]
                                                    : in[1]->data<float>()[0];
      }
      if (ratio != 0) {
        return absl::InvalidArgumentError(
            "training_mode is true with a non-zero ratio: random dropout is not supported (inference only)");
      }
    }
    out[0] = *in[0];
    if (out.size() > 1) {
      for (int64_t i = 0; i < out[1].num_elements(); ++i) Store<bool>(out[1], i, true);
    }
    return absl::OkStatus();
  };
  return def;
}

// ---------------------------------------------------------------------------
// BatchNormalization, inference mode: Y = (X - mean) / sqrt(var + eps) * scale + B
// per channel (axis 1). training_mode=1 is rejected.

OpDef BatchNormOp() {
  OpDef def;
  def.op_type = "BatchNormalization";
  def.min_inputs = def.max_inputs = 5;
  def.attrs = {{"epsilon", AttrKind::kFloat}, {"momentum", AttrKind::kFloat}, {"training_mode", AttrKind::kInt},
               {"spatial", AttrKind::kInt}};
  def.validate = [](const Node& node) -> absl::Status {
    if (node.GetInt("training_mode", 0) != 0) {
      return absl::InvalidArgumentError("training_mode=1 is not supported (inference only)");
    }
    if (node.GetInt("spatial", 1) != 1) {
      return absl::InvalidArgumentError(absl::StrCat("attribute 'spatial' must be 1, got ", node.GetInt("spatial", 1)));
    }
    return absl::OkStatus();
  };
  def.infer = [](const Node& node, const InputTypes& in) -> absl::StatusOr<std::vector<TensorType>> {
    RETURN_IF_ERROR(RequireF32(node, in));
    const TensorType& x = *in[0];
    if (x.rank() < 2) return absl::InvalidArgumentError(absl::StrCat("input must have rank >= 2, got ", x.ToString()));
    for (int i = 1; i < 5; ++i) RETURN_IF_ERROR(RequireVector(node, in, i, x));
    return std::vector<TensorType>{x};
  };
  def.eval = [](const Node& node, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    const std::vector<int64_t>& d = in[0]->dims();
    const int64_t n = d[0], c = d[1], plane = in[0]->num_elements() / std::max<int64_t>(n * c, 1);
    const double eps = node.GetFloat("epsilon", 1e-5f);
    const float* x = in[0]->data<float>();
    const float *scale = in[1]->data<float>(), *bias = in[2]->data<float>();
    const float *mean = in[3]->data<float>(), *var = in[4]->data<float>();
    float* y = out[0].data<float>();
    for (int64_t ci = 0; ci < c; ++ci) {
      const double a = scale[ci] / std::sqrt(static_cast<double>(var[ci]) + eps);
      const double b = bias[ci] - mean[ci] * a;
      for (int64_t ni = 0; ni < n; ++ni) {
        const int64_t off = (ni * c + ci) * plane;
        for (int64_t i = 0; i < plane; ++i) y[off + i] = static_cast<float>(x[off + i] * a + b);
      }
    }
    return absl::OkStatus();
  };
  return def;
}

}  // namespace

void RegisterElementwiseOps(std::vector<OpDef>* defs) {
  std::vector<OpDef> family;
  RegisterUnary(&family);
  RegisterBinary(&family);
  family.push_back(ClipOp());
  family.push_back(CastOp());
  family.push_back(CastLikeOp());
  family.push_back(BatchNormOp());
  family.push_back(DropoutOp());
  for (OpDef& def : family) defs->push_back(WithClass(OpClass::kElementwise, std::move(def)));
}

}  // namespace kiln::ops
