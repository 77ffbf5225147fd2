// logfmt lines on stderr.
#include "base/log.h"

#include <atomic>
#include <cstdio>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace kiln {
namespace {

std::atomic<int> g_min_level{static_cast<int>(LogLevel::kInfo)};

// Everything written to stderr by this file, and the status line shown now.
std::mutex g_stderr_mu;
std::string g_status_line;  // guarded by g_stderr_mu
bool g_status_shown = false;  // guarded by g_stderr_mu

constexpr char kEraseLine[] = "\r\033[K";

void WriteLocked(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}

void AppendValue(std::string* out, std::string_view v) {
  bool quote = v.empty();
  for (char c : v) {
    if (c == ' ' || c == '"' || c == '=' || c == '\n' || c == '\t' || c == '\\') quote = true;
  }
  if (!quote) {
    out->append(v);
    return;
  }
  out->push_back('"');
  for (char c : v) {
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(c);
    } else if (c == '\n') {
      out->append("\\n");
    } else {
      out->push_back(c);
    }
  }
  out->push_back('"');
}

}  // namespace

const char* LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarning: return "warn";
    case LogLevel::kError: return "error";
  }
  return "info";
}

absl::StatusOr<LogLevel> ParseLogLevel(std::string_view name) {
  if (name == "debug") return LogLevel::kDebug;
  if (name == "info") return LogLevel::kInfo;
  if (name == "warn" || name == "warning") return LogLevel::kWarning;
  if (name == "error") return LogLevel::kError;
  return absl::InvalidArgumentError(
      absl::StrCat("log level '", std::string(name), "' is not one of debug, info, warn, error"));
}

void SetMinLogLevel(LogLevel level) { g_min_level.store(static_cast<int>(level)); }
LogLevel MinLogLevel() { return static_cast<LogLevel>(g_min_level.load()); }

void Log(LogLevel level, std::string_view msg, const LogFields& fields) {
  if (static_cast<int>(level) < g_min_level.load()) return;
  std::string line = "ts=";
  line.append(absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone()));
  line.append(" level=");
  line.append(LogLevelName(level));
  line.append(" msg=");
  AppendValue(&line, msg);
  for (const auto& [key, value] : fields) {
    line.push_back(' ');
    line.append(key);
    line.push_back('=');
    AppendValue(&line, value);
  }
  line.push_back('\n');
  std::lock_guard<std::mutex> lock(g_stderr_mu);
  // Erase the status line, write the log line where it was, draw it again below.
  if (g_status_shown) line = absl::StrCat(kEraseLine, line, g_status_line);
  WriteLocked(line);
}

void ShowStatusLine(std::string_view line) {
  std::lock_guard<std::mutex> lock(g_stderr_mu);
  g_status_line = std::string(line);
  g_status_shown = true;
  WriteLocked(absl::StrCat(kEraseLine, g_status_line));
}

void EndStatusLine(bool keep) {
  std::lock_guard<std::mutex> lock(g_stderr_mu);
  if (!g_status_shown) return;
  g_status_shown = false;
  g_status_line.clear();
  WriteLocked(keep ? "\n" : kEraseLine);
}

}  // namespace kiln
