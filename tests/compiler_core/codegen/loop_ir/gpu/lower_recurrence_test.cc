// GPU lowering of the recurrence kind (compiler_core/codegen/loop_ir/gpu/lower_recurrence.h):
// kiln.Recurrence for LSTM (peepholes, input_forget, clip, initial states),
// GRU (both reset forms) and RNN (every activation), forward, reverse and
// bidirectional with different activations per direction, sequence_lens as
// an input and as a constant, hidden sizes that no block divides (units past
// H in a thread's last round) and batches that no entry count divides;
// every point of the GPU space against the reference interpreter (through
// the CPU emulation) and assembled by ptxas for sm_80 and sm_90; the
// default's loop IR; refused knobs and sizes. The case lists are the CPU
// test's too (loop_ir/recurrence_cases.h).
#include "compiler_core/codegen/loop_ir/gpu/lower_recurrence.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler_core/codegen/kernel_emitter.h"
#include "compiler_core/codegen/loop_ir/printer.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/frontend/op_registry.h"
#include "compiler_core/frontend/shape_inference.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/codegen_testing.h"
#include "tests/compiler_core/codegen/gpu_testing.h"
#include "tests/compiler_core/codegen/loop_ir/recurrence_cases.h"

namespace kiln {
namespace {

using loop_ir_testing::RecurrenceCase;
using loop_ir_testing::RecurrenceGraph;
using loop_ir_testing::RecurrenceWorkload;

const GpuTarget kSm90{90};

void Check(const RecurrenceCase& c) {
  SCOPED_TRACE(loop_ir_testing::RecurrenceName(c));
  RecurrenceWorkload w = RecurrenceGraph(c);
  gpu_testing::CheckEveryPoint(*w.g, "recurrence", w.feeds);
}

TEST(GpuRecurrenceLoweringTest, Lstm) {
  for (const RecurrenceCase& c : loop_ir_testing::LstmCases()) Check(c);
}

TEST(GpuRecurrenceLoweringTest, GruBothResetForms) {
  for (const RecurrenceCase& c : loop_ir_testing::GruCases()) Check(c);
}

TEST(GpuRecurrenceLoweringTest, RnnEveryActivation) {
  for (const RecurrenceCase& c : loop_ir_testing::RnnActivationCases()) Check(c);
}

TEST(GpuRecurrenceLoweringTest, DirectionsWithDifferentActivations) {
  for (const RecurrenceCase& c : loop_ir_testing::DirectionActivationCases()) Check(c);
}

TEST(GpuRecurrenceLoweringTest, SequenceLengths) {
  for (const RecurrenceCase& c : loop_ir_testing::SequenceLengthCases()) Check(c);
}

TEST(GpuRecurrenceLoweringTest, LoopIrOfTheDefault) {
  {  // one LSTM entry of 128 units: a thread per unit, the state double-buffered
    RecurrenceWorkload b = RecurrenceGraph({.seq = 10, .batch = 1, .hidden = 128}, false);
    const ScheduleConfig c = DefaultSchedule(*b.g, kSm90);
    EXPECT_EQ(c.ToString(), "bb=1,bt=128");
    absl::StatusOr<loop_ir::LoopFunc> f = LowerWorkload(*b.g, c, kSm90);
    ASSERT_TRUE(f.ok()) << f.status();
    const loop_ir::GpuLaunch launch = loop_ir::GpuLaunchOf(*f);
    EXPECT_EQ(launch.blocks, 1);
    EXPECT_EQ(launch.threads, 128);
    EXPECT_EQ(launch.shared_bytes, 2 * 128 * 4);
    const std::string ir = loop_ir::Print(*f);
    EXPECT_NE(ir.find("allocate local acc: f32[4]"), std::string::npos) << ir;
    EXPECT_NE(ir.find("for (s_, 0, 10)"), std::string::npos) << ir;
    EXPECT_NE(ir.find("fma(h[(((s_ % 2) * 128) + k_)]"), std::string::npos) << ir;
  }
  {  // 2 x 256 entries: 4 a block, 128 blocks
    RecurrenceWorkload b = RecurrenceGraph({.seq = 2, .batch = 256, .hidden = 64, .direction = "bidirectional"}, false);
    const ScheduleConfig c = DefaultSchedule(*b.g, kSm90);
    EXPECT_EQ(c.ToString(), "bb=4,bt=64");
    absl::StatusOr<loop_ir::LoopFunc> f = LowerWorkload(*b.g, c, kSm90);
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ(loop_ir::GpuLaunchOf(*f).blocks, 128);
  }
}

TEST(GpuRecurrenceLoweringTest, RefusesKnobsAndSizes) {
  RecurrenceWorkload b = RecurrenceGraph({.batch = 3});
  ScheduleConfig c;
  c.Set("bb", 4);
  absl::Status s = ValidateSchedule(*b.g, c, kSm90);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("bb=4"), std::string::npos) << s;
  c = ScheduleConfig();
  c.Set("unroll", 2);
  EXPECT_NE(ValidateSchedule(*b.g, c, kSm90).message().find("on a GPU"), std::string::npos);
  // 8 LSTM entries of 256 units in a block of 32 threads: 8 units x 4 gates
  // x 8 entries, 256 accumulators a thread.
  RecurrenceWorkload wide = RecurrenceGraph({.seq = 1, .batch = 8, .hidden = 256}, false);
  c = ScheduleConfig();
  c.Set("bt", 32);
  c.Set("bb", 8);
  s = ValidateSchedule(*wide.g, c, kSm90);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("256 accumulators per thread"), std::string::npos) << s;
  // A state beyond shared memory: no block takes it.
  RecurrenceWorkload huge = RecurrenceGraph({.seq = 1, .batch = 1, .hidden = 6200, .outputs = {false, true, false}}, false);
  EXPECT_TRUE(EnumerateSchedules(*huge.g, kSm90).empty());
  s = ValidateSchedule(*huge.g, ScheduleConfig(), kSm90);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("hidden size 6200"), std::string::npos) << s;
}

}  // namespace
}  // namespace kiln
