// ScheduleConfig text form.
#include "compiler_core/codegen/schedule_config.h"

#include <cctype>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace kiln {
namespace {

bool ValidKey(absl::string_view k) {
  if (k.empty()) return false;
  for (char c : k) {
    if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '_')) {
      return false;
    }
  }
  return true;
}

}  // namespace

int64_t ScheduleConfig::Get(const std::string& key, int64_t def) const {
  auto it = knobs.find(key);
  return it == knobs.end() ? def : it->second;
}

std::string ScheduleConfig::ToString() const {
  std::vector<std::string> parts;
  for (const auto& [k, v] : knobs) parts.push_back(absl::StrCat(k, "=", v));
  return absl::StrJoin(parts, ",");
}

absl::StatusOr<ScheduleConfig> ScheduleConfig::Parse(const std::string& text) {
  ScheduleConfig c;
  if (text.empty()) return c;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    std::vector<absl::string_view> kv = absl::StrSplit(part, absl::MaxSplits('=', 1));
    int64_t v = 0;
    bool digits = kv.size() == 2 && !kv[1].empty() &&
                  kv[1].find_first_not_of("-0123456789") == absl::string_view::npos;
    if (!digits || !ValidKey(kv[0]) || !absl::SimpleAtoi(kv[1], &v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("schedule config \"", text, "\": bad knob \"", std::string(part), "\""));
    }
    if (!c.knobs.emplace(std::string(kv[0]), v).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("schedule config \"", text, "\": duplicate knob ", std::string(kv[0])));
    }
  }
  return c;
}

}  // namespace kiln
