// Tuning-database benchmark: record insert rate in batches, and TopK latency
// with 1,000,000 records across 10,000 workloads, on a real file in a temp
// directory. Targets (the tuning-db issue): >= 50,000 records/s, TopK p99 <= 1 ms.
// Usage: kiln_bench_tuning_db [--records N] [--workloads N] [--batch N] [--queries N]
//                             [--order by-workload|round-robin] [--dir D]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "tuning_db/tuning_db.h"

namespace {

using Clock = std::chrono::steady_clock;

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  return v[i];
}

}  // namespace

int main(int argc, char** argv) {
  using namespace kiln::tuningdb;
  int64_t records = 1000000;
  int workloads = 10000;
  int batch = 1000;
  int queries = 20000;
  // by-workload: each workload's records arrive together, as a tuning job
  // writes them; round-robin: every record of a batch hits another workload.
  std::string order = "by-workload";
  std::string dir = std::filesystem::temp_directory_path().string();
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--records") records = std::atoll(argv[i + 1]);
    else if (flag == "--workloads") workloads = std::atoi(argv[i + 1]);
    else if (flag == "--batch") batch = std::atoi(argv[i + 1]);
    else if (flag == "--queries") queries = std::atoi(argv[i + 1]);
    else if (flag == "--dir") dir = argv[i + 1];
    else if (flag == "--order") order = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  std::string path = dir + "/kiln_tuning_db_bench_" + std::to_string(getpid()) + ".db";
  auto cleanup = [&] {
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
    std::filesystem::remove_all(path + ".artifacts");
  };
  cleanup();
  auto db = TuningDb::Open(path);
  if (!db.ok()) {
    std::fprintf(stderr, "%s\n", db.status().ToString().c_str());
    return 1;
  }
  const std::string target = "cpu/x86_64/znver4/0123456789abcdef";
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> ms(0.01, 10.0);
  for (int w = 0; w < workloads; ++w) {
    (void)(*db)->UpsertWorkload({"workload-" + std::to_string(w), "canonical", "matmul", "MatMul", 1e6, 1e5});
  }

  // Insert: records spread round-robin over the workloads, `batch` per transaction.
  std::vector<double> batch_seconds;
  int64_t inserted = 0;
  auto start = Clock::now();
  int64_t created = 1700000000000;
  while (inserted < records) {
    std::vector<Record> rs;
    int64_t n = std::min<int64_t>(batch, records - inserted);
    rs.reserve(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      int64_t id = inserted + i;
      Record r;
      int64_t per_workload = std::max<int64_t>(1, records / workloads);
      int64_t w = order == "round-robin" ? id % workloads : (id / per_workload) % workloads;
      r.workload_key = "workload-" + std::to_string(w);
      r.target_key = target;
      r.space_version = 1;
      r.compiler_version = "kiln-0.1.0";
      r.config = "tile_m=" + std::to_string(id % 64) + ";tile_n=" + std::to_string(id / 64 % 64) +
                 ";vec=8;unroll=" + std::to_string(id % 4);
      r.median_ms = ms(rng);
      r.p10_ms = r.median_ms * 0.97;
      r.p90_ms = r.median_ms * 1.04;
      r.repeats = 20;
      r.error = (id % 17 == 0) ? RecordError::kWrongAnswer : RecordError::kOk;
      r.worker_id = "worker-1";
      r.created_unix_ms = ++created;
      rs.push_back(std::move(r));
    }
    auto t0 = Clock::now();
    absl::Status s = (*db)->AddRecords(rs);
    batch_seconds.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
    inserted += n;
  }
  double insert_s = std::chrono::duration<double>(Clock::now() - start).count();

  // TopK: random workloads, k = 1 (the compile path) and k = 10.
  std::uniform_int_distribution<int> pick(0, workloads - 1);
  for (int k : {1, 10}) {
    std::vector<double> lat;
    lat.reserve(static_cast<size_t>(queries));
    for (int q = 0; q < queries; ++q) {
      std::string key = "workload-" + std::to_string(pick(rng));
      auto t0 = Clock::now();
      auto top = (*db)->TopK(key, target, 1, k);
      lat.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      if (!top.ok() || top->empty()) {
        std::fprintf(stderr, "top-k failed for %s\n", key.c_str());
        return 1;
      }
    }
    std::printf("topk k=%d queries=%d p50_ms=%.4f p99_ms=%.4f max_ms=%.4f\n", k, queries,
                Percentile(lat, 0.5), Percentile(lat, 0.99), Percentile(lat, 1.0));
  }
  std::printf("insert order=%s records=%lld workloads=%d batch=%d seconds=%.2f records_per_s=%.0f "
              "batch_p50_ms=%.2f batch_p99_ms=%.2f\n",
              order.c_str(), static_cast<long long>(inserted), workloads, batch, insert_s,
              static_cast<double>(inserted) / insert_s, Percentile(batch_seconds, 0.5) * 1e3,
              Percentile(batch_seconds, 0.99) * 1e3);
  std::printf("file_mb=%.1f\n", static_cast<double>(std::filesystem::file_size(path)) / 1e6);
  db->reset();
  cleanup();
  return 0;
}
