// The compiler's version: part of every compile key and tuning record, so a
// new compiler never silently reuses an old compiler's packages.
#pragma once

namespace kiln {

inline constexpr char kCompilerVersion[] = "kiln-0.1.0";

}  // namespace kiln
