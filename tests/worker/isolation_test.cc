// Tests of the fork-based isolation: results come back, crashes and hangs become
// typed results, and the test process (the parent) survives all of them.
#include "worker/isolation.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

#include "compiler_core/frontend/graph_proto.h"
#include "gtest/gtest.h"
#include "tests/worker/workload_protos.h"
#include "worker/measurer.h"
#include "worker/reference_cache.h"

namespace kiln::worker {
namespace {

kiln::v1::MeasureResult OkResult() {
  kiln::v1::MeasureResult r;
  r.set_task_id("ignored");
  r.set_error(kiln::v1::MEASURE_OK);
  r.set_median_ms(1.5);
  r.set_repeats(7);
  return r;
}

TEST(IsolationTest, ReturnsTheChildsResult) {
  const pid_t parent = getpid();
  absl::StatusOr<kiln::v1::MeasureResult> r = RunIsolated(
      "t1",
      [parent] {
        kiln::v1::MeasureResult res = OkResult();
        // Proves this ran in another process.
        if (getpid() == parent) res.set_error(kiln::v1::RUNTIME_ERROR);
        return res;
      },
      absl::Seconds(10));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->task_id(), "t1");
  EXPECT_EQ(r->error(), kiln::v1::MEASURE_OK);
  EXPECT_DOUBLE_EQ(r->median_ms(), 1.5);
  EXPECT_EQ(r->repeats(), 7);
}

TEST(IsolationTest, SegfaultIsRuntimeError) {
  absl::StatusOr<kiln::v1::MeasureResult> r = RunIsolated(
      "crash",
      [] {
        raise(SIGSEGV);
        return OkResult();
      },
      absl::Seconds(10));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->task_id(), "crash");
  EXPECT_EQ(r->error(), kiln::v1::RUNTIME_ERROR);
  EXPECT_NE(r->error_message().find("kernel crashed: signal 11"), std::string::npos)
      << r->error_message();
}

// A store through a null pointer, out of UBSan's sight: under the sanitizers
// (tests/sanitize.sh) its report would end the child before the SIGSEGV this
// test is about.
__attribute__((no_sanitize("undefined"))) void StoreThroughNull() {
  volatile int* p = nullptr;
  *p = 1;
}

TEST(IsolationTest, NullDereferenceIsRuntimeError) {
  absl::StatusOr<kiln::v1::MeasureResult> r = RunIsolated(
      "null",
      [] {
        StoreThroughNull();
        return OkResult();
      },
      absl::Seconds(10));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->error(), kiln::v1::RUNTIME_ERROR);
  EXPECT_NE(r->error_message().find("kernel crashed"), std::string::npos);
}

TEST(IsolationTest, AbortIsRuntimeError) {
  absl::StatusOr<kiln::v1::MeasureResult> r = RunIsolated(
      "abort",
      [] {
        std::abort();
        return OkResult();
      },
      absl::Seconds(10));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->error(), kiln::v1::RUNTIME_ERROR);
  EXPECT_NE(r->error_message().find("signal 6"), std::string::npos) << r->error_message();
}

TEST(IsolationTest, HangIsTimeout) {
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<kiln::v1::MeasureResult> r = RunIsolated(
      "hang",
      [] {
        while (true) pause();
        return OkResult();
      },
      absl::Milliseconds(200));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->task_id(), "hang");
  EXPECT_EQ(r->error(), kiln::v1::TIMEOUT);
  // Killed at the deadline, not left running: generous bound, not a timing assertion.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

TEST(IsolationTest, BusyLoopIsTimeout) {
  absl::StatusOr<kiln::v1::MeasureResult> r = RunIsolated(
      "spin",
      [] {
        volatile uint64_t x = 0;
        while (true) x = x + 1;
        return OkResult();
      },
      absl::Milliseconds(200));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->error(), kiln::v1::TIMEOUT);
}

TEST(IsolationTest, ExitWithoutResultIsRuntimeError) {
  absl::StatusOr<kiln::v1::MeasureResult> r = RunIsolated(
      "exit",
      [] {
        _exit(7);
        return OkResult();
      },
      absl::Seconds(10));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->error(), kiln::v1::RUNTIME_ERROR);
  EXPECT_NE(r->error_message().find("code 7"), std::string::npos) << r->error_message();
}

TEST(IsolationTest, ExceptionIsRuntimeError) {
  absl::StatusOr<kiln::v1::MeasureResult> r = RunIsolated(
      "throw",
      []() -> kiln::v1::MeasureResult { throw std::runtime_error("boom"); },
      absl::Seconds(10));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->error(), kiln::v1::RUNTIME_ERROR);
  EXPECT_NE(r->error_message().find("boom"), std::string::npos) << r->error_message();
}

TEST(IsolationTest, CancelKillsTheChild) {
  std::atomic<bool> cancel{false};
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    cancel = true;
  });
  absl::StatusOr<kiln::v1::MeasureResult> r = RunIsolated(
      "cancel",
      [] {
        while (true) pause();
        return OkResult();
      },
      absl::Seconds(60), &cancel);
  canceller.join();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled);
}

TEST(IsolationTest, ParentSurvivesManyCrashes) {
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<kiln::v1::MeasureResult> r = RunIsolated(
        "again",
        [] {
          raise(SIGBUS);
          return OkResult();
        },
        absl::Seconds(10));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->error(), kiln::v1::RUNTIME_ERROR);
  }
  // And a normal measurement still works afterwards.
  absl::StatusOr<kiln::v1::MeasureResult> ok = RunIsolated("fine", OkResult, absl::Seconds(10));
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->error(), kiln::v1::MEASURE_OK);
}

// A workload's reference is computed in a child and kept by the parent:
// equal to ComputeReference's, and seen by the candidates' children forked
// afterwards.
TEST(IsolationTest, AReferenceComputedInAChildIsKeptForLaterChildren) {
  const kiln::v1::MeasureTask task = testing::MakeTask("ref-1", testing::MatMulGraph(9, 14, 11), "");
  const std::string key = ReferenceKey(task);
  ReferenceCache& cache = ReferenceCache::Process();
  ASSERT_FALSE(cache.Contains(key));
  ASSERT_TRUE(CacheReferenceIsolated(task, absl::Seconds(30)).ok());
  ASSERT_TRUE(cache.Contains(key));
  absl::StatusOr<std::unique_ptr<Graph>> graph = GraphFromProto(task.workload());
  ASSERT_TRUE(graph.ok()) << graph.status();
  absl::StatusOr<Reference> here = ComputeReference(**graph, task.workload_key());
  ASSERT_TRUE(here.ok()) << here.status();
  absl::StatusOr<std::shared_ptr<const Reference>> kept =
      cache.GetOrCompute(key, []() -> absl::StatusOr<Reference> { return absl::InternalError("not kept"); });
  ASSERT_TRUE(kept.ok()) << kept.status();
  ASSERT_EQ((*kept)->inputs.size(), here->inputs.size());
  for (const auto& [name, t] : here->inputs) EXPECT_EQ((*kept)->inputs.at(name).bytes(), t.bytes()) << name;
  ASSERT_EQ((*kept)->outputs.size(), 1u);
  EXPECT_EQ((*kept)->outputs[0].dims(), here->outputs[0].dims());
  EXPECT_EQ((*kept)->outputs[0].bytes(), here->outputs[0].bytes());
  // A candidate's child finds it without computing it.
  absl::StatusOr<kiln::v1::MeasureResult> r = RunIsolated(
      "ref-1",
      [&] {
        kiln::v1::MeasureResult res = OkResult();
        if (!ReferenceCache::Process().Contains(key)) res.set_error(kiln::v1::RUNTIME_ERROR);
        return res;
      },
      absl::Seconds(10));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->error(), kiln::v1::MEASURE_OK);
}

TEST(IsolationTest, AWorkloadWithoutAReferenceLeavesTheCacheAsItWas) {
  kiln::v1::MeasureTask task = testing::MakeTask("ref-2", testing::MatMulGraph(4, 5, 6), "");
  task.mutable_workload()->mutable_nodes(0)->set_op_type("NoSuchOperator");
  const int64_t bytes = ReferenceCache::Process().bytes();
  absl::Status s = CacheReferenceIsolated(task, absl::Seconds(30));
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_NE(s.message().find("no reference for workload"), std::string::npos) << s;
  EXPECT_FALSE(ReferenceCache::Process().Contains(ReferenceKey(task)));
  EXPECT_EQ(ReferenceCache::Process().bytes(), bytes);
}

}  // namespace
}  // namespace kiln::worker
