// Test support for the graph-pass tests: a terse graph builder, random inputs
// and the "same numbers before and after" check.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "compiler_core/frontend/interpreter.h"
#include "compiler_core/frontend/shape_inference.h"
#include "compiler_core/frontend/verifier.h"
#include "compiler_core/ir/graph.h"
#include "compiler_core/passes/pass_pipeline.h"

namespace kiln::testing {

inline TensorType F32(std::vector<int64_t> dims) { return TensorType::Static(DType::kFloat32, dims); }

// Builds a graph node by node; values are named v0, v1, ... unless named.
class GraphBuilder {
 public:
  GraphBuilder() : g_(std::make_unique<Graph>()) {}
  Value* Input(const std::string& name, std::vector<int64_t> dims) { return *g_->AddInput(name, F32(dims)); }
  Value* Const(const std::string& name, std::vector<int64_t> dims, std::vector<float> v) {
    return *g_->AddConstant(name, Tensor::FromVector<float>(DType::kFloat32, dims, v));
  }
  Value* Scalar(const std::string& name, float v) { return Const(name, {}, {v}); }
  Value* Ints(const std::string& name, std::vector<int64_t> v) {
    return *g_->AddConstant(name, Tensor::FromVector<int64_t>(DType::kInt64, {static_cast<int64_t>(v.size())}, v));
  }
  // Random constant in [-1, 1] (or [lo, hi]).
  Value* Random(const std::string& name, std::vector<int64_t> dims, float lo = -1, float hi = 1) {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(NumElements(dims));
    for (float& x : v) x = dist(rng_);
    return Const(name, dims, v);
  }
  Value* Op(const std::string& op, std::vector<Value*> inputs, std::map<std::string, AttrValue> attrs = {},
            const std::string& out_name = "") {
    std::string name = out_name.empty() ? "v" + std::to_string(next_++) : out_name;
    Value* out = *g_->AddValue(name);
    (void)*g_->AddNode(op, op + "_" + name, std::move(inputs), {out}, std::move(attrs));
    return out;
  }
  void Output(Value* v) { g_->AddOutput(v); }
  // For what the helpers above do not cover (several outputs, other dtypes).
  Graph* graph() { return g_.get(); }
  // Infers shapes (which folds tiny constant subgraphs) and verifies.
  std::unique_ptr<Graph> Finish() {
    absl::Status s = InferShapes(*g_);
    EXPECT_TRUE(s.ok()) << s;
    s = VerifyGraph(*g_);
    EXPECT_TRUE(s.ok()) << s;
    return std::move(g_);
  }
  // The graph as built, types as the caller set them.
  std::unique_ptr<Graph> Release() { return std::move(g_); }

 private:
  std::unique_ptr<Graph> g_;
  int next_ = 0;
  std::mt19937 rng_{7};
};

// The graph the conv rewrites are tested on: Conv(x) with weights [k, C/group,
// kernel...] (random constants, or an input), an optional bias, an optional
// Relu after it.
struct ConvGraphSpec {
  std::vector<int64_t> x;
  int64_t k = 16, kernel = 1;
  std::map<std::string, AttrValue> attrs;
  bool bias = true, relu = true, constant_weights = true;
};

inline std::unique_ptr<Graph> ConvGraph(const ConvGraphSpec& c) {
  GraphBuilder b;
  Value* x = b.Input("x", c.x);
  const int64_t group = c.attrs.count("group") ? std::get<int64_t>(c.attrs.at("group")) : 1;
  std::vector<int64_t> wd = {c.k, c.x[1] / group};
  for (size_t d = 2; d < c.x.size(); ++d) wd.push_back(c.kernel);
  std::vector<Value*> in = {x, c.constant_weights ? b.Random("w", wd, -0.3f, 0.3f) : b.Input("w", wd)};
  if (c.bias) in.push_back(b.Random("b", {c.k}));
  Value* y = b.Op("Conv", in, c.attrs, "conv");
  if (c.relu) y = b.Op("Relu", {y}, {}, "relu");
  b.Output(y);
  return b.Finish();
}

inline std::map<std::string, Tensor> RandomInputs(const Graph& g, unsigned seed = 1, float scale = 3) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::map<std::string, Tensor> in;
  for (const Value* v : g.inputs()) {
    Tensor t(v->type().dtype, v->type().StaticDims());
    for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = dist(rng);
    in.emplace(v->name(), std::move(t));
  }
  return in;
}

// The interpreter's outputs of `before` and `after` on the same random inputs
// agree within `tol` (relative to max(1, |x|)); bit-exact when tol is 0.
inline void ExpectSameOutputs(const Graph& before, const Graph& after, double tol = 1e-4, int trials = 3) {
  for (int trial = 0; trial < trials; ++trial) {
    std::map<std::string, Tensor> in = RandomInputs(before, 100 + trial);
    auto a = Evaluate(before, in);
    auto b = Evaluate(after, in);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status() << "\n" << after.ToText();
    ASSERT_EQ(a->size(), b->size());
    for (const auto& [name, t] : *a) {
      ASSERT_TRUE(b->count(name)) << "missing output " << name;
      const Tensor& u = b->at(name);
      ASSERT_EQ(t.dims(), u.dims()) << name;
      ASSERT_EQ(t.dtype(), u.dtype()) << name;
      if (tol == 0) {
        EXPECT_EQ(t.bytes(), u.bytes()) << name;
        continue;
      }
      ASSERT_EQ(t.dtype(), DType::kFloat32);
      for (int64_t i = 0; i < t.num_elements(); ++i) {
        const double x = t.data<float>()[i], y = u.data<float>()[i];
        ASSERT_LE(std::abs(x - y), tol * std::max(1.0, std::abs(x))) << name << "[" << i << "]";
      }
    }
  }
}

// Runs `passes` as a pipeline (verifier on) and returns whether any changed.
inline bool RunPasses(Graph& g, PassPipeline& pipeline) {
  auto records = pipeline.Run(g, {});
  EXPECT_TRUE(records.ok()) << records.status();
  if (!records.ok()) return false;
  bool changed = false;
  for (const PassRecord& r : *records) changed = changed || r.changed;
  return changed;
}

// Op types of the graph's nodes, in order: "Conv,Relu".
inline std::string OpSequence(const Graph& g) {
  std::string s;
  for (const auto& n : g.nodes()) s += (s.empty() ? "" : ",") + n->op_type();
  return s;
}

}  // namespace kiln::testing
