// CompileToObject: an ELF64 relocatable x86-64 object whose only undefined
// symbols are memcpy/memset/memmove, with the kernel symbols global, and
// identical bytes for identical input.
#include "compiler_core/codegen/object_emitter.h"

#include <elf.h>

#include <cstring>
#include <set>
#include <string>

#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/codegen/target.h"
#include "gtest/gtest.h"
#include "tests/compiler_core/codegen/codegen_testing.h"

namespace kiln {
namespace {

using codegen_testing::ElfSymbol;
using codegen_testing::ElfSymbols;
using codegen_testing::MakeWorkload;

std::vector<std::string> SectionNames(const std::string& elf) {
  Elf64_Ehdr eh;
  std::memcpy(&eh, elf.data(), sizeof(eh));
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  for (int i = 0; i < eh.e_shnum; ++i) {
    std::memcpy(&sh[i], elf.data() + eh.e_shoff + i * eh.e_shentsize, sizeof(Elf64_Shdr));
  }
  std::vector<std::string> names;
  for (const Elf64_Shdr& s : sh) names.push_back(elf.data() + sh[eh.e_shstrndx].sh_offset + s.sh_name);
  return names;
}

TEST(ObjectEmitter, RelocatableWithOnlyAllowedImports) {
  CpuTarget target = CpuTarget::Host();
  auto add = MakeWorkload("Add", {{3, 1, 5}, {1, 4, 1}}, {3, 4, 5});
  auto sig = MakeWorkload("Sigmoid", {{1000}}, {1000});
  auto gemm = MakeWorkload("Gemm", {{13, 7}, {29, 13}, {29}}, {7, 29},
                           {{"transA", int64_t{1}}, {"transB", int64_t{1}}, {"alpha", 0.5f}});
  auto mm = MakeWorkload("MatMul", {{2, 7, 13}, {2, 13, 29}}, {2, 7, 29});
  std::vector<KernelRequest> req = {
      {add.get(), DefaultSchedule(*add, target), "k_add"},
      {sig.get(), DefaultSchedule(*sig, target), "k_sigmoid"},
      {gemm.get(), DefaultSchedule(*gemm, target), "k_gemm"},
      {mm.get(), DefaultSchedule(*mm, target), "k_matmul"},
  };
  auto obj = CompileToObject(req, target);
  ASSERT_TRUE(obj.ok()) << obj.status();
  const std::string& elf = obj->elf;
  ASSERT_GT(elf.size(), sizeof(Elf64_Ehdr));
  EXPECT_EQ(elf.substr(0, 4), "\x7f" "ELF");
  Elf64_Ehdr eh;
  std::memcpy(&eh, elf.data(), sizeof(eh));
  EXPECT_EQ(eh.e_ident[EI_CLASS], ELFCLASS64);
  EXPECT_EQ(eh.e_type, ET_REL);
  EXPECT_EQ(eh.e_machine, EM_X86_64);

  std::set<std::string> allowed = {"memcpy", "memset", "memmove"};
  std::set<std::string> globals;
  for (const ElfSymbol& s : ElfSymbols(elf)) {
    if (s.undefined) {
      EXPECT_TRUE(allowed.count(s.name)) << "undefined symbol " << s.name;
    } else if (s.bind != STB_LOCAL) {
      globals.insert(s.name);
      EXPECT_EQ(s.type, STT_FUNC) << s.name;
    }
    EXPECT_NE(s.type, STT_TLS) << s.name;
  }
  EXPECT_EQ(globals, (std::set<std::string>{"k_add", "k_sigmoid", "k_gemm", "k_matmul"}));
  for (const std::string& name : SectionNames(elf)) {
    EXPECT_EQ(name.find(".init_array"), std::string::npos);
    EXPECT_EQ(name.find(".ctors"), std::string::npos);
    EXPECT_EQ(name.find(".tdata"), std::string::npos);
    EXPECT_EQ(name.find(".tbss"), std::string::npos);
    EXPECT_EQ(name.find("gcc_except_table"), std::string::npos);
  }

  ASSERT_EQ(obj->kernels.size(), 4u);
  EXPECT_EQ(obj->kernels[0].symbol, "k_add");
  EXPECT_EQ(obj->kernels[0].num_args, 3);
  EXPECT_EQ(obj->kernels[0].num_tasks, 1);
  EXPECT_EQ(obj->kernels[2].num_args, 4);
  EXPECT_GE(obj->kernels[3].num_tasks, 2);  // one per batch at least
  for (const char* s : {"@k_add", "@k_sigmoid", "@k_gemm", "@k_matmul"}) {
    EXPECT_NE(obj->llvm_ir.find(s), std::string::npos) << s;
  }

  auto again = CompileToObject(req, target);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->elf == obj->elf) << "object bytes differ between two identical compiles";
  EXPECT_EQ(again->llvm_ir, obj->llvm_ir);
}

TEST(ObjectEmitter, RejectsBadRequests) {
  CpuTarget target = CpuTarget::Host();
  auto add = MakeWorkload("Add", {{4}, {4}}, {4});
  auto dup = CompileToObject({{add.get(), {}, "k"}, {add.get(), {}, "k"}}, target);
  EXPECT_EQ(dup.status().code(), absl::StatusCode::kInvalidArgument) << dup.status();
  auto bad_name = CompileToObject({{add.get(), {}, "not a symbol"}}, target);
  EXPECT_EQ(bad_name.status().code(), absl::StatusCode::kInvalidArgument);
  auto no_graph = CompileToObject({{nullptr, {}, "k"}}, target);
  EXPECT_EQ(no_graph.status().code(), absl::StatusCode::kInvalidArgument);
  CpuTarget arm = target;
  arm.triple = "aarch64-unknown-linux-gnu";
  EXPECT_EQ(CompileToObject({{add.get(), {}, "k"}}, arm).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln
