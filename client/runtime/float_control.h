// The floating-point control state kernels run under, and how denormal
// (subnormal) floats are treated in them.
//
// On x86-64 the state is MXCSR: rounding mode, exception masks, and the two
// bits that make the CPU treat denormals as zero. Arithmetic that reads or
// produces a denormal takes a microcode assist on Intel cores (on the order
// of a hundred cycles per instruction); a deep network with random or decayed
// weights can fill whole layers with them (keras EfficientNetV2-B0's last
// pointwise convs ran some 20 times slower). Sessions therefore flush by
// default, as TensorFlow and XNNPACK do; a session can keep them (IEEE
// gradual underflow) instead. Elsewhere than x86-64 the state is not touched.
#pragma once

#include <cstdint>

namespace kiln::runtime {

// The calling thread's control word (MXCSR on x86-64; 0 elsewhere).
uint32_t FloatControl();
// Loads `control` into the calling thread's control word (no-op elsewhere).
void SetFloatControl(uint32_t control);
// `control` with denormal inputs read as zero and denormal results flushed
// to zero (MXCSR's DAZ and FTZ) when `flush`, both cleared when not.
uint32_t WithDenormals(uint32_t control, bool flush);
// True if `control` flushes denormals (both bits set).
bool FlushesDenormals(uint32_t control);

// Sets the calling thread's control word for the scope's lifetime and puts
// the previous one back at its end, so the caller's own state is left as it
// was. ThreadPool gives every task of a ParallelFor its caller's word.
class ScopedFloatControl {
 public:
  explicit ScopedFloatControl(uint32_t control);
  ~ScopedFloatControl();
  ScopedFloatControl(const ScopedFloatControl&) = delete;
  ScopedFloatControl& operator=(const ScopedFloatControl&) = delete;

 private:
  uint32_t saved_;
};

}  // namespace kiln::runtime
