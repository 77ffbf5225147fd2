// Device discovery: what this worker measures on, as the kiln.v1.DeviceInfo it
// registers with. CPU facts come from LLVM's host detection and /proc; CUDA facts
// from the driver library loaded at run time (Kiln never links CUDA).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kiln/v1/worker.pb.h"

namespace kiln::worker {

// This host's CPU: kind "cpu", arch "x86_64", cpu_name and the sorted enabled
// features of CpuTarget::Host() ("avx2", no '+'), device_model from
// /proc/cpuinfo's "model name", cores, physical memory.
kiln::v1::DeviceInfo DescribeCpu();

// CUDA device `ordinal` through libcuda.so.1 loaded with dlopen: kind "cuda",
// arch "sm_XY", device name, driver version, memory, SM count as cores.
// UNAVAILABLE "no CUDA driver: ..." when the driver cannot be loaded or has no
// such device.
absl::StatusOr<kiln::v1::DeviceInfo> DescribeCuda(int ordinal);

// The N of a "cuda:N" (or "gpu:N", or "cuda": 0) device spec;
// INVALID_ARGUMENT otherwise.
absl::StatusOr<int> CudaOrdinalOf(const std::string& spec);

// Parses a --device spec: "cpu" or "cuda:N". INVALID_ARGUMENT otherwise.
absl::StatusOr<kiln::v1::DeviceInfo> DescribeDevice(const std::string& spec);

// Enabled features of an LLVM feature string ("+avx2,-avx512f,+fma" -> {"avx2",
// "fma"}), sorted and de-duplicated. Entries without a sign count as enabled.
std::vector<std::string> EnabledFeatures(const std::string& llvm_features);

}  // namespace kiln::worker
