// The compiler's version: part of every compile key and tuning record, so a
// new compiler never silently reuses an old compiler's packages. It is the
// project version of the top-level CMakeLists.txt (base/build_info.h).
#pragma once

#include <string>
#include <string_view>

#include "base/build_info.h"

namespace kiln {

inline constexpr char kCompilerVersion[] = "kiln-" KILN_VERSION;

// What `--version` prints for `binary` (kiln, kiln-server, kiln-worker): the
// Kiln version, the git commit, the LLVM version and the schedule-space
// version, one per line, no trailing newline. Defined in kiln_version, which
// only the binaries link (it carries the git commit).
std::string VersionText(std::string_view binary);

}  // namespace kiln
