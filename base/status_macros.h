// Error-propagation macros over absl::Status, in the style of XLA's
// TF_RETURN_IF_ERROR / TF_ASSIGN_OR_RETURN. Header-only; used by every layer.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define KILN_CONCAT_INNER(a, b) a##b
#define KILN_CONCAT(a, b) KILN_CONCAT_INNER(a, b)

#define RETURN_IF_ERROR(expr)                  \
  do {                                         \
    ::absl::Status kiln_status_ = (expr);      \
    if (!kiln_status_.ok()) return kiln_status_; \
  } while (0)

#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(*tmp)

#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(KILN_CONCAT(kiln_statusor_, __LINE__), lhs, expr)
