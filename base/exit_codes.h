// The exit codes of Kiln's binaries (kiln, kiln-server, kiln-worker), one list
// for all of them so that a script can tell a bad command line from a bad model
// from a server it cannot reach. docs/cli.md documents them.
#pragma once

#include "absl/status/status.h"

namespace kiln {

enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,        // any error not below (INTERNAL, DATA_LOSS, ...)
  kExitUsage = 2,          // the command line: unknown flag, missing or out-of-range value, a name given twice
  kExitNotFound = 3,       // NOT_FOUND: no package for a lookup, no such file, folder or tuning job
  kExitInvalidInput = 4,   // INVALID_ARGUMENT, UNIMPLEMENTED: the model or an input is malformed, of a bad
                           // shape, or uses what Kiln does not support (yet)
  kExitUnavailable = 5,    // UNAVAILABLE, DEADLINE_EXCEEDED: the server cannot be reached or did not answer in
                           // time; no worker of the target; a port already in use
  kExitOutputsDiffer = 6,  // kiln compare: the outputs differ beyond the tolerances
  kExitDenied = 7,         // UNAUTHENTICATED, PERMISSION_DENIED: the server refused the credential or its role;
                           // a file or database this process may not write
};

// The exit code of a command that failed with `code` (kExitOk for OK).
inline ExitCode ExitCodeFor(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return kExitOk;
    case absl::StatusCode::kNotFound:
      return kExitNotFound;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kUnimplemented:
      return kExitInvalidInput;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
      return kExitUnavailable;
    case absl::StatusCode::kUnauthenticated:
    case absl::StatusCode::kPermissionDenied:
      return kExitDenied;
    default:
      return kExitFailure;
  }
}

}  // namespace kiln
