// Matrix products (codegen/loop_ir/lower_matmul.cc): MatMul (numpy batching
// and broadcasting), Gemm (transA/transB, alpha, beta, C), kiln.PackedMatMul
// (either, with a constant B in column panels: made by a pass), and Einsum
// (the reference interpreter only, so far).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "compiler_core/frontend/ops/einsum.h"
#include "compiler_core/frontend/ops/matmul_panels.h"
#include "compiler_core/frontend/ops/op_families.h"
#include "compiler_core/frontend/ops/op_helpers.h"
#include "compiler_core/frontend/shape_inference.h"

namespace kiln::ops {
namespace {

int LabelOf(char c) { return c >= 'a' && c <= 'z' ? c - 'a' : c - 'A' + 26; }

// Parses one term into letters and the position of "..." (-1 if none).
absl::StatusOr<std::pair<std::vector<int>, int>> ParseTerm(const std::string& t) {
  std::vector<int> letters;
  int ellipsis = -1;
  for (size_t i = 0; i < t.size(); ++i) {
    char c = t[i];
    if (c == '.') {
      if (t.compare(i, 3, "...") != 0 || ellipsis >= 0) {
        return absl::InvalidArgumentError(absl::StrCat("malformed ellipsis in einsum term '", t, "'"));
      }
      ellipsis = static_cast<int>(letters.size());
      i += 2;
    } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      letters.push_back(LabelOf(c));
    } else {
      return absl::InvalidArgumentError(absl::StrCat("invalid character '", std::string(1, c), "' in einsum term '", t, "'"));
    }
  }
  return std::make_pair(letters, ellipsis);
}

}  // namespace

absl::StatusOr<EinsumSpec> ParseEinsum(const Node& node, const InputTypes& in) {
  std::string eq;
  for (char c : node.GetString("equation", "")) {
    if (c != ' ') eq.push_back(c);
  }
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms = absl::StrSplit(lhs, ',');
  if (terms.size() != in.size()) {
    return absl::InvalidArgumentError(absl::StrCat("equation '", eq, "' has ", terms.size(), " operand terms for ",
                                                   in.size(), " inputs"));
  }
  EinsumSpec spec;
  int ell_rank = 0;
  std::map<int, int> counts;
  for (size_t j = 0; j < terms.size(); ++j) {
    ASSIGN_OR_RETURN(auto parsed, ParseTerm(terms[j]));
    const auto& [letters, ell] = parsed;
    const TensorType& t = *in[j];
    const int64_t er = t.rank() - static_cast<int64_t>(letters.size());
    if (er < 0 || (ell < 0 && er != 0)) {
      return absl::InvalidArgumentError(absl::StrCat("einsum term '", terms[j], "' does not match input ", j, " ",
                                                     t.ToString()));
    }
    std::vector<int> labels(letters.begin(), letters.end());
    if (ell >= 0) {
      ell_rank = std::max<int>(ell_rank, static_cast<int>(er));
      std::vector<int> e;
      for (int64_t k = 0; k < er; ++k) e.push_back(-1 - static_cast<int>(er - k));  // fixed up below
      labels.insert(labels.begin() + ell, e.begin(), e.end());
    }
    for (int l : labels) {
      if (l >= 0) ++counts[l];
    }
    spec.terms.push_back(std::move(labels));
  }
  // Ellipsis dims right-aligned: -1-r (r counted from the right) -> label.
  for (auto& labels : spec.terms) {
    for (int& l : labels) {
      if (l < 0) l = kEllipsisLabel + ell_rank - (-1 - l);
    }
  }
  // Extents, with broadcasting of extent-1 ellipsis dims.
  for (size_t j = 0; j < spec.terms.size(); ++j) {
    for (size_t k = 0; k < spec.terms[j].size(); ++k) {
      const int l = spec.terms[j][k];
      const Dim& d = in[j]->dims[k];
      auto it = spec.extents.find(l);
      if (it == spec.extents.end()) {
        spec.extents[l] = d;
      } else if (!SameDim(it->second, d)) {
        if (l >= kEllipsisLabel && IsOne(d)) continue;
        if (l >= kEllipsisLabel && IsOne(it->second)) {
          it->second = d;
          continue;
        }
        return absl::InvalidArgumentError(absl::StrCat("einsum '", eq, "': extents of one label differ (",
                                                       DimString(it->second), " vs ", DimString(d), ") in input ", j,
                                                       " ", in[j]->ToString()));
      }
    }
  }
  if (arrow == std::string::npos) {
    for (int e = 0; e < ell_rank; ++e) spec.out.push_back(kEllipsisLabel + e);
    for (const auto& [l, n] : counts) {
      if (n == 1) spec.out.push_back(l);
    }
    // counts is ordered by label: a-z then A-Z; ASCII order puts A-Z first.
    std::stable_sort(spec.out.begin() + ell_rank, spec.out.end(), [](int a, int b) {
      return (a >= 26 ? a - 26 : a + 26) < (b >= 26 ? b - 26 : b + 26);
    });
  } else {
    ASSIGN_OR_RETURN(auto parsed, ParseTerm(eq.substr(arrow + 2)));
    const auto& [letters, ell] = parsed;
    std::vector<int> out(letters.begin(), letters.end());
    if (ell >= 0) {
      std::vector<int> e;
      for (int k = 0; k < ell_rank; ++k) e.push_back(kEllipsisLabel + k);
      out.insert(out.begin() + ell, e.begin(), e.end());
    }
    for (size_t i = 0; i < out.size(); ++i) {
      if (out[i] < kEllipsisLabel && counts.count(out[i]) == 0) {
        return absl::InvalidArgumentError(absl::StrCat("einsum '", eq, "': output label does not occur in the inputs"));
      }
      if (std::count(out.begin(), out.end(), out[i]) > 1) {
        return absl::InvalidArgumentError(absl::StrCat("einsum '", eq, "': output label repeated"));
      }
    }
    spec.out = std::move(out);
  }
  return spec;
}


namespace {

// ---------------------------------------------------------------------------
// MatMul: numpy matmul. A 1-D first operand is [1,K] with the 1 removed from the
// result, a 1-D second operand is [K,1] likewise; batch dims broadcast.

// The rows [i0, i0 + rows) of a product of a (m x k, a(i, p) =
// a[i * a_row + p * a_col]) and b (k x n, row-major): acc[r * n + j] = the
// sum over p, in order, of a(i0 + r, p) * b[p * n + j] in double. Each sum
// is what a dot product per element gives (the same order; a product of
// two floats is exact in double, so contraction changes nothing), but b is
// read along its rows, once for every `rows` rows of a.
constexpr int64_t kProductRows = 8;
void RowProducts(const float* a, int64_t a_row, int64_t a_col, const float* b, int64_t i0, int64_t rows, int64_t k,
                 int64_t n, double* acc) {
  std::fill(acc, acc + rows * n, 0.0);
  for (int64_t p = 0; p < k; ++p) {
    const float* bp = b + p * n;
    for (int64_t r = 0; r < rows; ++r) {
      const double v = a[(i0 + r) * a_row + p * a_col];
      double* out = acc + r * n;
      for (int64_t j = 0; j < n; ++j) out[j] += v * static_cast<double>(bp[j]);
    }
  }
}

OpDef MatMulOp() {
  OpDef def;
  def.op_type = "MatMul";
  def.min_inputs = def.max_inputs = 2;
  def.infer = [](const Node& node, const InputTypes& in) -> absl::StatusOr<std::vector<TensorType>> {
    RETURN_IF_ERROR(RequireF32(node, in));
    const TensorType& a = *in[0];
    const TensorType& b = *in[1];
    if (a.rank() == 0 || b.rank() == 0) {
      return absl::InvalidArgumentError(absl::StrCat("operands must have rank >= 1, got ", a.ToString(),
                                                     " and ", b.ToString()));
    }
    std::vector<Dim> ad = a.dims, bd = b.dims;
    bool squeeze_m = ad.size() == 1, squeeze_n = bd.size() == 1;
    if (squeeze_m) ad.insert(ad.begin(), Dim::Static(1));
    if (squeeze_n) bd.push_back(Dim::Static(1));
    const Dim& ka = ad[ad.size() - 1];
    const Dim& kb = bd[bd.size() - 2];
    if (!SameDim(ka, kb)) {
      if (ka.is_static() && kb.is_static()) {
        return absl::InvalidArgumentError(absl::StrCat("inner dimensions of ", a.ToString(), " and ",
                                                       b.ToString(), " do not match"));
      }
      if (!ka.is_static()) return SymbolicError(node, 0, a.rank() - 1, ka, "is a contracted dimension");
      return SymbolicError(node, 1, squeeze_n ? 0 : b.rank() - 2, kb, "is a contracted dimension");
    }
    std::vector<Dim> abatch(ad.begin(), ad.end() - 2), bbatch(bd.begin(), bd.end() - 2);
    std::string mismatch = absl::StrCat("batch dimensions of ", a.ToString(), " and ", b.ToString(),
                                        " cannot be broadcast");
    ASSIGN_OR_RETURN(std::vector<Dim> dims, BroadcastDims(node, 0, abatch, 1, bbatch, mismatch));
    if (!squeeze_m) dims.push_back(ad[ad.size() - 2]);
    if (!squeeze_n) dims.push_back(bd[bd.size() - 1]);
    return std::vector<TensorType>{MakeType(DType::kFloat32, std::move(dims))};
  };
  def.eval = [](const Node&, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    std::vector<int64_t> ad = in[0]->dims(), bd = in[1]->dims();
    if (ad.size() == 1) ad.insert(ad.begin(), 1);
    if (bd.size() == 1) bd.push_back(1);
    const int64_t m = ad[ad.size() - 2], k = ad[ad.size() - 1], n = bd[bd.size() - 1];
    std::vector<int64_t> abatch(ad.begin(), ad.end() - 2), bbatch(bd.begin(), bd.end() - 2);
    ASSIGN_OR_RETURN(std::vector<int64_t> batch, BroadcastShapes(abatch, bbatch));
    std::vector<int64_t> sa = BroadcastStrides(abatch, batch.size());
    std::vector<int64_t> sb = BroadcastStrides(bbatch, batch.size());
    const float* a = in[0]->data<float>();
    const float* b = in[1]->data<float>();
    float* y = out[0].data<float>();
    const int64_t num_batches = NumElements(batch);
    std::vector<double> acc(static_cast<size_t>(kProductRows * n));
    for (int64_t bi = 0; bi < num_batches; ++bi) {
      const float* pa = a + BroadcastOffset(bi, batch, sa) * m * k;
      const float* pb = b + BroadcastOffset(bi, batch, sb) * k * n;
      float* py = y + bi * m * n;
      for (int64_t i = 0; i < m; i += kProductRows) {
        const int64_t rows = std::min(kProductRows, m - i);
        RowProducts(pa, k, 1, pb, i, rows, k, n, acc.data());
        for (int64_t e = 0; e < rows * n; ++e) py[i * n + e] = static_cast<float>(acc[static_cast<size_t>(e)]);
      }
    }
    return absl::OkStatus();
  };
  return def;
}

// ---------------------------------------------------------------------------
// Gemm: Y = alpha * A' * B' + beta * C, A' = transA ? A^T : A (2-D), C optional
// and unidirectionally broadcast to [M,N].

OpDef GemmOp() {
  OpDef def;
  def.op_type = "Gemm";
  def.min_inputs = 2;
  def.max_inputs = 3;
  def.attrs = {{"alpha", AttrKind::kFloat}, {"beta", AttrKind::kFloat},
               {"transA", AttrKind::kInt}, {"transB", AttrKind::kInt}};
  def.validate = [](const Node& node) -> absl::Status {
    for (const char* name : {"transA", "transB"}) {
      int64_t v = node.GetInt(name, 0);
      if (v != 0 && v != 1) {
        return absl::InvalidArgumentError(absl::StrCat("attribute '", name, "' must be 0 or 1, got ", v));
      }
    }
    return absl::OkStatus();
  };
  def.infer = [](const Node& node, const InputTypes& in) -> absl::StatusOr<std::vector<TensorType>> {
    RETURN_IF_ERROR(RequireF32(node, in));
    const TensorType& a = *in[0];
    const TensorType& b = *in[1];
    if (a.rank() != 2 || b.rank() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("A and B must be 2-D, got ", a.ToString(), " and ", b.ToString()));
    }
    bool ta = node.GetInt("transA", 0) != 0, tb = node.GetInt("transB", 0) != 0;
    const Dim& m = a.dims[ta ? 1 : 0];
    const Dim& ka = a.dims[ta ? 0 : 1];
    const Dim& kb = b.dims[tb ? 1 : 0];
    const Dim& n = b.dims[tb ? 0 : 1];
    if (!SameDim(ka, kb)) {
      if (ka.is_static() && kb.is_static()) {
        return absl::InvalidArgumentError(absl::StrCat("inner dimensions of A ", a.ToString(), " and B ",
                                                       b.ToString(), " do not match (transA=", ta,
                                                       ", transB=", tb, ")"));
      }
      if (!ka.is_static()) return SymbolicError(node, 0, ta ? 0 : 1, ka, "is a contracted dimension");
      return SymbolicError(node, 1, tb ? 1 : 0, kb, "is a contracted dimension");
    }
    std::vector<Dim> out = {m, n};
    if (const TensorType* c = in.size() > 2 ? in[2] : nullptr) {
      if (c->rank() > 2) {
        return absl::InvalidArgumentError(absl::StrCat("C must have rank <= 2, got ", c->ToString()));
      }
      for (int i = 0; i < c->rank(); ++i) {
        const Dim& cd = c->dims[i];
        const Dim& target = out[2 - c->rank() + i];
        if (SameDim(cd, target) || IsOne(cd)) continue;
        if (cd.is_static() && target.is_static()) {
          return absl::InvalidArgumentError(absl::StrCat("C ", c->ToString(), " cannot be broadcast to [",
                                                         DimString(out[0]), ",", DimString(out[1]), "]"));
        }
        return SymbolicError(node, 2, i, cd, "is broadcast to the result");
      }
    }
    return std::vector<TensorType>{MakeType(DType::kFloat32, std::move(out))};
  };
  def.eval = [](const Node& node, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    const bool ta = node.GetInt("transA", 0) != 0, tb = node.GetInt("transB", 0) != 0;
    const double alpha = node.GetFloat("alpha", 1.0f), beta = node.GetFloat("beta", 1.0f);
    const std::vector<int64_t>& ad = in[0]->dims();
    const std::vector<int64_t>& bd = in[1]->dims();
    const int64_t m = ta ? ad[1] : ad[0], k = ta ? ad[0] : ad[1], n = tb ? bd[0] : bd[1];
    const float* a = in[0]->data<float>();
    const float* b = in[1]->data<float>();
    const Tensor* c = in.size() > 2 ? in[2] : nullptr;
    std::vector<int64_t> sc;
    if (c) sc = BroadcastStrides(c->dims(), 2);
    float* y = out[0].data<float>();
    // B' row-major: B itself, or B transposed into a copy.
    std::vector<float> bt;
    if (tb) {
      bt.resize(static_cast<size_t>(k * n));
      for (int64_t j = 0; j < n; ++j) {
        for (int64_t p = 0; p < k; ++p) bt[static_cast<size_t>(p * n + j)] = b[j * k + p];
      }
      b = bt.data();
    }
    std::vector<double> acc(static_cast<size_t>(kProductRows * n));
    for (int64_t i = 0; i < m; i += kProductRows) {
      const int64_t rows = std::min(kProductRows, m - i);
      RowProducts(a, ta ? 1 : k, ta ? m : 1, b, i, rows, k, n, acc.data());
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t j = 0; j < n; ++j) {
          double v = alpha * acc[static_cast<size_t>(r * n + j)];
          if (c) v += beta * c->data<float>()[(i + r) * sc[0] + j * sc[1]];
          y[(i + r) * n + j] = static_cast<float>(v);
        }
      }
    }
    return absl::OkStatus();
  };
  return def;
}

// ---------------------------------------------------------------------------
// kiln.PackedMatMul(A, Bp, C?): a MatMul or Gemm whose B [K, n] is stored in
// column panels, Bp [P, K, L] (ops/matmul_panels.h), attribute n its columns.
// With a 2-D A it is a Gemm of that B (transA, alpha, beta, C as Gemm's; no
// transB); with a higher rank A, a MatMul (A's batches share B; no C, no
// transA). Evaluated as the product it came from.

bool PackedIsGemm(const Node& node, size_t a_rank, size_t inputs) {
  return PackedProductIsGemm(a_rank, inputs > 2, node.GetInt("transA", 0) != 0);
}

OpDef PackedMatMulOp() {
  OpDef def;
  def.op_type = "PackedMatMul";
  def.domain = std::string(kKilnDomain);
  def.min_inputs = 2;
  def.max_inputs = 3;
  def.attrs = {{"n", AttrKind::kInt}, {"alpha", AttrKind::kFloat}, {"beta", AttrKind::kFloat},
               {"transA", AttrKind::kInt}};
  def.validate = [](const Node& node) -> absl::Status {
    if (!node.has_attr("n") || node.GetInt("n", 0) < 1) {
      return absl::InvalidArgumentError("attribute 'n' (B's columns) is required and must be >= 1");
    }
    const int64_t ta = node.GetInt("transA", 0);
    if (ta != 0 && ta != 1) {
      return absl::InvalidArgumentError(absl::StrCat("attribute 'transA' must be 0 or 1, got ", ta));
    }
    return absl::OkStatus();
  };
  def.infer = [](const Node& node, const InputTypes& in) -> absl::StatusOr<std::vector<TensorType>> {
    RETURN_IF_ERROR(RequireF32(node, in));
    const TensorType& bp = *in[1];
    const int64_t n = node.GetInt("n", 0);
    if (!bp.IsStatic() || !HoldsColumns(bp.StaticDims(), n)) {
      return absl::InvalidArgumentError(absl::StrCat("packed B ", bp.ToString(), " must be static [P, K, L] with ",
                                                     "(P - 1) * L < n <= P * L for n=", n));
    }
    const TensorType b = MakeType(DType::kFloat32, {Dim::Static(bp.StaticDims()[1]), Dim::Static(n)});
    InputTypes product_in = in;
    product_in[1] = &b;
    if (PackedIsGemm(node, in[0]->rank(), in.size())) return GemmOp().infer(node, product_in);
    return MatMulOp().infer(node, product_in);
  };
  def.eval = [](const Node& node, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    const Tensor b = UnpackMatMulColumns(*in[1], node.GetInt("n", 0));
    InputTensors product_in = in;
    product_in[1] = &b;
    if (PackedIsGemm(node, in[0]->dims().size(), in.size())) return GemmOp().eval(node, product_in, out);
    return MatMulOp().eval(node, product_in, out);
  };
  return def;
}

// ---------------------------------------------------------------------------
// Einsum over explicit labels (a-z, A-Z) with at most one "..." per term
// (broadcast across operands, right-aligned). Without "->" the output is the
// ellipsis dims then the labels that occur once, in alphabetical order. Labels
// missing from the output are summed over; a label repeated within a term takes
// the diagonal. f32 and f64.

// Labels are ints: 0-51 for letters, 52+ for ellipsis dims (outermost first).
template <typename T>
void EinsumKernel(const EinsumSpec& spec, const InputTensors& in, Tensor& y) {
  // Loop labels: output labels first (in output order), then the summed ones.
  std::vector<int> labels = spec.out;
  for (const auto& [l, d] : spec.extents) {
    if (std::find(labels.begin(), labels.end(), l) == labels.end()) labels.push_back(l);
  }
  const size_t nl = labels.size(), nops = in.size();
  std::vector<int64_t> extent(nl);
  for (size_t i = 0; i < nl; ++i) extent[i] = spec.extents.at(labels[i]).value;
  // Strides of every operand per loop label (summed for repeated labels, 0 where
  // the operand lacks the label or broadcasts it).
  std::vector<std::vector<int64_t>> stride(nops, std::vector<int64_t>(nl, 0));
  for (size_t j = 0; j < nops; ++j) {
    const std::vector<int64_t>& d = in[j]->dims();
    int64_t s = 1;
    for (int k = static_cast<int>(d.size()) - 1; k >= 0; --k) {
      size_t li = std::find(labels.begin(), labels.end(), spec.terms[j][k]) - labels.begin();
      if (!(d[k] == 1 && extent[li] != 1)) stride[j][li] += s;
      s *= d[k];
    }
  }
  int64_t out_n = 1, sum_n = 1;
  for (size_t i = 0; i < nl; ++i) (i < spec.out.size() ? out_n : sum_n) *= extent[i];
  T* py = y.data<T>();
  if (out_n == 0) return;
  if (sum_n == 0) {
    std::fill(py, py + out_n, T{0});
    return;
  }
  std::vector<const T*> base(nops);
  for (size_t j = 0; j < nops; ++j) base[j] = in[j]->data<T>();
  std::vector<int64_t> coord(nl, 0), off(nops, 0);
  for (int64_t o = 0; o < out_n; ++o) {
    double acc = 0;
    for (int64_t c = 0; c < sum_n; ++c) {
      double prod = 1;
      for (size_t j = 0; j < nops; ++j) prod *= static_cast<double>(base[j][off[j]]);
      acc += prod;
      for (int i = static_cast<int>(nl) - 1; i >= 0; --i) {
        for (size_t j = 0; j < nops; ++j) off[j] += stride[j][i];
        if (++coord[i] < extent[i]) break;
        for (size_t j = 0; j < nops; ++j) off[j] -= stride[j][i] * extent[i];
        coord[i] = 0;
      }
    }
    py[o] = static_cast<T>(acc);
  }
}

OpDef EinsumOp() {
  OpDef def;
  def.op_type = "Einsum";
  def.min_inputs = 1;
  def.max_inputs = 16;
  def.attrs = {{"equation", AttrKind::kString}};
  def.validate = [](const Node& node) -> absl::Status {
    if (!node.has_attr("equation")) return absl::InvalidArgumentError("attribute 'equation' is required");
    return absl::OkStatus();
  };
  def.infer = [](const Node& node, const InputTypes& in) -> absl::StatusOr<std::vector<TensorType>> {
    for (size_t i = 0; i < in.size(); ++i) {
      if (in[i] == nullptr) return absl::InvalidArgumentError(absl::StrCat("input ", i, " is omitted"));
      if (in[i]->dtype != in[0]->dtype || (in[0]->dtype != DType::kFloat32 && in[0]->dtype != DType::kFloat64)) {
        return absl::InvalidArgumentError(absl::StrCat("inputs must all be f32 or all f64, input ", i, " is ",
                                                       in[i]->ToString()));
      }
    }
    ASSIGN_OR_RETURN(EinsumSpec spec, ParseEinsum(node, in));
    std::vector<Dim> dims;
    for (int l : spec.out) dims.push_back(spec.extents.count(l) ? spec.extents.at(l) : Dim::Static(1));
    for (const auto& [l, d] : spec.extents) {
      if (!d.is_static() && std::find(spec.out.begin(), spec.out.end(), l) == spec.out.end()) {
        return absl::InvalidArgumentError(absl::StrCat("summed einsum label has symbolic extent '", DimString(d),
                                                       "': bind it to a static extent (--shape)"));
      }
    }
    return std::vector<TensorType>{MakeType(in[0]->dtype, std::move(dims))};
  };
  def.eval = [](const Node& node, const InputTensors& in, std::vector<Tensor>& out) -> absl::Status {
    std::vector<TensorType> types;
    types.reserve(in.size());
    InputTypes tp;
    for (const Tensor* t : in) types.push_back(TensorType::Static(t->dtype(), t->dims()));
    for (const TensorType& t : types) tp.push_back(&t);
    ASSIGN_OR_RETURN(EinsumSpec spec, ParseEinsum(node, tp));
    if (in[0]->dtype() == DType::kFloat64) EinsumKernel<double>(spec, in, out[0]);
    else EinsumKernel<float>(spec, in, out[0]);
    return absl::OkStatus();
  };
  return def;
}

}  // namespace

void RegisterMatMulOps(std::vector<OpDef>* defs) {
  defs->push_back(WithClass(OpClass::kAnchor, MatMulOp()));
  defs->push_back(WithClass(OpClass::kAnchor, GemmOp()));
  defs->push_back(WithClass(OpClass::kAnchor, PackedMatMulOp()));
  defs->push_back(WithClass(OpClass::kOpaque, EinsumOp()));
}

}  // namespace kiln::ops
