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

// x clamped to [lo, hi] (an infinite bound: no clamp there); NaN passes (the
// ordered compares are false).
Value* Clamp(llvm::IRBuilderBase& b, Value* x, double lo, double hi) {
  Type* t = x->getType();
  if (lo > -HUGE_VAL) x = b.CreateSelect(b.CreateFCmpOLT(x, F32(b, t, lo)), F32(b, t, lo), x);
  if (hi < HUGE_VAL) x = b.CreateSelect(b.CreateFCmpOGT(x, F32(b, t, hi)), F32(b, t, hi), x);
  return x;
}

// The float of type t whose exponent field is the low 9 bits of `biased`
// (2^(biased - 127) for biased in [1, 254]), mantissa zero.
Value* FromExponentField(llvm::IRBuilderBase& b, Value* biased, Type* t) {
  return b.CreateBitCast(b.CreateShl(biased, llvm::ConstantInt::get(biased->getType(), 23)), t);
}

// q(r) with exp(r) = 1 + r q(r) for |r| <= ln2/2: q of degree 4, fitted for
// the least largest relative error of the whole (Lawson's reweighted least
// squares over 4000 Chebyshev nodes; 9.3e-8 with the coefficients rounded to
// float), in Horner's form. Cephes' degree-7 polynomial took two more fused
// multiply-adds and two multiplies; exp, sigmoid and tanh are bound by the
// multiply-add ports, not by latency, in every kernel that uses them (many
// independent lanes), so fewer operations win over Estrin's shorter chain
// (Zen 3, 1 thread: a sigmoid 16.1 -> 9.9 cycles a vector).
Value* ExpTail(llvm::IRBuilderBase& b, Value* r) {
  Type* t = r->getType();
  Value* q = MulAdd(b, F32(b, t, 0x1.0fa7d8p-7), r, F32(b, t, 0x1.573ad0p-5));
  for (double c : {0x1.555a6ep-3, 0x1.fffdc4p-2, 0x1.fffff6p-1}) q = MulAdd(b, q, r, F32(b, t, c));
  return q;
}

// q(r) with expm1(r) = r q(r) for |r| <= ln2/2, for the relative error of
// r q itself (2.3e-8; fitted as ExpTail's q, one degree higher): ExpTail's
// q holds exp's relative error, 1 + r q, but r q alone, near r = 0, only to
// 9.3e-8 / |r|.
Value* ExpM1Tail(llvm::IRBuilderBase& b, Value* r) {
  Type* t = r->getType();
  Value* q = MulAdd(b, F32(b, t, 0x1.6c16a4p-10), r, F32(b, t, 0x1.123d22p-7));
  for (double c : {0x1.555652p-5, 0x1.55547ep-3, 0x1.fffffep-2, 1.0}) q = MulAdd(b, q, r, F32(b, t, c));
  return q;
}

// exp(r) for |r| <= ln2/2.
Value* ExpPolynomial(llvm::IRBuilderBase& b, Value* r) {
  return MulAdd(b, ExpTail(b, r), r, F32(b, r->getType(), 1.0));
}

// y = n ln2 + r with |r| <= ln2/2 for y = k x (the caller clamps; NaN
// passes): Cody and Waite's two-step reduction, n = round(y / ln2) by the
// magic-number trick (no float <-> int conversion) with the exponent bias
// 127 added in, so that the sum's bits are 0x4b400000 + n + 127 (`bits`;
// its exponent is 2^23's, one unit a step, for n + 127 down to -2^22). k is
// folded into the multiply-add that rounds; `y` (already computed by the
// caller) gives r.
struct Reduced {
  Value* r;
  Value* bits;
};
Reduced Reduce(llvm::IRBuilderBase& b, Value* x, double k, Value* y) {
  Type* t = x->getType();
  const double kMagic = 12582912.0 + 127.0;  // 1.5 * 2^23 + the bias
  Value* v = MulAdd(b, x, F32(b, t, k * 1.44269504088896341), F32(b, t, kMagic));
  Value* fx = b.CreateFSub(v, F32(b, t, kMagic));
  Value* r = MulAdd(b, fx, F32(b, t, -0.693359375), y);
  r = MulAdd(b, fx, F32(b, t, 2.12194440e-4), r);
  return {r, b.CreateBitCast(v, IntLike(b, t))};
}

// 2^n as a float from Reduce's bits, for n in [-126, 127]: shifted left by
// 23 they are n + 127 in the exponent field (the magic number's own low 9
// bits are zero).
Value* PowerOfTwo(llvm::IRBuilderBase& b, const Reduced& e, Type* t) { return FromExponentField(b, e.bits, t); }

// exp(x) for x in [lo, hi] after clamping (NaN passes through the clamps and
// the arithmetic, so NaN in gives NaN out): Reduce, ExpPolynomial, then
// scaling by 2^n in two steps (2^(n/2) twice) so results down to the
// denormal range are right and n up to 128 overflows to +inf. x <= -103.98
// gives 0 (2^-150 rounds to 0), exp(-inf) = 0 exactly.
Value* ExpClamped(llvm::IRBuilderBase& b, Value* x, double hi) {
  Type* t = x->getType();
  Type* it = IntLike(b, t);
  auto ic = [&](int64_t v) { return llvm::ConstantInt::get(it, v); };
  x = Clamp(b, x, -103.972084045410, hi);
  Reduced e = Reduce(b, x, 1.0, x);
  Value* n = b.CreateSub(e.bits, ic(0x4b400000 + 127));  // in [-150, 129]
  Value* p = ExpPolynomial(b, e.r);
  Value* n1 = b.CreateAShr(n, ic(1));
  Value* n2 = b.CreateSub(n, n1);
  auto pow2 = [&](Value* k) { return FromExponentField(b, b.CreateAdd(k, ic(127)), t); };
  return b.CreateFMul(b.CreateFMul(p, pow2(n1)), pow2(n2));
}

}  // namespace

// x clamped at ln(2^-126) keeps n + 127 in the exponent field's normal
// range, so 2^n is one shift of Reduce's bits (Exp's two-step scaling, for
// the denormal results, takes seven operations more); below, the result is 0.
// NaN passes the clamp and the arithmetic, and the compare is false for it.
Value* ExpNonPositive(llvm::IRBuilderBase& b, Value* x) {
  Type* t = x->getType();
  const double kLowest = -87.33654475;  // ln(2^-126)
  Value* under = b.CreateFCmpOLT(x, F32(b, t, kLowest));
  Value* c = b.CreateSelect(under, F32(b, t, kLowest), x);
  Reduced e = Reduce(b, c, 1.0, c);
  Value* y = b.CreateFMul(ExpPolynomial(b, e.r), PowerOfTwo(b, e, t));
  return b.CreateSelect(under, F32(b, t, 0.0), y);
}

Value* Sigmoid(llvm::IRBuilderBase& b, Value* x) {
  Type* t = x->getType();
  // e = exp(-x) for |x| <= 87.3365 (2^126), x clamped there first: below
  // -87.3 the result stays 1 / (1 + 2^126) = 1.2e-38, above +87.3 it is 1.
  // 1 / (1 + e) carries e's relative error at most, on both sides of 0: no
  // |x|, no select between two quotients.
  x = Clamp(b, x, -87.33654475, 87.33654475);
  Reduced e = Reduce(b, x, -1.0, b.CreateFNeg(x));
  Value* d = MulAdd(b, ExpPolynomial(b, e.r), PowerOfTwo(b, e, t), F32(b, t, 1.0));
  return b.CreateFDiv(F32(b, t, 1.0), d);
}

// exp on the whole line: +inf above 88.72 (the clamp at 89 still overflows
// to +inf in the scaling), 0 far below, NaN kept.
Value* Exp(llvm::IRBuilderBase& b, Value* x) { return ExpClamped(b, x, 89.0); }

// tanh(|x|) = u / (2 - u) with u = 1 - exp(-2|x|), and the sign of x. u is
// computed as -(2^n - 1) - 2^n r q(r) (exp = 2^n (1 + r q(r))): for
// |x| < 0.17, n = 0 and u = -r q(r) with r = -2|x| exact, so small
// arguments keep their relative precision without a second polynomial.
// |x| is clamped at 10 (tanh(10) rounds to 1), so 2^n stays one exponent
// field. ~2e-7 relative; NaN kept (it passes the clamp and the arithmetic);
// tanh(-0) = -0.
Value* Tanh(llvm::IRBuilderBase& b, Value* x) {
  Type* t = x->getType();
  Value* ax = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
  ax = Clamp(b, ax, -HUGE_VAL, 10.0);
  Reduced e = Reduce(b, ax, -2.0, b.CreateFMul(ax, F32(b, t, -2.0)));
  Value* scale = PowerOfTwo(b, e, t);
  Value* rq = b.CreateFMul(e.r, ExpM1Tail(b, e.r));
  Value* u = MulAdd(b, b.CreateFNeg(scale), rq, b.CreateFSub(F32(b, t, 1.0), scale));
  Value* th = b.CreateFDiv(u, b.CreateFSub(F32(b, t, 2.0), u));
  Type* it = IntLike(b, t);
  Value* sign = b.CreateAnd(b.CreateBitCast(x, it), llvm::ConstantInt::get(it, 0x80000000u));
  return b.CreateBitCast(b.CreateOr(b.CreateBitCast(th, it), sign), t);
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
    p = MulAdd(b, p, x2, F32(b, t, c));
  }
  p = b.CreateFMul(p, x);
  Value* q = F32(b, t, -1.45660718464996e-05);
  for (double c : {-2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
                   -1.42647390514189e-02}) {
    q = MulAdd(b, q, x2, F32(b, t, c));
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
    p = MulAdd(b, p, m, F32(b, t, c));
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
