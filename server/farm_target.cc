// Canonical CPU targets for the farm.
#include "server/farm_target.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace kiln::server {
namespace {

CpuTarget Make(const std::string& cpu, std::vector<std::string> enabled) {
  std::sort(enabled.begin(), enabled.end());
  enabled.erase(std::unique(enabled.begin(), enabled.end()), enabled.end());
  for (std::string& f : enabled) f = "+" + f;
  CpuTarget t;
  t.triple = CpuTarget::Host().triple;
  t.cpu = cpu;
  t.features = absl::StrJoin(enabled, ",");
  return t;
}

}  // namespace

CpuTarget HostFarmTarget() {
  static const CpuTarget farm = [] {  // every compile and lookup resolves it
    CpuTarget host = CpuTarget::Host();
    std::vector<std::string> enabled;
    for (absl::string_view f : absl::StrSplit(host.features, ',', absl::SkipEmpty())) {
      if (f[0] == '+') enabled.emplace_back(f.substr(1));
    }
    return Make(host.cpu, std::move(enabled));
  }();
  return farm;
}

CpuTarget FarmTargetOf(const kiln::v1::DeviceInfo& device) {
  std::vector<std::string> enabled;
  for (const std::string& f : device.features()) {
    enabled.push_back(!f.empty() && f[0] == '+' ? f.substr(1) : f);
  }
  return Make(device.cpu_name(), std::move(enabled));
}

std::string FarmTargetKeyOf(const kiln::v1::DeviceInfo& device) {
  if (device.kind() != "cuda") {
    if (device.kind() != "cpu") return absl::StrCat(device.kind(), "/", device.arch());
    return FarmTargetOf(device).Key();
  }
  std::string model;
  for (char c : device.device_model()) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (std::isalnum(u)) {
      model += static_cast<char>(std::tolower(u));
    } else if (!model.empty() && model.back() != '-') {
      model += '-';
    }
  }
  while (!model.empty() && model.back() == '-') model.pop_back();
  if (model.empty()) model = "unknown";
  // FNV-1a 32 over the versions: stable across builds and hosts.
  uint32_t h = 2166136261u;
  for (unsigned char c : absl::StrCat(device.driver_version(), "|", device.toolkit_version())) {
    h ^= c;
    h *= 16777619u;
  }
  char hex[9];
  std::snprintf(hex, sizeof(hex), "%08x", h);
  return absl::StrCat("cuda/", device.arch(), "/", model, "/", hex);
}

std::optional<GpuTarget> GpuTargetOfKey(const std::string& target_key) {
  std::vector<std::string> parts = absl::StrSplit(target_key, '/');
  if (parts.size() < 2 || parts[0] != "cuda") return std::nullopt;
  absl::StatusOr<GpuTarget> t = GpuTarget::Named(parts[1]);
  if (!t.ok()) return std::nullopt;
  return *t;
}

std::string RecordTargetKey(const std::string& target_key, int threads) {
  if (threads <= 1) return target_key;
  return absl::StrCat(target_key, "/t", threads);
}

RecordTarget ParseRecordTargetKey(const std::string& record_key) {
  RecordTarget out{record_key, 1};
  const size_t slash = record_key.rfind('/');
  if (slash == std::string::npos || slash + 2 > record_key.size() || record_key[slash + 1] != 't') return out;
  int threads = 0;
  if (!absl::SimpleAtoi(absl::string_view(record_key).substr(slash + 2), &threads) || threads <= 1) return out;
  return RecordTarget{record_key.substr(0, slash), threads};
}

int MeasureThreadsOf(const kiln::v1::DeviceInfo& device) { return std::max(1, device.measure_threads()); }

bool WorkerServes(const std::string& worker_target_key, int measure_threads, const std::string& record_key) {
  const RecordTarget r = ParseRecordTargetKey(record_key);
  return r.target_key == worker_target_key && r.threads <= std::max(1, measure_threads);
}

}  // namespace kiln::server
