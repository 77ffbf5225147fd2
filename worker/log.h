// Structured log lines for the worker daemon: one line per event on stderr, in
// logfmt ("ts=... level=info msg=\"leased task\" task=t1"), safe from any thread.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kiln::worker {

enum class LogLevel { kDebug, kInfo, kWarning, kError };

using LogFields = std::vector<std::pair<std::string, std::string>>;

// Writes one logfmt line to stderr. Values containing spaces, quotes or '=' are
// quoted. Lines below the minimum level (default kInfo) are dropped.
void Log(LogLevel level, const std::string& msg, const LogFields& fields = {});
void SetMinLogLevel(LogLevel level);

}  // namespace kiln::worker
