// `kiln run`: load a package with the runtime, bind inputs from files, run,
// write outputs as .npy, optionally time repeated runs. A CUDA package runs
// on CUDA device 0 (loading it fails, saying why, without a GPU or driver).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/commands.h"
#include "client/json_output.h"
#include "client/runtime/absl_interop.h"
#include "client/runtime/package_reader.h"
#include "client/runtime/session.h"
#include "client/runtime/thread_pool.h"
#include "client/tensor_io.h"

namespace kiln::client {
namespace {

double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  double pos = q * static_cast<double>(v.size() - 1);
  size_t lo = static_cast<size_t>(pos);
  size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

// Where a run's time goes, by fusion group (a group may have several steps).
struct GroupTime {
  int group = -1;
  std::string kind;
  std::string nodes;  // the group's first model node, and how many more
  double ms = 0;      // per run
  double flops = 0, bytes = 0;  // the package's estimates, per run
};

std::vector<GroupTime> GroupTimes(const runtime::Session& s, const std::vector<double>& step_seconds, int runs) {
  const runtime::Manifest& m = s.package().manifest();
  std::vector<GroupTime> groups(m.groups.size());
  for (size_t g = 0; g < m.groups.size(); ++g) {
    const runtime::ManifestGroup& pg = m.groups[g];
    groups[g].group = static_cast<int>(g);
    groups[g].kind = pg.kind;
    if (!pg.nodes.empty()) groups[g].nodes = pg.nodes[0];
    if (pg.nodes.size() > 1) absl::StrAppend(&groups[g].nodes, " (+", pg.nodes.size() - 1, ")");
    groups[g].flops = pg.flops;
    groups[g].bytes = pg.bytes;
  }
  for (int i = 0; i < s.num_steps() && i < static_cast<int>(step_seconds.size()); ++i) {
    int g = s.step_group(i);
    if (g >= 0 && g < static_cast<int>(groups.size())) groups[g].ms += step_seconds[i] * 1e3 / runs;
  }
  std::stable_sort(groups.begin(), groups.end(), [](const GroupTime& a, const GroupTime& b) { return a.ms > b.ms; });
  return groups;
}

// Triad (a = b + s*c) bandwidth in GB/s over arrays far larger than the
// caches, on the pool's threads: what a memory-bound group can reach here.
double MeasureTriadGBs(runtime::ThreadPool& pool) {
  const int64_t n = int64_t{1} << 23;  // 32 MiB per array
  std::vector<float> a(n), b(n, 1.0f), c(n, 2.0f);
  auto triad = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) a[i] = b[i] + 3.0f * c[i];
  };
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    pool.ParallelFor(n / 4096, [&](int64_t b0, int64_t e0) { triad(b0 * 4096, e0 * 4096); });
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rep > 0 && s > 0) best = std::max(best, 3.0 * 4.0 * static_cast<double>(n) / s / 1e9);
  }
  return best;
}

// Per group: time, share, achieved GFLOP/s and GB/s (from the package's
// estimates), and the GB/s as a share of the triad bandwidth measured now
// (a GPU run has none: triad_gbs 0, and its column stays empty).
void PrintProfile(const std::vector<GroupTime>& groups, int top, double triad_gbs) {
  double total = 0;
  for (const GroupTime& g : groups) total += g.ms;
  std::printf("%-6s %-14s %9s %6s %8s %8s %6s  %s\n", "group", "kind", "ms/run", "share", "GFLOP/s", "GB/s",
              "triad", "nodes");
  for (size_t i = 0; i < groups.size() && i < static_cast<size_t>(top); ++i) {
    const GroupTime& g = groups[i];
    const double s = g.ms / 1e3;
    const double gflops = s > 0 ? g.flops / s / 1e9 : 0, gbs = s > 0 ? g.bytes / s / 1e9 : 0;
    const std::string triad = triad_gbs > 0 ? absl::StrFormat("%5.0f%%", 100.0 * gbs / triad_gbs) : "     -";
    std::printf("%-6d %-14s %9.3f %5.1f%% %8.1f %8.1f %s  %s\n", g.group, g.kind.c_str(), g.ms,
                total > 0 ? 100.0 * g.ms / total : 0.0, gflops, gbs, triad.c_str(), g.nodes.c_str());
  }
  if (triad_gbs > 0) {
    std::printf("%-6s %-14s %9.3f %5.1f%%  %zu groups; triad %.1f GB/s on this pool\n", "all", "", total, 100.0,
                groups.size(), triad_gbs);
  } else {
    std::printf("%-6s %-14s %9.3f %5.1f%%  %zu groups; device time from CUDA events\n", "all", "", total, 100.0,
                groups.size());
  }
}

}  // namespace

int RunRun(const RunOptions& o) {
  auto package = runtime::Package::Load(o.package);
  if (!package.ok()) return ReportError("run", runtime::ToAbsl(package.status()));
  std::shared_ptr<const runtime::Package> pkg(std::move(*package));
  runtime::ThreadPool pool(o.threads);  // 0: every hardware thread
  auto session = runtime::Session::Create(pkg, &pool);
  if (!session.ok()) return ReportError("run", runtime::ToAbsl(session.status()));
  runtime::Session& s = **session;
  s.set_flush_denormals(!o.keep_denormals);

  auto inputs = ReadInputFlags(o.inputs);
  if (!inputs.ok()) return ReportError("run", inputs.status());
  for (const auto& [name, value] : *inputs) {
    const Tensor* tensor = &value;
    int index = -1;
    for (int i = 0; i < s.num_inputs(); ++i) {
      if (s.input_info(i).name == name) index = i;
    }
    if (index < 0) {
      return ReportError("run", absl::InvalidArgumentError(
                                    absl::StrCat("package has no input '", name, "'")));
    }
    const auto& info = s.input_info(index);
    const std::vector<int64_t>& want = info.dims;
    if (static_cast<int>(tensor->dtype()) != static_cast<int>(info.dtype) || tensor->dims() != want) {
      return ReportError("run", absl::InvalidArgumentError(absl::StrCat(
                                    "input '", name, "' is ", tensor->DebugString(0),
                                    "; the package expects ", DTypeName(static_cast<DType>(info.dtype)),
                                    "[", absl::StrJoin(want, ","), "]")));
    }
    if (runtime::Status st = s.SetInput(name, tensor->raw(), tensor->size_bytes()); !st.ok()) {
      return ReportError("run", runtime::ToAbsl(st));
    }
  }

  if (runtime::Status st = s.Run(); !st.ok()) return ReportError("run", runtime::ToAbsl(st));
  std::vector<double> times_ms;
  std::vector<double> step_seconds;
  std::vector<double>* profile = o.profile > 0 ? &step_seconds : nullptr;
  const int runs = o.profile > 0 ? std::max(o.repeat, 1) : o.repeat;
  for (int i = 0; i < runs; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    if (runtime::Status st = s.Run(profile); !st.ok()) return ReportError("run", runtime::ToAbsl(st));
    times_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::vector<GroupTime> groups;
  if (profile != nullptr) groups = GroupTimes(s, step_seconds, runs);

  if (!o.output_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.output_dir, ec);
    for (int i = 0; i < s.num_outputs(); ++i) {
      const auto& info = s.output_info(i);
      Tensor t = Tensor::FromBytes(
          static_cast<DType>(info.dtype), info.dims,
          std::string_view(static_cast<const char*>(s.OutputData(i)), s.OutputBytes(i)));
      std::string path = absl::StrCat(o.output_dir, "/", FileNameFor(info.name), ".npy");
      if (absl::Status st = WriteNpy(path, t); !st.ok()) return ReportError("run", st);
    }
  }
  if (o.json || !times_ms.empty()) {
    JsonObject json;
    json.Add("package", pkg->digest());
    if (s.on_cuda()) {
      json.Add("device", s.device());
    } else {
      json.Add("threads", pool.num_threads()).Add("denormals", s.flush_denormals() ? "flush" : "keep");
    }
    json.Add("repeat", static_cast<int64_t>(times_ms.size()))
        .Add("arena_bytes", s.on_cuda() ? pkg->manifest().cuda.arena_bytes : pkg->manifest().arena_bytes);
    if (!times_ms.empty()) {
      json.Add("median_ms", Percentile(times_ms, 0.5))
          .Add("p10_ms", Percentile(times_ms, 0.1))
          .Add("p90_ms", Percentile(times_ms, 0.9));
    }
    if (profile != nullptr) {
      std::string list = "[";
      for (size_t i = 0; i < groups.size() && i < static_cast<size_t>(o.profile); ++i) {
        const GroupTime& g = groups[i];
        JsonObject entry;
        entry.Add("group", g.group).Add("kind", g.kind).Add("ms", g.ms).Add("flops", g.flops).Add("bytes", g.bytes);
        absl::StrAppend(&list, i > 0 ? "," : "", entry.Add("nodes", g.nodes).str());
      }
      json.AddRaw("profile", list + "]");
    }
    std::printf("%s\n", json.str().c_str());
    if (profile != nullptr && !o.json) PrintProfile(groups, o.profile, s.on_cuda() ? 0.0 : MeasureTriadGBs(pool));
  } else if (o.output_dir.empty()) {
    for (int i = 0; i < s.num_outputs(); ++i) {
      std::printf("output %s: %zu bytes\n", s.output_info(i).name.c_str(), s.OutputBytes(i));
    }
  }
  return 0;
}

}  // namespace kiln::client
