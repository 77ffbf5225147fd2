// The CUDA driver loader: its declarations against the toolkit's cuda.h
// (where the build found one), every entry point resolved from a real
// libcuda's export table (the toolkit's stub library: the same symbols as
// the driver, every call failing), and each way loading fails, named.
#include "client/runtime/cuda_driver.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#ifdef KILN_CUDA_H
#include KILN_CUDA_H
#endif

namespace kiln::runtime {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

#ifdef KILN_CUDA_H
// The values and types cuda_driver.h spells by hand are cuda.h's.
static_assert(cu::kSuccess == CUDA_SUCCESS);
static_assert(cu::kErrorOutOfMemory == CUDA_ERROR_OUT_OF_MEMORY);
static_assert(cu::kErrorNoDevice == CUDA_ERROR_NO_DEVICE);
static_assert(cu::kComputeCapabilityMajor == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
static_assert(cu::kComputeCapabilityMinor == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
static_assert(cu::kJitErrorLogBuffer == CU_JIT_ERROR_LOG_BUFFER);
static_assert(cu::kJitErrorLogBufferSizeBytes == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES);
static_assert(cu::kStreamNonBlocking == CU_STREAM_NON_BLOCKING);
static_assert(cu::kEventDefault == CU_EVENT_DEFAULT);
static_assert(cu::kEventDisableTiming == CU_EVENT_DISABLE_TIMING);
static_assert(cu::kPointerAttributeDeviceOrdinal == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL);
static_assert(cu::kPointerAttributeRangeStartAddr == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR);
static_assert(cu::kPointerAttributeRangeSize == CU_POINTER_ATTRIBUTE_RANGE_SIZE);
static_assert(std::is_same_v<cu::DevicePtr, CUdeviceptr>);
static_assert(std::is_same_v<cu::Device, CUdevice>);
static_assert(std::is_same_v<cu::Context, CUcontext> && std::is_same_v<cu::Module, CUmodule> &&
              std::is_same_v<cu::Function, CUfunction> && std::is_same_v<cu::Stream, CUstream> &&
              std::is_same_v<cu::Event, CUevent>);
static_assert(sizeof(cu::Result) == sizeof(CUresult) && sizeof(int) == sizeof(CUdevice_attribute) &&
              sizeof(int) == sizeof(CUjit_option) && sizeof(int) == sizeof(CUpointer_attribute));
constexpr bool kCheckedAgainstCudaH = true;
#else
constexpr bool kCheckedAgainstCudaH = false;
#endif

TEST(CudaDriverTest, DeclarationsAreCudaHs) {
  if (!kCheckedAgainstCudaH) GTEST_SKIP() << "no cuda.h was found at configure time: the values are unchecked";
  SUCCEED() << "checked at compile time";
}

TEST(CudaDriverTest, AMissingLibraryIsNamed) {
  auto driver = CudaDriver::Load("/nonexistent/libcuda.so.1");
  ASSERT_FALSE(driver.ok());
  EXPECT_EQ(driver.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(driver.status().message(), StartsWith("no CUDA driver could be loaded: /nonexistent/libcuda.so.1: "));
  EXPECT_THAT(driver.status().message(), HasSubstr("cannot open shared object file"));
}

TEST(CudaDriverTest, ALibraryWithoutTheDriverApiIsNamed) {
  auto driver = CudaDriver::Load("libc.so.6");
  ASSERT_FALSE(driver.ok());
  EXPECT_EQ(driver.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(driver.status().message(),
            "the CUDA driver libc.so.6 has no cuInit (Kiln needs a driver of CUDA 11 or later)");
}

// The toolkit's stub libcuda.so exports every driver entry point and fails
// every call: each symbol the runtime asks for exists, and a cuInit failure
// is a clear error rather than a crash.
TEST(CudaDriverTest, EveryEntryPointResolvesInTheToolkitsStub) {
  const std::string ptxas = KILN_PTXAS;
  const std::string bin = "/bin/ptxas";
  if (ptxas.size() < bin.size() || ptxas.compare(ptxas.size() - bin.size(), bin.size(), bin) != 0) {
    GTEST_SKIP() << "no CUDA toolkit was found at configure time (KILN_PTXAS '" << ptxas << "')";
  }
  const std::string stub = ptxas.substr(0, ptxas.size() - bin.size()) + "/lib64/stubs/libcuda.so";
  if (std::FILE* f = std::fopen(stub.c_str(), "rb")) {
    std::fclose(f);
  } else {
    GTEST_SKIP() << "the toolkit has no stub driver at " << stub;
  }
  // In a child process: the stub's SONAME is libcuda.so.1, so once loaded it
  // would answer this process's own dlopen("libcuda.so.1") in later tests.
  EXPECT_EXIT(
      {
        auto driver = CudaDriver::Load(stub);
        std::fprintf(stderr, "%d: %s\n", static_cast<int>(driver.status().code()),
                     driver.ok() ? "loaded" : driver.status().message().c_str());
        std::exit(0);
      },
      ::testing::ExitedWithCode(0),
      // Past dlsym: only the stub's cuInit (CUDA_ERROR_STUB_LIBRARY, 34) refuses.
      "^9: the CUDA driver could not be initialised: cuInit: CUresult 34\n$");
}

// The process's driver: here, without a GPU, an error a package's refusal
// quotes; on a GPU host, an initialised driver.
TEST(CudaDriverTest, TheProcessDriverLoadsOrSaysWhyNot) {
  auto driver = CudaDriver::Get();
  if (!driver.ok()) {
    EXPECT_EQ(driver.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_THAT(driver.status().message(),
                ::testing::AnyOf(StartsWith("no CUDA driver could be loaded: libcuda.so.1: "),
                                 StartsWith("the CUDA driver could not be initialised: cuInit: ")));
    // The outcome is kept: the same answer again, without a second dlopen.
    EXPECT_EQ(CudaDriver::Get().status().message(), driver.status().message());
    GTEST_SKIP() << "no GPU here: " << driver.status().message();
  }
  EXPECT_EQ((*driver)->name(), "libcuda.so.1");
  EXPECT_GE((*driver)->version(), 11000);
  EXPECT_EQ((*driver)->Check(cu::kSuccess, "nothing").ok(), true);
  Status oom = (*driver)->Check(cu::kErrorOutOfMemory, "cuMemAlloc");
  EXPECT_EQ(oom.code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(oom.message(), StartsWith("cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY ("));
}

}  // namespace
}  // namespace kiln::runtime
