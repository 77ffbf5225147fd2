// Conv pair workloads (a 1x1 expansion, a mid chain, a depthwise conv, an
// epilogue) for the CPU and GPU lowering tests (lower_conv_pair_test.cc,
// gpu/lower_conv_pair_test.cc): the graph of a spec and the case lists both
// check, each with its own harness.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compiler_core/ir/graph.h"
#include "tests/compiler_core/codegen/loop_ir/lowering_testing.h"

namespace kiln::loop_ir_testing {

// A depthwise conv's attributes over `c` channels: a k x k kernel.
inline Attrs DepthwiseAttrs(int64_t c, int64_t k, int64_t stride, int64_t pad, int64_t dil = 1) {
  return {{"kernel_shape", Ints{k, k}},
          {"strides", Ints{stride, stride}},
          {"pads", Ints{pad, pad, pad, pad}},
          {"dilations", Ints{dil, dil}},
          {"group", c}};
}

struct ConvPairSpec {
  Ints x;         // [n, cin, h, w]
  int64_t c = 8;  // expanded channels
  int64_t k = 3, stride = 1, pad = 1, dil = 1;
  std::string mid = "Relu";  // "", Relu, HardSwish, SiLU, Scale, RowAdd, ClipMax
  std::string epilogue;      // "", Relu, Add
  bool bias = true;
};

inline std::unique_ptr<Graph> ConvPairGraph(const ConvPairSpec& s) {
  Builder b;
  Value* x = b.Input(s.x);
  std::vector<Value*> ins = {x, b.Input({s.c, s.x[1], 1, 1})};
  if (s.bias) ins.push_back(b.Input({s.c}));
  Value* e = b.Op("Conv", ins);
  if (s.mid == "Relu" || s.mid == "HardSwish") e = b.Op(s.mid, {e});
  if (s.mid == "SiLU") e = b.Op("Mul", {e, b.Op("Sigmoid", {e})});
  if (s.mid == "Scale") e = b.Op("Mul", {e, b.Input({1, s.c, 1, 1})});
  if (s.mid == "RowAdd") e = b.Op("Add", {e, b.Input({1, 1, s.x[2], 1})});
  if (s.mid == "ClipMax") e = b.Op("Clip", {e, nullptr, b.FloatConstant({}, {0.25f})});  // min omitted
  std::vector<Value*> dins = {e, b.Input({s.c, 1, s.k, s.k})};
  if (s.bias) dins.push_back(b.Input({s.c}));
  Value* y = b.Op("Conv", dins, DepthwiseAttrs(s.c, s.k, s.stride, s.pad, s.dil));
  if (s.epilogue == "Relu") y = b.Op("Relu", {y});
  if (s.epilogue == "Add") {
    const int64_t oh = (s.x[2] + 2 * s.pad - s.dil * (s.k - 1) - 1) / s.stride + 1;
    const int64_t ow = (s.x[3] + 2 * s.pad - s.dil * (s.k - 1) - 1) / s.stride + 1;
    y = b.Op("Add", {y, b.Input({s.x[0], s.c, oh, ow})});
  }
  return b.Finish({y});
}

// Strides, pads, dilations, kernels of 3 and 5, several images, odd maps
// and maps that no GPU tile divides, missing biases.
inline std::vector<ConvPairSpec> ConvPairStrideAndMapCases() {
  return {
      {{1, 4, 12, 12}, 8},                                  // 3x3 s1: 144 pixels, 9 vectors
      {{1, 5, 9, 11}, 6, 3, 2, 1, 1, "HardSwish"},          // s2, odd map
      {{2, 3, 7, 7}, 4, 5, 1, 2, 1, "SiLU", "Relu"},        // 5x5, two images
      {{2, 3, 7, 37}, 4, 5, 1, 2, 1, "SiLU", "Relu"},       // 5x5 over 37 columns: two GPU column tiles
      {{1, 4, 10, 13}, 8, 5, 2, 2, 1, "Relu", "", false},   // 5x5 s2, no biases
      {{1, 3, 11, 11}, 4, 3, 1, 2, 2, ""},                  // dilation 2, no mid chain
      {{1, 3, 10, 9}, 4, 3, 1, 2, 2, "Relu", "Add", false},  // dilation 2, residual, no biases
  };
}

// Mid chains with operands of their own (a per-channel scale, an operand
// broadcast along H only: row/column index), a Clip without min, none; a
// residual epilogue.
inline std::vector<ConvPairSpec> ConvPairMidChainCases() {
  return {
      {{1, 4, 8, 9}, 8, 3, 1, 1, 1, "Scale", "Add"},
      {{1, 3, 6, 7}, 4, 3, 1, 1, 1, "Scale"},
      {{1, 4, 6, 7}, 4, 3, 1, 1, 1, "RowAdd"},
      {{1, 3, 6, 7}, 4, 3, 2, 1, 1, "RowAdd"},
      {{1, 4, 6, 6}, 4, 3, 2, 1, 1, "ClipMax"},
      {{1, 3, 6, 7}, 4, 3, 1, 0, 1, "ClipMax"},
      {{1, 3, 6, 7}, 4, 3, 1, 1, 1, ""},
  };
}

}  // namespace kiln::loop_ir_testing
