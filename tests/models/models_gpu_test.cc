// Real models through the GPU path, here, without a GPU: prepared for
// sm_90 (no CPU algorithm selection, no conv pairs), every group at its
// default GPU schedule, written as a CUDA package (PTX, and the cubin when
// the build found a ptxas), loaded and run by the runtime's CUDA path on the
// fake driver, whose launches run each kernel's CPU emulation
// (tests/client/runtime/fake_cuda), and every output compared with the
// reference interpreter on the original graph. What a GPU host adds (the
// real driver, the real device) is the same path with libcuda.so.1.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "client/runtime/absl_interop.h"
#include "client/runtime/package_reader.h"
#include "client/runtime/session.h"
#include "compiler_core/driver/compile_driver.h"
#include "compiler_core/frontend/interpreter.h"
#include "compiler_core/frontend/onnx_importer.h"
#include "tests/client/runtime/fake_cuda/package_kernels.h"
#include "tests/models/model_testing.h"

namespace kiln {
namespace {

void CheckModelOnGpu(const std::string& file) {
  const GpuTarget gpu{90};
  const Target target(gpu);
  absl::StatusOr<ModelReference> ref = EvaluateModel(file);
  ASSERT_TRUE(ref.ok()) << ref.status();
  auto graph = ImportOnnxModel(ref->bytes, {});
  ASSERT_TRUE(graph.ok());
  auto model = PrepareModel(std::move(*graph), PrepareOptionsFor(target));
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_TRUE(CheckCompilable(*model, target).ok()) << CheckCompilable(*model, target);
  std::map<std::string, int> kinds;
  for (const FusionGroup& g : model->partition.groups) kinds[g.kind] += 1;
  EXPECT_EQ(kinds.count("winograd_input") + kinds.count("conv_pair"), 0u) << "CPU algorithms in a GPU compile";
  PackageOptions po;
  po.model_name = file;
  po.target = CpuTarget::Host();
  const std::string ptxas = KILN_PTXAS;
  po.gpu = GpuPackageOptions{gpu, ptxas, !ptxas.empty()};
  auto pkg_bytes = BuildPackage(*model, DefaultSchedules(*model, target), po);
  ASSERT_TRUE(pkg_bytes.ok()) << pkg_bytes.status();

  auto kernels = testing::EmulatePackageKernels(pkg_bytes->bytes, model->workloads);
  ASSERT_TRUE(kernels.ok()) << kernels.status();
  testing::FakeCudaDriver fake(testing::FakeCudaDriver::Options{gpu.sm, 1});
  testing::RegisterKernels(fake, *kernels);
  {
    auto pkg = runtime::Package::FromBytes(pkg_bytes->bytes, file, fake.driver());
    ASSERT_TRUE(pkg.ok()) << pkg.status();
    auto session = runtime::Session::Create(std::shared_ptr<const runtime::Package>(std::move(*pkg)), nullptr);
    ASSERT_TRUE(session.ok()) << session.status();
    for (const OutputError& out : RunAndCompare(**session, *ref, file)) {
      std::printf("%s on sm_90 (emulated): output %s max abs error %.3g; %d kernels launched, %zu groups, "
                  "%zu bytes package\n",
                  file.c_str(), out.name.c_str(), out.worst, fake.counts().launches, model->partition.groups.size(),
                  pkg_bytes->bytes.size());
    }
  }
  EXPECT_TRUE(fake.misuse().empty()) << fake.misuse().front();
  EXPECT_EQ(fake.live_allocations(), 0);
}

TEST(ModelsGpuTest, ResNet18) { CheckModelOnGpu("resnet18.onnx"); }
TEST(ModelsGpuTest, MobileNetV3Small) { CheckModelOnGpu("mobilenet_v3_small.onnx"); }
TEST(ModelsGpuTest, BertEncoder) { CheckModelOnGpu("bert_encoder.onnx"); }

}  // namespace
}  // namespace kiln
