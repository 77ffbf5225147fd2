// Whole packages timed against each other, runs interleaved.
#include "worker/package_timing.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/runtime/package_reader.h"
#include "client/runtime/session.h"
#include "client/runtime/thread_pool.h"
#include "worker/measurer.h"

namespace kiln::worker {
namespace {

kiln::v1::MeasureResult Failure(const kiln::v1::MeasureTask& task, std::string message) {
  kiln::v1::MeasureResult r;
  r.set_task_id(task.task_id());
  r.set_error(kiln::v1::RUNTIME_ERROR);
  r.set_error_message(std::move(message));
  return r;
}

// The bytes of one input: small deterministic values for f32 and f64, zeros
// for everything else (integer inputs are often indices, and zero is in
// range of every axis).
std::vector<uint8_t> InputBytes(const runtime::ManifestTensor& info, size_t bytes) {
  std::vector<uint8_t> data(bytes, 0);
  uint32_t state = 12345;
  auto next = [&state] {
    state = state * 1664525u + 1013904223u;
    return static_cast<double>(state >> 8) / 16777216.0 - 0.5;  // [-0.5, 0.5)
  };
  if (info.dtype == runtime::DataType::kFloat32) {
    auto* f = reinterpret_cast<float*>(data.data());
    for (size_t i = 0; i < bytes / sizeof(float); ++i) f[i] = static_cast<float>(next());
  } else if (info.dtype == runtime::DataType::kFloat64) {
    auto* d = reinterpret_cast<double*>(data.data());
    for (size_t i = 0; i < bytes / sizeof(double); ++i) d[i] = next();
  }
  return data;
}

}  // namespace

absl::StatusOr<kiln::v1::MeasureResult> TimePackages(const kiln::v1::MeasureTask& task,
                                                     const std::vector<std::string>& packages, int cuda_device) {
  if (packages.empty() || static_cast<int>(packages.size()) != task.packages_size()) {
    return absl::InvalidArgumentError(absl::StrCat("whole-model check with ", task.packages_size(),
                                                   " package digests and ", packages.size(), " packages"));
  }
  const MeasureSettings settings = MeasureSettings::FromProto(task.options());
  runtime::ThreadPool pool(std::max(1, task.threads()));

  std::vector<std::unique_ptr<runtime::Session>> sessions;
  for (size_t p = 0; p < packages.size(); ++p) {
    const std::string& digest = task.packages(static_cast<int>(p));
    auto package = runtime::Package::FromBytes(packages[p], digest);
    if (!package.ok()) return Failure(task, absl::StrCat("package ", digest, ": ", package.status().message()));
    runtime::CudaSessionOptions cuda;
    cuda.device = cuda_device;
    auto session =
        runtime::Session::Create(std::shared_ptr<const runtime::Package>(std::move(*package)), &pool, cuda);
    if (!session.ok()) return Failure(task, absl::StrCat("package ", digest, ": ", session.status().message()));
    runtime::Session& s = **session;
    for (int i = 0; i < s.num_inputs(); ++i) {
      const runtime::ManifestTensor& info = s.input_info(i);
      size_t bytes = static_cast<size_t>(runtime::DataTypeSize(info.dtype));
      for (int64_t d : info.dims) bytes *= static_cast<size_t>(std::max<int64_t>(d, 0));
      const std::vector<uint8_t> data = InputBytes(info, bytes);
      if (runtime::Status st = s.SetInput(info.name, data.data(), data.size()); !st.ok()) {
        return Failure(task, absl::StrCat("package ", digest, ": input ", info.name, ": ", st.message()));
      }
    }
    sessions.push_back(std::move(*session));
  }

  auto run = [&](size_t p) -> absl::Status {
    if (runtime::Status st = sessions[p]->Run(); !st.ok()) {
      return absl::InternalError(absl::StrCat("package ", task.packages(static_cast<int>(p)), ": ", st.message()));
    }
    return absl::OkStatus();
  };
  for (int w = 0; w < settings.warmup_runs; ++w) {
    for (size_t p = 0; p < sessions.size(); ++p) {
      if (absl::Status st = run(p); !st.ok()) return Failure(task, std::string(st.message()));
    }
  }

  // Rounds of one run per package, in turn, so that drift in the machine's
  // speed (another tenant, frequency) falls on every package alike.
  using Clock = std::chrono::steady_clock;
  std::vector<std::vector<double>> times(sessions.size());
  std::vector<double> total(sessions.size(), 0.0);
  const Clock::time_point loop_start = Clock::now();
  while (true) {
    for (size_t p = 0; p < sessions.size(); ++p) {
      const Clock::time_point t0 = Clock::now();
      if (absl::Status st = run(p); !st.ok()) return Failure(task, std::string(st.message()));
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      times[p].push_back(ms);
      total[p] += ms;
    }
    const int n = static_cast<int>(times[0].size());
    if (n < settings.min_repeats) continue;
    if (*std::min_element(total.begin(), total.end()) >= settings.min_time_ms || n >= settings.max_repeats) break;
    if (std::chrono::duration<double, std::milli>(Clock::now() - loop_start).count() >= settings.max_total_ms) break;
  }

  kiln::v1::MeasureResult r;
  r.set_task_id(task.task_id());
  r.set_error(kiln::v1::MEASURE_OK);
  for (size_t p = 0; p < sessions.size(); ++p) {
    std::sort(times[p].begin(), times[p].end());
    kiln::v1::PackageTiming* t = r.add_package_timings();
    t->set_digest(task.packages(static_cast<int>(p)));
    t->set_median_ms(Percentile(times[p], 0.5));
    t->set_p10_ms(Percentile(times[p], 0.1));
    t->set_p90_ms(Percentile(times[p], 0.9));
    t->set_repeats(static_cast<int32_t>(times[p].size()));
  }
  r.set_median_ms(r.package_timings(0).median_ms());
  r.set_p10_ms(r.package_timings(0).p10_ms());
  r.set_p90_ms(r.package_timings(0).p90_ms());
  r.set_repeats(r.package_timings(0).repeats());
  return r;
}

kiln::v1::MeasureResult TimePackagesAsResult(const kiln::v1::MeasureTask& task,
                                             const std::vector<std::string>& packages, int cuda_device) {
  absl::StatusOr<kiln::v1::MeasureResult> r = TimePackages(task, packages, cuda_device);
  if (r.ok()) return *std::move(r);
  return Failure(task, absl::StrCat("malformed whole-model check: ", r.status().message()));
}

}  // namespace kiln::worker
