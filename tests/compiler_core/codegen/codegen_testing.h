// Helpers for the codegen tests: workload graphs built with the Graph API,
// deterministic random inputs, a kernel runner that splits the tasks into
// uneven ranges, and the one compile-run-compare harness against the
// reference interpreter.
#pragma once

#include <elf.h>

#include <cmath>
#include <cstring>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler_core/codegen/jit.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/frontend/interpreter.h"
#include "compiler_core/frontend/shape_inference.h"
#include "compiler_core/ir/graph.h"
#include "gtest/gtest.h"

namespace kiln::codegen_testing {

// Builds a workload graph op by op: inputs in0, in1, ..., values t0, t1, ...
// (nodes n0, n1, ...); Finish() infers the value types.
class GraphBuilder {
 public:
  explicit GraphBuilder(int64_t opset = 17) : g_(std::make_unique<Graph>()) { g_->set_opset_version(opset); }
  Value* Input(const std::vector<int64_t>& dims, DType dtype = DType::kFloat32) {
    return *g_->AddInput(absl::StrCat("in", g_->inputs().size()), TensorType::Static(dtype, dims));
  }
  Value* Int64Constant(const std::vector<int64_t>& dims, const std::vector<int64_t>& values) {
    return *g_->AddConstant(absl::StrCat("c", n_++), Tensor::FromVector(DType::kInt64, dims, values));
  }
  Value* FloatConstant(const std::vector<int64_t>& dims, const std::vector<float>& values) {
    return *g_->AddConstant(absl::StrCat("c", n_++), Tensor::FromVector(DType::kFloat32, dims, values));
  }
  Value* Op(const std::string& op, std::vector<Value*> ins, std::map<std::string, AttrValue> attrs = {},
            const std::string& domain = "") {
    Value* y = *g_->AddValue(absl::StrCat("t", n_));
    EXPECT_TRUE(g_->AddNode(op, absl::StrCat("n", n_++), std::move(ins), {y}, std::move(attrs), domain).ok());
    return y;
  }
  void Output(Value* v) { g_->AddOutput(v); }
  std::unique_ptr<Graph> Finish(const std::vector<Value*>& outs = {}) {
    for (Value* v : outs) g_->AddOutput(v);
    absl::Status s = InferShapes(*g_);
    EXPECT_TRUE(s.ok()) << s << "\n" << g_->ToText();
    return std::move(g_);
  }

 private:
  std::unique_ptr<Graph> g_;
  int n_ = 0;
};

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

// Uniform f32 inputs for every input of `g`: input i from seed + i, in
// [lo, hi] (input 0 in [first_lo, first_hi] when those are given).
inline std::map<std::string, Tensor> RandomFeeds(const Graph& g, uint32_t seed, float lo, float hi,
                                                 float first_lo = NAN, float first_hi = NAN) {
  std::map<std::string, Tensor> feeds;
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const Value* v = g.inputs()[i];
    const bool first = i == 0 && !std::isnan(first_lo);
    std::vector<int64_t> dims = v->type().StaticDims();
    feeds.emplace(v->name(), Tensor::FromVector(DType::kFloat32, dims,
                                                RandomData(Product(dims), seed + static_cast<uint32_t>(i),
                                                           first ? first_lo : lo, first ? first_hi : hi)));
  }
  return feeds;
}

// How a float output element is judged: |got - want| <= atol + rtol * |want|,
// and NaN exactly where NaN is wanted. Other dtypes must match exactly.
struct Tolerance {
  double atol = 1e-5, rtol = 1e-4;
};

// Compiles `g` at each of `configs` with `compile` (which also checks the
// config is valid for its target), runs it on `feeds` with every output
// prefilled (NaN for floats, 0x7f bytes otherwise) and its tasks in three
// uneven ranges, and compares every output with the reference interpreter's.
// Returns the largest task count among the kernels.
using KernelCompiler = std::function<absl::StatusOr<std::unique_ptr<JitKernel>>(const ScheduleConfig&)>;
inline int64_t CheckKernelsAgainstInterpreter(const Graph& g, const std::map<std::string, Tensor>& feeds,
                                              const std::vector<ScheduleConfig>& configs,
                                              const KernelCompiler& compile, Tolerance tol = {}) {
  auto ref = Evaluate(g, feeds);
  EXPECT_TRUE(ref.ok()) << ref.status();
  if (!ref.ok()) return 0;
  int64_t max_tasks = 0;
  for (const ScheduleConfig& config : configs) {
    SCOPED_TRACE(absl::StrCat("schedule ", config.ToString(), "\n", g.ToText()));
    auto kernel = compile(config);
    EXPECT_TRUE(kernel.ok()) << kernel.status();
    if (!kernel.ok()) return 0;
    const JitKernel& k = **kernel;
    max_tasks = std::max(max_tasks, k.num_tasks());
    std::vector<Tensor> inputs, outs;
    std::vector<void*> args;
    for (const Value* v : g.inputs()) inputs.push_back(feeds.at(v->name()));
    for (Tensor& t : inputs) args.push_back(t.raw());
    for (const Value* v : g.outputs()) {
      Tensor t(v->type().dtype, v->type().StaticDims());
      if (v->type().dtype == DType::kFloat32) {
        for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = std::numeric_limits<float>::quiet_NaN();
      } else {
        std::memset(t.raw(), 0x7f, static_cast<size_t>(t.size_bytes()));
      }
      outs.push_back(std::move(t));
    }
    for (Tensor& t : outs) args.push_back(t.raw());
    EXPECT_EQ(k.num_args(), static_cast<int>(args.size()));
    if (k.num_args() != static_cast<int>(args.size())) return 0;
    RunTasksUnevenly(k, args.data());
    for (size_t o = 0; o < outs.size(); ++o) {
      const Tensor& want = ref->at(g.outputs()[o]->name());
      const Tensor& got = outs[o];
      int bad = 0;
      for (int64_t i = 0; i < want.num_elements() && bad < 5; ++i) {
        bool ok;
        std::string g_text, w_text;
        if (want.dtype() == DType::kFloat32) {
          float a = got.data<float>()[i], w = want.data<float>()[i];
          ok = std::isnan(w) ? std::isnan(a) : (a == w || std::fabs(a - w) <= tol.atol + tol.rtol * std::fabs(w));
          g_text = absl::StrCat(a);
          w_text = absl::StrCat(w);
        } else {
          const size_t n = static_cast<size_t>(DTypeSize(want.dtype()));
          ok = std::memcmp(got.bytes().data() + i * n, want.bytes().data() + i * n, n) == 0;
          g_text = got.DebugString(0);
          w_text = want.DebugString(0);
        }
        if (!ok) {
          ADD_FAILURE() << "output " << o << " element " << i << ": got " << g_text << " want " << w_text;
          ++bad;
        }
      }
      if (bad > 0) return 0;
    }
  }
  return max_tasks;
}

// CheckKernelsAgainstInterpreter with each config validated for `target` and
// JIT-compiled for it.
inline int64_t CheckConfigsAgainstInterpreter(const Graph& g, const std::map<std::string, Tensor>& feeds,
                                              const std::vector<ScheduleConfig>& configs, const CpuTarget& target,
                                              Tolerance tol = {}) {
  return CheckKernelsAgainstInterpreter(
      g, feeds, configs,
      [&](const ScheduleConfig& config) -> absl::StatusOr<std::unique_ptr<JitKernel>> {
        absl::Status valid = ValidateSchedule(g, config, target);
        if (!valid.ok()) return valid;
        return JitCompile(g, config, target);
      },
      tol);
}

struct ElfSymbol {
  std::string name;
  int bind;  // STB_*
  int type;  // STT_*
  bool undefined;
};

// The symbol table of an ELF64 little-endian relocatable (without the null symbol).
inline std::vector<ElfSymbol> ElfSymbols(const std::string& elf) {
  std::vector<ElfSymbol> out;
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
      out.push_back({strtab + sym.st_name, ELF64_ST_BIND(sym.st_info), ELF64_ST_TYPE(sym.st_info),
                     sym.st_shndx == SHN_UNDEF});
    }
  }
  return out;
}

// Names of the undefined symbols of an ELF64 little-endian relocatable.
inline std::vector<std::string> UndefinedSymbols(const std::string& elf) {
  std::vector<std::string> out;
  for (const ElfSymbol& s : ElfSymbols(elf)) {
    if (s.undefined) out.push_back(s.name);
  }
  return out;
}

// How many times `what` occurs in `text` (overlapping occurrences count):
// instructions in an IR dump, loops in a loop IR print.
inline int Occurrences(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace kiln::codegen_testing
