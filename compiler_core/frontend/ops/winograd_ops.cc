// Kiln's Winograd convolution operators (the winograd_convolution pass makes
// them, codegen/loop_ir/lower_winograd.cc lowers them; see winograd.h):
//   kiln.WinogradInput(X [N, C, H, W]) -> V [alpha^2, C, tiles]
//     attributes tile (m: 2 or 4), pads [top, left, bottom, right], groups
//     (optional, default 1; above 1, V is [alpha^2, groups, C / groups, tiles]:
//     the same floats, viewed per group for a grouped conv's batched MatMul)
//   kiln.WinogradOutput(M [alpha^2, K, tiles] or [alpha^2, G, K / G, tiles],
//                       B [K] optional) -> Y [N, K, OH, OW]
//     attributes tile, output_shape [N, K, OH, OW]
#include "compiler_core/frontend/ops/winograd.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compiler_core/frontend/ops/op_families.h"
#include "compiler_core/frontend/ops/op_helpers.h"
#include "compiler_core/frontend/ops/window.h"

namespace kiln::ops {

const WinogradTransform* FindWinogradTransform(int64_t m) {
  static const WinogradTransform* f2 = new WinogradTransform{
      2, 4,
      {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}},
      {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}},
      {{1, 1, 1, 0}, {0, 1, -1, -1}}};
  static const WinogradTransform* f4 = new WinogradTransform{
      4, 6,
      {{4, 0, -5, 0, 1, 0},
       {0, -4, -4, 1, 1, 0},
       {0, 4, -4, -1, 1, 0},
       {0, -2, -1, 2, 1, 0},
       {0, 2, -1, -2, 1, 0},
       {0, 4, 0, -5, 0, 1}},
      {{1.0 / 4, 0, 0},
       {-1.0 / 6, -1.0 / 6, -1.0 / 6},
       {-1.0 / 6, 1.0 / 6, -1.0 / 6},
       {1.0 / 24, 1.0 / 12, 1.0 / 6},
       {1.0 / 24, -1.0 / 12, 1.0 / 6},
       {0, 0, 1}},
      {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}}};
  if (m == 2) return f2;
  if (m == 4) return f4;
  return nullptr;
}

WinogradGrid MakeWinogradGrid(int64_t n, int64_t c, int64_t h, int64_t w, int64_t pad_top, int64_t pad_left,
                              int64_t oh, int64_t ow, int64_t m) {
  WinogradGrid g;
  g.n = n, g.c = c, g.h = h, g.w = w;
  g.pad_top = pad_top, g.pad_left = pad_left;
  g.oh = oh, g.ow = ow;
  g.m = m, g.alpha = m + 2;
  g.tiles_h = (oh + m - 1) / m;
  g.tiles_w = (ow + m - 1) / m;
  return g;
}

Tensor WinogradWeights(const Tensor& w, const WinogradTransform& t) {
  const int64_t k = w.dims()[0], c = w.dims()[1], al = t.alpha;
  std::vector<float> u(static_cast<size_t>(al * al * k * c));
  const float* wd = w.data<float>();
  for (int64_t kc = 0; kc < k * c; ++kc) {
    const float* g = wd + kc * 9;
    double gg[8][3];  // G g: alpha x 3
    for (int64_t a = 0; a < al; ++a) {
      for (int j = 0; j < 3; ++j) {
        gg[a][j] = 0;
        for (int i = 0; i < 3; ++i) gg[a][j] += t.g[a][i] * g[i * 3 + j];
      }
    }
    for (int64_t a = 0; a < al; ++a) {
      for (int64_t b = 0; b < al; ++b) {
        double s = 0;
        for (int j = 0; j < 3; ++j) s += gg[a][j] * t.g[b][j];
        u[static_cast<size_t>((a * al + b) * k * c + kc)] = static_cast<float>(s);
      }
    }
  }
  return Tensor::FromVector(DType::kFloat32, {al * al, k, c}, u);
}

namespace {

absl::StatusOr<const WinogradTransform*> TransformOf(const Node& node) {
  const WinogradTransform* t = FindWinogradTransform(node.GetInt("tile", 0));
  if (t == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("attribute 'tile' must be 2 or 4, got ", node.GetInt("tile", 0)));
  }
  return t;
}

absl::StatusOr<std::vector<int64_t>> IntsOfLength(const Node& node, const char* name, size_t n, int64_t min) {
  std::vector<int64_t> v = node.GetInts(name, {});
  if (v.size() != n) return absl::InvalidArgumentError(absl::StrCat("attribute '", name, "' must have ", n, " values"));
  for (int64_t x : v) {
    if (x < min) return absl::InvalidArgumentError(absl::StrCat("attribute '", name, "' has ", x, " < ", min));
  }
  return v;
}

absl::StatusOr<std::vector<int64_t>> StaticF32(const Node& node, const InputTypes& in, int i, size_t rank) {
  const TensorType& t = *in[i];
  if (t.dtype != DType::kFloat32) {
    return absl::InvalidArgumentError(absl::StrCat("input ", i, " must be f32, got ", t.ToString()));
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> d, StaticDimsOf(node, i, t, "a Winograd operand"));
  if (d.size() != rank) {
    return absl::InvalidArgumentError(absl::StrCat("input ", i, " must be ", rank, "-D, got ", t.ToString()));
  }
  return d;
}

// The grid of a kiln.WinogradInput node over X of dims `x`.
absl::StatusOr<WinogradGrid> InputGrid(const Node& node, const std::vector<int64_t>& x) {
  ASSIGN_OR_RETURN(const WinogradTransform* t, TransformOf(node));
  ASSIGN_OR_RETURN(std::vector<int64_t> p, IntsOfLength(node, "pads", 4, 0));
  const int64_t oh = x[2] + p[0] + p[2] - 2, ow = x[3] + p[1] + p[3] - 2;
  if (oh < 1 || ow < 1) return absl::InvalidArgumentError("the padded input is smaller than the 3x3 kernel");
  return MakeWinogradGrid(x[0], x[1], x[2], x[3], p[0], p[1], oh, ow, t->m);
}

absl::StatusOr<std::vector<TensorType>> InferInput(const Node& node, const InputTypes& in) {
  ASSIGN_OR_RETURN(std::vector<int64_t> x, StaticF32(node, in, 0, 4));
  ASSIGN_OR_RETURN(WinogradGrid g, InputGrid(node, x));
  const int64_t groups = node.GetInt("groups", 1);
  if (groups < 1 || g.c % groups != 0) {
    return absl::InvalidArgumentError(absl::StrCat("groups ", groups, " does not divide the ", g.c, " input channels"));
  }
  if (groups == 1) {
    return std::vector<TensorType>{
        MakeType(DType::kFloat32, {Dim::Static(g.alpha * g.alpha), Dim::Static(g.c), Dim::Static(g.tiles())})};
  }
  return std::vector<TensorType>{MakeType(DType::kFloat32, {Dim::Static(g.alpha * g.alpha), Dim::Static(groups),
                                                            Dim::Static(g.c / groups), Dim::Static(g.tiles())})};
}

absl::Status EvalInput(const Node& node, const InputTensors& in, std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(WinogradGrid g, InputGrid(node, in[0]->dims()));
  ASSIGN_OR_RETURN(const WinogradTransform* t, TransformOf(node));
  const float* x = in[0]->data<float>();
  float* v = out[0].data<float>();
  const int64_t al = g.alpha, tiles = g.tiles();
  double d[8][8], bd[8][8];
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t c = 0; c < g.c; ++c) {
      const float* plane = x + (n * g.c + c) * g.h * g.w;
      for (int64_t th = 0; th < g.tiles_h; ++th) {
        for (int64_t tw = 0; tw < g.tiles_w; ++tw) {
          for (int64_t i = 0; i < al; ++i) {
            for (int64_t j = 0; j < al; ++j) {
              const int64_t r = th * g.m + i - g.pad_top, q = tw * g.m + j - g.pad_left;
              d[i][j] = r >= 0 && r < g.h && q >= 0 && q < g.w ? plane[r * g.w + q] : 0.0;
            }
          }
          for (int64_t a = 0; a < al; ++a) {  // B^T d
            for (int64_t j = 0; j < al; ++j) {
              bd[a][j] = 0;
              for (int64_t i = 0; i < al; ++i) bd[a][j] += t->bt[a][i] * d[i][j];
            }
          }
          const int64_t tile = (n * g.tiles_h + th) * g.tiles_w + tw;
          for (int64_t a = 0; a < al; ++a) {  // (B^T d) B
            for (int64_t b = 0; b < al; ++b) {
              double s = 0;
              for (int64_t j = 0; j < al; ++j) s += bd[a][j] * t->bt[b][j];
              v[((a * al + b) * g.c + c) * tiles + tile] = static_cast<float>(s);
            }
          }
        }
      }
    }
  }
  return absl::OkStatus();
}

// The grid of a kiln.WinogradOutput node (input and pads do not matter to it).
absl::StatusOr<WinogradGrid> OutputGrid(const Node& node) {
  ASSIGN_OR_RETURN(const WinogradTransform* t, TransformOf(node));
  ASSIGN_OR_RETURN(std::vector<int64_t> y, IntsOfLength(node, "output_shape", 4, 1));
  return MakeWinogradGrid(y[0], y[1], 0, 0, 0, 0, y[2], y[3], t->m);
}

absl::StatusOr<std::vector<TensorType>> InferOutput(const Node& node, const InputTypes& in) {
  // M per group ([alpha^2, G, K / G, tiles]) is the same floats as [alpha^2,
  // K, tiles].
  const bool grouped = in[0] != nullptr && in[0]->rank() == 4;
  ASSIGN_OR_RETURN(std::vector<int64_t> m, StaticF32(node, in, 0, grouped ? 4 : 3));
  if (grouped) m = {m[0], m[1] * m[2], m[3]};
  ASSIGN_OR_RETURN(WinogradGrid g, OutputGrid(node));
  std::vector<int64_t> y = node.GetInts("output_shape", {});
  if (m != std::vector<int64_t>{g.alpha * g.alpha, y[1], g.tiles()}) {
    return absl::InvalidArgumentError(absl::StrCat("input 0 must be [", g.alpha * g.alpha, ",", y[1], ",", g.tiles(),
                                                   "] for output_shape ", JoinInts(y), ", got ", in[0]->ToString()));
  }
  if (in.size() > 1 && in[1] != nullptr) {
    ASSIGN_OR_RETURN(std::vector<int64_t> b, StaticF32(node, in, 1, 1));
    if (b[0] != y[1]) return absl::InvalidArgumentError(absl::StrCat("bias must be [", y[1], "], got ", in[1]->ToString()));
  }
  std::vector<Dim> dims;
  for (int64_t d : y) dims.push_back(Dim::Static(d));
  return std::vector<TensorType>{MakeType(DType::kFloat32, dims)};
}

absl::Status EvalOutput(const Node& node, const InputTensors& in, std::vector<Tensor>& out) {
  ASSIGN_OR_RETURN(WinogradGrid g, OutputGrid(node));
  ASSIGN_OR_RETURN(const WinogradTransform* t, TransformOf(node));
  const float* mm = in[0]->data<float>();
  const Tensor* bias = in.size() > 1 ? in[1] : nullptr;
  float* y = out[0].data<float>();
  const int64_t al = g.alpha, k_count = g.c, tiles = g.tiles();
  double mt[8][8], am[4][8];
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t k = 0; k < k_count; ++k) {
      const double b = bias != nullptr ? bias->data<float>()[k] : 0.0;
      for (int64_t th = 0; th < g.tiles_h; ++th) {
        for (int64_t tw = 0; tw < g.tiles_w; ++tw) {
          const int64_t tile = (n * g.tiles_h + th) * g.tiles_w + tw;
          for (int64_t a = 0; a < al; ++a) {
            for (int64_t c = 0; c < al; ++c) mt[a][c] = mm[((a * al + c) * k_count + k) * tiles + tile];
          }
          for (int64_t i = 0; i < g.m; ++i) {  // A^T M
            for (int64_t c = 0; c < al; ++c) {
              am[i][c] = 0;
              for (int64_t a = 0; a < al; ++a) am[i][c] += t->at[i][a] * mt[a][c];
            }
          }
          for (int64_t i = 0; i < g.m; ++i) {  // (A^T M) A
            const int64_t r = th * g.m + i;
            if (r >= g.oh) break;
            for (int64_t j = 0; j < g.m; ++j) {
              const int64_t q = tw * g.m + j;
              if (q >= g.ow) break;
              double s = b;
              for (int64_t c = 0; c < al; ++c) s += am[i][c] * t->at[j][c];
              y[((n * k_count + k) * g.oh + r) * g.ow + q] = static_cast<float>(s);
            }
          }
        }
      }
    }
  }
  return absl::OkStatus();
}

OpDef InputOp() {
  OpDef def;
  def.op_type = "WinogradInput";
  def.domain = std::string(kKilnDomain);
  def.attrs = {{"pads", AttrKind::kInts}, {"tile", AttrKind::kInt}, {"groups", AttrKind::kInt}};
  def.validate = [](const Node& node) {
    RETURN_IF_ERROR(TransformOf(node).status());
    return IntsOfLength(node, "pads", 4, 0).status();
  };
  def.infer = InferInput;
  def.eval = EvalInput;
  return def;
}

OpDef OutputOp() {
  OpDef def;
  def.op_type = "WinogradOutput";
  def.domain = std::string(kKilnDomain);
  def.max_inputs = 2;
  def.attrs = {{"output_shape", AttrKind::kInts}, {"tile", AttrKind::kInt}};
  def.validate = [](const Node& node) { return OutputGrid(node).status(); };
  def.infer = InferOutput;
  def.eval = EvalOutput;
  return def;
}

}  // namespace

void RegisterWinogradOps(std::vector<OpDef>* defs) {
  // The input transform is a kernel of its own; the output transform takes
  // the convolution's elementwise epilogue, like the Conv it replaces.
  defs->push_back(WithClass(OpClass::kOpaque, InputOp()));
  defs->push_back(WithClass(OpClass::kAnchor, OutputOp()));
}

}  // namespace kiln::ops
