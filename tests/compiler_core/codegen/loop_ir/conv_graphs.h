// Conv and ConvTranspose workload graphs for the CPU and GPU lowering tests
// (lower_conv_test.cc, gpu/lower_conv_test.cc).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "compiler_core/frontend/op_registry.h"
#include "compiler_core/ir/graph.h"
#include "tests/compiler_core/codegen/loop_ir/lowering_testing.h"

namespace kiln::loop_ir_testing {

inline Attrs ConvAttrs(Ints kernel, Ints strides, Ints pads, Ints dilations, int64_t group = 1) {
  return {{"kernel_shape", kernel}, {"strides", strides}, {"pads", pads}, {"dilations", dilations},
          {"group", group}};
}

// Conv(x, w[k, c/group, kernel...], bias[k]) of any rank, then `epilogue`
// (a unary op) when given.
inline std::unique_ptr<Graph> ConvGraph(Ints x, int64_t k, Ints kernel, Ints strides, Ints pads, Ints dil,
                                        int64_t group, bool bias = true, const std::string& epilogue = "") {
  Builder b;
  Value* in = b.Input(x);
  Ints wd = {k, x[1] / group};
  wd.insert(wd.end(), kernel.begin(), kernel.end());
  std::vector<Value*> ins = {in, b.Input(wd)};
  if (bias) ins.push_back(b.Input({k}));
  Value* y = b.Op("Conv", ins, ConvAttrs(kernel, strides, pads, dil, group));
  if (!epilogue.empty()) y = b.Op(epilogue, {y});
  return b.Finish({y});
}

// kiln.BlockedConv(x, wb[k/16, c/group, kernel..., 16], bias[k]) (2-D), then
// a Relu: the weights as the blocked_conv_weights pass lays them out.
inline std::unique_ptr<Graph> BlockedConvGraph(Ints x, int64_t k, Ints kernel, Ints strides, Ints pads, Ints dil,
                                               int64_t group, bool bias = true) {
  Builder b;
  Value* in = b.Input(x);
  Ints wd = {k / 16, x[1] / group};
  wd.insert(wd.end(), kernel.begin(), kernel.end());
  wd.push_back(16);
  std::vector<Value*> ins = {in, b.Input(wd)};
  if (bias) ins.push_back(b.Input({k}));
  Value* y = b.Op("BlockedConv", ins, ConvAttrs(kernel, strides, pads, dil, group), std::string(kKilnDomain));
  return b.Finish({b.Op("Relu", {y})});
}

// A pointwise kiln.BlockedConv(x, wb[c/chunk, k/B, chunk, 1, 1, B], bias[k])
// with B = `block` (2-D, one group), then `epilogue` (a unary op) when
// given: the weights as the blocked_conv_weights pass lays out a pointwise
// conv's.
inline std::unique_ptr<Graph> BlockedPointwiseGraph(Ints x, int64_t k, int64_t chunk,
                                                    const std::string& epilogue = "Relu", int64_t block = 4) {
  Builder b;
  Value* in = b.Input(x);
  std::vector<Value*> ins = {in, b.Input({x[1] / chunk, k / block, chunk, 1, 1, block}), b.Input({k})};
  Value* y = b.Op("BlockedConv", ins, ConvAttrs({1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1), std::string(kKilnDomain));
  if (!epilogue.empty()) y = b.Op(epilogue, {y});
  return b.Finish({y});
}

// ConvTranspose(x, w[c, m/group, k...], bias[m]) with `attrs`, then
// `epilogue` (a unary op) when given.
inline std::unique_ptr<Graph> ConvTransposeGraph(Ints x, int64_t m_per_group, Ints kernel, Attrs attrs,
                                                 int64_t group = 1, bool bias = true,
                                                 const std::string& epilogue = "") {
  Builder b;
  Value* in = b.Input(x);
  Ints wd = {x[1], m_per_group};
  wd.insert(wd.end(), kernel.begin(), kernel.end());
  std::vector<Value*> ins = {in, b.Input(wd)};
  if (bias) ins.push_back(b.Input({m_per_group * group}));
  attrs["group"] = group;
  Value* y = b.Op("ConvTranspose", ins, std::move(attrs));
  if (!epilogue.empty()) y = b.Op(epilogue, {y});
  return b.Finish({y});
}

}  // namespace kiln::loop_ir_testing
