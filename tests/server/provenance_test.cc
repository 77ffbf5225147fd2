// Provenance: a compile result and its package name the tuning records each
// group's schedule came from, so that two compiles of one model that differ
// can be told apart; a package that differs from the one it replaces only in
// those records (same schedules, same code) replaces it without a timing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <google/protobuf/util/message_differencer.h>

#include <chrono>
#include <map>

#include "client/kiln_client.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/package/manifest_reader.h"
#include "tests/server/test_farm.h"
#include "tuning_db/tuning_db.h"

namespace kiln {
namespace {

using client::KilnClient;
using ::testing::HasSubstr;
using tuningdb::Record;

absl::StatusOr<kiln::v1::CompileResult> Compile(KilnClient& c, const kiln::v1::CompileRequest& r) {
  return c.Compile(r, [](const kiln::v1::Progress&) {});
}

// Every record of the database by its RecordKey.
std::map<std::string, Record> RecordsByKey(const std::string& db_path) {
  auto db = tuningdb::TuningDb::Open(db_path);
  EXPECT_TRUE(db.ok()) << db.status();
  std::map<std::string, Record> out;
  EXPECT_TRUE((*db)
                  ->ForEachRecordLine([&](const tuningdb::RecordLine& line) {
                    out[tuningdb::RecordKey(line.record)] = line.record;
                    return absl::OkStatus();
                  })
                  .ok());
  return out;
}

kiln::v1::PackageManifest FetchManifest(KilnClient& client, const std::string& digest) {
  auto bytes = client.FetchArtifact(digest);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  auto info = ReadPackageInfo(bytes.ok() ? *bytes : std::string());
  EXPECT_TRUE(info.ok()) << info.status();
  return info.ok() ? info->manifest : kiln::v1::PackageManifest();
}

TEST(ProvenanceTest, TheResultAndThePackageNameTheRecordsBehindEverySchedule) {
  testing::TestFarm farm;
  KilnClient client(farm.address());
  auto first = Compile(client, testing::MlpRequest(3));
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->groups_size(), 2);

  std::map<std::string, Record> records = RecordsByKey(farm.db_path());
  auto db = tuningdb::TuningDb::Open(farm.db_path());
  ASSERT_TRUE(db.ok()) << db.status();
  for (const kiln::v1::GroupReport& g : first->groups()) {
    const kiln::v1::ScheduleProvenance& p = g.provenance();
    EXPECT_EQ(p.source(), kiln::v1::ScheduleProvenance::RECORDS) << g.index();
    EXPECT_EQ(p.record_target(), first->target());
    EXPECT_EQ(p.space_version(), kScheduleSpaceVersion);
    ASSERT_GT(p.record_keys_size(), 0) << g.index();
    // Each key is a valid record of this workload and schedule, and the mean is theirs.
    double sum = 0;
    for (const std::string& key : p.record_keys()) {
      ASSERT_TRUE(records.count(key)) << "group " << g.index() << ": no record " << key;
      const Record& r = records.at(key);
      EXPECT_EQ(r.workload_key, g.workload_key());
      EXPECT_EQ(r.target_key, first->target());
      EXPECT_EQ(r.config, g.schedule_config());
      EXPECT_EQ(r.error, tuningdb::RecordError::kOk);
      sum += r.median_ms;
    }
    EXPECT_NEAR(p.mean_ms(), sum / p.record_keys_size(), 1e-9);
    EXPECT_NEAR(p.mean_ms(), g.median_ms(), 1e-9);
    auto ranked = (*db)->ConfigStats(g.workload_key(), first->target(), kScheduleSpaceVersion, 1000);
    ASSERT_TRUE(ranked.ok());
    EXPECT_EQ(p.schedules_ranked(), static_cast<int>(ranked->size()));
    EXPECT_GE(p.schedules_ranked(), 3);
  }
  // The package says the same, group by group.
  const kiln::v1::PackageManifest manifest = FetchManifest(client, first->package_digest());
  ASSERT_EQ(manifest.groups_size(), first->groups_size());
  for (int i = 0; i < manifest.groups_size(); ++i) {
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(manifest.groups(i).provenance(),
                                                                   first->groups(i).provenance()))
        << i << ": " << manifest.groups(i).provenance().DebugString();
  }

  // One more measurement of group 0's winner, as fast as its mean: the same
  // schedules win, but the records behind them changed, and so does the package.
  const kiln::v1::GroupReport& g0 = first->groups(0);
  Record again = records.at(g0.provenance().record_keys(0));
  again.median_ms = again.p10_ms = again.p90_ms = g0.provenance().mean_ms();
  again.created_unix_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  again.worker_id = "provenance-test";
  ASSERT_TRUE((*db)->AddRecords({again}).ok());
  auto second = Compile(client, testing::MlpRequest(3));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->trials_measured(), 0);
  EXPECT_NE(second->package_digest(), first->package_digest());
  EXPECT_EQ(second->groups(0).schedule_config(), g0.schedule_config());
  EXPECT_THAT(second->groups(0).provenance().record_keys(),
              ::testing::Contains(tuningdb::RecordKey(again)));
  EXPECT_EQ(second->groups(0).provenance().record_keys_size(), g0.provenance().record_keys_size() + 1);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(second->groups(1).provenance(),
                                                                 first->groups(1).provenance()));
  // Same kernels: replaced without timing, and the result says so.
  EXPECT_TRUE(SameKernels(manifest, FetchManifest(client, second->package_digest())));
  ASSERT_TRUE(second->has_model_check());
  EXPECT_FALSE(second->model_check().checked());
  EXPECT_FALSE(second->model_check().kept_previous());
  EXPECT_EQ(second->model_check().previous_digest(), first->package_digest());
  EXPECT_THAT(second->model_check().message(), HasSubstr("same schedules"));
}

TEST(ProvenanceTest, AnUntunedPackageSaysItsSchedulesAreTheDefaults) {
  testing::TestFarm farm(/*with_worker=*/false);
  KilnClient client(farm.address());
  kiln::v1::CompileRequest r = testing::MlpRequest(0);
  r.set_target("x86-64-v3");
  auto compiled = Compile(client, r);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const kiln::v1::PackageManifest manifest = FetchManifest(client, compiled->package_digest());
  ASSERT_EQ(manifest.groups_size(), 2);
  for (int i = 0; i < 2; ++i) {
    for (const kiln::v1::ScheduleProvenance& p : {compiled->groups(i).provenance(), manifest.groups(i).provenance()}) {
      EXPECT_EQ(p.source(), kiln::v1::ScheduleProvenance::DEFAULT) << i;
      EXPECT_EQ(p.record_target(), compiled->target());
      EXPECT_EQ(p.record_keys_size(), 0);
      EXPECT_EQ(p.schedules_ranked(), 0);
    }
  }
}

}  // namespace
}  // namespace kiln
