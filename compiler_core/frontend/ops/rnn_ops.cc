// The recurrent family: LSTM, GRU and RNN with ONNX semantics (directions,
// layouts, clip, peepholes, input_forget, linear_before_reset, sequence_lens,
// initial states, custom activations), f32, and Kiln's internal
// kiln.Recurrence (the same cells over an input projected beforehand). The
// reference kernels compute in double. Before code generation the
// rnn_recurrence pass (compiler_core/passes/rnn_recurrence.cc) splits each
// LSTM/GRU/RNN into a Gemm over the whole sequence and a kiln.Recurrence,
// lowered by compiler_core/codegen/loop_ir/lower_recurrence.cc.
#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "compiler_core/frontend/ops/op_families.h"
#include "compiler_core/frontend/ops/op_helpers.h"
#include "compiler_core/frontend/ops/rnn.h"

namespace kiln::ops {

double RnnActivation::Apply(double x) const {
  if (name == "Sigmoid") return x >= 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x));
  if (name == "Tanh") return std::tanh(x);
  if (name == "Relu") return x > 0 ? x : 0;
  if (name == "Affine") return alpha * x + beta;
  if (name == "LeakyRelu") return x >= 0 ? x : alpha * x;
  if (name == "ThresholdedRelu") return x > alpha ? x : 0;
  if (name == "ScaledTanh") return alpha * std::tanh(beta * x);
  if (name == "HardSigmoid") return std::clamp(alpha * x + beta, 0.0, 1.0);
  if (name == "Elu") return x >= 0 ? x : alpha * (std::exp(x) - 1);
  if (name == "Softsign") return x / (1 + std::fabs(x));
  if (name == "Softplus") return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
  return x;
}

namespace {

RnnKind KindOf(const std::string& op) {
  return op == "LSTM" ? RnnKind::kLstm : op == "GRU" ? RnnKind::kGru : RnnKind::kRnn;
}

// Activations taking alpha (and beta) from activation_alpha / activation_beta,
// with ONNX's defaults when the lists are shorter.
struct ActivationInfo {
  bool alpha, beta;
  float default_alpha, default_beta;
};
const std::map<std::string, ActivationInfo>& Activations() {
  static const auto* m = new std::map<std::string, ActivationInfo>{
      {"Sigmoid", {false, false, 0, 0}},       {"Tanh", {false, false, 0, 0}},
      {"Relu", {false, false, 0, 0}},          {"Affine", {true, true, 1.0f, 0.0f}},
      {"LeakyRelu", {true, false, 0.01f, 0}},  {"ThresholdedRelu", {true, false, 1.0f, 0}},
      {"ScaledTanh", {true, true, 1.0f, 1.0f}}, {"HardSigmoid", {true, true, 0.2f, 0.5f}},
      {"Elu", {true, false, 1.0f, 0}},         {"Softsign", {false, false, 0, 0}},
      {"Softplus", {false, false, 0, 0}}};
  return *m;
}

}  // namespace

absl::StatusOr<RnnSpec> ParseRnn(const Node& node) {
  RnnSpec s;
  const bool internal = node.domain() == kKilnDomain;
  const std::string cell = internal ? node.GetString("cell", "") : node.op_type();
  if (cell != "LSTM" && cell != "GRU" && cell != "RNN") {
    return absl::InvalidArgumentError(absl::StrCat("attribute 'cell' must be LSTM, GRU or RNN, got '", cell, "'"));
  }
  s.kind = KindOf(cell);
  s.gates = s.kind == RnnKind::kLstm ? 4 : s.kind == RnnKind::kGru ? 3 : 1;
  s.hidden = node.GetInt("hidden_size", 0);
  if (s.hidden <= 0) return absl::InvalidArgumentError("attribute 'hidden_size' must be given and positive");
  const std::string direction = node.GetString("direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional") {
    return absl::InvalidArgumentError(
        absl::StrCat("attribute 'direction' must be forward, reverse or bidirectional, got '", direction, "'"));
  }
  s.num_directions = direction == "bidirectional" ? 2 : 1;
  s.reverse = direction == "reverse";
  const int64_t layout = node.GetInt("layout", 0);
  if (layout != 0 && layout != 1) return absl::InvalidArgumentError("attribute 'layout' must be 0 or 1");
  s.batch_first = layout == 1;
  s.clip = node.has_attr("clip") ? node.GetFloat("clip", 0) : 0;
  if (node.has_attr("clip") && !(s.clip > 0)) return absl::InvalidArgumentError("attribute 'clip' must be positive");
  s.input_forget = node.GetInt("input_forget", 0) != 0;
  s.linear_before_reset = node.GetInt("linear_before_reset", 0) != 0;
  const int per_dir = s.kind == RnnKind::kLstm ? 3 : s.kind == RnnKind::kGru ? 2 : 1;
  std::vector<std::string> names = node.GetStrings("activations", {});
  if (names.empty()) {
    for (int64_t d = 0; d < s.num_directions; ++d) {
      if (s.kind == RnnKind::kLstm) names.insert(names.end(), {"Sigmoid", "Tanh", "Tanh"});
      if (s.kind == RnnKind::kGru) names.insert(names.end(), {"Sigmoid", "Tanh"});
      if (s.kind == RnnKind::kRnn) names.push_back("Tanh");
    }
  }
  if (static_cast<int64_t>(names.size()) != per_dir * s.num_directions) {
    return absl::InvalidArgumentError(absl::StrCat("attribute 'activations' has ", names.size(), " entries, ",
                                                   cell, " with ", s.num_directions, " direction(s) takes ",
                                                   per_dir * s.num_directions));
  }
  const std::vector<float> alphas = node.GetFloats("activation_alpha", {});
  const std::vector<float> betas = node.GetFloats("activation_beta", {});
  size_t next_alpha = 0, next_beta = 0;
  s.activations.resize(s.num_directions);
  for (size_t i = 0; i < names.size(); ++i) {
    auto it = Activations().find(names[i]);
    if (it == Activations().end()) {
      return absl::InvalidArgumentError(absl::StrCat("activation '", names[i], "' is not supported"));
    }
    RnnActivation a{names[i], it->second.default_alpha, it->second.default_beta};
    if (it->second.alpha && next_alpha < alphas.size()) a.alpha = alphas[next_alpha++];
    if (it->second.beta && next_beta < betas.size()) a.beta = betas[next_beta++];
    s.activations[i / per_dir].push_back(a);
  }
  return s;
}

namespace {

const std::vector<AttrSpec> kRnnAttrs = {
    {"activation_alpha", AttrKind::kFloats}, {"activation_beta", AttrKind::kFloats},
    {"activations", AttrKind::kStrings},     {"clip", AttrKind::kFloat},
    {"direction", AttrKind::kString},        {"hidden_size", AttrKind::kInt},
    {"layout", AttrKind::kInt}};

// Input `i`, if present, has exactly `dims` (static where `dims` are).
absl::Status RequireDims(const Node& node, const InputTypes& in, int i, const std::vector<Dim>& dims) {
  if (static_cast<int>(in.size()) <= i || in[i] == nullptr) return absl::OkStatus();
  const TensorType& t = *in[i];
  bool ok = t.rank() == static_cast<int64_t>(dims.size());
  for (size_t k = 0; ok && k < dims.size(); ++k) {
    ok = SameDim(t.dims[k], dims[k]) || !t.dims[k].is_static() || !dims[k].is_static();
  }
  if (!ok) {
    std::vector<std::string> want;
    for (const Dim& d : dims) want.push_back(DimString(d));
    return absl::InvalidArgumentError(absl::StrCat("input '", InputName(node, i), "' is ", t.ToString(),
                                                   ", expected [", absl::StrJoin(want, ","), "]"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<TensorType>> InferRnn(const Node& node, const InputTypes& in) {
  ASSIGN_OR_RETURN(RnnSpec s, ParseRnn(node));
  for (int i : {0, 1, 2, 3, 5, 6, 7}) {
    if (i < static_cast<int>(in.size()) && in[i] != nullptr && in[i]->dtype != DType::kFloat32) {
      return absl::InvalidArgumentError(absl::StrCat("input '", InputName(node, i), "' must be f32, got ",
                                                     in[i]->ToString()));
    }
  }
  const TensorType& x = *in[0];
  if (x.rank() != 3) return absl::InvalidArgumentError(absl::StrCat("X must be 3-D, got ", x.ToString()));
  const Dim seq = x.dims[s.batch_first ? 1 : 0], batch = x.dims[s.batch_first ? 0 : 1], input = x.dims[2];
  const Dim nd = Dim::Static(s.num_directions), h = Dim::Static(s.hidden), gh = Dim::Static(s.gates * s.hidden);
  RETURN_IF_ERROR(RequireDims(node, in, 1, {nd, gh, input}));
  RETURN_IF_ERROR(RequireDims(node, in, 2, {nd, gh, h}));
  RETURN_IF_ERROR(RequireDims(node, in, 3, {nd, Dim::Static(2 * s.gates * s.hidden)}));
  if (in.size() > 4 && in[4] != nullptr) {
    if (in[4]->dtype != DType::kInt32) {
      return absl::InvalidArgumentError(absl::StrCat("sequence_lens must be i32, got ", in[4]->ToString()));
    }
    RETURN_IF_ERROR(RequireDims(node, in, 4, {batch}));
  }
  const std::vector<Dim> state = s.batch_first ? std::vector<Dim>{batch, nd, h} : std::vector<Dim>{nd, batch, h};
  RETURN_IF_ERROR(RequireDims(node, in, 5, state));
  if (s.kind == RnnKind::kLstm) {
    RETURN_IF_ERROR(RequireDims(node, in, 6, state));
    RETURN_IF_ERROR(RequireDims(node, in, 7, {nd, Dim::Static(3 * s.hidden)}));
  }
  std::vector<TensorType> out;
  out.push_back(MakeType(DType::kFloat32, s.batch_first ? std::vector<Dim>{batch, seq, nd, h}
                                                        : std::vector<Dim>{seq, nd, batch, h}));
  for (int i = 1; i < node.num_outputs(); ++i) out.push_back(MakeType(DType::kFloat32, state));
  return out;
}

// The recurrence over projected inputs, shared by LSTM/GRU/RNN (which project
// X first) and kiln.Recurrence (whose input is the projection).
struct RecurrenceArgs {
  int64_t T = 0, B = 0;
  // [T, B, ND*G*H]: W x_t + Wb + Rb, except GRU's Rb_h rows when
  // linear_before_reset (they are scaled by r: `rbh`).
  std::vector<double> xp;
  const float* r = nullptr;  // direction d's element (g, k) at r[d*G*H*H + g*r_g + k*r_k]
  int64_t r_g = 0, r_k = 0;
  const float* rbh = nullptr;  // [ND, H] or null
  const int32_t* lens = nullptr;
  const float *h0 = nullptr, *c0 = nullptr, *peep = nullptr;
  float *y = nullptr, *yh = nullptr, *yc = nullptr;
};

absl::Status RunRecurrence(const RnnSpec& s, const RecurrenceArgs& a) {
  const int64_t T = a.T, B = a.B, H = s.hidden, G = s.gates, ND = s.num_directions;
  for (int64_t b = 0; a.lens != nullptr && b < B; ++b) {
    if (a.lens[b] < 0 || a.lens[b] > T) {
      return absl::InvalidArgumentError(absl::StrCat("sequence_lens[", b, "] = ", a.lens[b], " is outside [0, ", T, "]"));
    }
  }
  auto state_index = [&](int64_t d, int64_t b, int64_t k) {
    return s.batch_first ? (b * ND + d) * H + k : (d * B + b) * H + k;
  };
  auto y_index = [&](int64_t t, int64_t d, int64_t b, int64_t k) {
    return s.batch_first ? ((b * T + t) * ND + d) * H + k : ((t * ND + d) * B + b) * H + k;
  };
  if (a.y != nullptr) std::fill(a.y, a.y + T * ND * B * H, 0.0f);
  auto clip = [&](double v) { return s.clip > 0 ? std::clamp(v, -static_cast<double>(s.clip), double{s.clip}) : v; };
  std::vector<double> h(H), c(H), rh(H);
  for (int64_t d = 0; d < ND; ++d) {
    const std::vector<RnnActivation>& act = s.activations[d];
    const bool backward = d == 1 || s.reverse;
    const float* rd = a.r + d * G * H * H;
    const float* rbh = a.rbh != nullptr ? a.rbh + d * H : nullptr;
    const float* pd = a.peep ? a.peep + d * 3 * H : nullptr;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t len = a.lens ? a.lens[b] : T;
      for (int64_t k = 0; k < H; ++k) {
        h[k] = a.h0 ? a.h0[state_index(d, b, k)] : 0;
        c[k] = a.c0 ? a.c0[state_index(d, b, k)] : 0;
      }
      for (int64_t step = 0; step < len; ++step) {
        const int64_t t = backward ? len - 1 - step : step;
        const double* gates = a.xp.data() + ((t * B + b) * ND + d) * G * H;
        auto rec = [&](int64_t g, const std::vector<double>& v) {
          double acc = 0;
          for (int64_t k = 0; k < H; ++k) acc += static_cast<double>(rd[g * a.r_g + k * a.r_k]) * v[k];
          return acc;
        };
        if (s.kind == RnnKind::kLstm) {  // gates i, o, f, c
          std::vector<double> nc(H), nh(H);
          for (int64_t k = 0; k < H; ++k) {
            double gi = gates[k] + rec(k, h) + (pd ? pd[k] * c[k] : 0);
            double gf = gates[2 * H + k] + rec(2 * H + k, h) + (pd ? pd[2 * H + k] * c[k] : 0);
            double gc = gates[3 * H + k] + rec(3 * H + k, h);
            const double i_t = act[0].Apply(clip(gi));
            const double f_t = s.input_forget ? 1 - i_t : act[0].Apply(clip(gf));
            const double c_t = f_t * c[k] + i_t * act[1].Apply(clip(gc));
            double go = gates[H + k] + rec(H + k, h) + (pd ? pd[H + k] * c_t : 0);
            nc[k] = c_t;
            nh[k] = act[0].Apply(clip(go)) * act[2].Apply(c_t);
          }
          c = nc;
          h = nh;
        } else if (s.kind == RnnKind::kGru) {  // gates z, r, h
          std::vector<double> z(H), rr(H), nh(H);
          for (int64_t k = 0; k < H; ++k) {
            z[k] = act[0].Apply(clip(gates[k] + rec(k, h)));
            rr[k] = act[0].Apply(clip(gates[H + k] + rec(H + k, h)));
          }
          for (int64_t k = 0; k < H; ++k) rh[k] = rr[k] * h[k];
          for (int64_t k = 0; k < H; ++k) {
            const double cand = s.linear_before_reset
                                    ? gates[2 * H + k] + rr[k] * (rec(2 * H + k, h) + (rbh ? rbh[k] : 0))
                                    : gates[2 * H + k] + rec(2 * H + k, rh);
            const double ht = act[1].Apply(clip(cand));
            nh[k] = (1 - z[k]) * ht + z[k] * h[k];
          }
          h = nh;
        } else {
          std::vector<double> nh(H);
          for (int64_t k = 0; k < H; ++k) nh[k] = act[0].Apply(clip(gates[k] + rec(k, h)));
          h = nh;
        }
        if (a.y != nullptr) {
          for (int64_t k = 0; k < H; ++k) a.y[y_index(t, d, b, k)] = static_cast<float>(h[k]);
        }
      }
      for (int64_t k = 0; k < H; ++k) {
        if (a.yh != nullptr) a.yh[state_index(d, b, k)] = static_cast<float>(h[k]);
        if (a.yc != nullptr) a.yc[state_index(d, b, k)] = static_cast<float>(c[k]);
      }
    }
  }
  return absl::OkStatus();
}

const Tensor* InputOrNull(const InputTensors& in, int i) { return static_cast<int>(in.size()) > i ? in[i] : nullptr; }

void SetOutputs(std::vector<Tensor>& out, RecurrenceArgs* a) {
  a->y = out.size() > 0 ? out[0].data<float>() : nullptr;
  a->yh = out.size() > 1 ? out[1].data<float>() : nullptr;
  a->yc = out.size() > 2 ? out[2].data<float>() : nullptr;
}

absl::Status EvalRnn(const Node& node, const InputTensors& in, std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(RnnSpec s, ParseRnn(node));
  const std::vector<int64_t>& xd = in[0]->dims();
  const int64_t T = xd[s.batch_first ? 1 : 0], B = xd[s.batch_first ? 0 : 1], I = xd[2];
  const int64_t H = s.hidden, G = s.gates, ND = s.num_directions;
  const float* x = in[0]->data<float>();
  const float* w = in[1]->data<float>();
  const float* bias = InputOrNull(in, 3) ? InputOrNull(in, 3)->data<float>() : nullptr;
  RecurrenceArgs a;
  a.T = T;
  a.B = B;
  a.r = in[2]->data<float>();
  a.r_g = H;
  a.r_k = 1;
  a.lens = InputOrNull(in, 4) ? InputOrNull(in, 4)->data<int32_t>() : nullptr;
  a.h0 = InputOrNull(in, 5) ? InputOrNull(in, 5)->data<float>() : nullptr;
  a.c0 = s.kind == RnnKind::kLstm && InputOrNull(in, 6) ? InputOrNull(in, 6)->data<float>() : nullptr;
  a.peep = s.kind == RnnKind::kLstm && InputOrNull(in, 7) ? InputOrNull(in, 7)->data<float>() : nullptr;
  SetOutputs(out, &a);
  // The projection: W x_t + Wb + Rb (GRU's Rb_h apart with linear_before_reset).
  const bool lbr = s.kind == RnnKind::kGru && s.linear_before_reset;
  std::vector<float> rbh;
  if (lbr && bias != nullptr) {
    for (int64_t d = 0; d < ND; ++d) {
      const float* rb = bias + d * 2 * G * H + G * H;
      rbh.insert(rbh.end(), rb + 2 * H, rb + 3 * H);
    }
    a.rbh = rbh.data();
  }
  a.xp.assign(T * B * ND * G * H, 0.0);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t b = 0; b < B; ++b) {
      const float* xt = s.batch_first ? x + (b * T + t) * I : x + (t * B + b) * I;
      for (int64_t d = 0; d < ND; ++d) {
        const float* wd = w + d * G * H * I;
        const float* wb = bias ? bias + d * 2 * G * H : nullptr;
        double* p = a.xp.data() + ((t * B + b) * ND + d) * G * H;
        for (int64_t g = 0; g < G * H; ++g) {
          double acc = 0;
          if (wb != nullptr) acc = static_cast<double>(wb[g]) + (lbr && g >= 2 * H ? 0.0 : wb[G * H + g]);
          for (int64_t i = 0; i < I; ++i) acc += static_cast<double>(wd[g * I + i]) * xt[i];
          p[g] = acc;
        }
      }
    }
  }
  return RunRecurrence(s, a);
}

// kiln.Recurrence: XP [T, B, ND*G*H], RT [ND, H, G*H] (R transposed), then
// optional Rb_h [ND, H], sequence_lens [B], initial_h, initial_c [ND, B, H]
// and P [ND, 3H]; outputs Y [T, ND, B, H], Y_h, Y_c [ND, B, H].
absl::StatusOr<std::vector<TensorType>> InferRecurrence(const Node& node, const InputTypes& in) {
  ASSIGN_OR_RETURN(RnnSpec s, ParseRnn(node));
  for (int i : {0, 1, 2, 4, 5, 6}) {
    if (i < static_cast<int>(in.size()) && in[i] != nullptr && in[i]->dtype != DType::kFloat32) {
      return absl::InvalidArgumentError(absl::StrCat("input ", i, " must be f32, got ", in[i]->ToString()));
    }
  }
  const TensorType& xp = *in[0];
  if (xp.rank() != 3) return absl::InvalidArgumentError(absl::StrCat("XP must be 3-D, got ", xp.ToString()));
  const Dim seq = xp.dims[0], batch = xp.dims[1];
  const Dim nd = Dim::Static(s.num_directions), h = Dim::Static(s.hidden), gh = Dim::Static(s.gates * s.hidden);
  RETURN_IF_ERROR(RequireDims(node, in, 0, {seq, batch, Dim::Static(s.num_directions * s.gates * s.hidden)}));
  RETURN_IF_ERROR(RequireDims(node, in, 1, {nd, h, gh}));
  RETURN_IF_ERROR(RequireDims(node, in, 2, {nd, h}));
  if (in.size() > 3 && in[3] != nullptr) {
    if (in[3]->dtype != DType::kInt32) {
      return absl::InvalidArgumentError(absl::StrCat("sequence_lens must be i32, got ", in[3]->ToString()));
    }
    RETURN_IF_ERROR(RequireDims(node, in, 3, {batch}));
  }
  RETURN_IF_ERROR(RequireDims(node, in, 4, {nd, batch, h}));
  RETURN_IF_ERROR(RequireDims(node, in, 5, {nd, batch, h}));
  RETURN_IF_ERROR(RequireDims(node, in, 6, {nd, Dim::Static(3 * s.hidden)}));
  std::vector<TensorType> out;
  out.push_back(MakeType(DType::kFloat32, {seq, nd, batch, h}));
  for (int i = 1; i < node.num_outputs(); ++i) out.push_back(MakeType(DType::kFloat32, {nd, batch, h}));
  return out;
}

absl::Status EvalRecurrence(const Node& node, const InputTensors& in, std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(RnnSpec s, ParseRnn(node));
  RecurrenceArgs a;
  a.T = in[0]->dims()[0];
  a.B = in[0]->dims()[1];
  const float* xp = in[0]->data<float>();
  a.xp.assign(xp, xp + in[0]->num_elements());
  a.r = in[1]->data<float>();
  a.r_g = 1;
  a.r_k = s.gates * s.hidden;
  a.rbh = InputOrNull(in, 2) ? InputOrNull(in, 2)->data<float>() : nullptr;
  a.lens = InputOrNull(in, 3) ? InputOrNull(in, 3)->data<int32_t>() : nullptr;
  a.h0 = InputOrNull(in, 4) ? InputOrNull(in, 4)->data<float>() : nullptr;
  a.c0 = InputOrNull(in, 5) ? InputOrNull(in, 5)->data<float>() : nullptr;
  a.peep = InputOrNull(in, 6) ? InputOrNull(in, 6)->data<float>() : nullptr;
  SetOutputs(out, &a);
  return RunRecurrence(s, a);
}

OpDef RnnOp(const std::string& op_type) {
  OpDef def;
  def.op_type = op_type;
  def.min_inputs = 3;
  def.max_inputs = op_type == "LSTM" ? 8 : 6;
  def.num_outputs = op_type == "LSTM" ? 3 : 2;
  def.min_outputs = 1;
  def.attrs = kRnnAttrs;
  if (op_type == "LSTM") def.attrs.push_back({"input_forget", AttrKind::kInt});
  if (op_type == "GRU") def.attrs.push_back({"linear_before_reset", AttrKind::kInt});
  def.validate = [](const Node& node) { return ParseRnn(node).status(); };
  def.infer = InferRnn;
  def.eval = EvalRnn;
  return def;
}

OpDef RecurrenceOp() {
  OpDef def;
  def.op_type = "Recurrence";
  def.domain = std::string(kKilnDomain);
  def.min_inputs = 2;
  def.max_inputs = 7;
  def.num_outputs = 3;
  def.min_outputs = 1;
  def.attrs = {{"activation_alpha", AttrKind::kFloats}, {"activation_beta", AttrKind::kFloats},
               {"activations", AttrKind::kStrings},     {"cell", AttrKind::kString},
               {"clip", AttrKind::kFloat},              {"direction", AttrKind::kString},
               {"hidden_size", AttrKind::kInt},         {"input_forget", AttrKind::kInt},
               {"linear_before_reset", AttrKind::kInt}};
  def.validate = [](const Node& node) { return ParseRnn(node).status(); };
  def.infer = InferRecurrence;
  def.eval = EvalRecurrence;
  return def;
}

}  // namespace

void RegisterRnnOps(std::vector<OpDef>* defs) {
  // Opaque to fusion: the rnn_recurrence pass replaces them before fusion,
  // whenever their sequence is static, by a Gemm (the input projection) and a
  // kiln.Recurrence, which has a lowering of its own.
  for (const char* op : {"LSTM", "GRU", "RNN"}) defs->push_back(WithClass(OpClass::kOpaque, RnnOp(op)));
  defs->push_back(WithClass(OpClass::kOpaque, RecurrenceOp()));
}

}  // namespace kiln::ops
