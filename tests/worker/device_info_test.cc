// Tests of device discovery: the host CPU description and --device parsing.
#include "worker/device_info.h"

#include <algorithm>

#include "gtest/gtest.h"

namespace kiln::worker {
namespace {

TEST(DeviceInfoTest, DescribesHostCpu) {
  kiln::v1::DeviceInfo info = DescribeCpu();
  EXPECT_EQ(info.kind(), "cpu");
  EXPECT_EQ(info.arch(), "x86_64");
  EXPECT_FALSE(info.cpu_name().empty());
  ASSERT_GT(info.features_size(), 0);
  std::vector<std::string> features(info.features().begin(), info.features().end());
  EXPECT_TRUE(std::is_sorted(features.begin(), features.end()));
  for (const std::string& f : features) {
    EXPECT_FALSE(f.empty());
    EXPECT_NE(f[0], '+') << f;
    EXPECT_NE(f[0], '-') << f;
  }
  // Every x86-64 CPU has SSE2.
  EXPECT_NE(std::find(features.begin(), features.end(), "sse2"), features.end());
  EXPECT_GT(info.cores(), 0);
  EXPECT_GT(info.memory_bytes(), 0);
  EXPECT_FALSE(info.device_model().empty());
}

TEST(DeviceInfoTest, EnabledFeaturesKeepsOnlyEnabledSorted) {
  EXPECT_EQ(EnabledFeatures("+fma,-avx512f,+avx2,sse2,+fma,"),
            (std::vector<std::string>{"avx2", "fma", "sse2"}));
  EXPECT_TRUE(EnabledFeatures("").empty());
}

TEST(DeviceInfoTest, DeviceSpecs) {
  absl::StatusOr<kiln::v1::DeviceInfo> cpu = DescribeDevice("cpu");
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ(cpu->kind(), "cpu");

  for (const char* bad : {"tpu", "cuda:x", "cuda:-1", ""}) {
    absl::StatusOr<kiln::v1::DeviceInfo> r = DescribeDevice(bad);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(DeviceInfoTest, CudaIsDescribedOrClearlyUnavailable) {
  absl::StatusOr<kiln::v1::DeviceInfo> r = DescribeDevice("cuda:0");
  if (r.ok()) {
    EXPECT_EQ(r->kind(), "cuda");
    EXPECT_TRUE(r->arch().rfind("sm_", 0) == 0) << r->arch();
    EXPECT_FALSE(r->device_model().empty());
  } else {
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_TRUE(r.status().message().find("no CUDA") != absl::string_view::npos)
        << r.status();
  }
  // An ordinal far past any machine's device count is never available.
  EXPECT_EQ(DescribeDevice("cuda:999").status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace kiln::worker
