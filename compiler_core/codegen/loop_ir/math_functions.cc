// Inline polynomial math for the loop-IR lowering (sin, cos, atan, asin, acos,
// pow, fmod, expm1, log1p, half conversion); see math_functions.h.
#include "compiler_core/codegen/loop_ir/math_functions.h"

#include <cmath>
#include <numbers>

#include "compiler_core/codegen/vector_math.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/DerivedTypes.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Intrinsics.h"

namespace kiln::loop_ir::math {
namespace {

using llvm::Type;
using llvm::Value;

Value* F(Type* t, double v) { return llvm::ConstantFP::get(t, v); }
Value* I(Type* t, uint64_t v) { return llvm::ConstantInt::get(t, v); }

// `t` with its scalar type replaced by `s` (vector shape kept).
Type* WithScalar(Type* t, Type* s) {
  if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(t)) return llvm::FixedVectorType::get(s, vt->getNumElements());
  return s;
}

Value* Poly(llvm::IRBuilderBase& b, Value* x, std::initializer_list<double> c) {
  Type* t = x->getType();
  Value* r = nullptr;
  for (double k : c) {
    r = r == nullptr ? F(t, k) : b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {t}, {r, x, F(t, k)});
  }
  return r;
}

// sin(x + q * pi/2) for f32 x.
Value* SinQuadrant(llvm::IRBuilderBase& b, Value* x, int64_t shift) {
  Type* ft = x->getType();
  Type* dt = WithScalar(ft, b.getDoubleTy());
  Type* it = WithScalar(ft, b.getInt32Ty());
  Value* xd = b.CreateFPExt(x, dt);
  Value* n = b.CreateUnaryIntrinsic(llvm::Intrinsic::roundeven, b.CreateFMul(xd, F(dt, 2.0 / std::numbers::pi)));
  Value* rd = b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {dt},
                                {n, F(dt, -std::numbers::pi / 2), xd});
  rd = b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {dt}, {n, F(dt, -6.123233995736766e-17), rd});
  Value* r = b.CreateFPTrunc(rd, ft);
  Value* q = b.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {it, dt}, {n});
  q = b.CreateAnd(b.CreateAdd(q, I(it, shift)), I(it, 3));
  Value* z = b.CreateFMul(r, r);
  Value* s = b.CreateFAdd(r, b.CreateFMul(b.CreateFMul(z, r),
                                          Poly(b, z, {-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1})));
  Value* c = b.CreateFAdd(b.CreateFSub(F(ft, 1.0), b.CreateFMul(z, F(ft, 0.5))),
                          b.CreateFMul(b.CreateFMul(z, z),
                                       Poly(b, z, {2.443315711809948e-5, -1.388731625493765e-3,
                                                   4.166664568298827e-2})));
  Value* odd = b.CreateICmpNE(b.CreateAnd(q, I(it, 1)), I(it, 0));
  Value* neg = b.CreateICmpNE(b.CreateAnd(q, I(it, 2)), I(it, 0));
  Value* v = b.CreateSelect(odd, c, s);
  return b.CreateSelect(neg, b.CreateFNeg(v), v);
}

// asin(u) for |u| <= 0.5.
Value* AsinCore(llvm::IRBuilderBase& b, Value* u) {
  Value* z = b.CreateFMul(u, u);
  Value* p = Poly(b, z, {4.2163199048e-2, 2.4181311049e-2, 4.5470025998e-2, 7.4953002686e-2, 1.6666752422e-1});
  return b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {u->getType()}, {b.CreateFMul(p, z), u, u});
}

}  // namespace

Value* Atan(llvm::IRBuilderBase& b, Value* x) {
  Type* t = x->getType();
  Value* a = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
  Value* big = b.CreateFCmpOGT(a, F(t, 2.414213562373095));
  Value* mid = b.CreateFCmpOGT(a, F(t, 0.4142135623730950));
  Value* r = b.CreateSelect(big, b.CreateFDiv(F(t, -1.0), a),
                            b.CreateSelect(mid, b.CreateFDiv(b.CreateFSub(a, F(t, 1.0)), b.CreateFAdd(a, F(t, 1.0))), a));
  Value* base = b.CreateSelect(big, F(t, std::numbers::pi / 2), b.CreateSelect(mid, F(t, std::numbers::pi / 4), F(t, 0.0)));
  Value* z = b.CreateFMul(r, r);
  Value* p = Poly(b, z, {8.05374449538e-2, -1.38776856032e-1, 1.99777106478e-1, -3.33329491539e-1});
  Value* y = b.CreateFAdd(base, b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {t}, {b.CreateFMul(p, z), r, r}));
  return b.CreateIntrinsic(llvm::Intrinsic::copysign, {t}, {y, x});
}

Value* Asin(llvm::IRBuilderBase& b, Value* x) {
  Type* t = x->getType();
  Value* a = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
  Value* far = b.CreateFCmpOGT(a, F(t, 0.5));
  // |x| > 0.5: asin(a) = pi/2 - 2 asin(sqrt((1 - a) / 2)); NaN past 1 from the sqrt.
  Value* s = b.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, b.CreateFMul(F(t, 0.5), b.CreateFSub(F(t, 1.0), a)));
  Value* c = AsinCore(b, b.CreateSelect(far, s, a));
  Value* y = b.CreateSelect(far, b.CreateFSub(F(t, std::numbers::pi / 2), b.CreateFAdd(c, c)), c);
  return b.CreateIntrinsic(llvm::Intrinsic::copysign, {t}, {y, x});
}

Value* Acos(llvm::IRBuilderBase& b, Value* x) {
  Type* t = x->getType();
  Value* a = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
  Value* far = b.CreateFCmpOGT(a, F(t, 0.5));
  // |x| > 0.5: acos(x) = 2 asin(sqrt((1 - |x|) / 2)), or pi minus that for x < 0.
  Value* s = b.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, b.CreateFMul(F(t, 0.5), b.CreateFSub(F(t, 1.0), a)));
  Value* c = AsinCore(b, b.CreateSelect(far, s, x));
  Value* twice = b.CreateFAdd(c, c);
  Value* outer = b.CreateSelect(b.CreateFCmpOLT(x, F(t, 0.0)), b.CreateFSub(F(t, std::numbers::pi), twice), twice);
  return b.CreateSelect(far, outer, b.CreateFSub(F(t, std::numbers::pi / 2), c));
}

Value* Sin(llvm::IRBuilderBase& b, Value* x) { return SinQuadrant(b, x, 0); }
Value* Cos(llvm::IRBuilderBase& b, Value* x) { return SinQuadrant(b, x, 1); }

Value* Pow(llvm::IRBuilderBase& b, Value* x, Value* y) {
  Type* t = x->getType();
  Value* ax = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
  Value* r = vector_math::Exp(b, b.CreateFMul(y, vector_math::Log(b, ax)));
  Value* yint = b.CreateFCmpOEQ(b.CreateUnaryIntrinsic(llvm::Intrinsic::trunc, y), y);
  Value* half = b.CreateFMul(y, F(t, 0.5));
  Value* odd = b.CreateAnd(yint, b.CreateFCmpUNE(b.CreateUnaryIntrinsic(llvm::Intrinsic::trunc, half), half));
  Value* neg = b.CreateFCmpOLT(x, F(t, 0.0));
  Value* signed_r = b.CreateSelect(odd, b.CreateFNeg(r), r);
  r = b.CreateSelect(neg, b.CreateSelect(yint, signed_r, F(t, NAN)), r);
  // pow(-inf, y) and pow(+-0, y) for negative odd y keep their sign through exp.
  Value* one = b.CreateOr(b.CreateFCmpOEQ(y, F(t, 0.0)), b.CreateFCmpOEQ(x, F(t, 1.0)));
  return b.CreateSelect(one, F(t, 1.0), r);
}

Value* Fmod(llvm::IRBuilderBase& b, Value* x, Value* y) {
  Type* t = x->getType();
  bool is_f32 = t->getScalarType()->isFloatTy();
  Type* dt = WithScalar(t, b.getDoubleTy());
  Value* xd = is_f32 ? b.CreateFPExt(x, dt) : x;
  Value* yd = is_f32 ? b.CreateFPExt(y, dt) : y;
  Value* q = b.CreateUnaryIntrinsic(llvm::Intrinsic::trunc, b.CreateFDiv(xd, yd));
  Value* r = b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {dt}, {b.CreateFNeg(q), yd, xd});
  // Rounding of x / y can push q one past the true quotient: r then has the
  // wrong sign; step back by y.
  Value* wrong = b.CreateAnd(b.CreateFCmpUNE(r, F(dt, 0.0)),
                             b.CreateXor(b.CreateFCmpOLT(r, F(dt, 0.0)), b.CreateFCmpOLT(xd, F(dt, 0.0))));
  Value* ay = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, yd);
  Value* fix = b.CreateSelect(b.CreateFCmpOLT(xd, F(dt, 0.0)), b.CreateFNeg(ay), ay);
  r = b.CreateSelect(wrong, b.CreateFAdd(r, fix), r);
  // y = +-inf leaves finite x unchanged (x - 0 * inf would be NaN).
  Value* yinf = b.CreateFCmpOEQ(ay, F(dt, INFINITY));
  Value* xfin = b.CreateFCmpOLT(b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, xd), F(dt, INFINITY));
  r = b.CreateSelect(b.CreateAnd(yinf, xfin), xd, r);
  r = b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, r, xd);
  return is_f32 ? b.CreateFPTrunc(r, t) : r;
}

Value* Expm1(llvm::IRBuilderBase& b, Value* x) {
  Type* t = x->getType();
  Value* u = vector_math::Exp(b, x);
  Value* um1 = b.CreateFSub(u, F(t, 1.0));
  Value* k = b.CreateFDiv(b.CreateFMul(um1, x), vector_math::Log(b, u));
  Value* r = b.CreateSelect(b.CreateFCmpOEQ(u, F(t, 1.0)), x, k);
  r = b.CreateSelect(b.CreateFCmpOEQ(um1, F(t, -1.0)), F(t, -1.0), r);
  return b.CreateSelect(b.CreateFCmpOEQ(u, F(t, INFINITY)), u, r);
}

Value* Log1p(llvm::IRBuilderBase& b, Value* x) {
  Type* t = x->getType();
  Value* u = b.CreateFAdd(x, F(t, 1.0));
  Value* k = b.CreateFDiv(b.CreateFMul(vector_math::Log(b, u), x), b.CreateFSub(u, F(t, 1.0)));
  Value* r = b.CreateSelect(b.CreateFCmpOEQ(u, F(t, 1.0)), x, k);
  Value* special = b.CreateOr(b.CreateFCmpOEQ(u, F(t, INFINITY)), b.CreateFCmpOLE(u, F(t, 0.0)));
  return b.CreateSelect(special, vector_math::Log(b, u), r);
}

Value* HalfToFloat(llvm::IRBuilderBase& b, Value* h) {
  Type* it = WithScalar(h->getType(), b.getInt32Ty());
  Type* ft = WithScalar(h->getType(), b.getFloatTy());
  Value* w = b.CreateZExt(h, it);
  Value* sign = b.CreateShl(b.CreateAnd(w, I(it, 0x8000)), 16);
  Value* mag = b.CreateShl(b.CreateAnd(w, I(it, 0x7fff)), 13);
  // Exact for normals and subnormals: the bits scaled by 2^112.
  Value* f = b.CreateFMul(b.CreateBitCast(mag, ft), F(ft, 0x1p112));
  Value* fb = b.CreateBitCast(f, it);
  Value* infnan = b.CreateICmpUGE(mag, I(it, 0x1fu << 23));
  fb = b.CreateSelect(infnan, b.CreateOr(mag, I(it, 0x7f800000)), fb);
  return b.CreateBitCast(b.CreateOr(fb, sign), ft);
}

Value* FloatToHalf(llvm::IRBuilderBase& b, Value* f) {
  Type* it = WithScalar(f->getType(), b.getInt32Ty());
  Type* ft = f->getType();
  Type* ht = WithScalar(f->getType(), b.getInt16Ty());
  Value* bits = b.CreateBitCast(f, it);
  Value* sign = b.CreateAnd(bits, I(it, 0x80000000u));
  Value* a = b.CreateXor(bits, sign);
  const uint32_t kInf = 255u << 23, kMax = (127u + 16) << 23, kMagic = ((127u - 15) + (23 - 10) + 1) << 23;
  Value* big = b.CreateSelect(b.CreateICmpUGT(a, I(it, kInf)), I(it, 0x7e00), I(it, 0x7c00));
  Value* sub = b.CreateSub(
      b.CreateBitCast(b.CreateFAdd(b.CreateBitCast(a, ft), b.CreateBitCast(I(it, kMagic), ft)), it),
      I(it, kMagic));
  Value* odd = b.CreateAnd(b.CreateLShr(a, 13), I(it, 1));
  Value* norm = b.CreateAdd(a, I(it, static_cast<uint32_t>((15 - 127) << 23) + 0xfff));
  norm = b.CreateLShr(b.CreateAdd(norm, odd), 13);
  Value* r = b.CreateSelect(b.CreateICmpULT(a, I(it, 113u << 23)), sub, norm);
  r = b.CreateSelect(b.CreateICmpUGE(a, I(it, kMax)), big, r);
  r = b.CreateOr(r, b.CreateLShr(sign, 16));
  return b.CreateTrunc(r, ht);
}

Value* IntPow(llvm::IRBuilderBase& b, Value* base, Value* e, bool is_signed) {
  Type* t = base->getType();
  Type* et = e->getType();
  auto c = [&](Type* ty, int64_t v) { return llvm::ConstantInt::get(ty, static_cast<uint64_t>(v), true); };
  // Square-and-multiply over the exponent's 63 magnitude bits as SSA values:
  // straight-line code, no loop-carried branches, vectorizes lane-wise.
  Value* result = c(t, 1);
  Value* sq = base;
  for (int k = 0; k < 63; ++k) {
    Value* bit = b.CreateICmpNE(b.CreateAnd(b.CreateLShr(e, c(et, k)), c(et, 1)), c(et, 0));
    result = b.CreateSelect(bit, b.CreateMul(result, sq), result);
    sq = b.CreateMul(sq, sq);
  }
  // Negative exponents: trunc(base ** e) survives only for base 1 and -1.
  Value* one = c(t, 1);
  Value* odd = b.CreateICmpNE(b.CreateAnd(e, c(et, 1)), c(et, 0));
  Value* neg = b.CreateSelect(b.CreateICmpEQ(base, one), one, c(t, 0));
  if (is_signed) {
    Value* minus_one = c(t, -1);
    neg = b.CreateSelect(b.CreateICmpEQ(base, minus_one), b.CreateSelect(odd, minus_one, one), neg);
  }
  return b.CreateSelect(b.CreateICmpSLT(e, c(et, 0)), neg, result);
}

Value* BFloat16ToFloat(llvm::IRBuilderBase& b, Value* h) {
  Type* it = WithScalar(h->getType(), b.getInt32Ty());
  Type* ft = WithScalar(h->getType(), b.getFloatTy());
  return b.CreateBitCast(b.CreateShl(b.CreateZExt(h, it), 16), ft);
}

Value* FloatToBFloat16(llvm::IRBuilderBase& b, Value* f) {
  Type* it = WithScalar(f->getType(), b.getInt32Ty());
  Type* ht = WithScalar(f->getType(), b.getInt16Ty());
  Value* bits = b.CreateBitCast(f, it);
  Value* nan = b.CreateICmpUGT(b.CreateAnd(bits, I(it, 0x7fffffffu)), I(it, 0x7f800000u));
  Value* odd = b.CreateAnd(b.CreateLShr(bits, 16), I(it, 1));
  Value* rounded = b.CreateLShr(b.CreateAdd(bits, b.CreateAdd(odd, I(it, 0x7fff))), 16);
  Value* quiet = b.CreateOr(b.CreateLShr(bits, 16), I(it, 0x40));
  return b.CreateTrunc(b.CreateSelect(nan, quiet, rounded), ht);
}

}  // namespace kiln::loop_ir::math
