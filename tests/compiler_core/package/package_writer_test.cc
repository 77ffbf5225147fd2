// The package writer end to end without services: import, partition, default
// schedules, write the package, load it with the runtime and compare every
// output with the reference interpreter. Also: reproducible bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <tuple>

#include "client/example_models.h"
#include "client/runtime/package_reader.h"
#include "client/runtime/session.h"
#include "client/runtime/thread_pool.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/driver/compile_driver.h"
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


// Convolutions joined by Concats, through the compile driver: DenseNet's
// growing concatenation (cat2 = [a, b] inside cat3 = [a, b, c], c computed
// from cat2), a Concat of a Concat (outer = [inner, e], inner = [d, f]; one
// group) and a Concat of `a` and another conv, which stays a kernel (a is
// cat3's). The others become views (Partition::views): the convs write their
// slices of one arena block, and the package still computes what the
// interpreter does, at 1 and 2 threads.
std::unique_ptr<Graph> ConcatsOfConvs() {
  auto g = std::make_unique<Graph>();
  g->set_name("concats");
  Value* x = *g->AddInput("x", TensorType::Static(DType::kFloat32, {1, 8, 6, 6}));
  int seed = 1;
  auto conv = [&](const std::string& name, Value* in, int64_t k, int64_t kernel) {
    const int64_t c = in->type().StaticDims()[1];
    std::vector<float> w(k * c * kernel * kernel);
    for (float& v : w) v = static_cast<float>((seed = seed * 1103515245 + 12345) >> 16 & 255) / 256.0f - 0.5f;
    Value* wv = *g->AddConstant(name + "_w", Tensor::FromVector<float>(DType::kFloat32, {k, c, kernel, kernel}, w));
    Value* out = *g->AddValue(name, TensorType::Static(DType::kFloat32, {1, k, 6, 6}));
    const int64_t pad = kernel / 2;
    EXPECT_TRUE(g->AddNode("Conv", name + "_conv", {in, wv}, {out},
                           {{"pads", std::vector<int64_t>{pad, pad, pad, pad}}})
                    .ok());
    return out;
  };
  auto concat = [&](const std::string& name, std::vector<Value*> ins) {
    int64_t channels = 0;
    for (Value* v : ins) channels += v->type().StaticDims()[1];
    Value* out = *g->AddValue(name, TensorType::Static(DType::kFloat32, {1, channels, 6, 6}));
    EXPECT_TRUE(g->AddNode("Concat", name + "_concat", std::move(ins), {out}, {{"axis", int64_t{1}}}).ok());
    return out;
  };
  Value* a = conv("a", x, 16, 1);
  // cat3, a later Concat, takes `a`: this one stays a kernel and reads it there.
  g->AddOutput(conv("w", concat("mixed", {conv("m", x, 16, 1), a}), 8, 1));
  Value* b = conv("b", x, 16, 3);
  Value* cat2 = concat("cat2", {a, b});
  Value* c = conv("c", cat2, 16, 1);
  Value* cat3 = concat("cat3", {a, b, c});
  g->AddOutput(conv("y", cat3, 8, 3));
  Value* inner = concat("inner", {conv("d", x, 32, 3), conv("f", x, 16, 1)});
  Value* outer = concat("outer", {inner, conv("e", x, 16, 1)});
  g->AddOutput(conv("z", outer, 8, 1));
  return g;
}

TEST(PackageWriterTest, ConcatsAreWrittenInPlaceByTheirInputsKernels) {
  std::vector<float> in(8 * 36);
  for (size_t i = 0; i < in.size(); ++i) in[i] = std::sin(0.37f * static_cast<float>(i));
  auto ref = Evaluate(*ConcatsOfConvs(), {{"x", Tensor::FromVector<float>(DType::kFloat32, {1, 8, 6, 6}, in)}});
  ASSERT_TRUE(ref.ok()) << ref.status();

  const CpuTarget target = CpuTarget::Host();
  auto model = PrepareModel(ConcatsOfConvs(), PrepareOptionsFor(Target(target)));
  ASSERT_TRUE(model.ok()) << model.status();
  std::vector<std::string> kept;
  for (const FusionGroup& group : model->partition.groups) {
    for (const Node* n : group.nodes) {
      if (n->op_type() == "Concat") kept.push_back(n->name());
    }
  }
  EXPECT_EQ(kept, std::vector<std::string>{"mixed_concat"}) << model->partition.ToText();
  EXPECT_EQ(model->partition.views.size(), 8u) << model->partition.ToText();
  PackageOptions po;
  po.model_name = "concats";
  po.target = target;
  auto bytes = BuildPackage(*model, DefaultSchedules(*model, Target(target)), po);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto pkg = runtime::Package::FromBytes(bytes->bytes);
  ASSERT_TRUE(pkg.ok()) << pkg.status();

  // Each view lies at its offset in its root's block.
  std::map<std::string, const runtime::ManifestBuffer*> buffer;
  for (const runtime::ManifestBuffer& b : (*pkg)->manifest().buffers) buffer[b.name] = &b;
  const std::vector<std::tuple<std::string, std::string, int64_t>> placed = {
      {"a", "cat3", 0},        {"b", "cat3", 16 * 144},    {"c", "cat3", 32 * 144},
      {"cat2", "cat3", 0},     {"d", "outer", 0},          {"f", "outer", 32 * 144},
      {"e", "outer", 48 * 144}};
  for (const auto& [value, root, offset] : placed) {
    ASSERT_TRUE(buffer.count(value) && buffer.count(root)) << value << " in " << root;
    EXPECT_EQ(buffer[value]->kind, runtime::ManifestBuffer::kScratch) << value;
    EXPECT_EQ(buffer[value]->offset, buffer[root]->offset + offset) << value << " in " << root;
  }

  std::shared_ptr<const runtime::Package> shared(std::move(*pkg));
  for (int threads : {1, 2}) {
    runtime::ThreadPool pool(threads);
    auto session = runtime::Session::Create(shared, &pool);
    ASSERT_TRUE(session.ok()) << session.status();
    ASSERT_TRUE((*session)->SetInput("x", in.data(), in.size() * sizeof(float)).ok());
    ASSERT_TRUE((*session)->Run().ok());
    for (int o = 0; o < 3; ++o) {
      const Tensor& want = ref->at(std::vector<std::string>{"w", "y", "z"}[o]);
      ASSERT_EQ((*session)->OutputBytes(o), static_cast<size_t>(want.size_bytes()));
      const float* got = static_cast<const float*>((*session)->OutputData(o));
      double max_err = 0;
      for (int64_t i = 0; i < want.num_elements(); ++i) {
        max_err = std::max(max_err, static_cast<double>(std::fabs(got[i] - want.data<float>()[i])));
      }
      EXPECT_LE(max_err, 1e-4) << "output " << o << ", threads=" << threads;
    }
  }
}

}  // namespace
}  // namespace kiln
