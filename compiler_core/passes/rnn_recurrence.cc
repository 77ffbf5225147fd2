// RNN recurrence (see rnn_recurrence.h).
#include "compiler_core/passes/rnn_recurrence.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compiler_core/frontend/op_registry.h"
#include "compiler_core/frontend/ops/rnn.h"
#include "compiler_core/passes/graph_rewriting.h"

namespace kiln {
namespace {

// The attributes kiln.Recurrence shares with the node (layout and the
// operator itself become time-major and `cell`).
std::map<std::string, AttrValue> RecurrenceAttrs(const Node& n) {
  std::map<std::string, AttrValue> a;
  for (const char* name : {"activation_alpha", "activation_beta", "activations", "clip", "direction",
                           "hidden_size", "input_forget", "linear_before_reset"}) {
    if (n.has_attr(name)) a[name] = n.attrs().at(name);
  }
  a["cell"] = n.op_type();
  return a;
}

// Replaces `n`; false when it stays (a dynamic shape, or attributes the
// operator's own checks refuse).
absl::StatusOr<bool> Split(Graph& graph, Node* n) {
  if (n->input(0) == nullptr || !n->input(0)->type().IsStatic() || n->input(1) == nullptr ||
      n->input(2) == nullptr) {
    return false;
  }
  absl::StatusOr<ops::RnnSpec> parsed = ops::ParseRnn(*n);
  if (!parsed.ok()) return false;
  const ops::RnnSpec spec = *std::move(parsed);
  const std::vector<int64_t> x_dims = n->input(0)->type().StaticDims();
  if (x_dims.size() != 3) return false;
  const bool bf = spec.batch_first;
  const int64_t I = x_dims[2];
  const int64_t H = spec.hidden, G = spec.gates, ND = spec.num_directions, GH = G * H;
  const bool lstm = spec.kind == ops::RnnKind::kLstm;
  const bool lbr = spec.kind == ops::RnnKind::kGru && spec.linear_before_reset;
  std::vector<Value*> in = n->inputs();
  in.resize(8, nullptr);
  std::vector<Value*> outputs = n->outputs();
  std::vector<bool> wanted(3, false);
  for (size_t i = 0; i < outputs.size() && i < 3; ++i) {
    wanted[i] = !outputs[i]->users().empty() || IsGraphOutput(graph, outputs[i]);
  }
  const std::string name = n->name();
  std::map<std::string, AttrValue> attrs = RecurrenceAttrs(*n);
  graph.RemoveNode(n);
  NodeBuilder b(graph, name);

  // XP = X[T, B, I] @ W^T[I, ND*GH] + (Wb + Rb), Rb's h rows left out with
  // linear_before_reset (constant folding makes W^T and the bias once).
  Value* x = in[0];
  if (bf) {
    ASSIGN_OR_RETURN(x, b.Op("Transpose", {x}, {{"perm", std::vector<int64_t>{1, 0, 2}}}));
  }
  ASSIGN_OR_RETURN(Value * w2, b.Reshape(in[1], {ND * GH, I}));
  ASSIGN_OR_RETURN(Value * wt, b.Op("Transpose", {w2}, {{"perm", std::vector<int64_t>{1, 0}}}));
  ASSIGN_OR_RETURN(Value * xp, b.Op("MatMul", {x, wt}));
  Value* rbh = nullptr;
  if (in[3] != nullptr) {
    ASSIGN_OR_RETURN(Value * wb, b.Slice(in[3], 1, 0, GH));
    ASSIGN_OR_RETURN(Value * rb, b.Slice(in[3], 1, GH, 2 * GH));
    if (lbr) {
      ASSIGN_OR_RETURN(rbh, b.Slice(rb, 1, 2 * H, GH));
      std::vector<float> keep(GH, 1.0f);
      std::fill(keep.begin() + 2 * H, keep.end(), 0.0f);
      ASSIGN_OR_RETURN(rb, b.Op("Mul", {rb, b.Constant(Tensor::FromVector(DType::kFloat32, {GH}, keep))}));
    }
    ASSIGN_OR_RETURN(Value * bias, b.Op("Add", {wb, rb}));
    ASSIGN_OR_RETURN(Value * bias1, b.Reshape(bias, {ND * GH}));
    ASSIGN_OR_RETURN(xp, b.Op("Add", {xp, bias1}));
  }
  ASSIGN_OR_RETURN(Value * rt, b.Op("Transpose", {in[2]}, {{"perm", std::vector<int64_t>{0, 2, 1}}}));

  // States [B, ND, H] (layout 1) become [ND, B, H].
  auto time_major_state = [&](Value* v) -> absl::StatusOr<Value*> {
    if (v == nullptr || !bf) return v;
    return b.Op("Transpose", {v}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
  };
  ASSIGN_OR_RETURN(Value * h0, time_major_state(in[5]));
  ASSIGN_OR_RETURN(Value * c0, time_major_state(lstm ? in[6] : nullptr));
  std::vector<Value*> rec_in = {xp, rt, rbh, in[4], h0, c0, lstm ? in[7] : nullptr};
  while (rec_in.back() == nullptr) rec_in.pop_back();

  // Outputs: the wanted ones (and those before them) in time-major form.
  int num_outputs = 0;
  for (int i = 0; i < 3; ++i) {
    if (wanted[i]) num_outputs = i + 1;
  }
  if (num_outputs == 0) return true;
  std::vector<Value*> rec_out;
  for (int i = 0; i < num_outputs; ++i) {
    ASSIGN_OR_RETURN(Value * v, graph.AddValue(graph.UniqueValueName(absl::StrCat(name, "/Recurrence_out", i))));
    rec_out.push_back(v);
  }
  RETURN_IF_ERROR(graph.AddNode("Recurrence", absl::StrCat(name, "/Recurrence"), rec_in,
                                rec_out, std::move(attrs), std::string(kKilnDomain))
                      .status());
  for (int i = 0; i < num_outputs; ++i) {
    if (!wanted[i]) continue;
    Value* v = rec_out[i];
    if (bf) {  // Y [T, ND, B, H] -> [B, T, ND, H]; states [ND, B, H] -> [B, ND, H]
      std::vector<int64_t> perm = i == 0 ? std::vector<int64_t>{2, 0, 1, 3} : std::vector<int64_t>{1, 0, 2};
      ASSIGN_OR_RETURN(v, b.Op("Transpose", {v}, {{"perm", perm}}));
    }
    RETURN_IF_ERROR(ProduceInto(graph, v, outputs[i]));
  }
  return true;
}

}  // namespace

absl::StatusOr<bool> RnnRecurrence::Run(Graph& graph) {
  auto is_rnn = [](const Node& n) {
    return n.domain().empty() && (n.op_type() == "LSTM" || n.op_type() == "GRU" || n.op_type() == "RNN");
  };
  return RewriteSelectedNodes(graph, is_rnn, Split);
}

}  // namespace kiln
