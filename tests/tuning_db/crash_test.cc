// Tests that a writer process killed with SIGKILL in the middle of a write loop
// leaves a database that passes PRAGMA integrity_check and holds only whole
// transactions (every batch entirely or not at all).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "gtest/gtest.h"
#include "tests/tuning_db/temp_db_dir.h"
#include "tuning_db/sqlite_connection.h"
#include "tuning_db/tuning_db.h"

namespace kiln::tuningdb {
namespace {

using testing_util::TempDbDir;

constexpr int kBatch = 97;

[[noreturn]] void WriteForever(const std::string& path) {
  absl::StatusOr<std::unique_ptr<TuningDb>> db = TuningDb::Open(path);
  if (!db.ok()) _exit(2);
  for (int64_t b = 0;; ++b) {
    std::vector<Record> batch;
    for (int i = 0; i < kBatch; ++i) {
      Record r;
      r.workload_key = "w" + std::to_string(b % 13);
      r.target_key = "t";
      r.space_version = 1;
      r.config = "batch=" + std::to_string(b) + ";i=" + std::to_string(i) + std::string(200, 'x');
      r.median_ms = 1 + i;
      r.worker_id = "child";
      batch.push_back(std::move(r));
    }
    if (!(*db)->AddRecords(batch).ok()) _exit(3);
    if (b % 5 == 0) (void)(*db)->PutArtifact("artifact " + std::to_string(b));
  }
}

TEST(CrashTest, SigkillMidWriteLeavesOnlyWholeTransactions) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    TempDbDir dir;
    std::string path = dir.Path();
    { ASSERT_TRUE(TuningDb::Open(path).ok()); }
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) WriteForever(path);

    // Kill it once it has committed some batches (so it is surely mid-loop).
    auto reader = TuningDb::Open(path);
    ASSERT_TRUE(reader.ok()) << reader.status();
    auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while ((*reader)->GetStats()->records < (attempt + 1) * 20 * kBatch &&
           std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2 + attempt * 3));
    }
    reader->reset();
    ASSERT_EQ(kill(child, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the writer exited by itself with " << WEXITSTATUS(status);

    {
      auto conn = SqliteConnection::Open(path, 1000);
      ASSERT_TRUE(conn.ok()) << conn.status();
      auto check = (*conn)->Prepare("PRAGMA integrity_check");
      ASSERT_TRUE(check.ok());
      ASSERT_TRUE(*check->Step());
      EXPECT_EQ(check->ColumnText(0), "ok");
    }
    auto db = TuningDb::Open(path);
    ASSERT_TRUE(db.ok()) << db.status();
    EXPECT_TRUE((*db)->CheckIntegrity().ok());
    auto conn = SqliteConnection::Open(path, 1000);
    ASSERT_TRUE(conn.ok());
    // Every batch that is there at all is there whole.
    auto partial = (*conn)->Prepare(
        "SELECT substr(config, 1, instr(config, ';') - 1) AS b, COUNT(*) FROM records "
        "GROUP BY b HAVING COUNT(*) != 97");
    ASSERT_TRUE(partial.ok()) << partial.status();
    auto row = partial->Step();
    ASSERT_TRUE(row.ok());
    EXPECT_FALSE(*row) << "batch " << partial->ColumnText(0) << " has " << partial->ColumnInt(1)
                       << " records";
    int64_t records = (*db)->GetStats()->records;
    EXPECT_GE(records, (attempt + 1) * 20 * kBatch);
    EXPECT_EQ(records % kBatch, 0);
    // And the file takes new writes.
    Record r;
    r.workload_key = "after";
    r.target_key = "t";
    r.median_ms = 1;
    EXPECT_TRUE((*db)->AddRecords({r}).ok());
  }
}

}  // namespace
}  // namespace kiln::tuningdb
