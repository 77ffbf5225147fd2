// Tests the persistent state of tuning jobs: begin, record measurements as they
// arrive, finish, and what a restarted reader sees.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/tuning_db/temp_db_dir.h"
#include "tuning_db/tuning_db.h"

namespace kiln::tuningdb {
namespace {

using testing_util::TempDbDir;

Record Measured(const std::string& config, double ms) {
  Record r;
  r.workload_key = "w";
  r.target_key = "t";
  r.space_version = 3;
  r.config = config;
  r.median_ms = ms;
  r.worker_id = "wk";
  return r;
}

TEST(JobsTest, LifecycleSurvivesReopen) {
  TempDbDir dir;
  std::string path = dir.Path();
  int64_t id = 0;
  {
    auto db = TuningDb::Open(path);
    ASSERT_TRUE(db.ok()) << db.status();
    std::string tmpl("bytes\0with nul", 14);
    auto begun = (*db)->BeginJob("w", "t", 3, tmpl, {"a", "b", "c"});
    ASSERT_TRUE(begun.ok()) << begun.status();
    EXPECT_TRUE(begun->created);
    id = begun->job.id;
    // A second begin for the same triple joins the running job.
    auto again = (*db)->BeginJob("w", "t", 3, "other", {"x"});
    ASSERT_TRUE(again.ok());
    EXPECT_FALSE(again->created);
    EXPECT_EQ(again->job.id, id);
    EXPECT_EQ(again->job.task_template, tmpl);
    ASSERT_EQ(again->job.candidates.size(), 3u);
    // Another space version is another job.
    auto other = (*db)->BeginJob("w", "t", 4, "", {"x"});
    ASSERT_TRUE(other.ok());
    EXPECT_TRUE(other->created);

    ASSERT_TRUE((*db)->AddJobRecord(id, 1, Measured("b", 2.0)).ok());
    EXPECT_EQ((*db)->AddJobRecord(id, 1, Measured("b", 3.0)).code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ((*db)->AddJobRecord(id, 2, Measured("b", 3.0)).code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ((*db)->AddJobRecord(id, 7, Measured("b", 3.0)).code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ((*db)->CountRecords("w", "t", 3), 1);
  }
  {
    auto db = TuningDb::Open(path);
    ASSERT_TRUE(db.ok());
    auto running = (*db)->ListJobs(JobState::kRunning);
    ASSERT_TRUE(running.ok()) << running.status();
    ASSERT_EQ(running->size(), 2u);
    const TuningJob& job = (*running)[0];
    EXPECT_EQ(job.id, id);
    EXPECT_EQ(job.task_template, std::string("bytes\0with nul", 14));
    ASSERT_EQ(job.candidates.size(), 3u);
    EXPECT_FALSE(job.candidates[0].measured());
    EXPECT_TRUE(job.candidates[1].measured());
    EXPECT_EQ(job.candidates[2].config, "c");

    ASSERT_TRUE((*db)->AddJobRecord(id, 0, Measured("a", 1.0)).ok());
    ASSERT_TRUE((*db)->AddJobRecord(id, 2, Measured("c", 5.0)).ok());
    ASSERT_TRUE((*db)->FinishJob(id, JobState::kDone, "best a").ok());
    EXPECT_FALSE((*db)->FinishJob(id, JobState::kFailed, "").ok());
    auto job_now = (*db)->GetJob(id);
    ASSERT_TRUE(job_now.ok() && job_now->has_value());
    EXPECT_EQ((*job_now)->state, JobState::kDone);
    EXPECT_EQ((*job_now)->message, "best a");
    EXPECT_EQ((*db)->ListJobs(JobState::kRunning)->size(), 1u);
    EXPECT_EQ((*db)->TopK("w", "t", 3, 1)->front().config, "a");
    // Once done, a new job for the triple may start.
    auto next = (*db)->BeginJob("w", "t", 3, "", {"z"});
    ASSERT_TRUE(next.ok());
    EXPECT_TRUE(next->created);
    auto stats = (*db)->GetStats();
    EXPECT_EQ(stats->jobs_running, 2);
    EXPECT_EQ(stats->jobs_done, 1);
    EXPECT_EQ(stats->answered_keys, 1);
  }
}

TEST(JobsTest, JobsGrowRoundByRoundAndKeepTheirGoal) {
  TempDbDir dir;
  std::string path = dir.Path();
  int64_t id = 0;
  {
    auto db = TuningDb::Open(path);
    ASSERT_TRUE(db.ok()) << db.status();
    auto begun = (*db)->BeginJob("w", "t", 3, "", {"a", "b"}, /*trials=*/5, "evolutionary");
    ASSERT_TRUE(begun.ok()) << begun.status();
    id = begun->job.id;
    EXPECT_EQ(begun->job.trials, 5);
    EXPECT_EQ(begun->job.strategy, "evolutionary");
    ASSERT_TRUE((*db)->AddJobRecord(id, 0, Measured("a", 2.0)).ok());
    auto first = (*db)->AddJobCandidates(id, {"c", "d"});
    ASSERT_TRUE(first.ok()) << first.status();
    EXPECT_EQ(*first, 2);
    // A config the job lists already is refused, and nothing of the round is added.
    EXPECT_EQ((*db)->AddJobCandidates(id, {"e", "a"}).status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ((*db)->AddJobCandidates(99, {"x"}).status().code(), absl::StatusCode::kInvalidArgument);
    ASSERT_TRUE((*db)->AddJobRecord(id, 3, Measured("d", 1.0)).ok());
  }
  auto db = TuningDb::Open(path);
  ASSERT_TRUE(db.ok());
  auto job = (*db)->GetJob(id);
  ASSERT_TRUE(job.ok() && job->has_value());
  EXPECT_EQ((*job)->trials, 5);
  EXPECT_EQ((*job)->strategy, "evolutionary");
  std::vector<std::string> configs;
  for (const JobCandidate& c : (*job)->candidates) configs.push_back(c.config + (c.measured() ? "*" : ""));
  EXPECT_THAT(configs, ::testing::ElementsAre("a*", "b", "c", "d*"));
  ASSERT_TRUE((*db)->FinishJob(id, JobState::kDone, "").ok());
  EXPECT_EQ((*db)->AddJobCandidates(id, {"e"}).status().code(), absl::StatusCode::kInvalidArgument);
  // A job begun without a goal (as before schema 3) is random with 0 trials.
  auto plain = (*db)->BeginJob("w2", "t", 3, "", {"a"});
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->job.trials, 0);
  EXPECT_EQ(plain->job.strategy, "random");
}

TEST(JobsTest, MeasuredConfigsAndValidRecordsAreWhatASearchLearnsFrom) {
  TempDbDir dir;
  auto db = TuningDb::Open(dir.Path());
  ASSERT_TRUE(db.ok());
  Record failed = Measured("b", 0);
  failed.error = RecordError::kWrongAnswer;
  Record other_target = Measured("c", 1.0);
  other_target.target_key = "t2";
  Record twice = Measured("a", 1.5);
  twice.created_unix_ms = 77;
  ASSERT_TRUE((*db)->AddRecords({Measured("a", 1.0), failed, other_target, twice}).ok());
  auto measured = (*db)->MeasuredConfigs("w", "t", 3);
  ASSERT_TRUE(measured.ok()) << measured.status();
  EXPECT_THAT(*measured, ::testing::ElementsAre("a", "b"));  // failures count: never measured again
  auto valid = (*db)->ValidRecords("t", 3);
  ASSERT_TRUE(valid.ok()) << valid.status();
  ASSERT_EQ(valid->size(), 2u);
  EXPECT_EQ((*valid)[0].config, "a");
  EXPECT_TRUE((*db)->ValidRecords("t", 4)->empty());
}

TEST(JobsTest, WorkloadGraphIsKeptByUpsertsWithoutOne) {
  TempDbDir dir;
  auto db = TuningDb::Open(dir.Path());
  ASSERT_TRUE(db.ok());
  WorkloadInfo w{"w", "text", "matmul", "MatMul", 1, 2, std::string("gr\0aph", 6)};
  ASSERT_TRUE((*db)->UpsertWorkload(w).ok());
  w.graph.clear();
  w.op_summary = "MatMul+Add";
  ASSERT_TRUE((*db)->UpsertWorkload(w).ok());
  auto got = (*db)->GetWorkload("w");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->op_summary, "MatMul+Add");
  EXPECT_EQ((*got)->graph, std::string("gr\0aph", 6));
}

TEST(JobsTest, BadArgumentsAreInvalid) {
  TempDbDir dir;
  auto db = TuningDb::Open(dir.Path());
  ASSERT_TRUE(db.ok());
  EXPECT_EQ((*db)->BeginJob("", "t", 1, "", {"a"}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*db)->BeginJob("w", "t", 1, "", {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*db)->FinishJob(42, JobState::kDone, "").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*db)->FinishJob(42, JobState::kRunning, "").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE((*db)->GetJob(42)->has_value());
}

}  // namespace
TEST(JobsTest, HistoryJoinsEachRecordToTheJobThatProposedItAndItsPrediction) {
  TempDbDir dir;
  std::string path = dir.Path();
  int64_t id = 0;
  {
    auto db = TuningDb::Open(path);
    ASSERT_TRUE(db.ok()) << db.status();
    // An import before any job: a record no job proposed.
    ASSERT_TRUE((*db)->AddRecords({Measured("z", 4.0)}).ok());
    auto begun = (*db)->BeginJob("w", "t", 3, "", {"a", "b"}, /*trials=*/4, "evolutionary", {0.75, std::nan("")});
    ASSERT_TRUE(begun.ok()) << begun.status();
    id = begun->job.id;
    ASSERT_TRUE(begun->job.candidates[0].predicted.has_value());
    EXPECT_DOUBLE_EQ(*begun->job.candidates[0].predicted, 0.75);
    EXPECT_FALSE(begun->job.candidates[1].predicted.has_value());
    // A round with fewer predictions than configs: the rest have none.
    ASSERT_TRUE((*db)->AddJobCandidates(id, {"c", "d"}, {0.5}).ok());
    ASSERT_TRUE((*db)->AddJobRecord(id, 1, Measured("b", 2.0)).ok());
    ASSERT_TRUE((*db)->AddJobRecord(id, 0, Measured("a", 1.0)).ok());
    Record failed = Measured("c", 0);
    failed.error = RecordError::kBuildError;
    failed.error_message = "no";
    ASSERT_TRUE((*db)->AddJobRecord(id, 2, failed).ok());
    // A confirmation of the leader: a plain record.
    ASSERT_TRUE((*db)->AddRecords({Measured("a", 1.1)}).ok());
  }
  auto db = TuningDb::Open(path);
  ASSERT_TRUE(db.ok());
  auto job = (*db)->GetJob(id);
  ASSERT_TRUE(job.ok() && job->has_value());
  std::vector<std::string> predicted;
  for (const JobCandidate& c : (*job)->candidates) {
    predicted.push_back(c.config + "=" + (c.predicted ? std::to_string(*c.predicted).substr(0, 4) : "none"));
  }
  EXPECT_THAT(predicted, ::testing::ElementsAre("a=0.75", "b=none", "c=0.50", "d=none"));

  auto history = (*db)->TuningHistory("w", "t", 3);
  ASSERT_TRUE(history.ok()) << history.status();
  std::vector<std::string> rows;
  for (const TuningDb::HistoryEntry& e : *history) {
    rows.push_back(absl::StrCat(e.record.config, " ", std::string(RecordErrorName(e.record.error)), " job=", e.job_id != 0 ? 1 : 0,
                                " ", e.strategy, " ", e.predicted ? std::to_string(*e.predicted).substr(0, 4) : "-"));
    EXPECT_GT(e.record_id, 0);
  }
  EXPECT_THAT(rows, ::testing::ElementsAre("z ok job=0  -", "b ok job=1 evolutionary -",
                                           "a ok job=1 evolutionary 0.75", "c build_error job=1 evolutionary 0.50",
                                           "a ok job=0  -"));
  EXPECT_TRUE((*db)->TuningHistory("w", "t", 4)->empty());
}

}  // namespace kiln::tuningdb
