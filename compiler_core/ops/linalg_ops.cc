// Linear algebra: MatMul (numpy semantics) and Gemm.
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler_core/ops/op_families.h"
#include "compiler_core/ops/op_helpers.h"
#include "compiler_core/shape_inference.h"
#include "compiler_core/status_macros.h"

namespace kiln::ops {
namespace {

// ---------------------------------------------------------------------------
// MatMul: numpy matmul. A 1-D first operand is [1,K] with the 1 removed from the
// result, a 1-D second operand is [K,1] likewise; batch dims broadcast.

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
    for (int64_t bi = 0; bi < num_batches; ++bi) {
      const float* pa = a + BroadcastOffset(bi, batch, sa) * m * k;
      const float* pb = b + BroadcastOffset(bi, batch, sb) * k * n;
      float* py = y + bi * m * n;
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double acc = 0;
          for (int64_t p = 0; p < k; ++p) acc += static_cast<double>(pa[i * k + p]) * pb[p * n + j];
          py[i * n + j] = static_cast<float>(acc);
        }
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
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p) {
          double va = ta ? a[p * m + i] : a[i * k + p];
          double vb = tb ? b[j * k + p] : b[p * n + j];
          acc += va * vb;
        }
        double v = alpha * acc;
        if (c) v += beta * c->data<float>()[i * sc[0] + j * sc[1]];
        y[i * n + j] = static_cast<float>(v);
      }
    }
    return absl::OkStatus();
  };
  return def;
}

}  // namespace

void RegisterLinalgOps(std::vector<OpDef>* defs) {
  defs->push_back(MatMulOp());
  defs->push_back(GemmOp());
}

}  // namespace kiln::ops
