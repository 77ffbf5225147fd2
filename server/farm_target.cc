// Canonical CPU targets for the farm.
#include "server/farm_target.h"

#include <algorithm>
#include <vector>

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
  CpuTarget host = CpuTarget::Host();
  std::vector<std::string> enabled;
  for (absl::string_view f : absl::StrSplit(host.features, ',', absl::SkipEmpty())) {
    if (f[0] == '+') enabled.emplace_back(f.substr(1));
  }
  return Make(host.cpu, std::move(enabled));
}

CpuTarget FarmTargetOf(const kiln::v1::DeviceInfo& device) {
  std::vector<std::string> enabled;
  for (const std::string& f : device.features()) {
    enabled.push_back(!f.empty() && f[0] == '+' ? f.substr(1) : f);
  }
  return Make(device.cpu_name(), std::move(enabled));
}

}  // namespace kiln::server
