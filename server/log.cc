// logfmt lines on stderr, one write per line so concurrent threads do not interleave.
#include "server/log.h"

#include <unistd.h>

#include <chrono>
#include <ctime>

#include "absl/strings/str_cat.h"

namespace kiln::server {
namespace {

std::string Quote(const std::string& s) {
  bool plain = !s.empty();
  for (char c : s) {
    if (c == ' ' || c == '"' || c == '=' || c == '\n') plain = false;
  }
  if (plain) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c == '\n' ? ' ' : c);
  }
  out.push_back('"');
  return out;
}

void Emit(const char* level, const std::string& msg, LogFields fields) {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  int ms = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  char ts[32];
  std::tm tm;
  gmtime_r(&t, &tm);
  std::strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
  std::string line = absl::StrCat("ts=", ts, ".", ms / 100, (ms / 10) % 10, ms % 10, "Z level=", level,
                                  " msg=", Quote(msg));
  for (const auto& [k, v] : fields) absl::StrAppend(&line, " ", k, "=", Quote(v));
  line.push_back('\n');
  ssize_t ignored = ::write(2, line.data(), line.size());
  (void)ignored;
}

}  // namespace

void LogInfo(const std::string& msg, LogFields fields) { Emit("info", msg, fields); }
void LogWarn(const std::string& msg, LogFields fields) { Emit("warn", msg, fields); }
void LogError(const std::string& msg, LogFields fields) { Emit("error", msg, fields); }

}  // namespace kiln::server
