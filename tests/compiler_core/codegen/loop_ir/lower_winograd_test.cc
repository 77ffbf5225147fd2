// The Winograd transforms' lowerings against the interpreter at every point
// of their spaces: tile sizes 2 and 4, ragged edges (outputs not a multiple
// of the tile, tile rows not a multiple of the vector), padding on any side,
// several images, and the output transform with a bias and an epilogue.
// The case lists are the GPU test's too (winograd_cases.h).
#include "compiler_core/codegen/loop_ir/lower_winograd.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler_core/codegen/kernel_emitter.h"
#include "compiler_core/codegen/loop_ir/printer.h"
#include "compiler_core/codegen/loop_ir/verifier.h"
#include "compiler_core/frontend/op_registry.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/loop_ir/lowering_testing.h"
#include "tests/compiler_core/codegen/loop_ir/winograd_cases.h"

namespace kiln {
namespace {

using namespace loop_ir_testing;  // NOLINT: test helpers

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

TEST(LowerWinogradTest, InputTransformEveryPoint) {
  for (const WinogradGeometry& s : WinogradInputCases()) {
    SCOPED_TRACE(WinogradName(s));
    CheckEveryPoint(*WinogradInputGraph(s), "winograd_input", loop_ir::WinogradInputLowering());
  }
}

TEST(LowerWinogradTest, OutputTransformEveryPoint) {
  for (const WinogradOutputCase& o : WinogradOutputCases()) {
    SCOPED_TRACE(WinogradName(o));
    CheckEveryPoint(*WinogradOutputGraph(o), "winograd_output", loop_ir::WinogradOutputLowering());
  }
}

// A grouped conv's transforms (winograd_convolution.h) view V and M per
// group, [alpha^2, groups, channels per group, tiles]: the same floats as
// ungrouped, at every point of the spaces.
TEST(LowerWinogradTest, GroupedViewsEveryPoint) {
  for (const WinogradGeometry& s : std::vector<WinogradGeometry>{{.c = 4, .groups = 2},
                                                                  {.c = 6, .h = 42, .w = 66, .m = 2, .groups = 3}}) {
    SCOPED_TRACE(WinogradName(s));
    CheckEveryPoint(*WinogradInputGraph(s), "winograd_input", loop_ir::WinogradInputLowering());
    CheckEveryPoint(*WinogradOutputGraph({s, true, true, false}), "winograd_output", loop_ir::WinogradOutputLowering());
  }
}

// A channel's alpha^2 rows of V (or M) 4 KiB apart all start in one L1 set:
// the transforms stage the channel on the stack and copy its rows whole. 28x28
// maps' rows spread over 8 sets and are written in place.
TEST(LowerWinogradTest, StagesAChannelWhoseRowsShareAnL1Set) {
  const CpuTarget target = CpuTarget::Host();
  auto text = [&](const Graph& g) {
    auto f = LowerWorkload(g, DefaultSchedule(g, target), target);
    EXPECT_TRUE(f.ok()) << f.status();
    return f.ok() ? loop_ir::Print(*f) : std::string();
  };
  EXPECT_NE(text(*WinogradInputGraph({.c = 64, .h = 14, .w = 14})).find("allocate vs: f32[576]"), std::string::npos);
  EXPECT_EQ(text(*WinogradInputGraph({.c = 64, .h = 28, .w = 28})).find("allocate vs"), std::string::npos);
  EXPECT_NE(text(*WinogradOutputGraph({{.c = 64, .h = 14, .w = 14}})).find("allocate ms: f32[576]"),
            std::string::npos);
  EXPECT_EQ(text(*WinogradOutputGraph({{.c = 64, .h = 28, .w = 28}})).find("allocate ms"), std::string::npos);
}

// Tile rows whose tiles vw does not divide (56x56 with 4x4 tiles: 14 tiles,
// 8 lanes) run one unguarded chunk and then the last chunk alone, guarded
// by a constant bound: no chunk loop carries the guard (whose mask, computed
// per chunk, made every store of a row a masked store).
TEST(LowerWinogradTest, WholeChunksRunUnguardedAndTheTailAlone) {
  CpuTarget target = CpuTarget::Host();
  ScheduleConfig c;
  c.Set("vw", 8);
  for (const bool input : {true, false}) {
    SCOPED_TRACE(input ? "input" : "output");
    std::unique_ptr<Graph> g = input ? WinogradInputGraph({.c = 16, .h = 56, .w = 56})
                                     : WinogradOutputGraph({{.c = 16, .h = 56, .w = 56}});
    auto f = LowerWorkload(*g, c, target);
    ASSERT_TRUE(f.ok()) << f.status();
    const std::string text = loop_ir::Print(*f);
    EXPECT_NE(text.find("for (tc_, 0, 1) {"), std::string::npos) << text;
    EXPECT_NE(text.find("if (((8 + tl_) < 14))"), std::string::npos) << text;
    EXPECT_EQ(text.find("((tc_ * 8) + tl_) < 14"), std::string::npos) << text;
  }
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
