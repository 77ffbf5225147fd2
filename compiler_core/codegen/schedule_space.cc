// Schedule spaces: enumeration, defaults, validation and config text.
#include "compiler_core/codegen/schedule_space.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "compiler_core/codegen/kernel_spec.h"
#include "compiler_core/codegen/loop_ir/lower.h"
#include "base/status_macros.h"

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

int64_t CeilDiv(int64_t a, int64_t b) { return b == 0 ? 0 : (a + b - 1) / b; }

// The register-block grid (mr x nr x ku), without blocking knobs.
std::vector<ScheduleConfig> MatMulRegisterBlocks(const MatMulSpec& s, const CpuTarget& target) {
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

// B larger than an L2 and more rows than one register block: worth packing.
bool WantsPacking(const MatMulSpec& s) { return s.m > 8 && s.k * s.n * 4 > (int64_t{1} << 20); }

// `reg` with K blocking kc, the widest column block whose packed B fits
// kMaxPackedBytes, and rows per task mc (0: default).
ScheduleConfig PackedVariant(const MatMulSpec& s, const ScheduleConfig& reg, int64_t kc, int64_t mc,
                             const CpuTarget& target) {
  ScheduleConfig c = reg;
  int64_t nb = reg.Get("nr", 2) * target.FloatLanes();
  int64_t nc = kMaxPackedBytes / 4 / kc / nb * nb;
  c.Set("kc", kc);
  if (nc < CeilDiv(s.n, nb) * nb) c.Set("nc", nc);
  if (mc > 0) c.Set("mc", mc);
  return c;
}

std::vector<ScheduleConfig> EnumerateMatMul(const MatMulSpec& s, const CpuTarget& target) {
  std::vector<ScheduleConfig> base = MatMulRegisterBlocks(s, target);
  std::vector<ScheduleConfig> out = base;
  if (s.m <= 8) {
    // Few rows (GEMV): column blocks give threads tasks; B streams once, no packing.
    for (int64_t nc : {128, 256, 512}) {
      if (nc >= s.n) continue;
      for (ScheduleConfig c : base) {
        c.Set("nc", nc);
        out.push_back(c);
      }
    }
  }
  if (WantsPacking(s)) {
    for (const ScheduleConfig& reg : base) {
      int64_t mr = reg.Get("mr", 6), nr = reg.Get("nr", 2);
      if (mr < 4 || mr * nr < 12) continue;  // too little reuse per packed panel
      for (int64_t kc : Useful({128, 256, 512}, 1, s.k)) {
        std::vector<int64_t> mcs = {0};
        for (int64_t mc : Useful({128, 256}, 1, s.m)) {
          if (mc > 32) mcs.push_back(mc);
        }
        for (int64_t mc : mcs) out.push_back(PackedVariant(s, reg, kc, mc, target));
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

// The matmul spec of a MatMul/Gemm workload; an error for every other one
// (elementwise DAGs included: they lower through the loop IR).
absl::StatusOr<KernelSpec> MatMulWorkload(const Graph& workload) {
  ASSIGN_OR_RETURN(KernelSpec spec, AnalyzeWorkload(workload));
  if (spec.kind != KernelSpec::Kind::kMatMul) return absl::UnimplementedError("not a matmul workload");
  return spec;
}

std::string WorkloadKind(const Graph& workload) {
  absl::StatusOr<KernelSpec> spec = MatMulWorkload(workload);
  if (!spec.ok()) {
    const loop_ir::WorkloadLowering* l = loop_ir::FindLowering(workload);
    return l != nullptr ? l->kind : "unsupported";
  }
  return "matmul";
}

bool CanCompile(const Graph& workload) {
  return MatMulWorkload(workload).ok() || loop_ir::FindLowering(workload) != nullptr;
}

std::vector<ScheduleConfig> EnumerateSchedules(const Graph& workload, const CpuTarget& target) {
  absl::StatusOr<KernelSpec> spec = MatMulWorkload(workload);
  if (!spec.ok()) {
    const loop_ir::WorkloadLowering* l = loop_ir::FindLowering(workload);
    return l != nullptr ? l->enumerate(workload, target) : std::vector<ScheduleConfig>{};
  }
  return EnumerateMatMul(spec->matmul, target);
}

ScheduleConfig DefaultSchedule(const Graph& workload, const CpuTarget& target) {
  absl::StatusOr<KernelSpec> spec = MatMulWorkload(workload);
  if (!spec.ok()) {
    const loop_ir::WorkloadLowering* l = loop_ir::FindLowering(workload);
    return l != nullptr ? l->default_schedule(workload, target) : ScheduleConfig{};
  }
  const MatMulSpec& s = spec->matmul;
  ScheduleConfig want;
  want.Set("mr", 6);
  want.Set("nr", 2);
  want.Set("ku", 4);
  ScheduleConfig reg = Closest(MatMulRegisterBlocks(s, target), want);
  ScheduleConfig blocked = reg;
  if (WantsPacking(s)) {
    blocked = PackedVariant(s, reg, std::min<int64_t>(256, Useful({128, 256}, 1, s.k).back()),
                            s.m > 128 ? 128 : 0, target);
  } else if (s.m <= 8 && s.n > 256) {
    blocked.Set("nc", 256);
  }
  std::vector<ScheduleConfig> space = EnumerateMatMul(s, target);
  return std::find(space.begin(), space.end(), blocked) != space.end() ? blocked : reg;
}

absl::Status ValidateSchedule(const Graph& workload, const ScheduleConfig& config,
                              const CpuTarget& target) {
  absl::StatusOr<KernelSpec> analyzed = MatMulWorkload(workload);
  if (!analyzed.ok()) {
    absl::Status why;
    if (const loop_ir::WorkloadLowering* l = loop_ir::FindLowering(workload, &why)) {
      return l->validate(workload, config, target);
    }
    absl::Status direct = AnalyzeWorkload(workload).status();
    return direct.ok() ? why : direct;
  }
  const KernelSpec& spec = *analyzed;
  struct Range { const char* key; int64_t lo, hi; };
  const std::vector<Range> ranges = {{"mr", 1, 8},
                                     {"nr", 1, 4},
                                     {"ku", 1, 8},
                                     {"mc", 0, int64_t{1} << 30},
                                     {"nc", 0, int64_t{1} << 30},
                                     {"kc", 0, int64_t{1} << 20}};
  for (const auto& [k, v] : config.knobs) {
    auto it = std::find_if(ranges.begin(), ranges.end(), [&](const Range& r) { return k == r.key; });
    if (it == ranges.end()) {
      return absl::InvalidArgumentError(absl::StrCat("schedule ", config.ToString(), ": knob ", k,
                                                     " does not apply to node ", spec.node_name, " (",
                                                     spec.op_type, ")"));
    }
    bool ok = v >= it->lo && v <= it->hi;
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat("schedule ", config.ToString(), ": knob ", k, "=",
                                                     v, " out of range for target ", target.Key()));
    }
  }
  MatMulTiling t = TileMatMul(spec.matmul, config, target);
  if (t.pack_floats * 4 > kMaxPackedBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "schedule ", config.ToString(), ": packed B block of kc=", t.kc, " x ", t.cols_per_task,
        " columns needs ", t.pack_floats * 4, " bytes, more than ", kMaxPackedBytes, " (node ",
        spec.node_name, ")"));
  }
  return absl::OkStatus();
}

MatMulTiling TileMatMul(const MatMulSpec& s, const ScheduleConfig& config, const CpuTarget& target) {
  MatMulTiling t;
  t.mr = config.Get("mr", 6);
  t.nr = config.Get("nr", 2);
  t.ku = config.Get("ku", 4);
  t.nb = t.nr * target.FloatLanes();
  int64_t mc = config.Get("mc", 0);
  t.rows_per_task = mc > 0 ? CeilDiv(mc, t.mr) * t.mr : t.mr * std::max<int64_t>(1, 32 / t.mr);
  int64_t n_padded = std::max<int64_t>(CeilDiv(s.n, t.nb) * t.nb, t.nb);
  int64_t nc = config.Get("nc", 0);
  t.cols_per_task = nc > 0 ? std::min(CeilDiv(nc, t.nb) * t.nb, n_padded) : n_padded;
  t.kc = config.Get("kc", 0);
  t.row_blocks = CeilDiv(s.m, t.rows_per_task);
  t.col_blocks = std::max<int64_t>(1, CeilDiv(s.n, t.cols_per_task));
  t.num_tasks = s.num_batches() * t.row_blocks * t.col_blocks;
  t.pack_floats = t.kc * t.cols_per_task;
  return t;
}

}  // namespace kiln
