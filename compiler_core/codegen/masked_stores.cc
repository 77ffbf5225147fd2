#include "compiler_core/codegen/masked_stores.h"

#include <cstdint>
#include <vector>

#include "llvm/ADT/bit.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/DerivedTypes.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/Intrinsics.h"
#include "llvm/IR/Module.h"

namespace kiln {
namespace {

// The mask's lanes, or nothing when a lane is not a constant.
bool ConstantLanes(llvm::Value* mask, unsigned lanes, std::vector<bool>* set) {
  auto* c = llvm::dyn_cast<llvm::Constant>(mask);
  if (c == nullptr) return false;
  set->assign(lanes, false);
  for (unsigned i = 0; i < lanes; ++i) {
    auto* lane = llvm::dyn_cast_or_null<llvm::ConstantInt>(c->getAggregateElement(i));
    if (lane == nullptr) return false;
    (*set)[i] = lane->isOne();
  }
  return true;
}

// Stores lanes [first, first + count) of `value` at element `first` of `ptr`.
void StoreLanes(llvm::IRBuilder<>& b, llvm::Value* value, llvm::Value* ptr, llvm::Type* elem, unsigned first,
                unsigned count, llvm::Align vector_align, const llvm::DataLayout& dl) {
  llvm::Value* at = b.CreateConstInBoundsGEP1_64(elem, ptr, first);
  const uint64_t offset = uint64_t{first} * dl.getTypeStoreSize(elem);
  const llvm::Align align = llvm::commonAlignment(vector_align, offset);
  if (count == 1) {
    b.CreateAlignedStore(b.CreateExtractElement(value, uint64_t{first}), at, align);
    return;
  }
  std::vector<int> pick(count);
  for (unsigned i = 0; i < count; ++i) pick[i] = static_cast<int>(first + i);
  b.CreateAlignedStore(b.CreateShuffleVector(value, pick), at, align);
}

}  // namespace

int SplitConstantMaskedStores(llvm::Function& fn) {
  std::vector<llvm::IntrinsicInst*> stores;
  for (llvm::BasicBlock& bb : fn) {
    for (llvm::Instruction& inst : bb) {
      auto* call = llvm::dyn_cast<llvm::IntrinsicInst>(&inst);
      if (call != nullptr && call->getIntrinsicID() == llvm::Intrinsic::masked_store) stores.push_back(call);
    }
  }
  const llvm::DataLayout& dl = fn.getParent()->getDataLayout();
  int rewritten = 0;
  for (llvm::IntrinsicInst* call : stores) {
    llvm::Value* value = call->getArgOperand(0);
    llvm::Value* ptr = call->getArgOperand(1);
    auto* vty = llvm::dyn_cast<llvm::FixedVectorType>(value->getType());
    if (vty == nullptr) continue;
    const unsigned lanes = vty->getNumElements();
    std::vector<bool> set;
    if (!ConstantLanes(call->getArgOperand(3), lanes, &set)) continue;
    const llvm::Align align(llvm::cast<llvm::ConstantInt>(call->getArgOperand(2))->getZExtValue());
    llvm::IRBuilder<> b(call);
    for (unsigned i = 0; i < lanes;) {
      if (!set[i]) {
        ++i;
        continue;
      }
      unsigned end = i;
      while (end < lanes && set[end]) ++end;
      const unsigned n = end - i;
      const unsigned p = llvm::bit_floor(n);
      StoreLanes(b, value, ptr, vty->getElementType(), i, p, align, dl);
      if (p != n) StoreLanes(b, value, ptr, vty->getElementType(), end - p, p, align, dl);
      i = end;
    }
    call->eraseFromParent();
    ++rewritten;
  }
  return rewritten;
}

}  // namespace kiln
