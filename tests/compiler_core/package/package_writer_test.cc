// The package writer end to end without services: import, partition, default
// schedules, write the package, load it with the runtime and compare every
// output with the reference interpreter. Also: reproducible bytes.
#include <gtest/gtest.h>

#include <cmath>

#include "client/example_models.h"
#include "client/runtime/package_reader.h"
#include "client/runtime/session.h"
#include "client/runtime/thread_pool.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/frontend/interpreter.h"
#include "compiler_core/frontend/onnx_importer.h"
#include "compiler_core/fusion/partitioner.h"
#include "compiler_core/package/package_writer.h"
#include "proto/kiln/v1/package_layout.h"

namespace kiln {
namespace {

// One group per node, as the code generator names them.
absl::StatusOr<Partition> Unfused(const Graph& g) {
  FusionOptions options;
  options.fuse = false;
  options.classify = LoweringKind;
  return PartitionGraph(g, options);
}

struct Compiled {
  std::unique_ptr<Graph> graph;
  PackageBytes package;
};

Compiled CompileMlp() {
  auto model = client::MakeExampleModel("mlp");
  EXPECT_TRUE(model.ok());
  ImportOptions options;
  options.input_shapes = model->shapes;
  auto g = ImportOnnxModel(model->onnx_bytes, options);
  EXPECT_TRUE(g.ok()) << g.status();
  auto p = Unfused(**g);
  EXPECT_TRUE(p.ok()) << p.status();
  CpuTarget target = CpuTarget::Host();
  std::vector<Workload> workloads;
  std::vector<ScheduleConfig> configs;
  for (const FusionGroup& group : p->groups) {
    auto w = ExtractWorkload(**g, group);
    EXPECT_TRUE(w.ok()) << w.status();
    configs.push_back(DefaultSchedule(*w->graph, target));
    workloads.push_back(std::move(*w));
  }
  PackageOptions po;
  po.model_name = "mlp";
  po.target = target;
  auto pkg = WritePackage(**g, *p, workloads, configs, po);
  EXPECT_TRUE(pkg.ok()) << pkg.status();
  return Compiled{std::move(*g), std::move(*pkg)};
}

TEST(PackageWriterTest, PackageRunsAndMatchesTheInterpreter) {
  Compiled c = CompileMlp();
  auto model = client::MakeExampleModel("mlp");
  const Tensor& x = model->inputs.at("x");
  auto ref = Evaluate(*c.graph, {{"x", x}});
  ASSERT_TRUE(ref.ok()) << ref.status();

  auto pkg = runtime::Package::FromBytes(c.package.bytes);
  ASSERT_TRUE(pkg.ok()) << pkg.status();
  EXPECT_EQ((*pkg)->digest(), c.package.digest);
  std::shared_ptr<const runtime::Package> shared(std::move(*pkg));
  for (int threads : {1, 2}) {
    runtime::ThreadPool pool(threads);
    auto session = runtime::Session::Create(shared, &pool);
    ASSERT_TRUE(session.ok()) << session.status();
    ASSERT_TRUE((*session)->SetInput("x", x.raw(), x.size_bytes()).ok());
    ASSERT_TRUE((*session)->Run().ok());
    const Tensor& want = ref->at("y");
    ASSERT_EQ((*session)->OutputBytes(0), static_cast<size_t>(want.size_bytes()));
    const float* got = static_cast<const float*>((*session)->OutputData(0));
    double max_err = 0;
    for (int64_t i = 0; i < want.num_elements(); ++i) {
      max_err = std::max(max_err, static_cast<double>(std::fabs(got[i] - want.data<float>()[i])));
    }
    EXPECT_LE(max_err, 1e-5) << "threads=" << threads;
  }
}

TEST(PackageWriterTest, SameInputsGiveTheSameBytes) {
  Compiled a = CompileMlp();
  Compiled b = CompileMlp();
  EXPECT_EQ(a.package.digest, b.package.digest);
  EXPECT_EQ(a.package.bytes, b.package.bytes);
  EXPECT_NE(a.package.llvm_ir.find("kiln_group_0"), std::string::npos);
}

// Sections start pages, constants of 4 KiB or more start pages of the
// weights, smaller ones 64-byte boundaries, and the runtime holds the file in
// page-aligned memory: a constant's place in its page is the writer's alone.
TEST(PackageWriterTest, SectionsAndLargeConstantsArePageAligned) {
  Compiled c = CompileMlp();
  auto pkg = runtime::Package::FromBytes(c.package.bytes);
  ASSERT_TRUE(pkg.ok()) << pkg.status();
  const runtime::Manifest& m = (*pkg)->manifest();
  EXPECT_EQ(m.code_offset % package::kPageAlignment, 0);
  EXPECT_EQ(m.weights_offset % package::kPageAlignment, 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>((*pkg)->weights()) % package::kPageAlignment, 0u);
  int large = 0, small = 0;
  for (const runtime::ManifestBuffer& b : m.buffers) {
    if (b.kind != runtime::ManifestBuffer::kConstant) continue;
    if (b.size_bytes >= package::kPageAlignedBytes) {
      EXPECT_EQ(b.offset % package::kPageAlignment, 0) << b.name;
      ++large;
    } else {
      EXPECT_EQ(b.offset % package::kAlignment, 0) << b.name;
      ++small;
    }
  }
  EXPECT_GT(large, 0);
  EXPECT_GT(small, 0);
}

// Outputs no kernel computes: a constant, a graph input, and a computed value
// listed twice. They refer to the buffers that already hold them.
TEST(PackageWriterTest, PassThroughOutputsReadTheirBuffers) {
  Graph g;
  g.set_name("passthrough");
  auto x = g.AddInput("x", TensorType::Static(DType::kFloat32, {2, 3}));
  ASSERT_TRUE(x.ok());
  auto c = g.AddConstant("c", Tensor::FromVector<int64_t>(DType::kInt64, {3}, {7, -1, 9}));
  ASSERT_TRUE(c.ok());
  auto y = g.AddValue("y", TensorType::Static(DType::kFloat32, {2, 3}));
  ASSERT_TRUE(y.ok());
  ASSERT_TRUE(g.AddNode("Relu", "relu", {*x}, {*y}).ok());
  g.AddOutput(*c);
  g.AddOutput(*x);
  g.AddOutput(*y);
  auto p = Unfused(g);
  ASSERT_TRUE(p.ok()) << p.status();
  CpuTarget target = CpuTarget::Host();
  std::vector<Workload> workloads;
  std::vector<ScheduleConfig> configs;
  for (const FusionGroup& group : p->groups) {
    auto w = ExtractWorkload(g, group);
    ASSERT_TRUE(w.ok()) << w.status();
    configs.push_back(DefaultSchedule(*w->graph, target));
    workloads.push_back(std::move(*w));
  }
  PackageOptions po;
  po.model_name = "passthrough";
  po.target = target;
  auto bytes = WritePackage(g, *p, workloads, configs, po);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto pkg = runtime::Package::FromBytes(bytes->bytes);
  ASSERT_TRUE(pkg.ok()) << pkg.status();
  std::shared_ptr<const runtime::Package> shared(std::move(*pkg));
  auto session = runtime::Session::Create(shared, nullptr);
  ASSERT_TRUE(session.ok()) << session.status();
  const std::vector<float> in = {-1, 2, -3, 4, -5, 6};
  ASSERT_TRUE((*session)->SetInput("x", in.data(), in.size() * sizeof(float)).ok());
  ASSERT_TRUE((*session)->Run().ok());
  ASSERT_EQ((*session)->num_outputs(), 3);
  const int64_t* cv = static_cast<const int64_t*>((*session)->OutputData(0));
  EXPECT_EQ(std::vector<int64_t>(cv, cv + 3), (std::vector<int64_t>{7, -1, 9}));
  const float* xv = static_cast<const float*>((*session)->OutputData(1));
  EXPECT_EQ(std::vector<float>(xv, xv + 6), in);
  const float* yv = static_cast<const float*>((*session)->OutputData(2));
  EXPECT_EQ(std::vector<float>(yv, yv + 6), (std::vector<float>{0, 2, 0, 4, 0, 6}));
}

}  // namespace
}  // namespace kiln
