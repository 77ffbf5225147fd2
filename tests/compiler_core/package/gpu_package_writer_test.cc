// CUDA packages from the package writer: reproducible bytes, a manifest with
// every step's launch and a device plan whose buffers are aligned and never
// overlap within a step, the cubin an ELF for the SM (with KILN_PTXAS), PTX
// only without one; and the runtime's answer here: a clear refusal without
// a CUDA driver, a run compared with the interpreter where there is a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "client/runtime/cuda_driver.h"
#include "client/runtime/package_reader.h"
#include "client/runtime/session.h"
#include "compiler_core/codegen/kernel_emitter.h"
#include "compiler_core/codegen/ptx_assembler.h"
#include "compiler_core/frontend/interpreter.h"
#include "compiler_core/package/manifest_reader.h"
#include "gmock/gmock.h"
#include "kiln/v1/package_layout.h"
#include "tests/compiler_core/package/gpu_test_model.h"

namespace kiln {
namespace {

using gpu_package_testing::GpuTestModel;
using gpu_package_testing::MakeGpuTestModel;
using gpu_package_testing::WriteGpuTestPackage;
using ::testing::HasSubstr;
using v1::PackageBuffer;

const GpuTarget kSm90{90};

// The ptxas the build found (KILN_PTXAS), or "" with the reason in *why.
std::string TestPtxas(std::string* why) {
  const std::string path = KILN_PTXAS;
  if (path.empty()) *why = "no ptxas was found at configure time (KILN_PTXAS)";
  return path;
}

std::string_view Section(const std::string& file, int64_t offset, int64_t size) {
  return std::string_view(file).substr(static_cast<size_t>(offset), static_cast<size_t>(size));
}

TEST(GpuPackageWriterTest, SameInputsGiveTheSameBytes) {
  std::string why;
  const std::string ptxas = TestPtxas(&why);
  GpuTestModel a = MakeGpuTestModel(kSm90);
  GpuTestModel b = MakeGpuTestModel(kSm90);
  for (bool cubin : {false, true}) {
    if (cubin && ptxas.empty()) continue;
    auto pa = WriteGpuTestPackage(a, kSm90, ptxas, cubin);
    auto pb = WriteGpuTestPackage(b, kSm90, ptxas, cubin);
    ASSERT_TRUE(pa.ok()) << pa.status();
    ASSERT_TRUE(pb.ok()) << pb.status();
    EXPECT_EQ(pa->digest, pb->digest) << "cubin=" << cubin;
    EXPECT_EQ(pa->bytes, pb->bytes) << "cubin=" << cubin;
    EXPECT_THAT(pa->llvm_ir, HasSubstr("kiln_group_3"));
  }
  if (ptxas.empty()) GTEST_SKIP() << "PTX-only packages checked; with a cubin not: " << why;
}

// The manifest says what the runtime needs: the device, each step's launch
// (the lowering's own), and a device plan of 256-byte aligned buffers in
// one arena (inputs, outputs, scratch) and the weights, no step's arguments
// sharing a byte, and the scratch reused.
TEST(GpuPackageWriterTest, ManifestHasTheLaunchesAndTheDevicePlan) {
  GpuTestModel model = MakeGpuTestModel(kSm90);
  auto pkg = WriteGpuTestPackage(model, kSm90, "", /*cubin=*/false);
  ASSERT_TRUE(pkg.ok()) << pkg.status();
  auto info = ReadPackageInfo(pkg->bytes);
  ASSERT_TRUE(info.ok()) << info.status();
  const v1::PackageManifest& m = info->manifest;
  EXPECT_EQ(m.format_version(), 1);
  EXPECT_EQ(m.device(), v1::DEVICE_CUDA);
  ASSERT_TRUE(m.has_cuda());
  const v1::PackageCuda& c = m.cuda();
  EXPECT_EQ(c.sm(), 90);
  EXPECT_EQ(c.buffer_alignment(), 256);
  EXPECT_EQ(m.code_size(), 0);
  EXPECT_EQ(m.arena_bytes(), 0);
  EXPECT_EQ(c.cubin_size(), 0);
  EXPECT_THAT(c.cubin_missing(), HasSubstr("PTX only"));
  // No host code: the machine that built it leaves no trace in it.
  EXPECT_EQ(m.target_triple(), CpuTarget::Host().triple);
  EXPECT_TRUE(m.target_cpu().empty());
  EXPECT_TRUE(m.target_features().empty());
  EXPECT_TRUE(m.isa_level().empty());

  const std::string_view ptx = Section(pkg->bytes, c.ptx_offset(), c.ptx_size());
  EXPECT_THAT(std::string(ptx), HasSubstr(".target sm_90"));
  ASSERT_EQ(m.steps_size(), 4);
  ASSERT_EQ(model.partition.groups.size(), 4u);
  for (int i = 0; i < m.steps_size(); ++i) {
    const v1::PackageStep& step = m.steps(i);
    EXPECT_THAT(std::string(ptx), HasSubstr(".entry " + step.symbol() + "("));
    auto lowered = LowerWorkload(*model.workloads[i].graph, model.configs[i], kSm90);
    ASSERT_TRUE(lowered.ok()) << lowered.status();
    const loop_ir::GpuLaunch want = loop_ir::GpuLaunchOf(*lowered);
    EXPECT_EQ(step.launch().blocks(), want.blocks) << step.symbol();
    EXPECT_EQ(step.launch().threads(), want.threads) << step.symbol();
    EXPECT_EQ(step.launch().shared_bytes(), want.shared_bytes) << step.symbol();
    EXPECT_GE(step.launch().blocks(), 1);
    EXPECT_EQ(step.num_tasks(), 0);
    EXPECT_EQ(step.args_size(), static_cast<int>(model.workloads[i].graph->inputs().size() +
                                                 model.workloads[i].graph->outputs().size()));
  }

  int scratch = 0;
  for (const PackageBuffer& b : m.buffers()) {
    EXPECT_EQ(b.offset() % 256, 0) << b.name();
    if (b.kind() == PackageBuffer::CONSTANT) {
      EXPECT_LE(b.offset() + b.size_bytes(), m.weights_size()) << b.name();
    } else {
      EXPECT_LE(b.offset() + b.size_bytes(), c.arena_bytes()) << b.name();
      scratch += b.kind() == PackageBuffer::SCRATCH ? 1 : 0;
    }
  }
  EXPECT_EQ(scratch, 2);  // a and t
  // a (read by step 1 only) is free when step 2 writes t: t takes its place.
  auto offset_of = [&](const std::string& name) {
    for (const PackageBuffer& b : m.buffers()) {
      if (b.name() == name) return b.offset();
    }
    ADD_FAILURE() << "no buffer " << name;
    return int64_t{-1};
  };
  EXPECT_EQ(offset_of("a"), offset_of("t"));
  // Inputs and outputs live for the whole run: nothing shares their bytes.
  int64_t inputs_and_outputs = 0;
  for (const PackageBuffer& b : m.buffers()) {
    if (b.kind() == PackageBuffer::INPUT || b.kind() == PackageBuffer::OUTPUT) {
      inputs_and_outputs += (b.size_bytes() + 255) / 256 * 256;
    }
  }
  EXPECT_GE(c.arena_bytes(), inputs_and_outputs + (4 * 33 * 17 * 4 + 255) / 256 * 256);

  // No two arguments of one step share a byte of their space.
  for (const v1::PackageStep& step : m.steps()) {
    for (int x = 0; x < step.args_size(); ++x) {
      for (int y = x + 1; y < step.args_size(); ++y) {
        const PackageBuffer& bx = m.buffers(step.args(x));
        const PackageBuffer& by = m.buffers(step.args(y));
        if ((bx.kind() == PackageBuffer::CONSTANT) != (by.kind() == PackageBuffer::CONSTANT)) continue;
        EXPECT_TRUE(bx.offset() + bx.size_bytes() <= by.offset() || by.offset() + by.size_bytes() <= bx.offset())
            << step.symbol() << ": " << bx.name() << " and " << by.name();
      }
    }
  }
}

// With a ptxas, the package carries the PTX assembled for its SM: an ELF
// for CUDA (EM_CUDA, 190) whose flags name sm_90, exactly what ptxas makes
// of the package's own PTX, and the toolkit that made it.
TEST(GpuPackageWriterTest, CubinIsAnElfForTheSm) {
  std::string why;
  const std::string ptxas = TestPtxas(&why);
  if (ptxas.empty()) GTEST_SKIP() << why;
  GpuTestModel model = MakeGpuTestModel(kSm90);
  auto pkg = WriteGpuTestPackage(model, kSm90, ptxas, /*cubin=*/true);
  ASSERT_TRUE(pkg.ok()) << pkg.status();
  auto info = ReadPackageInfo(pkg->bytes);
  ASSERT_TRUE(info.ok()) << info.status();
  const v1::PackageCuda& c = info->manifest.cuda();
  EXPECT_TRUE(c.cubin_missing().empty()) << c.cubin_missing();
  EXPECT_THAT(c.ptxas_version(), HasSubstr("release"));
  ASSERT_GT(c.cubin_size(), 64);
  EXPECT_EQ(c.cubin_offset() % package::kAlignment, 0);
  const std::string cubin(Section(pkg->bytes, c.cubin_offset(), c.cubin_size()));
  EXPECT_EQ(cubin.substr(0, 4), std::string("\x7f" "ELF", 4));
  EXPECT_EQ(cubin[4], 2);  // ELFCLASS64
  uint16_t machine = 0;
  uint32_t flags = 0;
  std::memcpy(&machine, cubin.data() + 18, sizeof(machine));
  std::memcpy(&flags, cubin.data() + 48, sizeof(flags));
  EXPECT_EQ(machine, 190);
  // The SM is a byte of e_flags: bits 8-15 in CUDA 12.8's ELF ABI (8), bits 0-7 before.
  EXPECT_TRUE(((flags >> 8) & 0xff) == 90 || (flags & 0xff) == 90) << std::hex << flags;

  auto assembler = PtxAssembler::Find(ptxas);
  ASSERT_TRUE(assembler.ok()) << assembler.status();
  auto again = assembler->Assemble(std::string(Section(pkg->bytes, c.ptx_offset(), c.ptx_size())), kSm90);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(*again == cubin);
}

// The whole-model check replaces a package only by one with the same
// kernels: not by one for another SM, or for the CPU.
TEST(GpuPackageWriterTest, PackagesForAnotherSmOrTheCpuAreOtherKernels) {
  GpuTestModel m90 = MakeGpuTestModel(kSm90);
  auto a = WriteGpuTestPackage(m90, kSm90, "", false);
  // The same workloads and schedules, for sm_80.
  auto b = WriteGpuTestPackage(m90, GpuTarget{80}, "", false);
  auto again = WriteGpuTestPackage(m90, kSm90, "", false);
  ASSERT_TRUE(a.ok() && b.ok() && again.ok());
  PackageOptions cpu;
  cpu.target = CpuTarget::Host();
  std::vector<ScheduleConfig> cpu_configs;
  for (const Workload& w : m90.workloads) cpu_configs.push_back(DefaultSchedule(*w.graph, cpu.target));
  auto c = WritePackage(*m90.graph, m90.partition, m90.workloads, cpu_configs, cpu);
  ASSERT_TRUE(c.ok()) << c.status();
  auto ia = ReadPackageInfo(a->bytes), ib = ReadPackageInfo(b->bytes), ic = ReadPackageInfo(c->bytes),
       iagain = ReadPackageInfo(again->bytes);
  ASSERT_TRUE(ia.ok() && ib.ok() && ic.ok() && iagain.ok());
  EXPECT_TRUE(SameKernels(ia->manifest, iagain->manifest));
  EXPECT_FALSE(SameKernels(ia->manifest, ib->manifest));
  EXPECT_FALSE(SameKernels(ia->manifest, ic->manifest));
}

TEST(GpuPackageWriterTest, APtxasNamedButMissingIsAnError) {
  GpuTestModel model = MakeGpuTestModel(kSm90);
  auto pkg = WriteGpuTestPackage(model, kSm90, "/nonexistent/bin/ptxas", /*cubin=*/true);
  ASSERT_FALSE(pkg.ok());
  EXPECT_EQ(pkg.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(pkg.status().message(), HasSubstr("/nonexistent/bin/ptxas"));
}

// The runtime loads a CUDA package only where a CUDA driver and a GPU are:
// here (no GPU) it is refused, saying so; on a GPU host it runs, and its
// outputs match the interpreter's.
TEST(GpuPackageWriterTest, RuntimeRunsItOnAGpuAndRefusesItWithoutOne) {
  std::string why;
  const std::string ptxas = TestPtxas(&why);
  GpuTestModel model = MakeGpuTestModel(kSm90);
  auto bytes = WriteGpuTestPackage(model, kSm90, ptxas, !ptxas.empty());
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto pkg = runtime::Package::FromBytes(bytes->bytes, "gpu_test.kpkg");
  auto driver = runtime::CudaDriver::Get();
  if (!driver.ok()) {
    ASSERT_FALSE(pkg.ok());
    EXPECT_EQ(pkg.status().code(), runtime::StatusCode::kFailedPrecondition);
    EXPECT_EQ(pkg.status().message(), "package 'gpu_test.kpkg': this package is for a CUDA GPU (sm_90) and " +
                                          driver.status().message());
    GTEST_SKIP() << "the package is refused as it should be; not run, for there is no GPU here: "
                 << driver.status().message();
  }
  ASSERT_TRUE(pkg.ok()) << pkg.status();
  std::shared_ptr<const runtime::Package> shared(std::move(*pkg));
  auto session = runtime::Session::Create(shared, nullptr);
  if (!session.ok() && session.status().code() == runtime::StatusCode::kFailedPrecondition) {
    GTEST_SKIP() << session.status().message();  // a GPU older than sm_90
  }
  ASSERT_TRUE(session.ok()) << session.status();
  for (const auto& [name, t] : model.feeds) ASSERT_TRUE((*session)->SetInput(name, t.raw(), t.size_bytes()).ok());
  ASSERT_TRUE((*session)->Run().ok());
  auto want = Evaluate(*model.graph, model.feeds);
  ASSERT_TRUE(want.ok()) << want.status();
  for (int i = 0; i < (*session)->num_outputs(); ++i) {
    const Tensor& w = want->at((*session)->output_info(i).name);
    const float* got = static_cast<const float*>((*session)->OutputData(i));
    ASSERT_NE(got, nullptr);
    for (int64_t k = 0; k < w.num_elements(); ++k) {
      ASSERT_NEAR(got[k], w.data<float>()[k], 1e-6) << (*session)->output_info(i).name << "[" << k << "]";
    }
  }
}

}  // namespace
}  // namespace kiln
