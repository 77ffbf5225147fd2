// Recurrence workloads on loop IR (compiler_core/codegen/loop_ir/lower_recurrence.h):
// kiln.Recurrence for LSTM (peepholes, input_forget, clip, initial states),
// GRU (both reset forms) and RNN (every activation), forward, reverse and
// bidirectional with different activations per direction, sequence_lens as
// an input and as a constant, hidden sizes that no vector width divides;
// JIT-compiled at every schedule point and compared with the interpreter.
// The case lists are the GPU test's too (recurrence_cases.h).
#include <map>
#include <utility>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler_core/codegen/loop_ir/lower_recurrence.h"
#include "compiler_core/codegen/loop_ir/printer.h"
#include "compiler_core/codegen/loop_ir/verifier.h"
#include "compiler_core/frontend/op_registry.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/loop_ir/lowering_testing.h"
#include "tests/compiler_core/codegen/loop_ir/recurrence_cases.h"

namespace kiln {
namespace {

using namespace loop_ir_testing;  // NOLINT: test helpers

// Every point of the space lowered, verified and run against the
// interpreter, with one task per direction and batch entry.
void Check(const RecurrenceCase& c) {
  SCOPED_TRACE(RecurrenceName(c));
  RecurrenceWorkload w = RecurrenceGraph(c);
  const Graph& g = *w.g;
  CpuTarget target = CpuTarget::Host();
  ASSERT_EQ(WorkloadKind(g), "recurrence") << g.ToText();
  std::vector<ScheduleConfig> configs = EnumerateSchedules(g, target);
  ASSERT_FALSE(configs.empty());
  for (const ScheduleConfig& config : configs) {
    auto lowered = loop_ir::RecurrenceLowering().lower(g, config, target);
    ASSERT_TRUE(lowered.ok()) << lowered.status();
    ASSERT_TRUE(loop_ir::Verify(*lowered).ok()) << loop_ir::Print(*lowered);
  }
  int64_t tasks = codegen_testing::CheckConfigsAgainstInterpreter(g, w.feeds, configs, target);
  const int64_t nd = c.direction == "bidirectional" ? 2 : 1;
  EXPECT_EQ(tasks, nd * c.batch);  // one task per direction and batch entry
}

TEST(LowerRecurrenceTest, Lstm) {
  for (const RecurrenceCase& c : LstmCases()) Check(c);
}

TEST(LowerRecurrenceTest, GruBothResetForms) {
  for (const RecurrenceCase& c : GruCases()) Check(c);
}

TEST(LowerRecurrenceTest, RnnEveryActivation) {
  for (const RecurrenceCase& c : RnnActivationCases()) Check(c);
}

TEST(LowerRecurrenceTest, DirectionsWithDifferentActivations) {
  for (const RecurrenceCase& c : DirectionActivationCases()) Check(c);
}

TEST(LowerRecurrenceTest, SequenceLengths) {
  for (const RecurrenceCase& c : SequenceLengthCases()) Check(c);
}

// The default streams the recurrent weights in passes of 8 rows (of the
// hidden size when 4 does not divide it), against the interpreter; the
// passes are a loop of their own in the loop IR.
TEST(LowerRecurrenceTest, TheDefaultStreamsTheWeightsInPassesOfRows) {
  const CpuTarget target = CpuTarget::Host();
  for (const auto& [hidden, kb] : std::vector<std::pair<int64_t, int64_t>>{{24, 8}, {12, 4}, {17, 17}}) {
    RecurrenceCase c{.cell = "GRU", .hidden = hidden, .direction = "bidirectional"};
    SCOPED_TRACE(RecurrenceName(c));
    RecurrenceWorkload w = RecurrenceGraph(c);
    const ScheduleConfig config = loop_ir::RecurrenceLowering().default_schedule(*w.g, target);
    EXPECT_EQ(config.Get("kb", 0), kb) << config.ToString();
    auto lowered = loop_ir::RecurrenceLowering().lower(*w.g, config, target);
    ASSERT_TRUE(lowered.ok()) << lowered.status();
    const std::string ir = loop_ir::Print(*lowered);
    EXPECT_NE(ir.find(absl::StrCat("for (ko0, 0, ", hidden / kb, ")")), std::string::npos) << ir;
    EXPECT_NE(ir.find(absl::StrCat("unrolled for (kk0, 0, ", kb, ")")), std::string::npos) << ir;
    codegen_testing::CheckConfigsAgainstInterpreter(*w.g, w.feeds, {config}, target);
  }
  // A pass that does not divide the hidden size is refused, naming both.
  RecurrenceWorkload w = RecurrenceGraph({.cell = "GRU", .hidden = 24});
  ScheduleConfig bad = loop_ir::RecurrenceLowering().default_schedule(*w.g, target);
  bad.Set("kb", 5);
  absl::Status st = loop_ir::RecurrenceLowering().validate(*w.g, bad, target);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("kb 5 does not divide the hidden size 24"), std::string::npos) << st;
}

TEST(LowerRecurrenceTest, RefusesWhatItCannotRun) {
  RecurrenceWorkload w = RecurrenceGraph({});
  Graph& g = *w.g;
  EXPECT_TRUE(loop_ir::RecurrenceLowering().match(g).ok());
  auto two = std::make_unique<Graph>();
  two->set_opset_version(17);
  Value* x = *two->AddInput("in0", TensorType::Static(DType::kFloat32, {2, 2}));
  Value* y = *two->AddValue("y");
  ASSERT_TRUE(two->AddNode("Relu", "relu", {x}, {y}).ok());
  two->AddOutput(y);
  ASSERT_TRUE(InferShapes(*two).ok());
  absl::Status st = loop_ir::RecurrenceLowering().match(*two);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented) << st;
}

}  // namespace
}  // namespace kiln
