// Fuzz target: package bytes -> the runtime's C API as a deployment uses it on
// a package from a cache: kiln_package_load_bytes (header, checksum, manifest,
// every bound), kiln_session_create (the ELF loader: layout, symbols,
// relocations; buffers and the arena), the tensor queries and binding inputs.
//
// The input's last 32 bytes are replaced by the SHA-256 of the rest, as anyone
// who edits a package can do: the trailer detects damage, it does not
// authenticate, so the checks behind it must hold on their own. Steps are not
// run: a package's code is code, and running altered code proves nothing
// about the runtime (a package is trusted through its digest, docs/testing.md).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "base/digest.h"
#include "client/runtime/kiln_runtime.h"
#include "proto/kiln/v1/package_layout.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

constexpr int64_t kMaxInputBytes = int64_t{1} << 20;

int64_t ElementBytes(kiln_dtype_t dtype) {
  switch (dtype) {
    case KILN_DTYPE_FLOAT64:
    case KILN_DTYPE_INT64:
      return 8;
    case KILN_DTYPE_FLOAT32:
    case KILN_DTYPE_INT32:
      return 4;
    case KILN_DTYPE_FLOAT16:
    case KILN_DTYPE_INT16:
      return 2;
    case KILN_DTYPE_INT8:
    case KILN_DTYPE_UINT8:
    case KILN_DTYPE_BOOL:
      return 1;
    default:
      return 0;  // a dtype the C header does not name (the manifest knows more)
  }
}

void CheckFailed(kiln_status_t status, const char* call) {
  if (status == KILN_OK) return;
  if (kiln_last_error_message()[0] == '\0') kiln::fuzz::Fail(std::string(call) + " failed without a message");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  if (bytes.size() >= kiln::package::kTrailerSize) {
    const size_t body = bytes.size() - kiln::package::kTrailerSize;
    const kiln::Sha256Bytes hash = kiln::Sha256(std::string_view(bytes).substr(0, body));
    std::memcpy(bytes.data() + body, hash.data(), hash.size());
  }
  kiln_package_t* package = nullptr;
  kiln_status_t status = kiln_package_load_bytes(bytes.data(), bytes.size(), &package);
  CheckFailed(status, "kiln_package_load_bytes");
  if (status != KILN_OK) return 0;
  (void)std::strlen(kiln_package_target(package));
  (void)std::strlen(kiln_package_digest(package));

  kiln_session_t* session = nullptr;
  status = kiln_session_create(package, 1, &session);
  kiln_package_release(package);  // the session keeps it alive
  CheckFailed(status, "kiln_session_create");
  if (status != KILN_OK) return 0;

  int64_t dims[KILN_MAX_RANK];
  kiln_dtype_t dtype;
  int rank = 0;
  for (int i = 0; i < kiln_session_num_inputs(session); ++i) {
    const char* name = kiln_session_input_name(session, i);
    if (name == nullptr) kiln::fuzz::Fail("input without a name");
    status = kiln_session_input_info(session, i, &dtype, dims, &rank);
    CheckFailed(status, "kiln_session_input_info");
    if (status != KILN_OK) continue;
    // An input of the size its dtype and dims give is accepted; one byte more is refused.
    int64_t input_bytes = ElementBytes(dtype);
    for (int d = 0; d < rank && input_bytes <= kMaxInputBytes; ++d) input_bytes *= dims[d];
    if (input_bytes <= 0 || input_bytes > kMaxInputBytes) continue;
    std::vector<char> zeros(static_cast<size_t>(input_bytes) + 1);
    if (kiln_session_set_input(session, name, zeros.data(), zeros.size()) == KILN_OK) {
      kiln::fuzz::Fail(std::string("input '") + name + "' accepted a wrong size");
    }
    status = kiln_session_set_input(session, name, zeros.data(), zeros.size() - 1);
    if (status != KILN_OK) {
      kiln::fuzz::Fail(std::string("input '") + name + "' refused its own size: " + kiln_last_error_message());
    }
  }
  for (int i = 0; i < kiln_session_num_outputs(session); ++i) {
    if (kiln_session_output_name(session, i) == nullptr) kiln::fuzz::Fail("output without a name");
    const void* out = nullptr;
    size_t out_bytes = 0;
    CheckFailed(kiln_session_output(session, i, &out, &out_bytes, &dtype, dims, &rank), "kiln_session_output");
  }
  kiln_session_release(session);
  return 0;
}
