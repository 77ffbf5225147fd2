// Schedule spaces: enumeration, defaults, validation and config text.
#include "compiler_core/schedule_space.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "compiler_core/kernel_spec.h"
#include "compiler_core/status_macros.h"

namespace kiln {
namespace {

bool ValidKey(absl::string_view k) {
  if (k.empty()) return false;
  for (char c : k) {
    if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '_')) {
      return false;
    }
  }
  return true;
}

// Keeps the first candidate and each next one while the previous one did not
// yet cover `extent` (a larger one would only repeat it).
std::vector<int64_t> Useful(const std::vector<int64_t>& candidates, int64_t unit, int64_t extent) {
  std::vector<int64_t> out;
  for (int64_t c : candidates) {
    if (!out.empty() && out.back() * unit >= extent) break;
    out.push_back(c);
  }
  return out;
}

std::vector<ScheduleConfig> EnumerateElementwise(const ElementwiseSpec& s, const CpuTarget& target) {
  std::vector<int64_t> vws;
  for (int64_t vw : {1, 4, 8, 16}) {
    if (vw <= target.FloatLanes()) vws.push_back(vw);
  }
  int64_t inner = s.dims.back();
  vws = Useful(vws, 1, inner);
  std::vector<int64_t> chunks = Useful({4096, 16384}, 1, s.num_elements);
  std::vector<ScheduleConfig> out;
  for (int64_t vw : vws) {
    for (int64_t unroll : Useful({1, 2, 4}, vw, inner)) {
      for (int64_t chunk : chunks) {
        ScheduleConfig c;
        c.Set("vw", vw);
        c.Set("unroll", unroll);
        c.Set("chunk", chunk);
        out.push_back(c);
      }
    }
  }
  return out;
}

std::vector<ScheduleConfig> EnumerateMatMul(const MatMulSpec& s, const CpuTarget& target) {
  int64_t lanes = target.FloatLanes();
  std::vector<ScheduleConfig> out;
  for (int64_t mr : Useful({1, 2, 4, 6, 8}, 1, s.m)) {
    for (int64_t nr : Useful({1, 2, 3, 4}, lanes, s.n)) {
      // Accumulators + B vectors + one broadcast A must fit the register file.
      if (mr * nr + nr + 1 > target.NumVectorRegisters()) continue;
      for (int64_t ku : Useful({1, 4}, 1, s.k)) {
        ScheduleConfig c;
        c.Set("mr", mr);
        c.Set("nr", nr);
        c.Set("ku", ku);
        out.push_back(c);
      }
    }
  }
  return out;
}

// The point of `space` closest to `want` (knob by knob, largest value not above
// the wanted one, else the smallest).
ScheduleConfig Closest(const std::vector<ScheduleConfig>& space, const ScheduleConfig& want) {
  if (space.empty()) return {};
  ScheduleConfig best = space.front();
  auto score = [&](const ScheduleConfig& c) {
    // Lexicographic over knobs in `want` order of importance: fewer overshoots, then closeness.
    int64_t over = 0, dist = 0;
    for (const auto& [k, v] : want.knobs) {
      int64_t x = c.Get(k, v);
      if (x > v) over += 1;
      dist += (x > v ? x - v : v - x) * 1000 / std::max<int64_t>(v, 1);
    }
    return std::make_pair(over, dist);
  };
  for (const ScheduleConfig& c : space) {
    if (score(c) < score(best)) best = c;
  }
  return best;
}

}  // namespace

int64_t ScheduleConfig::Get(const std::string& key, int64_t def) const {
  auto it = knobs.find(key);
  return it == knobs.end() ? def : it->second;
}

std::string ScheduleConfig::ToString() const {
  std::vector<std::string> parts;
  for (const auto& [k, v] : knobs) parts.push_back(absl::StrCat(k, "=", v));
  return absl::StrJoin(parts, ",");
}

absl::StatusOr<ScheduleConfig> ScheduleConfig::Parse(const std::string& text) {
  ScheduleConfig c;
  if (text.empty()) return c;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    std::vector<absl::string_view> kv = absl::StrSplit(part, absl::MaxSplits('=', 1));
    int64_t v = 0;
    bool digits = kv.size() == 2 && !kv[1].empty() &&
                  kv[1].find_first_not_of("-0123456789") == absl::string_view::npos;
    if (!digits || !ValidKey(kv[0]) || !absl::SimpleAtoi(kv[1], &v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("schedule config \"", text, "\": bad knob \"", std::string(part), "\""));
    }
    if (!c.knobs.emplace(std::string(kv[0]), v).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("schedule config \"", text, "\": duplicate knob ", std::string(kv[0])));
    }
  }
  return c;
}

std::string WorkloadKind(const Graph& workload) {
  absl::StatusOr<KernelSpec> spec = AnalyzeWorkload(workload);
  if (!spec.ok()) return "unsupported";
  return spec->kind == KernelSpec::Kind::kMatMul ? "matmul" : "elementwise";
}

bool CanCompile(const Graph& workload) { return AnalyzeWorkload(workload).ok(); }

std::vector<ScheduleConfig> EnumerateSchedules(const Graph& workload, const CpuTarget& target) {
  absl::StatusOr<KernelSpec> spec = AnalyzeWorkload(workload);
  if (!spec.ok()) return {};
  if (spec->kind == KernelSpec::Kind::kMatMul) return EnumerateMatMul(spec->matmul, target);
  return EnumerateElementwise(spec->elementwise, target);
}

ScheduleConfig DefaultSchedule(const Graph& workload, const CpuTarget& target) {
  absl::StatusOr<KernelSpec> spec = AnalyzeWorkload(workload);
  if (!spec.ok()) return {};
  ScheduleConfig want;
  if (spec->kind == KernelSpec::Kind::kMatMul) {
    want.Set("mr", 6);
    want.Set("nr", 2);
    want.Set("ku", 4);
    return Closest(EnumerateMatMul(spec->matmul, target), want);
  }
  want.Set("vw", target.FloatLanes());
  want.Set("unroll", 2);
  want.Set("chunk", 16384);
  return Closest(EnumerateElementwise(spec->elementwise, target), want);
}

absl::Status ValidateSchedule(const Graph& workload, const ScheduleConfig& config,
                              const CpuTarget& target) {
  ASSIGN_OR_RETURN(KernelSpec spec, AnalyzeWorkload(workload));
  struct Range { const char* key; int64_t lo, hi; };
  std::vector<Range> ranges;
  if (spec.kind == KernelSpec::Kind::kMatMul) {
    ranges = {{"mr", 1, 8}, {"nr", 1, 4}, {"ku", 1, 8}};
  } else {
    ranges = {{"vw", 1, target.FloatLanes()}, {"unroll", 1, 8}, {"chunk", 1, int64_t{1} << 30}};
  }
  for (const auto& [k, v] : config.knobs) {
    auto it = std::find_if(ranges.begin(), ranges.end(), [&](const Range& r) { return k == r.key; });
    if (it == ranges.end()) {
      return absl::InvalidArgumentError(absl::StrCat("schedule ", config.ToString(), ": knob ", k,
                                                     " does not apply to node ", spec.node_name, " (",
                                                     spec.op_type, ")"));
    }
    bool ok = v >= it->lo && v <= it->hi;
    if (k == "vw") ok = ok && (v & (v - 1)) == 0;
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat("schedule ", config.ToString(), ": knob ", k, "=",
                                                     v, " out of range for target ", target.Key()));
    }
  }
  return absl::OkStatus();
}

}  // namespace kiln
