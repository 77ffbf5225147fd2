// Load benchmark (issue 17, "proof under load"): one kiln-server and two
// kiln-workers, real processes on 127.0.0.1 serving TLS with a bearer token
// per client, and N concurrent clients, each on its own connection and with
// its own identity (so each has its own per-client limits). Each client
// loops: think (exponential, mean --think-ms), then one request drawn from the
// mix (per mille):
//   lookup  a Lookup of a key compiled during warm-up (must be found, same digest)
//   hit     a compile of such a key: the compile cache answers (same digest)
//   miss    a compile of a key never seen (a new batch size of the example MLP:
//           imported, tuned --trials per workload on the workers, packaged)
// Printed: per kind the count, errors by code (RESOURCE_EXHAUSTED, a limit's
// refusal, apart) and client-side latency percentiles; the server's and
// workers' RSS sampled every second (after warm-up, the largest, the last).
// Usage: kiln_bench_load [--clients 100] [--seconds 600] [--think-ms 200]
//          [--mix 600:399:1] [--keys 16] [--trials 2] [--dir D]
//          [--search random|evolutionary] [--server-cpus LIST] [--worker-cpus LIST] [--client-cpus LIST] [--worker-nice
//          N]
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_split.h"
#include "base/digest.h"
#include "client/channel_credentials.h"
#include "client/example_models.h"
#include "client/kiln_client.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

extern "C" char** environ;

pid_t Spawn(const std::vector<std::string>& argv, const fs::path& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream f(path);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// VmRSS of a process in MiB (0 when gone).
double RssMib(pid_t pid) {
  std::istringstream status(ReadFile("/proc/" + std::to_string(pid) + "/status"));
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atof(line.c_str() + 6) / 1024.0;
  }
  return 0;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

enum Kind { kLookup, kHit, kMiss, kKinds };
const char* const kKindNames[kKinds] = {"lookup", "hit compile", "miss compile"};

// What one client saw, merged at the end.
struct Tally {
  std::vector<double> ms[kKinds];
  std::map<std::string, int64_t> errors[kKinds];  // code or "wrong answer" -> count
  int64_t refused[kKinds] = {0, 0, 0};            // RESOURCE_EXHAUSTED: a limit said no
  void Merge(const Tally& o) {
    for (int k = 0; k < kKinds; ++k) {
      ms[k].insert(ms[k].end(), o.ms[k].begin(), o.ms[k].end());
      for (const auto& [what, n] : o.errors[k]) errors[k][what] += n;
      refused[k] += o.refused[k];
    }
  }
};

struct RssTrack {
  double first = 0, max = 0, last = 0;
  void Add(double mib) {
    if (first == 0) first = mib;
    max = std::max(max, mib);
    last = mib;
  }
};

}  // namespace

int main(int argc, char** argv) {
  int clients = 100, seconds = 600, keys = 16, trials = 2;
  double think_ms = 200;
  int mix[kKinds] = {600, 399, 1};
  fs::path dir = fs::temp_directory_path() / ("kiln_bench_load_" + std::to_string(getpid()));
  // CPU placement (taskset lists, "" for anywhere) and the workers' nice level:
  // on a small machine, where clients, server and workers share the cores a
  // farm would spread over hosts.
  std::string server_cpus, worker_cpus, client_cpus, search;
  int worker_nice = 0;
  std::string mix_text = "600:399:1";
  std::string dir_text = dir.string();
  CLI::App app{
      "kiln_bench_load: N TLS clients mixing lookups, cache-hit and miss compiles against one "
      "kiln-server and two kiln-workers"};
  app.add_option("--clients", clients, "concurrent clients, a token each")->check(CLI::Range(1, 1000000));
  app.add_option("--seconds", seconds, "measured seconds")->check(CLI::Range(1, 1000000));
  app.add_option("--think-ms", think_ms, "a client's pause between calls")->check(CLI::Range(0.0, 1e6));
  app.add_option("--mix", mix_text, "lookup:hit:miss weights");
  app.add_option("--keys", keys, "distinct compile keys the hits and lookups use")->check(CLI::Range(1, 1000000));
  app.add_option("--trials", trials, "trials per group of a miss compile")->check(CLI::Range(1, 1000000));
  app.add_option("--search", search, "search strategy of the misses (server default when empty)");
  app.add_option("--server-cpus", server_cpus, "taskset CPU list of the server");
  app.add_option("--worker-cpus", worker_cpus, "taskset CPU list of the workers");
  app.add_option("--client-cpus", client_cpus, "taskset CPU list of this process's clients");
  app.add_option("--worker-nice", worker_nice, "nice level of the workers");
  app.add_option("--dir", dir_text, "scratch folder (certificates, database, logs)");
  CLI11_PARSE(app, argc, argv);
  dir = dir_text;
  if (std::sscanf(mix_text.c_str(), "%d:%d:%d", &mix[0], &mix[1], &mix[2]) != 3 || mix[0] < 0 || mix[1] < 0 ||
      mix[2] < 0 || mix[0] + mix[1] + mix[2] <= 0) {
    std::fprintf(stderr, "--mix: '%s' is not L:H:M weights, not all 0\n", mix_text.c_str());
    return 2;
  }
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string d = dir.string();

  // A CA, the server's certificate for 127.0.0.1, a token per client and worker.
  const std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes ";
  std::ofstream(dir / "san.ext") << "subjectAltName=IP:127.0.0.1\n";
  const std::string openssl = "cd " + d + " && (openssl req -x509" + ec + "-keyout ca.key -out ca.pem -days 2" +
                              " -subj /CN=kiln-bench-ca && openssl req" + ec +
                              "-keyout server.key -out server.csr -subj /CN=kiln-server && openssl x509 -req" +
                              " -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2" +
                              " -extfile san.ext) > openssl.log 2>&1";
  if (std::system(openssl.c_str()) != 0) {
    std::fprintf(stderr, "openssl failed: %s\n", ReadFile(dir / "openssl.log").c_str());
    return 1;
  }
  {
    std::ofstream auth(dir / "auth.txt");
    for (int c = 0; c < clients; ++c) {
      const std::string token = "client-token-" + std::to_string(c);
      std::ofstream(dir / ("client" + std::to_string(c) + ".token")) << token;
      auth << "client client-" << c << " sha256:" << kiln::Sha256Hex(token) << "\n";
    }
    for (int w = 0; w < 2; ++w) {
      const std::string token = "worker-token-" + std::to_string(w);
      std::ofstream(dir / ("worker" + std::to_string(w) + ".token")) << token;
      auth << "worker worker-" << w << " sha256:" << kiln::Sha256Hex(token) << "\n";
    }
  }

  // Every client's credentials, before any process starts.
  auto security_of = [&](int c) {
    kiln::client::ChannelSecurity security;
    security.tls_ca = d + "/ca.pem";
    security.token_file = d + "/client" + std::to_string(c) + ".token";
    return security;
  };
  for (int c = 0; c < clients; ++c) {
    if (auto creds = kiln::client::MakeChannelCredentials(security_of(c)); !creds.ok()) {
      std::fprintf(stderr, "credentials of client %d: %s\n", c, std::string(creds.status().message()).c_str());
      return 1;
    }
  }

  // A command run on `cpus` (taskset) at `nice`.
  auto placed = [](const std::string& cpus, int nice, std::vector<std::string> argv) {
    if (nice != 0) argv.insert(argv.begin(), {"/usr/bin/nice", "-n", std::to_string(nice)});
    if (!cpus.empty()) argv.insert(argv.begin(), {"/usr/bin/taskset", "-c", cpus});
    return argv;
  };
  if (!client_cpus.empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (absl::string_view cpu : absl::StrSplit(client_cpus, ',')) CPU_SET(std::atoi(std::string(cpu).c_str()), &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) {
      std::fprintf(stderr, "--client-cpus %s: %s\n", client_cpus.c_str(), std::strerror(errno));
      return 2;
    }
  }
  const std::string bin = KILN_BINARY_DIR;
  const pid_t server = Spawn(placed(server_cpus, 0,
                                    {bin + "/server/kiln-server", "--listen", "127.0.0.1:0", "--db", d + "/tuning.db",
                                     "--port-file", d + "/port", "--tls-cert", d + "/server.pem", "--tls-key",
                                     d + "/server.key", "--auth-file", d + "/auth.txt"}),
                             dir / "server.log");
  int port = 0;
  for (int i = 0; i < 300 && port == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    port = std::atoi(ReadFile(dir / "port").c_str());
  }
  if (server < 0 || port == 0) {
    std::fprintf(stderr, "the server did not start: %s\n", ReadFile(dir / "server.log").c_str());
    return 1;
  }
  const std::string address = "127.0.0.1:" + std::to_string(port);
  std::vector<pid_t> workers;
  for (int w = 0; w < 2; ++w) {
    workers.push_back(
        Spawn(placed(worker_cpus, worker_nice,
                     {bin + "/worker/kiln-worker", "--server", address, "--tls-ca", d + "/ca.pem", "--token-file",
                      d + "/worker" + std::to_string(w) + ".token", "--name", "bench-" + std::to_string(w)}),
              dir / ("worker" + std::to_string(w) + ".log")));
  }
  auto stop_all = [&] {
    for (pid_t w : workers) kill(w, SIGTERM);
    kill(server, SIGTERM);
    for (pid_t w : workers) waitpid(w, nullptr, 0);
    waitpid(server, nullptr, 0);
  };

  auto model = kiln::client::MakeExampleModel("mlp");
  if (!model.ok()) return 1;
  auto request_for = [&](int64_t batch) {
    kiln::v1::CompileRequest r;
    r.set_onnx_model(model->onnx_bytes);
    r.set_target("cpu");
    r.set_trials_per_group(trials);
    r.set_model_name("mlp");
    r.set_search(search);
    auto* b = r.add_shapes();
    b->set_input("x");
    b->add_dims(batch);
    b->add_dims(64);
    return r;
  };
  // A client's own connection (a channel argument of its own keeps gRPC
  // from sharing one between clients).
  auto client_for = [&](int c) {
    grpc::ChannelArguments args;
    args.SetInt("kiln.bench_client", c);
    args.SetMaxReceiveMessageSize(-1);
    return std::make_unique<kiln::client::KilnClient>(
        grpc::CreateCustomChannel(address, *kiln::client::MakeChannelCredentials(security_of(c)), args));
  };
  auto no_progress = [](const kiln::v1::Progress&) {};

  // Warm-up: each key tuned, then compiled once more (a compile that tuned is
  // not cached; the next one is), by a few clients at once.
  const auto warm_start = Clock::now();
  std::vector<std::string> digest_of(keys);
  {
    std::atomic<int> next{0};
    std::atomic<bool> failed{false};
    std::vector<std::thread> warmers;
    for (int t = 0; t < 4; ++t) {
      warmers.emplace_back([&, t] {
        auto client = client_for(t % clients);
        for (int k = next++; k < keys; k = next++) {
          for (int pass = 0; pass < 2; ++pass) {
            auto r = client->Compile(request_for(k + 1), no_progress);
            if (!r.ok()) {
              std::fprintf(stderr, "warm-up compile of key %d: %s\n", k, std::string(r.status().message()).c_str());
              failed = true;
              return;
            }
            digest_of[k] = r->package_digest();
          }
        }
      });
    }
    for (std::thread& t : warmers) t.join();
    if (failed) {
      stop_all();
      return 1;
    }
  }
  std::printf(
      "kiln_bench_load: %d clients (TLS, a token each), think %.0f ms mean, mix lookup:hit:miss = %d:%d:%d "
      "per mille, %d keys, %d trials per workload on a miss, %d s; warm-up %.1f s\n",
      clients, think_ms, mix[0], mix[1], mix[2], keys, trials, seconds,
      std::chrono::duration<double>(Clock::now() - warm_start).count());
  std::fflush(stdout);

  // The run.
  std::atomic<bool> stop{false};
  std::atomic<int64_t> next_miss{1000};
  RssTrack server_rss, worker_rss;
  std::thread sampler([&] {
    while (!stop) {
      server_rss.Add(RssMib(server));
      double w = 0;
      for (pid_t p : workers) w = std::max(w, RssMib(p));
      worker_rss.Add(w);
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  });
  std::vector<Tally> tallies(clients);
  std::vector<std::thread> threads;
  const auto end = Clock::now() + std::chrono::seconds(seconds);
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      auto client = client_for(c);
      std::mt19937_64 rng(static_cast<uint64_t>(c) * 7919 + 1);
      std::exponential_distribution<double> think(1.0 / think_ms);
      std::uniform_int_distribution<int> per_mille(0, mix[0] + mix[1] + mix[2] - 1);
      std::uniform_int_distribution<int> key(0, keys - 1);
      Tally& tally = tallies[c];
      while (true) {
        const auto wake = Clock::now() + std::chrono::microseconds(static_cast<int64_t>(think(rng) * 1000));
        if (wake >= end) break;
        std::this_thread::sleep_until(wake);
        const int draw = per_mille(rng);
        const Kind kind = draw < mix[0] ? kLookup : draw < mix[0] + mix[1] ? kHit : kMiss;
        const int k = key(rng);
        absl::Status status;
        bool right = true;
        const auto t0 = Clock::now();
        if (kind == kLookup) {
          kiln::v1::LookupRequest lookup;
          const kiln::v1::CompileRequest r = request_for(k + 1);
          lookup.set_onnx_model(r.onnx_model());
          *lookup.mutable_shapes() = r.shapes();
          lookup.set_target("cpu");
          auto found = client->Lookup(lookup);
          status = found.status();
          right = !found.ok() || (found->found() && found->package_digest() == digest_of[k]);
        } else {
          auto r = client->Compile(request_for(kind == kHit ? k + 1 : next_miss++), no_progress);
          status = r.status();
          right = !r.ok() || kind == kMiss || r->package_digest() == digest_of[k];
        }
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        if (status.code() == absl::StatusCode::kResourceExhausted) {
          ++tally.refused[kind];
        } else if (!status.ok()) {
          ++tally.errors[kind][absl::StatusCodeToString(status.code())];
        } else if (!right) {
          ++tally.errors[kind]["wrong answer"];
        } else {
          tally.ms[kind].push_back(ms);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  stop = true;
  sampler.join();

  Tally all;
  for (const Tally& t : tallies) all.Merge(t);
  std::printf("%-13s %9s %8s %8s %9s %9s %9s %9s %9s  %s\n", "kind", "ok", "req/s", "refused", "p50 ms", "p90 ms",
              "p99 ms", "p99.9 ms", "max ms", "errors");
  for (int k = 0; k < kKinds; ++k) {
    std::string errors;
    for (const auto& [what, n] : all.errors[k]) errors += what + " x" + std::to_string(n) + " ";
    const std::vector<double>& v = all.ms[k];
    std::printf("%-13s %9zu %8.1f %8lld %9.3f %9.3f %9.3f %9.3f %9.3f  %s\n", kKindNames[k], v.size(),
                static_cast<double>(v.size()) / seconds, static_cast<long long>(all.refused[k]), Percentile(v, 0.5),
                Percentile(v, 0.9), Percentile(v, 0.99), Percentile(v, 0.999),
                v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()), errors.empty() ? "none" : errors.c_str());
  }
  std::printf("RSS MiB: server %.1f after warm-up, %.1f max, %.1f last; workers (larger) %.1f, %.1f, %.1f\n",
              server_rss.first, server_rss.max, server_rss.last, worker_rss.first, worker_rss.max, worker_rss.last);
  stop_all();
  fs::remove_all(dir);
  return 0;
}
