// The Winograd transforms' lowerings against the interpreter at every point
// of their spaces: tile sizes 2 and 4, ragged edges (outputs not a multiple
// of the tile, tile rows not a multiple of the vector), padding on any side,
// several images, and the output transform with a bias and an epilogue.
#include "compiler_core/codegen/loop_ir/lower_winograd.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler_core/codegen/loop_ir/printer.h"
#include "compiler_core/codegen/loop_ir/verifier.h"
#include "compiler_core/frontend/op_registry.h"
#include "compiler_core/frontend/ops/winograd.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/loop_ir/lowering_testing.h"

namespace kiln {
namespace {

using namespace loop_ir_testing;  // NOLINT: test helpers

struct Geometry {
  int64_t n = 1, c = 3, h = 9, w = 9, m = 4;
  std::vector<int64_t> pads = {1, 1, 1, 1};
};

std::string Name(const Geometry& s) {
  return absl::StrCat("n=", s.n, " c=", s.c, " ", s.h, "x", s.w, " m=", s.m, " pads=", s.pads[0], ",", s.pads[1], ",",
                      s.pads[2], ",", s.pads[3]);
}

void CheckEveryPoint(const Graph& g, const char* kind, const loop_ir::WorkloadLowering& lowering) {
  CpuTarget target = CpuTarget::Host();
  ASSERT_EQ(WorkloadKind(g), kind) << g.ToText();
  std::vector<ScheduleConfig> space = EnumerateSchedules(g, target);
  ASSERT_FALSE(space.empty());
  for (const ScheduleConfig& config : space) {
    auto lowered = lowering.lower(g, config, target);
    ASSERT_TRUE(lowered.ok()) << lowered.status();
    ASSERT_TRUE(loop_ir::Verify(*lowered).ok()) << loop_ir::Print(*lowered);
  }
  CheckConfigsAgainstInterpreter(g, space, target);
}

void CheckInput(const Geometry& s) {
  SCOPED_TRACE(Name(s));
  auto g = std::make_unique<Graph>();
  Value* x = *g->AddInput("x", TensorType::Static(DType::kFloat32, {s.n, s.c, s.h, s.w}));
  Value* v = *g->AddValue("v");
  ASSERT_TRUE(g->AddNode("WinogradInput", "wi", {x}, {v}, {{"tile", s.m}, {"pads", s.pads}}, std::string(kKilnDomain))
                  .ok());
  g->AddOutput(v);
  ASSERT_TRUE(InferShapes(*g).ok()) << g->ToText();
  CheckEveryPoint(*g, "winograd_input", loop_ir::WinogradInputLowering());
}

// WinogradOutput over M for an output of `s`'s geometry (c = K), with a bias,
// a Relu and a residual Add when `epilogue`; both the raw and the final value
// as outputs when `both`.
void CheckOutput(const Geometry& s, bool bias, bool epilogue, bool both) {
  SCOPED_TRACE(absl::StrCat(Name(s), " bias=", bias, " epilogue=", epilogue, " both=", both));
  const int64_t oh = s.h + s.pads[0] + s.pads[2] - 2, ow = s.w + s.pads[1] + s.pads[3] - 2;
  const ops::WinogradGrid grid = ops::MakeWinogradGrid(s.n, s.c, s.h, s.w, s.pads[0], s.pads[1], oh, ow, s.m);
  auto g = std::make_unique<Graph>();
  std::vector<Value*> in = {
      *g->AddInput("m", TensorType::Static(DType::kFloat32, {grid.alpha * grid.alpha, s.c, grid.tiles()}))};
  if (bias) in.push_back(*g->AddInput("b", TensorType::Static(DType::kFloat32, {s.c})));
  Value* y = *g->AddValue("y");
  ASSERT_TRUE(g->AddNode("WinogradOutput", "wo", in, {y},
                         {{"tile", s.m}, {"output_shape", std::vector<int64_t>{s.n, s.c, oh, ow}}},
                         std::string(kKilnDomain))
                  .ok());
  Value* out = y;
  if (epilogue) {
    Value* r = *g->AddValue("r");
    ASSERT_TRUE(g->AddNode("Relu", "relu", {y}, {r}).ok());
    Value* res = *g->AddInput("res", TensorType::Static(DType::kFloat32, {s.n, s.c, oh, ow}));
    out = *g->AddValue("sum");
    ASSERT_TRUE(g->AddNode("Add", "add", {r, res}, {out}).ok());
  }
  if (both) g->AddOutput(y);
  g->AddOutput(out);
  ASSERT_TRUE(InferShapes(*g).ok()) << g->ToText();
  CheckEveryPoint(*g, "winograd_output", loop_ir::WinogradOutputLowering());
}

TEST(LowerWinogradTest, InputTransformEveryPoint) {
  CheckInput({});                                            // F(4x4): 9x9 in 3x3 tiles, the last ragged
  CheckInput({.m = 2});                                      // F(2x2)
  CheckInput({.n = 2, .c = 2, .h = 6, .w = 11, .pads = {0, 1, 2, 0}});  // asymmetric pads, two images
  CheckInput({.c = 2, .h = 42, .w = 66, .m = 4});            // 17 tiles a row: every vector width has a tail
  CheckInput({.c = 1, .h = 5, .w = 5, .m = 2, .pads = {0, 0, 0, 0}});   // no padding
}

TEST(LowerWinogradTest, OutputTransformEveryPoint) {
  CheckOutput({}, true, true, false);
  CheckOutput({.m = 2}, false, false, false);
  CheckOutput({.n = 2, .c = 2, .h = 6, .w = 11, .pads = {0, 1, 2, 0}}, true, false, true);
  CheckOutput({.c = 2, .h = 42, .w = 66}, true, true, true);
  CheckOutput({.c = 3, .h = 8, .w = 8, .m = 2}, false, true, false);  // outputs a multiple of the tile
}

TEST(LowerWinogradTest, RefusesWhatItCannotRun) {
  auto g = std::make_unique<Graph>();
  Value* m = *g->AddInput("m", TensorType::Static(DType::kFloat32, {36, 2, 9}));
  Value* y = *g->AddValue("y");
  ASSERT_TRUE(g->AddNode("WinogradOutput", "wo", {m}, {y},
                         {{"tile", int64_t{4}}, {"output_shape", std::vector<int64_t>{1, 2, 9, 9}}},
                         std::string(kKilnDomain))
                  .ok());
  Value* s = *g->AddValue("s");
  ASSERT_TRUE(g->AddNode("Softmax", "sm", {y}, {s}).ok());  // not an elementwise epilogue
  g->AddOutput(s);
  ASSERT_TRUE(InferShapes(*g).ok());
  absl::Status st = loop_ir::WinogradOutputLowering().match(*g);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented) << st;
  EXPECT_NE(st.message().find("sm"), std::string::npos) << st;
}

}  // namespace
}  // namespace kiln
