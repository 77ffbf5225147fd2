// The runtime's error values: a canonical code and a message, like absl::Status
// but with no dependency, so libkiln_runtime links nothing but the C and C++
// libraries (docs/decisions/0006-runtime-without-dependencies.md). Codes equal kiln_status_t's and
// absl's; in-tree callers convert with client/runtime/absl_interop.h.
#pragma once

#include <optional>
#include <sstream>
#include <string>
#include <utility>

namespace kiln::runtime {

enum class StatusCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kNotFound = 5,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kDataLoss = 15,
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// "INVALID_ARGUMENT", ...: the canonical names.
inline const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kCancelled: return "CANCELLED";
    case StatusCode::kUnknown: return "UNKNOWN";
    case StatusCode::kInvalidArgument: return "INVALID_ARGUMENT";
    case StatusCode::kNotFound: return "NOT_FOUND";
    case StatusCode::kResourceExhausted: return "RESOURCE_EXHAUSTED";
    case StatusCode::kFailedPrecondition: return "FAILED_PRECONDITION";
    case StatusCode::kOutOfRange: return "OUT_OF_RANGE";
    case StatusCode::kUnimplemented: return "UNIMPLEMENTED";
    case StatusCode::kInternal: return "INTERNAL";
    case StatusCode::kDataLoss: return "DATA_LOSS";
  }
  return "UNKNOWN";
}

inline std::ostream& operator<<(std::ostream& out, const Status& s) {
  out << StatusCodeName(s.code());
  if (!s.ok()) out << ": " << s.message();
  return out;
}

inline Status OkStatus() { return Status(); }
inline Status InvalidArgumentError(std::string m) { return Status(StatusCode::kInvalidArgument, std::move(m)); }
inline Status NotFoundError(std::string m) { return Status(StatusCode::kNotFound, std::move(m)); }
inline Status FailedPreconditionError(std::string m) { return Status(StatusCode::kFailedPrecondition, std::move(m)); }
inline Status ResourceExhaustedError(std::string m) { return Status(StatusCode::kResourceExhausted, std::move(m)); }
inline Status DataLossError(std::string m) { return Status(StatusCode::kDataLoss, std::move(m)); }
inline Status InternalError(std::string m) { return Status(StatusCode::kInternal, std::move(m)); }
inline Status OutOfRangeError(std::string m) { return Status(StatusCode::kOutOfRange, std::move(m)); }

// A value or the error that prevented it (absl::StatusOr's shape).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}          // NOLINT: implicit, as StatusOr
  Result(Status status) : status_(std::move(status)) {}  // NOLINT
  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T&& operator*() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

// Concatenates anything an ostream prints: the runtime's StrCat.
template <typename... Args>
std::string Cat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

}  // namespace kiln::runtime

#define KILN_RT_CONCAT_INNER(a, b) a##b
#define KILN_RT_CONCAT(a, b) KILN_RT_CONCAT_INNER(a, b)

#define RT_RETURN_IF_ERROR(expr)                       \
  do {                                                 \
    ::kiln::runtime::Status kiln_rt_status_ = (expr);  \
    if (!kiln_rt_status_.ok()) return kiln_rt_status_; \
  } while (0)

#define RT_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(*tmp)

#define RT_ASSIGN_OR_RETURN(lhs, expr) RT_ASSIGN_OR_RETURN_IMPL(KILN_RT_CONCAT(kiln_rt_result_, __LINE__), lhs, expr)
