// What the fuzz targets hold every input to, beyond "no crash": a failed
// import is an error with a canonical code and a message, never an abort.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/status.h"

namespace kiln::fuzz {

// Aborts (a finding for libFuzzer, a failure for the replay) with `what`.
[[noreturn]] inline void Fail(const std::string& what) {
  std::fprintf(stderr, "fuzz check failed: %s\n", what.c_str());
  std::abort();
}

// An input error must be INVALID_ARGUMENT (the contract for bad models,
// docs/api.md) with a message saying what is wrong.
inline void CheckInputError(const absl::Status& status, const char* stage) {
  if (status.code() != absl::StatusCode::kInvalidArgument) {
    Fail(std::string(stage) + " failed with " + status.ToString() + ", not INVALID_ARGUMENT");
  }
  if (status.message().empty()) Fail(std::string(stage) + ": INVALID_ARGUMENT without a message");
}

}  // namespace kiln::fuzz
