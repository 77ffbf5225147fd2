// Pad folding into Conv padding (see pad_folding.h).
#include "compiler_core/passes/pad_folding.h"

#include <optional>
#include <vector>

#include "compiler_core/passes/graph_rewriting.h"

namespace kiln {
namespace {

// The pads of a zero constant Pad in ONNX order [begin..., end...] over all
// axes of its input, or nullopt when they are not known constants or the
// padding is not zeros.
std::optional<std::vector<int64_t>> ZeroPads(const Node& pad) {
  if (pad.GetString("mode", "constant") != "constant") return std::nullopt;
  const int64_t rank = pad.input(0)->type().rank();
  std::vector<int64_t> pads;
  if (pad.input(1) != nullptr) {
    std::optional<std::vector<double>> p = ConstantValues(pad.input(1));
    if (!p) return std::nullopt;
    for (double v : *p) pads.push_back(static_cast<int64_t>(v));
    if (pad.input(2) != nullptr && !IsScalarNear(pad.input(2), 0.0, 0.0)) return std::nullopt;
    if (pad.input(3) != nullptr) {
      std::optional<std::vector<double>> axes = ConstantValues(pad.input(3));
      if (!axes || pads.size() != 2 * axes->size()) return std::nullopt;
      std::vector<int64_t> full(2 * rank, 0);
      for (size_t i = 0; i < axes->size(); ++i) {
        int64_t a = static_cast<int64_t>((*axes)[i]);
        if (a < 0) a += rank;
        if (a < 0 || a >= rank) return std::nullopt;
        full[a] = pads[i];
        full[a + rank] = pads[i + axes->size()];
      }
      pads = full;
    }
  } else {
    pads = pad.GetInts("pads", {});
    if (pad.GetFloat("value", 0.0f) != 0.0f) return std::nullopt;
  }
  if (static_cast<int64_t>(pads.size()) != 2 * rank) return std::nullopt;
  return pads;
}

// Folds `pad` into its readers when they are all Convs that can take it.
bool Fold(Graph& graph, Node* pad) {
  Value* x = pad->input(0);
  Value* y = pad->output(0);
  if (!x->type().IsStatic() || x->type().rank() < 3 || IsGraphOutput(graph, y) || y->users().empty()) return false;
  std::optional<std::vector<int64_t>> pads = ZeroPads(*pad);
  if (!pads) return false;
  const int64_t rank = x->type().rank(), nsp = rank - 2;
  for (int64_t a = 0; a < rank; ++a) {
    const int64_t b = (*pads)[a], e = (*pads)[a + rank];
    if (b < 0 || e < 0 || (a < 2 && (b != 0 || e != 0))) return false;
  }
  std::vector<Node*> convs;
  for (Node* u : y->users()) {
    if (!IsOp(u, "Conv") || u->input(0) != y) return false;
    for (int i = 1; i < u->num_inputs(); ++i) {
      if (u->input(i) == y) return false;
    }
    const std::string auto_pad = u->GetString("auto_pad", "NOTSET");
    if (auto_pad != "NOTSET" && auto_pad != "VALID") return false;
    std::vector<int64_t> own = auto_pad == "VALID" ? std::vector<int64_t>() : u->GetInts("pads", {});
    if (!own.empty() && static_cast<int64_t>(own.size()) != 2 * nsp) return false;
    convs.push_back(u);
  }
  for (Node* conv : convs) {
    std::vector<int64_t> own = conv->GetString("auto_pad", "NOTSET") == "VALID" ? std::vector<int64_t>()
                                                                                 : conv->GetInts("pads", {});
    own.resize(2 * nsp, 0);
    for (int64_t s = 0; s < nsp; ++s) {
      own[s] += (*pads)[2 + s];
      own[nsp + s] += (*pads)[rank + 2 + s];
    }
    conv->set_attr("pads", own);
    conv->set_attr("auto_pad", std::string("NOTSET"));
    conv->ReplaceInput(0, x);
  }
  return true;
}

}  // namespace

absl::StatusOr<bool> PadFolding::Run(Graph& graph) {
  std::vector<Node*> pads;
  for (const auto& n : graph.nodes()) {
    if (IsOp(n.get(), "Pad")) pads.push_back(n.get());
  }
  bool changed = false;
  for (Node* p : pads) changed = Fold(graph, p) || changed;
  return changed;
}

}  // namespace kiln
