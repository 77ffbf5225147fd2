// Tests that several threads and several processes can share one tuning
// database file without losing records or artifacts.
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "gtest/gtest.h"
#include "tests/tuning_db/temp_db_dir.h"
#include "tuning_db/tuning_db.h"

namespace kiln::tuningdb {
namespace {

using testing_util::TempDbDir;

Record MakeRecord(const std::string& worker, int i) {
  Record r;
  r.workload_key = "w";
  r.target_key = "t";
  r.space_version = 1;
  r.config = worker + "/" + std::to_string(i);
  r.median_ms = 1.0 + i;
  r.repeats = 3;
  r.worker_id = worker;
  return r;
}

TEST(ConcurrencyTest, FourThreadsLoseNoRecords) {
  TempDbDir dir;
  absl::StatusOr<std::unique_ptr<TuningDb>> db = TuningDb::Open(dir.Path());
  ASSERT_TRUE(db.ok()) << db.status();
  constexpr int kThreads = 4;
  constexpr int kBatches = 50;
  std::vector<std::thread> threads;
  std::vector<absl::Status> results(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::string worker = "thread-" + std::to_string(t);
      for (int i = 0; i < kBatches && results[t].ok(); ++i) {
        // Mixed traffic: batched writes, reads and artifacts on one handle.
        results[t] = (*db)->AddRecords({MakeRecord(worker, 2 * i), MakeRecord(worker, 2 * i + 1)});
        if (!results[t].ok()) break;
        absl::StatusOr<std::vector<Record>> top = (*db)->TopK("w", "t", 1, 3);
        if (!top.ok()) results[t] = top.status();
        absl::StatusOr<std::string> digest =
            (*db)->PutArtifact(worker + " artifact " + std::to_string(i % 5));
        if (!digest.ok()) results[t] = digest.status();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : results) EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ((*db)->CountRecords("w", "t", 1), kThreads * kBatches * 2);
  EXPECT_EQ((*db)->GetStats()->artifacts, kThreads * 5);
}

TEST(ConcurrencyTest, SecondProcessWritesSameFileConcurrently) {
  TempDbDir dir;
  std::string path = dir.Path();
  constexpr int kPerProcess = 150;
  // Both processes open the brand-new file at about the same time, so schema
  // creation races too.
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int code = 0;
    {
      absl::StatusOr<std::unique_ptr<TuningDb>> db = TuningDb::Open(path);
      if (!db.ok()) {
        fprintf(stderr, "child: %s\n", db.status().ToString().c_str());
        _exit(2);
      }
      for (int i = 0; i < kPerProcess && code == 0; ++i) {
        absl::Status s = (*db)->AddRecords({MakeRecord("child", i)});
        if (!s.ok()) {
          fprintf(stderr, "child: %s\n", s.ToString().c_str());
          code = 3;
        }
        if (code == 0 && !(*db)->PutArtifact("child artifact " + std::to_string(i % 10)).ok()) code = 4;
      }
    }
    _exit(code);
  }
  absl::StatusOr<std::unique_ptr<TuningDb>> db = TuningDb::Open(path);
  ASSERT_TRUE(db.ok()) << db.status();
  for (int i = 0; i < kPerProcess; ++i) {
    ASSERT_TRUE((*db)->AddRecords({MakeRecord("parent", i)}).ok());
    ASSERT_TRUE((*db)->PutArtifact("parent artifact " + std::to_string(i % 10)).ok());
    if (i % 25 == 0) ASSERT_TRUE((*db)->GcArtifacts(1 << 20).ok());
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ((*db)->CountRecords("w", "t", 1), 2 * kPerProcess);
  EXPECT_EQ((*db)->GetStats()->artifacts, 20);
  EXPECT_TRUE((*db)->CheckIntegrity().ok());
}

}  // namespace
}  // namespace kiln::tuningdb
