// Structured logs: one line per event, logfmt ("ts=... level=info msg=\"...\" k=v"),
// on stderr. Shared by the server and the worker.
#pragma once

#include <initializer_list>
#include <string>
#include <utility>

namespace kiln::server {

using LogFields = std::initializer_list<std::pair<std::string, std::string>>;

void LogInfo(const std::string& msg, LogFields fields = {});
void LogWarn(const std::string& msg, LogFields fields = {});
void LogError(const std::string& msg, LogFields fields = {});

}  // namespace kiln::server
