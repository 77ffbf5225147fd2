// Inline math of the loop-IR lowering beyond compiler_core/codegen/vector_math.h: sin,
// cos, atan, asin, acos, pow, fmod, expm1, log1p and IEEE half <-> float conversion, emitted as
// LLVM IR on f32 scalars or vectors (no libm or compiler-rt calls: packages
// are loaded by Kiln's own ELF loader).
#pragma once

namespace llvm {
class IRBuilderBase;
class Value;
}  // namespace llvm

namespace kiln::loop_ir::math {

// Range reduction by pi/2 in f64, Cephes sinf/cosf polynomials on [-pi/4,
// pi/4]; ~1 ulp for |x| < 1e5, NaN for NaN and +-inf.
llvm::Value* Sin(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* Cos(llvm::IRBuilderBase& b, llvm::Value* x);
// C's pow on f32 as exp(y * log|x|) with the sign of odd integer powers of
// negative x; pow(x, 0) = pow(1, y) = 1, negative x to a non-integer is NaN.
llvm::Value* Pow(llvm::IRBuilderBase& b, llvm::Value* x, llvm::Value* y);
// C's fmod (sign of x) for f32 (computed exactly in f64) or f64 operands.
llvm::Value* Fmod(llvm::IRBuilderBase& b, llvm::Value* x, llvm::Value* y);
// Integer base ** i64 exponent (scalars or vectors of equal lanes), exact
// with wrapping; a negative exponent gives trunc(base ** e): 1, -1 or 0.
llvm::Value* IntPow(llvm::IRBuilderBase& b, llvm::Value* base, llvm::Value* e, bool is_signed);
// Cephes atanf/asinf/acosf on f32: range reduction to |x| <= tan(pi/8)
// (atan) or |x| <= 0.5 (asin, acos via sqrt((1 - |x|) / 2)), ~2 ulp; NaN
// outside [-1, 1] for asin and acos.
llvm::Value* Atan(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* Asin(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* Acos(llvm::IRBuilderBase& b, llvm::Value* x);
// exp(x) - 1 and log(1 + x) accurate near 0 (Kahan's correction).
llvm::Value* Expm1(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* Log1p(llvm::IRBuilderBase& b, llvm::Value* x);
// IEEE half bits (i16 scalar or vector) <-> f32, round to nearest even.
llvm::Value* HalfToFloat(llvm::IRBuilderBase& b, llvm::Value* h);
llvm::Value* FloatToHalf(llvm::IRBuilderBase& b, llvm::Value* f);
// bf16 bits (i16 scalar or vector) <-> f32, round to nearest even; NaN stays
// a quiet NaN.
llvm::Value* BFloat16ToFloat(llvm::IRBuilderBase& b, llvm::Value* h);
llvm::Value* FloatToBFloat16(llvm::IRBuilderBase& b, llvm::Value* f);

}  // namespace kiln::loop_ir::math
