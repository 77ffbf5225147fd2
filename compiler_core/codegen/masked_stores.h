// Masked stores with a constant mask, rewritten as plain stores. On x86
// without AVX-512 a masked store is VMASKMOVPS/VPMASKMOVD, which AMD cores
// before Zen 4 run as microcode: 6.9 ns a store measured on Zen 3, against
// 0.75 ns for a plain vector store. Kernels emit them for row tails and
// guarded packs (a depthwise conv's stride phases onto 7 columns stored 36 a
// channel), most with masks LLVM has folded to constants by the end of its
// pipeline. Internal to kiln_codegen.
#pragma once

namespace llvm {
class Function;
}  // namespace llvm

namespace kiln {

// Replaces every llvm.masked.store in `fn` whose mask is a constant by plain
// stores of its runs of set lanes: a run of n lanes, for p the largest power
// of two not above n, is one store of p lanes when n == p, else two that
// overlap (7 lanes: lanes 0-3 and 3-6), each writing only lanes the mask
// sets. A mask of no set lane drops the store. Masks computed at run time are
// left alone. Returns how many stores it rewrote.
int SplitConstantMaskedStores(llvm::Function& fn);

}  // namespace kiln
