// Device discovery for the worker: host CPU via LLVM/proc, CUDA via dlopen.
#include "worker/device_info.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <fstream>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/codegen/target.h"
#include "compiler_core/driver/version.h"

namespace kiln::worker {
namespace {

std::string CpuModelName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, "model name")) {
      size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      return std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
    }
  }
  return "";
}

int64_t PhysicalMemoryBytes() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return static_cast<int64_t>(pages) * page_size;
}

}  // namespace

std::vector<std::string> EnabledFeatures(const std::string& llvm_features) {
  std::vector<std::string> out;
  for (absl::string_view f : absl::StrSplit(llvm_features, ',', absl::SkipWhitespace())) {
    f = absl::StripAsciiWhitespace(f);
    if (f.empty() || f[0] == '-') continue;
    if (f[0] == '+') f.remove_prefix(1);
    if (!f.empty()) out.emplace_back(f);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

kiln::v1::DeviceInfo DescribeCpu() {
  CpuTarget host = CpuTarget::Host();
  kiln::v1::DeviceInfo info;
  info.set_kind("cpu");
  info.set_arch("x86_64");
  info.set_cpu_name(host.cpu);
  for (const std::string& f : EnabledFeatures(host.features)) info.add_features(f);
  info.set_device_model(CpuModelName());
  info.set_cores(static_cast<int32_t>(std::thread::hardware_concurrency()));
  info.set_memory_bytes(PhysicalMemoryBytes());
  info.set_space_version(kScheduleSpaceVersion);
  info.set_compiler_version(kCompilerVersion);
  return info;
}

absl::StatusOr<kiln::v1::DeviceInfo> DescribeCuda(int ordinal) {
  // The driver API's few entry points we need, resolved by name (CUresult is an
  // int enum; CUdevice an int).
  using InitFn = int (*)(unsigned int);
  using DeviceGetCountFn = int (*)(int*);
  using DeviceGetFn = int (*)(int*, int);
  using DeviceGetNameFn = int (*)(char*, int, int);
  using DeviceGetAttributeFn = int (*)(int*, int, int);
  using DeviceTotalMemFn = int (*)(size_t*, int);
  using DriverGetVersionFn = int (*)(int*);
  constexpr int kAttrMultiprocessorCount = 16;
  constexpr int kAttrComputeCapabilityMajor = 75;
  constexpr int kAttrComputeCapabilityMinor = 76;

  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* err = dlerror();
    return absl::UnavailableError(
        absl::StrCat("no CUDA driver: cannot load libcuda.so.1: ", err ? err : "unknown error"));
  }
  auto init = reinterpret_cast<InitFn>(dlsym(lib, "cuInit"));
  auto get_count = reinterpret_cast<DeviceGetCountFn>(dlsym(lib, "cuDeviceGetCount"));
  auto get_device = reinterpret_cast<DeviceGetFn>(dlsym(lib, "cuDeviceGet"));
  auto get_name = reinterpret_cast<DeviceGetNameFn>(dlsym(lib, "cuDeviceGetName"));
  auto get_attr = reinterpret_cast<DeviceGetAttributeFn>(dlsym(lib, "cuDeviceGetAttribute"));
  auto total_mem = reinterpret_cast<DeviceTotalMemFn>(dlsym(lib, "cuDeviceTotalMem_v2"));
  auto driver_version = reinterpret_cast<DriverGetVersionFn>(dlsym(lib, "cuDriverGetVersion"));
  // The library stays loaded for the life of the process (the driver does not
  // support being unloaded cleanly).
  if (!init || !get_count || !get_device || !get_name || !get_attr || !total_mem ||
      !driver_version) {
    return absl::UnavailableError("no CUDA driver: libcuda.so.1 lacks driver API entry points");
  }
  if (int rc = init(0); rc != 0) {
    return absl::UnavailableError(absl::StrCat("no CUDA driver: cuInit failed with error ", rc));
  }
  int count = 0;
  if (int rc = get_count(&count); rc != 0) {
    return absl::UnavailableError(absl::StrCat("no CUDA driver: cuDeviceGetCount failed with error ", rc));
  }
  if (ordinal < 0 || ordinal >= count) {
    return absl::UnavailableError(
        absl::StrCat("no CUDA device cuda:", ordinal, ": the driver sees ", count, " device(s)"));
  }
  int dev = 0;
  if (int rc = get_device(&dev, ordinal); rc != 0) {
    return absl::UnavailableError(absl::StrCat("cuda:", ordinal, ": cuDeviceGet failed with error ", rc));
  }
  char name[256] = {0};
  int major = 0, minor = 0, sms = 0, version = 0;
  size_t mem = 0;
  get_name(name, sizeof(name) - 1, dev);
  get_attr(&major, kAttrComputeCapabilityMajor, dev);
  get_attr(&minor, kAttrComputeCapabilityMinor, dev);
  get_attr(&sms, kAttrMultiprocessorCount, dev);
  total_mem(&mem, dev);
  driver_version(&version);

  kiln::v1::DeviceInfo info;
  info.set_kind("cuda");
  info.set_arch(absl::StrCat("sm_", major, minor));
  info.set_device_model(name);
  // cuDriverGetVersion gives 1000*major + 10*minor, e.g. 12040 -> "12.4".
  info.set_driver_version(absl::StrCat(version / 1000, ".", (version % 1000) / 10));
  info.set_memory_bytes(static_cast<int64_t>(mem));
  info.set_cores(sms);
  return info;
}

absl::StatusOr<int> CudaOrdinalOf(const std::string& spec) {
  if (spec == "cuda") return 0;
  absl::string_view rest = spec;
  if (absl::ConsumePrefix(&rest, "cuda:") || absl::ConsumePrefix(&rest, "gpu:")) {
    int ordinal = 0;
    if (!absl::SimpleAtoi(rest, &ordinal) || ordinal < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad device \"", spec, "\": expected cuda:N with N >= 0"));
    }
    return ordinal;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("bad device \"", spec, "\": expected \"cpu\" or \"cuda:N\""));
}

absl::StatusOr<kiln::v1::DeviceInfo> DescribeDevice(const std::string& spec) {
  if (spec == "cpu") return DescribeCpu();
  absl::StatusOr<int> ordinal = CudaOrdinalOf(spec);
  if (!ordinal.ok()) return ordinal.status();
  return DescribeCuda(*ordinal);
}

}  // namespace kiln::worker
