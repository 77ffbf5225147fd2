// Elementwise operators of every Kiln dtype through the loop IR: each op family
// is JIT-compiled at points of its schedule space on odd shapes and compared
// with the reference interpreter (ints and bools exactly, floats closely).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler_core/codegen/jit.h"
#include "compiler_core/codegen/loop_ir/lower.h"
#include "compiler_core/codegen/loop_ir/printer.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/codegen/target.h"
#include "compiler_core/frontend/interpreter.h"
#include "compiler_core/frontend/ops/op_helpers.h"
#include "compiler_core/frontend/shape_inference.h"
#include "compiler_core/ir/float16.h"
#include "compiler_core/ir/graph.h"
#include "tests/compiler_core/codegen/loop_ir/lowering_testing.h"

namespace kiln {
namespace {

using loop_ir_testing::Points;
using Attrs = std::map<std::string, AttrValue>;
using Dims = std::vector<int64_t>;

const std::vector<DType> kInts = {DType::kInt8,  DType::kInt16,  DType::kInt32,  DType::kInt64,
                                  DType::kUInt8, DType::kUInt16, DType::kUInt32, DType::kUInt64};
const std::vector<DType> kFloats = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16};

std::vector<DType> Numeric() {
  std::vector<DType> v = kFloats;
  v.insert(v.end(), kInts.begin(), kInts.end());
  return v;
}

bool IsFloatD(DType t) { return t == DType::kFloat32 || t == DType::kFloat64 || IsNarrowFloat(t); }
bool IsSignedD(DType t) {
  return IsFloatD(t) || t == DType::kInt8 || t == DType::kInt16 || t == DType::kInt32 || t == DType::kInt64;
}

// What values an input takes.
enum class Range { kDefault, kNonZero, kSmall, kExponent, kWide, kUnit };

template <typename T>
void Fill(Tensor& t, const std::function<double(int64_t)>& f) {
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<T>()[i] = static_cast<T>(f(i));
}

Tensor RandomTensor(DType d, const Dims& dims, Range r, uint32_t seed) {
  std::mt19937 rng(seed);
  Tensor t(d, dims);
  auto value = [&](int64_t i) -> double {
    if (d == DType::kBool) return rng() % 2;
    if (IsFloatD(d)) {
      double lo = r == Range::kWide ? -300 : r == Range::kExponent ? -3 : r == Range::kUnit ? -1 : -4;
      double u = std::uniform_real_distribution<double>(lo, -lo)(rng);
      if (i % 3 == 0) u = std::round(u * 2) / 2;  // halves: Round, Floor, Ceil, Sign edge cases
      if (r == Range::kNonZero && u == 0) u = 1.5;
      return u;
    }
    int64_t lo = IsSignedD(d) ? -120 : 0, hi = IsSignedD(d) ? 120 : 250;
    if (r == Range::kSmall) lo = IsSignedD(d) ? -6 : 0, hi = 6;
    if (r == Range::kExponent) lo = IsSignedD(d) ? -2 : 0, hi = 9;
    int64_t v = std::uniform_int_distribution<int64_t>(lo, hi)(rng);
    if (r == Range::kNonZero && v == 0) v = 7;
    return static_cast<double>(v);
  };
  switch (d) {
    case DType::kFloat32: Fill<float>(t, value); break;
    case DType::kFloat64: Fill<double>(t, value); break;
    case DType::kFloat16:
    case DType::kBFloat16:
      for (int64_t i = 0; i < t.num_elements(); ++i) t.data<uint16_t>()[i] = FloatToNarrow(d, float(value(i)));
      break;
    case DType::kInt8: Fill<int8_t>(t, value); break;
    case DType::kInt16: Fill<int16_t>(t, value); break;
    case DType::kInt32: Fill<int32_t>(t, value); break;
    case DType::kInt64: Fill<int64_t>(t, value); break;
    case DType::kUInt8: Fill<uint8_t>(t, value); break;
    case DType::kUInt16: Fill<uint16_t>(t, value); break;
    case DType::kUInt32: Fill<uint32_t>(t, value); break;
    case DType::kUInt64: Fill<uint64_t>(t, value); break;
    case DType::kBool: Fill<uint8_t>(t, value); break;
    default: break;
  }
  return t;
}

double ElementOf(const Tensor& t, int64_t i) {
  if (IsNarrowFloat(t.dtype())) return NarrowToFloat(t.dtype(), t.data<uint16_t>()[i]);
  return ops::ElementAsDouble(t, i);
}

struct Input {
  DType dtype;
  Dims dims;
  Range range = Range::kDefault;
};

// Builds `op` over `inputs`, compiles it at points of its schedule space and
// compares with the interpreter.
void Check(const std::string& op, const std::vector<Input>& inputs, Attrs attrs = {}) {
  SCOPED_TRACE(absl::StrCat(op, " ", DTypeName(inputs[0].dtype), "[", inputs[0].dims.size(), "d]"));
  Graph g;
  g.set_opset_version(17);
  std::vector<Value*> ins;
  std::map<std::string, Tensor> feeds;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string name = absl::StrCat("in", i);
    ins.push_back(*g.AddInput(name, TensorType::Static(inputs[i].dtype, inputs[i].dims)));
    feeds.emplace(name, RandomTensor(inputs[i].dtype, inputs[i].dims, inputs[i].range, 11 + i));
  }
  Value* y = *g.AddValue("y");
  ASSERT_TRUE(g.AddNode(op, "n", ins, {y}, std::move(attrs)).ok());
  g.AddOutput(y);
  absl::Status inferred = InferShapes(g);
  ASSERT_TRUE(inferred.ok()) << inferred;
  auto ref = Evaluate(g, feeds);
  ASSERT_TRUE(ref.ok()) << ref.status();
  const Tensor& want = ref->at("y");
  CpuTarget target = CpuTarget::Host();
  ASSERT_TRUE(CanCompile(g)) << g.ToText();
  std::vector<ScheduleConfig> points = Points(g, target);
  ASSERT_FALSE(points.empty());
  for (const ScheduleConfig& c : points) {
    SCOPED_TRACE(c.ToString());
    ASSERT_TRUE(ValidateSchedule(g, c, target).ok());
    auto kernel = JitCompile(g, c, target);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    Tensor got(want.dtype(), want.dims());
    std::memset(got.raw(), 0xa5, got.size_bytes());
    std::vector<void*> args;
    for (size_t i = 0; i < inputs.size(); ++i) args.push_back(feeds.at(absl::StrCat("in", i)).raw());
    args.push_back(got.raw());
    loop_ir_testing::RunTasksUnevenly(**kernel, args.data());
    int bad = 0;
    for (int64_t i = 0; i < want.num_elements() && bad < 5; ++i) {
      bool ok;
      double w = ElementOf(want, i), v = ElementOf(got, i);
      if (!IsFloatD(want.dtype())) {
        ok = std::memcmp(static_cast<const char*>(want.raw()) + i * DTypeSize(want.dtype()),
                         static_cast<const char*>(got.raw()) + i * DTypeSize(want.dtype()),
                         DTypeSize(want.dtype())) == 0;
      } else {
        // One unit in the last place of the output type.
        double rtol = want.dtype() == DType::kFloat16 ? 2e-3 : want.dtype() == DType::kBFloat16 ? 8e-3 : 2e-5;
        double atol = want.dtype() == DType::kFloat16 ? 1e-3 : want.dtype() == DType::kBFloat16 ? 8e-3 : 1e-5;
        ok = (std::isnan(w) && std::isnan(v)) || w == v || std::fabs(w - v) <= atol + rtol * std::fabs(w);
      }
      if (!ok) {
        ADD_FAILURE() << "element " << i << ": got " << v << " want " << w;
        ++bad;
      }
    }
  }
}

// Shapes: a scalar-like [1], a prime below the vector width, a 2-d odd shape
// broadcast against a row.
const std::vector<std::pair<Dims, Dims>> kShapes = {{{1}, {1}}, {{7}, {7}}, {{3, 37}, {37}}};

TEST(ElementwiseDTypeTest, Arithmetic) {
  for (DType d : Numeric()) {
    for (const auto& [a, b] : kShapes) {
      for (const char* op : {"Add", "Sub", "Mul"}) Check(op, {{d, a}, {d, b}});
      Check("Div", {{d, a}, {d, b, Range::kNonZero}});
    }
  }
}

TEST(ElementwiseDTypeTest, ModBothConventions) {
  for (DType d : kInts) {
    for (int64_t fmod : {0, 1}) Check("Mod", {{d, {3, 37}}, {d, {37}, Range::kNonZero}}, {{"fmod", fmod}});
  }
  for (DType d : kFloats) Check("Mod", {{d, {3, 37}}, {d, {37}, Range::kNonZero}}, {{"fmod", int64_t{1}}});
}

TEST(ElementwiseDTypeTest, ComparisonsAndLogic) {
  for (DType d : Numeric()) {
    for (const char* op : {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"}) {
      Check(op, {{d, {3, 37}, Range::kSmall}, {d, {37}, Range::kSmall}});
    }
  }
  for (const auto& [a, b] : kShapes) {
    for (const char* op : {"And", "Or", "Xor", "Equal"}) Check(op, {{DType::kBool, a}, {DType::kBool, b}});
    Check("Not", {{DType::kBool, a}});
  }
}

TEST(ElementwiseDTypeTest, VariadicAndWhere) {
  for (DType d : Numeric()) {
    Check("Max", {{d, {3, 37}}, {d, {37}}, {d, {1}}});
    Check("Min", {{d, {5}}, {d, {5}}});
    Check("Where", {{DType::kBool, {3, 37}}, {d, {37}}, {d, {3, 37}}});
  }
  for (DType d : kFloats) {
    Check("Sum", {{d, {3, 37}}, {d, {37}}, {d, {1}}});
    Check("Mean", {{d, {7}}, {d, {7}}});
  }
  Check("Where", {{DType::kBool, {13}}, {DType::kBool, {13}}, {DType::kBool, {1}}});
}

TEST(ElementwiseDTypeTest, UnaryExact) {
  for (DType d : Numeric()) {
    for (const auto& [a, b] : kShapes) {
      Check("Abs", {{d, a}});
      Check("Sign", {{d, a}});
      if (IsSignedD(d)) {
        Check("Neg", {{d, a}});
        Check("Relu", {{d, a}});
      }
    }
  }
}

TEST(ElementwiseDTypeTest, UnaryMath) {
  for (DType d : kFloats) {
    for (const char* op : {"Sin", "Cos", "Floor", "Ceil", "Round", "Elu", "Selu", "Softsign", "Softplus", "Mish", "Exp",
                           "Tanh", "Sigmoid", "Erf", "HardSwish", "LeakyRelu", "Reciprocal"}) {
      Check(op, {{d, {3, 37}}});
      Check(op, {{d, {7}}});
    }
  }
  for (DType d : {DType::kInt32, DType::kInt8}) Check("Erf", {{d, {7}, Range::kSmall}});
}

// Domains: [-4, 4] reaches NaN outside asin/acos/atanh/acosh's; [-1, 1] and
// [-300, 300] cover their inside and the large-argument forms.
TEST(ElementwiseDTypeTest, TrigonometricAndHyperbolic) {
  for (DType d : kFloats) {
    for (const char* op : {"Tan", "Atan", "Asin", "Acos", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh"}) {
      Check(op, {{d, {3, 37}}});
      Check(op, {{d, {3, 37}, Range::kUnit}});
    }
    for (const char* op : {"Atan", "Asinh", "Acosh"}) Check(op, {{d, {3, 37}, Range::kWide}});
  }
}

TEST(ElementwiseDTypeTest, ClipCastPowPRelu) {
  for (DType d : Numeric()) {
    Check("Clip", {{d, {3, 37}}, {d, {1}, Range::kSmall}, {d, {1}, Range::kSmall}});
    Check("Clip", {{d, {7}}});
    for (DType to : Numeric()) Check("Cast", {{d, {3, 37}, Range::kWide}}, {{"to", int64_t{DTypeToOnnx(to)}}});
    Check("Cast", {{d, {7}, Range::kSmall}}, {{"to", int64_t{DTypeToOnnx(DType::kBool)}}});
    Check("Cast", {{DType::kBool, {7}}}, {{"to", int64_t{DTypeToOnnx(d)}}});
  }
  for (DType b : {DType::kInt32, DType::kInt64}) {
    for (DType e : {DType::kInt32, DType::kInt64, DType::kUInt8}) {
      Check("Pow", {{b, {3, 37}, Range::kSmall}, {e, {37}, Range::kExponent}});
    }
    Check("Pow", {{b, {7}, Range::kSmall}, {DType::kFloat32, {7}, Range::kExponent}});
    Check("PRelu", {{b, {3, 37}}, {b, {37}, Range::kSmall}});
  }
  for (DType b : kFloats) {
    Check("Pow", {{b, {3, 37}}, {b, {37}, Range::kExponent}});
    Check("Pow", {{b, {7}}, {DType::kInt64, {7}, Range::kExponent}});
    Check("PRelu", {{b, {3, 37}}, {b, {37}}});
  }
}

TEST(ElementwiseDTypeTest, LoopIrIsTyped) {
  Graph g;
  g.set_opset_version(17);
  Value* a = *g.AddInput("a", TensorType::Static(DType::kInt8, {5}));
  Value* b = *g.AddInput("b", TensorType::Static(DType::kInt8, {5}));
  Value* y = *g.AddValue("y");
  ASSERT_TRUE(g.AddNode("Less", "n", {a, b}, {y}).ok());
  g.AddOutput(y);
  ASSERT_TRUE(InferShapes(g).ok());
  const loop_ir::WorkloadLowering* l = loop_ir::FindLowering(g);
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->kind, "elementwise");
  auto f = l->lower(g, l->default_schedule(g, CpuTarget::Host()), CpuTarget::Host());
  ASSERT_TRUE(f.ok()) << f.status();
  std::string text = loop_ir::Print(*f);
  EXPECT_NE(text.find("in0: i8[5]"), std::string::npos) << text;
  EXPECT_NE(text.find("out0: bool[5]"), std::string::npos) << text;
}

}  // namespace
}  // namespace kiln
