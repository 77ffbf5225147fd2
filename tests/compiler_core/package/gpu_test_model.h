// A small model of elementwise and data-movement operators (the kinds that
// have GPU lowerings) and its CUDA package, for the package writer's tests
// and the runtime's:
//   a  = Relu(x)                  x: f32[4,33,17]         (scratch)
//   s  = Add(a, bias)             bias: f32[17] constant  (output "s")
//   t  = Transpose(s, [0,2,1])    f32[4,17,33]            (scratch)
//   o  = Mul(t, z)                z: f32[4,17,33]         (output "o")
// One group per node, so the package has four steps, a constant, scratch the
// plan reuses, an output that a later step reads, and odd sizes everywhere.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/codegen/target.h"
#include "compiler_core/fusion/partitioner.h"
#include "compiler_core/fusion/workload.h"
#include "compiler_core/ir/graph.h"
#include "compiler_core/package/package_writer.h"
#include "gtest/gtest.h"

namespace kiln::gpu_package_testing {

struct GpuTestModel {
  std::unique_ptr<Graph> graph;
  Partition partition;
  std::vector<Workload> workloads;
  std::vector<ScheduleConfig> configs;  // the GPU defaults
  std::map<std::string, Tensor> feeds;
};

// Values in [-1, 1), a different sequence per `seed`.
inline std::vector<float> TestValues(int64_t n, uint32_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  uint32_t state = seed * 2654435761u + 1;
  for (float& f : v) {
    state = state * 1664525u + 1013904223u;
    f = static_cast<float>(state >> 8) / static_cast<float>(1u << 23) - 1.0f;
  }
  return v;
}

inline GpuTestModel MakeGpuTestModel(const GpuTarget& target) {
  GpuTestModel m;
  m.graph = std::make_unique<Graph>();
  Graph& g = *m.graph;
  g.set_name("gpu_test");
  auto f32 = [](std::vector<int64_t> dims) { return TensorType::Static(DType::kFloat32, std::move(dims)); };
  Value* x = *g.AddInput("x", f32({4, 33, 17}));
  Value* z = *g.AddInput("z", f32({4, 17, 33}));
  Value* bias = *g.AddConstant("bias", Tensor::FromVector<float>(DType::kFloat32, {17}, TestValues(17, 3)));
  Value* a = *g.AddValue("a", f32({4, 33, 17}));
  Value* s = *g.AddValue("s", f32({4, 33, 17}));
  Value* t = *g.AddValue("t", f32({4, 17, 33}));
  Value* o = *g.AddValue("o", f32({4, 17, 33}));
  EXPECT_TRUE(g.AddNode("Relu", "relu", {x}, {a}).ok());
  EXPECT_TRUE(g.AddNode("Add", "add", {a, bias}, {s}).ok());
  EXPECT_TRUE(g.AddNode("Transpose", "transpose", {s}, {t}, {{"perm", AttrValue(std::vector<int64_t>{0, 2, 1})}}).ok());
  EXPECT_TRUE(g.AddNode("Mul", "mul", {t, z}, {o}).ok());
  g.AddOutput(o);
  g.AddOutput(s);

  FusionOptions options;
  options.fuse = false;
  options.classify = LoweringKind;
  absl::StatusOr<Partition> p = PartitionGraph(g, options);
  EXPECT_TRUE(p.ok()) << p.status();
  m.partition = std::move(*p);
  for (const FusionGroup& group : m.partition.groups) {
    absl::StatusOr<Workload> w = ExtractWorkload(g, group);
    EXPECT_TRUE(w.ok()) << w.status();
    m.configs.push_back(DefaultSchedule(*w->graph, target));
    m.workloads.push_back(std::move(*w));
  }
  m.feeds.emplace("x", Tensor::FromVector<float>(DType::kFloat32, {4, 33, 17}, TestValues(4 * 33 * 17, 1)));
  m.feeds.emplace("z", Tensor::FromVector<float>(DType::kFloat32, {4, 17, 33}, TestValues(4 * 17 * 33, 2)));
  return m;
}

// The model's CUDA package for `target`: assembled with `ptxas` when `cubin`
// (empty: PtxAssembler::Find's search), else PTX only.
inline absl::StatusOr<PackageBytes> WriteGpuTestPackage(const GpuTestModel& m, const GpuTarget& target,
                                                        const std::string& ptxas, bool cubin) {
  PackageOptions po;
  po.model_name = "gpu_test";
  po.target = CpuTarget::Host();
  po.gpu = GpuPackageOptions{target, ptxas, cubin};
  return WritePackage(*m.graph, m.partition, m.workloads, m.configs, po);
}

}  // namespace kiln::gpu_package_testing
