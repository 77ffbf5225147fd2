// Pool workloads for the CPU and GPU lowering tests (lower_pool_test.cc,
// gpu/lower_pool_test.cc): the graphs of a pool (and of MaxPool with its
// Indices output) and the case lists both check, each with its own harness.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "compiler_core/frontend/shape_inference.h"
#include "compiler_core/ir/graph.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/loop_ir/lowering_testing.h"

namespace kiln::loop_ir_testing {

// `op` (MaxPool or AveragePool) over an input of `x` with `attrs`.
struct PoolCase {
  std::string op;
  Ints x;
  Attrs attrs;
};

inline std::unique_ptr<Graph> PoolGraph(const std::string& op, const Ints& x, Attrs attrs) {
  Builder b;
  return b.Finish({b.Op(op, {b.Input(x)}, std::move(attrs))});
}

inline std::unique_ptr<Graph> PoolGraph(const PoolCase& c) { return PoolGraph(c.op, c.x, c.attrs); }

// MaxPool(x) -> (Y, Indices), both workload outputs (y and ind).
inline std::unique_ptr<Graph> MaxPoolWithIndicesGraph(const Ints& x, Attrs attrs) {
  auto g = std::make_unique<Graph>();
  g->set_opset_version(17);
  Value* in = *g->AddInput("in0", TensorType::Static(DType::kFloat32, x));
  Value* y = *g->AddValue("y");
  Value* ind = *g->AddValue("ind");
  EXPECT_TRUE(g->AddNode("MaxPool", "n0", {in}, {y, ind}, std::move(attrs)).ok());
  g->AddOutput(y);
  g->AddOutput(ind);
  EXPECT_TRUE(InferShapes(*g).ok()) << g->ToText();
  return g;
}

// 3-D MaxPool and AveragePool: no padding, asymmetric pads with dilation and
// ceil_mode, count_include_pad.
inline std::vector<PoolCase> ThreeDimensionalPoolCases() {
  return {
      {"MaxPool", {1, 3, 5, 6, 7}, {{"kernel_shape", Ints{2, 2, 2}}}},
      {"MaxPool",
       {2, 2, 7, 5, 9},
       {{"kernel_shape", Ints{3, 2, 3}}, {"strides", Ints{2, 1, 2}}, {"pads", Ints{1, 0, 1, 1, 1, 0}},
        {"dilations", Ints{1, 2, 1}}, {"ceil_mode", int64_t{1}}}},
      {"AveragePool",
       {1, 3, 5, 6, 7},
       {{"kernel_shape", Ints{3, 3, 2}}, {"strides", Ints{2, 2, 1}}, {"pads", Ints{1, 1, 0, 1, 1, 1}}}},
      {"AveragePool",
       {1, 2, 4, 5, 3},
       {{"kernel_shape", Ints{2, 3, 2}}, {"strides", Ints{2, 2, 2}}, {"pads", Ints{1, 1, 1, 1, 1, 1}},
        {"count_include_pad", int64_t{1}}, {"ceil_mode", int64_t{1}}}},
  };
}

// MaxPool with Indices: row-major and column-major (storage_order=1) flat
// positions, 2-D, 3-D and 1-D, a window as large as the padded input,
// dilated and padded.
inline std::vector<PoolCase> MaxPoolWithIndicesCases() {
  return {
      {"MaxPool", {1, 1, 5, 5}, {{"kernel_shape", Ints{5, 5}}, {"pads", Ints{2, 2, 2, 2}}}},
      {"MaxPool",
       {2, 3, 7, 11},
       {{"kernel_shape", Ints{2, 3}}, {"strides", Ints{2, 2}}, {"storage_order", int64_t{1}}}},
      {"MaxPool",
       {1, 2, 9, 13},
       {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 1}}, {"pads", Ints{1, 1, 1, 1}}, {"dilations", Ints{1, 2}},
        {"ceil_mode", int64_t{1}}}},
      {"MaxPool",
       {1, 2, 3, 5, 6},
       {{"kernel_shape", Ints{2, 2, 3}}, {"strides", Ints{1, 2, 2}}, {"pads", Ints{0, 1, 1, 1, 0, 1}},
        {"storage_order", int64_t{1}}}},
      {"MaxPool", {2, 3, 17}, {{"kernel_shape", Ints{4}}, {"strides", Ints{3}}, {"pads", Ints{1, 2}}}},
  };
}

}  // namespace kiln::loop_ir_testing
