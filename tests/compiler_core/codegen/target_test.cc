// Named CPU targets: psABI levels and LLVM CPU names with their implied
// features, their ISA levels, and a clear error for an unknown name.
#include "compiler_core/codegen/target.h"

#include <string>
#include <utility>
#include <vector>

#include "base/cpu_features.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

TEST(CpuTargetTest, NamedLevelsCarryTheirImpliedFeatures) {
  auto v3 = CpuTarget::Named("x86-64-v3");
  ASSERT_TRUE(v3.ok()) << v3.status();
  EXPECT_EQ(v3->cpu, "x86-64-v3");
  for (const char* f : {"avx2", "avx", "fma", "sse4.2", "bmi2", "movbe"}) EXPECT_TRUE(v3->HasFeature(f)) << f;
  EXPECT_FALSE(v3->HasFeature("avx512f"));
  EXPECT_EQ(v3->VectorBits(), 256);
  EXPECT_EQ(IsaLevelOf(v3->features), "x86-64-v3");
  for (const char* level : {"x86-64", "x86-64-v2", "x86-64-v4"}) {
    auto t = CpuTarget::Named(level);
    ASSERT_TRUE(t.ok()) << level;
    EXPECT_EQ(IsaLevelOf(t->features), level);
  }
  auto skx = CpuTarget::Named("skylake-avx512");
  ASSERT_TRUE(skx.ok());
  EXPECT_EQ(IsaLevelOf(skx->features), "x86-64-v4");
  EXPECT_EQ(skx->VectorBits(), 512);
  // Features sorted, all enabled: the key is stable, and differs per CPU.
  EXPECT_EQ(CpuTarget::Named("x86-64-v3")->Key(), v3->Key());
  EXPECT_NE(skx->Key(), v3->Key());
}

// L2 sizes by CPU name; 1 MiB where the name says nothing (psABI levels).
TEST(CpuTargetTest, L2SizeFollowsTheCpuName) {
  for (const auto& [name, bytes] : std::vector<std::pair<std::string, int64_t>>{{"znver3", 512 << 10},
                                                                                {"znver4", 1 << 20},
                                                                                {"znver5", 1 << 20},
                                                                                {"skylake", 256 << 10},
                                                                                {"skylake-avx512", 1 << 20},
                                                                                {"sapphirerapids", 2 << 20},
                                                                                {"x86-64-v3", 1 << 20}}) {
    auto t = CpuTarget::Named(name);
    ASSERT_TRUE(t.ok()) << name;
    EXPECT_EQ(t->L2Bytes(), bytes) << name;
  }
}

// A host whose model number LLVM names a core without AMX, but whose features
// have AMX tiles (a KVM guest on Sapphire Rapids read as rocketlake), is named
// from its features; other names stay as reported, and the host's own name
// is one CpuTarget::Named knows.
TEST(CpuTargetTest, AHostsNameFollowsItsAmxFeatures) {
  const std::string spr_guest = "+amx-bf16,+amx-int8,+amx-tile,+avx512f,+avx512fp16,-amx-fp16";
  EXPECT_EQ(CpuNameForFeatures("rocketlake", spr_guest), "sapphirerapids");
  EXPECT_EQ(CpuNameForFeatures("icelake-client", spr_guest), "sapphirerapids");
  EXPECT_EQ(CpuNameForFeatures("rocketlake", "+amx-fp16,+amx-tile,+avx512f"), "graniterapids");
  EXPECT_EQ(CpuNameForFeatures("rocketlake", "+avx512f,-amx-tile"), "rocketlake");
  EXPECT_EQ(CpuNameForFeatures("sapphirerapids", spr_guest), "sapphirerapids");
  EXPECT_EQ(CpuNameForFeatures("graniterapids", spr_guest), "graniterapids");
  EXPECT_EQ(CpuNameForFeatures("znver4", "+avx512f,+avx512bf16"), "znver4");
  EXPECT_EQ(CpuTarget::Named("sapphirerapids")->L2Bytes(), 2 << 20);
  const CpuTarget host = CpuTarget::Host();
  EXPECT_TRUE(CpuTarget::Named(host.cpu).ok()) << host.cpu;
  if (host.HasFeature("amx-tile")) EXPECT_EQ(host.L2Bytes(), 2 << 20) << host.cpu;
}

TEST(CpuTargetTest, AnUnknownNameListsTheKnownOnes) {
  auto t = CpuTarget::Named("pentium-9000");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("unknown CPU target 'pentium-9000'"));
  EXPECT_THAT(t.status().message(), HasSubstr("x86-64-v4"));
  EXPECT_THAT(t.status().message(), HasSubstr("znver4"));
  EXPECT_FALSE(CpuTarget::Named("i386").ok());  // 32-bit only
}

}  // namespace
}  // namespace kiln
