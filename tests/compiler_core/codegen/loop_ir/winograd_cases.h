// Winograd transform workloads for the CPU and GPU lowering tests
// (lower_winograd_test.cc, gpu/lower_winograd_test.cc): the graphs of the
// input and output transforms over a geometry and the case lists both check,
// each with its own harness.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler_core/frontend/op_registry.h"
#include "compiler_core/frontend/ops/winograd.h"
#include "compiler_core/frontend/shape_inference.h"
#include "compiler_core/ir/graph.h"
#include "gtest/gtest.h"

namespace kiln::loop_ir_testing {

// An NCHW input of n x c x h x w in F(m x m, 3 x 3) tiles with pads
// (top, left, bottom, right).
struct WinogradGeometry {
  int64_t n = 1, c = 3, h = 9, w = 9, m = 4;
  std::vector<int64_t> pads = {1, 1, 1, 1};
  int64_t groups = 1;  // above 1: V (M) viewed per group, [alpha^2, groups, c / groups, tiles]
};

inline std::string WinogradName(const WinogradGeometry& s) {
  return absl::StrCat("n=", s.n, " c=", s.c, " ", s.h, "x", s.w, " m=", s.m, " pads=", s.pads[0], ",", s.pads[1], ",",
                      s.pads[2], ",", s.pads[3], s.groups > 1 ? absl::StrCat(" groups=", s.groups) : "");
}

// WinogradInput over an input of `s`'s geometry.
inline std::unique_ptr<Graph> WinogradInputGraph(const WinogradGeometry& s) {
  auto g = std::make_unique<Graph>();
  Value* x = *g->AddInput("x", TensorType::Static(DType::kFloat32, {s.n, s.c, s.h, s.w}));
  Value* v = *g->AddValue("v");
  std::map<std::string, AttrValue> attrs = {{"tile", s.m}, {"pads", s.pads}};
  if (s.groups > 1) attrs["groups"] = s.groups;
  EXPECT_TRUE(g->AddNode("WinogradInput", "wi", {x}, {v}, std::move(attrs), std::string(kKilnDomain)).ok());
  g->AddOutput(v);
  EXPECT_TRUE(InferShapes(*g).ok()) << g->ToText();
  return g;
}

// WinogradOutput over M for an output of the geometry (c = K), with a bias
// when `bias`, a Relu and a residual Add when `epilogue`; both the raw and
// the final value as outputs when `both`.
struct WinogradOutputCase {
  WinogradGeometry geometry;
  bool bias = false, epilogue = false, both = false;
};

inline std::string WinogradName(const WinogradOutputCase& o) {
  return absl::StrCat(WinogradName(o.geometry), " bias=", o.bias, " epilogue=", o.epilogue, " both=", o.both);
}

inline std::unique_ptr<Graph> WinogradOutputGraph(const WinogradOutputCase& o) {
  const WinogradGeometry& s = o.geometry;
  const int64_t oh = s.h + s.pads[0] + s.pads[2] - 2, ow = s.w + s.pads[1] + s.pads[3] - 2;
  const ops::WinogradGrid grid = ops::MakeWinogradGrid(s.n, s.c, s.h, s.w, s.pads[0], s.pads[1], oh, ow, s.m);
  auto g = std::make_unique<Graph>();
  const std::vector<int64_t> m_dims =
      s.groups > 1 ? std::vector<int64_t>{grid.alpha * grid.alpha, s.groups, s.c / s.groups, grid.tiles()}
                   : std::vector<int64_t>{grid.alpha * grid.alpha, s.c, grid.tiles()};
  std::vector<Value*> in = {*g->AddInput("m", TensorType::Static(DType::kFloat32, m_dims))};
  if (o.bias) in.push_back(*g->AddInput("b", TensorType::Static(DType::kFloat32, {s.c})));
  Value* y = *g->AddValue("y");
  EXPECT_TRUE(g->AddNode("WinogradOutput", "wo", in, {y},
                         {{"tile", s.m}, {"output_shape", std::vector<int64_t>{s.n, s.c, oh, ow}}},
                         std::string(kKilnDomain))
                  .ok());
  Value* out = y;
  if (o.epilogue) {
    Value* r = *g->AddValue("r");
    EXPECT_TRUE(g->AddNode("Relu", "relu", {y}, {r}).ok());
    Value* res = *g->AddInput("res", TensorType::Static(DType::kFloat32, {s.n, s.c, oh, ow}));
    out = *g->AddValue("sum");
    EXPECT_TRUE(g->AddNode("Add", "add", {r, res}, {out}).ok());
  }
  if (o.both) g->AddOutput(y);
  g->AddOutput(out);
  EXPECT_TRUE(InferShapes(*g).ok()) << g->ToText();
  return g;
}

inline std::vector<WinogradGeometry> WinogradInputCases() {
  return {
      {},                                                   // F(4x4): 9x9 in 3x3 tiles, the last ragged
      {.m = 2},                                             // F(2x2)
      {.n = 2, .c = 2, .h = 6, .w = 11, .pads = {0, 1, 2, 0}},  // asymmetric pads, two images
      {.c = 2, .h = 42, .w = 66, .m = 4},                   // 17 tiles a row: every CPU vector width has a tail
      {.c = 1, .h = 5, .w = 5, .m = 2, .pads = {0, 0, 0, 0}},   // no padding
      {.c = 64, .h = 13, .w = 15, .m = 4},  // V's rows 4 KiB apart: staged per channel, ragged
      {.c = 32, .h = 8, .w = 8, .m = 2},    // F(2x2), rows 2 KiB apart: staged
  };
}

inline std::vector<WinogradOutputCase> WinogradOutputCases() {
  return {
      {{}, true, true, false},
      {{.m = 2}, false, false, false},
      {{.n = 2, .c = 2, .h = 6, .w = 11, .pads = {0, 1, 2, 0}}, true, false, true},
      {{.c = 2, .h = 42, .w = 66}, true, true, true},
      {{.c = 3, .h = 8, .w = 8, .m = 2}, false, true, false},  // outputs a multiple of the tile
      {{.c = 64, .h = 14, .w = 13}, true, true, false},         // M's rows 4 KiB apart: staged, ragged
      {{.c = 32, .h = 8, .w = 7, .m = 2}, false, false, true},  // F(2x2), staged
  };
}

}  // namespace kiln::loop_ir_testing
