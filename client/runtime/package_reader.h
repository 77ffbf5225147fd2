// Reads and verifies a Kiln package (.kpkg): header, manifest, code, weights, trailer.
// The byte layout is in proto/kiln/v1/package_layout.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "client/runtime/manifest.h"
#include "client/runtime/object_loader.h"
#include "client/runtime/status.h"

namespace kiln::runtime {

// An immutable, fully verified package in memory. Load checks the magic and
// format version, the SHA-256 trailer (DATA_LOSS on mismatch), and every offset,
// size and index in the manifest (INVALID_ARGUMENT): sections and constant
// buffers lie inside the file, scratch buffers inside the arena, step arguments
// and tensors name existing buffers, tensor sizes match their buffers. A
// truncated or corrupt file is an error, never a crash. The file is held in
// 64-byte aligned memory, so weights() and every constant buffer in it are
// aligned as the writer laid them out. A package whose target CPU features this
// host lacks is FAILED_PRECONDITION naming them (cpu_features.h): running it
// would be an illegal instruction. Thread-safe after Load.
class Package {
 public:
  static Result<std::unique_ptr<Package>> Load(const std::string& path);
  // `name` stands for the path in error messages.
  static Result<std::unique_ptr<Package>> FromBytes(std::string_view bytes, const std::string& name = "<memory>");
  ~Package();
  Package(const Package&) = delete;
  Package& operator=(const Package&) = delete;

  const Manifest& manifest() const { return manifest_; }
  // "sha256:<hex>" of the whole file.
  const std::string& digest() const { return digest_; }
  // The ELF relocatable object holding every kernel.
  std::string_view code() const;
  const uint8_t* weights() const { return weights_; }
  size_t weights_size() const { return static_cast<size_t>(manifest_.weights_size); }
  const std::string& name() const { return name_; }

  // The code object, loaded and relocated on first call and then shared by every
  // session; the result (or the error) is cached. Thread-safe.
  Result<const LoadedObject*> Object() const;

 private:
  Package() = default;
  Status Verify();

  std::string name_;
  uint8_t* data_ = nullptr;  // 64-byte aligned copy of the file
  size_t size_ = 0;
  const uint8_t* weights_ = nullptr;
  uint8_t* weights_copy_ = nullptr;  // only if the file's weights are misaligned
  Manifest manifest_;
  std::string digest_;

  mutable std::once_flag object_once_;
  mutable Status object_status_;
  mutable std::unique_ptr<LoadedObject> object_;
};

}  // namespace kiln::runtime
