// Masked stores with constant masks become plain stores (masked_stores.h):
// the rewrite on hand-written IR, and kernels with guarded row tails
// compiled for AVX2 and AVX-512 targets, run against sentinels.
#include "compiler_core/codegen/masked_stores.h"

#include <memory>
#include <string>
#include <vector>

#include "compiler_core/codegen/jit.h"
#include "compiler_core/codegen/loop_ir/loop_ir.h"
#include "compiler_core/codegen/target.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/codegen_testing.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/DerivedTypes.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Support/raw_ostream.h"

namespace kiln {
namespace {

using codegen_testing::Occurrences;

// f(ptr p, <8 x float> v, <8 x i1> m): one masked store of v per mask below,
// 8 floats apart, the last under the run-time mask m.
TEST(MaskedStoresTest, ConstantMasksBecomePlainStoresOfTheirLanes) {
  llvm::LLVMContext ctx;
  llvm::Module module("m", ctx);
  llvm::Type* f32 = llvm::Type::getFloatTy(ctx);
  auto* v8 = llvm::FixedVectorType::get(f32, 8);
  auto* m8 = llvm::FixedVectorType::get(llvm::Type::getInt1Ty(ctx), 8);
  llvm::Type* ptr = llvm::PointerType::get(ctx, 0);
  auto* fty = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {ptr, v8, m8}, false);
  llvm::Function* fn = llvm::Function::Create(fty, llvm::Function::ExternalLinkage, "f", module);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", fn));
  const std::vector<std::vector<bool>> masks = {
      {1, 1, 1, 1, 1, 1, 1, 0},  // a 7-lane row tail: lanes 0-3 and 3-6
      {0, 1, 1, 1, 1, 1, 1, 0},  // lanes 1-6: 1-4 and 3-6
      {0, 0, 0, 0, 0, 0, 0, 0},  // nothing stored
      {1, 1, 1, 1, 1, 1, 1, 1},  // one whole vector
      {1, 0, 1, 0, 1, 0, 1, 0},  // four single floats
      {0, 0, 1, 1, 1, 0, 0, 0},  // lanes 2-4: 2-3 and 3-4
  };
  for (size_t i = 0; i < masks.size(); ++i) {
    std::vector<llvm::Constant*> lanes;
    for (bool set : masks[i]) lanes.push_back(b.getInt1(set));
    b.CreateMaskedStore(fn->getArg(1), b.CreateConstInBoundsGEP1_64(f32, fn->getArg(0), 8 * i), llvm::Align(4),
                        llvm::ConstantVector::get(lanes));
  }
  b.CreateMaskedStore(fn->getArg(1), b.CreateConstInBoundsGEP1_64(f32, fn->getArg(0), 8 * masks.size()),
                      llvm::Align(4), fn->getArg(2));
  b.CreateRetVoid();

  EXPECT_EQ(SplitConstantMaskedStores(*fn), static_cast<int>(masks.size()));
  std::string errors;
  llvm::raw_string_ostream es(errors);
  EXPECT_FALSE(llvm::verifyFunction(*fn, &es)) << es.str();
  std::string text;
  llvm::raw_string_ostream os(text);
  fn->print(os);
  os.flush();
  EXPECT_EQ(Occurrences(text, "call void @llvm.masked.store"), 1) << text;  // the run-time mask's
  EXPECT_EQ(Occurrences(text, "store <8 x float>"), 1) << text;
  EXPECT_EQ(Occurrences(text, "store <4 x float>"), 4) << text;
  EXPECT_EQ(Occurrences(text, "store <2 x float>"), 2) << text;
  EXPECT_EQ(Occurrences(text, "store float"), 4) << text;
  // The second run finds only the run-time mask.
  EXPECT_EQ(SplitConstantMaskedStores(*fn), 0);
}

// Three guarded stores of one vector each into rows of 8 floats, their
// masks constants (lanes 0-6, 1-6, 0-2): compiled for each target the host
// runs, the result holds the guarded lanes and the sentinels elsewhere. On
// AVX2 no masked store is left; on AVX-512 they stay (mask registers).
TEST(MaskedStoresTest, GuardedRowTailsStoreOnlyTheirLanes) {
  using namespace loop_ir;  // NOLINT: IR builders
  const CpuTarget host = CpuTarget::Host();
  std::vector<std::string> names;
  if (host.HasFeature("avx2") && host.HasFeature("fma")) names.push_back("x86-64-v3");
  if (host.HasFeature("avx512f") && host.HasFeature("avx512vl")) names.push_back("x86-64-v4");
  if (names.empty()) GTEST_SKIP() << "host has neither AVX2 nor AVX-512";
  Buffer in = MakeBuffer("in0", {8}, BufferRole::kInput, 0);
  Buffer out = MakeBuffer("out0", {3, 8}, BufferRole::kOutput, 1);
  Expr v = Var("v");
  auto row = [&](int64_t r, Expr guard) {
    Stmt s = Store(out, Add(IntImm(8 * r), v), Add(Load(in, v), FloatImm(100.0 * r)));
    return For("v", IntImm(8), IfThen(guard, s), ForKind::kVectorized);
  };
  LoopFunc f{"k", {in, out},
             Block({row(0, Lt(v, IntImm(7))), row(1, And(Ge(v, IntImm(1)), Lt(v, IntImm(7)))),
                    row(2, Lt(v, IntImm(3)))})};
  const std::vector<std::vector<bool>> stored = {
      {1, 1, 1, 1, 1, 1, 1, 0}, {0, 1, 1, 1, 1, 1, 1, 0}, {1, 1, 1, 0, 0, 0, 0, 0}};
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    absl::StatusOr<CpuTarget> target = CpuTarget::Named(name);
    ASSERT_TRUE(target.ok()) << target.status();
    auto kernel = JitCompile(f, *target);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    const bool avx512 = target->HasFeature("avx512f");
    EXPECT_EQ((*kernel)->llvm_ir().find("call void @llvm.masked.store") != std::string::npos, avx512) << (*kernel)->llvm_ir();
    std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8}, y(24, -1234.0f);
    void* args[] = {x.data(), y.data()};
    (*kernel)->Run(args, 0, (*kernel)->num_tasks());
    for (int r = 0; r < 3; ++r) {
      for (int c = 0; c < 8; ++c) {
        EXPECT_EQ(y[8 * r + c], stored[r][c] ? x[c] + 100.0f * r : -1234.0f) << "row " << r << " lane " << c;
      }
    }
  }
}

}  // namespace
}  // namespace kiln
