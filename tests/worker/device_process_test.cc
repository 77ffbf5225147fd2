// The device process (worker/device_process.h) with the CPU as its device:
// the same process machinery a GPU worker measures through, exercised here
// for real (kiln-worker --serve-device cpu): the hello, measurements, a
// process killed under a task, a task past its deadline, and a device that
// cannot be opened.
#include "worker/device_process.h"

#include <signal.h>

#include "gtest/gtest.h"
#include "tests/worker/workload_protos.h"

namespace kiln::worker {
namespace {

using testing::AddGraph;
using testing::MakeTask;
using testing::MatMulGraph;

DeviceProcess::Options CpuProcess() {
  // Writing to a process that died raises SIGPIPE; the worker ignores it.
  signal(SIGPIPE, SIG_IGN);
  DeviceProcess::Options o;
  o.executable = KILN_BINARY_DIR "/worker/kiln-worker";
  o.device = "cpu";
  return o;
}

TEST(DeviceProcessTest, DescribesTheDeviceAndMeasures) {
  absl::StatusOr<std::unique_ptr<DeviceProcess>> p = DeviceProcess::Start(CpuProcess());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*p)->device().kind(), "cpu");
  EXPECT_FALSE((*p)->device().cpu_name().empty());
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<kiln::v1::MeasureResult> r =
        (*p)->Measure(MakeTask("add-" + std::to_string(i), AddGraph(8, 37), ""), absl::Seconds(60));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->error(), kiln::v1::MEASURE_OK) << r->error_message();
    EXPECT_EQ(r->task_id(), "add-" + std::to_string(i));
    EXPECT_GT(r->median_ms(), 0);
  }
  // One process served them all.
  EXPECT_EQ((*p)->starts(), 1);
  // A bad candidate is a typed result, and the process lives on.
  absl::StatusOr<kiln::v1::MeasureResult> bad = (*p)->Measure(MakeTask("bad", MatMulGraph(4, 4, 4), "mr=100000"),
                                                              absl::Seconds(60));
  ASSERT_TRUE(bad.ok()) << bad.status();
  EXPECT_EQ(bad->error(), kiln::v1::BUILD_ERROR);
  EXPECT_EQ((*p)->starts(), 1);
}

TEST(DeviceProcessTest, AProcessThatDiesCostsOneResultAndIsRestarted) {
  absl::StatusOr<std::unique_ptr<DeviceProcess>> p = DeviceProcess::Start(CpuProcess());
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_GT((*p)->pid(), 0);
  kill((*p)->pid(), SIGKILL);
  absl::StatusOr<kiln::v1::MeasureResult> r = (*p)->Measure(MakeTask("dead", AddGraph(4, 4), ""), absl::Seconds(60));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->error(), kiln::v1::RUNTIME_ERROR);
  EXPECT_NE(r->error_message().find("device process died"), std::string::npos) << r->error_message();
  r = (*p)->Measure(MakeTask("alive", AddGraph(4, 4), ""), absl::Seconds(60));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->error(), kiln::v1::MEASURE_OK) << r->error_message();
  EXPECT_EQ((*p)->starts(), 2);
}

TEST(DeviceProcessTest, ATaskPastItsDeadlineIsATimeoutAndTheNextTaskStillRuns) {
  absl::StatusOr<std::unique_ptr<DeviceProcess>> p = DeviceProcess::Start(CpuProcess());
  ASSERT_TRUE(p.ok()) << p.status();
  // Compiling and checking a 256^3 matmul takes far longer than 1 ms.
  absl::StatusOr<kiln::v1::MeasureResult> r =
      (*p)->Measure(MakeTask("slow", MatMulGraph(256, 256, 256), ""), absl::Milliseconds(1));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->error(), kiln::v1::TIMEOUT) << r->error_message();
  EXPECT_EQ((*p)->pid(), -1);
  r = (*p)->Measure(MakeTask("next", AddGraph(4, 4), ""), absl::Seconds(60));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->error(), kiln::v1::MEASURE_OK) << r->error_message();
}

TEST(DeviceProcessTest, ADeviceThatCannotBeOpenedSaysWhy) {
  DeviceProcess::Options o = CpuProcess();
  o.device = "cuda:0";
  absl::StatusOr<std::unique_ptr<DeviceProcess>> p = DeviceProcess::Start(o);
  if (p.ok()) GTEST_SKIP() << "this machine has a CUDA device: " << (*p)->device().device_model();
  EXPECT_EQ(p.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(p.status().message().find("CUDA"), std::string::npos) << p.status();
  o.device = "tpu:3";
  p = DeviceProcess::Start(o);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(p.status().message().find("tpu:3"), std::string::npos) << p.status();
}

}  // namespace
}  // namespace kiln::worker
