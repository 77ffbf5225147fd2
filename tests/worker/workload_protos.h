// Hand-built kiln.v1.Graph workloads and MeasureTasks shared by the worker tests.
#pragma once

#include <string>
#include <vector>

#include "kiln/v1/graph.pb.h"
#include "kiln/v1/worker.pb.h"

namespace kiln::worker::testing {

inline void AddValueInfo(google::protobuf::RepeatedPtrField<kiln::v1::ValueInfo>* list,
                         const std::string& name, const std::vector<int64_t>& dims) {
  kiln::v1::ValueInfo* v = list->Add();
  v->set_name(name);
  v->mutable_type()->set_dtype(kiln::v1::FLOAT32);
  for (int64_t d : dims) v->mutable_type()->add_dims()->set_value(d);
}

// c = a + b over f32[rows, cols].
inline kiln::v1::Graph AddGraph(int64_t rows, int64_t cols) {
  kiln::v1::Graph g;
  g.set_name("add");
  g.set_opset_version(17);
  AddValueInfo(g.mutable_inputs(), "a", {rows, cols});
  AddValueInfo(g.mutable_inputs(), "b", {rows, cols});
  AddValueInfo(g.mutable_outputs(), "c", {rows, cols});
  kiln::v1::Node* n = g.add_nodes();
  n->set_name("add0");
  n->set_op_type("Add");
  n->add_inputs("a");
  n->add_inputs("b");
  n->add_outputs("c");
  return g;
}

// y = a @ b with a f32[m, k], b f32[k, n].
inline kiln::v1::Graph MatMulGraph(int64_t m, int64_t k, int64_t n) {
  kiln::v1::Graph g;
  g.set_name("matmul");
  g.set_opset_version(17);
  AddValueInfo(g.mutable_inputs(), "a", {m, k});
  AddValueInfo(g.mutable_inputs(), "b", {k, n});
  AddValueInfo(g.mutable_outputs(), "y", {m, n});
  kiln::v1::Node* node = g.add_nodes();
  node->set_name("mm0");
  node->set_op_type("MatMul");
  node->add_inputs("a");
  node->add_inputs("b");
  node->add_outputs("y");
  return g;
}

// y = Conv(x, w) with x f32[n, c, h, w], w f32[k, c, r, r], stride 1, pads r/2.
inline kiln::v1::Graph ConvGraph(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t r) {
  kiln::v1::Graph g;
  g.set_name("conv");
  g.set_opset_version(17);
  AddValueInfo(g.mutable_inputs(), "x", {n, c, h, w});
  AddValueInfo(g.mutable_inputs(), "w", {k, c, r, r});
  AddValueInfo(g.mutable_outputs(), "y", {n, k, h, w});
  kiln::v1::Node* node = g.add_nodes();
  node->set_name("conv0");
  node->set_op_type("Conv");
  node->add_inputs("x");
  node->add_inputs("w");
  node->add_outputs("y");
  kiln::v1::Attribute* pads = node->add_attributes();
  pads->set_name("pads");
  for (int i = 0; i < 4; ++i) pads->mutable_ints()->add_values(r / 2);
  return g;
}

inline kiln::v1::MeasureTask MakeTask(const std::string& id, kiln::v1::Graph graph,
                                      const std::string& config) {
  kiln::v1::MeasureTask t;
  t.set_task_id(id);
  t.set_workload_key(graph.name() + "-key");
  *t.mutable_workload() = std::move(graph);
  t.set_schedule_config(config);
  t.set_space_version(0);
  t.mutable_options()->set_warmup_runs(1);
  t.mutable_options()->set_min_repeats(3);
  t.mutable_options()->set_min_time_ms(1.0);
  return t;
}

}  // namespace kiln::worker::testing
