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
  std::string bytes = ReadAll(ModelPath(file));
  ASSERT_FALSE(bytes.empty()) << "missing " << ModelPath(file) << " (the kiln_models_export fixture writes it)";
  auto original = ImportOnnxModel(bytes, {});
  ASSERT_TRUE(original.ok()) << original.status();
  auto inputs = RandomInputs(**original);
  auto want = Evaluate(**original, inputs);
  ASSERT_TRUE(want.ok()) << want.status();

  auto graph = ImportOnnxModel(bytes, {});
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
    for (const auto& [name, t] : inputs) ASSERT_TRUE((*session)->SetInput(name, t.raw(), t.size_bytes()).ok());
    absl::Status ran = runtime::ToAbsl((*session)->Run());
    ASSERT_TRUE(ran.ok()) << ran;
    for (int i = 0; i < (*session)->num_outputs(); ++i) {
      const std::string& name = (*session)->output_info(i).name;
      const Tensor& ref = want->at(name);
      ASSERT_EQ((*session)->OutputBytes(i), static_cast<size_t>(ref.size_bytes())) << name;
      const float* got = static_cast<const float*>((*session)->OutputData(i));
      double worst = 0;
      for (int64_t j = 0; j < ref.num_elements(); ++j) {
        const double r = ref.data<float>()[j];
        const double err = std::fabs(got[j] - r);
        EXPECT_LE(err, 1e-4 + 1e-3 * std::fabs(r)) << file << " " << name << "[" << j << "]";
        if (err > 1e-4 + 1e-3 * std::fabs(r)) break;
        worst = std::max(worst, err);
      }
      std::printf("%s on sm_90 (emulated): output %s max abs error %.3g; %d kernels launched, %zu groups, "
                  "%zu bytes package\n",
                  file.c_str(), name.c_str(), worst, fake.counts().launches, model->partition.groups.size(),
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
