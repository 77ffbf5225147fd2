// Structured logs: one logfmt line per event on stderr
// (`ts=2026-11-23T20:41:07.123Z level=info msg="leased task" task=t1`), one
// write per line so that lines from concurrent threads never interleave. The
// one logger of the server, the worker and the CLI's embedded farm.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln {

enum class LogLevel { kDebug, kInfo, kWarning, kError };

using LogFields = std::vector<std::pair<std::string, std::string>>;

// Writes one line unless `level` is below the minimum level. Values with spaces,
// quotes, '=' or newlines are quoted; an empty value is "".
void Log(LogLevel level, std::string_view msg, const LogFields& fields = {});
inline void LogDebug(std::string_view msg, const LogFields& fields = {}) { Log(LogLevel::kDebug, msg, fields); }
inline void LogInfo(std::string_view msg, const LogFields& fields = {}) { Log(LogLevel::kInfo, msg, fields); }
inline void LogWarn(std::string_view msg, const LogFields& fields = {}) { Log(LogLevel::kWarning, msg, fields); }
inline void LogError(std::string_view msg, const LogFields& fields = {}) { Log(LogLevel::kError, msg, fields); }

// The process's minimum level (default kInfo), set once by a binary from its
// flags; lines below it are dropped.
void SetMinLogLevel(LogLevel level);
LogLevel MinLogLevel();

// "debug", "info", "warn"/"warning", "error"; INVALID_ARGUMENT otherwise.
absl::StatusOr<LogLevel> ParseLogLevel(std::string_view name);
const char* LogLevelName(LogLevel level);

}  // namespace kiln
