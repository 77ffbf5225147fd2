// Tests JSON-lines export/import: a round trip into an empty database answers
// every best-record query alike, and importing twice adds nothing.
#include <map>
#include <sstream>
#include <tuple>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/tuning_db/temp_db_dir.h"
#include "tuning_db/record_jsonl.h"
#include "tuning_db/tuning_db.h"

namespace kiln::tuningdb {
namespace {

using ::testing::HasSubstr;
using testing_util::TempDbDir;

std::unique_ptr<TuningDb> OpenOrDie(const std::string& path) {
  absl::StatusOr<std::unique_ptr<TuningDb>> db = TuningDb::Open(path);
  EXPECT_TRUE(db.ok()) << db.status();
  return db.ok() ? std::move(*db) : nullptr;
}

// 20 workloads x 3 targets x 2 space versions, some errors, odd numbers.
void Populate(TuningDb& db) {
  for (int t = 0; t < 3; ++t) {
    TargetInfo target{"cpu/t" + std::to_string(t), "cpu", "x86_64", "znver4", "+avx2,+fma",
                      "AMD EPYC \"9R14\"", "n/a", "llvm-19"};
    ASSERT_TRUE(db.UpsertTarget(target).ok());
  }
  std::vector<Record> records;
  for (int w = 0; w < 20; ++w) {
    if (w % 4 != 0) {  // some workloads have no row: records may come first
      ASSERT_TRUE(db.UpsertWorkload({"w" + std::to_string(w), "canonical\ntext " + std::to_string(w),
                                     "matmul", "MatMul+Relu", 1e9 / 3, 12345.5})
                      .ok());
    }
    for (int t = 0; t < 3; ++t) {
      for (int v = 1; v <= 2; ++v) {
        for (int i = 0; i < 5; ++i) {
          Record r;
          r.workload_key = "w" + std::to_string(w);
          r.target_key = "cpu/t" + std::to_string(t);
          r.space_version = v;
          r.compiler_version = "kiln-0.1.0";
          r.config = "tile=" + std::to_string(i) + ";unroll=\"2\"";
          r.median_ms = 0.1 + (w * 7 + t * 3 + i * 11 + v) % 17 / 3.0;
          r.p10_ms = r.median_ms * 0.95;
          r.p90_ms = r.median_ms * 1.07;
          r.repeats = 10 + i;
          r.error = (i == 3) ? RecordError::kWrongAnswer : RecordError::kOk;
          r.error_message = (i == 3) ? "max abs error 0.5 at [0, 1]" : "";
          r.worker_id = "worker-" + std::to_string(t);
          r.created_unix_ms = 1700000000000 + w * 100 + i;
          records.push_back(r);
        }
      }
    }
  }
  ASSERT_TRUE(db.AddRecords(records).ok());
}

std::string Export(TuningDb& db) {
  std::ostringstream out;
  absl::StatusOr<int64_t> n = ExportRecordsJsonl(db, out);
  EXPECT_TRUE(n.ok()) << n.status();
  return out.str();
}

TEST(JsonlTest, ExportImportReproducesEveryTopKAnswer) {
  TempDbDir dir;
  auto source = OpenOrDie(dir.Path("source.db"));
  ASSERT_NE(source, nullptr);
  Populate(*source);
  std::string jsonl = Export(*source);
  EXPECT_EQ(std::count(jsonl.begin(), jsonl.end(), '\n'), 20 * 3 * 2 * 5);

  auto copy = OpenOrDie(dir.Path("copy.db"));
  ASSERT_NE(copy, nullptr);
  std::istringstream in(jsonl);
  absl::StatusOr<ImportCounts> counts = ImportRecordsJsonl(*copy, in, "records.jsonl", 64);
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->records_added, 600);
  EXPECT_EQ(counts->records_present, 0);
  EXPECT_EQ(counts->targets_added, 3);
  EXPECT_EQ(counts->workloads_added, 20);

  for (int w = 0; w < 21; ++w) {
    for (int t = 0; t < 4; ++t) {
      for (int v = 0; v <= 3; ++v) {
        std::string wk = "w" + std::to_string(w), tk = "cpu/t" + std::to_string(t);
        auto a = source->TopK(wk, tk, v, 10);
        auto b = copy->TopK(wk, tk, v, 10);
        ASSERT_TRUE(a.ok() && b.ok());
        ASSERT_EQ(a->size(), b->size()) << wk << " " << tk << " " << v;
        for (size_t i = 0; i < a->size(); ++i) {
          EXPECT_EQ((*a)[i].config, (*b)[i].config);
          EXPECT_EQ((*a)[i].median_ms, (*b)[i].median_ms);  // exact: doubles round-trip
          EXPECT_EQ((*a)[i].p90_ms, (*b)[i].p90_ms);
          EXPECT_EQ((*a)[i].created_unix_ms, (*b)[i].created_unix_ms);
          EXPECT_EQ((*a)[i].worker_id, (*b)[i].worker_id);
          EXPECT_EQ(RecordKey((*a)[i]), RecordKey((*b)[i]));
        }
        EXPECT_EQ(*source->ExplainMiss(wk, tk, v), *copy->ExplainMiss(wk, tk, v));
      }
    }
  }
  auto target = copy->GetTarget("cpu/t1");
  ASSERT_TRUE(target.ok() && target->has_value());
  EXPECT_EQ((*target)->device_model, "AMD EPYC \"9R14\"");
  auto workload = copy->GetWorkload("w1");
  ASSERT_TRUE(workload.ok() && workload->has_value());
  EXPECT_EQ((*workload)->canonical_text, "canonical\ntext 1");
  EXPECT_EQ((*workload)->flops, 1e9 / 3);
  // The copy exports the same lines.
  EXPECT_EQ(Export(*copy), jsonl);
}

TEST(JsonlTest, ImportingTwiceAddsNothing) {
  TempDbDir dir;
  auto source = OpenOrDie(dir.Path("source.db"));
  ASSERT_NE(source, nullptr);
  Populate(*source);
  std::string jsonl = Export(*source);
  auto copy = OpenOrDie(dir.Path("copy.db"));
  for (int round = 0; round < 2; ++round) {
    std::istringstream in(jsonl);
    auto counts = ImportRecordsJsonl(*copy, in, "records.jsonl");
    ASSERT_TRUE(counts.ok()) << counts.status();
    EXPECT_EQ(counts->records_added, round == 0 ? 600 : 0);
    EXPECT_EQ(counts->records_present, round == 0 ? 0 : 600);
  }
  EXPECT_EQ(copy->GetStats()->records, 600);
  // Importing its own export into the source adds nothing either.
  std::istringstream in(jsonl);
  auto counts = ImportRecordsJsonl(*source, in, "records.jsonl");
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->records_added, 0);
  EXPECT_EQ(source->GetStats()->records, 600);
}

TEST(JsonlTest, BadLinesNameTheLine) {
  TempDbDir dir;
  auto db = OpenOrDie(dir.Path());
  RecordLine line;
  line.workload.key = line.record.workload_key = "w";
  line.target.key = line.record.target_key = "t";
  line.record.config = "c";
  line.record.median_ms = 1;
  line.record.created_unix_ms = 5;
  std::string good = RecordLineToJson(line);
  EXPECT_THAT(good, HasSubstr("\"error\":\"ok\""));
  struct Case {
    std::string text, message;
  } cases[] = {
      {"{not json", "bad JSON"},
      {R"({"workload":{"key":"w"},"target":{"key":"t"},"record":{"error":"slow"}})", "record.error"},
      {R"({"workload":{"key":"w"},"target":{"key":""},"record":{}})", "target.key is empty"},
      {R"({"workload":{"key":"w"},"target":{"key":"t"},"record":{"surprise":1}})", "bad JSON"},
      {R"({"workload":{"key":"w"},"target":{"key":"t"},"record":{"median_ms":-1,"created_unix_ms":"3"}})",
       "median_ms"},
  };
  for (const Case& c : cases) {
    std::istringstream in(good + "\n\n" + c.text + "\n");
    auto counts = ImportRecordsJsonl(*db, in, "f.jsonl", 1);
    ASSERT_FALSE(counts.ok()) << c.text;
    EXPECT_EQ(counts.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(counts.status().message()), HasSubstr("f.jsonl:3")) << c.text;
    EXPECT_THAT(std::string(counts.status().message()), HasSubstr(c.message)) << counts.status();
  }
  EXPECT_EQ(db->GetStats()->records, 1);  // the good line, once
}

}  // namespace
}  // namespace kiln::tuningdb
