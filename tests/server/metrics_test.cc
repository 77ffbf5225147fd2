// The server's Prometheus metrics as an operator scrapes them: a real farm
// compiles (tuned, then from the database), looks up and fetches, and the
// families read over HTTP from /metrics say so; the broker counts lost leases
// and abandoned tasks and its queues are sampled at scrape time.
#include "server/metrics.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <prometheus/text_serializer.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "client/kiln_client.h"
#include "server/embedded_farm.h"
#include "server/task_broker.h"
#include "tests/server/test_farm.h"

namespace kiln {
namespace {

using std::chrono::milliseconds;

// One sample of the text exposition format: name, labels, value.
struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// The samples and "# TYPE" lines of a text exposition.
struct Exposition {
  std::vector<Sample> samples;
  std::map<std::string, std::string> types;  // family -> counter, gauge, histogram

  // The sum of the samples of `name` whose labels include `labels`; -1 when none matches.
  double Sum(const std::string& name, const std::map<std::string, std::string>& labels = {}) const {
    double sum = 0;
    bool any = false;
    for (const Sample& s : samples) {
      if (s.name != name) continue;
      bool match = true;
      for (const auto& [k, v] : labels) {
        auto it = s.labels.find(k);
        match = match && it != s.labels.end() && it->second == v;
      }
      if (!match) continue;
      sum += s.value;
      any = true;
    }
    return any ? sum : -1;
  }
};

Exposition Parse(const std::string& text) {
  Exposition out;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream words(line.substr(7));
      std::string name, type;
      words >> name >> type;
      out.types[name] = type;
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    Sample s;
    size_t i = line.find_first_of("{ ");
    if (i == std::string::npos) continue;
    s.name = line.substr(0, i);
    if (line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        const size_t eq = line.find('=', i);
        if (eq == std::string::npos || eq + 1 >= line.size() || line[eq + 1] != '"') break;
        const std::string key = line.substr(i, eq - i);
        std::string value;
        size_t j = eq + 2;
        for (; j < line.size() && line[j] != '"'; ++j) {
          if (line[j] == '\\' && j + 1 < line.size()) {
            ++j;
            value += line[j] == 'n' ? '\n' : line[j];
          } else {
            value += line[j];
          }
        }
        s.labels[key] = value;
        i = j + 1;
        if (i < line.size() && line[i] == ',') ++i;
      }
      ++i;  // '}'
    }
    s.value = std::strtod(line.c_str() + i, nullptr);
    out.samples.push_back(std::move(s));
  }
  return out;
}

// GET http://127.0.0.1:port/metrics: the body; "" on failure.
std::string ScrapeOverHttp(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string request = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buf[4096];
      ssize_t n;
      while ((n = read(fd, buf, sizeof(buf))) > 0) response.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  if (response.rfind("HTTP/1.1 200", 0) != 0 && response.rfind("HTTP/1.0 200", 0) != 0) return "";
  const size_t body = response.find("\r\n\r\n");
  return body == std::string::npos ? "" : response.substr(body + 4);
}

TEST(ServerMetricsTest, AScrapeShowsCompilesMeasurementsQueuesAndStorage) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / ("kiln_metrics_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  server::EmbeddedFarm::Options options;
  options.server.db_path = (dir / "tuning.db").string();
  options.server.metrics_address = "127.0.0.1:0";
  options.server.worker_wait = milliseconds(20000);
  options.isolate = false;
  options.worker_name = "metrics-worker";
  auto farm = server::EmbeddedFarm::Start(options);
  ASSERT_TRUE(farm.ok()) << farm.status();
  const int port = (*farm)->server().metrics_port();
  ASSERT_GT(port, 0);

  client::KilnClient client((*farm)->address());
  auto tuned = client.Compile(testing::MlpRequest(2), [](const kiln::v1::Progress&) {});
  ASSERT_TRUE(tuned.ok()) << tuned.status();
  ASSERT_GT(tuned->trials_measured(), 0);
  auto cached = client.Compile(testing::MlpRequest(2), [](const kiln::v1::Progress&) {});
  ASSERT_TRUE(cached.ok()) << cached.status();
  ASSERT_EQ(cached->trials_measured(), 0);
  auto bytes = client.FetchArtifact(tuned->package_digest());
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  kiln::v1::LookupRequest lookup;
  lookup.set_onnx_model(testing::MlpRequest(0).onnx_model());
  lookup.set_target("cpu");
  *lookup.mutable_shapes() = testing::MlpRequest(0).shapes();
  auto found = client.Lookup(lookup);
  ASSERT_TRUE(found.ok() && found->found()) << found.status();
  lookup.mutable_shapes(0)->set_dims(0, 9);
  auto missing = client.Lookup(lookup);
  ASSERT_TRUE(missing.ok() && !missing->found()) << missing.status();

  const std::string text = ScrapeOverHttp(port);
  ASSERT_FALSE(text.empty());
  const Exposition m = Parse(text);
  SCOPED_TRACE(text);

  const std::map<std::string, std::string> families = {
      {"kiln_compiles_total", "counter"},
      {"kiln_trials_measured_total", "counter"},
      {"kiln_compile_duration_seconds", "histogram"},
      {"kiln_compile_cache_requests_total", "counter"},
      {"kiln_lookups_total", "counter"},
      {"kiln_artifacts_fetched_total", "counter"},
      {"kiln_task_results_total", "counter"},
      {"kiln_tasks_submitted_total", "counter"},
      {"kiln_measurements_total", "counter"},
      {"kiln_lease_duration_seconds", "histogram"},
      {"kiln_leases_lost_total", "counter"},
      {"kiln_tasks_abandoned_total", "counter"},
      {"kiln_db_write_transaction_seconds", "histogram"},
      {"kiln_build_info", "gauge"},
      {"kiln_task_queue_depth", "gauge"},
      {"kiln_tasks_leased", "gauge"},
      {"kiln_oldest_queued_task_age_seconds", "gauge"},
      {"kiln_oldest_lease_age_seconds", "gauge"},
      {"kiln_workers", "gauge"},
      {"kiln_worker_heartbeat_age_seconds", "gauge"},
      {"kiln_db_size_bytes", "gauge"},
      {"kiln_artifact_store_bytes", "gauge"},
      {"kiln_artifact_store_files", "gauge"},
      {"kiln_db_filesystem_free_bytes", "gauge"},
      {"kiln_db_filesystem_size_bytes", "gauge"},
  };
  for (const auto& [name, type] : families) {
    auto it = m.types.find(name);
    ASSERT_NE(it, m.types.end()) << name;
    EXPECT_EQ(it->second, type) << name;
  }

  // Compiles: one tuned, one answered from the database (a cache hit).
  EXPECT_EQ(m.Sum("kiln_compiles_total", {{"outcome", "ok"}}), 2);
  EXPECT_EQ(m.Sum("kiln_compiles_total", {{"outcome", "error"}}), 0);
  EXPECT_EQ(m.Sum("kiln_trials_measured_total"), tuned->trials_measured());
  EXPECT_EQ(m.Sum("kiln_compile_duration_seconds_count", {{"result", "tuned"}}), 1);
  EXPECT_EQ(m.Sum("kiln_compile_duration_seconds_count", {{"result", "hit"}}), 1);
  EXPECT_EQ(m.Sum("kiln_compile_duration_seconds_bucket", {{"result", "hit"}, {"le", "+Inf"}}), 1);
  EXPECT_EQ(m.Sum("kiln_compile_cache_requests_total", {{"result", "hit"}}), 1);
  EXPECT_EQ(m.Sum("kiln_compile_cache_requests_total", {{"result", "miss"}}), 1);
  EXPECT_EQ(m.Sum("kiln_lookups_total", {{"result", "hit"}}), 1);
  EXPECT_EQ(m.Sum("kiln_lookups_total", {{"result", "miss"}}), 1);
  EXPECT_EQ(m.Sum("kiln_artifacts_fetched_total"), 1);

  // Measurements: every trial of the tuned compile came from our worker
  // (re-measurements of the leaders come on top).
  const double measured = m.Sum("kiln_measurements_total", {{"worker", "metrics-worker"}});
  EXPECT_GE(measured, tuned->trials_measured());
  EXPECT_EQ(m.Sum("kiln_task_results_total"), measured);
  EXPECT_EQ(m.Sum("kiln_lease_duration_seconds_count"), measured);
  EXPECT_GE(m.Sum("kiln_tasks_submitted_total"), measured);
  EXPECT_EQ(m.Sum("kiln_leases_lost_total"), 0);
  EXPECT_EQ(m.Sum("kiln_tasks_abandoned_total"), 0);
  for (const Sample& s : m.samples) {
    if (s.name != "kiln_measurements_total") continue;
    EXPECT_FALSE(s.labels.at("device").empty());
    EXPECT_NE(s.labels.at("result"), "");
  }

  // The farm now: one worker, nothing queued or leased.
  EXPECT_EQ(m.Sum("kiln_workers"), 1);
  EXPECT_GE(m.Sum("kiln_worker_heartbeat_age_seconds", {{"worker", "metrics-worker"}}), 0);
  EXPECT_EQ(m.Sum("kiln_task_queue_depth"), 0);
  EXPECT_EQ(m.Sum("kiln_tasks_leased"), 0);

  // Storage: the database and its log, the package in the artifact store,
  // and the writes that put them there.
  EXPECT_GT(m.Sum("kiln_db_size_bytes", {{"file", "db"}}), 0);
  EXPECT_GE(m.Sum("kiln_db_size_bytes", {{"file", "wal"}}), 0);
  EXPECT_GE(m.Sum("kiln_artifact_store_bytes"), tuned->package_size());
  EXPECT_GE(m.Sum("kiln_artifact_store_files"), 1);
  EXPECT_GT(m.Sum("kiln_db_filesystem_free_bytes"), 0);
  EXPECT_GT(m.Sum("kiln_db_write_transaction_seconds_count"), 0);
  EXPECT_EQ(m.Sum("kiln_build_info"), 1);

  farm->reset();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

// The registry's families and the farm collector's, as a scrape would see them.
Exposition Collect(server::ServerMetrics& metrics, const server::TaskBroker& broker) {
  std::vector<prometheus::MetricFamily> families = metrics.registry()->Collect();
  const server::ServerMetrics::Collector farm = server::FarmCollector(&broker);
  for (auto& f : farm()) families.push_back(std::move(f));
  return Parse(prometheus::TextSerializer().Serialize(families));
}

TEST(ServerMetricsTest, TheBrokerCountsLostLeasesAndAbandonedTasks) {
  server::ServerMetrics metrics;
  server::TaskBroker::Options options;
  options.worker_timeout = milliseconds(300);
  options.max_attempts = 1;
  server::TaskBroker broker(options, &metrics);
  kiln::v1::DeviceInfo device;
  device.set_device_model("Test CPU");
  const std::string worker = broker.RegisterWorker("cpu/a", "host-1", device);
  kiln::v1::MeasureTask task;
  task.set_workload_key("wk");
  task.set_schedule_config("x=1");
  auto outcome = broker.Submit("cpu/a", task);

  Exposition m = Collect(metrics, broker);
  EXPECT_EQ(m.Sum("kiln_tasks_submitted_total"), 1);
  EXPECT_EQ(m.Sum("kiln_task_queue_depth", {{"target", "cpu/a"}}), 1);
  EXPECT_EQ(m.Sum("kiln_tasks_leased", {{"target", "cpu/a"}}), 0);
  EXPECT_EQ(m.Sum("kiln_workers", {{"target", "cpu/a"}, {"device", "Test CPU"}}), 1);

  ASSERT_EQ(broker.Lease(worker, 1, milliseconds(50)).size(), 1u);
  m = Collect(metrics, broker);
  EXPECT_EQ(m.Sum("kiln_task_queue_depth", {{"target", "cpu/a"}}), 0);
  EXPECT_EQ(m.Sum("kiln_tasks_leased", {{"target", "cpu/a"}}), 1);
  EXPECT_GE(m.Sum("kiln_oldest_lease_age_seconds", {{"target", "cpu/a"}}), 0);

  // The worker goes silent: its lease is taken back, and with max_attempts 1
  // the task is given up as a timeout.
  ASSERT_EQ(outcome.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_EQ(outcome.get().result.error(), kiln::v1::TIMEOUT);
  m = Collect(metrics, broker);
  EXPECT_EQ(m.Sum("kiln_leases_lost_total", {{"reason", "worker_silent"}}), 1);
  EXPECT_EQ(m.Sum("kiln_leases_lost_total", {{"reason", "deadline"}}), 0);
  EXPECT_EQ(m.Sum("kiln_tasks_abandoned_total"), 1);
  EXPECT_EQ(m.Sum("kiln_tasks_leased", {{"target", "cpu/a"}}), 0);
  EXPECT_EQ(m.Sum("kiln_workers"), -1);  // no worker: no series

  // A result from a live worker is counted under its name, device and result.
  const std::string other = broker.RegisterWorker("cpu/a", "host-2", device);
  task.set_schedule_config("x=2");
  auto second = broker.Submit("cpu/a", task);
  auto leased = broker.Lease(other, 1, milliseconds(50));
  ASSERT_EQ(leased.size(), 1u);
  kiln::v1::MeasureResult result;
  result.set_task_id(leased[0].task_id());
  result.set_error(kiln::v1::WRONG_ANSWER);
  EXPECT_EQ(broker.Report(other, {result}).first, 1);
  m = Collect(metrics, broker);
  EXPECT_EQ(
      m.Sum("kiln_measurements_total", {{"worker", "host-2"}, {"device", "Test CPU"}, {"result", "wrong_answer"}}), 1);
  EXPECT_EQ(m.Sum("kiln_lease_duration_seconds_count"), 1);
}

}  // namespace
}  // namespace kiln
