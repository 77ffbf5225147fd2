// GPU lowerings of the Winograd transforms against the reference interpreter
// through the CPU emulation at every point of their spaces: tile sizes 2 and
// 4, ragged edges, padding on any side, several images, the output
// transform with a bias and an epilogue; PTX for sm_80 and sm_90; the
// default's loop IR.
#include "compiler_core/codegen/loop_ir/gpu/lower_winograd.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler_core/codegen/kernel_emitter.h"
#include "compiler_core/codegen/loop_ir/printer.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/frontend/op_registry.h"
#include "compiler_core/frontend/ops/winograd.h"
#include "compiler_core/frontend/shape_inference.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/codegen_testing.h"
#include "tests/compiler_core/codegen/gpu_testing.h"

namespace kiln {
namespace {

using codegen_testing::RandomFeeds;

const GpuTarget kSm90{90};

struct Geometry {
  int64_t n = 1, c = 3, h = 9, w = 9, m = 4;
  std::vector<int64_t> pads = {1, 1, 1, 1};
};

void CheckEveryPoint(const Graph& g, const char* kind) {
  ASSERT_EQ(WorkloadKind(g), kind) << g.ToText();
  std::vector<ScheduleConfig> space = EnumerateSchedules(g, kSm90);
  ASSERT_FALSE(space.empty());
  EXPECT_NE(std::find(space.begin(), space.end(), DefaultSchedule(g, kSm90)), space.end());
  gpu_testing::CheckGpuConfigsAgainstInterpreter(g, RandomFeeds(g, 3, -1.0f, 1.0f), space, {1e-4, 1e-4});
  gpu_testing::CheckPtxAssembles(g, space);
}

std::unique_ptr<Graph> Input(const Geometry& s) {
  auto g = std::make_unique<Graph>();
  Value* x = *g->AddInput("x", TensorType::Static(DType::kFloat32, {s.n, s.c, s.h, s.w}));
  Value* v = *g->AddValue("v");
  EXPECT_TRUE(
      g->AddNode("WinogradInput", "wi", {x}, {v}, {{"tile", s.m}, {"pads", s.pads}}, std::string(kKilnDomain)).ok());
  g->AddOutput(v);
  EXPECT_TRUE(InferShapes(*g).ok()) << g->ToText();
  return g;
}

// WinogradOutput over M for an output of `s`'s geometry (c = K), with a bias,
// a Relu and a residual Add when `epilogue`; the raw value too when `both`.
std::unique_ptr<Graph> Output(const Geometry& s, bool bias, bool epilogue, bool both) {
  const int64_t oh = s.h + s.pads[0] + s.pads[2] - 2, ow = s.w + s.pads[1] + s.pads[3] - 2;
  const ops::WinogradGrid grid = ops::MakeWinogradGrid(s.n, s.c, s.h, s.w, s.pads[0], s.pads[1], oh, ow, s.m);
  auto g = std::make_unique<Graph>();
  std::vector<Value*> in = {
      *g->AddInput("m", TensorType::Static(DType::kFloat32, {grid.alpha * grid.alpha, s.c, grid.tiles()}))};
  if (bias) in.push_back(*g->AddInput("b", TensorType::Static(DType::kFloat32, {s.c})));
  Value* y = *g->AddValue("y");
  EXPECT_TRUE(g->AddNode("WinogradOutput", "wo", in, {y},
                         {{"tile", s.m}, {"output_shape", std::vector<int64_t>{s.n, s.c, oh, ow}}},
                         std::string(kKilnDomain))
                  .ok());
  Value* out = y;
  if (epilogue) {
    Value* r = *g->AddValue("r");
    EXPECT_TRUE(g->AddNode("Relu", "relu", {y}, {r}).ok());
    Value* res = *g->AddInput("res", TensorType::Static(DType::kFloat32, {s.n, s.c, oh, ow}));
    out = *g->AddValue("sum");
    EXPECT_TRUE(g->AddNode("Add", "add", {r, res}, {out}).ok());
  }
  if (both) g->AddOutput(y);
  g->AddOutput(out);
  EXPECT_TRUE(InferShapes(*g).ok()) << g->ToText();
  return g;
}

TEST(GpuWinogradLoweringTest, InputTransformEveryPoint) {
  CheckEveryPoint(*Input({}), "winograd_input");  // F(4x4): 9x9 in 3x3 tiles, the last ragged
  CheckEveryPoint(*Input({.m = 2}), "winograd_input");
  CheckEveryPoint(*Input({.n = 2, .c = 2, .h = 6, .w = 11, .pads = {0, 1, 2, 0}}), "winograd_input");
  CheckEveryPoint(*Input({.c = 1, .h = 5, .w = 5, .m = 2, .pads = {0, 0, 0, 0}}), "winograd_input");
}

TEST(GpuWinogradLoweringTest, OutputTransformEveryPoint) {
  CheckEveryPoint(*Output({}, true, true, false), "winograd_output");
  CheckEveryPoint(*Output({.m = 2}, false, false, false), "winograd_output");
  CheckEveryPoint(*Output({.n = 2, .c = 2, .h = 6, .w = 11, .pads = {0, 1, 2, 0}}, true, false, true),
                  "winograd_output");
  CheckEveryPoint(*Output({.c = 3, .h = 8, .w = 8, .m = 2}, false, true, false), "winograd_output");
}

// One thread per (channel, tile), 128 per block: 64 channels of a 56 x 56
// map in F(4x4) tiles (14 x 14 of them) make 98 blocks; the patch stays in
// registers.
TEST(GpuWinogradLoweringTest, LoopIrOfTheDefault) {
  auto g = Input({.c = 64, .h = 56, .w = 56});
  ScheduleConfig c = DefaultSchedule(*g, kSm90);
  EXPECT_EQ(c.ToString(), "bt=128");
  absl::StatusOr<loop_ir::LoopFunc> f = LowerWorkload(*g, c, kSm90);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(loop_ir::GpuLaunchOf(*f).blocks, 64 * 14 * 14 / 128);
  EXPECT_EQ(loop_ir::GpuLaunchOf(*f).threads, 128);
  const std::string text = loop_ir::Print(*f);
  EXPECT_NE(text.find("allocate patch: f32[36]"), std::string::npos) << text;
  ScheduleConfig bad;
  bad.Set("vw", 4);
  EXPECT_EQ(ValidateSchedule(*g, bad, kSm90).code(), absl::StatusCode::kInvalidArgument);
  // The output transform: a thread per (output channel, tile), the epilogue
  // (Relu, residual Add) at each of its 16 outputs.
  auto out = Output({.c = 64, .h = 56, .w = 56}, true, true, false);
  ScheduleConfig oc = DefaultSchedule(*out, kSm90);
  EXPECT_EQ(oc.ToString(), "bt=128");
  absl::StatusOr<loop_ir::LoopFunc> of = LowerWorkload(*out, oc, kSm90);
  ASSERT_TRUE(of.ok()) << of.status();
  EXPECT_EQ(loop_ir::GpuLaunchOf(*of).blocks, 64 * 14 * 14 / 128);
  bad = ScheduleConfig();
  bad.Set("bt", 48);
  EXPECT_EQ(ValidateSchedule(*out, bad, kSm90).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln
