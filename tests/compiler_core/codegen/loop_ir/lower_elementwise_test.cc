// Elementwise kernels (Add, Sub, Mul, Div, Relu, Sigmoid): every schedule point
// on odd and broadcasting shapes against plain-loop references.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "compiler_core/codegen/jit.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/codegen/target.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/codegen_testing.h"

namespace kiln {
namespace {

using codegen_testing::MakeWorkload;
using codegen_testing::Product;
using codegen_testing::RandomData;
using codegen_testing::RunKernel;

std::vector<int64_t> BroadcastDims(std::vector<int64_t> a, std::vector<int64_t> b) {
  size_t r = std::max(a.size(), b.size());
  a.insert(a.begin(), r - a.size(), 1);
  b.insert(b.begin(), r - b.size(), 1);
  std::vector<int64_t> out(r);
  for (size_t i = 0; i < r; ++i) out[i] = a[i] == 1 ? b[i] : a[i];
  return out;
}

// Element of `in` (dims `in_dims`) that broadcasts to flat output index `flat`.
float At(const std::vector<float>& in, std::vector<int64_t> in_dims, const std::vector<int64_t>& out_dims,
         int64_t flat) {
  in_dims.insert(in_dims.begin(), out_dims.size() - in_dims.size(), 1);
  int64_t off = 0, stride = 1;
  for (size_t d = out_dims.size(); d-- > 0;) {
    int64_t idx = flat % out_dims[d];
    flat /= out_dims[d];
    if (in_dims[d] != 1) off += idx * stride;
    stride *= in_dims[d];
  }
  return in[off];
}

double RefOp(const std::string& op, float a, float b) {
  if (op == "Add") return a + b;
  if (op == "Sub") return a - b;
  if (op == "Mul") return a * b;
  if (op == "Div") return a / b;
  if (op == "Relu") return a < 0 ? 0.0f : a;
  return 1.0 / (1.0 + std::exp(-static_cast<double>(a)));
}

// Every config of the full grid (not only the pruned space), so tails and
// uneven task splits are hit.
std::vector<ScheduleConfig> FullElementwiseGrid(const CpuTarget& target) {
  std::vector<ScheduleConfig> out;
  for (int64_t vw : {1, 4, 8, 16}) {
    if (vw > target.FloatLanes()) continue;
    for (int64_t tasks : {1, 5, 16}) {
      ScheduleConfig c;
      c.Set("vw", vw);
      c.Set("tasks", tasks);
      out.push_back(c);
    }
  }
  return out;
}

void CheckElementwise(const std::string& op, const std::vector<std::vector<int64_t>>& shapes,
                      const std::vector<ScheduleConfig>& configs) {
  CpuTarget target = CpuTarget::Host();
  std::vector<int64_t> out_dims = shapes[0];
  for (size_t i = 1; i < shapes.size(); ++i) out_dims = BroadcastDims(out_dims, shapes[i]);
  auto g = MakeWorkload(op, shapes, out_dims);
  std::vector<std::vector<float>> inputs;
  for (size_t i = 0; i < shapes.size(); ++i) {
    float lo = op == "Sigmoid" ? -30.0f : -2.0f, hi = -lo;
    inputs.push_back(RandomData(Product(shapes[i]), 17 + i, lo, hi));
    if (op == "Div" && i == 1) {
      for (auto& x : inputs[i]) x = x >= 0 ? x + 0.25f : x - 0.25f;
    }
  }
  int64_t n = Product(out_dims);
  std::vector<double> ref(n);
  for (int64_t j = 0; j < n; ++j) {
    float a = At(inputs[0], shapes[0], out_dims, j);
    float b = shapes.size() > 1 ? At(inputs[1], shapes[1], out_dims, j) : 0.0f;
    ref[j] = RefOp(op, a, b);
  }
  for (const ScheduleConfig& config : configs) {
    SCOPED_TRACE(absl::StrCat(op, " ", g->ToText(), " config ", config.ToString()));
    auto kernel = JitCompile(*g, config, target);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    std::vector<float> out = RunKernel(**kernel, inputs, n);
    int bad = 0;
    for (int64_t j = 0; j < n && bad < 5; ++j) {
      double tol = op == "Sigmoid" ? 1e-6 * std::fabs(ref[j]) + 1e-37 : 0.0;
      if (!(std::fabs(out[j] - ref[j]) <= tol)) {
        ADD_FAILURE() << "element " << j << ": got " << out[j] << " want " << ref[j];
        ++bad;
      }
    }
  }
}

TEST(ElementwiseCodegen, AllOpsAllConfigsOddShapes) {
  CpuTarget target = CpuTarget::Host();
  std::vector<ScheduleConfig> grid = FullElementwiseGrid(target);
  for (const std::string op : {"Add", "Sub", "Mul", "Div"}) {
    CheckElementwise(op, {{7, 13, 29}, {7, 13, 29}}, grid);
    CheckElementwise(op, {{3, 1, 5}, {1, 4, 1}}, grid);
  }
  for (const std::string op : {"Relu", "Sigmoid"}) {
    CheckElementwise(op, {{7, 13, 29}}, grid);
    CheckElementwise(op, {{1}}, grid);
  }
}

TEST(ElementwiseCodegen, BroadcastShapesSampledConfigs) {
  CpuTarget target = CpuTarget::Host();
  std::vector<ScheduleConfig> grid = FullElementwiseGrid(target);
  std::vector<ScheduleConfig> sample;
  for (size_t i = 0; i < grid.size(); i += 3) sample.push_back(grid[i]);
  std::vector<std::vector<std::vector<int64_t>>> cases = {
      {{1}, {1}},
      {{5}, {1}},
      {{}, {3, 17}},
      {{17}, {3, 17}},
      {{3, 1}, {3, 17}},
      {{2, 1, 3, 1, 5, 1}, {1, 4, 1, 6, 1, 7}},
      {{2, 3, 4, 5}, {3, 1, 5}},
      {{4099}, {4099}},
      {{33, 1000}, {1000}},
      {{0, 3}, {1, 3}},
  };
  for (const auto& shapes : cases) CheckElementwise("Add", shapes, sample);
  CheckElementwise("Div", {{33, 1000}, {33, 1}}, sample);
}

TEST(ElementwiseCodegen, SigmoidExtremes) {
  CpuTarget target = CpuTarget::Host();
  auto g = MakeWorkload("Sigmoid", {{12}}, {12});
  std::vector<std::vector<float>> inputs = {{-200.0f, -104.5f, -90.0f, -87.0f, -20.0f, -1e-8f, 0.0f,
                                              1e-8f, 5.0f, 20.0f, 200.0f, INFINITY}};
  for (int64_t vw : {1, 16}) {
    ScheduleConfig c;
    c.Set("vw", std::min<int64_t>(vw, target.FloatLanes()));
    auto kernel = JitCompile(*g, c, target);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    std::vector<float> out = RunKernel(**kernel, inputs, 12);
    for (int i = 0; i < 12; ++i) {
      double ref = 1.0 / (1.0 + std::exp(-static_cast<double>(inputs[0][i])));
      // Below -87.3 the result is 2^-126, not the denormal (vector_math.h).
      double floor = inputs[0][i] < -87.34f ? 0x1p-126 : 1e-44;
      EXPECT_LE(std::fabs(out[i] - ref), 1e-6 * ref + floor) << "x=" << inputs[0][i] << " got " << out[i];
    }
    std::vector<std::vector<float>> nan_in = {std::vector<float>(12, NAN)};
    std::vector<float> nan_out = RunKernel(**kernel, nan_in, 12);
    for (float v : nan_out) EXPECT_TRUE(std::isnan(v));
  }
}

// The inline math's accuracy (vector_math.h) over a dense grid, against
// double precision: relative error where the result is a normal float,
// absolute for Erf (whose zero it crosses). Both vector widths, so a
// scalarized and a vectorized lowering are held to the same bounds.
TEST(ElementwiseCodegen, TranscendentalsKeepTheirStatedAccuracy) {
  CpuTarget target = CpuTarget::Host();
  struct Case {
    const char* op;
    float lo, hi;
    double (*ref)(double);
    double bound;
    bool relative;
  };
  const Case cases[] = {
      {"Exp", -87.0f, 88.0f, [](double x) { return std::exp(x); }, 3e-7, true},
      {"Sigmoid", -87.0f, 87.0f, [](double x) { return 1.0 / (1.0 + std::exp(-x)); }, 3e-7, true},
      {"Tanh", -12.0f, 12.0f, [](double x) { return std::tanh(x); }, 3e-7, true},
      {"Tanh", -0.05f, 0.05f, [](double x) { return std::tanh(x); }, 3e-7, true},
      {"Erf", -6.0f, 6.0f, [](double x) { return std::erf(x); }, 5e-7, false},
  };
  const int64_t n = 20011;
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(c.op, " on [", c.lo, ", ", c.hi, "]"));
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) x[i] = c.lo + (c.hi - c.lo) * static_cast<float>(i) / (n - 1);
    auto g = MakeWorkload(c.op, {{n}}, {n});
    std::vector<std::vector<float>> inputs = {x};
    for (int64_t vw : {int64_t{1}, static_cast<int64_t>(target.FloatLanes())}) {
      ScheduleConfig config;
      config.Set("vw", vw);
      auto kernel = JitCompile(*g, config, target);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      std::vector<float> out = RunKernel(**kernel, inputs, n);
      double worst = 0;
      int64_t at = 0;
      for (int64_t i = 0; i < n; ++i) {
        double ref = c.ref(x[i]);
        if (c.relative && std::fabs(ref) < 0x1p-126) continue;
        double err = std::fabs(out[i] - ref) / (c.relative ? std::fabs(ref) : 1.0);
        if (err > worst) worst = err, at = i;
      }
      EXPECT_LE(worst, c.bound) << "vw=" << vw << " worst at x=" << x[at] << ": " << out[at];
    }
  }
  // Signs and specials: tanh keeps -0 and the sign at the clamp, exp and
  // sigmoid saturate, NaN stays NaN.
  auto run = [&](const char* op, std::vector<float> in) {
    auto g = MakeWorkload(op, {{static_cast<int64_t>(in.size())}}, {static_cast<int64_t>(in.size())});
    ScheduleConfig config;
    config.Set("vw", target.FloatLanes());
    auto kernel = JitCompile(*g, config, target);
    EXPECT_TRUE(kernel.ok()) << kernel.status();
    std::vector<std::vector<float>> inputs = {in};
    return RunKernel(**kernel, inputs, static_cast<int64_t>(in.size()));
  };
  std::vector<float> t = run("Tanh", {-0.0f, 0.0f, -1e-30f, 1e-30f, -50.0f, 50.0f, -INFINITY, INFINITY, NAN});
  EXPECT_TRUE(std::signbit(t[0]) && t[0] == 0.0f);
  EXPECT_TRUE(!std::signbit(t[1]) && t[1] == 0.0f);
  EXPECT_FLOAT_EQ(t[2], -1e-30f);
  EXPECT_FLOAT_EQ(t[3], 1e-30f);
  EXPECT_EQ(t[4], -1.0f);
  EXPECT_EQ(t[5], 1.0f);
  EXPECT_EQ(t[6], -1.0f);
  EXPECT_EQ(t[7], 1.0f);
  EXPECT_TRUE(std::isnan(t[8]));
  std::vector<float> e = run("Exp", {-INFINITY, -200.0f, 0.0f, 89.0f, INFINITY, NAN});
  EXPECT_EQ(e[0], 0.0f);
  EXPECT_EQ(e[1], 0.0f);
  EXPECT_EQ(e[2], 1.0f);
  EXPECT_EQ(e[3], INFINITY);
  EXPECT_EQ(e[4], INFINITY);
  EXPECT_TRUE(std::isnan(e[5]));
}

}  // namespace
}  // namespace kiln
