// The blob side of the content-addressed artifact store: one file per digest at
// <root>/sha256/<first two hex>/<hex>, written atomically (temp file in the same
// directory, fsync, rename) so readers never see a partial blob. The metadata
// (size, last use, pin) lives in the tuning database; see TuningDb.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kiln::tuningdb {

class ArtifactBlobDir {
 public:
  explicit ArtifactBlobDir(std::string root) : root_(std::move(root)) {}

  const std::string& root() const { return root_; }

  // Path of the blob for `digest`, which must satisfy IsValidContentDigest.
  std::string BlobPath(std::string_view digest) const;

  // Writes `bytes` as the blob for `digest` atomically (replacing any old file).
  absl::Status Write(std::string_view digest, std::string_view bytes) const;
  // The blob's bytes, or nullopt when there is no file.
  absl::StatusOr<std::optional<std::string>> Read(std::string_view digest) const;
  // The blob file's size, or nullopt when there is no file.
  absl::StatusOr<std::optional<int64_t>> FileSize(std::string_view digest) const;
  // Removes the blob file; a missing file is not an error.
  absl::Status Remove(std::string_view digest) const;

 private:
  std::string root_;
};

}  // namespace kiln::tuningdb
