// Error-propagation macros for the runtime, which must not include compiler_core.
// Same definitions as compiler_core/status_macros.h; either header may come first.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#ifndef KILN_CONCAT
#define KILN_CONCAT_INNER(a, b) a##b
#define KILN_CONCAT(a, b) KILN_CONCAT_INNER(a, b)
#endif

#ifndef RETURN_IF_ERROR
#define RETURN_IF_ERROR(expr)                  \
  do {                                         \
    ::absl::Status kiln_status_ = (expr);      \
    if (!kiln_status_.ok()) return kiln_status_; \
  } while (0)
#endif

#ifndef ASSIGN_OR_RETURN
#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(*tmp)

#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(KILN_CONCAT(kiln_statusor_, __LINE__), lhs, expr)
#endif
