// Helpers for the codegen tests: workload graphs built with the Graph API,
// deterministic random inputs, plain-loop references and a kernel runner that
// splits the tasks into uneven ranges.
#pragma once

#include <elf.h>

#include <cmath>
#include <cstring>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "compiler_core/ir/graph.h"
#include "compiler_core/codegen/jit.h"
#include "gtest/gtest.h"

namespace kiln::codegen_testing {

// One node `op` over inputs x0, x1, ... (shapes given), output y of `out_dims`.
inline std::unique_ptr<Graph> MakeWorkload(const std::string& op,
                                           const std::vector<std::vector<int64_t>>& in_shapes,
                                           const std::vector<int64_t>& out_dims,
                                           std::map<std::string, AttrValue> attrs = {}) {
  auto g = std::make_unique<Graph>();
  std::vector<Value*> ins;
  for (size_t i = 0; i < in_shapes.size(); ++i) {
    ins.push_back(*g->AddInput("x" + std::to_string(i), TensorType::Static(DType::kFloat32, in_shapes[i])));
  }
  Value* y = *g->AddValue("y", TensorType::Static(DType::kFloat32, out_dims));
  EXPECT_TRUE(g->AddNode(op, "n_" + op, ins, {y}, std::move(attrs)).ok());
  g->AddOutput(y);
  return g;
}

inline std::vector<float> RandomData(int64_t n, uint32_t seed, float lo = -2.0f, float hi = 2.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

inline int64_t Product(const std::vector<int64_t>& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

// Runs all of the kernel's tasks in three uneven ranges, last range first (or
// fewer ranges when there are few tasks), as a thread pool might split them.
inline void RunTasksUnevenly(const JitKernel& k, void* const* args) {
  int64_t t = k.num_tasks();
  int64_t a = t / 3, b = a + (t - a) * 3 / 4;
  k.Run(args, b, t);
  k.Run(args, 0, a);
  k.Run(args, a, b);
}

// Runs the kernel on `inputs` into a NaN-filled output (RunTasksUnevenly).
inline std::vector<float> RunKernel(const JitKernel& k, std::vector<std::vector<float>>& inputs,
                                    int64_t out_elements) {
  std::vector<float> out(out_elements, std::numeric_limits<float>::quiet_NaN());
  std::vector<void*> args;
  for (auto& in : inputs) args.push_back(in.data());
  args.push_back(out.data());
  RunTasksUnevenly(k, args.data());
  return out;
}

// Names of the undefined symbols of an ELF64 little-endian relocatable.
inline std::vector<std::string> UndefinedSymbols(const std::string& elf) {
  std::vector<std::string> out;
  Elf64_Ehdr eh;
  std::memcpy(&eh, elf.data(), sizeof(eh));
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  for (int i = 0; i < eh.e_shnum; ++i) {
    std::memcpy(&sh[i], elf.data() + eh.e_shoff + i * eh.e_shentsize, sizeof(Elf64_Shdr));
  }
  for (const Elf64_Shdr& s : sh) {
    if (s.sh_type != SHT_SYMTAB) continue;
    const char* strtab = elf.data() + sh[s.sh_link].sh_offset;
    for (size_t off = sizeof(Elf64_Sym); off < s.sh_size; off += sizeof(Elf64_Sym)) {
      Elf64_Sym sym;
      std::memcpy(&sym, elf.data() + s.sh_offset + off, sizeof(sym));
      if (sym.st_shndx == SHN_UNDEF) out.push_back(strtab + sym.st_name);
    }
  }
  return out;
}

}  // namespace kiln::codegen_testing
