// Output-channel-blocked convolution weights (see conv_blocking.h).
#include "compiler_core/frontend/ops/conv_blocking.h"

namespace kiln::ops {
namespace {

// Floats of one output channel's weights: C/group times the kernel window.
int64_t PerChannel(const std::vector<int64_t>& w) {
  int64_t n = 1;
  for (size_t i = 1; i < w.size(); ++i) n *= w[i];
  return n;
}

}  // namespace

Tensor BlockConvWeights(const Tensor& w, int64_t block) {
  const int64_t k = w.dims()[0], per = PerChannel(w.dims());
  std::vector<int64_t> dims = w.dims();
  dims[0] = k / block;
  dims.push_back(block);
  Tensor wb(DType::kFloat32, dims);
  const float* src = w.data<float>();
  float* dst = wb.data<float>();
  for (int64_t m = 0; m < k; ++m) {
    for (int64_t i = 0; i < per; ++i) dst[((m / block) * per + i) * block + m % block] = src[m * per + i];
  }
  return wb;
}

std::vector<int64_t> UnblockedWeightDims(const std::vector<int64_t>& wb) {
  if (wb.size() < 4) return {};
  std::vector<int64_t> w(wb.begin(), wb.end() - 1);
  w[0] = wb[0] * wb.back();
  return w;
}

Tensor UnblockConvWeights(const Tensor& wb) {
  const int64_t block = wb.dims().back();
  const std::vector<int64_t> dims = UnblockedWeightDims(wb.dims());
  const int64_t k = dims[0], per = PerChannel(dims);
  Tensor w(DType::kFloat32, dims);
  const float* src = wb.data<float>();
  float* dst = w.data<float>();
  for (int64_t m = 0; m < k; ++m) {
    for (int64_t i = 0; i < per; ++i) dst[m * per + i] = src[((m / block) * per + i) * block + m % block];
  }
  return w;
}

int64_t ChannelVectorRowFloats(int64_t cg, int64_t kh, int64_t dh, int64_t ow, int64_t sw, int64_t kw, int64_t dw,
                               int64_t lanes) {
  const int64_t width = (ow - 1) * sw + (kw - 1) * dw + 1;
  return cg * ((kh - 1) * dh + 1) * ((width + lanes - 1) / lanes * lanes);
}

bool PrefersChannelVectors(int64_t reduction, int64_t oh, int64_t ow, int64_t lanes, bool blocked) {
  const int64_t whole = (ow + lanes - 1) / lanes * lanes;
  const bool map = blocked || (oh >= 4 && oh * ow >= 36);
  return reduction > 32 && map && static_cast<double>(ow) < 0.9 * static_cast<double>(whole);
}

}  // namespace kiln::ops
