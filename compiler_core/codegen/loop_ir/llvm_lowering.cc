// Loop IR -> LLVM IR, for the CPU (Kiln's task ABI) and for NVPTX (a CUDA
// kernel per LoopFunc). Expressions lower to scalars when uniform across the
// lanes of the enclosing vectorized loop and to vectors otherwise; loads and
// stores pick contiguous (masked) vector accesses for unit strides (a guarded
// read of a whole vector inside a stack temporary needs no mask), loads a
// de-interleaved contiguous span for small strides (on the CPU, unguarded,
// as whole vectors), store groups that fill small strides' runs as one
// interleaved contiguous span (LowerInterleavedStores), and gathers/scatters
// for the rest. On NVPTX the same expression and memory code runs per thread;
// only the kernel's frame differs (see RunGpu).
#include "compiler_core/codegen/loop_ir/llvm_lowering.h"
#include "compiler_core/codegen/loop_ir/printer.h"
#include "compiler_core/codegen/loop_ir/verifier.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compiler_core/codegen/llvm_pipeline.h"
#include "compiler_core/codegen/loop_ir/math_functions.h"
#include "compiler_core/codegen/vector_math.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/DerivedTypes.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InlineAsm.h"
#include "llvm/IR/Intrinsics.h"
#include "llvm/IR/IntrinsicsNVPTX.h"
#include "llvm/IR/Metadata.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"

namespace kiln::loop_ir {
namespace {

// Vector loads with a constant lane stride up to this one read their span
// contiguously and de-interleave; wider strides gather.
constexpr int64_t kMaxDeinterleaveStride = 4;

using llvm::BasicBlock;
using llvm::Type;
using llvm::Value;

bool ValidSymbol(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

// Contiguous vector accesses on NVPTX are aligned to at most this many bytes
// (ld.v4.f32): every buffer base is (cuMemAlloc: 256, the package's device
// plan: 256, shared and stack arrays: 16).
constexpr int64_t kMaxGpuAccessAlign = 16;

class Lowerer {
 public:
  // `target`: the CPU for Run; null for RunGpu (NVPTX).
  Lowerer(llvm::Module* module, const CpuTarget* target)
      : ctx_(module->getContext()), module_(module), target_(target), b_(ctx_) {
    f32_ = Type::getFloatTy(ctx_);
    i64_ = Type::getInt64Ty(ctx_);
    i1_ = Type::getInt1Ty(ctx_);
    ptr_ = llvm::PointerType::get(ctx_, 0);
  }

  // The exported `void symbol(void* const* args, i64 task_begin, i64
  // task_end)` loads the argument buffers and calls the body, an internal
  // always-inlined function that takes each buffer as a noalias pointer (a
  // package never lets two arguments of a step share memory: the package
  // writer checks its plan, and a session checks the memory a caller binds).
  // Inlined, the noalias parameters become alias scopes on every access, so
  // LLVM may keep a value read from one buffer across stores to another
  // (a per-channel Sigmoid under a broadcast Mul is computed once per row,
  // not once per vector).
  absl::StatusOr<LoweredFunction> Run(const LoopFunc& f, const std::string& symbol) {
    llvm::Function* kernel = DeclareKernelFunction(module_, symbol, *target_);
    std::vector<Type*> params(f.args.size(), ptr_);
    params.push_back(i64_);
    params.push_back(i64_);
    fn_ = llvm::Function::Create(llvm::FunctionType::get(Type::getVoidTy(ctx_), params, false),
                                 llvm::Function::InternalLinkage, symbol + ".body", module_);
    for (const llvm::Attribute& a : kernel->getAttributes().getFnAttrs()) fn_->addFnAttr(a);
    fn_->addFnAttr(llvm::Attribute::AlwaysInline);
    for (size_t i = 0; i < f.args.size(); ++i) {
      fn_->addParamAttr(static_cast<unsigned>(i), llvm::Attribute::NoAlias);
      fn_->getArg(static_cast<unsigned>(i))->setName(f.args[i]->name);
      bufs_[f.args[i].get()] = fn_->getArg(static_cast<unsigned>(i));
    }
    {
      llvm::IRBuilder<> kb(BasicBlock::Create(ctx_, "entry", kernel));
      std::vector<Value*> call_args;
      for (size_t i = 0; i < f.args.size(); ++i) {
        call_args.push_back(kb.CreateAlignedLoad(
            ptr_, kb.CreateConstInBoundsGEP1_64(ptr_, kernel->getArg(0), i), llvm::Align(8), f.args[i]->name));
      }
      call_args.push_back(kernel->getArg(1));
      call_args.push_back(kernel->getArg(2));
      kb.CreateCall(fn_, call_args);
      kb.CreateRetVoid();
    }
    const unsigned task_arg = static_cast<unsigned>(f.args.size());
    entry_ = BasicBlock::Create(ctx_, "entry", fn_);
    b_.SetInsertPoint(entry_);
    int64_t num_tasks = NumTasks(f);
    Value* begin = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, fn_->getArg(task_arg), I64(0));
    Value* end = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, fn_->getArg(task_arg + 1), I64(num_tasks));
    const Stmt& body = f.body;
    if (body->kind == StmtKind::kFor && body->for_kind == ForKind::kParallel) {
      RETURN_IF_ERROR(Loop(begin, end, body->var, [&] { return LowerStmt(body->body[0]); }));
    } else {
      RETURN_IF_ERROR(IfThen(b_.CreateICmpSLT(begin, end), "task", [&] { return LowerStmt(body); }));
    }
    b_.CreateRetVoid();
    return LoweredFunction{num_tasks, static_cast<int>(f.args.size())};
  }

  // A CUDA kernel `void symbol(T0* a0, T1* a1, ...)`, one pointer per
  // argument buffer (noalias: a package never binds one buffer to two
  // arguments of a kernel), launched as GpuLaunchOf(f). The gpu_block loop's
  // variable is blockIdx.x; a gpu_thread loop of the block's full width is
  // threadIdx.x, a narrower one runs where threadIdx.x < its extent; where
  // the kernel has shared memory, every thread loop ends with a barrier.
  // Shared buffers are addrspace(3) globals of the module; local buffers and
  // temps are per-thread allocas.
  absl::StatusOr<GpuLoweredFunction> RunGpu(const LoopFunc& f, const std::string& symbol) {
    gpu_ = true;
    launch_ = GpuLaunchOf(f);
    symbol_ = symbol;
    std::vector<Type*> params(f.args.size(), ptr_);
    auto* fty = llvm::FunctionType::get(Type::getVoidTy(ctx_), params, false);
    fn_ = llvm::Function::Create(fty, llvm::Function::ExternalLinkage, symbol, module_);
    fn_->setDoesNotThrow();
    for (size_t i = 0; i < f.args.size(); ++i) {
      fn_->addParamAttr(i, llvm::Attribute::NoAlias);
      fn_->getArg(i)->setName(f.args[i]->name);
      bufs_[f.args[i].get()] = fn_->getArg(i);
    }
    llvm::NamedMDNode* annotations = module_->getOrInsertNamedMetadata("nvvm.annotations");
    auto annotate = [&](const char* key, int value) {
      annotations->addOperand(llvm::MDNode::get(
          ctx_, {llvm::ValueAsMetadata::get(fn_), llvm::MDString::get(ctx_, key),
                 llvm::ValueAsMetadata::get(llvm::ConstantInt::get(Type::getInt32Ty(ctx_), value))}));
    };
    annotate("kernel", 1);
    annotate("maxntidx", static_cast<int>(launch_.threads));
    entry_ = BasicBlock::Create(ctx_, "entry", fn_);
    b_.SetInsertPoint(entry_);
    Value* block = b_.CreateZExt(b_.CreateIntrinsic(llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x, {}, {}), i64_,
                                 "block");
    tid_ = b_.CreateZExt(b_.CreateIntrinsic(llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x, {}, {}), i64_, "thread");
    vars_[f.body->var] = {block, 0};
    MarkLastThreadLoops(f.body->body[0]);
    RETURN_IF_ERROR(LowerStmt(f.body->body[0]));
    b_.CreateRetVoid();
    return GpuLoweredFunction{launch_, static_cast<int>(f.args.size())};
  }

 private:
  Value* I64(int64_t v) { return llvm::ConstantInt::get(i64_, v, true); }
  // Register type of a value of type `t` (f16 and bf16 values live widened in f32).
  Type* ScalarTy(ScalarType t) {
    switch (t) {
      case ScalarType::kF32: return f32_;
      case ScalarType::kI64: return i64_;
      case ScalarType::kBool: return i1_;
      case ScalarType::kF64: return Type::getDoubleTy(ctx_);
      case ScalarType::kF16:
      case ScalarType::kBF16: return f32_;
      case ScalarType::kI8:
      case ScalarType::kU8: return Type::getInt8Ty(ctx_);
      case ScalarType::kI16:
      case ScalarType::kU16: return Type::getInt16Ty(ctx_);
      case ScalarType::kI32:
      case ScalarType::kU32: return Type::getInt32Ty(ctx_);
      case ScalarType::kU64: return i64_;
    }
    return f32_;
  }
  // In-memory element type: bool is a byte, f16 and bf16 their 16 bits.
  Type* MemTy(ScalarType t) {
    if (t == ScalarType::kBool) return Type::getInt8Ty(ctx_);
    if (t == ScalarType::kF16 || t == ScalarType::kBF16) return Type::getInt16Ty(ctx_);
    return ScalarTy(t);
  }
  llvm::Align AlignOf(ScalarType t) { return llvm::Align(ScalarTypeBytes(t)); }
  Type* Like(Type* t, Value* v) { return IsVec(v) ? VecTy(t) : t; }
  // Memory bits -> register value.
  Value* FromMem(Value* m, ScalarType t) {
    if (t == ScalarType::kBool) return b_.CreateICmpNE(m, llvm::Constant::getNullValue(m->getType()));
    if (t == ScalarType::kF16) return math::HalfToFloat(b_, m);
    if (t == ScalarType::kBF16) return math::BFloat16ToFloat(b_, m);
    return m;
  }
  Value* ToMem(Value* v, ScalarType t) {
    if (t == ScalarType::kBool) return b_.CreateZExt(v, Like(MemTy(t), v));
    if (t == ScalarType::kF16) return math::FloatToHalf(b_, v);
    if (t == ScalarType::kBF16) return math::FloatToBFloat16(b_, v);
    return v;
  }
  // ONNX Cast between any two scalar types (see ExprKind::kCast).
  Value* CastValue(Value* v, ScalarType from, ScalarType to) {
    if (from == ScalarType::kF16 || from == ScalarType::kBF16) from = ScalarType::kF32;
    if (from == to) return v;
    Type* tt = Like(ScalarTy(to), v);
    if (to == ScalarType::kBool) {
      if (IsFloat(from)) return b_.CreateFCmpUNE(v, llvm::Constant::getNullValue(v->getType()));
      return b_.CreateICmpNE(v, llvm::Constant::getNullValue(v->getType()));
    }
    if (to == ScalarType::kF16) {
      Value* f = CastValue(v, from, ScalarType::kF32);
      return math::HalfToFloat(b_, math::FloatToHalf(b_, f));
    }
    if (to == ScalarType::kBF16) {
      Value* f = CastValue(v, from, ScalarType::kF32);
      return math::BFloat16ToFloat(b_, math::FloatToBFloat16(b_, f));
    }
    if (from == ScalarType::kBool) return IsFloat(to) ? b_.CreateUIToFP(v, tt) : b_.CreateZExt(v, tt);
    if (IsFloat(from) && IsFloat(to)) return IsFloatBits(to, 64) ? b_.CreateFPExt(v, tt) : b_.CreateFPTrunc(v, tt);
    if (IsFloat(from)) {
      return b_.CreateIntrinsic(IsSigned(to) ? llvm::Intrinsic::fptosi_sat : llvm::Intrinsic::fptoui_sat,
                                {tt, v->getType()}, {v});
    }
    if (IsFloat(to)) return IsSigned(from) ? b_.CreateSIToFP(v, tt) : b_.CreateUIToFP(v, tt);
    unsigned fb = v->getType()->getScalarSizeInBits(), tb = tt->getScalarSizeInBits();
    if (tb < fb) return b_.CreateTrunc(v, tt);
    if (tb == fb) return v;
    return IsSigned(from) ? b_.CreateSExt(v, tt) : b_.CreateZExt(v, tt);
  }
  static bool IsFloatBits(ScalarType t, int bits) { return bits == 64 ? t == ScalarType::kF64 : t != ScalarType::kF64; }
  // Integer a / b or a % b with C semantics that never trap: b == 0 divides by
  // 1 (an unspecified result), INT_MIN / -1 wraps, x % -1 is 0.
  Value* IntDivRem(Value* a, Value* b, bool is_signed, bool rem) {
    Value* zero = llvm::Constant::getNullValue(b->getType());
    Value* one = llvm::ConstantInt::get(b->getType(), 1);
    Value* bad = b_.CreateICmpEQ(b, zero);
    Value* minus1 = nullptr;
    if (is_signed) {
      minus1 = b_.CreateICmpEQ(b, llvm::Constant::getAllOnesValue(b->getType()));
      bad = b_.CreateOr(bad, minus1);
    }
    Value* d = b_.CreateSelect(bad, one, b);
    Value* r = rem ? (is_signed ? b_.CreateSRem(a, d) : b_.CreateURem(a, d))
                   : (is_signed ? b_.CreateSDiv(a, d) : b_.CreateUDiv(a, d));
    if (minus1 != nullptr) r = b_.CreateSelect(minus1, rem ? zero : b_.CreateSub(zero, a), r);
    return r;
  }
  // A unary f32 math function applied to an f32 or f64 value (f64 through f32).
  Value* ViaF32(Value* x, const std::function<Value*(Value*)>& f) {
    if (x->getType()->getScalarType()->isFloatTy()) return f(x);
    return b_.CreateFPExt(f(b_.CreateFPTrunc(x, Like(f32_, x))), x->getType());
  }
  bool IsVec(Value* v) { return llvm::isa<llvm::FixedVectorType>(v->getType()); }
  Value* Splat(Value* v) { return IsVec(v) || lanes_ == 1 ? v : b_.CreateVectorSplat(lanes_, v); }
  Type* VecTy(Type* t) { return llvm::FixedVectorType::get(t, lanes_); }
  Value* Iota() {
    std::vector<llvm::Constant*> c;
    for (int64_t i = 0; i < lanes_; ++i) c.push_back(llvm::ConstantInt::get(i64_, i));
    return llvm::ConstantVector::get(c);
  }

  // for (var = lo; var < hi; ++var) body()
  absl::Status Loop(Value* lo, Value* hi, const std::string& var, const std::function<absl::Status()>& body) {
    BasicBlock* pre = b_.GetInsertBlock();
    BasicBlock* head = BasicBlock::Create(ctx_, var + ".head", fn_);
    BasicBlock* body_bb = BasicBlock::Create(ctx_, var + ".body", fn_);
    BasicBlock* exit = BasicBlock::Create(ctx_, var + ".exit", fn_);
    b_.CreateBr(head);
    b_.SetInsertPoint(head);
    llvm::PHINode* iv = b_.CreatePHI(i64_, 2, var);
    iv->addIncoming(lo, pre);
    b_.CreateCondBr(b_.CreateICmpSLT(iv, hi), body_bb, exit);
    b_.SetInsertPoint(body_bb);
    vars_[var] = {iv, 0};
    RETURN_IF_ERROR(body());
    vars_.erase(var);
    Value* next = b_.CreateAdd(iv, I64(1), var + ".next", false, true);
    iv->addIncoming(next, b_.GetInsertBlock());
    b_.CreateBr(head);
    b_.SetInsertPoint(exit);
    return absl::OkStatus();
  }

  absl::Status IfThen(Value* cond, const std::string& name, const std::function<absl::Status()>& then,
                      const std::function<absl::Status()>& otherwise = nullptr) {
    BasicBlock* then_bb = BasicBlock::Create(ctx_, name + ".then", fn_);
    BasicBlock* else_bb = otherwise ? BasicBlock::Create(ctx_, name + ".else", fn_) : nullptr;
    BasicBlock* done = BasicBlock::Create(ctx_, name + ".done", fn_);
    b_.CreateCondBr(cond, then_bb, else_bb ? else_bb : done);
    b_.SetInsertPoint(then_bb);
    RETURN_IF_ERROR(then());
    b_.CreateBr(done);
    if (else_bb) {
      b_.SetInsertPoint(else_bb);
      RETURN_IF_ERROR(otherwise());
      b_.CreateBr(done);
    }
    b_.SetInsertPoint(done);
    return absl::OkStatus();
  }

  // Lane stride of `e` in the current vectorized loop: 0 when uniform,
  // nullopt when not affine.
  std::optional<int64_t> Stride(const Expr& e) {
    if (lanes_ == 1) return 0;
    switch (e->kind) {
      case ExprKind::kIntImm:
      case ExprKind::kFloatImm: return 0;
      case ExprKind::kVar: {
        auto it = vars_.find(e->name);
        return it == vars_.end() ? std::nullopt : it->second.stride;
      }
      case ExprKind::kAdd:
      case ExprKind::kSub: {
        auto a = Stride(e->args[0]), b = Stride(e->args[1]);
        if (!a || !b) return std::nullopt;
        return e->kind == ExprKind::kAdd ? *a + *b : *a - *b;
      }
      case ExprKind::kMul: {
        auto a = Stride(e->args[0]), b = Stride(e->args[1]);
        int64_t c = 0;
        if (a && b && *a == 0 && *b == 0) return 0;
        if (a && AsConst(e->args[1], &c)) return *a * c;
        if (b && AsConst(e->args[0], &c)) return *b * c;
        return std::nullopt;
      }
      default: {
        for (const Expr& a : e->args) {
          auto s = Stride(a);
          if (!s || *s != 0) return std::nullopt;
        }
        return 0;
      }
    }
  }

  Value* MaxMin(Value* a, Value* b, bool max) {
    Value* r = max ? b_.CreateSelect(b_.CreateFCmpOLT(a, b), b, a) : b_.CreateSelect(b_.CreateFCmpOGT(a, b), b, a);
    return b_.CreateSelect(b_.CreateFCmpUNO(a, b), llvm::ConstantFP::get(a->getType(), NAN), r);
  }

  Value* Mask() { return mask_ ? mask_ : llvm::Constant::getAllOnesValue(VecTy(i1_)); }

  // The power of two (up to 2^20) that provably divides `e`'s value in the
  // current vectorized loop's first lane: the vectorized variable is 0 there.
  int64_t KnownMultiple(const Expr& e) {
    constexpr int64_t kBig = int64_t{1} << 20;
    switch (e->kind) {
      case ExprKind::kIntImm: {
        int64_t v = e->int_value;
        if (v == 0) return kBig;
        return std::min<int64_t>(kBig, v & -v);
      }
      case ExprKind::kVar: {
        auto it = vars_.find(e->name);
        if (it == vars_.end()) return 1;
        return it->second.multiple;
      }
      case ExprKind::kAdd:
      case ExprKind::kSub: return std::min(KnownMultiple(e->args[0]), KnownMultiple(e->args[1]));
      case ExprKind::kMul: return std::min(kBig, KnownMultiple(e->args[0]) * KnownMultiple(e->args[1]));
      default: return 1;
    }
  }

  // Alignment of a contiguous vector access at `index`: on NVPTX as much of
  // the vector's size as the index's first lane provably allows (so that
  // ld.v2/ld.v4 come out), else the element's.
  llvm::Align VectorAlign(const Expr& index, ScalarType dt) {
    const int64_t elem = ScalarTypeBytes(dt);
    if (!gpu_) return AlignOf(dt);
    int64_t bytes = std::min<int64_t>({KnownMultiple(index) * elem, static_cast<int64_t>(lanes_) * elem,
                                       kMaxGpuAccessAlign});
    bytes = std::max<int64_t>(bytes & -bytes, elem);
    return llvm::Align(static_cast<uint64_t>(bytes));
  }

  // Expressions are DAGs (graph inlining shares subtrees): each node lowers
  // once per statement.
  absl::StatusOr<Value*> LowerExpr(const Expr& e) {
    if (auto it = memo_.find(e.get()); it != memo_.end()) return it->second;
    absl::StatusOr<Value*> v = LowerExprUncached(e);
    if (v.ok()) memo_[e.get()] = *v;
    return v;
  }

  // Lane 0 of `e`, an index affine in the vectorized loop's variable, as
  // scalar arithmetic: the address of a contiguous access. Extracting lane 0
  // of the lowered <N x i64> index instead left loop-invariant index vectors
  // that LLVM keeps in vector registers, with a vmovq round trip per access
  // (a GEMM's inner loop spilled its accumulators to make room for them).
  absl::StatusOr<Value*> FirstLane(const Expr& e) {
    if (auto it = first_memo_.find(e.get()); it != first_memo_.end()) return it->second;
    absl::StatusOr<Value*> v = FirstLaneUncached(e);
    if (v.ok()) first_memo_[e.get()] = *v;
    return v;
  }

  absl::StatusOr<Value*> FirstLaneUncached(const Expr& e) {
    auto lane0 = [&]() -> absl::StatusOr<Value*> {
      ASSIGN_OR_RETURN(Value * v, LowerExpr(e));
      return IsVec(v) ? b_.CreateExtractElement(v, uint64_t{0}) : v;
    };
    std::optional<int64_t> st = Stride(e);
    if (!st || *st == 0) return lane0();
    switch (e->kind) {
      case ExprKind::kVar: {
        auto it = vars_.find(e->name);
        if (it == vars_.end() || it->second.first == nullptr) return lane0();
        return it->second.first;
      }
      case ExprKind::kAdd:
      case ExprKind::kSub:
      case ExprKind::kMul: {
        ASSIGN_OR_RETURN(Value * a, FirstLane(e->args[0]));
        ASSIGN_OR_RETURN(Value * b, FirstLane(e->args[1]));
        if (e->kind == ExprKind::kAdd) return b_.CreateAdd(a, b);
        return e->kind == ExprKind::kSub ? b_.CreateSub(a, b) : b_.CreateMul(a, b);
      }
      default: return lane0();
    }
  }

  absl::StatusOr<Value*> LowerExprUncached(const Expr& e) {
    switch (e->kind) {
      case ExprKind::kIntImm:
        if (e->type == ScalarType::kI64) return I64(e->int_value);
        return llvm::ConstantInt::get(ScalarTy(e->type), static_cast<uint64_t>(e->int_value), IsSigned(e->type));
      case ExprKind::kFloatImm: return llvm::ConstantFP::get(ScalarTy(e->type), e->float_value);
      case ExprKind::kVar: {
        auto it = vars_.find(e->name);
        if (it == vars_.end()) return absl::InvalidArgumentError(absl::StrCat("variable ", e->name, " is undefined"));
        return it->second.value;
      }
      case ExprKind::kLoad: return LowerLoad(e);
      default: break;
    }
    std::vector<Value*> a;
    for (const Expr& x : e->args) {
      ASSIGN_OR_RETURN(Value * v, LowerExpr(x));
      a.push_back(v);
    }
    bool any_vec = false;
    for (Value* v : a) any_vec = any_vec || IsVec(v);
    if (any_vec) {
      for (Value*& v : a) v = Splat(v);
    }
    ScalarType at = e->args.empty() ? e->type : e->args.back()->type;
    bool fp = !a.empty() && a.back()->getType()->getScalarType()->isFloatingPointTy();
    bool sg = IsSigned(at);
    switch (e->kind) {
      case ExprKind::kAdd: return fp ? b_.CreateFAdd(a[0], a[1]) : b_.CreateAdd(a[0], a[1]);
      case ExprKind::kSub: return fp ? b_.CreateFSub(a[0], a[1]) : b_.CreateSub(a[0], a[1]);
      case ExprKind::kMul: return fp ? b_.CreateFMul(a[0], a[1]) : b_.CreateMul(a[0], a[1]);
      case ExprKind::kDiv: return fp ? b_.CreateFDiv(a[0], a[1]) : IntDivRem(a[0], a[1], sg, false);
      case ExprKind::kMod: return fp ? math::Fmod(b_, a[0], a[1]) : IntDivRem(a[0], a[1], sg, true);
      case ExprKind::kMin:
        return fp ? MaxMin(a[0], a[1], false)
                  : b_.CreateBinaryIntrinsic(sg ? llvm::Intrinsic::smin : llvm::Intrinsic::umin, a[0], a[1]);
      case ExprKind::kMax:
        return fp ? MaxMin(a[0], a[1], true)
                  : b_.CreateBinaryIntrinsic(sg ? llvm::Intrinsic::smax : llvm::Intrinsic::umax, a[0], a[1]);
      case ExprKind::kLt:
        return fp ? b_.CreateFCmpOLT(a[0], a[1]) : sg ? b_.CreateICmpSLT(a[0], a[1]) : b_.CreateICmpULT(a[0], a[1]);
      case ExprKind::kLe:
        return fp ? b_.CreateFCmpOLE(a[0], a[1]) : sg ? b_.CreateICmpSLE(a[0], a[1]) : b_.CreateICmpULE(a[0], a[1]);
      case ExprKind::kGt:
        return fp ? b_.CreateFCmpOGT(a[0], a[1]) : sg ? b_.CreateICmpSGT(a[0], a[1]) : b_.CreateICmpUGT(a[0], a[1]);
      case ExprKind::kGe:
        return fp ? b_.CreateFCmpOGE(a[0], a[1]) : sg ? b_.CreateICmpSGE(a[0], a[1]) : b_.CreateICmpUGE(a[0], a[1]);
      case ExprKind::kEq: return fp ? b_.CreateFCmpOEQ(a[0], a[1]) : b_.CreateICmpEQ(a[0], a[1]);
      case ExprKind::kNe: return fp ? b_.CreateFCmpUNE(a[0], a[1]) : b_.CreateICmpNE(a[0], a[1]);
      case ExprKind::kAnd: return b_.CreateAnd(a[0], a[1]);
      case ExprKind::kOr: return b_.CreateOr(a[0], a[1]);
      case ExprKind::kNot: return b_.CreateNot(a[0]);
      case ExprKind::kSelect: return b_.CreateSelect(a[0], a[1], a[2]);
      case ExprKind::kCast: return CastValue(a[0], e->args[0]->type, e->type);
      case ExprKind::kCall: {
        const std::string& n = e->name;
        Value* x = a[0];
        auto un = [&](Value* (*f)(llvm::IRBuilderBase&, Value*)) {
          return ViaF32(x, [&](Value* v) { return f(b_, v); });
        };
        if (n == "exp") return un(vector_math::Exp);
        if (n == "exp_nonpositive") return un(vector_math::ExpNonPositive);
        if (n == "log") return un(vector_math::Log);
        if (n == "tanh") return un(vector_math::Tanh);
        if (n == "erf") return un(vector_math::Erf);
        if (n == "sigmoid") return un(vector_math::Sigmoid);
        if (n == "sin") return un(math::Sin);
        if (n == "cos") return un(math::Cos);
        if (n == "atan") return un(math::Atan);
        if (n == "asin") return un(math::Asin);
        if (n == "acos") return un(math::Acos);
        if (n == "expm1") return un(math::Expm1);
        if (n == "log1p") return un(math::Log1p);
        if (n == "pow") {
          if (x->getType()->getScalarType()->isFloatTy()) return math::Pow(b_, a[0], a[1]);
          Type* ft = Like(f32_, x);
          return b_.CreateFPExt(math::Pow(b_, b_.CreateFPTrunc(a[0], ft), b_.CreateFPTrunc(a[1], ft)), x->getType());
        }
        if (n == "fmod") return math::Fmod(b_, a[0], a[1]);
        if (n == "ipow") return math::IntPow(b_, a[0], a[1], IsSigned(e->type));
        if (n == "sqrt") return b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x);
        if (n == "abs") return b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
        if (n == "floor") return b_.CreateUnaryIntrinsic(llvm::Intrinsic::floor, x);
        if (n == "ceil") return b_.CreateUnaryIntrinsic(llvm::Intrinsic::ceil, x);
        if (n == "round") return b_.CreateUnaryIntrinsic(llvm::Intrinsic::roundeven, x);
        if (n == "trunc") return b_.CreateUnaryIntrinsic(llvm::Intrinsic::trunc, x);
        if (n == "neg") return b_.CreateFNeg(x);
        if (n == "fmax") return MaxMin(a[0], a[1], true);
        if (n == "fmin") return MaxMin(a[0], a[1], false);
        if (n == "fma") return b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {x->getType()}, {a[0], a[1], a[2]});
        return absl::InvalidArgumentError(absl::StrCat("unknown call ", n));
      }
      default: break;
    }
    return absl::InvalidArgumentError(absl::StrCat("cannot lower expression ", Print(e)));
  }

  absl::StatusOr<Value*> BufferPtr(const Buffer& b) {
    auto it = bufs_.find(b.get());
    if (it == bufs_.end()) return absl::InvalidArgumentError(absl::StrCat("buffer ", b->name, " is not in scope"));
    return it->second;
  }

  absl::StatusOr<Value*> LowerLoad(const Expr& e) {
    ASSIGN_OR_RETURN(Value * base, BufferPtr(e->buffer));
    ScalarType dt = e->buffer->dtype;
    Type* et = MemTy(dt);
    ASSIGN_OR_RETURN(Value * idx, LowerExpr(e->args[0]));
    llvm::Align al = AlignOf(dt);
    if (!IsVec(idx)) return FromMem(b_.CreateAlignedLoad(et, b_.CreateInBoundsGEP(et, base, idx), al), dt);
    std::optional<int64_t> st = Stride(e->args[0]);
    if (st && *st == 1) {
      ASSIGN_OR_RETURN(Value * first, FirstLane(e->args[0]));
      Value* p = b_.CreateInBoundsGEP(et, base, first);
      al = VectorAlign(e->args[0], dt);
      if (mask_ == nullptr || WholeVectorInAlloca(base, first)) return FromMem(b_.CreateAlignedLoad(VecTy(et), p, al), dt);
      return FromMem(b_.CreateMaskedLoad(VecTy(et), p, al, mask_, llvm::Constant::getNullValue(VecTy(et))), dt);
    }
    if (st && *st >= 2 && *st <= kMaxDeinterleaveStride) {
      ASSIGN_OR_RETURN(Value * first, FirstLane(e->args[0]));
      return FromMem(StridedLoad(et, base, first, *st, al), dt);
    }
    Value* ptrs = b_.CreateInBoundsGEP(et, base, idx);
    return FromMem(b_.CreateMaskedGather(VecTy(et), ptrs, al, Mask(), llvm::Constant::getNullValue(VecTy(et))), dt);
  }

  // Whether a contiguous vector starting at element `first` of `base` lies
  // inside a stack temporary: then a guarded load of it reads every lane
  // (lanes outside the guard are never stored anywhere, so their values do
  // not matter), which keeps the temporary promotable to registers. A
  // masked load of an alloca blocks that, and a guarded accumulator's every
  // update goes through memory.
  bool WholeVectorInAlloca(Value* base, Value* first) const {
    auto* a = llvm::dyn_cast<llvm::AllocaInst>(base);
    auto* c = llvm::dyn_cast<llvm::ConstantInt>(first);
    if (a == nullptr || c == nullptr) return false;
    auto* arr = llvm::dyn_cast<llvm::ArrayType>(a->getAllocatedType());
    return arr != nullptr && c->getSExtValue() >= 0 &&
           c->getSExtValue() + static_cast<int64_t>(lanes_) <= static_cast<int64_t>(arr->getNumElements());
  }

  // A load whose lanes are `stride` elements apart: one contiguous (masked)
  // load of the span from the first lane's element to the last's, then the
  // lanes picked out of it (de-interleaving), instead of a gather. The span
  // lies inside the buffer when its two ends do; masked-off lanes are not read.
  // `first` is the first lane's element.
  Value* StridedLoad(Type* et, Value* base, Value* first, int64_t stride, llvm::Align al) {
    const unsigned span = static_cast<unsigned>((lanes_ - 1) * stride + 1);
    Type* wide = llvm::FixedVectorType::get(et, span);
    Value* p = b_.CreateInBoundsGEP(et, base, first);
    if (mask_ == nullptr && !gpu_) return ChunkedStridedLoad(et, p, span, al);
    Value* loaded;
    if (mask_ == nullptr) {
      loaded = b_.CreateAlignedLoad(wide, p, al);
    } else {
      // Span element j carries lane j / stride's mask bit when j is a lane's
      // element, else false (index lanes_ picks from the all-false operand).
      std::vector<int> spread(span);
      for (unsigned j = 0; j < span; ++j) spread[j] = j % stride == 0 ? static_cast<int>(j / stride) : static_cast<int>(lanes_);
      Value* wide_mask = b_.CreateShuffleVector(mask_, llvm::Constant::getNullValue(mask_->getType()), spread);
      loaded = b_.CreateMaskedLoad(wide, p, al, wide_mask, llvm::Constant::getNullValue(wide));
    }
    std::vector<int> pick(lanes_);
    for (unsigned i = 0; i < lanes_; ++i) pick[i] = static_cast<int>(i * stride);
    return b_.CreateShuffleVector(loaded, pick);
  }

  // The unmasked span from `p` read as whole vectors (the last one ending at
  // the span's end, overlapping the one before), its lanes picked by
  // shuffles. A span of (lanes - 1) * stride + 1 elements is an odd vector
  // type, which x86 legalises into 128-bit loads and one insert per element
  // (MobileNetV2's stride-2 depthwise phase pack: 63% of the kernel's time);
  // whole vectors become a load per vector and a few shuffles.
  Value* ChunkedStridedLoad(Type* et, Value* p, unsigned span, llvm::Align al) {
    const unsigned n = static_cast<unsigned>(lanes_);
    const unsigned chunks = (span + n - 1) / n;
    std::vector<Value*> parts;
    std::vector<unsigned> starts;
    for (unsigned k = 0; k < chunks; ++k) {
      starts.push_back(std::min(k * n, span - n));
      Value* at = b_.CreateConstInBoundsGEP1_64(et, p, starts.back());
      parts.push_back(b_.CreateAlignedLoad(VecTy(et), at, al));
    }
    Value* whole = Concatenate(std::move(parts));
    const unsigned stride = (span - 1) / (n - 1);
    std::vector<int> pick(n);
    for (unsigned i = 0; i < n; ++i) {
      const unsigned e = i * stride, k = std::min(e / n, chunks - 1);
      pick[i] = static_cast<int>(k * n + (e - starts[k]));
    }
    return b_.CreateShuffleVector(whole, pick);
  }

  absl::Status LowerStmt(const Stmt& s) {
    memo_.clear();
    first_memo_.clear();
    switch (s->kind) {
      case StmtKind::kBlock:
        for (size_t i = 0; i < s->body.size();) {
          ASSIGN_OR_RETURN(size_t taken, LowerInterleavedStores(s->body, i));
          if (taken == 0) RETURN_IF_ERROR(LowerStmt(s->body[i]));
          i += std::max<size_t>(taken, 1);
        }
        return absl::OkStatus();
      case StmtKind::kLet: {
        ASSIGN_OR_RETURN(Value * v, LowerExpr(s->value));
        std::optional<int64_t> st = Stride(s->value);
        auto saved = vars_.find(s->var) != vars_.end() ? std::optional<VarVal>(vars_[s->var]) : std::nullopt;
        vars_[s->var] = {v, st, s->value->type == ScalarType::kI64 ? KnownMultiple(s->value) : 1};
        if (IsVec(v) && st && *st != 0) {
          ASSIGN_OR_RETURN(vars_[s->var].first, FirstLane(s->value));
        }
        RETURN_IF_ERROR(LowerStmt(s->body[0]));
        if (saved) vars_[s->var] = *saved; else vars_.erase(s->var);
        return absl::OkStatus();
      }
      case StmtKind::kAllocate: {
        Type* et = MemTy(s->buffer->dtype);
        if (s->buffer->role == BufferRole::kShared) {
          auto* arr = llvm::ArrayType::get(et, s->buffer->num_elements());
          auto* gv = new llvm::GlobalVariable(*module_, arr, false, llvm::GlobalValue::InternalLinkage,
                                              llvm::UndefValue::get(arr), absl::StrCat(symbol_, "_", s->buffer->name),
                                              nullptr, llvm::GlobalValue::NotThreadLocal, /*AddressSpace=*/3);
          gv->setAlignment(llvm::Align(kMaxGpuAccessAlign));
          bufs_[s->buffer.get()] = llvm::ConstantExpr::getAddrSpaceCast(gv, ptr_);
          RETURN_IF_ERROR(LowerStmt(s->body[0]));
          bufs_.erase(s->buffer.get());
          return absl::OkStatus();
        }
        llvm::IRBuilder<> eb(entry_, entry_->begin());
        llvm::AllocaInst* a = eb.CreateAlloca(llvm::ArrayType::get(et, s->buffer->num_elements()), nullptr,
                                              s->buffer->name);
        a->setAlignment(llvm::Align(64));
        bufs_[s->buffer.get()] = a;
        RETURN_IF_ERROR(LowerStmt(s->body[0]));
        bufs_.erase(s->buffer.get());
        return absl::OkStatus();
      }
      case StmtKind::kStore: return LowerStore(s);
      case StmtKind::kIf: {
        ASSIGN_OR_RETURN(Value * c, LowerExpr(s->value));
        const Stmt& then = s->body[0];
        Stmt otherwise = s->body.size() > 1 ? s->body[1] : nullptr;
        if (!IsVec(c)) {
          return IfThen(c, "if", [&] { return LowerStmt(then); },
                        otherwise ? std::function<absl::Status()>([&] { return LowerStmt(otherwise); }) : nullptr);
        }
        Value* saved = mask_;
        if (otherwise != nullptr && then->kind == StmtKind::kStore && otherwise->kind == StmtKind::kStore &&
            then->buffer == otherwise->buffer && Print(then->index) == Print(otherwise->index)) {
          // Both arms store to the same elements: one store of the selected
          // value (each arm's loads masked by its lanes). Two masked stores
          // would leave partial writes that later loads cannot forward from.
          mask_ = saved ? b_.CreateAnd(saved, c) : c;
          ASSIGN_OR_RETURN(Value * vt, LowerExpr(then->value));
          Value* nc = b_.CreateNot(c);
          mask_ = saved ? b_.CreateAnd(saved, nc) : nc;
          ASSIGN_OR_RETURN(Value * ve, LowerExpr(otherwise->value));
          mask_ = saved;
          vt = Splat(vt);
          ve = Splat(ve);
          if (vt->getType() == ve->getType()) return StoreValue(then, b_.CreateSelect(c, vt, ve));
          mask_ = saved;  // arms of different types: each its own masked store
        }
        mask_ = saved ? b_.CreateAnd(saved, c) : c;
        RETURN_IF_ERROR(LowerStmt(then));
        if (otherwise) {
          Value* nc = b_.CreateNot(c);
          mask_ = saved ? b_.CreateAnd(saved, nc) : nc;
          RETURN_IF_ERROR(LowerStmt(otherwise));
        }
        mask_ = saved;
        return absl::OkStatus();
      }
      case StmtKind::kFor: return LowerFor(s);
      case StmtKind::kWarpReduce: return LowerWarpReduce(s);
      case StmtKind::kFence:
        // An empty asm statement that may touch memory: no load or store
        // crosses it, no load after it reuses one before it. GPU kernels
        // leave their scheduling to ptxas.
        if (!gpu_) {
          auto* fty = llvm::FunctionType::get(Type::getVoidTy(ctx_), false);
          b_.CreateCall(llvm::InlineAsm::get(fty, "", "~{memory}", /*hasSideEffects=*/true));
        }
        return absl::OkStatus();
    }
    return absl::InvalidArgumentError("unknown statement");
  }

  // The thread loops after which the block does nothing more (the last
  // statement of the block's body, through allocations, lets and both arms
  // of an if, but not through a serial loop, which runs again): they need no
  // barrier after them.
  void MarkLastThreadLoops(const Stmt& s) {
    switch (s->kind) {
      case StmtKind::kBlock:
        if (!s->body.empty()) MarkLastThreadLoops(s->body.back());
        return;
      case StmtKind::kAllocate:
      case StmtKind::kLet: MarkLastThreadLoops(s->body[0]); return;
      case StmtKind::kIf:
        for (const Stmt& c : s->body) {
          if (c != nullptr) MarkLastThreadLoops(c);
        }
        return;
      case StmtKind::kFor:
        if (s->for_kind == ForKind::kGpuThread) last_thread_loops_.insert(s.get());
        return;
      default: return;
    }
  }

  // Butterfly shuffles within groups of `width` lanes, one element of the
  // local buffer at a time.
  absl::Status LowerWarpReduce(const Stmt& s) {
    if (!gpu_) return absl::InvalidArgumentError("warp_reduce in a CPU kernel");
    ASSIGN_OR_RETURN(Value * base, BufferPtr(s->buffer));
    int64_t width = 0;
    AsConst(s->extent, &width);
    const ScalarType dt = s->buffer->dtype;
    Type* et = MemTy(dt);
    Type* i32 = Type::getInt32Ty(ctx_);
    Value* full = llvm::ConstantInt::get(i32, 0xffffffffu);
    Value* clamp = llvm::ConstantInt::get(i32, 0x1f);
    auto shuffle32 = [&](Value* v, int64_t lane_mask) -> Value* {
      const bool fp = v->getType()->isFloatTy();
      return b_.CreateIntrinsic(fp ? llvm::Intrinsic::nvvm_shfl_sync_bfly_f32 : llvm::Intrinsic::nvvm_shfl_sync_bfly_i32,
                                {}, {full, v, llvm::ConstantInt::get(i32, lane_mask), clamp});
    };
    auto shuffle = [&](Value* v, int64_t lane_mask) -> Value* {
      if (dt != ScalarType::kI64) return shuffle32(v, lane_mask);
      Value* lo = shuffle32(b_.CreateTrunc(v, i32), lane_mask);
      Value* hi = shuffle32(b_.CreateTrunc(b_.CreateLShr(v, 32), i32), lane_mask);
      return b_.CreateOr(b_.CreateZExt(lo, i64_), b_.CreateShl(b_.CreateZExt(hi, i64_), 32));
    };
    auto combine = [&](Value* a, Value* b) -> Value* {
      const bool fp = dt == ScalarType::kF32;
      if (s->var == "sum") return fp ? b_.CreateFAdd(a, b) : b_.CreateAdd(a, b);
      const bool max = s->var == "max";
      if (fp) return MaxMin(a, b, max);
      return b_.CreateBinaryIntrinsic(max ? llvm::Intrinsic::smax : llvm::Intrinsic::smin, a, b);
    };
    llvm::Align al = AlignOf(dt);
    for (int64_t j = 0; j < s->buffer->num_elements(); ++j) {
      Value* p = b_.CreateInBoundsGEP(et, base, I64(j));
      Value* v = b_.CreateAlignedLoad(et, p, al);
      for (int64_t lane_mask = width / 2; lane_mask >= 1; lane_mask /= 2) v = combine(v, shuffle(v, lane_mask));
      b_.CreateAlignedStore(v, p, al);
    }
    return absl::OkStatus();
  }

  absl::Status LowerFor(const Stmt& s) {
    int64_t ext = 0;
    bool is_const = AsConst(s->extent, &ext);
    if (s->for_kind == ForKind::kGpuThread) {
      if (!gpu_) return absl::InvalidArgumentError(absl::StrCat("gpu_thread loop ", s->var, " in a CPU kernel"));
      auto body = [&]() -> absl::Status {
        vars_[s->var] = {tid_, 0};
        absl::Status st = LowerStmt(s->body[0]);
        vars_.erase(s->var);
        return st;
      };
      if (ext >= launch_.threads) {
        RETURN_IF_ERROR(body());
      } else {
        RETURN_IF_ERROR(IfThen(b_.CreateICmpSLT(tid_, I64(ext)), s->var, body));
      }
      if (launch_.shared_bytes > 0 && last_thread_loops_.count(s.get()) == 0) {
        b_.CreateIntrinsic(llvm::Intrinsic::nvvm_barrier0, {}, {});
      }
      return absl::OkStatus();
    }
    if (s->for_kind == ForKind::kGpuBlock || (gpu_ && s->for_kind == ForKind::kParallel)) {
      return absl::InvalidArgumentError(absl::StrCat(ForKindName(s->for_kind), " loop ", s->var, " is misplaced"));
    }
    if (s->for_kind == ForKind::kVectorized && lanes_ == 1 && ext > 1) {
      lanes_ = ext;
      vars_[s->var] = {Iota(), 1, int64_t{1} << 20, I64(0)};
      absl::Status st = LowerStmt(s->body[0]);
      vars_.erase(s->var);
      lanes_ = 1;
      return st;
    }
    // A serial loop of one iteration is its body at 0: indices stay constant
    // (a guarded tail's stores into a temporary can then be blends).
    const bool single = s->for_kind == ForKind::kSerial && is_const && ext == 1;
    if ((s->for_kind == ForKind::kUnrolled || s->for_kind == ForKind::kVectorized || single) && is_const) {
      for (int64_t i = 0; i < ext; ++i) {
        vars_[s->var] = {I64(i), 0, KnownMultiple(IntImm(i))};
        RETURN_IF_ERROR(LowerStmt(s->body[0]));
      }
      vars_.erase(s->var);
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(Value * hi, LowerExpr(s->extent));
    if (IsVec(hi)) return absl::InvalidArgumentError(absl::StrCat("loop ", s->var, " has a lane-varying extent"));
    return Loop(I64(0), hi, s->var, [&] { return LowerStmt(s->body[0]); });
  }

  // One store of an interleaved group: `store`, guarded by `cond` (null:
  // unguarded), writing element `offset` of each lane's run of `stride`.
  struct GroupStore {
    Stmt store;
    Expr cond;
    int64_t offset = 0;
  };

  // `e` as a sum of terms: the printed non-constant terms (sorted) and the
  // constant, for telling whether two indices differ by a constant.
  static std::pair<std::vector<std::string>, int64_t> AffineTerms(const Expr& e) {
    std::vector<std::string> terms;
    int64_t constant = 0;
    std::function<void(const Expr&, int64_t)> walk = [&](const Expr& x, int64_t sign) {
      if (x->kind == ExprKind::kIntImm) {
        constant += sign * x->int_value;
      } else if (x->kind == ExprKind::kAdd) {
        walk(x->args[0], sign);
        walk(x->args[1], sign);
      } else if (x->kind == ExprKind::kSub && x->args[1]->kind == ExprKind::kIntImm) {
        walk(x->args[0], sign);
        constant -= sign * x->args[1]->int_value;
      } else {
        terms.push_back(absl::StrCat(sign < 0 ? "-" : "+", Print(x)));
      }
    };
    walk(e, 1);
    std::sort(terms.begin(), terms.end());
    return {terms, constant};
  }

  static bool LoadsFrom(const Expr& e, const BufferNode* b) {
    if (e == nullptr) return false;
    if (e->kind == ExprKind::kLoad && e->buffer.get() == b) return true;
    return std::any_of(e->args.begin(), e->args.end(), [&](const Expr& a) { return LoadsFrom(a, b); });
  }

  // Statements body[i..] that store one buffer at lane stride s (2..8) and
  // together fill every element of each lane's run of s, each unguarded or
  // under an `if` of its own: on the CPU their values are interleaved by
  // shuffles and written as contiguous (masked) vectors instead of s
  // scatters (a Winograd output tile row: four stores of lane stride 4).
  // Past 8, a group of one store per lane (the lanes a power of two) at
  // offsets 0..lanes-1 is a transpose: each lane's run of `lanes` elements
  // becomes one vector, written where the run starts (a stride equal to the
  // lanes: one span; a wider one: runs apart, as the depthwise
  // channel-vector variant's stores to NCHW planes).
  // The values must not read the buffer, so the order of the stores does
  // not matter. Returns how many statements it lowered (0: none matched).
  absl::StatusOr<size_t> LowerInterleavedStores(const std::vector<Stmt>& body, size_t i) {
    if (gpu_ || lanes_ == 1) return size_t{0};
    auto as_store = [](const Stmt& st) -> std::optional<GroupStore> {
      if (st->kind == StmtKind::kStore) return GroupStore{st, nullptr, 0};
      if (st->kind == StmtKind::kIf && st->body.size() == 1 && st->body[0]->kind == StmtKind::kStore) {
        return GroupStore{st->body[0], st->value, 0};
      }
      return std::nullopt;
    };
    std::optional<GroupStore> head = as_store(body[i]);
    if (!head) return size_t{0};
    std::optional<int64_t> stride = Stride(head->store->index);
    if (!stride || *stride < 2) return size_t{0};
    // Lane strides past 8: a group of one store per lane (a power of two),
    // interleaved by a network of two-vector shuffles (a transpose).
    const bool network = *stride > 8;
    if (network && (*stride < lanes_ || (lanes_ & (lanes_ - 1)) != 0)) return size_t{0};
    const size_t n = static_cast<size_t>(network ? lanes_ : *stride);
    if (i + n > body.size()) return size_t{0};
    const auto [head_terms, head_const] = AffineTerms(head->store->index);
    std::vector<GroupStore> group;
    std::vector<bool> seen(n, false);
    int64_t lowest = 0;
    for (size_t k = 0; k < n; ++k) {
      std::optional<GroupStore> g = as_store(body[i + k]);
      if (!g || g->store->buffer != head->store->buffer || Stride(g->store->index) != stride) return size_t{0};
      const auto [terms, constant] = AffineTerms(g->store->index);
      if (terms != head_terms || std::abs(constant - head_const) >= static_cast<int64_t>(n)) return size_t{0};
      g->offset = constant - head_const;
      lowest = std::min(lowest, g->offset);
      group.push_back(*g);
    }
    for (GroupStore& g : group) {
      g.offset -= lowest;
      if (g.offset >= static_cast<int64_t>(n) || seen[static_cast<size_t>(g.offset)]) return size_t{0};
      seen[static_cast<size_t>(g.offset)] = true;
      if (LoadsFrom(g.store->value, g.store->buffer.get()) || LoadsFrom(g.cond, g.store->buffer.get())) {
        return size_t{0};
      }
    }
    const ScalarType dt = head->store->buffer->dtype;
    Type* et = MemTy(dt);
    Value* saved = mask_;
    std::vector<Value*> values(n), masks(n);
    bool masked = saved != nullptr;
    for (const GroupStore& g : group) {
      // Each store's loads are masked by its own lanes: nothing lowered
      // under another's mask is reused.
      memo_.clear();
      first_memo_.clear();
      mask_ = saved;
      if (g.cond != nullptr) {
        ASSIGN_OR_RETURN(Value * c, LowerExpr(g.cond));
        if (!IsVec(c)) c = b_.CreateVectorSplat(lanes_, c);
        mask_ = saved ? b_.CreateAnd(saved, c) : c;
        masked = true;
      }
      ASSIGN_OR_RETURN(Value * v, LowerExpr(g.store->value));
      const size_t at = static_cast<size_t>(g.offset);
      values[at] = ToMem(Splat(v), dt);
      masks[at] = Mask();
    }
    mask_ = saved;
    // Lane l's element o goes to l * n + o of the run.
    auto interleave = [&](std::vector<Value*> parts) {
      Value* whole = Concatenate(std::move(parts));
      std::vector<int> pick(n * static_cast<size_t>(lanes_));
      for (int64_t l = 0; l < lanes_; ++l) {
        for (size_t o = 0; o < n; ++o) pick[static_cast<size_t>(l) * n + o] = static_cast<int>(o * lanes_ + l);
      }
      return b_.CreateShuffleVector(whole, pick);
    };
    ASSIGN_OR_RETURN(Value * base, BufferPtr(head->store->buffer));
    ASSIGN_OR_RETURN(Value * first, FirstLane(head->store->index));
    first = b_.CreateAdd(first, llvm::ConstantInt::get(i64_, lowest));
    if (network) {
      // Vector k of the interleaved runs: lane k's run where the runs are
      // apart (a stride past the lanes), else the k-th vector of one span.
      std::vector<Value*> runs = InterleaveNetwork(values), run_masks;
      if (masked) run_masks = InterleaveNetwork(masks);
      const int64_t apart = *stride > lanes_ ? *stride : lanes_;
      for (size_t k = 0; k < n; ++k) {
        Value* p = b_.CreateInBoundsGEP(et, base, b_.CreateAdd(first, llvm::ConstantInt::get(i64_, k * apart)));
        if (!masked) {
          b_.CreateAlignedStore(runs[k], p, AlignOf(dt));
        } else {
          b_.CreateMaskedStore(runs[k], p, AlignOf(dt), run_masks[k]);
        }
      }
      return n;
    }
    Value* p = b_.CreateInBoundsGEP(et, base, first);
    Value* run = interleave(values);
    if (!masked) {
      b_.CreateAlignedStore(run, p, AlignOf(dt));
    } else {
      b_.CreateMaskedStore(run, p, AlignOf(dt), interleave(masks));
    }
    return n;
  }

  // The interleaving of n vectors of n lanes (n a power of two: element l
  // of vector o goes to l * n + o), as n vectors: log2(n) rounds of zipping
  // vector i with vector i + n/2 into the lower and upper halves' pairs,
  // n * log2(n) two-vector shuffles (a 16 x 16 transpose in 64; one
  // shuffle of the concatenation was lowered as a tree per result vector).
  std::vector<Value*> InterleaveNetwork(std::vector<Value*> v) {
    const size_t n = v.size();
    const int w = static_cast<int>(llvm::cast<llvm::FixedVectorType>(v[0]->getType())->getNumElements());
    if (n == 16 && w == 16) return Transpose16(std::move(v));
    std::vector<int> lo(static_cast<size_t>(w)), hi(static_cast<size_t>(w));
    for (int j = 0; j < w / 2; ++j) {
      lo[2 * j] = j;
      lo[2 * j + 1] = w + j;
      hi[2 * j] = w / 2 + j;
      hi[2 * j + 1] = w + w / 2 + j;
    }
    for (size_t round = 1; round < n; round *= 2) {
      std::vector<Value*> next(n);
      for (size_t i = 0; i < n / 2; ++i) {
        next[2 * i] = b_.CreateShuffleVector(v[i], v[i + n / 2], lo);
        next[2 * i + 1] = b_.CreateShuffleVector(v[i], v[i + n / 2], hi);
      }
      v = std::move(next);
    }
    return v;
  }

  // A 16 x 16 transpose (out[l] = lane l of every input, in order) as x86's
  // AVX-512 idiom: two rounds within the 128-bit lanes (unpack, then
  // shuffle of pairs: 1-cycle shuffles) and two of whole 128-bit lanes,
  // also 64 shuffles but none of them a two-source permute, which takes an
  // index register and overwrites a source. Zen 5, 1 thread: the depthwise
  // channel-vector groups of 25 corpus models 1.04x summed over the zip
  // network (0.95-1.26 a model; bench/binary_ab.py --profile --groups).
  std::vector<Value*> Transpose16(std::vector<Value*> r) {
    // Element 4k + o of each 128-bit lane k (o from 16 on: of the second
    // source), and whole 128-bit lanes of the two sources' eight.
    auto in_lanes = [](std::initializer_list<int> o) {
      std::vector<int> m;
      for (int k = 0; k < 4; ++k) {
        for (int e : o) m.push_back(4 * k + e);
      }
      return m;
    };
    auto blocks = [](std::initializer_list<int> sel) {
      std::vector<int> m;
      for (int b : sel) {
        for (int e = 0; e < 4; ++e) m.push_back(4 * b + e);
      }
      return m;
    };
    const std::vector<int> unpack_lo = in_lanes({0, 16, 1, 17}), unpack_hi = in_lanes({2, 18, 3, 19});
    const std::vector<int> pairs_lo = in_lanes({0, 1, 16, 17}), pairs_hi = in_lanes({2, 3, 18, 19});
    const std::vector<int> even = blocks({0, 2, 4, 6}), odd = blocks({1, 3, 5, 7});
    auto shuffle = [&](Value* a, Value* b, const std::vector<int>& m) { return b_.CreateShuffleVector(a, b, m); };
    std::vector<Value*> t(16), u(16), w(16), out(16);
    for (int i = 0; i < 8; ++i) {
      t[2 * i] = shuffle(r[2 * i], r[2 * i + 1], unpack_lo);
      t[2 * i + 1] = shuffle(r[2 * i], r[2 * i + 1], unpack_hi);
    }
    for (int j = 0; j < 4; ++j) {
      u[4 * j] = shuffle(t[4 * j], t[4 * j + 2], pairs_lo);
      u[4 * j + 1] = shuffle(t[4 * j], t[4 * j + 2], pairs_hi);
      u[4 * j + 2] = shuffle(t[4 * j + 1], t[4 * j + 3], pairs_lo);
      u[4 * j + 3] = shuffle(t[4 * j + 1], t[4 * j + 3], pairs_hi);
    }
    for (int j = 0; j < 2; ++j) {
      for (int m = 0; m < 4; ++m) {
        w[8 * j + m] = shuffle(u[8 * j + m], u[8 * j + 4 + m], even);
        w[8 * j + 4 + m] = shuffle(u[8 * j + m], u[8 * j + 4 + m], odd);
      }
    }
    for (int m = 0; m < 8; ++m) {
      out[m] = shuffle(w[m], w[8 + m], even);
      out[8 + m] = shuffle(w[m], w[8 + m], odd);
    }
    return out;
  }

  // `parts` (vectors of one type) end to end, concatenated pairwise; a
  // missing partner is poison, so the result's length is rounded up to a
  // power of two parts.
  Value* Concatenate(std::vector<Value*> parts) {
    while (parts.size() > 1) {
      std::vector<Value*> next;
      for (size_t i = 0; i < parts.size(); i += 2) {
        Value* a = parts[i];
        Value* b = i + 1 < parts.size() ? parts[i + 1] : llvm::PoisonValue::get(a->getType());
        const unsigned w = llvm::cast<llvm::FixedVectorType>(a->getType())->getNumElements();
        std::vector<int> cat(2 * w);
        for (unsigned j = 0; j < 2 * w; ++j) cat[j] = static_cast<int>(j);
        next.push_back(b_.CreateShuffleVector(a, b, cat));
      }
      parts = std::move(next);
    }
    return parts[0];
  }

  absl::Status LowerStore(const Stmt& s) {
    ASSIGN_OR_RETURN(Value * v, LowerExpr(s->value));
    return StoreValue(s, v);
  }

  // The store `s` of the lowered value `v` (in place of s->value).
  absl::Status StoreValue(const Stmt& s, Value* v) {
    ASSIGN_OR_RETURN(Value * base, BufferPtr(s->buffer));
    ScalarType dt = s->buffer->dtype;
    Type* et = MemTy(dt);
    llvm::Align al = AlignOf(dt);
    ASSIGN_OR_RETURN(Value * idx, LowerExpr(s->index));
    if (!IsVec(idx)) {
      if (IsVec(v) || mask_ != nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("store ", s->buffer->name, "[", Print(s->index),
                                                       "] has a loop-invariant index inside a vectorized loop"));
      }
      b_.CreateAlignedStore(ToMem(v, dt), b_.CreateInBoundsGEP(et, base, idx), al);
      return absl::OkStatus();
    }
    v = ToMem(Splat(v), dt);
    std::optional<int64_t> st = Stride(s->index);
    if (st && *st == 1) {
      ASSIGN_OR_RETURN(Value * first, FirstLane(s->index));
      Value* p = b_.CreateInBoundsGEP(et, base, first);
      al = VectorAlign(s->index, dt);
      if (mask_ == nullptr) {
        b_.CreateAlignedStore(v, p, al);
      } else if (WholeVectorInAlloca(base, first)) {
        // A guarded store into a stack temporary of this task alone: read
        // the vector, blend, write it whole. The same elements result, and
        // the temporary stays promotable to registers (a masked store would
        // keep it in memory, and the loads after it could not forward from
        // it: a guarded reduction's tail stalled every row).
        Value* old = b_.CreateAlignedLoad(v->getType(), p, al);
        b_.CreateAlignedStore(b_.CreateSelect(mask_, v, old), p, al);
      } else {
        b_.CreateMaskedStore(v, p, al, mask_);
      }
      return absl::OkStatus();
    }
    b_.CreateMaskedScatter(v, b_.CreateInBoundsGEP(et, base, idx), al, Mask());
    return absl::OkStatus();
  }

  struct VarVal {
    Value* value = nullptr;
    std::optional<int64_t> stride;
    int64_t multiple = 1;  // a power of two its first lane is a multiple of (KnownMultiple)
    Value* first = nullptr;  // a lane-varying affine value's first lane, scalar (FirstLane)
  };

  llvm::LLVMContext& ctx_;
  llvm::Module* module_;
  const CpuTarget* target_;
  llvm::IRBuilder<> b_;
  Type* f32_;
  Type* i64_;
  Type* i1_;
  Type* ptr_;
  llvm::Function* fn_ = nullptr;
  BasicBlock* entry_ = nullptr;
  std::map<const BufferNode*, Value*> bufs_;
  std::map<std::string, VarVal> vars_;
  std::map<const ExprNode*, Value*> memo_;
  std::map<const ExprNode*, Value*> first_memo_;  // FirstLane's, per statement like memo_
  unsigned lanes_ = 1;
  Value* mask_ = nullptr;
  // NVPTX only (RunGpu).
  bool gpu_ = false;
  GpuLaunch launch_;
  std::string symbol_;
  Value* tid_ = nullptr;
  std::set<const StmtNode*> last_thread_loops_;
};

}  // namespace

absl::StatusOr<LoweredFunction> LowerToLlvm(const LoopFunc& f, const CpuTarget& target, const std::string& symbol,
                                            llvm::Module* module) {
  if (!ValidSymbol(symbol)) {
    return absl::InvalidArgumentError(absl::StrCat("kernel symbol \"", symbol, "\" is not a C identifier"));
  }
  if (module->getNamedValue(symbol) != nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("kernel symbol ", symbol, " is defined twice"));
  }
  RETURN_IF_ERROR(Verify(f));
  if (IsGpuKernel(f)) return absl::InvalidArgumentError(absl::StrCat("kernel ", f.name, " is a GPU kernel"));
  Lowerer l(module, &target);
  absl::StatusOr<LoweredFunction> r = l.Run(f, symbol);
  if (!r.ok()) {
    if (llvm::Function* fn = module->getFunction(symbol)) fn->eraseFromParent();
  }
  return r;
}

absl::StatusOr<GpuLoweredFunction> LowerToNvptx(const LoopFunc& f, const std::string& symbol,
                                                llvm::Module* module) {
  if (!ValidSymbol(symbol)) {
    return absl::InvalidArgumentError(absl::StrCat("kernel symbol \"", symbol, "\" is not a C identifier"));
  }
  if (module->getNamedValue(symbol) != nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("kernel symbol ", symbol, " is defined twice"));
  }
  RETURN_IF_ERROR(Verify(f));
  if (!IsGpuKernel(f)) return absl::InvalidArgumentError(absl::StrCat("kernel ", f.name, " is not a GPU kernel"));
  Lowerer l(module, nullptr);
  absl::StatusOr<GpuLoweredFunction> r = l.RunGpu(f, symbol);
  if (!r.ok()) {
    if (llvm::Function* fn = module->getFunction(symbol)) fn->eraseFromParent();
  }
  return r;
}

absl::StatusOr<std::string> LowerToLlvmText(const LoopFunc& f, const CpuTarget& target) {
  llvm::LLVMContext ctx;
  llvm::Module m("kiln", ctx);
  RETURN_IF_ERROR(LowerToLlvm(f, target, "kiln_kernel", &m).status());
  return ModuleToText(m);
}

}  // namespace kiln::loop_ir
