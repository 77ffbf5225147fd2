// A matrix product's B in column panels (see matmul_panels.h).
#include "compiler_core/frontend/ops/matmul_panels.h"

namespace kiln::ops {

Tensor PackMatMulColumns(const Tensor& b, int64_t lanes, bool transposed) {
  const int64_t k = b.dims()[transposed ? 1 : 0], n = b.dims()[transposed ? 0 : 1];
  const int64_t panels = (n + lanes - 1) / lanes;
  Tensor bp(DType::kFloat32, {panels, k, lanes});  // zeros past column n
  const float* src = b.data<float>();
  float* dst = bp.data<float>();
  for (int64_t r = 0; r < k; ++r) {
    for (int64_t c = 0; c < n; ++c) {
      dst[PanelOffset(k, lanes, r, c)] = src[transposed ? c * k + r : r * n + c];
    }
  }
  return bp;
}

Tensor UnpackMatMulColumns(const Tensor& bp, int64_t n) {
  const int64_t k = bp.dims()[1], lanes = bp.dims()[2];
  Tensor b(DType::kFloat32, {k, n});
  const float* src = bp.data<float>();
  float* dst = b.data<float>();
  for (int64_t r = 0; r < k; ++r) {
    for (int64_t c = 0; c < n; ++c) dst[r * n + c] = src[PanelOffset(k, lanes, r, c)];
  }
  return b;
}

bool HoldsColumns(const std::vector<int64_t>& bp, int64_t n) {
  return bp.size() == 3 && bp[0] >= 1 && bp[1] >= 0 && bp[2] >= 1 && n > (bp[0] - 1) * bp[2] && n <= bp[0] * bp[2];
}

}  // namespace kiln::ops
