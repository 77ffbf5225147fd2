// TopK workloads for the CPU and GPU lowering tests (lower_topk_test.cc,
// gpu/lower_topk_test.cc): the graph and the tie-heavy inputs of a case and
// the case lists both check, each with its own harness.
#pragma once

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler_core/frontend/shape_inference.h"
#include "compiler_core/ir/graph.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/loop_ir/lowering_testing.h"

namespace kiln::loop_ir_testing {

// TopK of the k largest (or smallest) along `axis` of an input `x`, the
// values and/or the indices as outputs; inputs from `levels` distinct
// values (few levels: many ties), some infinite when `infinities`.
struct TopKCase {
  Ints x;
  int64_t k = 1, axis = -1, largest = 1;
  int levels = 1000;
  bool values = true, indices = true, infinities = false;
};

inline std::string TopKName(const TopKCase& c) {
  return absl::StrCat("x=", absl::StrJoin(c.x, "x"), " k=", c.k, " axis=", c.axis, " largest=", c.largest,
                      " levels=", c.levels, c.values ? " values" : "", c.indices ? " indices" : "",
                      c.infinities ? " infinities" : "");
}

inline std::unique_ptr<Graph> TopKGraph(const TopKCase& c) {
  auto g = std::make_unique<Graph>();
  g->set_opset_version(13);
  Value* in = *g->AddInput("in0", TensorType::Static(DType::kFloat32, c.x));
  Value* kv = *g->AddConstant("k", Tensor::FromVector(DType::kInt64, {1}, Ints{c.k}));
  Value* v = *g->AddValue("values");
  Value* i = *g->AddValue("indices");
  Attrs a = {{"axis", c.axis}, {"largest", c.largest}};
  EXPECT_TRUE(g->AddNode("TopK", "topk", {in, kv}, {v, i}, a).ok());
  if (c.values) g->AddOutput(v);
  if (c.indices) g->AddOutput(i);
  absl::Status st = InferShapes(*g);
  EXPECT_TRUE(st.ok()) << st << "\n" << g->ToText();
  return g;
}

// The input of `c`'s graph `g`: `levels` distinct values in [-2, 2), every
// 7th element (from the 4th) +-inf when asked.
inline std::map<std::string, Tensor> TopKFeeds(const Graph& g, const TopKCase& c) {
  const Ints dims = g.inputs()[0]->type().StaticDims();
  std::vector<float> x = Random(Product(dims), 17, 0.0f, 1.0f);
  for (size_t j = 0; j < x.size(); ++j) {
    x[j] = std::floor(x[j] * static_cast<float>(c.levels)) * 4.0f / static_cast<float>(c.levels) - 2.0f;
    if (c.infinities && j % 7 == 3) x[j] = j % 2 == 0 ? INFINITY : -INFINITY;
  }
  return {{"in0", Tensor::FromVector(DType::kFloat32, dims, x)}};
}

// Largest and smallest along the last axis, many ties (lower index first),
// only the values or only the indices.
inline std::vector<TopKCase> TopKTieCases() {
  return {
      {{5, 13}, 3, -1, 1},
      {{5, 13}, 4, 1, 0, 3},
      {{5, 37}, 5, -1, 1},
      {{5, 37}, 5, -1, 0, 3},
      {{4, 11}, 3, 1, 1, 4, true, false},
      {{4, 11}, 3, 1, 0, 4, false, true},
  };
}

// k of 0, of 1 and of the whole row (a full sort); rows of one element.
inline std::vector<TopKCase> TopKSizeCases() {
  return {
      {{2, 3}, 0, 1, 1},
      {{3, 33}, 33, 1, 1, 5},
      {{7, 33}, 1, 1, 0, 5},
      {{6, 1}, 1, 1, 1},
      {{1}, 1, 0, 1},
      {{1}, 1, 0, 0},
  };
}

// The axis leading or in the middle: rows strided by the kept inner axes.
inline std::vector<TopKCase> TopKAxisCases() {
  return {
      {{3, 7, 5}, 7, 1, 0},
      {{3, 7, 5}, 2, 0, 1, 2},
      {{3, 10, 4}, 3, 1, 1, 6},
      {{7, 6}, 7, 0, 0},
      {{2, 9, 3, 5}, 4, -3, 1, 4},
  };
}

// Many rows (parallel CPU tasks), a long row (the GPU sort pads it to 1024:
// 8 KiB of shared memory), and rows with infinities, which order like any
// value (before the padding).
inline std::vector<TopKCase> TopKLongRowAndInfinityCases() {
  return {
      {{64, 97}, 5, 1, 1},
      {{2, 1000}, 10, 1, 1},
      {{3, 45}, 20, 1, 1, 3, true, true, true},
      {{3, 45}, 45, 1, 0, 3, true, true, true},
  };
}

}  // namespace kiln::loop_ir_testing
