// Test-only helpers for the runtime tests: compile C kernels with clang-19 and
// assemble .kpkg bytes (header, manifest, code, weights, SHA-256 trailer).
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "kiln/v1/package.pb.h"

namespace kiln::testing {

// A fresh directory under the test temp dir, removed with its contents when
// the process exits.
std::string MakeTempDir();
// True if clang-19 runs here.
bool HaveClang();
// Compiles `source` (C, or assembly if `lang` is "assembler") to an ELF object with
// `clang-19 -c -O2 -fPIC -march=native` (the kernels run on this host);
// returns the object's bytes.
absl::StatusOr<std::string> CompileToObject(const std::string& source, const std::string& lang = "c");
// Lays out a package: fills code/weights offsets and sizes, then lets `tamper`
// change the manifest (room is reserved so that it still fits), then writes the
// header, manifest, code, weights and trailer.
std::string BuildPackage(const kiln::v1::PackageManifest& manifest, std::string_view code,
                         std::string_view weights,
                         const std::function<void(kiln::v1::PackageManifest*)>& tamper = nullptr);
// Recomputes the trailer after the bytes were changed.
void Reseal(std::string* package);
void WriteFile(const std::string& path, std::string_view bytes);

}  // namespace kiln::testing
