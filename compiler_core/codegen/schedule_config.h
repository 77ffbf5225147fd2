// ScheduleConfig: one point of a workload's schedule space, as knob = value
// pairs ("mr=4,nr=2,ku=4"). Each lowering (compiler_core/codegen/loop_ir/lower_*.h)
// documents its knobs; a missing knob takes that lowering's default.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace kiln {

class ScheduleConfig {
 public:
  std::map<std::string, int64_t> knobs;

  int64_t Get(const std::string& key, int64_t def) const;
  void Set(const std::string& key, int64_t value) { knobs[key] = value; }
  // "mr=4,nr=2,ku=4": keys sorted; "" for no knobs.
  std::string ToString() const;
  // Inverse of ToString. INVALID_ARGUMENT on malformed text or duplicate keys.
  static absl::StatusOr<ScheduleConfig> Parse(const std::string& text);

  bool operator==(const ScheduleConfig& o) const { return knobs == o.knobs; }
  bool operator!=(const ScheduleConfig& o) const { return knobs != o.knobs; }
  bool operator<(const ScheduleConfig& o) const { return knobs < o.knobs; }
};

}  // namespace kiln
