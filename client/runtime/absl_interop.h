// For in-tree callers (CLI, worker, tests) that speak absl::Status: the runtime's
// own status converted, code and message unchanged. Not installed with the runtime.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/runtime/status.h"

namespace kiln::runtime {

inline absl::Status ToAbsl(const Status& s) {
  return s.ok() ? absl::OkStatus() : absl::Status(static_cast<absl::StatusCode>(s.code()), s.message());
}

template <typename T>
absl::StatusOr<T> ToAbsl(Result<T> r) {
  if (!r.ok()) return ToAbsl(r.status());
  return std::move(*r);
}

}  // namespace kiln::runtime
