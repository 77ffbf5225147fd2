// CpuTarget: host detection and the canonical target key; GpuTarget: SM
// versions by name.
#include "compiler_core/codegen/target.h"

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <cstdio>
#include <utility>
#include <iterator>
#include <string_view>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/X86TargetParser.h"
#include "llvm/TargetParser/Triple.h"

namespace kiln {

CpuTarget CpuTarget::Host() {
  // Asked once per process: the features come from CPUID, which a virtual
  // machine traps (tens of microseconds each), and every RPC resolves a target.
  static const CpuTarget host = [] {
    CpuTarget t;
    t.triple = llvm::sys::getProcessTriple();
    std::vector<std::pair<std::string, bool>> feats;
    for (const auto& f : llvm::sys::getHostCPUFeatures()) {
      feats.emplace_back(f.getKey().str(), f.getValue());
    }
    std::sort(feats.begin(), feats.end());
    std::vector<std::string> parts;
    for (const auto& [name, on] : feats) parts.push_back(absl::StrCat(on ? "+" : "-", name));
    t.features = absl::StrJoin(parts, ",");
    t.cpu = CpuNameForFeatures(llvm::sys::getHostCPUName().str(), t.features);
    return t;
  }();
  return host;
}

std::string CpuNameForFeatures(const std::string& reported, const std::string& features) {
  CpuTarget t;
  t.features = features;
  if (!t.HasFeature("amx-tile")) return reported;
  llvm::SmallVector<llvm::StringRef, 64> listed;
  llvm::X86::getFeaturesForCPU(reported, listed, /*NeedPlus=*/false);
  if (std::find(listed.begin(), listed.end(), "amx-tile") != listed.end()) return reported;
  return t.HasFeature("amx-fp16") ? "graniterapids" : "sapphirerapids";
}

absl::StatusOr<CpuTarget> CpuTarget::Named(const std::string& name) {
  if (llvm::X86::parseArchX86(name, /*Only64Bit=*/true) == llvm::X86::CK_None) {
    llvm::SmallVector<llvm::StringRef, 64> valid;
    llvm::X86::fillValidCPUArchList(valid, /*Only64Bit=*/true);
    std::vector<std::string> names(valid.begin(), valid.end());
    return absl::InvalidArgumentError(absl::StrCat("unknown CPU target '", name, "'; x86-64 targets: ",
                                                   absl::StrJoin(names, ", ")));
  }
  llvm::SmallVector<llvm::StringRef, 64> listed;
  llvm::X86::getFeaturesForCPU(name, listed, /*NeedPlus=*/false);
  // The table lists a CPU's own features; the ones they imply (avx2: avx,
  // sse4.2, ...) are added, as clang's driver does.
  llvm::StringMap<bool> implied;
  for (llvm::StringRef f : listed) {
    implied[f] = true;
    llvm::X86::updateImpliedFeatures(f, true, implied);
  }
  std::vector<std::string> enabled;
  for (const auto& entry : implied) {
    if (entry.getValue()) enabled.push_back(absl::StrCat("+", entry.getKey().str()));
  }
  std::sort(enabled.begin(), enabled.end());
  CpuTarget t;
  t.triple = llvm::sys::getProcessTriple();
  t.cpu = name;
  t.features = absl::StrJoin(enabled, ",");
  return t;
}

std::string CpuTarget::Key() const {
  // FNV-1a 64 over the feature string: stable across builds and platforms.
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : features) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(h));
  std::string arch = llvm::Triple(triple).getArchName().str();
  return absl::StrCat("cpu/", arch, "/", cpu, "/", std::string(hex, 8));
}

bool CpuTarget::HasFeature(const std::string& name) const {
  for (absl::string_view f : absl::StrSplit(features, ',')) {
    if (f.size() == name.size() + 1 && f[0] == '+' && f.substr(1) == name) return true;
  }
  return false;
}

namespace {

// The SM versions the NVPTX back end and ptxas (CUDA 12 and 13) both take.
constexpr int kGpuSms[] = {75, 80, 86, 87, 89, 90};

}  // namespace

absl::StatusOr<GpuTarget> GpuTarget::Named(const std::string& name) {
  absl::string_view rest = name;
  if (!absl::ConsumePrefix(&rest, "cuda:")) absl::ConsumePrefix(&rest, "cuda/");
  int sm = 0;
  if (absl::ConsumePrefix(&rest, "sm_") && absl::SimpleAtoi(rest, &sm)) {
    for (int known : kGpuSms) {
      if (sm == known) return GpuTarget{sm};
    }
  }
  std::vector<std::string> names;
  for (int known : kGpuSms) names.push_back(absl::StrCat("sm_", known));
  return absl::InvalidArgumentError(
      absl::StrCat("unknown GPU target '", name, "'; CUDA targets: ", absl::StrJoin(names, ", ")));
}

std::string GpuTarget::Arch() const { return absl::StrCat("sm_", sm); }

std::string GpuTarget::Key() const { return absl::StrCat("cuda/", Arch()); }

absl::StatusOr<Target> Target::Named(const std::string& name) {
  if (name.empty() || name == "cpu") return Target(CpuTarget::Host());
  if (name == "cuda") {
    return absl::InvalidArgumentError("target 'cuda' names the GPUs of a farm's workers; name an SM here (cuda:sm_90)");
  }
  if (absl::StartsWith(name, "cuda") || absl::StartsWith(name, "sm_")) {
    absl::StatusOr<GpuTarget> gpu = GpuTarget::Named(name);
    if (!gpu.ok()) return gpu.status();
    return Target(*gpu);
  }
  absl::string_view cpu = name;
  absl::ConsumePrefix(&cpu, "cpu:");
  absl::StatusOr<CpuTarget> named = CpuTarget::Named(std::string(cpu));
  if (!named.ok()) return named.status();
  return Target(*named);
}

const CpuTarget& Target::cpu() const {
  assert(!is_gpu_);
  return cpu_;
}

const GpuTarget& Target::gpu() const {
  assert(is_gpu_);
  return gpu_;
}

std::string Target::Key() const { return is_gpu_ ? gpu_.Key() : cpu_.Key(); }

int CpuTarget::VectorBits() const {
  if (HasFeature("avx512f")) return 512;
  if (HasFeature("avx2")) return 256;
  return 128;
}

int CpuTarget::NativeVectorBits() const {
  static constexpr std::string_view kFullWidth512[] = {
      "znver5",         "skylake-avx512", "cascadelake", "cooperlake",   "icelake-server",
      "sapphirerapids", "emeraldrapids",  "graniterapids", "graniterapids-d", "diamondrapids"};
  const int bits = VectorBits();
  if (bits < 512) return bits;
  return std::find(std::begin(kFullWidth512), std::end(kFullWidth512), cpu) != std::end(kFullWidth512) ? 512 : 256;
}

int64_t CpuTarget::L2Bytes() const {
  static constexpr std::string_view k256K[] = {"haswell", "broadwell", "skylake", "cannonlake"};
  static constexpr std::string_view k512K[] = {"znver1", "znver2", "znver3"};
  static constexpr std::string_view k2M[] = {"sapphirerapids", "emeraldrapids", "graniterapids", "graniterapids-d",
                                             "diamondrapids"};
  auto in = [&](const auto& names) { return std::find(std::begin(names), std::end(names), cpu) != std::end(names); };
  if (in(k256K)) return int64_t{256} << 10;
  if (in(k512K)) return int64_t{512} << 10;
  if (in(k2M)) return int64_t{2} << 20;
  return int64_t{1} << 20;
}

}  // namespace kiln
