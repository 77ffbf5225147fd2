// Reads and verifies a Kiln package (.kpkg): header, manifest, code, weights, trailer.
// The byte layout is in proto/kiln/v1/package_layout.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include <map>

#include "client/runtime/cuda_driver.h"
#include "client/runtime/cuda_module.h"
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
// page-aligned memory, so weights() and every constant buffer in it are
// aligned as the writer laid them out. A package whose target CPU features this
// host lacks is FAILED_PRECONDITION naming them (cpu_features.h): running it
// would be an illegal instruction.
//
// A CUDA package (manifest().device == kCuda) is checked as well: its PTX and
// cubin lie inside the file, its device plan is aligned and inside the device
// arena, no step's arguments overlap in it; then the CUDA driver must load
// and initialise, else FAILED_PRECONDITION "package 'P': this package is for
// a CUDA GPU (sm_90) and no CUDA driver could be loaded: <dlerror>". A device
// kind this runtime does not know is FAILED_PRECONDITION. Thread-safe after
// Load.
class Package {
 public:
  // `cuda`: the driver for a CUDA package (tests: a fake); null: the
  // process's (CudaDriver::Get). It must outlive the package.
  static Result<std::unique_ptr<Package>> Load(const std::string& path, const CudaDriver* cuda = nullptr);
  // `name` stands for the path in error messages.
  static Result<std::unique_ptr<Package>> FromBytes(std::string_view bytes, const std::string& name = "<memory>",
                                                    const CudaDriver* cuda = nullptr);
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

  bool is_cuda() const { return manifest_.device == Device::kCuda; }
  // A CUDA package's PTX module (text) and cubin (empty when it has none).
  std::string_view ptx() const;
  std::string_view cubin() const;
  // A CUDA package on CUDA device `ordinal`: its kernels and weights loaded
  // there on the first call for that device, then shared by every session on
  // it until the package is released. An error is not kept (a later call
  // tries again). Thread-safe.
  Result<const CudaModule*> Cuda(int ordinal) const;

 private:
  Package() = default;
  Status Verify();
  // The checks only a CUDA package has (Verify calls it after the common ones).
  Status VerifyCuda(const std::string& ctx);

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

  const CudaDriver* cuda_ = nullptr;  // CUDA packages: the driver, once verified
  mutable std::mutex cuda_mutex_;
  mutable std::map<int, std::unique_ptr<CudaModule>> cuda_modules_;  // by device ordinal
};

}  // namespace kiln::runtime
