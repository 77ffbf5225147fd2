// The 16-bit float formats Kiln stores (f16 tensors hold IEEE half bit
// patterns, bf16 tensors the upper halves of f32 bit patterns, both as
// uint16_t) and their exact widening / round-to-nearest-even narrowing.
// Arithmetic on them happens in f32 everywhere: the interpreter widens, the
// generated code loads into f32 and narrows on store.
#pragma once

#include <cstdint>

#include "compiler_core/ir/dtype.h"

namespace kiln {

// Exact widening of an f16 bit pattern.
float HalfToFloat(uint16_t h);
// Narrowing with round-to-nearest-even; overflow gives infinity, NaN stays NaN.
uint16_t FloatToHalf(float f);

// Exact widening of a bf16 bit pattern.
float BFloat16ToFloat(uint16_t b);
// Narrowing with round-to-nearest-even (overflow gives infinity); NaN stays a
// quiet NaN.
uint16_t FloatToBFloat16(float f);

// f16 or bf16.
bool IsNarrowFloat(DType t);
// The two above by dtype (`t` one of f16, bf16).
float NarrowToFloat(DType t, uint16_t bits);
uint16_t FloatToNarrow(DType t, float f);

}  // namespace kiln
