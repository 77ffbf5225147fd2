// Tests the forward migration of a genuine version-1 file (created with the
// exact version-1 DDL) to the current schema, keeping its data.
#include <filesystem>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/tuning_db/temp_db_dir.h"
#include "tuning_db/record_jsonl.h"
#include "tuning_db/schema.h"
#include "tuning_db/tuning_db.h"

namespace kiln::tuningdb {
namespace {

using ::testing::HasSubstr;
using testing_util::TempDbDir;

TEST(MigrationTest, VersionOneFileUpgradesKeepingItsData) {
  TempDbDir dir;
  std::string path = dir.Path();
  {
    auto conn = SqliteConnection::Open(path, 1000);
    ASSERT_TRUE(conn.ok()) << conn.status();
    ASSERT_TRUE(MigrateSchemaTo(**conn, 1).ok());
    ASSERT_EQ(*ReadSchemaVersion(**conn), 1);
    // Rows as a version-1 build wrote them (two identical records included).
    ASSERT_TRUE((*conn)->Exec(R"sql(
INSERT INTO targets VALUES (1, 'cpu/x', 'cpu', 'x86_64', 'znver4', '+avx2', 'EPYC', '', '', 5, 5);
INSERT INTO workloads VALUES (1, 'w1', 'matmul 4x4', 'matmul', 'MatMul', 128, 64, 5, 5);
INSERT INTO records VALUES (1, 'w1', 'cpu/x', 1, 'kiln-0.1.0', 'tile=4', 2.0, 1.9, 2.1, 10, 0, '', 'wk', 7);
INSERT INTO records VALUES (2, 'w1', 'cpu/x', 1, 'kiln-0.1.0', 'tile=8', 1.0, 0.9, 1.1, 10, 0, '', 'wk', 8);
INSERT INTO records VALUES (3, 'w1', 'cpu/x', 1, 'kiln-0.1.0', 'tile=8', 1.0, 0.9, 1.1, 10, 0, '', 'wk', 8);
INSERT INTO records VALUES (4, 'w1', 'cpu/x', 1, 'kiln-0.1.0', 'tile=2', 0.5, 0.4, 0.6, 10, 2, 'bad', 'wk', 9);
INSERT INTO compile_entries VALUES (1, 'ck', 'sha256:0000000000000000000000000000000000000000000000000000000000000000', 10, 5);
)sql")
                    .ok());
    // A version-1 file has no record keys and no jobs.
    EXPECT_FALSE((*conn)->Exec("SELECT record_key FROM records").ok());
    EXPECT_FALSE((*conn)->Exec("SELECT * FROM tuning_jobs").ok());
  }

  absl::StatusOr<std::unique_ptr<TuningDb>> db = TuningDb::Open(path);
  ASSERT_TRUE(db.ok()) << db.status();
  {
    auto conn = SqliteConnection::Open(path, 1000);
    EXPECT_EQ(*ReadSchemaVersion(**conn), kSchemaVersion);
  }
  auto top = (*db)->TopK("w1", "cpu/x", 1, 10);
  ASSERT_TRUE(top.ok()) << top.status();
  ASSERT_EQ(top->size(), 3u);
  EXPECT_EQ((*top)[0].config, "tile=8");
  EXPECT_EQ((*top)[0].created_unix_ms, 8);
  EXPECT_EQ((*top)[2].config, "tile=4");
  EXPECT_EQ((*db)->CountRecords("w1", "cpu/x", 1), 4);
  auto target = (*db)->GetTarget("cpu/x");
  ASSERT_TRUE(target.ok() && target->has_value());
  EXPECT_EQ((*target)->device_model, "EPYC");
  EXPECT_TRUE((*db)->GetCompileEntry("ck")->has_value());

  // Record keys were backfilled: re-adding a migrated record adds nothing.
  Record again = (*top)[2];
  ASSERT_TRUE((*db)->AddRecords({again}).ok());
  EXPECT_EQ((*db)->CountRecords("w1", "cpu/x", 1), 4);
  // Still append-only after the migration lifted and restored the trigger.
  auto conn = SqliteConnection::Open(path, 1000);
  absl::Status update = (*conn)->Exec("UPDATE records SET median_ms = 0");
  EXPECT_FALSE(update.ok());
  EXPECT_THAT(std::string(update.message()), HasSubstr("append-only"));
  // Version-2 features work on the upgraded file.
  auto job = (*db)->BeginJob("w1", "cpu/y", 1, "template", {"tile=4"});
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_TRUE(job->created);
  EXPECT_TRUE((*db)->CheckIntegrity().ok());
}

TEST(MigrationTest, VersionTwoJobsAndWorkloadsUpgradeWithoutAGoalOrGraph) {
  TempDbDir dir;
  std::string path = dir.Path();
  int64_t id = 0;
  {
    auto conn = SqliteConnection::Open(path, 1000);
    ASSERT_TRUE(conn.ok()) << conn.status();
    ASSERT_TRUE(MigrateSchemaTo(**conn, 2).ok());
    ASSERT_TRUE((*conn)->Exec(R"sql(
INSERT INTO workloads VALUES (1, 'w1', 'matmul 4x4', 'matmul', 'MatMul', 128, 64, 5, 5);
INSERT INTO tuning_jobs VALUES (7, 'w1', 'cpu/x', 1, 0, x'00', '', 5, 5);
INSERT INTO tuning_job_candidates VALUES (7, 0, 'tile=4', NULL);
)sql")
                    .ok());
    id = 7;
  }
  auto db = TuningDb::Open(path);
  ASSERT_TRUE(db.ok()) << db.status();
  auto job = (*db)->GetJob(id);
  ASSERT_TRUE(job.ok() && job->has_value()) << job.status();
  EXPECT_EQ((*job)->trials, 0);
  EXPECT_EQ((*job)->strategy, "random");
  ASSERT_EQ((*job)->candidates.size(), 1u);
  auto w = (*db)->GetWorkload("w1");
  ASSERT_TRUE(w.ok() && w->has_value());
  EXPECT_TRUE((*w)->graph.empty());
  EXPECT_EQ((*db)->AddJobCandidates(id, {"tile=8"}).value_or(-1), 1);
}

TEST(MigrationTest, Version3CandidatesHaveNoPredictionAndNewOnesKeepTheirs) {
  TempDbDir dir;
  std::string path = dir.Path();
  {
    auto conn = SqliteConnection::Open(path, 1000);
    ASSERT_TRUE(conn.ok()) << conn.status();
    ASSERT_TRUE(MigrateSchemaTo(**conn, 3).ok());
    ASSERT_TRUE((*conn)->Exec(R"sql(
INSERT INTO tuning_jobs (id, workload_key, target_key, space_version, state, task_template, message,
                         created_unix_ms, updated_unix_ms, trials, strategy)
  VALUES (3, 'w1', 'cpu/x', 1, 0, x'', '', 5, 5, 4, 'evolutionary');
INSERT INTO tuning_job_candidates VALUES (3, 0, 'tile=4', NULL);
)sql")
                    .ok());
  }
  auto db = TuningDb::Open(path);
  ASSERT_TRUE(db.ok()) << db.status();
  ASSERT_TRUE((*db)->AddJobCandidates(3, {"tile=8"}, {0.25}).ok());
  auto job = (*db)->GetJob(3);
  ASSERT_TRUE(job.ok() && job->has_value()) << job.status();
  ASSERT_EQ((*job)->candidates.size(), 2u);
  EXPECT_FALSE((*job)->candidates[0].predicted.has_value());
  ASSERT_TRUE((*job)->candidates[1].predicted.has_value());
  EXPECT_DOUBLE_EQ(*(*job)->candidates[1].predicted, 0.25);
}

TEST(MigrationTest, Version4CompileEntriesUpgradeWithNoCachedAnswer) {
  TempDbDir dir;
  std::string path = dir.Path();
  const std::string digest = "sha256:" + std::string(64, 'a');
  {
    auto conn = SqliteConnection::Open(path, 1000);
    ASSERT_TRUE(conn.ok()) << conn.status();
    ASSERT_TRUE(MigrateSchemaTo(**conn, 4).ok());
    ASSERT_TRUE((*conn)
                    ->Exec("INSERT INTO compile_entries (compile_key, package_digest, package_size, "
                           "created_unix_ms) VALUES ('ck', '" +
                           digest + "', 9, 5)")
                    .ok());
  }
  auto db = TuningDb::Open(path);
  ASSERT_TRUE(db.ok()) << db.status();
  auto entry = (*db)->GetCompileEntry("ck");
  ASSERT_TRUE(entry.ok() && entry->has_value()) << entry.status();
  EXPECT_EQ((*entry)->package_digest, digest);
  EXPECT_EQ((*entry)->package_size, 9);
  EXPECT_TRUE((*entry)->result.empty());
  EXPECT_TRUE((*entry)->records_seen.empty());
  EXPECT_EQ((*entry)->trials, 0);
}

TEST(MigrationTest, MigratingTwiceAndReopeningIsANoOp) {
  TempDbDir dir;
  std::string path = dir.Path();
  { ASSERT_TRUE(TuningDb::Open(path).ok()); }
  auto conn = SqliteConnection::Open(path, 1000);
  ASSERT_TRUE(MigrateSchema(**conn).ok());
  EXPECT_EQ(*ReadSchemaVersion(**conn), kSchemaVersion);
  EXPECT_FALSE(MigrateSchemaTo(**conn, kSchemaVersion + 1).ok());
}

}  // namespace
}  // namespace kiln::tuningdb
