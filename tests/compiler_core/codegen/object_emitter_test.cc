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
#include "tests/compiler_core/codegen/loop_ir/winograd_cases.h"

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

// CountInnerLoops reads LLVM's verbose listing: an inner loop is the block
// whose comments name it an inner loop's header and the blocks whose comments
// put them "in Loop: Header=" it; a folded reload is a reload.
TEST(ObjectEmitter, CountInnerLoopsReadsTheListing) {
  const std::string listing =
      "k:\n"
      "\tvmovups\t%ymm0, 32(%rsp)  # 32-byte Spill\n"
      ".LBB0_2:                      # %outer\n"
      "                              # =>This Loop Header: Depth=1\n"
      "\tvfmadd231ps\t%ymm1, %ymm2, %ymm3\n"
      ".LBB0_3:                      # %inner\n"
      "                              #   Parent Loop BB0_2 Depth=1\n"
      "                              # =>  This Inner Loop Header: Depth=2\n"
      "\tvbroadcastss\t(%rdi), %ymm4\n"
      "\tvfmadd231ps\t32(%rsp), %ymm4, %ymm5  # 32-byte Folded Reload\n"
      "\tvfmadd213ps\t%ymm6, %ymm4, %ymm7\n"
      "\tmovq\t%rax, -8(%rsp)  # 8-byte Spill\n"
      "\tjne\t.LBB0_3\n"
      "# %bb.4:                      # %exit\n"
      "\tvfmadd231ps\t%ymm1, %ymm2, %ymm3\n"
      "\tvmovups\t32(%rsp), %ymm0  # 32-byte Reload\n"
      // A second inner loop whose header only tests the bound: its body
      // (a block without a label) and its latch are in it too.
      ".LBB0_6:                      # %latch\n"
      "                              #   in Loop: Header=BB0_7 Depth=2\n"
      "\taddq\t$64, %rax\n"
      "\tvmovaps\t%zmm9, 64(%rsp)  # 64-byte Spill\n"
      ".LBB0_7:                      # %head\n"
      "                              #   Parent Loop BB0_2 Depth=1\n"
      "                              # =>  This Inner Loop Header: Depth=2\n"
      "\tcmpq\t$56, %rsi\n"
      "\tjae\t.LBB0_6\n"
      "# %bb.8:                      # %body\n"
      "                              #   in Loop: Header=BB0_7 Depth=2\n"
      "\tvmovaps\t64(%rsp), %zmm9  # 64-byte Reload\n"
      "\tvfmadd231ps\t%zmm1, %zmm2, %zmm9\n"
      "\tvfmadd231ps\t%zmm1, %zmm3, %zmm8\n"
      "\tjmp\t.LBB0_6\n"
      ".LBB0_9:                      # %after\n"
      "                              #   in Loop: Header=BB0_2 Depth=1\n"
      "\tvfmadd231ps\t%zmm1, %zmm2, %zmm3\n"
      "\tvmovaps\t%zmm9, 128(%rsp)  # 64-byte Spill\n";
  const InnerLoopCounts c = CountInnerLoops(listing);
  EXPECT_EQ(c.loops, 2);
  EXPECT_EQ(c.multiply_adds, 4);
  EXPECT_EQ(c.spills, 2);
  EXPECT_EQ(c.reloads, 2);
}

// The assembly of real kernels for a 16-register target (Zen 3, AVX2): a
// register block of 6 rows by 2 vectors (12 sums, 2 B vectors, a broadcast)
// keeps everything in registers; a 5x5 depthwise conv in blocks of 4
// vectors cannot hold its 25 broadcast weights and reloads them in its inner
// loop, and its blocks of 8 vectors (the AVX2 default) reload each weight
// for twice the multiply-adds.
TEST(ObjectEmitter, AssemblyShowsTheInnerLoopsRegisterPressure) {
  absl::StatusOr<CpuTarget> zen3 = CpuTarget::Named("znver3");
  ASSERT_TRUE(zen3.ok()) << zen3.status();
  auto mm = MakeWorkload("MatMul", {{48, 32}, {32, 64}}, {48, 64});
  ScheduleConfig block;
  block.Set("mr", 6);
  block.Set("nr", 2);
  block.Set("ku", 1);
  auto text = CompileToAssembly({{mm.get(), block, "k_matmul"}}, *zen3);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_NE(text->find("k_matmul:"), std::string::npos);
  const InnerLoopCounts m = CountInnerLoops(*text);
  EXPECT_GE(m.loops, 1);
  EXPECT_GE(m.multiply_adds, 12);
  EXPECT_EQ(m.spills + m.reloads, 0) << *text;

  auto dw = MakeWorkload("Conv", {{1, 120, 28, 28}, {120, 1, 5, 5}}, {1, 120, 28, 28},
                         {{"group", int64_t{120}},
                          {"kernel_shape", std::vector<int64_t>{5, 5}},
                          {"pads", std::vector<int64_t>{2, 2, 2, 2}}});
  ScheduleConfig eight = DefaultSchedule(*dw, *zen3);
  ASSERT_EQ(eight.Get("dw", 0), 1) << eight.ToString();
  ASSERT_EQ(eight.Get("ur", 0), 8) << eight.ToString();
  ScheduleConfig four = eight;
  four.Set("ur", 4);
  auto at4 = CompileToAssembly({{dw.get(), four, "k_dw4"}}, *zen3);
  auto at8 = CompileToAssembly({{dw.get(), eight, "k_dw8"}}, *zen3);
  ASSERT_TRUE(at4.ok() && at8.ok()) << at4.status() << at8.status();
  const InnerLoopCounts c4 = CountInnerLoops(*at4), c8 = CountInnerLoops(*at8);
  ASSERT_GT(c4.multiply_adds, 0);
  ASSERT_GT(c8.multiply_adds, 0);
  EXPECT_GT(c4.reloads, 0) << *at4;
  EXPECT_LT(2.0 * c8.reloads / c8.multiply_adds, 1.0 * c4.reloads / c4.multiply_adds + 1e-9)
      << "ur=4: " << c4.reloads << " reloads for " << c4.multiply_adds << " multiply-adds; ur=8: " << c8.reloads
      << " for " << c8.multiply_adds;
}

// A channel-vector conv's taps are fenced from each other, so that LLVM
// neither loads the next taps ahead nor keeps a stride-2 window's shared
// columns live across taps: a 3x3 stride-2 conv onto 28 columns in 4
// vectors by 6 pixels on Sapphire Rapids (32 registers: 24 sums, 4 weights,
// a broadcast) and in 2 by 6 on Zen 3 (16: 12, 2, 1) spills nothing in its
// inner loops; unfenced they spilled 49 and 59 sums. (Onto 14 or 7 columns
// 4 x 6 still spills a little, fenced or not: the defaults keep to blocks
// of ChannelVectorRegisters.)
TEST(ObjectEmitter, FencedTapsKeepChannelVectorBlocksInRegisters) {
  auto conv = MakeWorkload("Conv", {{1, 32, 56, 56}, {64, 32, 3, 3}}, {1, 64, 28, 28},
                           {{"kernel_shape", std::vector<int64_t>{3, 3}},
                            {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                            {"strides", std::vector<int64_t>{2, 2}}});
  for (const auto& [cpu, lanes, kb] : std::vector<std::tuple<std::string, int64_t, int64_t>>{
           {"sapphirerapids", 16, 4}, {"znver3", 8, 2}}) {
    absl::StatusOr<CpuTarget> target = CpuTarget::Named(cpu);
    ASSERT_TRUE(target.ok()) << target.status();
    ScheduleConfig block;
    block.Set("kv", 1), block.Set("kb", kb), block.Set("ur", 6), block.Set("rows", 28), block.Set("vw", lanes);
    ASSERT_TRUE(ValidateSchedule(*conv, block, *target).ok()) << cpu << ": " << ValidateSchedule(*conv, block, *target);
    auto text = CompileToAssembly({{conv.get(), block, "k_conv"}}, *target);
    ASSERT_TRUE(text.ok()) << text.status();
    const InnerLoopCounts c = CountInnerLoops(*text);
    EXPECT_GE(c.multiply_adds, 6 * kb) << cpu;
    EXPECT_EQ(c.spills + c.reloads, 0) << cpu << ": " << c.spills << " spills, " << c.reloads << " reloads";
  }
}

// The Winograd output transform writes a tile row's four columns as
// interleaved contiguous vectors, not as scatters (two per column and 16
// tiles: 32 in SqueezeNet 1.1's first output transform, 16 x 55 x 55 in
// 4 x 4 tiles, with a bias, a Relu and a residual).
TEST(ObjectEmitter, WinogradOutputWritesTileRowsAsContiguousVectors) {
  using loop_ir_testing::WinogradGeometry;
  auto output = loop_ir_testing::WinogradOutputGraph(
      {.geometry = WinogradGeometry{.c = 16, .h = 55, .w = 55, .m = 4}, .bias = true, .epilogue = true});
  absl::StatusOr<CpuTarget> target = CpuTarget::Named("sapphirerapids");
  ASSERT_TRUE(target.ok()) << target.status();
  ScheduleConfig vw16;
  vw16.Set("vw", 16);
  auto text = CompileToAssembly({{output.get(), vw16, "k_output"}}, *target);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(text->find("vscatter"), std::string::npos) << *text;
  EXPECT_NE(text->find("vpermt2ps"), std::string::npos) << *text;  // the interleave
}

// A depthwise conv onto a 7x7 map defaults, on a 16-lane target, to the
// channel-vector variant, whose transposes in and out of the NCHW planes are
// shuffles (x86's 16 x 16 idiom) and contiguous vectors: no scatter (MNASNet's 5x5 over 576
// channels); only the weights are gathered, once per block.
TEST(ObjectEmitter, DepthwiseChannelVectorsTransposeByShuffles) {
  absl::StatusOr<CpuTarget> target = CpuTarget::Named("sapphirerapids");
  ASSERT_TRUE(target.ok()) << target.status();
  auto dw = MakeWorkload("Conv", {{1, 64, 7, 7}, {64, 1, 5, 5}, {64}}, {1, 64, 7, 7},
                         {{"group", int64_t{64}},
                          {"kernel_shape", std::vector<int64_t>{5, 5}},
                          {"pads", std::vector<int64_t>{2, 2, 2, 2}}});
  ScheduleConfig c = DefaultSchedule(*dw, *target);
  ASSERT_EQ(c.Get("dw", 0), 3) << c.ToString();
  auto text = CompileToAssembly({{dw.get(), c, "k_dw"}}, *target);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(text->find("vscatter"), std::string::npos) << *text;
  EXPECT_NE(text->find("vunpcklps"), std::string::npos) << *text;  // the transposes' rounds within 128-bit lanes
  EXPECT_NE(text->find("vshuff"), std::string::npos) << *text;      // and of whole 128-bit lanes
  const InnerLoopCounts counts = CountInnerLoops(*text);
  EXPECT_GE(counts.multiply_adds, 25) << *text;
}

}  // namespace
}  // namespace kiln
