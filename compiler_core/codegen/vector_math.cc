// Inline float math for generated kernels (see vector_math.h).
#include "compiler_core/codegen/vector_math.h"

#include <cmath>

#include "llvm/IR/Constants.h"
#include "llvm/IR/DerivedTypes.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Intrinsics.h"

namespace kiln::vector_math {
namespace {

using llvm::Type;
using llvm::Value;

Value* F32(llvm::IRBuilderBase& b, Type* t, double v) {
  (void)b;
  return llvm::ConstantFP::get(t, v);
}

// i32 with the lane count of `t`.
Type* IntLike(llvm::IRBuilderBase& b, Type* t) {
  if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(t)) {
    return llvm::FixedVectorType::get(b.getInt32Ty(), vt->getNumElements());
  }
  return b.getInt32Ty();
}

// a * b + c, fused where the target has FMA.
Value* MulAdd(llvm::IRBuilderBase& b, Value* x, Value* y, Value* z) {
  return b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {x->getType()}, {x, y, z});
}

// exp(r) for |r| <= ln2/2: 1 + r + c2 r^2 + ... + c7 r^7 (Cephes' expf
// coefficients), in Estrin's form: the odd and even halves and r^2, r^4 in
// parallel, 4 dependent steps where Horner's form took 7, and the leading 1
// added last, in one rounding, as Horner's last step added it (Zen 3, 1
// thread: Exp and Swish over 32 x 112 x 112 4-6% faster; a softmax, bound by
// its instruction count, the same).
Value* ExpPolynomial(llvm::IRBuilderBase& b, Value* r) {
  Type* t = r->getType();
  Value* r2 = b.CreateFMul(r, r);
  Value* r4 = b.CreateFMul(r2, r2);
  Value* q1 = MulAdd(b, F32(b, t, 1.6666665459E-1), r, F32(b, t, 5.0000001201E-1));  // c2 + c3 r
  Value* q2 = MulAdd(b, F32(b, t, 8.3334519073E-3), r, F32(b, t, 4.1665795894E-2));  // c4 + c5 r
  Value* q3 = MulAdd(b, F32(b, t, 1.9875691500E-4), r, F32(b, t, 1.3981999507E-3));  // c6 + c7 r
  Value* low = MulAdd(b, q1, r2, r);                                                    // r + c2 r^2 + c3 r^3
  Value* high = MulAdd(b, q3, r2, q2);                                                  // c4 + ... + c7 r^3
  return b.CreateFAdd(MulAdd(b, high, r4, low), F32(b, t, 1.0));
}

// exp(x) for x in [lo, hi] after clamping (NaN passes through the clamps and
// the arithmetic, so NaN in gives NaN out). Cephes-style: x = n ln2 + r,
// |r| <= ln2/2, n = round(x / ln2) by the 1.5 * 2^23 magic-number trick (no
// float <-> int conversion: n is read from the sum's low mantissa bits), a
// degree-7 polynomial (ExpPolynomial), then scaling by
// 2^n in two steps (2^(n/2) twice) so results down to the denormal range
// are right and n up to 128 overflows to +inf. x <= -103.98 gives 0
// (2^-150 rounds to 0), exp(-inf) = 0 exactly.
Value* ExpClamped(llvm::IRBuilderBase& b, Value* x, double hi) {
  Type* t = x->getType();
  Type* it = IntLike(b, t);
  auto ic = [&](int64_t v) { return llvm::ConstantInt::get(it, v); };
  Value* lo = F32(b, t, -103.972084045410);
  x = b.CreateSelect(b.CreateFCmpOLT(x, lo), lo, x);
  if (hi < HUGE_VAL) {
    Value* h = F32(b, t, hi);
    x = b.CreateSelect(b.CreateFCmpOGT(x, h), h, x);
  }
  const double kMagic = 12582912.0;  // 1.5 * 2^23: adding it rounds to an integer
  Value* v = MulAdd(b, x, F32(b, t, 1.44269504088896341), F32(b, t, kMagic));
  Value* fx = b.CreateFSub(v, F32(b, t, kMagic));
  Value* n = b.CreateSub(b.CreateBitCast(v, it), ic(0x4b400000));  // in [-150, 129]
  Value* r = MulAdd(b, fx, F32(b, t, -0.693359375), x);
  r = MulAdd(b, fx, F32(b, t, 2.12194440e-4), r);
  Value* p = ExpPolynomial(b, r);
  Value* n1 = b.CreateAShr(n, ic(1));
  Value* n2 = b.CreateSub(n, n1);
  auto pow2 = [&](Value* k) { return b.CreateBitCast(b.CreateShl(b.CreateAdd(k, ic(127)), ic(23)), t); };
  return b.CreateFMul(b.CreateFMul(p, pow2(n1)), pow2(n2));
}

}  // namespace

// exp for x <= 88.72 (see ExpClamped); NaN in gives NaN out.
Value* ExpNonPositive(llvm::IRBuilderBase& b, Value* x) { return ExpClamped(b, x, HUGE_VAL); }

Value* Sigmoid(llvm::IRBuilderBase& b, Value* x) {
  Type* t = x->getType();
  Type* it = IntLike(b, t);
  auto ic = [&](int64_t v) { return llvm::ConstantInt::get(it, v); };
  // e = exp(-|x|) for |x| <= 87.3365 (2^-126): the 2^n scale is one
  // exponent field, n in [-126, 0]. Beyond, e stays 2^-126 (a sigmoid of
  // 1.2e-38 for x below -87.3, exactly 1 above +87.3).
  Value* ax = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
  Value* hi = F32(b, t, 87.33654475);
  ax = b.CreateSelect(b.CreateFCmpOGT(ax, hi), hi, ax);
  const double kMagic = 12582912.0;
  Value* v = MulAdd(b, ax, F32(b, t, -1.44269504088896341), F32(b, t, kMagic));
  Value* fx = b.CreateFSub(v, F32(b, t, kMagic));
  Value* n = b.CreateSub(b.CreateBitCast(v, it), ic(0x4b400000));
  Value* r = MulAdd(b, fx, F32(b, t, -0.693359375), b.CreateFNeg(ax));
  r = MulAdd(b, fx, F32(b, t, 2.12194440e-4), r);
  Value* p = ExpPolynomial(b, r);
  Value* e = b.CreateFMul(p, b.CreateBitCast(b.CreateShl(b.CreateAdd(n, ic(127)), ic(23)), t));
  Value* d = b.CreateFAdd(F32(b, t, 1.0), e);
  // 1 / (1 + e) for x >= 0, e / (1 + e) below (and for NaN, which e carries).
  Value* num = b.CreateSelect(b.CreateFCmpOGE(x, F32(b, t, 0.0)), F32(b, t, 1.0), e);
  return b.CreateFDiv(num, d);
}

// exp on the whole line: +inf above 88.72 (the clamp at 89 still overflows
// to +inf in the scaling), 0 far below, NaN kept.
Value* Exp(llvm::IRBuilderBase& b, Value* x) { return ExpClamped(b, x, 89.0); }

// Cephes tanhf: odd polynomial below |x| = 0.625, else (1 - e) / (1 + e) with
// e = exp(-2|x|) and the sign of x. ~2e-7 relative.
Value* Tanh(llvm::IRBuilderBase& b, Value* x) {
  Type* t = x->getType();
  Value* ax = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
  Value* z = b.CreateFMul(x, x);
  Value* p = F32(b, t, -5.70498872745E-3);
  for (double c : {2.06390887954E-2, -5.37397155531E-2, 1.33314422036E-1, -3.33332819422E-1}) {
    p = b.CreateFAdd(b.CreateFMul(p, z), F32(b, t, c));
  }
  Value* small = b.CreateFAdd(b.CreateFMul(b.CreateFMul(p, z), x), x);
  Value* e = ExpNonPositive(b, b.CreateFMul(ax, F32(b, t, -2.0)));
  Value* big = b.CreateFDiv(b.CreateFSub(F32(b, t, 1.0), e), b.CreateFAdd(F32(b, t, 1.0), e));
  big = b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, big, x);
  Value* r = b.CreateSelect(b.CreateFCmpOLT(ax, F32(b, t, 0.625)), small, big);
  return b.CreateSelect(b.CreateFCmpUNO(x, x), x, r);
}

// erf as x * P(x^2) / Q(x^2) on [-4, 4] (Eigen's float rational
// approximation), +-1 beyond. ~4e-7 absolute.
Value* Erf(llvm::IRBuilderBase& b, Value* x) {
  Type* t = x->getType();
  x = b.CreateSelect(b.CreateFCmpOGT(x, F32(b, t, 4.0)), F32(b, t, 4.0), x);
  x = b.CreateSelect(b.CreateFCmpOLT(x, F32(b, t, -4.0)), F32(b, t, -4.0), x);
  Value* x2 = b.CreateFMul(x, x);
  Value* p = F32(b, t, -2.72614225801306e-10);
  for (double c : {2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
                   -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02}) {
    p = b.CreateFAdd(b.CreateFMul(p, x2), F32(b, t, c));
  }
  p = b.CreateFMul(p, x);
  Value* q = F32(b, t, -1.45660718464996e-05);
  for (double c : {-2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
                   -1.42647390514189e-02}) {
    q = b.CreateFAdd(b.CreateFMul(q, x2), F32(b, t, c));
  }
  return b.CreateFDiv(p, q);
}

// Cephes logf: x = m * 2^e with m in [sqrt(1/2), sqrt(2)), log(x) = log1p(m - 1)
// + e ln2 with a degree-8 polynomial for log1p. Denormals are scaled by 2^23
// first; special values are selected at the end.
Value* Log(llvm::IRBuilderBase& b, Value* x) {
  Type* t = x->getType();
  Type* it = IntLike(b, t);
  auto ic = [&](int64_t v) { return llvm::ConstantInt::get(it, v); };
  Value* tiny = b.CreateFCmpOLT(x, F32(b, t, 1.17549435e-38));
  Value* xs = b.CreateSelect(tiny, b.CreateFMul(x, F32(b, t, 8388608.0)), x);
  Value* bits = b.CreateBitCast(xs, it);
  Value* e = b.CreateSub(b.CreateLShr(bits, ic(23)), ic(126));
  e = b.CreateSub(e, b.CreateSelect(tiny, ic(23), ic(0)));
  // Mantissa in [0.5, 1).
  Value* m = b.CreateBitCast(b.CreateOr(b.CreateAnd(bits, ic(0x007fffff)), ic(0x3f000000)), t);
  Value* fe = b.CreateSIToFP(e, t);
  Value* small = b.CreateFCmpOLT(m, F32(b, t, 0.707106781186547524));
  // m < sqrt(1/2): m = 2m - 1, e -= 1; else m = m - 1.
  m = b.CreateSelect(small, b.CreateFSub(b.CreateFAdd(m, m), F32(b, t, 1.0)), b.CreateFSub(m, F32(b, t, 1.0)));
  fe = b.CreateSelect(small, b.CreateFSub(fe, F32(b, t, 1.0)), fe);
  Value* z = b.CreateFMul(m, m);
  Value* p = F32(b, t, 7.0376836292E-2);
  for (double c : {-1.1514610310E-1, 1.1676998740E-1, -1.2420140846E-1, 1.4249322787E-1, -1.6668057665E-1,
                   2.0000714765E-1, -2.4999993993E-1, 3.3333331174E-1}) {
    p = b.CreateFAdd(b.CreateFMul(p, m), F32(b, t, c));
  }
  Value* y = b.CreateFMul(b.CreateFMul(p, m), z);
  y = b.CreateFAdd(y, b.CreateFMul(fe, F32(b, t, -2.12194440e-4)));
  y = b.CreateFSub(y, b.CreateFMul(z, F32(b, t, 0.5)));
  Value* r = b.CreateFAdd(b.CreateFAdd(m, y), b.CreateFMul(fe, F32(b, t, 0.693359375)));
  r = b.CreateSelect(b.CreateFCmpOEQ(x, F32(b, t, 0.0)), F32(b, t, -HUGE_VAL), r);
  r = b.CreateSelect(b.CreateFCmpOEQ(x, F32(b, t, HUGE_VAL)), x, r);
  r = b.CreateSelect(b.CreateFCmpOLT(x, F32(b, t, 0.0)), F32(b, t, NAN), r);
  return b.CreateSelect(b.CreateFCmpUNO(x, x), x, r);
}

}  // namespace kiln::vector_math
