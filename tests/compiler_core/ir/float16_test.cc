// The 16-bit float conversions: every f16 and bf16 bit pattern round-trips
// through f32; narrowing rounds ties to even; overflow and NaN.
#include "compiler_core/ir/float16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace kiln {
namespace {

TEST(Float16Test, HalfRoundTripsAndTiesToEven) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    const bool nan = (bits & 0x7c00) == 0x7c00 && (bits & 0x3ff) != 0;
    if (nan) {
      EXPECT_TRUE(std::isnan(HalfToFloat(bits)));
      continue;
    }
    ASSERT_EQ(FloatToHalf(HalfToFloat(bits)), bits) << h;
  }
  // Ties round to even: 1 + 2^-11 is halfway between 1 and 1 + 2^-10.
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);           // tie to even: 0
  EXPECT_EQ(FloatToHalf(3 * std::ldexp(1.0f, -25)), 0x0002);       // tie to even: 2 * 2^-24
}

float FromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

TEST(Float16Test, BFloat16RoundTripsAndTiesToEven) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const uint16_t bits = static_cast<uint16_t>(b);
    const bool nan = (bits & 0x7f80) == 0x7f80 && (bits & 0x7f) != 0;
    if (nan) {
      EXPECT_TRUE(std::isnan(BFloat16ToFloat(bits)));
      EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(BFloat16ToFloat(bits)))));
      continue;
    }
    ASSERT_EQ(FloatToBFloat16(BFloat16ToFloat(bits)), bits) << b;
  }
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3f80);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: to even (1); 1 + 3 * 2^-8 up.
  EXPECT_EQ(FloatToBFloat16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(FloatToBFloat16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(FloatToBFloat16(FromBits(0x3f808001)), 0x3f81);  // just above the tie: up
  EXPECT_EQ(FloatToBFloat16(std::numeric_limits<float>::max()), 0x7f80);  // rounds to infinity
  EXPECT_EQ(FloatToBFloat16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(FromBits(0x7f800001)))));  // a NaN whose top bits are inf's
}

TEST(Float16Test, ByDType) {
  EXPECT_TRUE(IsNarrowFloat(DType::kFloat16));
  EXPECT_TRUE(IsNarrowFloat(DType::kBFloat16));
  EXPECT_FALSE(IsNarrowFloat(DType::kFloat32));
  EXPECT_EQ(NarrowToFloat(DType::kBFloat16, FloatToNarrow(DType::kBFloat16, 0.1f)), BFloat16ToFloat(0x3dcd));
  EXPECT_EQ(NarrowToFloat(DType::kFloat16, FloatToNarrow(DType::kFloat16, 0.1f)), HalfToFloat(0x2e66));
}

}  // namespace
}  // namespace kiln
