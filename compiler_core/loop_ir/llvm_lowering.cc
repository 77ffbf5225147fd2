// Loop IR -> LLVM IR. Expressions lower to scalars when uniform across the
// lanes of the enclosing vectorized loop and to vectors otherwise; loads and
// stores pick contiguous (masked) vector accesses for unit strides and
// gathers/scatters for the rest.
#include "compiler_core/loop_ir/llvm_lowering.h"

#include <cctype>
#include <cmath>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "compiler_core/llvm_pipeline.h"
#include "compiler_core/status_macros.h"
#include "compiler_core/vector_math.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/DerivedTypes.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Intrinsics.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"

namespace kiln::loop_ir {
namespace {

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

class Lowerer {
 public:
  Lowerer(llvm::Module* module, const CpuTarget& target)
      : ctx_(module->getContext()), module_(module), target_(target), b_(ctx_) {
    f32_ = Type::getFloatTy(ctx_);
    i64_ = Type::getInt64Ty(ctx_);
    i1_ = Type::getInt1Ty(ctx_);
    ptr_ = llvm::PointerType::get(ctx_, 0);
  }

  absl::StatusOr<LoweredFunction> Run(const LoopFunc& f, const std::string& symbol) {
    fn_ = DeclareKernelFunction(module_, symbol, target_);
    llvm::Argument* args = fn_->getArg(0);
    entry_ = BasicBlock::Create(ctx_, "entry", fn_);
    b_.SetInsertPoint(entry_);
    for (size_t i = 0; i < f.args.size(); ++i) {
      Value* p = b_.CreateAlignedLoad(ptr_, b_.CreateConstInBoundsGEP1_64(ptr_, args, i), llvm::Align(8),
                                      f.args[i]->name);
      bufs_[f.args[i].get()] = p;
    }
    int64_t num_tasks = NumTasks(f);
    Value* begin = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, fn_->getArg(1), I64(0));
    Value* end = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, fn_->getArg(2), I64(num_tasks));
    const Stmt& body = f.body;
    if (body->kind == StmtKind::kFor && body->for_kind == ForKind::kParallel) {
      RETURN_IF_ERROR(Loop(begin, end, body->var, [&] { return LowerStmt(body->body[0]); }));
    } else {
      RETURN_IF_ERROR(IfThen(b_.CreateICmpSLT(begin, end), "task", [&] { return LowerStmt(body); }));
    }
    b_.CreateRetVoid();
    return LoweredFunction{num_tasks, static_cast<int>(f.args.size())};
  }

 private:
  Value* I64(int64_t v) { return llvm::ConstantInt::get(i64_, v, true); }
  Type* ScalarTy(ScalarType t) {
    switch (t) {
      case ScalarType::kF32: return f32_;
      case ScalarType::kI64: return i64_;
      case ScalarType::kBool: return i1_;
    }
    return f32_;
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

  absl::StatusOr<Value*> LowerExpr(const Expr& e) {
    switch (e->kind) {
      case ExprKind::kIntImm: return I64(e->int_value);
      case ExprKind::kFloatImm: return llvm::ConstantFP::get(f32_, e->float_value);
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
    bool fp = !a.empty() && a.back()->getType()->getScalarType()->isFloatTy();
    switch (e->kind) {
      case ExprKind::kAdd: return fp ? b_.CreateFAdd(a[0], a[1]) : b_.CreateAdd(a[0], a[1]);
      case ExprKind::kSub: return fp ? b_.CreateFSub(a[0], a[1]) : b_.CreateSub(a[0], a[1]);
      case ExprKind::kMul: return fp ? b_.CreateFMul(a[0], a[1]) : b_.CreateMul(a[0], a[1]);
      case ExprKind::kDiv: return fp ? b_.CreateFDiv(a[0], a[1]) : b_.CreateSDiv(a[0], a[1]);
      case ExprKind::kMod: return b_.CreateSRem(a[0], a[1]);
      case ExprKind::kMin:
        return fp ? MaxMin(a[0], a[1], false) : b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, a[0], a[1]);
      case ExprKind::kMax:
        return fp ? MaxMin(a[0], a[1], true) : b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, a[0], a[1]);
      case ExprKind::kLt: return fp ? b_.CreateFCmpOLT(a[0], a[1]) : b_.CreateICmpSLT(a[0], a[1]);
      case ExprKind::kLe: return fp ? b_.CreateFCmpOLE(a[0], a[1]) : b_.CreateICmpSLE(a[0], a[1]);
      case ExprKind::kGt: return fp ? b_.CreateFCmpOGT(a[0], a[1]) : b_.CreateICmpSGT(a[0], a[1]);
      case ExprKind::kGe: return fp ? b_.CreateFCmpOGE(a[0], a[1]) : b_.CreateICmpSGE(a[0], a[1]);
      case ExprKind::kEq: return fp ? b_.CreateFCmpOEQ(a[0], a[1]) : b_.CreateICmpEQ(a[0], a[1]);
      case ExprKind::kNe: return fp ? b_.CreateFCmpUNE(a[0], a[1]) : b_.CreateICmpNE(a[0], a[1]);
      case ExprKind::kAnd: return b_.CreateAnd(a[0], a[1]);
      case ExprKind::kOr: return b_.CreateOr(a[0], a[1]);
      case ExprKind::kNot: return b_.CreateNot(a[0]);
      case ExprKind::kSelect: return b_.CreateSelect(a[0], a[1], a[2]);
      case ExprKind::kCast: {
        Type* from = a[0]->getType()->getScalarType();
        Type* to = ScalarTy(e->type);
        if (IsVec(a[0])) to = VecTy(to);
        if (from->isFloatTy()) {
          if (e->type == ScalarType::kI64) return b_.CreateFPToSI(a[0], to);
          return b_.CreateFCmpUNE(a[0], llvm::ConstantFP::get(a[0]->getType(), 0.0));
        }
        if (from->isIntegerTy(1)) {
          return e->type == ScalarType::kF32 ? b_.CreateUIToFP(a[0], to) : b_.CreateZExt(a[0], to);
        }
        if (e->type == ScalarType::kF32) return b_.CreateSIToFP(a[0], to);
        return b_.CreateICmpNE(a[0], llvm::ConstantInt::get(a[0]->getType(), 0));
      }
      case ExprKind::kCall: {
        const std::string& n = e->name;
        Value* x = a[0];
        if (n == "exp") return vector_math::Exp(b_, x);
        if (n == "log") return vector_math::Log(b_, x);
        if (n == "tanh") return vector_math::Tanh(b_, x);
        if (n == "erf") return vector_math::Erf(b_, x);
        if (n == "sigmoid") return vector_math::Sigmoid(b_, x);
        if (n == "sqrt") return b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x);
        if (n == "abs") return b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
        if (n == "floor") return b_.CreateUnaryIntrinsic(llvm::Intrinsic::floor, x);
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
    Type* et = ScalarTy(e->buffer->dtype);
    ASSIGN_OR_RETURN(Value * idx, LowerExpr(e->args[0]));
    llvm::Align al(e->buffer->dtype == ScalarType::kI64 ? 8 : 4);
    if (!IsVec(idx)) return b_.CreateAlignedLoad(et, b_.CreateInBoundsGEP(et, base, idx), al);
    std::optional<int64_t> st = Stride(e->args[0]);
    if (st && *st == 1) {
      Value* p = b_.CreateInBoundsGEP(et, base, b_.CreateExtractElement(idx, uint64_t{0}));
      if (mask_ == nullptr) return b_.CreateAlignedLoad(VecTy(et), p, al);
      return b_.CreateMaskedLoad(VecTy(et), p, al, mask_, llvm::Constant::getNullValue(VecTy(et)));
    }
    Value* ptrs = b_.CreateInBoundsGEP(et, base, idx);
    return b_.CreateMaskedGather(VecTy(et), ptrs, al, Mask(), llvm::Constant::getNullValue(VecTy(et)));
  }

  absl::Status LowerStmt(const Stmt& s) {
    switch (s->kind) {
      case StmtKind::kBlock:
        for (const Stmt& c : s->body) RETURN_IF_ERROR(LowerStmt(c));
        return absl::OkStatus();
      case StmtKind::kLet: {
        ASSIGN_OR_RETURN(Value * v, LowerExpr(s->value));
        std::optional<int64_t> st = Stride(s->value);
        auto saved = vars_.find(s->var) != vars_.end() ? std::optional<VarVal>(vars_[s->var]) : std::nullopt;
        vars_[s->var] = {v, st};
        RETURN_IF_ERROR(LowerStmt(s->body[0]));
        if (saved) vars_[s->var] = *saved; else vars_.erase(s->var);
        return absl::OkStatus();
      }
      case StmtKind::kAllocate: {
        Type* et = ScalarTy(s->buffer->dtype);
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
    }
    return absl::InvalidArgumentError("unknown statement");
  }

  absl::Status LowerFor(const Stmt& s) {
    int64_t ext = 0;
    bool is_const = AsConst(s->extent, &ext);
    if (s->for_kind == ForKind::kVectorized && lanes_ == 1 && ext > 1) {
      lanes_ = ext;
      vars_[s->var] = {Iota(), 1};
      absl::Status st = LowerStmt(s->body[0]);
      vars_.erase(s->var);
      lanes_ = 1;
      return st;
    }
    if ((s->for_kind == ForKind::kUnrolled || s->for_kind == ForKind::kVectorized) && is_const) {
      for (int64_t i = 0; i < ext; ++i) {
        vars_[s->var] = {I64(i), 0};
        RETURN_IF_ERROR(LowerStmt(s->body[0]));
      }
      vars_.erase(s->var);
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(Value * hi, LowerExpr(s->extent));
    if (IsVec(hi)) return absl::InvalidArgumentError(absl::StrCat("loop ", s->var, " has a lane-varying extent"));
    return Loop(I64(0), hi, s->var, [&] { return LowerStmt(s->body[0]); });
  }

  absl::Status LowerStore(const Stmt& s) {
    ASSIGN_OR_RETURN(Value * base, BufferPtr(s->buffer));
    Type* et = ScalarTy(s->buffer->dtype);
    llvm::Align al(s->buffer->dtype == ScalarType::kI64 ? 8 : 4);
    ASSIGN_OR_RETURN(Value * v, LowerExpr(s->value));
    ASSIGN_OR_RETURN(Value * idx, LowerExpr(s->index));
    if (!IsVec(idx)) {
      if (IsVec(v) || mask_ != nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("store ", s->buffer->name, "[", Print(s->index),
                                                       "] has a loop-invariant index inside a vectorized loop"));
      }
      b_.CreateAlignedStore(v, b_.CreateInBoundsGEP(et, base, idx), al);
      return absl::OkStatus();
    }
    v = Splat(v);
    std::optional<int64_t> st = Stride(s->index);
    if (st && *st == 1) {
      Value* p = b_.CreateInBoundsGEP(et, base, b_.CreateExtractElement(idx, uint64_t{0}));
      if (mask_ == nullptr) {
        b_.CreateAlignedStore(v, p, al);
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
  };

  llvm::LLVMContext& ctx_;
  llvm::Module* module_;
  const CpuTarget& target_;
  llvm::IRBuilder<> b_;
  Type* f32_;
  Type* i64_;
  Type* i1_;
  Type* ptr_;
  llvm::Function* fn_ = nullptr;
  BasicBlock* entry_ = nullptr;
  std::map<const BufferNode*, Value*> bufs_;
  std::map<std::string, VarVal> vars_;
  unsigned lanes_ = 1;
  Value* mask_ = nullptr;
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
  Lowerer l(module, target);
  absl::StatusOr<LoweredFunction> r = l.Run(f, symbol);
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
