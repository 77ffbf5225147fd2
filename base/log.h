// Structured logs: one logfmt line per event on stderr
// (`ts=2026-11-23T20:41:07.123Z level=info msg="leased task" task=t1`), one
// write per line so that lines from concurrent threads never interleave. The
// one logger of the server, the worker and the CLI's embedded farm, and the one
// writer of the CLI's progress line (ShowStatusLine), so the two never mix.
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

// A status line (a progress bar) at the bottom of a terminal on stderr. While
// one is shown, every log line first erases it and draws it again below
// itself, so that a log line and the status line never share a line. `line`
// has no newline; the caller shows one only when stderr is a terminal.
void ShowStatusLine(std::string_view line);
// Ends the status line: kept on the screen (a newline after it) when `keep`,
// erased otherwise. Nothing when none is shown.
void EndStatusLine(bool keep);

// "debug", "info", "warn"/"warning", "error"; INVALID_ARGUMENT otherwise.
absl::StatusOr<LogLevel> ParseLogLevel(std::string_view name);
const char* LogLevelName(LogLevel level);

}  // namespace kiln
