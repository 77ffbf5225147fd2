// The package manifest as the runtime sees it: plain structs decoded straight
// from the kiln.v1.PackageManifest wire format (proto/kiln/v1/package.proto), so
// the runtime reads packages without linking protobuf. Fields a runtime does not
// need (node lists, compile provenance) are skipped, as are fields it does not
// know: a newer writer's additions load in an older runtime unless the format
// version says otherwise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "client/runtime/status.h"

namespace kiln::runtime {

// Numerically equal to kiln.v1.DataType and kiln_dtype_t.
enum class DataType : int32_t {
  kUnspecified = 0,
  kFloat32 = 1,
  kFloat16 = 2,
  kFloat64 = 3,
  kInt8 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kUint8 = 8,
  kBool = 9,
  kUint16 = 10,
  kUint32 = 11,
  kUint64 = 12,
  kBfloat16 = 13,
};

// Bytes per element; 0 for unspecified or unknown values.
int64_t DataTypeSize(DataType dtype);
// "FLOAT32", ... ; "DATA_TYPE_<n>" for unknown values.
std::string DataTypeName(DataType dtype);

struct ManifestTensor {
  std::string name;
  DataType dtype = DataType::kUnspecified;
  std::vector<int64_t> dims;
  int32_t buffer = 0;
};

struct ManifestBuffer {
  // kiln.v1.PackageBuffer.Kind.
  enum Kind : int32_t { kUnspecified = 0, kInput = 1, kOutput = 2, kConstant = 3, kScratch = 4 };
  Kind kind = kUnspecified;
  int64_t size_bytes = 0;
  int64_t offset = 0;
  std::string name;
};

// kiln.v1.PackageLaunch: a CUDA step's grid.
struct ManifestLaunch {
  int64_t blocks = 0;
  int32_t threads = 0;
  int32_t shared_bytes = 0;
};

struct ManifestStep {
  std::string symbol;
  std::vector<int32_t> args;
  int64_t num_tasks = 0;  // CPU packages
  int32_t group = 0;
  ManifestLaunch launch;  // CUDA packages
};

// kiln.v1.PackageDevice.
enum class Device : int32_t { kCpu = 0, kCuda = 1 };

// kiln.v1.PackageCuda: a CUDA package's SM, sections and device plan.
struct ManifestCuda {
  int32_t sm = 0;
  int64_t ptx_offset = 0;
  int64_t ptx_size = 0;
  int64_t cubin_offset = 0;
  int64_t cubin_size = 0;
  std::string cubin_missing;
  std::string ptxas_version;
  int64_t arena_bytes = 0;
  int64_t buffer_alignment = 0;
};

struct ManifestGroup {
  std::string workload_key;
  std::string kind;
  std::string schedule_config;
  std::vector<std::string> nodes;  // the model nodes it computes
  double flops = 0;
  double bytes = 0;
};

struct Manifest {
  int32_t format_version = 0;
  std::string compiler_version;
  std::string target_triple;
  std::string target_cpu;
  std::string target_features;  // LLVM spelling: "+avx2,+fma,-avx512f,..."
  std::string isa_level;        // "x86-64-v3", ...; empty in packages from before it was recorded
  std::string model_name;
  std::vector<ManifestTensor> inputs;
  std::vector<ManifestTensor> outputs;
  std::vector<ManifestBuffer> buffers;
  std::vector<ManifestStep> steps;
  std::vector<ManifestGroup> groups;
  int64_t arena_bytes = 0;
  int64_t code_offset = 0;
  int64_t code_size = 0;
  int64_t weights_offset = 0;
  int64_t weights_size = 0;
  int32_t tuned_threads = 0;
  Device device = Device::kCpu;  // may hold a value this runtime does not know
  bool has_cuda = false;         // whether the manifest has a PackageCuda
  ManifestCuda cuda;
};

// INVALID_ARGUMENT naming the field for malformed wire data (truncated varint or
// length, a known field with the wrong wire type, a deprecated group); never
// reads outside [data, data + size).
Result<Manifest> DecodeManifest(const uint8_t* data, size_t size);

}  // namespace kiln::runtime
