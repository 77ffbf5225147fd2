// 16-bit float conversions (see float16.h).
#include "compiler_core/ir/float16.h"

#include <cmath>
#include <cstring>

namespace kiln {

float HalfToFloat(uint16_t h) {
  const bool negative = (h & 0x8000) != 0;
  const uint32_t exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ff;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in float
    float v = std::ldexp(static_cast<float>(mant), -24);
    return negative ? -v : v;
  }
  uint32_t bits = (negative ? 0x80000000u : 0u) | (mant << 13);
  bits |= exp == 31 ? 0x7f800000u : (exp + 112) << 23;  // inf/NaN, or rebias 15 -> 127
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t abs = x & 0x7fffffff;
  if (abs > 0x7f800000) return sign | 0x7e00 | ((abs >> 13) & 0x3ff);  // NaN, kept quiet
  if (abs >= 0x477ff000) return sign | 0x7c00;  // >= 65520 rounds to infinity
  if (abs < 0x38800000) {  // below 2^-14: subnormal half, round(|f| * 2^24) to even
    float a;
    std::memcpy(&a, &abs, sizeof a);
    double scaled = static_cast<double>(a) * 16777216.0;
    double r = std::floor(scaled);
    double frac = scaled - r;
    if (frac > 0.5 || (frac == 0.5 && std::fmod(r, 2.0) != 0)) r += 1;
    return sign | static_cast<uint16_t>(r);  // 1024 is the smallest normal, also correct
  }
  const uint32_t mant = abs & 0x7fffff;
  uint32_t h = (((abs >> 23) - 112) << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;  // a carry into the exponent is right
  return sign | static_cast<uint16_t>(h);
}

float BFloat16ToFloat(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t FloatToBFloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);  // NaN, kept quiet
  x += 0x7fff + ((x >> 16) & 1);  // round to nearest even; a carry into the exponent is right
  return static_cast<uint16_t>(x >> 16);
}

bool IsNarrowFloat(DType t) { return t == DType::kFloat16 || t == DType::kBFloat16; }

float NarrowToFloat(DType t, uint16_t bits) { return t == DType::kBFloat16 ? BFloat16ToFloat(bits) : HalfToFloat(bits); }

uint16_t FloatToNarrow(DType t, float f) { return t == DType::kBFloat16 ? FloatToBFloat16(f) : FloatToHalf(f); }

}  // namespace kiln
