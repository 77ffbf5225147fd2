// Inline float math for generated kernels, on scalars or vectors of f32:
// polynomial exp, log, tanh, erf and sigmoid emitted as LLVM IR (no libm
// calls: the code vectorizes and packages link standalone). Shared by the
// direct kernel emitter and the loop-IR lowering.
#pragma once

namespace llvm {
class IRBuilderBase;
class Value;
}  // namespace llvm

namespace kiln::vector_math {

// exp(x) for x <= 0 (right up to 88; softmax's exp(x - max)): Exp's
// reduction and polynomial with one 2^n scaling, results that would be
// denormal (x below ln(2^-126) = -87.34) flushed to 0; 15 operations a
// value where Exp takes 23. NaN in gives NaN out; -inf gives 0.
llvm::Value* ExpNonPositive(llvm::IRBuilderBase& b, llvm::Value* x);
// exp on the whole line (Cody and Waite's reduction, a degree-5 polynomial
// as fused multiply-adds, round-to-nearest by the magic-number trick,
// two-step 2^n scaling so results down to the denormal range are right):
// +inf above 88.72, 0 far below (exp(-inf) = 0), NaN kept.
llvm::Value* Exp(llvm::IRBuilderBase& b, llvm::Value* x);
// Natural log (Cephes logf: frexp, sqrt(1/2) range reduction, degree-8
// polynomial); log(0) = -inf, negative or NaN -> NaN, +inf -> +inf. Denormal
// inputs are scaled first.
llvm::Value* Log(llvm::IRBuilderBase& b, llvm::Value* x);
// tanh from one expm1 of -2|x| and one division (no second polynomial for
// small |x|), ~2e-7 relative; tanh(-0) = -0, NaN kept.
llvm::Value* Tanh(llvm::IRBuilderBase& b, llvm::Value* x);
// erf as x * P(x^2) / Q(x^2) on [-4, 4], +-1 beyond; ~4e-7 absolute.
llvm::Value* Erf(llvm::IRBuilderBase& b, llvm::Value* x);
// 1 / (1 + exp(-x)) with x clamped to +-87.3, ~2e-7 relative down to
// 1.2e-38 (x above -87.3); below, 1.2e-38 rather than the denormal (ONNX
// Runtime clamps at -18: 1.5e-8). One exponent-field scaling and one
// division, 16 vector instructions. NaN kept.
llvm::Value* Sigmoid(llvm::IRBuilderBase& b, llvm::Value* x);

}  // namespace kiln::vector_math
