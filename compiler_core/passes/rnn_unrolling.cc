// RNN unrolling (see rnn_unrolling.h).
#include "compiler_core/passes/rnn_unrolling.h"

#include <algorithm>
#include <map>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compiler_core/frontend/ops/rnn.h"
#include "compiler_core/passes/graph_rewriting.h"

namespace kiln {
namespace {

constexpr int64_t kOnnxFloat = 1;  // TensorProto.FLOAT, Cast's `to`

// The unrolling of one node: its inputs, its spec and the builder of the
// nodes replacing it.
class Unroller {
 public:
  Unroller(Graph& graph, const Node& node, ops::RnnSpec spec, std::vector<int64_t> x_dims)
      : b_(graph, node.name()), spec_(std::move(spec)), inputs_(node.inputs()) {
    inputs_.resize(8, nullptr);
    T_ = x_dims[spec_.batch_first ? 1 : 0];
    B_ = x_dims[spec_.batch_first ? 0 : 1];
    I_ = x_dims[2];
    H_ = spec_.hidden;
  }

  // Y, Y_h, Y_c (nullptr where not wanted).
  absl::StatusOr<std::vector<Value*>> Run(const std::vector<bool>& wanted);

 private:
  Value* In(int i) const { return inputs_[i]; }

  absl::StatusOr<Value*> Op(const std::string& op, std::vector<Value*> in, std::map<std::string, AttrValue> a = {}) {
    return b_.Op(op, std::move(in), std::move(a));
  }
  absl::StatusOr<Value*> Add(Value* x, Value* y) { return Op("Add", {x, y}); }
  absl::StatusOr<Value*> Sub(Value* x, Value* y) { return Op("Sub", {x, y}); }
  absl::StatusOr<Value*> Mul(Value* x, Value* y) { return Op("Mul", {x, y}); }
  // x h^T + c: the state (or anything [B, K]) times a weight [N, K].
  absl::StatusOr<Value*> Gemm(Value* x, Value* w, Value* c) {
    std::vector<Value*> in = {x, w};
    if (c != nullptr) in.push_back(c);
    return Op("Gemm", std::move(in), {{"transB", int64_t{1}}});
  }
  absl::StatusOr<Value*> Gate(Value* v, int64_t k) { return b_.Slice(v, 1, k * H_, (k + 1) * H_); }
  absl::StatusOr<Value*> Activate(const ops::RnnActivation& a, Value* x);
  // The activation of a clipped pre-activation.
  absl::StatusOr<Value*> Cell(const ops::RnnActivation& a, Value* x) {
    if (spec_.clip > 0) {
      ASSIGN_OR_RETURN(x, Op("Clip", {x, b_.Float(-spec_.clip), b_.Float(spec_.clip)}));
    }
    return Activate(a, x);
  }
  // Direction d's slice of a per-direction tensor (axis 0, or `axis`).
  absl::StatusOr<Value*> OfDirection(Value* v, int64_t d, int64_t axis = 0) {
    return Op("Gather", {v, b_.Int64(d)}, {{"axis", axis}});
  }
  // [B, 1] f32: 1 where step t is inside the batch entry's sequence.
  absl::StatusOr<Value*> Mask(int64_t t);
  // Direction d's steps: Y per time step (in time order) and the final states.
  absl::Status Direction(int64_t d, Value* x2, std::vector<Value*>* ys, Value** h_final, Value** c_final);

  NodeBuilder b_;
  const ops::RnnSpec spec_;
  std::vector<Value*> inputs_;  // X, W, R, B, sequence_lens, initial_h, initial_c, P
  int64_t T_, B_, I_, H_;
  Value* lens_ = nullptr;  // [B, 1] i32 when masking
  std::map<int64_t, Value*> masks_;
};

absl::StatusOr<Value*> Unroller::Activate(const ops::RnnActivation& a, Value* x) {
  const std::string& n = a.name;
  if (n == "Sigmoid" || n == "Tanh" || n == "Relu" || n == "Softsign" || n == "Softplus") return Op(n, {x});
  if (n == "LeakyRelu" || n == "Elu") return Op(n, {x}, {{"alpha", a.alpha}});
  if (n == "HardSigmoid") return Op(n, {x}, {{"alpha", a.alpha}, {"beta", a.beta}});
  if (n == "Affine") {
    ASSIGN_OR_RETURN(Value * ax, Mul(x, b_.Float(a.alpha)));
    return Add(ax, b_.Float(a.beta));
  }
  if (n == "ScaledTanh") {
    ASSIGN_OR_RETURN(Value * bx, Mul(x, b_.Float(a.beta)));
    ASSIGN_OR_RETURN(Value * t, Op("Tanh", {bx}));
    return Mul(t, b_.Float(a.alpha));
  }
  if (n == "ThresholdedRelu") {
    ASSIGN_OR_RETURN(Value * above, Op("Greater", {x, b_.Float(a.alpha)}));
    ASSIGN_OR_RETURN(Value * keep, Op("Cast", {above}, {{"to", kOnnxFloat}}));
    return Mul(x, keep);
  }
  return absl::InternalError(absl::StrCat("activation '", n, "' passed ParseRnn but has no unrolling"));
}

absl::StatusOr<Value*> Unroller::Mask(int64_t t) {
  if (auto it = masks_.find(t); it != masks_.end()) return it->second;
  Value* step = b_.Constant(Tensor::FromVector(DType::kInt32, {}, std::vector<int32_t>{static_cast<int32_t>(t)}));
  ASSIGN_OR_RETURN(Value * inside, Op("Less", {step, lens_}));
  ASSIGN_OR_RETURN(Value * mask, Op("Cast", {inside}, {{"to", kOnnxFloat}}));
  masks_[t] = mask;
  return mask;
}

absl::Status Unroller::Direction(int64_t d, Value* x2, std::vector<Value*>* ys, Value** h_final, Value** c_final) {
  const int64_t G = spec_.gates, H = H_;
  const bool lstm = spec_.kind == ops::RnnKind::kLstm, gru = spec_.kind == ops::RnnKind::kGru;
  const std::vector<ops::RnnActivation>& act = spec_.activations[d];
  ASSIGN_OR_RETURN(Value * w, OfDirection(In(1), d));  // [G*H, I]
  ASSIGN_OR_RETURN(Value * r, OfDirection(In(2), d));  // [G*H, H]
  // The biases that do not depend on the state join the sequence's Gemm;
  // GRU's Rb_h with linear_before_reset is scaled by r, so it stays out.
  Value* x_bias = nullptr;
  Value* rbh = nullptr;
  if (In(3) != nullptr) {
    ASSIGN_OR_RETURN(Value * bd, OfDirection(In(3), d));
    ASSIGN_OR_RETURN(Value * wb, b_.Slice(bd, 0, 0, G * H));
    ASSIGN_OR_RETURN(Value * rb, b_.Slice(bd, 0, G * H, 2 * G * H));
    if (gru && spec_.linear_before_reset) {
      ASSIGN_OR_RETURN(rbh, b_.Slice(rb, 0, 2 * H, 3 * H));
      std::vector<float> keep(G * H, 1.0f);
      std::fill(keep.begin() + 2 * H, keep.end(), 0.0f);
      ASSIGN_OR_RETURN(rb, Mul(rb, b_.Constant(Tensor::FromVector(DType::kFloat32, {G * H}, keep))));
    }
    ASSIGN_OR_RETURN(x_bias, Add(wb, rb));
  }
  ASSIGN_OR_RETURN(Value * xw, Gemm(x2, w, x_bias));  // [T*B or B*T, G*H]
  ASSIGN_OR_RETURN(Value * xw3, b_.Reshape(xw, spec_.batch_first ? std::vector<int64_t>{B_, T_, G * H}
                                                                 : std::vector<int64_t>{T_, B_, G * H}));
  const int64_t state_axis = spec_.batch_first ? 1 : 0;
  Value* zeros = b_.Constant(Tensor::FromVector(DType::kFloat32, {B_, H}, std::vector<float>(B_ * H, 0.0f)));
  Value* h = zeros;
  Value* c = zeros;
  if (In(5) != nullptr) {
    ASSIGN_OR_RETURN(h, OfDirection(In(5), d, state_axis));
  }
  if (lstm && In(6) != nullptr) {
    ASSIGN_OR_RETURN(c, OfDirection(In(6), d, state_axis));
  }
  Value *pi = nullptr, *po = nullptr, *pf = nullptr;
  if (lstm && In(7) != nullptr) {
    ASSIGN_OR_RETURN(Value * p, OfDirection(In(7), d));  // [3H]: i, o, f
    ASSIGN_OR_RETURN(pi, b_.Slice(p, 0, 0, H));
    ASSIGN_OR_RETURN(po, b_.Slice(p, 0, H, 2 * H));
    ASSIGN_OR_RETURN(pf, b_.Slice(p, 0, 2 * H, 3 * H));
  }
  Value *r_zr = nullptr, *r_h = nullptr;
  if (gru) {
    ASSIGN_OR_RETURN(r_zr, b_.Slice(r, 0, 0, 2 * H));
    ASSIGN_OR_RETURN(r_h, b_.Slice(r, 0, 2 * H, 3 * H));
  }
  const bool backward = d == 1 || spec_.reverse;
  ys->assign(T_, nullptr);
  for (int64_t step = 0; step < T_; ++step) {
    const int64_t t = backward ? T_ - 1 - step : step;
    ASSIGN_OR_RETURN(Value * xt, OfDirection(xw3, t, spec_.batch_first ? 1 : 0));  // [B, G*H]
    Value* h_new = nullptr;
    Value* c_new = nullptr;
    if (lstm) {  // gates i, o, f, c
      ASSIGN_OR_RETURN(Value * pre, Gemm(h, r, xt));
      ASSIGN_OR_RETURN(Value * gi, Gate(pre, 0));
      ASSIGN_OR_RETURN(Value * go, Gate(pre, 1));
      ASSIGN_OR_RETURN(Value * gf, Gate(pre, 2));
      ASSIGN_OR_RETURN(Value * gc, Gate(pre, 3));
      if (pi != nullptr) {
        ASSIGN_OR_RETURN(Value * ci, Mul(c, pi));
        ASSIGN_OR_RETURN(gi, Add(gi, ci));
        ASSIGN_OR_RETURN(Value * cf, Mul(c, pf));
        ASSIGN_OR_RETURN(gf, Add(gf, cf));
      }
      ASSIGN_OR_RETURN(Value * i, Cell(act[0], gi));
      Value* f = nullptr;
      if (spec_.input_forget) {
        ASSIGN_OR_RETURN(f, Sub(b_.Float(1.0f), i));
      } else {
        ASSIGN_OR_RETURN(f, Cell(act[0], gf));
      }
      ASSIGN_OR_RETURN(Value * g, Cell(act[1], gc));
      ASSIGN_OR_RETURN(Value * fc, Mul(f, c));
      ASSIGN_OR_RETURN(Value * ig, Mul(i, g));
      ASSIGN_OR_RETURN(c_new, Add(fc, ig));
      if (po != nullptr) {
        ASSIGN_OR_RETURN(Value * co, Mul(c_new, po));
        ASSIGN_OR_RETURN(go, Add(go, co));
      }
      ASSIGN_OR_RETURN(Value * o, Cell(act[0], go));
      ASSIGN_OR_RETURN(Value * hc, Activate(act[2], c_new));
      ASSIGN_OR_RETURN(h_new, Mul(o, hc));
    } else if (gru) {  // gates z, r, h
      ASSIGN_OR_RETURN(Value * x_zr, b_.Slice(xt, 1, 0, 2 * H));
      ASSIGN_OR_RETURN(Value * x_h, Gate(xt, 2));
      ASSIGN_OR_RETURN(Value * zr, Gemm(h, r_zr, x_zr));
      ASSIGN_OR_RETURN(Value * z_pre, Gate(zr, 0));
      ASSIGN_OR_RETURN(Value * r_pre, Gate(zr, 1));
      ASSIGN_OR_RETURN(Value * z, Cell(act[0], z_pre));
      ASSIGN_OR_RETURN(Value * rg, Cell(act[0], r_pre));
      Value* h_pre = nullptr;
      if (spec_.linear_before_reset) {
        ASSIGN_OR_RETURN(Value * hr, Gemm(h, r_h, rbh));
        ASSIGN_OR_RETURN(Value * scaled, Mul(rg, hr));
        ASSIGN_OR_RETURN(h_pre, Add(x_h, scaled));
      } else {
        ASSIGN_OR_RETURN(Value * rh, Mul(rg, h));
        ASSIGN_OR_RETURN(h_pre, Gemm(rh, r_h, x_h));
      }
      ASSIGN_OR_RETURN(Value * hh, Cell(act[1], h_pre));
      // (1 - z) hh + z h = hh + z (h - hh)
      ASSIGN_OR_RETURN(Value * diff, Sub(h, hh));
      ASSIGN_OR_RETURN(Value * zd, Mul(z, diff));
      ASSIGN_OR_RETURN(h_new, Add(hh, zd));
    } else {
      ASSIGN_OR_RETURN(Value * pre, Gemm(h, r, xt));
      ASSIGN_OR_RETURN(h_new, Cell(act[0], pre));
    }
    if (lens_ != nullptr) {
      // Past the end of a sequence: the state stays, Y is zero.
      ASSIGN_OR_RETURN(Value * m, Mask(t));
      ASSIGN_OR_RETURN((*ys)[t], Mul(m, h_new));
      ASSIGN_OR_RETURN(Value * dh, Sub(h_new, h));
      ASSIGN_OR_RETURN(Value * mdh, Mul(m, dh));
      ASSIGN_OR_RETURN(h, Add(h, mdh));
      if (lstm) {
        ASSIGN_OR_RETURN(Value * dc, Sub(c_new, c));
        ASSIGN_OR_RETURN(Value * mdc, Mul(m, dc));
        ASSIGN_OR_RETURN(c, Add(c, mdc));
      }
    } else {
      (*ys)[t] = h = h_new;
      if (lstm) c = c_new;
    }
  }
  *h_final = h;
  *c_final = c;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Value*>> Unroller::Run(const std::vector<bool>& wanted) {
  const int64_t ND = spec_.num_directions;
  if (In(4) != nullptr) {
    std::optional<std::vector<double>> lens = ConstantValues(In(4));
    bool full = lens.has_value();
    for (size_t b = 0; full && b < lens->size(); ++b) full = (*lens)[b] == T_;
    if (!full) {
      ASSIGN_OR_RETURN(lens_, b_.Reshape(In(4), {B_, 1}));
    }
  }
  ASSIGN_OR_RETURN(Value * x2, b_.Reshape(In(0), {T_ * B_, I_}));
  std::vector<std::vector<Value*>> ys(ND);
  std::vector<Value*> h_finals(ND), c_finals(ND);
  for (int64_t d = 0; d < ND; ++d) {
    RETURN_IF_ERROR(Direction(d, x2, &ys[d], &h_finals[d], &c_finals[d]));
  }
  // Pieces joined along `axis` after each is reshaped to `piece`.
  auto join = [&](const std::vector<Value*>& parts, const std::vector<int64_t>& piece,
                  int64_t axis) -> absl::StatusOr<Value*> {
    std::vector<Value*> shaped;
    for (Value* p : parts) {
      ASSIGN_OR_RETURN(Value * s, b_.Reshape(p, piece));
      shaped.push_back(s);
    }
    if (shaped.size() == 1) return shaped[0];
    return Op("Concat", shaped, {{"axis", axis}});
  };
  std::vector<Value*> out(3, nullptr);
  const bool bf = spec_.batch_first;
  if (wanted[0]) {  // [T, ND, B, H] or [B, T, ND, H]
    std::vector<Value*> per_direction;
    for (int64_t d = 0; d < ND; ++d) {
      ASSIGN_OR_RETURN(Value * yd, join(ys[d], bf ? std::vector<int64_t>{B_, 1, 1, H_}
                                                  : std::vector<int64_t>{1, 1, B_, H_},
                                        bf ? 1 : 0));
      per_direction.push_back(yd);
    }
    if (per_direction.size() == 1) {
      out[0] = per_direction[0];
    } else {
      ASSIGN_OR_RETURN(out[0], Op("Concat", per_direction, {{"axis", int64_t{bf ? 2 : 1}}}));
    }
  }
  const std::vector<int64_t> state_piece = bf ? std::vector<int64_t>{B_, 1, H_} : std::vector<int64_t>{1, B_, H_};
  if (wanted[1]) {
    ASSIGN_OR_RETURN(out[1], join(h_finals, state_piece, bf ? 1 : 0));
  }
  if (wanted[2]) {
    ASSIGN_OR_RETURN(out[2], join(c_finals, state_piece, bf ? 1 : 0));
  }
  return out;
}

// Replaces `n`; false when it stays (a dynamic shape, or attributes the
// operator's own checks refuse).
absl::StatusOr<bool> Unroll(Graph& graph, Node* n) {
  if (n->input(0) == nullptr || !n->input(0)->type().IsStatic() || n->input(1) == nullptr ||
      n->input(2) == nullptr) {
    return false;
  }
  absl::StatusOr<ops::RnnSpec> spec = ops::ParseRnn(*n);
  if (!spec.ok()) return false;
  const std::vector<int64_t> x_dims = n->input(0)->type().StaticDims();
  if (x_dims.size() != 3 || x_dims[0] * x_dims[1] * x_dims[2] == 0) return false;
  std::vector<Value*> outputs = n->outputs();
  std::vector<bool> wanted(3, false);
  for (size_t i = 0; i < outputs.size() && i < 3; ++i) {
    wanted[i] = !outputs[i]->users().empty() || IsGraphOutput(graph, outputs[i]);
  }
  Unroller unroller(graph, *n, *std::move(spec), x_dims);
  graph.RemoveNode(n);
  ASSIGN_OR_RETURN(std::vector<Value*> results, unroller.Run(wanted));
  for (size_t i = 0; i < outputs.size() && i < 3; ++i) {
    if (wanted[i]) RETURN_IF_ERROR(ProduceInto(graph, results[i], outputs[i]));
  }
  return true;
}

}  // namespace

absl::StatusOr<bool> RnnUnrolling::Run(Graph& graph) {
  auto is_rnn = [](const Node& n) {
    return n.domain().empty() && (n.op_type() == "LSTM" || n.op_type() == "GRU" || n.op_type() == "RNN");
  };
  return RewriteSelectedNodes(graph, is_rnn, Unroll);
}

}  // namespace kiln
