// LoadedObject: real clang-19 objects (constant pools, jump tables, .data/.bss,
// GOT, libc calls, PC64), unknown symbols, and corrupt objects.
#include "client/runtime/object_loader.h"

#include <elf.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/runtime/test_kernels.h"
#include "tests/client/runtime/test_package.h"

namespace kiln::runtime {
namespace {

using ::testing::HasSubstr;
using Kernel = void (*)(void* const*, int64_t, int64_t);

#define COMPILE_OR_SKIP(var, ...)                                      \
  if (!kiln::testing::HaveClang()) GTEST_SKIP() << "clang-19 is not installed"; \
  auto var##_or = kiln::testing::CompileToObject(__VA_ARGS__);         \
  ASSERT_TRUE(var##_or.ok()) << var##_or.status();                     \
  const std::string var = *var##_or

int Pick(int v, int i) {
  switch (v & 7) {
    case 0: return i * 3;
    case 1: return i + 17;
    case 2: return i ^ 0x55;
    case 3: return i << 2;
    case 4: return i - 9;
    case 5: return i * i;
    case 6: return ~i;
    default: return 1000;
  }
}

TEST(ObjectLoaderTest, RunsKernelsWithConstantPoolsJumpTablesAndGlobals) {
  COMPILE_OR_SKIP(elf, kiln::testing::kTestKernelsC);
  auto obj = LoadedObject::Load(elf, "kernels.o");
  ASSERT_TRUE(obj.ok()) << obj.status();

  auto poly = (*obj)->Lookup("k_poly");
  ASSERT_TRUE(poly.ok()) << poly.status();
  std::vector<float> x(100), y(100, -1);
  for (int i = 0; i < 100; ++i) x[i] = 0.1f * i - 3;
  void* args[] = {x.data(), y.data()};
  reinterpret_cast<Kernel>(*poly)(args, 0, 100);
  // clang contracts to FMA, so allow a few ulps.
  for (int i = 0; i < 100; ++i) EXPECT_NEAR(y[i], 0.5f * x[i] * x[i] + 1.25f * x[i] - 3.75f, 1e-5f) << i;

  auto tasks = (*obj)->Lookup("g_tasks_run");
  ASSERT_TRUE(tasks.ok());
  EXPECT_EQ(*static_cast<long*>(*tasks), 100);

  auto sw = (*obj)->Lookup("k_switch");
  ASSERT_TRUE(sw.ok());
  std::vector<int32_t> xi(64), yi(64);
  for (int i = 0; i < 64; ++i) xi[i] = i * 5 + 1;
  void* iargs[] = {xi.data(), yi.data()};
  reinterpret_cast<Kernel>(*sw)(iargs, 0, 64);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(yi[i], Pick(xi[i], i)) << i;

  // .bss is zero, .data holds its initial value, memset/memcpy/expf resolve.
  auto zero = (*obj)->Lookup("g_zero");
  ASSERT_TRUE(zero.ok());
  for (int i = 0; i < 64; ++i) EXPECT_EQ(static_cast<int*>(*zero)[i], 0);
  auto bias = (*obj)->Lookup("g_bias");
  ASSERT_TRUE(bias.ok());
  EXPECT_EQ(*static_cast<float*>(*bias), 2.0f);
  auto ex = (*obj)->Lookup("k_exp");
  ASSERT_TRUE(ex.ok());
  reinterpret_cast<Kernel>(*ex)(args, 0, 100);
  for (int i = 0; i < 100; ++i) EXPECT_NEAR(y[i], std::exp(x[i]), 1e-5 * std::exp(x[i])) << i;
}

TEST(ObjectLoaderTest, AppliesPc64AndGotRelocations) {
  COMPILE_OR_SKIP(elf, kiln::testing::kTestKernelsAsm, "assembler");
  auto obj = LoadedObject::Load(elf);
  ASSERT_TRUE(obj.ok()) << obj.status();
  auto target = (*obj)->Lookup("target");
  ASSERT_TRUE(target.ok());
  EXPECT_EQ(*static_cast<int*>(*target), 42);
  for (const char* fn : {"get_target", "get_target_got"}) {
    auto f = (*obj)->Lookup(fn);
    ASSERT_TRUE(f.ok()) << fn;
    EXPECT_EQ(reinterpret_cast<void* (*)()>(*f)(), *target) << fn;
  }
}

TEST(ObjectLoaderTest, LookupOfMissingSymbolIsNotFound) {
  COMPILE_OR_SKIP(elf, kiln::testing::kTestKernelsC);
  auto obj = LoadedObject::Load(elf);
  ASSERT_TRUE(obj.ok()) << obj.status();
  auto f = (*obj)->Lookup("no_such_kernel");
  EXPECT_EQ(f.status().code(), runtime::StatusCode::kNotFound);
  EXPECT_THAT(f.status().message(), HasSubstr("no_such_kernel"));
  // Local (static) functions are not exported.
  EXPECT_FALSE((*obj)->Lookup("pick").ok());
}

TEST(ObjectLoaderTest, UnknownExternalSymbolIsAnErrorNamingIt) {
  COMPILE_OR_SKIP(elf, R"(
    void kiln_no_such_function(float*);
    void k(void* const* a, long b, long e) { kiln_no_such_function((float*)a[0]); }
  )");
  auto obj = LoadedObject::Load(elf, "bad.o");
  ASSERT_FALSE(obj.ok());
  EXPECT_EQ(obj.status().code(), runtime::StatusCode::kInvalidArgument);
  EXPECT_THAT(obj.status().message(), HasSubstr("kiln_no_such_function"));
  EXPECT_THAT(obj.status().message(), HasSubstr("bad.o"));
}

TEST(ObjectLoaderTest, RejectsNonObjects) {
  EXPECT_FALSE(LoadedObject::Load("").ok());
  EXPECT_FALSE(LoadedObject::Load("hello, world").ok());
  std::string junk(4096, '\x7f');
  EXPECT_FALSE(LoadedObject::Load(junk).ok());
}

TEST(ObjectLoaderTest, RejectsWrongClassMachineAndType) {
  COMPILE_OR_SKIP(elf, kiln::testing::kTestKernelsC);
  std::string e = elf;
  e[EI_CLASS] = ELFCLASS32;
  EXPECT_THAT(LoadedObject::Load(e).status().message(), HasSubstr("64-bit"));
  e = elf;
  uint16_t machine = EM_AARCH64;
  std::memcpy(e.data() + offsetof(Elf64_Ehdr, e_machine), &machine, 2);
  EXPECT_THAT(LoadedObject::Load(e).status().message(), HasSubstr("x86-64"));
  e = elf;
  uint16_t type = ET_DYN;
  std::memcpy(e.data() + offsetof(Elf64_Ehdr, e_type), &type, 2);
  EXPECT_THAT(LoadedObject::Load(e).status().message(), HasSubstr("relocatable"));
  e = elf;
  uint64_t shoff = e.size() + 100;
  std::memcpy(e.data() + offsetof(Elf64_Ehdr, e_shoff), &shoff, 8);
  EXPECT_THAT(LoadedObject::Load(e).status().message(), HasSubstr("section header"));
}

TEST(ObjectLoaderTest, TruncatedObjectsAreErrors) {
  COMPILE_OR_SKIP(elf, kiln::testing::kTestKernelsC);
  for (size_t n : {size_t{0}, size_t{16}, size_t{63}, size_t{64}, elf.size() / 2, elf.size() - 1}) {
    EXPECT_FALSE(LoadedObject::Load(std::string_view(elf).substr(0, n)).ok()) << n;
  }
}

TEST(ObjectLoaderTest, CorruptSectionAndRelocationFieldsAreErrors) {
  COMPILE_OR_SKIP(elf, kiln::testing::kTestKernelsC);
  Elf64_Ehdr eh;
  std::memcpy(&eh, elf.data(), sizeof(eh));
  int corrupted = 0;
  for (int i = 0; i < eh.e_shnum; ++i) {
    const size_t at = eh.e_shoff + i * sizeof(Elf64_Shdr);
    Elf64_Shdr sh;
    std::memcpy(&sh, elf.data() + at, sizeof(sh));
    if (sh.sh_type == SHT_RELA) {
      // Relocation offset far outside the target section.
      std::string e = elf;
      Elf64_Rela r;
      std::memcpy(&r, e.data() + sh.sh_offset, sizeof(r));
      r.r_offset = 1u << 30;
      std::memcpy(e.data() + sh.sh_offset, &r, sizeof(r));
      EXPECT_THAT(LoadedObject::Load(e).status().message(), HasSubstr("out of range")) << i;
      // Symbol index out of range.
      e = elf;
      r.r_offset = 0;
      r.r_info = ELF64_R_INFO(100000, ELF64_R_TYPE(r.r_info));
      std::memcpy(e.data() + sh.sh_offset, &r, sizeof(r));
      EXPECT_THAT(LoadedObject::Load(e).status().message(), HasSubstr("symbol index")) << i;
      // Unsupported relocation type.
      e = elf;
      std::memcpy(&r, elf.data() + sh.sh_offset, sizeof(r));
      r.r_info = ELF64_R_INFO(ELF64_R_SYM(r.r_info), R_X86_64_TPOFF32);
      std::memcpy(e.data() + sh.sh_offset, &r, sizeof(r));
      EXPECT_THAT(LoadedObject::Load(e).status().message(), HasSubstr("unsupported relocation")) << i;
      ++corrupted;
    }
    if ((sh.sh_type == SHT_PROGBITS || sh.sh_type == SHT_SYMTAB) && sh.sh_size > 8) {
      std::string e = elf;
      sh.sh_offset = e.size() - 8;
      std::memcpy(e.data() + at, &sh, sizeof(sh));
      EXPECT_THAT(LoadedObject::Load(e).status().message(), HasSubstr("out of range")) << i;
    }
  }
  EXPECT_GT(corrupted, 0);
}

// Random byte flips anywhere must give an error or a loaded object, never a crash.
TEST(ObjectLoaderTest, RandomCorruptionNeverCrashes) {
  COMPILE_OR_SKIP(elf, kiln::testing::kTestKernelsC);
  std::mt19937 rng(1234);
  int failures = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string e = elf;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) e[rng() % e.size()] ^= static_cast<char>(1 + rng() % 255);
    if (!LoadedObject::Load(e).ok()) ++failures;
  }
  EXPECT_GT(failures, 0);
}

}  // namespace
}  // namespace kiln::runtime
