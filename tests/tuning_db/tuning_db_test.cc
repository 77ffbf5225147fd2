// Tests of TuningDb on real SQLite files: open/reopen, records and best-record
// queries, miss explanations, compile cache, stats, and bad files.
#include "tuning_db/tuning_db.h"

#include <filesystem>
#include <fstream>
#include <limits>

#include "base/digest.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/tuning_db/temp_db_dir.h"

namespace kiln::tuningdb {
namespace {

using ::testing::HasSubstr;
using testing_util::TempDbDir;

Record MakeRecord(const std::string& workload, const std::string& target, int space_version,
                  double median_ms, RecordError error = RecordError::kOk,
                  const std::string& config = "") {
  Record r;
  r.workload_key = workload;
  r.target_key = target;
  r.space_version = space_version;
  r.compiler_version = "kiln-0.1.0";
  r.config = config.empty() ? "tile=" + std::to_string(median_ms) : config;
  r.median_ms = median_ms;
  r.p10_ms = median_ms * 0.9;
  r.p90_ms = median_ms * 1.1;
  r.repeats = 10;
  r.error = error;
  r.error_message = error == RecordError::kOk ? "" : "failed";
  r.worker_id = "worker-1";
  return r;
}

std::unique_ptr<TuningDb> OpenOrDie(const std::string& path) {
  absl::StatusOr<std::unique_ptr<TuningDb>> db = TuningDb::Open(path);
  EXPECT_TRUE(db.ok()) << db.status();
  return db.ok() ? std::move(*db) : nullptr;
}

TEST(TuningDbTest, OpenCreatesFileAndParentDirectory) {
  TempDbDir dir;
  std::string path = dir.Path("nested/deeper/tuning.db");
  auto db = OpenOrDie(path);
  ASSERT_NE(db, nullptr);
  EXPECT_TRUE(std::filesystem::exists(path));
  EXPECT_EQ(db->path(), path);
  EXPECT_EQ(db->artifact_dir(), path + ".artifacts");
  absl::StatusOr<TuningDb::Stats> stats = db->GetStats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->records, 0);
  EXPECT_EQ(stats->workloads, 0);
  EXPECT_TRUE(db->CheckIntegrity().ok());
}

TEST(TuningDbTest, RejectsEmptyAndInMemoryPaths) {
  EXPECT_EQ(TuningDb::Open("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TuningDb::Open(":memory:").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TuningDbTest, ReopenKeepsData) {
  TempDbDir dir;
  std::string path = dir.Path();
  {
    auto db = OpenOrDie(path);
    ASSERT_NE(db, nullptr);
    ASSERT_TRUE(db->UpsertTarget({"cpu/x86_64/znver4/abc", "cpu", "x86_64", "znver4", "+avx512f", "",
                                  "", "llvm-19"})
                    .ok());
    ASSERT_TRUE(db->UpsertWorkload({"w1", "matmul(1x64,64x64)", "matmul", "MatMul+Relu", 8192, 4096})
                    .ok());
    ASSERT_TRUE(db->AddRecords({MakeRecord("w1", "cpu/x86_64/znver4/abc", 1, 2.5)}).ok());
    ASSERT_TRUE(db->PutCompileEntry({"ck", ContentDigest("pkg"), 3, 0}).ok());
  }
  auto db = OpenOrDie(path);
  ASSERT_NE(db, nullptr);
  auto top = db->TopK("w1", "cpu/x86_64/znver4/abc", 1, 5);
  ASSERT_TRUE(top.ok()) << top.status();
  ASSERT_EQ(top->size(), 1u);
  EXPECT_EQ((*top)[0].median_ms, 2.5);
  EXPECT_EQ((*top)[0].compiler_version, "kiln-0.1.0");
  EXPECT_EQ((*top)[0].worker_id, "worker-1");
  EXPECT_GT((*top)[0].created_unix_ms, 0);

  auto target = db->GetTarget("cpu/x86_64/znver4/abc");
  ASSERT_TRUE(target.ok() && target->has_value());
  EXPECT_EQ((*target)->cpu_name, "znver4");
  EXPECT_EQ((*target)->toolkit_version, "llvm-19");
  auto workload = db->GetWorkload("w1");
  ASSERT_TRUE(workload.ok() && workload->has_value());
  EXPECT_EQ((*workload)->canonical_text, "matmul(1x64,64x64)");
  EXPECT_EQ((*workload)->flops, 8192);

  auto stats = db->GetStats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->workloads, 1);
  EXPECT_EQ(stats->targets, 1);
  EXPECT_EQ(stats->records, 1);
  EXPECT_EQ(stats->valid_records, 1);
  EXPECT_EQ(stats->compile_entries, 1);
}

TEST(TuningDbTest, UpsertReplacesFields) {
  TempDbDir dir;
  auto db = OpenOrDie(dir.Path());
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(db->UpsertWorkload({"w", "a", "k", "s", 1, 2}).ok());
  ASSERT_TRUE(db->UpsertWorkload({"w", "b", "k2", "s2", 3, 4}).ok());
  auto w = db->GetWorkload("w");
  ASSERT_TRUE(w.ok() && w->has_value());
  EXPECT_EQ((*w)->canonical_text, "b");
  EXPECT_EQ((*w)->bytes, 4);
  EXPECT_EQ(db->GetStats()->workloads, 1);
  auto missing = db->GetWorkload("nope");
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());
  EXPECT_EQ(db->UpsertWorkload({"", "a", "k", "s", 1, 2}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(db->UpsertWorkload({"w", "a", "k", "s", -1, 2}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(db->UpsertTarget({}).code(), absl::StatusCode::kInvalidArgument);
}

TEST(TuningDbTest, TopKOrdersAndFilters) {
  TempDbDir dir;
  auto db = OpenOrDie(dir.Path());
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(db->AddRecords({
                                 MakeRecord("w", "t", 2, 3.0),
                                 MakeRecord("w", "t", 2, 1.0),
                                 MakeRecord("w", "t", 2, 0.5, RecordError::kWrongAnswer),
                                 MakeRecord("w", "t", 2, 0.1, RecordError::kTimeout),
                                 MakeRecord("w", "t", 2, 2.0),
                                 MakeRecord("w", "other-target", 2, 0.2),
                                 MakeRecord("w", "t", 1, 0.3),
                                 MakeRecord("other-workload", "t", 2, 0.4),
                                 MakeRecord("w", "t", 2, 2.0, RecordError::kOk, "second-2.0"),
                             })
                  .ok());
  auto top = db->TopK("w", "t", 2, 10);
  ASSERT_TRUE(top.ok()) << top.status();
  ASSERT_EQ(top->size(), 4u);
  EXPECT_EQ((*top)[0].median_ms, 1.0);
  EXPECT_EQ((*top)[1].median_ms, 2.0);
  EXPECT_EQ((*top)[1].config, "tile=2.000000");  // ties: older record first
  EXPECT_EQ((*top)[2].config, "second-2.0");
  EXPECT_EQ((*top)[3].median_ms, 3.0);
  for (const Record& r : *top) {
    EXPECT_EQ(r.workload_key, "w");
    EXPECT_EQ(r.target_key, "t");
    EXPECT_EQ(r.space_version, 2);
    EXPECT_EQ(r.error, RecordError::kOk);
  }

  auto top2 = db->TopK("w", "t", 2, 2);
  ASSERT_TRUE(top2.ok());
  ASSERT_EQ(top2->size(), 2u);
  EXPECT_EQ((*top2)[0].median_ms, 1.0);
  EXPECT_TRUE(db->TopK("w", "t", 2, 0)->empty());
  EXPECT_EQ(db->TopK("w", "t", 2, -1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(db->TopK("w", "t", 3, 5)->empty());

  EXPECT_EQ(db->CountRecords("w", "t", 2), 6);  // errors included
  EXPECT_EQ(db->CountRecords("w", "t", 1), 1);
  EXPECT_EQ(db->CountRecords("w", "nope", 2), 0);
  auto stats = db->GetStats();
  EXPECT_EQ(stats->records, 9);
  EXPECT_EQ(stats->valid_records, 7);
}

TEST(TuningDbTest, AddRecordsValidatesWholeBatchFirst) {
  TempDbDir dir;
  auto db = OpenOrDie(dir.Path());
  ASSERT_NE(db, nullptr);
  Record nan = MakeRecord("w", "t", 1, std::numeric_limits<double>::quiet_NaN());
  absl::Status s = db->AddRecords({MakeRecord("w", "t", 1, 1.0), nan});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("record 1"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("median_ms"));
  EXPECT_EQ(db->CountRecords("w", "t", 1), 0);  // nothing of the batch was written

  Record bad_error = MakeRecord("w", "t", 1, 1.0);
  bad_error.error = static_cast<RecordError>(17);
  EXPECT_EQ(db->AddRecords({bad_error}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(db->AddRecords({MakeRecord("", "t", 1, 1.0)}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(db->AddRecords({MakeRecord("w", "t", -1, 1.0)}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(db->AddRecords({MakeRecord("w", "t", 1, -1.0)}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(db->AddRecords({}).ok());
}

TEST(TuningDbTest, ExplainMissNamesEachCase) {
  TempDbDir dir;
  auto db = OpenOrDie(dir.Path());
  ASSERT_NE(db, nullptr);

  auto explain = [&](const std::string& w, const std::string& t, int v) {
    absl::StatusOr<std::string> why = db->ExplainMiss(w, t, v);
    EXPECT_TRUE(why.ok()) << why.status();
    return why.ok() ? *why : "";
  };

  EXPECT_EQ(explain("w", "cpu/a", 1), "no workload w");

  ASSERT_TRUE(db->UpsertWorkload({"w", "text", "matmul", "MatMul", 1, 1}).ok());
  EXPECT_EQ(explain("w", "cpu/a", 1), "workload w known but never measured");

  ASSERT_TRUE(db->AddRecords({MakeRecord("w", "cpu/b", 1, 1.0), MakeRecord("w", "cpu/c", 1, 1.0),
                              MakeRecord("w", "cpu/b", 3, 1.0)})
                  .ok());
  EXPECT_THAT(explain("w", "cpu/a", 1),
              HasSubstr("workload w known but measured only for targets: cpu/b, cpu/c"));

  EXPECT_THAT(explain("w", "cpu/b", 2), HasSubstr("records only for schedule-space versions: 1, 3"));

  // Two build errors of different configs (an identical record would be stored once).
  ASSERT_TRUE(db->AddRecords({MakeRecord("w", "cpu/a", 1, 1.0, RecordError::kBuildError),
                              MakeRecord("w", "cpu/a", 1, 1.0, RecordError::kBuildError, "other"),
                              MakeRecord("w", "cpu/a", 1, 1.0, RecordError::kTimeout)})
                  .ok());
  std::string failed = explain("w", "cpu/a", 1);
  EXPECT_THAT(failed, HasSubstr("only failed records (3)"));
  EXPECT_THAT(failed, HasSubstr("build_error x2"));
  EXPECT_THAT(failed, HasSubstr("timeout x1"));
  EXPECT_TRUE(db->TopK("w", "cpu/a", 1, 1)->empty());

  // A record for an unregistered workload still counts as "measured".
  ASSERT_TRUE(db->AddRecords({MakeRecord("unregistered", "cpu/z", 1, 1.0)}).ok());
  EXPECT_THAT(explain("unregistered", "cpu/a", 1), HasSubstr("measured only for targets: cpu/z"));

  EXPECT_THAT(explain("w", "cpu/b", 1), HasSubstr("hit: 1 valid records"));
}

TEST(TuningDbTest, CompileEntries) {
  TempDbDir dir;
  auto db = OpenOrDie(dir.Path());
  ASSERT_NE(db, nullptr);
  auto missing = db->GetCompileEntry("ck");
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());

  std::string d1 = ContentDigest("package-1");
  ASSERT_TRUE(db->PutCompileEntry({"ck", d1, 9, 1234}).ok());
  auto got = db->GetCompileEntry("ck");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->package_digest, d1);
  EXPECT_EQ((*got)->package_size, 9);
  EXPECT_EQ((*got)->created_unix_ms, 1234);

  std::string d2 = ContentDigest("package-2");
  ASSERT_TRUE(db->PutCompileEntry({"ck", d2, 10, 0}).ok());
  got = db->GetCompileEntry("ck");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->package_digest, d2);
  EXPECT_GT((*got)->created_unix_ms, 1234);
  EXPECT_EQ(db->GetStats()->compile_entries, 1);

  EXPECT_EQ(db->PutCompileEntry({"", d1, 1, 0}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(db->PutCompileEntry({"ck2", "not-a-digest", 1, 0}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(db->PutCompileEntry({"ck2", d1, -1, 0}).code(), absl::StatusCode::kInvalidArgument);
}

TEST(TuningDbTest, ACompileEntryKeepsItsAnswerAndRecordsSeenMovesOnlyWithItsWorkloads) {
  TempDbDir dir;
  auto db = OpenOrDie(dir.Path());
  ASSERT_NE(db, nullptr);
  auto seen = [&] { return db->RecordsSeen({"w2", "w1"}, "cpu/a", 1); };
  ASSERT_TRUE(seen().ok()) << seen().status();
  EXPECT_EQ(*seen(), "w2 0\nw1 0\n");  // in the order asked, 0 for none
  EXPECT_EQ(TuningDb::WorkloadsOfRecordsSeen(*seen()), (std::vector<std::string>{"w2", "w1"}));

  CompileEntry e{"ck", ContentDigest("package"), 7, 0};
  e.result = std::string("\0answer\xff", 8);
  e.trials = 12;
  e.records_seen = *seen();
  ASSERT_TRUE(db->PutCompileEntry(e).ok());
  auto got = db->GetCompileEntry("ck");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->result, e.result);
  EXPECT_EQ((*got)->trials, 12);
  EXPECT_EQ((*got)->records_seen, e.records_seen);

  // Other workloads, targets and space versions leave it as it was...
  ASSERT_TRUE(db->AddRecords({MakeRecord("w3", "cpu/a", 1, 1.0), MakeRecord("w1", "cpu/b", 1, 1.0),
                              MakeRecord("w1", "cpu/a", 2, 1.0)})
                  .ok());
  EXPECT_EQ(*seen(), e.records_seen);
  // ...a record of one of its workloads, even a failed one, moves it.
  ASSERT_TRUE(db->AddRecords({MakeRecord("w1", "cpu/a", 1, 2.0, RecordError::kTimeout)}).ok());
  EXPECT_NE(*seen(), e.records_seen);
  EXPECT_THAT(*seen(), ::testing::StartsWith("w2 0\nw1 "));

  EXPECT_EQ(db->RecordsSeen({"a\"b"}, "cpu/a", 1).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TuningDbTest, RecordsAreAppendOnly) {
  TempDbDir dir;
  std::string path = dir.Path();
  {
    auto db = OpenOrDie(path);
    ASSERT_NE(db, nullptr);
    ASSERT_TRUE(db->AddRecords({MakeRecord("w", "t", 1, 1.0)}).ok());
  }
  // The triggers hold even for other clients of the file.
  auto conn = SqliteConnection::Open(path, 1000);
  ASSERT_TRUE(conn.ok()) << conn.status();
  EXPECT_FALSE((*conn)->Exec("UPDATE records SET median_ms = 0").ok());
  EXPECT_FALSE((*conn)->Exec("DELETE FROM records").ok());
}

TEST(TuningDbTest, GarbageFileGivesErrorNamingPath) {
  TempDbDir dir;
  std::string path = dir.Path("garbage.db");
  {
    std::ofstream out(path, std::ios::binary);
    for (int i = 0; i < 1000; ++i) out << "this is certainly not a sqlite database ";
  }
  absl::StatusOr<std::unique_ptr<TuningDb>> db = TuningDb::Open(path);
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), absl::StatusCode::kFailedPrecondition) << db.status();
  EXPECT_THAT(std::string(db.status().message()), HasSubstr(path));
  EXPECT_THAT(std::string(db.status().message()), HasSubstr("not a SQLite database"));
}

TEST(TuningDbTest, TinyGarbageFileGivesError) {
  TempDbDir dir;
  std::string path = dir.Path("tiny.db");
  {
    std::ofstream out(path, std::ios::binary);
    out << "SQLite format";  // a prefix of the magic header, then nothing
  }
  absl::StatusOr<std::unique_ptr<TuningDb>> db = TuningDb::Open(path);
  ASSERT_FALSE(db.ok());
  EXPECT_THAT(std::string(db.status().message()), HasSubstr(path));
}

TEST(TuningDbTest, TruncatedFileGivesErrorNotCrash) {
  TempDbDir dir;
  std::string path = dir.Path("truncated.db");
  {
    auto db = OpenOrDie(path);
    ASSERT_NE(db, nullptr);
    std::vector<Record> batch;
    for (int i = 0; i < 3000; ++i) {
      batch.push_back(MakeRecord("w" + std::to_string(i % 7), "t", 1, 1.0 + i,
                                 RecordError::kOk, std::string(100, 'c') + std::to_string(i)));
    }
    ASSERT_TRUE(db->AddRecords(batch).ok());
  }
  ASSERT_FALSE(std::filesystem::exists(path + "-wal") &&
               std::filesystem::file_size(path + "-wal") > 0)
      << "closing the last connection should checkpoint the WAL";
  uintmax_t size = std::filesystem::file_size(path);
  ASSERT_GT(size, 64u * 1024);
  std::filesystem::resize_file(path, size / 3);

  // Either Open, the integrity check or a query reports the damage; none crashes.
  absl::StatusOr<std::unique_ptr<TuningDb>> db = TuningDb::Open(path);
  if (!db.ok()) {
    EXPECT_THAT(std::string(db.status().message()), HasSubstr(path));
    return;
  }
  absl::Status integrity = (*db)->CheckIntegrity();
  EXPECT_EQ(integrity.code(), absl::StatusCode::kDataLoss) << integrity;
  EXPECT_THAT(std::string(integrity.message()), HasSubstr(path));
  for (int i = 0; i < 7; ++i) {
    auto top = (*db)->TopK("w" + std::to_string(i), "t", 1, 1000);
    if (!top.ok()) {
      EXPECT_EQ(top.status().code(), absl::StatusCode::kDataLoss) << top.status();
      EXPECT_THAT(std::string(top.status().message()), HasSubstr(path));
    }
  }
  (void)(*db)->GetStats();
}

TEST(TuningDbTest, OverwrittenPagesGiveDataLossNotCrash) {
  TempDbDir dir;
  std::string path = dir.Path("scribbled.db");
  {
    auto db = OpenOrDie(path);
    ASSERT_NE(db, nullptr);
    std::vector<Record> batch;
    for (int i = 0; i < 3000; ++i) {
      batch.push_back(MakeRecord("w" + std::to_string(i % 7), "t", 1, 1.0 + i, RecordError::kOk,
                                 std::string(100, 'c') + std::to_string(i)));
    }
    ASSERT_TRUE(db->AddRecords(batch).ok());
  }
  uintmax_t size = std::filesystem::file_size(path);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size / 2));
    std::string junk(16384, '\xA5');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  absl::StatusOr<std::unique_ptr<TuningDb>> db = TuningDb::Open(path);
  if (!db.ok()) {
    EXPECT_THAT(std::string(db.status().message()), HasSubstr(path));
    return;
  }
  absl::Status integrity = (*db)->CheckIntegrity();
  EXPECT_EQ(integrity.code(), absl::StatusCode::kDataLoss) << integrity;
  EXPECT_THAT(std::string(integrity.message()), HasSubstr(path));
  int failures = 0;
  for (int i = 0; i < 7; ++i) {
    auto top = (*db)->TopK("w" + std::to_string(i), "t", 1, 1000);
    if (!top.ok()) {
      ++failures;
      EXPECT_EQ(top.status().code(), absl::StatusCode::kDataLoss) << top.status();
      EXPECT_THAT(std::string(top.status().message()), HasSubstr(path));
    }
  }
  EXPECT_GT(failures, 0);
  (void)(*db)->GetStats();
  (void)(*db)->ExplainMiss("w1", "t", 2);
}

TEST(TuningDbTest, NewerSchemaVersionIsRefused) {
  TempDbDir dir;
  std::string path = dir.Path();
  { ASSERT_NE(OpenOrDie(path), nullptr); }
  {
    auto conn = SqliteConnection::Open(path, 1000);
    ASSERT_TRUE(conn.ok());
    ASSERT_TRUE((*conn)->Exec("UPDATE schema_version SET version = 99").ok());
  }
  absl::StatusOr<std::unique_ptr<TuningDb>> db = TuningDb::Open(path);
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(db.status().message()), HasSubstr("schema version 99"));
}

TEST(TuningDbTest, DirectoryPathGivesError) {
  TempDbDir dir;
  std::string path = dir.Path("a-directory");
  std::filesystem::create_directories(path);
  absl::StatusOr<std::unique_ptr<TuningDb>> db = TuningDb::Open(path);
  ASSERT_FALSE(db.ok());
  EXPECT_THAT(std::string(db.status().message()), HasSubstr(path));
}

}  // namespace
}  // namespace kiln::tuningdb

namespace kiln::tuningdb {
namespace {

// The evidence behind a schedule names who measured it (the tuner routes
// its re-measurement elsewhere): distinct, sorted, valid records only.
TEST(TuningDbTest, EvidenceNamesTheWorkersThatMeasuredTheSchedule) {
  testing_util::TempDbDir dir;
  auto db = OpenOrDie(dir.Path("t.db"));
  ASSERT_NE(db, nullptr);
  Record a = MakeRecord("wl", "cpu/x", 1, 1.0, RecordError::kOk, "tile=1");
  a.worker_id = "w2-b";
  Record b = MakeRecord("wl", "cpu/x", 1, 1.1, RecordError::kOk, "tile=1");
  b.worker_id = "w1-a";
  Record c = MakeRecord("wl", "cpu/x", 1, 0.9, RecordError::kOk, "tile=1");
  c.worker_id = "w2-b";
  Record failed = MakeRecord("wl", "cpu/x", 1, 0, RecordError::kWrongAnswer, "tile=1");
  failed.worker_id = "w3-c";
  ASSERT_TRUE(db->AddRecords({a, b, c, failed}).ok());
  auto evidence = db->Evidence("wl", "cpu/x", 1, "tile=1");
  ASSERT_TRUE(evidence.ok()) << evidence.status();
  EXPECT_EQ(evidence->record_keys.size(), 3u);
  EXPECT_EQ(evidence->workers, (std::vector<std::string>{"w1-a", "w2-b"}));
}

}  // namespace
}  // namespace kiln::tuningdb
