// Resolving a Reduce* node's axes for pattern matching.
#include "compiler_core/passes/reduce_axes.h"

#include <algorithm>

#include "compiler_core/passes/graph_rewriting.h"

namespace kiln {

std::optional<std::vector<int64_t>> KeptReducedAxes(const Node* n) {
  if (n->GetInt("keepdims", 1) != 1 || n->input(0) == nullptr || !n->input(0)->type().known) return std::nullopt;
  const int64_t rank = n->input(0)->type().rank();
  std::vector<int64_t> axes;
  if (n->input(1) != nullptr) {
    std::optional<std::vector<double>> v = ConstantValues(n->input(1));
    if (!v || n->input(1)->constant().dtype() != DType::kInt64) return std::nullopt;
    for (double a : *v) axes.push_back(static_cast<int64_t>(a));
  } else {
    axes = n->GetInts("axes", {});
  }
  if (axes.empty()) return std::nullopt;
  for (int64_t& a : axes) {
    if (a < 0) a += rank;
    if (a < 0 || a >= rank) return std::nullopt;
  }
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) return std::nullopt;
  return axes;
}

}  // namespace kiln
