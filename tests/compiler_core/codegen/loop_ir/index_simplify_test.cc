// Index simplification (compiler_core/codegen/loop_ir/index_simplify.h): the
// divisions and remainders of composed data-movement indices cancel where loop
// extents, Let values and split-tail guards bound them, and stay where nothing
// does (data-dependent or possibly negative indices).
#include "compiler_core/codegen/loop_ir/index_simplify.h"

#include <string>

#include "compiler_core/codegen/loop_ir/printer.h"
#include "compiler_core/codegen/loop_ir/verifier.h"
#include "gtest/gtest.h"

namespace kiln::loop_ir {
namespace {

Expr I(int64_t v) { return IntImm(v); }

std::string Simplified(const LoopFunc& f) {
  LoopFunc s = SimplifyIndices(f);
  EXPECT_TRUE(Verify(s).ok()) << Print(s);
  return Print(s);
}

// A channel shuffle's read: Reshape [4,784] -> [4,28,28] composed as a flat
// index unflattened again.
TEST(IndexSimplifyTest, UnflatteningAFlatIndexCancels) {
  Buffer in = MakeBuffer("in0", {4, 28, 28}, BufferRole::kInput, 0);
  Buffer out = MakeBuffer("out0", {4, 28, 28}, BufferRole::kOutput, 1);
  Expr c = Var("c"), h = Var("h"), w = Var("w");
  Expr flat = Add(Add(Mul(c, I(784)), Mul(h, I(28))), w);
  Expr read = Load(in, {Div(flat, I(784)), Mod(Div(flat, I(28)), I(28)), Mod(flat, I(28))});
  Stmt body = For("c", I(4), For("h", I(28), For("w", I(28), Store(out, {c, h, w}, read))));
  std::string text = Simplified(LoopFunc{"k", {in, out}, body});
  EXPECT_EQ(text.find(" / "), std::string::npos) << text;
  EXPECT_EQ(text.find(" % "), std::string::npos) << text;
}

// A vectorized split with a masked tail: `wo*16 + wi < 28` bounds the
// remainder, so `% 28` still cancels.
TEST(IndexSimplifyTest, SplitTailGuardBoundsTheRemainder) {
  Buffer in = MakeBuffer("in0", {28, 28}, BufferRole::kInput, 0);
  Buffer out = MakeBuffer("out0", {28, 28}, BufferRole::kOutput, 1);
  Expr w = Add(Mul(Var("wo"), I(16)), Var("wi"));
  Expr flat = Add(Mul(Var("h"), I(28)), w);
  Stmt store = Store(out, flat, Load(in, Add(Mul(Div(flat, I(28)), I(28)), Mod(flat, I(28)))));
  Stmt body = For("h", I(28), For("wo", I(2), For("wi", I(16), IfThen(Lt(w, I(28)), store), ForKind::kVectorized)));
  std::string text = Simplified(LoopFunc{"k", {in, out}, body});
  EXPECT_EQ(text.find(" / "), std::string::npos) << text;
  EXPECT_EQ(text.find(" % "), std::string::npos) << text;
}

// The guarded `o*16 + v < 91` inside a longer sum (SSD's head: Reshape of a
// [546, HW] conv output to [6, 91] per pixel, read at a*91 + o*16 + v) still
// bounds it: a*91 + (o*16 + v) < 546, so `/ 546` is 0 and `% 546` is the sum.
TEST(IndexSimplifyTest, GuardBoundsPartOfALongerSum) {
  Buffer in = MakeBuffer("in0", {546}, BufferRole::kInput, 0);
  Buffer out = MakeBuffer("out0", {6, 91}, BufferRole::kOutput, 1);
  Expr k = Add(Mul(Var("o"), I(16)), Var("v"));
  Expr flat = Add(Add(Mul(Var("a"), I(91)), Mul(Var("o"), I(16))), Var("v"));
  Expr read = Load(in, Add(Mul(Div(flat, I(546)), I(546)), Mod(flat, I(546))));
  Stmt store = Store(out, Add(Mul(Var("a"), I(91)), k), read);
  Stmt body = For("a", I(6), For("o", I(6), For("v", I(16), IfThen(Lt(k, I(91)), store), ForKind::kVectorized)));
  std::string text = Simplified(LoopFunc{"k", {in, out}, body});
  EXPECT_EQ(text.find(" / "), std::string::npos) << text;
  EXPECT_EQ(text.find(" % "), std::string::npos) << text;
  // Without the guard (o*16 + v reaches 95) the sum can reach 550: the
  // division stays.
  Buffer wide_in = MakeBuffer("in0", {2}, BufferRole::kInput, 0);
  Buffer wide_out = MakeBuffer("out0", {6, 96}, BufferRole::kOutput, 1);
  Expr wide_read = Load(wide_in, Div(flat, I(546)));
  Stmt unguarded = For("a", I(6), For("o", I(6), For("v", I(16), Store(wide_out, Add(Mul(Var("a"), I(96)), k), wide_read),
                                                     ForKind::kVectorized)));
  text = Simplified(LoopFunc{"k", {wide_in, wide_out}, unguarded});
  EXPECT_NE(text.find(" / 546"), std::string::npos) << text;
}

// GroupNorm as exported: a [1, 64*56*56] view of a [1, 64, 56, 56] input, read
// along the flat axis in vectors. No bound removes `/ 3136` or `% 56` from the
// unflattened index, but flattening it again for the load sums back to the
// flat index itself: a contiguous vector load instead of a gather.
TEST(IndexSimplifyTest, UnflattenedThenFlattenedIndexIsTheFlatIndex) {
  Buffer in = MakeBuffer("in0", {64, 56, 56}, BufferRole::kInput, 0);
  Buffer out = MakeBuffer("out0", {200704}, BufferRole::kOutput, 1);
  Expr flat = Add(Mul(Var("o"), I(16)), Var("v"));
  Expr read = Load(in, {Div(Div(flat, I(56)), I(56)), Mod(Div(flat, I(56)), I(56)), Mod(flat, I(56))});
  Stmt body = For("o", I(12544), For("v", I(16), Store(out, flat, read), ForKind::kVectorized));
  std::string text = Simplified(LoopFunc{"k", {in, out}, body});
  EXPECT_EQ(text.find(" / "), std::string::npos) << text;
  EXPECT_EQ(text.find(" % "), std::string::npos) << text;
  // A different divisor does not pair: the read stays unflattened.
  Expr other = Load(in, {Div(flat, I(3136)), Mod(Div(flat, I(56)), I(56)), Mod(flat, I(28))});
  text = Simplified(LoopFunc{"k", {in, out}, For("o", I(12544), For("v", I(16), Store(out, flat, other),
                                                                     ForKind::kVectorized))});
  EXPECT_NE(text.find("% 28"), std::string::npos) << text;
}

// A Let bounds its variable; nested divisions merge.
TEST(IndexSimplifyTest, LetRangesAndNestedDivisions) {
  Buffer in = MakeBuffer("in0", {64}, BufferRole::kInput, 0);
  Buffer out = MakeBuffer("out0", {64}, BufferRole::kOutput, 1);
  Expr t = Var("t");
  Stmt body = For("task", I(8), LetStmt("t", Mul(Var("task"), I(8)),
                                        For("i", I(8), Store(out, Add(t, Var("i")),
                                                             Load(in, Div(Div(Add(t, Var("i")), I(2)), I(4)))))));
  std::string text = Simplified(LoopFunc{"k", {in, out}, body});
  EXPECT_NE(text.find("/ 8"), std::string::npos) << text;  // (t + i) / 8: one division
  EXPECT_EQ(text.find("/ 2"), std::string::npos) << text;
}

// Data-dependent and possibly negative indices keep their division: C's
// truncation differs from floor division below zero.
TEST(IndexSimplifyTest, UnboundedOrNegativeIndicesStay) {
  Buffer idx = MakeBuffer("in0", {8}, BufferRole::kInput, 0, ScalarType::kI64);
  Buffer in = MakeBuffer("in1", {64}, BufferRole::kInput, 1);
  Buffer out = MakeBuffer("out0", {8}, BufferRole::kOutput, 2);
  Expr i = Var("i");
  Stmt data = For("i", I(8), Store(out, i, Load(in, Mod(Add(Mul(i, I(8)), Load(idx, i)), I(8)))));
  std::string a = Simplified(LoopFunc{"k", {idx, in, out}, data});
  EXPECT_NE(a.find(" % "), std::string::npos) << a;
  Stmt negative = For("i", I(8), Store(out, i, Load(in, Div(Sub(Mul(i, I(8)), I(3)), I(8)))));
  std::string b = Simplified(LoopFunc{"k", {idx, in, out}, negative});
  EXPECT_NE(b.find(" / "), std::string::npos) << b;
}

}  // namespace
}  // namespace kiln::loop_ir
