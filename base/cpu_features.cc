// CPUID probing for the features LLVM may emit in kernels, with the XGETBV check
// that the OS saves the AVX / AVX-512 / AMX register state.
#include "base/cpu_features.h"

#include <cpuid.h>

#include <cstdint>
#include <map>

namespace kiln {
namespace {

enum Reg { kEax, kEbx, kEcx, kEdx };
// Register state the OS must enable (XCR0 bits) before the instructions run.
enum OsState { kNone, kYmm, kZmm, kTile };

struct FeatureBit {
  const char* name;  // LLVM feature name
  uint32_t leaf;
  uint32_t subleaf;
  Reg reg;
  int bit;
  OsState state;
};

constexpr FeatureBit kFeatures[] = {
    {"sse3", 1, 0, kEcx, 0, kNone},          {"pclmul", 1, 0, kEcx, 1, kNone},
    {"ssse3", 1, 0, kEcx, 9, kNone},         {"fma", 1, 0, kEcx, 12, kYmm},
    {"cx16", 1, 0, kEcx, 13, kNone},         {"sse4.1", 1, 0, kEcx, 19, kNone},
    {"sse4.2", 1, 0, kEcx, 20, kNone},       {"movbe", 1, 0, kEcx, 22, kNone},
    {"popcnt", 1, 0, kEcx, 23, kNone},       {"aes", 1, 0, kEcx, 25, kNone},
    {"xsave", 1, 0, kEcx, 26, kNone},        {"avx", 1, 0, kEcx, 28, kYmm},
    {"f16c", 1, 0, kEcx, 29, kYmm},          {"rdrnd", 1, 0, kEcx, 30, kNone},
    {"cmov", 1, 0, kEdx, 15, kNone},         {"mmx", 1, 0, kEdx, 23, kNone},
    {"fxsr", 1, 0, kEdx, 24, kNone},         {"sse", 1, 0, kEdx, 25, kNone},
    {"sse2", 1, 0, kEdx, 26, kNone},         {"fsgsbase", 7, 0, kEbx, 0, kNone},
    {"bmi", 7, 0, kEbx, 3, kNone},           {"avx2", 7, 0, kEbx, 5, kYmm},
    {"bmi2", 7, 0, kEbx, 8, kNone},          {"avx512f", 7, 0, kEbx, 16, kZmm},
    {"avx512dq", 7, 0, kEbx, 17, kZmm},      {"rdseed", 7, 0, kEbx, 18, kNone},
    {"adx", 7, 0, kEbx, 19, kNone},          {"avx512ifma", 7, 0, kEbx, 21, kZmm},
    {"clflushopt", 7, 0, kEbx, 23, kNone},   {"clwb", 7, 0, kEbx, 24, kNone},
    {"avx512cd", 7, 0, kEbx, 28, kZmm},      {"sha", 7, 0, kEbx, 29, kNone},
    {"avx512bw", 7, 0, kEbx, 30, kZmm},      {"avx512vl", 7, 0, kEbx, 31, kZmm},
    {"avx512vbmi", 7, 0, kEcx, 1, kZmm},     {"avx512vbmi2", 7, 0, kEcx, 6, kZmm},
    {"gfni", 7, 0, kEcx, 8, kNone},          {"vaes", 7, 0, kEcx, 9, kYmm},
    {"vpclmulqdq", 7, 0, kEcx, 10, kYmm},    {"avx512vnni", 7, 0, kEcx, 11, kZmm},
    {"avx512bitalg", 7, 0, kEcx, 12, kZmm},  {"avx512vpopcntdq", 7, 0, kEcx, 14, kZmm},
    {"avx512vp2intersect", 7, 0, kEdx, 8, kZmm}, {"amx-bf16", 7, 0, kEdx, 22, kTile},
    {"avx512fp16", 7, 0, kEdx, 23, kZmm},    {"amx-tile", 7, 0, kEdx, 24, kTile},
    {"amx-int8", 7, 0, kEdx, 25, kTile},     {"avxvnni", 7, 1, kEax, 4, kYmm},
    {"avx512bf16", 7, 1, kEax, 5, kZmm},     {"avxifma", 7, 1, kEax, 23, kYmm},
    {"avxvnniint8", 7, 1, kEdx, 4, kYmm},    {"avxneconvert", 7, 1, kEdx, 5, kYmm},
    {"sahf", 0x80000001, 0, kEcx, 0, kNone}, {"lzcnt", 0x80000001, 0, kEcx, 5, kNone},
    {"sse4a", 0x80000001, 0, kEcx, 6, kNone}, {"xop", 0x80000001, 0, kEcx, 11, kYmm},
    {"fma4", 0x80000001, 0, kEcx, 16, kYmm}, {"tbm", 0x80000001, 0, kEcx, 21, kNone},
};

// The psABI levels' additions, in LLVM names (x86-64 itself: cmov, cx8, fxsr,
// mmx, sse, sse2 — every x86-64 CPU).
const std::map<std::string, std::vector<std::string>, std::less<>>& LevelTable() {
  static const auto* table = new std::map<std::string, std::vector<std::string>, std::less<>>{
      {"x86-64", {"cmov", "fxsr", "mmx", "sse", "sse2"}},
      {"x86-64-v2", {"cx16", "popcnt", "sahf", "sse3", "sse4.1", "sse4.2", "ssse3"}},
      {"x86-64-v3", {"avx", "avx2", "bmi", "bmi2", "f16c", "fma", "lzcnt", "movbe", "xsave"}},
      {"x86-64-v4", {"avx512bw", "avx512cd", "avx512dq", "avx512f", "avx512vl"}},
  };
  return *table;
}

uint64_t EnabledOsState() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || (c & (1u << 27)) == 0) return 0;  // no OSXSAVE: no XGETBV
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t{hi} << 32) | lo;
}

bool StateEnabled(OsState state) {
  static const uint64_t xcr0 = EnabledOsState();
  switch (state) {
    case kNone: return true;
    case kYmm: return (xcr0 & 0x6) == 0x6;
    case kZmm: return (xcr0 & 0xe6) == 0xe6;
    case kTile: return (xcr0 & 0x60000) == 0x60000;
  }
  return false;
}

bool HostHas(const FeatureBit& f) {
  unsigned regs[4] = {0, 0, 0, 0};
  const unsigned max_leaf = __get_cpuid_max(f.leaf & 0x80000000u, nullptr);
  if (max_leaf < f.leaf) return false;
  __cpuid_count(f.leaf, f.subleaf, regs[kEax], regs[kEbx], regs[kEcx], regs[kEdx]);
  return (regs[f.reg] >> f.bit & 1u) != 0 && StateEnabled(f.state);
}

// The enabled ("+name") entries of an LLVM feature string.
std::vector<std::string> Enabled(std::string_view features) {
  std::vector<std::string> out;
  while (!features.empty()) {
    size_t comma = features.find(',');
    std::string_view item = features.substr(0, comma);
    if (item.size() > 1 && item[0] == '+') out.emplace_back(item.substr(1));
    if (comma == std::string_view::npos) break;
    features.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace

std::optional<bool> HostHasFeature(std::string_view feature) {
  // CPUID traps to the hypervisor on a VM: ask once per process, not per package load.
  static const std::map<std::string_view, bool, std::less<>>* host = [] {
    auto* answers = new std::map<std::string_view, bool, std::less<>>();
    for (const FeatureBit& f : kFeatures) answers->emplace(f.name, HostHas(f));
    return answers;
  }();
  auto it = host->find(feature);
  if (it == host->end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> MissingHostFeatures(std::string_view llvm_features) {
  std::vector<std::string> missing;
  for (const std::string& name : Enabled(llvm_features)) {
    if (HostHasFeature(name) == false) missing.push_back(name);
  }
  return missing;
}

const std::vector<std::string>& IsaLevelFeatures(std::string_view level) {
  static const std::vector<std::string> kEmpty;
  auto it = LevelTable().find(level);
  return it == LevelTable().end() ? kEmpty : it->second;
}

bool IsIsaLevel(std::string_view name) { return LevelTable().count(name) > 0; }

std::string IsaLevelOf(std::string_view llvm_features) {
  std::vector<std::string> enabled = Enabled(llvm_features);
  auto has = [&](const std::string& f) {
    for (const std::string& e : enabled) {
      if (e == f) return true;
    }
    return false;
  };
  std::string level = kIsaLevels[0];
  for (const char* name : kIsaLevels) {
    if (name == std::string_view(kIsaLevels[0])) continue;  // implied by x86-64
    for (const std::string& f : IsaLevelFeatures(name)) {
      if (!has(f)) return level;
    }
    level = name;
  }
  return level;
}

std::string HostIsaLevel() {
  std::string level = kIsaLevels[0];
  for (const char* name : kIsaLevels) {
    for (const std::string& f : IsaLevelFeatures(name)) {
      if (HostHasFeature(f) != true) return level;
    }
    level = name;
  }
  return level;
}

}  // namespace kiln
