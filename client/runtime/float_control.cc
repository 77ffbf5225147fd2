// MXCSR through the SSE intrinsics; the bits are those of Intel's SDM, vol. 1,
// 10.2.3 (FTZ bit 15, DAZ bit 6).
#include "client/runtime/float_control.h"

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

namespace kiln::runtime {
namespace {
constexpr uint32_t kFlushToZero = 1u << 15;       // FTZ: denormal results become 0
constexpr uint32_t kDenormalsAreZero = 1u << 6;   // DAZ: denormal operands read as 0
constexpr uint32_t kDenormalBits = kFlushToZero | kDenormalsAreZero;
}  // namespace

uint32_t FloatControl() {
#if defined(__x86_64__)
  return _mm_getcsr();
#else
  return 0;
#endif
}

void SetFloatControl(uint32_t control) {
#if defined(__x86_64__)
  _mm_setcsr(control);
#else
  (void)control;
#endif
}

uint32_t WithDenormals(uint32_t control, bool flush) {
  return flush ? (control | kDenormalBits) : (control & ~kDenormalBits);
}

bool FlushesDenormals(uint32_t control) { return (control & kDenormalBits) == kDenormalBits; }

ScopedFloatControl::ScopedFloatControl(uint32_t control) : saved_(FloatControl()) {
  if (control != saved_) SetFloatControl(control);
}

ScopedFloatControl::~ScopedFloatControl() {
  if (FloatControl() != saved_) SetFloatControl(saved_);
}

}  // namespace kiln::runtime
