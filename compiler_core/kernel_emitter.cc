// Kernel emission: explicit-vector LLVM IR for fused elementwise DAGs
// (vectorized, unrolled, masked tails; the DAG is evaluated in registers) and
// MatMul/Gemm (mr x nr register-blocked micro-kernel of llvm.fmuladd, masked
// column tails, row tails by a one-row block) with the elementwise epilogue DAG
// applied to the accumulator tile before the store; tasks over row and column
// blocks, and optional K blocking with B packed into a stack buffer.
#include "compiler_core/llvm_pipeline.h"
#include "compiler_core/kernel_emitter.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "compiler_core/kernel_spec.h"
#include "compiler_core/loop_ir/llvm_lowering.h"
#include "compiler_core/loop_ir/lower.h"
#include "compiler_core/status_macros.h"
#include "compiler_core/vector_math.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/DerivedTypes.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Intrinsics.h"
#include "llvm/IR/Module.h"

namespace kiln {
namespace {

using llvm::BasicBlock;
using llvm::Type;
using llvm::Value;

int64_t CeilDiv(int64_t a, int64_t b) { return b == 0 ? 0 : (a + b - 1) / b; }

bool ValidSymbol(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

class Emitter {
 public:
  Emitter(llvm::Module* module, const CpuTarget& target)
      : ctx_(module->getContext()), module_(module), target_(target), b_(ctx_) {
    f32_ = Type::getFloatTy(ctx_);
    i32_ = Type::getInt32Ty(ctx_);
    i64_ = Type::getInt64Ty(ctx_);
    ptr_ = llvm::PointerType::get(ctx_, 0);
  }

  // Creates the function and its task loop; `task_body(t)` emits one task.
  void EmitFunction(const std::string& symbol, int num_args, int64_t num_tasks,
                    const std::function<void(Value*)>& task_body) {
    fn_ = DeclareKernelFunction(module_, symbol, target_);
    llvm::Argument* args = fn_->getArg(0);
    entry_ = BasicBlock::Create(ctx_, "entry", fn_);
    b_.SetInsertPoint(entry_);
    for (int i = 0; i < num_args; ++i) {
      Value* p = b_.CreateAlignedLoad(ptr_, b_.CreateConstInBoundsGEP1_64(ptr_, args, i),
                                      llvm::Align(8), absl::StrCat("arg", i));
      arg_ptrs_.push_back(p);
    }
    Value* begin = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, fn_->getArg(1), I64(0));
    Value* end = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, fn_->getArg(2), I64(num_tasks));
    For(begin, end, 1, "task", task_body);
    b_.CreateRetVoid();
  }

  // for (iv = lo; iv < hi; iv += step) body(iv); returns the exit value of iv.
  Value* For(Value* lo, Value* hi, int64_t step, const std::string& name,
             const std::function<void(Value*)>& body) {
    BasicBlock* pre = b_.GetInsertBlock();
    BasicBlock* header = BasicBlock::Create(ctx_, name + ".head", fn_);
    BasicBlock* body_bb = BasicBlock::Create(ctx_, name + ".body", fn_);
    BasicBlock* exit = BasicBlock::Create(ctx_, name + ".exit", fn_);
    b_.CreateBr(header);
    b_.SetInsertPoint(header);
    llvm::PHINode* iv = b_.CreatePHI(i64_, 2, name);
    iv->addIncoming(lo, pre);
    b_.CreateCondBr(b_.CreateICmpSLT(iv, hi), body_bb, exit);
    b_.SetInsertPoint(body_bb);
    body(iv);
    Value* next = b_.CreateAdd(iv, I64(step), name + ".next", false, true);
    iv->addIncoming(next, b_.GetInsertBlock());
    b_.CreateBr(header);
    b_.SetInsertPoint(exit);
    return iv;
  }

  void If(Value* cond, const std::string& name, const std::function<void()>& then) {
    BasicBlock* then_bb = BasicBlock::Create(ctx_, name + ".then", fn_);
    BasicBlock* done = BasicBlock::Create(ctx_, name + ".done", fn_);
    b_.CreateCondBr(cond, then_bb, done);
    b_.SetInsertPoint(then_bb);
    then();
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
  }

  Value* I64(int64_t v) { return llvm::ConstantInt::get(i64_, v, true); }
  Value* F32(Type* t, double v) { return llvm::ConstantFP::get(t, v); }
  Type* Vec(Type* elem, int64_t lanes) {
    return lanes == 1 ? elem : llvm::FixedVectorType::get(elem, static_cast<unsigned>(lanes));
  }
  Type* IntLike(Type* t) {
    if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(t)) return Vec(i32_, vt->getNumElements());
    return i32_;
  }
  Value* Gep(Value* base, Value* offset) { return b_.CreateInBoundsGEP(f32_, base, offset); }
  Value* Splat(Value* scalar, int64_t lanes) {
    return lanes == 1 ? scalar : b_.CreateVectorSplat(static_cast<unsigned>(lanes), scalar);
  }
  // Mask of the first `n` of `lanes` lanes; n may be a runtime i64.
  Value* FirstLanesMask(Value* n, int64_t lanes) {
    std::vector<llvm::Constant*> iota;
    for (int64_t i = 0; i < lanes; ++i) iota.push_back(llvm::ConstantInt::get(i64_, i));
    return b_.CreateICmpSLT(llvm::ConstantVector::get(iota), Splat(n, lanes));
  }
  Value* Load(Value* p, int64_t lanes, Value* mask) {
    Type* t = Vec(f32_, lanes);
    if (mask == nullptr) return b_.CreateAlignedLoad(t, p, llvm::Align(4));
    return b_.CreateMaskedLoad(t, p, llvm::Align(4), mask, llvm::Constant::getNullValue(t));
  }
  void Store(Value* v, Value* p, Value* mask) {
    if (mask == nullptr) {
      b_.CreateAlignedStore(v, p, llvm::Align(4));
    } else {
      b_.CreateMaskedStore(v, p, llvm::Align(4), mask);
    }
  }

  Value* ExpNonPositive(Value* x) { return vector_math::ExpNonPositive(b_, x); }
  Value* Sigmoid(Value* x) { return vector_math::Sigmoid(b_, x); }
  Value* Exp(Value* x) { return vector_math::Exp(b_, x); }
  Value* Tanh(Value* x) { return vector_math::Tanh(b_, x); }
  Value* Erf(Value* x) { return vector_math::Erf(b_, x); }

  // min(max(x, 0), 1) that keeps NaN (as std::clamp).
  Value* Clamp01(Value* x) {
    Type* t = x->getType();
    x = b_.CreateSelect(b_.CreateFCmpOLT(x, F32(t, 0.0)), F32(t, 0.0), x);
    return b_.CreateSelect(b_.CreateFCmpOGT(x, F32(t, 1.0)), F32(t, 1.0), x);
  }

  // numpy maximum/minimum: NaN if either is NaN.
  Value* MaxMin(Value* a, Value* b, bool max) {
    Value* r = max ? b_.CreateSelect(b_.CreateFCmpOLT(a, b), b, a)
                   : b_.CreateSelect(b_.CreateFCmpOGT(a, b), b, a);
    return b_.CreateSelect(b_.CreateFCmpUNO(a, b), F32(a->getType(), NAN), r);
  }

  Value* ApplyOp(const ElementwiseOp& e, const std::vector<Value*>& v) {
    const std::string& op = e.op_type;
    if (op == "Add") return b_.CreateFAdd(v[0], v[1]);
    if (op == "Sub") return b_.CreateFSub(v[0], v[1]);
    if (op == "Mul") return b_.CreateFMul(v[0], v[1]);
    if (op == "Div") return b_.CreateFDiv(v[0], v[1]);
    Type* t = v[0]->getType();
    if (op == "Relu") {
      Value* zero = llvm::Constant::getNullValue(t);
      return b_.CreateSelect(b_.CreateFCmpOLT(v[0], zero), zero, v[0]);
    }
    if (op == "Sigmoid") return Sigmoid(v[0]);
    if (op == "Neg") return b_.CreateFNeg(v[0]);
    if (op == "Abs") return b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, v[0]);
    if (op == "Sqrt") return b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, v[0]);
    if (op == "Reciprocal") return b_.CreateFDiv(F32(t, 1.0), v[0]);
    if (op == "Exp") return Exp(v[0]);
    if (op == "Tanh") return Tanh(v[0]);
    if (op == "Erf") return Erf(v[0]);
    if (op == "Max" || op == "Min") {
      Value* r = v[0];
      for (size_t i = 1; i < v.size(); ++i) r = MaxMin(r, v[i], op == "Max");
      return r;
    }
    if (op == "Clip") {
      Value* x = v[0];
      Value* lo = v.size() > 1 && v[1] != nullptr ? v[1] : nullptr;
      Value* hi = v.size() > 2 && v[2] != nullptr ? v[2] : nullptr;
      if (lo == nullptr && !std::isinf(e.lo)) lo = F32(t, e.lo);
      if (hi == nullptr && !std::isinf(e.hi)) hi = F32(t, e.hi);
      if (lo != nullptr) x = b_.CreateSelect(b_.CreateFCmpOLT(x, lo), lo, x);
      if (hi != nullptr) x = b_.CreateSelect(b_.CreateFCmpOGT(x, hi), hi, x);
      return x;
    }
    if (op == "LeakyRelu") {
      return b_.CreateSelect(b_.CreateFCmpOLT(v[0], F32(t, 0.0)), b_.CreateFMul(v[0], F32(t, e.alpha)), v[0]);
    }
    if (op == "HardSigmoid") {
      return Clamp01(b_.CreateFAdd(b_.CreateFMul(v[0], F32(t, e.alpha)), F32(t, e.beta)));
    }
    if (op == "HardSwish") {
      return b_.CreateFMul(v[0], Clamp01(b_.CreateFAdd(b_.CreateFMul(v[0], F32(t, 1.0 / 6.0)), F32(t, 0.5))));
    }
    assert(op == "Gelu");
    Value* x = v[0];
    Value* inner;
    if (e.tanh_approx) {
      Value* x3 = b_.CreateFMul(b_.CreateFMul(x, x), x);
      Value* u = b_.CreateFMul(b_.CreateFAdd(x, b_.CreateFMul(x3, F32(t, 0.044715))),
                               F32(t, 0.7978845608028654));
      inner = Tanh(u);
    } else {
      inner = Erf(b_.CreateFMul(x, F32(t, 0.7071067811865476)));
    }
    return b_.CreateFMul(b_.CreateFMul(x, F32(t, 0.5)), b_.CreateFAdd(F32(t, 1.0), inner));
  }

  // Evaluates `prog` on its leaves; returns every slot's value.
  std::vector<Value*> EvalProgram(const ElementwiseProgram& prog, std::vector<Value*> slots) {
    for (const ElementwiseOp& e : prog.ops) {
      std::vector<Value*> v;
      for (int s : e.inputs) v.push_back(s < 0 ? nullptr : slots[s]);
      slots.push_back(ApplyOp(e, v));
    }
    return slots;
  }

  // ---- elementwise ----------------------------------------------------------

  EmittedKernel EmitElementwise(const KernelSpec& spec, const ScheduleConfig& config,
                                const std::string& symbol) {
    const ElementwiseSpec& s = spec.elementwise;
    int64_t vw = config.Get("vw", target_.FloatLanes());
    int64_t unroll = config.Get("unroll", 2);
    int64_t chunk = config.Get("chunk", 16384);
    int64_t num_tasks = CeilDiv(s.num_elements, chunk);
    int64_t inner = s.dims.back();
    size_t n_ops = spec.operand_args.size();
    EmitFunction(symbol, spec.num_args, num_tasks, [&](Value* t) {
      Value* start = b_.CreateMul(t, I64(chunk));
      Value* stop = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin,
                                             b_.CreateAdd(start, I64(chunk)), I64(s.num_elements));
      // Runs of the innermost (coalesced) dim: while (pos < stop) { ...; pos += len; }
      BasicBlock* pre = b_.GetInsertBlock();
      BasicBlock* head = BasicBlock::Create(ctx_, "run.head", fn_);
      BasicBlock* body = BasicBlock::Create(ctx_, "run.body", fn_);
      BasicBlock* exit = BasicBlock::Create(ctx_, "run.exit", fn_);
      b_.CreateBr(head);
      b_.SetInsertPoint(head);
      llvm::PHINode* pos = b_.CreatePHI(i64_, 2, "pos");
      pos->addIncoming(start, pre);
      b_.CreateCondBr(b_.CreateICmpSLT(pos, stop), body, exit);
      b_.SetInsertPoint(body);
      Value* row = s.dims.size() == 1 ? I64(0) : b_.CreateSDiv(pos, I64(inner), "row");
      Value* col = s.dims.size() == 1 ? static_cast<Value*>(pos)
                                      : b_.CreateSub(pos, b_.CreateMul(row, I64(inner)), "col");
      Value* len = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.CreateSub(I64(inner), col),
                                            b_.CreateSub(stop, pos));
      std::vector<Value*> in_ptrs;
      std::vector<bool> contiguous;
      for (size_t i = 0; i < n_ops; ++i) {
        const std::vector<int64_t>& st = s.strides[i];
        Value* off = I64(0);
        Value* rem = row;
        for (size_t d = s.dims.size() - 1; d-- > 0;) {
          Value* idx = d == 0 ? rem : b_.CreateSRem(rem, I64(s.dims[d]));
          if (d > 0) rem = b_.CreateSDiv(rem, I64(s.dims[d]));
          if (st[d] != 0) off = b_.CreateAdd(off, b_.CreateMul(idx, I64(st[d])));
        }
        contiguous.push_back(st.back() != 0);
        if (st.back() != 0) off = b_.CreateAdd(off, col);
        in_ptrs.push_back(Gep(arg_ptrs_[spec.operand_args[i]], off));
      }
      std::vector<Value*> out_ptrs;
      for (int arg : spec.output_args) out_ptrs.push_back(Gep(arg_ptrs_[arg], pos));
      EmitElementwiseRun(spec.program, in_ptrs, contiguous, out_ptrs, len, vw, unroll);
      pos->addIncoming(b_.CreateAdd(pos, len), b_.GetInsertBlock());
      b_.CreateBr(head);
      b_.SetInsertPoint(exit);
    });
    return {num_tasks, spec.num_args};
  }

  // out...[i] = prog(in...[i]) for i in [0, len): `vw` lanes x `unroll`, then
  // single vectors, then one masked vector (or scalars when vw == 1).
  void EmitElementwiseRun(const ElementwiseProgram& prog, const std::vector<Value*>& in,
                          const std::vector<bool>& contiguous, const std::vector<Value*>& out,
                          Value* len, int64_t vw, int64_t unroll) {
    std::vector<Value*> splats(in.size(), nullptr);
    for (size_t i = 0; i < in.size(); ++i) {
      if (!contiguous[i]) splats[i] = Splat(b_.CreateAlignedLoad(f32_, in[i], llvm::Align(4)), vw);
    }
    auto step = [&](Value* i, Value* mask) {
      std::vector<Value*> operands;
      for (size_t k = 0; k < in.size(); ++k) {
        operands.push_back(contiguous[k] ? Load(Gep(in[k], i), vw, mask) : splats[k]);
      }
      std::vector<Value*> slots = EvalProgram(prog, std::move(operands));
      for (size_t o = 0; o < out.size(); ++o) Store(slots[prog.results[o]], Gep(out[o], i), mask);
    };
    int64_t block = vw * unroll;
    Value* i = For(I64(0), b_.CreateSub(len, I64(block - 1)), block, "vec", [&](Value* iv) {
      for (int64_t u = 0; u < unroll; ++u) step(b_.CreateAdd(iv, I64(u * vw)), nullptr);
    });
    if (unroll > 1) {
      i = For(i, b_.CreateSub(len, I64(vw - 1)), vw, "vec1", [&](Value* iv) { step(iv, nullptr); });
    }
    if (vw > 1) {
      Value* rest = b_.CreateSub(len, i);
      If(b_.CreateICmpSGT(rest, I64(0)), "tail", [&] { step(i, FirstLanesMask(rest, vw)); });
    }
  }

  // ---- matmul -----------------------------------------------------------------
  //
  // A task is (batch, block of rows, block of columns) (MatMulTiling). Without
  // K blocking (kc = 0) every register tile runs the whole K loop reading B in
  // place. With K blocking the task walks K in blocks of kc: it packs its
  // kc x columns slice of B into a stack buffer (panels of nb columns, kc rows of
  // nb floats each, zero-padded past N), runs every register tile over the
  // block, keeps partial sums in output 0 between blocks, and applies the
  // epilogue once, after the last block.

  // Where a register tile's K range comes from and what it does at the end.
  struct KPart {
    Value* k0 = nullptr;       // first k of the block
    int64_t klen = 0;          // its length
    Value* packed = nullptr;   // packed B of the task, or null: B in place
    Value* n0 = nullptr;       // first column of the task (panel offsets)
    int64_t kc = 0;            // rows of a packed panel
    Value* first = nullptr;    // i1 "no partial sums yet"; null: always start at zero
    bool final = true;         // epilogue and store every output; else store raw sums
  };

  EmittedKernel EmitMatMul(const KernelSpec& spec, const ScheduleConfig& config,
                           const std::string& symbol) {
    const MatMulSpec& s = spec.matmul;
    lanes_ = target_.FloatLanes();
    const MatMulTiling t = TileMatMul(s, config, target_);
    assert(!spec.output_args.empty());
    EmitFunction(symbol, spec.num_args, t.num_tasks, [&](Value* task) {
      Value* packed = nullptr;
      if (t.kc > 0) {
        llvm::IRBuilder<> eb(entry_, entry_->begin());
        llvm::AllocaInst* buf = eb.CreateAlloca(llvm::ArrayType::get(f32_, t.pack_floats), nullptr, "packed_b");
        buf->setAlignment(llvm::Align(64));
        packed = buf;
      }
      int64_t per_batch = std::max<int64_t>(t.row_blocks * t.col_blocks, 1);  // no tasks at all when 0
      Value* batch = b_.CreateUDiv(task, I64(per_batch), "batch");
      Value* r = b_.CreateSub(task, b_.CreateMul(batch, I64(per_batch)));
      Value* rb = b_.CreateUDiv(r, I64(t.col_blocks), "rb");
      Value* cb = b_.CreateSub(r, b_.CreateMul(rb, I64(t.col_blocks)), "cb");
      Value* off_a = I64(0);
      Value* off_b = I64(0);
      std::vector<Value*> off_e(spec.epilogue.size(), I64(0));
      Value* rem = batch;
      for (size_t d = s.batch_dims.size(); d-- > 0;) {
        Value* idx = d == 0 ? rem : b_.CreateURem(rem, I64(s.batch_dims[d]));
        if (d > 0) rem = b_.CreateUDiv(rem, I64(s.batch_dims[d]));
        off_a = b_.CreateAdd(off_a, b_.CreateMul(idx, I64(s.a_batch_strides[d])));
        off_b = b_.CreateAdd(off_b, b_.CreateMul(idx, I64(s.b_batch_strides[d])));
        for (size_t e = 0; e < spec.epilogue.size(); ++e) {
          int64_t st = spec.epilogue[e].batch_strides[d];
          if (st != 0) off_e[e] = b_.CreateAdd(off_e[e], b_.CreateMul(idx, I64(st)));
        }
      }
      Value* off_o = b_.CreateMul(batch, I64(s.m * s.n));
      MatMulPtrs p;
      p.spec = &spec;
      p.a = Gep(arg_ptrs_[spec.operand_args[0]], off_a);
      p.b = Gep(arg_ptrs_[spec.operand_args[1]], off_b);
      p.c = s.has_c ? arg_ptrs_[spec.operand_args[2]] : nullptr;
      for (int arg : spec.output_args) p.outs.push_back(Gep(arg_ptrs_[arg], off_o));
      for (size_t e = 0; e < spec.epilogue.size(); ++e) {
        p.epilogue.push_back(Gep(arg_ptrs_[spec.epilogue[e].arg], off_e[e]));
      }
      p.nb = t.nr * lanes_;
      p.n0 = b_.CreateMul(cb, I64(t.cols_per_task), "n0");
      int64_t n_floor = s.n / p.nb * p.nb;
      p.n_full_end = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin,
                                              b_.CreateAdd(p.n0, I64(t.cols_per_task)), I64(n_floor));
      p.tail_here = s.n % p.nb == 0 ? nullptr : b_.CreateICmpEQ(cb, I64(t.col_blocks - 1));
      Value* m0 = b_.CreateMul(rb, I64(t.rows_per_task), "m0");
      Value* m1 = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.CreateAdd(m0, I64(t.rows_per_task)),
                                           I64(s.m));
      auto rows = [&](const KPart& kp) {
        Value* m = For(m0, b_.CreateSub(m1, I64(t.mr - 1)), t.mr, "rows",
                       [&](Value* mi) { EmitRowBlock(s, p, mi, t.mr, t.ku, kp); });
        if (t.mr > 1) For(m, m1, 1, "rowtail", [&](Value* mi) { EmitRowBlock(s, p, mi, 1, t.ku, kp); });
      };
      if (t.kc == 0) {
        KPart kp;
        kp.k0 = I64(0);
        kp.klen = s.k;
        rows(kp);
        return;
      }
      int64_t nk = std::max<int64_t>(1, CeilDiv(s.k, t.kc));
      int64_t last_k0 = (nk - 1) * t.kc;
      KPart kp;
      kp.packed = packed;
      kp.n0 = p.n0;
      kp.kc = t.kc;
      if (nk > 1) {
        For(I64(0), I64(last_k0), t.kc, "kb", [&](Value* kb) {
          EmitPackB(s, p, packed, kb, t.kc, t.kc, t.nr);
          KPart part = kp;
          part.k0 = kb;
          part.klen = t.kc;
          part.first = b_.CreateICmpEQ(kb, I64(0));
          part.final = false;
          rows(part);
        });
      }
      EmitPackB(s, p, packed, I64(last_k0), s.k - last_k0, t.kc, t.nr);
      kp.k0 = I64(last_k0);
      kp.klen = s.k - last_k0;
      kp.first = nk > 1 ? b_.getFalse() : nullptr;
      rows(kp);
    });
    return {t.num_tasks, spec.num_args};
  }

  struct MatMulPtrs {
    const KernelSpec* spec;
    Value* a;
    Value* b;
    Value* c;
    std::vector<Value*> outs;      // per workload output, at this batch
    std::vector<Value*> epilogue;  // per epilogue operand, at this batch
    int64_t nb = 0;                // columns of a full register panel
    Value* n0 = nullptr;           // the task's columns: full panels in [n0, n_full_end),
    Value* n_full_end = nullptr;   // then the column tail at N / nb * nb when
    Value* tail_here = nullptr;    // this is true (null: N has no tail)
  };

  // Vector j (of `lanes_` floats) of B's row segment at `row` (which points at
  // column n of some k); a gather when B's columns are strided (transB).
  Value* LoadB(const MatMulSpec& s, Value* row, int64_t j, Value* mask) {
    Type* vt = Vec(f32_, lanes_);
    if (s.b_stride_n == 1 || s.n == 1) return Load(Gep(row, I64(j * lanes_)), lanes_, mask);
    std::vector<llvm::Constant*> offs;
    for (int64_t l = 0; l < lanes_; ++l) {
      offs.push_back(llvm::ConstantInt::get(i64_, (j * lanes_ + l) * s.b_stride_n));
    }
    Value* ptrs = b_.CreateInBoundsGEP(f32_, row, llvm::ConstantVector::get(offs));
    if (mask == nullptr) mask = llvm::Constant::getAllOnesValue(Vec(b_.getInt1Ty(), lanes_));
    return b_.CreateMaskedGather(vt, ptrs, llvm::Align(4), mask, llvm::Constant::getNullValue(vt));
  }

  Value* BRow(const MatMulSpec& s, const MatMulPtrs& p, Value* k, Value* n) {
    bool contiguous = s.b_stride_n == 1 || s.n == 1;
    return Gep(p.b, b_.CreateAdd(b_.CreateMul(k, I64(s.b_stride_k)),
                                 b_.CreateMul(n, I64(contiguous ? 1 : s.b_stride_n))));
  }

  // Packs B[k0 .. k0+klen, the task's columns] into `packed`: the panel at
  // column n starts at (n - n0) * kc, row kk of it at + kk * nb.
  void EmitPackB(const MatMulSpec& s, const MatMulPtrs& p, Value* packed, Value* k0, int64_t klen,
                 int64_t kc, int64_t nr) {
    auto panel = [&](Value* n, int64_t nv, Value* mask_last) {
      Value* dst = Gep(packed, b_.CreateMul(b_.CreateSub(n, p.n0), I64(kc)));
      For(I64(0), I64(klen), 1, "pack", [&](Value* kk) {
        Value* src = BRow(s, p, b_.CreateAdd(k0, kk), n);
        Value* d = Gep(dst, b_.CreateMul(kk, I64(p.nb)));
        for (int64_t j = 0; j < nv; ++j) {
          Value* v = LoadB(s, src, j, j == nv - 1 ? mask_last : nullptr);
          b_.CreateAlignedStore(v, Gep(d, I64(j * lanes_)), llvm::Align(64));
        }
      });
    };
    For(p.n0, p.n_full_end, p.nb, "packcols", [&](Value* n) { panel(n, nr, nullptr); });
    if (p.tail_here != nullptr) {
      int64_t rest = s.n % p.nb;
      If(p.tail_here, "packtail", [&] {
        Value* mask = rest % lanes_ == 0 ? nullptr : FirstLanesMask(I64(rest % lanes_), lanes_);
        panel(I64(s.n / p.nb * p.nb), CeilDiv(rest, lanes_), mask);
      });
    }
  }

  void EmitRowBlock(const MatMulSpec& s, const MatMulPtrs& p, Value* m, int64_t rows, int64_t ku,
                    const KPart& kp) {
    For(p.n0, p.n_full_end, p.nb, "cols",
        [&](Value* n) { EmitMicroKernel(s, p, m, n, rows, p.nb, ku, kp); });
    if (p.tail_here != nullptr) {
      If(p.tail_here, "coltail", [&] {
        EmitMicroKernel(s, p, m, I64(s.n / p.nb * p.nb), rows, s.n % p.nb, ku, kp);
      });
    }
  }

  // Out[m..m+rows, n..n+cols] with rows x ceil(cols/lanes) vector accumulators
  // over kp's K range.
  void EmitMicroKernel(const MatMulSpec& s, const MatMulPtrs& p, Value* m, Value* n, int64_t rows,
                       int64_t cols, int64_t ku, const KPart& kp) {
    Type* vt = Vec(f32_, lanes_);
    int64_t nv = CeilDiv(cols, lanes_);
    std::vector<Value*> masks(nv, nullptr);
    if (cols % lanes_ != 0) masks[nv - 1] = FirstLanesMask(I64(cols % lanes_), lanes_);
    // Accumulators live in allocas that SROA turns into registers.
    std::vector<Value*> acc(rows * nv);
    {
      llvm::IRBuilder<> eb(entry_, entry_->begin());
      for (auto& a : acc) a = eb.CreateAlloca(vt);
    }
    std::vector<Value*> out_rows;  // output 0 at row m + i, column n
    for (int64_t i = 0; i < rows; ++i) {
      out_rows.push_back(Gep(p.outs[0], b_.CreateAdd(b_.CreateMul(b_.CreateAdd(m, I64(i)), I64(s.n)), n)));
    }
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < nv; ++j) {
        Value* init = llvm::Constant::getNullValue(vt);
        if (kp.first != nullptr) {
          Value* partial = Load(Gep(out_rows[i], I64(j * lanes_)), lanes_, masks[j]);
          init = b_.CreateSelect(kp.first, init, partial);
        }
        b_.CreateAlignedStore(init, acc[i * nv + j], llvm::Align(4));
      }
    }
    Value* panel = kp.packed == nullptr
                       ? nullptr
                       : Gep(kp.packed, b_.CreateMul(b_.CreateSub(n, kp.n0), I64(kp.kc)));
    std::vector<Value*> a_rows;
    for (int64_t i = 0; i < rows; ++i) {
      a_rows.push_back(Gep(p.a, b_.CreateAdd(b_.CreateMul(b_.CreateAdd(m, I64(i)), I64(s.a_stride_m)),
                                             b_.CreateMul(kp.k0, I64(s.a_stride_k)))));
    }
    auto kstep = [&](Value* k) {  // k relative to kp.k0
      std::vector<Value*> bv;
      if (panel != nullptr) {
        Value* row = Gep(panel, b_.CreateMul(k, I64(p.nb)));
        for (int64_t j = 0; j < nv; ++j) {
          bv.push_back(b_.CreateAlignedLoad(vt, Gep(row, I64(j * lanes_)), llvm::Align(64)));
        }
      } else {
        Value* row = BRow(s, p, b_.CreateAdd(kp.k0, k), n);
        for (int64_t j = 0; j < nv; ++j) bv.push_back(LoadB(s, row, j, masks[j]));
      }
      for (int64_t i = 0; i < rows; ++i) {
        Value* a = b_.CreateAlignedLoad(f32_, Gep(a_rows[i], b_.CreateMul(k, I64(s.a_stride_k))),
                                        llvm::Align(4));
        Value* av = Splat(a, lanes_);
        for (int64_t j = 0; j < nv; ++j) {
          Value* slot = acc[i * nv + j];
          Value* cur = b_.CreateAlignedLoad(vt, slot, llvm::Align(4));
          Value* next = b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {vt}, {av, bv[j], cur});
          b_.CreateAlignedStore(next, slot, llvm::Align(4));
        }
      }
    };
    int64_t kfull = kp.klen / ku * ku;
    if (kfull > 0) {
      For(I64(0), I64(kfull), ku, "k", [&](Value* k) {
        for (int64_t u = 0; u < ku; ++u) kstep(u == 0 ? k : b_.CreateAdd(k, I64(u)));
      });
    }
    for (int64_t k = kfull; k < kp.klen; ++k) kstep(I64(k));
    if (!kp.final) {
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < nv; ++j) {
          Value* v = b_.CreateAlignedLoad(vt, acc[i * nv + j], llvm::Align(4));
          Store(v, Gep(out_rows[i], I64(j * lanes_)), masks[j]);
        }
      }
      return;
    }
    // Epilogue: alpha * acc + beta * C, then the fused elementwise DAG, then
    // store every workload output.
    const KernelSpec& spec = *p.spec;
    for (int64_t i = 0; i < rows; ++i) {
      Value* mi = b_.CreateAdd(m, I64(i));
      std::vector<Value*> epi_rows;
      for (size_t e = 0; e < spec.epilogue.size(); ++e) {
        epi_rows.push_back(Gep(p.epilogue[e], b_.CreateMul(mi, I64(spec.epilogue[e].stride_m))));
      }
      for (int64_t j = 0; j < nv; ++j) {
        Value* v = b_.CreateAlignedLoad(vt, acc[i * nv + j], llvm::Align(4));
        if (s.alpha != 1.0f) v = b_.CreateFMul(v, F32(vt, s.alpha));
        Value* nj = b_.CreateAdd(n, I64(j * lanes_));
        if (s.has_c && s.beta != 0.0f) {
          Value* c_row = Gep(p.c, b_.CreateMul(mi, I64(s.c_stride_m)));
          Value* c = s.c_stride_n != 0 ? Load(Gep(c_row, nj), lanes_, masks[j])
                                       : Splat(b_.CreateAlignedLoad(f32_, c_row, llvm::Align(4)), lanes_);
          if (s.beta != 1.0f) c = b_.CreateFMul(c, F32(vt, s.beta));
          v = b_.CreateFAdd(v, c);
        }
        std::vector<Value*> leaves = {v};
        for (size_t e = 0; e < spec.epilogue.size(); ++e) {
          // Inside one row an operand is contiguous (stride 1) or broadcast (0).
          assert(spec.epilogue[e].stride_n == 0 || spec.epilogue[e].stride_n == 1);
          leaves.push_back(spec.epilogue[e].stride_n != 0
                               ? Load(Gep(epi_rows[e], nj), lanes_, masks[j])
                               : Splat(b_.CreateAlignedLoad(f32_, epi_rows[e], llvm::Align(4)), lanes_));
        }
        std::vector<Value*> slots = EvalProgram(spec.program, std::move(leaves));
        Value* out_off = b_.CreateAdd(b_.CreateMul(mi, I64(s.n)), nj);
        for (size_t o = 0; o < p.outs.size(); ++o) {
          Store(slots[spec.program.results[o]], Gep(p.outs[o], out_off), masks[j]);
        }
      }
    }
  }

 private:
  llvm::LLVMContext& ctx_;
  llvm::Module* module_;
  const CpuTarget& target_;
  llvm::IRBuilder<> b_;
  Type* f32_;
  Type* i32_;
  Type* i64_;
  Type* ptr_;
  llvm::Function* fn_ = nullptr;
  BasicBlock* entry_ = nullptr;
  std::vector<Value*> arg_ptrs_;
  int64_t lanes_ = 1;
};

}  // namespace

absl::StatusOr<EmittedKernel> EmitKernel(const Graph& workload, const ScheduleConfig& config,
                                         const CpuTarget& target, const std::string& symbol,
                                         llvm::Module* module) {
  if (!ValidSymbol(symbol)) {
    return absl::InvalidArgumentError(absl::StrCat("kernel symbol \"", symbol, "\" is not a C identifier"));
  }
  if (module->getNamedValue(symbol) != nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("kernel symbol ", symbol, " is defined twice"));
  }
  absl::StatusOr<KernelSpec> analyzed = AnalyzeWorkload(workload);
  if (!analyzed.ok()) {
    // Kinds the direct emitters do not take go through loop IR.
    const loop_ir::WorkloadLowering* l = loop_ir::FindLowering(workload);
    if (l == nullptr) return analyzed.status();
    RETURN_IF_ERROR(l->validate(workload, config, target));
    ASSIGN_OR_RETURN(loop_ir::LoopFunc f, l->lower(workload, config, target));
    ASSIGN_OR_RETURN(loop_ir::LoweredFunction lf, loop_ir::LowerToLlvm(f, target, symbol, module));
    return EmittedKernel{lf.num_tasks, lf.num_args};
  }
  const KernelSpec& spec = *analyzed;
  RETURN_IF_ERROR(ValidateSchedule(workload, config, target));
  Emitter emitter(module, target);
  if (spec.kind == KernelSpec::Kind::kMatMul) return emitter.EmitMatMul(spec, config, symbol);
  return emitter.EmitElementwise(spec, config, symbol);
}

}  // namespace kiln
