// x86-64 CPU features in LLVM's spelling: what this host has (CPUID and the
// OS-enabled register state) and the psABI micro-architecture levels
// (x86-64-v2/v3/v4) built from them. Dependency-free: the runtime links it to
// refuse a package its host cannot run, the compiler to name a package's level.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

// Whether this host can run instructions of `feature` (an LLVM feature name such
// as "avx512f" or "fma"): the CPU has it and the OS saves its registers. nullopt
// for a name outside the table (features that change no emitted instruction a
// kernel uses, such as "cx8" or "prfchw", are not checked).
std::optional<bool> HostHasFeature(std::string_view feature);

// The "+name" entries of an LLVM feature string ("+avx2,+fma,-avx512f") that
// this host lacks, among the names HostHasFeature knows, in string order.
std::vector<std::string> MissingHostFeatures(std::string_view llvm_features);

// The psABI levels, lowest first; each includes every feature of the ones before.
inline constexpr const char* kIsaLevels[] = {"x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4"};
// The features a level adds over the one before it (LLVM names).
const std::vector<std::string>& IsaLevelFeatures(std::string_view level);
bool IsIsaLevel(std::string_view name);

// The highest level whose every feature `llvm_features` enables ("x86-64" at least).
std::string IsaLevelOf(std::string_view llvm_features);
// The highest level this host runs.
std::string HostIsaLevel();

}  // namespace kiln
