// Loop IR: printer and verifier golden text, and each schedule primitive's
// effect on a dumped loop nest.
#include "compiler_core/codegen/loop_ir/loop_ir.h"
#include "compiler_core/codegen/loop_ir/printer.h"
#include "compiler_core/codegen/loop_ir/verifier.h"

#include "compiler_core/codegen/loop_ir/schedule.h"
#include "gtest/gtest.h"

namespace kiln::loop_ir {
namespace {

// out[i] = exp(in[i]) over 10 elements.
LoopFunc ExpKernel(Stmt* loop) {
  Buffer in = MakeBuffer("in0", {10}, BufferRole::kInput, 0);
  Buffer out = MakeBuffer("out0", {10}, BufferRole::kOutput, 1);
  *loop = For("i", IntImm(10), Store(out, Var("i"), Call("exp", {Load(in, Var("i"))})));
  return LoopFunc{"k", {in, out}, *loop};
}

TEST(LoopIrTest, PrintsAndVerifies) {
  Stmt loop;
  LoopFunc f = ExpKernel(&loop);
  EXPECT_EQ(Print(f),
            "kernel k(in0: f32[10] input, out0: f32[10] output) {\n"
            "  for (i, 0, 10) {\n"
            "    out0[i] = exp(in0[i])\n"
            "  }\n"
            "}\n");
  EXPECT_TRUE(Verify(f).ok());
}

TEST(LoopIrTest, PrintsAllocateLetIfAndSelect) {
  Buffer in = MakeBuffer("in0", {4, 3}, BufferRole::kInput, 0);
  Buffer out = MakeBuffer("out0", {4}, BufferRole::kOutput, 1);
  Buffer acc = MakeBuffer("acc", {1}, BufferRole::kTemp);
  Stmt body = For("r", IntImm(4),
                  Allocate(acc, Block({Store(acc, IntImm(0), FloatImm(0)),
                                       For("k", IntImm(3),
                                           Store(acc, IntImm(0), Add(Load(acc, IntImm(0)), Load(in, {Var("r"), Var("k")})))),
                                       LetStmt("s", Load(acc, IntImm(0)),
                                               IfThen(Gt(Var("s", ScalarType::kF32), FloatImm(0)),
                                                      Store(out, Var("r"), Var("s", ScalarType::kF32)),
                                                      Store(out, Var("r"), FloatImm(-0.5))))})),
                  ForKind::kParallel);
  LoopFunc f{"sum", {in, out}, body};
  EXPECT_EQ(Print(f),
            "kernel sum(in0: f32[4,3] input, out0: f32[4] output) {\n"
            "  parallel for (r, 0, 4) {\n"
            "    allocate acc: f32[1] {\n"
            "      acc[0] = 0.0f\n"
            "      for (k, 0, 3) {\n"
            "        acc[0] = (acc[0] + in0[((r * 3) + k)])\n"
            "      }\n"
            "      let s = acc[0] {\n"
            "        if ((s > 0.0f)) {\n"
            "          out0[r] = s\n"
            "        } else {\n"
            "          out0[r] = -0.5f\n"
            "        }\n"
            "      }\n"
            "    }\n"
            "  }\n"
            "}\n");
  EXPECT_TRUE(Verify(f).ok()) << Verify(f);
  EXPECT_EQ(NumTasks(f), 4);
}

TEST(LoopIrTest, VerifierRejectsBadIr) {
  Buffer in = MakeBuffer("in0", {10}, BufferRole::kInput, 0);
  Buffer out = MakeBuffer("out0", {10}, BufferRole::kOutput, 1);
  // Undefined variable.
  LoopFunc a{"a", {in, out}, Store(out, Var("j"), FloatImm(1))};
  EXPECT_NE(Verify(a).message().find("variable j is used before it is defined"), std::string::npos) << Verify(a);
  // Out of bounds.
  LoopFunc b{"b", {in, out}, For("i", IntImm(11), Store(out, Var("i"), Load(in, Var("i"))))};
  EXPECT_NE(Verify(b).message().find("outside"), std::string::npos) << Verify(b);
  // Parallel loop not outermost.
  LoopFunc c{"c", {in, out},
             For("i", IntImm(2), For("j", IntImm(5), Store(out, Add(Mul(Var("i"), IntImm(5)), Var("j")), FloatImm(0)),
                                     ForKind::kParallel))};
  EXPECT_NE(Verify(c).message().find("not the outermost"), std::string::npos) << Verify(c);
  // Store to an input; type mismatch.
  LoopFunc d{"d", {in, out}, For("i", IntImm(10), Store(in, Var("i"), FloatImm(0)))};
  EXPECT_FALSE(Verify(d).ok());
  LoopFunc e{"e", {in, out}, For("i", IntImm(10), Store(out, Var("i"), Add(Var("i"), FloatImm(1))))};
  EXPECT_FALSE(Verify(e).ok());
  // Redefinition in scope; nested vectorized loops.
  LoopFunc f{"f", {in, out}, For("i", IntImm(2), For("i", IntImm(5), Store(out, Var("i"), FloatImm(0))))};
  EXPECT_NE(Verify(f).message().find("redefined"), std::string::npos);
  LoopFunc g{"g", {in, out},
             For("i", IntImm(2),
                 For("j", IntImm(5), Store(out, Add(Mul(Var("i"), IntImm(5)), Var("j")), FloatImm(0)),
                     ForKind::kVectorized),
                 ForKind::kVectorized)};
  EXPECT_NE(Verify(g).message().find("inside another vectorized"), std::string::npos);
}

TEST(ScheduleTest, SplitGuardedTail) {
  Stmt loop;
  LoopFunc f = ExpKernel(&loop);
  absl::StatusOr<Stmt> s = Split(loop, "i", 4, "io", "ii");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(Print(*s),
            "for (io, 0, 3) {\n"
            "  for (ii, 0, 4) {\n"
            "    if ((((io * 4) + ii) < 10)) {\n"
            "      out0[((io * 4) + ii)] = exp(in0[((io * 4) + ii)])\n"
            "    }\n"
            "  }\n"
            "}\n");
  f.body = *s;
  EXPECT_TRUE(Verify(f).ok()) << Verify(f);
  s = Vectorize(*s, "ii");
  ASSERT_TRUE(s.ok());
  EXPECT_NE(Print(*s).find("vectorized for (ii, 0, 4)"), std::string::npos);
}

TEST(ScheduleTest, SplitPeeledTail) {
  Stmt loop;
  LoopFunc f = ExpKernel(&loop);
  absl::StatusOr<Stmt> s = Split(loop, "i", 4, "io", "ii", TailStrategy::kPeel);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(Print(*s),
            "for (io, 0, 2) {\n"
            "  for (ii, 0, 4) {\n"
            "    out0[((io * 4) + ii)] = exp(in0[((io * 4) + ii)])\n"
            "  }\n"
            "}\n"
            "for (ii_tail, 0, 2) {\n"
            "  out0[(8 + ii_tail)] = exp(in0[(8 + ii_tail)])\n"
            "}\n");
  f.body = *s;
  EXPECT_TRUE(Verify(f).ok()) << Verify(f);
}

TEST(ScheduleTest, ReorderFuseUnrollParallel) {
  Buffer out = MakeBuffer("out0", {2, 3}, BufferRole::kOutput, 0);
  Stmt nest = For("y", IntImm(2), For("x", IntImm(3), Store(out, {Var("y"), Var("x")}, FloatImm(1))));
  absl::StatusOr<Stmt> r = Reorder(nest, {"x", "y"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Print(*r),
            "for (x, 0, 3) {\n"
            "  for (y, 0, 2) {\n"
            "    out0[((y * 3) + x)] = 1.0f\n"
            "  }\n"
            "}\n");
  absl::StatusOr<Stmt> fu = Fuse(nest, "y", "x", "yx");
  ASSERT_TRUE(fu.ok()) << fu.status();
  EXPECT_EQ(Print(*fu),
            "for (yx, 0, 6) {\n"
            "  out0[(((yx / 3) * 3) + (yx % 3))] = 1.0f\n"
            "}\n");
  absl::StatusOr<Stmt> u = Unroll(nest, "x");
  ASSERT_TRUE(u.ok());
  EXPECT_NE(Print(*u).find("unrolled for (x, 0, 3)"), std::string::npos);
  absl::StatusOr<Stmt> p = Parallel(nest, "y");
  ASSERT_TRUE(p.ok());
  LoopFunc f{"p", {out}, *p};
  EXPECT_TRUE(Verify(f).ok());
  EXPECT_EQ(NumTasks(f), 2);
  EXPECT_FALSE(Split(nest, "z", 2, "a", "b").ok());
  EXPECT_FALSE(Reorder(nest, {"x", "z"}).ok());
  EXPECT_FALSE(Fuse(nest, "x", "y", "f").ok());
}

TEST(LoopIrTest, PrintsAndVerifiesEveryScalarType) {
  Buffer a = MakeBuffer("a", {5}, BufferRole::kInput, 0, ScalarType::kI8);
  Buffer h = MakeBuffer("h", {5}, BufferRole::kInput, 1, ScalarType::kF16);
  Buffer d = MakeBuffer("d", {5}, BufferRole::kOutput, 2, ScalarType::kF64);
  Buffer m = MakeBuffer("m", {5}, BufferRole::kOutput, 3, ScalarType::kBool);
  Buffer u = MakeBuffer("u", {5}, BufferRole::kOutput, 4, ScalarType::kU64);
  Expr ai = Load(a, Var("i"));
  Stmt body = For("i", IntImm(5),
                  Block({Store(d, Var("i"), Add(Cast(ScalarType::kF64, ai), Cast(ScalarType::kF64, Load(h, Var("i"))))),
                         Store(m, Var("i"), Eq(Lt(ai, Const(ScalarType::kI8, 3)), Const(ScalarType::kBool, 1))),
                         Store(u, Var("i"), Mod(Cast(ScalarType::kU64, ai), IntConst(ScalarType::kU64, -1)))}));
  LoopFunc f{"t", {a, h, d, m, u}, body};
  EXPECT_EQ(Print(f),
            "kernel t(a: i8[5] input, h: f16[5] input, d: f64[5] output, m: bool[5] output, u: u64[5] output) {\n"
            "  for (i, 0, 5) {\n"
            "    d[i] = (f64(a[i]) + f64(h[i]))\n"
            "    m[i] = ((a[i] < 3i8) == true)\n"
            "    u[i] = (u64(a[i]) % 18446744073709551615u64)\n"
            "  }\n"
            "}\n");
  EXPECT_TRUE(Verify(f).ok()) << Verify(f);
  EXPECT_EQ(Print(Const(ScalarType::kF64, 0.1)), "0.10000000000000001");
  EXPECT_EQ(Print(Const(ScalarType::kF16, 0.5)), "f16(0.5f)");
  EXPECT_TRUE(IsFloat(ScalarType::kF16) && IsInteger(ScalarType::kU8) && !IsSigned(ScalarType::kU32));
  EXPECT_EQ(ScalarTypeBytes(ScalarType::kBool), 1);
  EXPECT_EQ(ScalarTypeBytes(ScalarType::kF64), 8);
}

TEST(LoopIrTest, VerifierRejectsMixedScalarTypes) {
  Buffer a = MakeBuffer("a", {5}, BufferRole::kInput, 0, ScalarType::kI32);
  Buffer o = MakeBuffer("o", {5}, BufferRole::kOutput, 1, ScalarType::kI16);
  Expr ai = Load(a, Var("i"));
  // i32 + i8 operands.
  LoopFunc mixed{"t", {a, o}, For("i", IntImm(5), Store(o, Var("i"), Cast(ScalarType::kI16, Add(ai, Const(ScalarType::kI8, 1)))))};
  EXPECT_FALSE(Verify(mixed).ok());
  // An i32 value stored into an i16 buffer.
  LoopFunc store{"t", {a, o}, For("i", IntImm(5), Store(o, Var("i"), ai))};
  EXPECT_FALSE(Verify(store).ok());
  // A call on integers.
  LoopFunc call{"t", {a, o}, For("i", IntImm(5), Store(o, Var("i"), Cast(ScalarType::kI16, Call("exp", {ai}, ScalarType::kI32))))};
  EXPECT_FALSE(Verify(call).ok());
  // Calls take f64 too.
  Buffer x = MakeBuffer("x", {5}, BufferRole::kInput, 0, ScalarType::kF64);
  Buffer y = MakeBuffer("y", {5}, BufferRole::kOutput, 1, ScalarType::kF64);
  LoopFunc f64{"t", {x, y}, For("i", IntImm(5), Store(y, Var("i"), Call("sin", {Load(x, Var("i"))}, ScalarType::kF64)))};
  EXPECT_TRUE(Verify(f64).ok()) << Verify(f64);
}

}  // namespace
}  // namespace kiln::loop_ir
