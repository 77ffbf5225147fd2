// Test helper: runs a partitioned graph group by group through the reference
// interpreter — each group cut out with ExtractWorkload and evaluated on the
// values earlier groups computed — so that comparing with Evaluate on the
// whole graph checks the partition and the extraction together.
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compiler_core/frontend/interpreter.h"
#include "compiler_core/fusion/partitioner.h"
#include "compiler_core/fusion/workload.h"

namespace kiln::testing {

// The graph's outputs, in graph-output order, computed group by group.
inline absl::StatusOr<std::vector<Tensor>> EvaluatePartitioned(const Graph& graph, const Partition& partition,
                                                               const std::map<std::string, Tensor>& inputs) {
  std::map<const Value*, Tensor> values;
  for (Value* v : graph.inputs()) {
    auto it = inputs.find(v->name());
    if (it == inputs.end()) return absl::InvalidArgumentError(absl::StrCat("no input '", v->name(), "'"));
    values.emplace(v, it->second);
  }
  for (Value* v : graph.constants()) values.emplace(v, v->constant());
  for (const FusionGroup& g : partition.groups) {
    ASSIGN_OR_RETURN(Workload w, ExtractWorkload(graph, g));
    std::map<std::string, Tensor> feed;
    for (size_t i = 0; i < g.inputs.size(); ++i) {
      auto it = values.find(g.inputs[i]);
      if (it == values.end()) {
        return absl::InternalError(absl::StrCat("group ", g.index, " reads '", g.inputs[i]->name(),
                                                "' before any group computed it"));
      }
      feed.emplace(w.graph->inputs()[i]->name(), it->second);
    }
    auto out = Evaluate(*w.graph, feed);
    if (!out.ok()) {
      return absl::Status(out.status().code(), absl::StrCat("group ", g.index, ": ", out.status().message()));
    }
    for (size_t i = 0; i < g.outputs.size(); ++i) {
      auto it = out->find(w.graph->outputs()[i]->name());
      if (it == out->end()) return absl::InternalError(absl::StrCat("group ", g.index, ": no output ", i));
      values.insert_or_assign(g.outputs[i], it->second);
    }
  }
  std::vector<Tensor> result;
  for (Value* v : graph.outputs()) {
    auto it = values.find(v);
    if (it == values.end()) return absl::InternalError(absl::StrCat("no group computes output '", v->name(), "'"));
    result.push_back(it->second);
  }
  return result;
}

// Largest |a - b| over two f32 tensors of the same shape; +inf if they differ in shape or dtype.
inline double MaxAbsDiff(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.dims() != b.dims() || a.dtype() != DType::kFloat32) {
    return a.dtype() == b.dtype() && a.dims() == b.dims() && a.bytes() == b.bytes() ? 0.0 : INFINITY;
  }
  const float* x = a.data<float>();
  const float* y = b.data<float>();
  double m = 0;
  for (int64_t i = 0; i < a.num_elements(); ++i) m = std::max(m, std::fabs(static_cast<double>(x[i]) - y[i]));
  return m;
}

}  // namespace kiln::testing
