// `--version` of every Kiln binary.
#include "compiler_core/driver/version.h"

#include "absl/strings/str_cat.h"
#include "compiler_core/codegen/schedule_space.h"

namespace kiln {

std::string VersionText(std::string_view binary) {
  return absl::StrCat(std::string(binary), " ", kKilnVersion, "\ngit commit ", GitCommit(), "\nLLVM ", kLlvmVersion,
                      "\nschedule space version ", kScheduleSpaceVersion);
}

}  // namespace kiln
