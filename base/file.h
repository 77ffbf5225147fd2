// Whole-file reads and atomic writes, with errors that name the file.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kiln {

// The file's bytes. NOT_FOUND when it cannot be opened, DATA_LOSS when a read fails.
absl::StatusOr<std::string> ReadFile(const std::string& path);

// Writes `bytes` to a temporary file beside `path` and renames it onto `path`,
// so a reader sees the old file or the new one, never a part. Creates missing
// parent folders. PERMISSION_DENIED naming the file when it cannot.
absl::Status WriteFileAtomic(const std::string& path, std::string_view bytes);

}  // namespace kiln
