// CPU features and psABI levels: the levels from LLVM feature strings, and the
// host's answers consistent with each other.
#include "base/cpu_features.h"

#include "gtest/gtest.h"

namespace kiln {
namespace {

TEST(CpuFeaturesTest, IsaLevelOfAFeatureString) {
  EXPECT_EQ(IsaLevelOf(""), "x86-64");
  EXPECT_EQ(IsaLevelOf("+sse4.2,+popcnt"), "x86-64");  // v2 needs cx16, sahf, ssse3 ... too
  EXPECT_EQ(IsaLevelOf("+cx16,+popcnt,+sahf,+sse3,+sse4.1,+sse4.2,+ssse3"), "x86-64-v2");
  const std::string v3 = "+cx16,+popcnt,+sahf,+sse3,+sse4.1,+sse4.2,+ssse3,+avx,+avx2,+bmi,+bmi2,+f16c,+fma,+lzcnt,"
                         "+movbe,+xsave";
  EXPECT_EQ(IsaLevelOf(v3), "x86-64-v3");
  EXPECT_EQ(IsaLevelOf(v3 + ",+avx512f,+avx512bw,+avx512cd,+avx512dq"), "x86-64-v3");  // no avx512vl
  EXPECT_EQ(IsaLevelOf(v3 + ",+avx512f,+avx512bw,+avx512cd,+avx512dq,+avx512vl,-amx-tile"), "x86-64-v4");
  EXPECT_EQ(IsaLevelOf("-avx2,+cx16"), "x86-64");
  EXPECT_TRUE(IsIsaLevel("x86-64-v3"));
  EXPECT_FALSE(IsIsaLevel("x86-64-v5"));
  EXPECT_EQ(IsaLevelFeatures("x86-64-v4").size(), 5u);
}

TEST(CpuFeaturesTest, TheHostAnswersConsistently) {
  // Every x86-64 CPU has SSE2; nobody has a feature named "warp-drive".
  EXPECT_EQ(HostHasFeature("sse2"), true);
  EXPECT_EQ(HostHasFeature("warp-drive"), std::nullopt);
  // The host's level is the level of the features it has.
  std::string have;
  for (const char* level : kIsaLevels) {
    for (const std::string& f : IsaLevelFeatures(level)) {
      if (HostHasFeature(f) == true) have += "+" + f + ",";
    }
  }
  EXPECT_EQ(HostIsaLevel(), IsaLevelOf(have));
  EXPECT_TRUE(MissingHostFeatures(have).empty());
  // Disabled and unknown names are never "missing".
  EXPECT_TRUE(MissingHostFeatures("-avx512fp16,-amx-tile,+warp-drive").empty());
}

TEST(CpuFeaturesTest, MissingFeaturesAreTheEnabledOnesTheHostLacks) {
  const char* rare[] = {"avx512fp16", "amx-tile", "avx512vp2intersect", "xop", "fma4"};
  for (const char* f : rare) {
    if (HostHasFeature(f) == false) {
      std::vector<std::string> missing = MissingHostFeatures(std::string("+sse2,+") + f + ",-avx");
      ASSERT_EQ(missing.size(), 1u);
      EXPECT_EQ(missing[0], f);
      return;
    }
  }
  GTEST_SKIP() << "this host has every rare feature the test knows";
}

}  // namespace
}  // namespace kiln
