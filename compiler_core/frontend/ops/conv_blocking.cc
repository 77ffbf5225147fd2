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

// Where W[m, i] of a pointwise conv of k output channels lies in Wb [C/L,
// K/B, L, 1..., B] (block B, chunk L).
int64_t ChunkedIndex(int64_t m, int64_t i, int64_t k, int64_t block, int64_t chunk) {
  return (((i / chunk) * (k / block) + m / block) * chunk + i % chunk) * block + m % block;
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

int64_t PointwiseWeightBlock(int64_t k) {
  for (int64_t b : {kPointwiseWeightBlock, int64_t{6}, int64_t{5}, int64_t{3}}) {
    if (k % b == 0) return b;
  }
  return 0;
}

int64_t PointwiseWeightChunk(int64_t c, int64_t k) {
  if (c <= 256 || k * 32 > kMaxConvPackFloats / 2) return c;
  for (int64_t l = 128; l >= 16; --l) {
    if (c % l == 0) return l;
  }
  return c;
}

Tensor BlockPointwiseWeights(const Tensor& w, int64_t block, int64_t chunk) {
  const int64_t k = w.dims()[0], c = w.dims()[1];
  std::vector<int64_t> dims = {c / chunk, k / block, chunk};
  dims.insert(dims.end(), w.dims().begin() + 2, w.dims().end());
  dims.push_back(block);
  Tensor wb(DType::kFloat32, dims);
  const float* src = w.data<float>();
  float* dst = wb.data<float>();
  for (int64_t m = 0; m < k; ++m) {
    for (int64_t i = 0; i < c; ++i) {
      dst[ChunkedIndex(m, i, k, block, chunk)] = src[m * c + i];
    }
  }
  return wb;
}

std::vector<int64_t> UnblockedWeightDims(const std::vector<int64_t>& wb, size_t x_rank) {
  if (x_rank < 3 || wb.size() < 4) return {};
  if (wb.size() == x_rank + 1) {
    std::vector<int64_t> w(wb.begin(), wb.end() - 1);
    w[0] = wb[0] * wb.back();
    return w;
  }
  if (!ChunkedWeights(wb.size(), x_rank)) return {};
  std::vector<int64_t> w = {wb[1] * wb.back(), wb[0] * wb[2]};
  w.insert(w.end(), wb.begin() + 3, wb.end() - 1);
  return w;
}

Tensor UnblockConvWeights(const Tensor& wb, size_t x_rank) {
  const int64_t block = wb.dims().back();
  const std::vector<int64_t> dims = UnblockedWeightDims(wb.dims(), x_rank);
  const int64_t k = dims[0], per = PerChannel(dims);
  Tensor w(DType::kFloat32, dims);
  const float* src = wb.data<float>();
  float* dst = w.data<float>();
  if (ChunkedWeights(wb.dims().size(), x_rank)) {  // [C/L, K/B, L, 1..., B]: one tap per channel
    const int64_t chunk = wb.dims()[2];
    for (int64_t m = 0; m < k; ++m) {
      for (int64_t i = 0; i < per; ++i) {
        dst[m * per + i] = src[ChunkedIndex(m, i, k, block, chunk)];
      }
    }
    return w;
  }
  for (int64_t m = 0; m < k; ++m) {
    for (int64_t i = 0; i < per; ++i) dst[m * per + i] = src[((m / block) * per + i) * block + m % block];
  }
  return w;
}

bool PrefersChannelVectors(int64_t reduction, int64_t oh, int64_t ow, int64_t lanes, bool blocked) {
  const int64_t whole = (ow + lanes - 1) / lanes * lanes;
  const bool map = blocked || (oh >= 4 && oh * ow >= 36);
  return reduction > 32 && map && static_cast<double>(ow) < 0.9 * static_cast<double>(whole);
}

}  // namespace kiln::ops
