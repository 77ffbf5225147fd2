// CpuTarget: host detection and the canonical target key.
#include "compiler_core/codegen/target.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/Triple.h"

namespace kiln {

CpuTarget CpuTarget::Host() {
  CpuTarget t;
  t.triple = llvm::sys::getProcessTriple();
  t.cpu = llvm::sys::getHostCPUName().str();
  std::vector<std::pair<std::string, bool>> feats;
  for (const auto& f : llvm::sys::getHostCPUFeatures()) {
    feats.emplace_back(f.getKey().str(), f.getValue());
  }
  std::sort(feats.begin(), feats.end());
  std::vector<std::string> parts;
  for (const auto& [name, on] : feats) parts.push_back(absl::StrCat(on ? "+" : "-", name));
  t.features = absl::StrJoin(parts, ",");
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

int CpuTarget::VectorBits() const {
  if (HasFeature("avx512f")) return 512;
  if (HasFeature("avx2")) return 256;
  return 128;
}

}  // namespace kiln
