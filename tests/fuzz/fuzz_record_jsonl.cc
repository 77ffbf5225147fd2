// Fuzz target: one line of a tuning-record export (kiln db import) ->
// RecordLineFromJson. A line that parses must print and parse back to the
// same record (RecordLineToJson is what kiln db export writes).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tests/fuzz/fuzz_check.h"
#include "tuning_db/record_jsonl.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view line(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<kiln::tuningdb::RecordLine> parsed = kiln::tuningdb::RecordLineFromJson(line);
  if (!parsed.ok()) {
    kiln::fuzz::CheckInputError(parsed.status(), "RecordLineFromJson");
    return 0;
  }
  const std::string json = kiln::tuningdb::RecordLineToJson(*parsed);
  absl::StatusOr<kiln::tuningdb::RecordLine> again = kiln::tuningdb::RecordLineFromJson(json);
  if (!again.ok()) kiln::fuzz::Fail("a printed record does not parse: " + again.status().ToString() + "\n" + json);
  if (kiln::tuningdb::RecordLineToJson(*again) != json) kiln::fuzz::Fail("a record changed in a round trip: " + json);
  return 0;
}
