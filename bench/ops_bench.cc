// Operators beyond GEMM: Kiln against oneDNN (convolutions, softmax, layer
// norm) and against this machine's triad bandwidth (a fused elementwise chain),
// at 1 and at 2 threads, in one run. Kiln's schedule is the best of its space
// searched by measurement (every point when the space has at most
// kMaxSearched points, else a seeded random sample of that many plus the
// default); a case whose workload Kiln's back end does not compile prints n/a.
//
//   OMP_WAIT_POLICY=passive build/bench/kiln_bench_ops [--quick] [--repeat N]
//       [--only WORD[,WORD...]] [--threads N] [--cpu-time] [--each] [--dump-ir DIR]
//
// --only: just the cases whose name contains one of the words (e.g.
// "softmax,layernorm"); --threads N: that thread count only, not 1 then 2;
// --cpu-time: process CPU time (threads summed) instead of wall time, to
// compare code at one thread on a loaded machine; --each: every point of
// the space measured and printed (to see what a default misses); --dump-ir DIR: each case's
// best kernel's optimized LLVM IR to DIR/<case>_t<threads>.ll.
//
// (passive: on a shared machine, spinning OpenMP workers that lose their core
// otherwise leave oneDNN at 2 threads with multi-millisecond stalls.)
//
// Kiln splits a kernel's tasks over the runtime's ThreadPool; oneDNN (OpenMP
// runtime) gets omp_set_num_threads before its primitives are created and
// timed. Convolutions are NCHW fp32 for both: oneDNN's src/dst are plain nchw
// (its weights may take the layout it prefers, reordered once, untimed); the
// "blocked" column is oneDNN with every layout its own choice, for context.
// ratio = Kiln speed / peer speed (> 1: Kiln is faster). %triad = bytes that
// must move (inputs read once, outputs written once) / time, over the triad
// bandwidth measured at the same thread count on 16M-float arrays (in DRAM;
// data that fits in cache can exceed 100%).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/timing.h"
#include "client/runtime/thread_pool.h"
#include "compiler_core/codegen/jit.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/codegen/target.h"
#include "compiler_core/ir/graph.h"

#ifdef KILN_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif


namespace {

using kiln::DType;
using kiln::Graph;
using kiln::TensorType;
using kiln::Value;

constexpr size_t kMaxSearched = 24;

// --cpu-time: time is this process's CPU time (all threads summed) instead of
// wall time; on a loaded machine it leaves out the time other processes had
// the cores, so single-thread numbers stay comparable between runs.
bool g_cpu_time = false;
bool g_each = false;

// Median seconds per call (bench/timing.h), two warm-ups, in CPU time with --cpu-time.
double MedianSeconds(const std::function<void()>& fn, int repeats, double min_s = 0.02) {
  return kiln::bench::MedianSeconds(fn, repeats, {.warmups = 2, .min_seconds = min_s, .cpu_time = g_cpu_time});
}

std::vector<float> Random(int64_t n, uint32_t seed, float lo = -1, float hi = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

TensorType F32(const std::vector<int64_t>& dims) { return TensorType::Static(DType::kFloat32, dims); }

// ---- workloads -------------------------------------------------------------

struct ConvCase {
  const char* name;
  int64_t n, c, h, w, k, kh, kw, stride, pad, group;
  int64_t pad_w = -1;  // the width's padding when it differs from pad
  int64_t PadW() const { return pad_w < 0 ? pad : pad_w; }
  int64_t OutH() const { return (h + 2 * pad - kh) / stride + 1; }
  int64_t OutW() const { return (w + 2 * PadW() - kw) / stride + 1; }
};

// Conv(x, w, bias) as a one-node workload: inputs x, w, bias; output y.
std::unique_ptr<Graph> ConvWorkload(const ConvCase& c) {
  auto g = std::make_unique<Graph>();
  g->set_opset_version(17);
  Value* x = *g->AddInput("in0", F32({c.n, c.c, c.h, c.w}));
  Value* w = *g->AddInput("in1", F32({c.k, c.c / c.group, c.kh, c.kw}));
  Value* b = *g->AddInput("in2", F32({c.k}));
  Value* y = *g->AddValue("out0", F32({c.n, c.k, c.OutH(), c.OutW()}));
  (void)*g->AddNode("Conv", "n0", {x, w, b}, {y},
                    {{"kernel_shape", std::vector<int64_t>{c.kh, c.kw}},
                     {"strides", std::vector<int64_t>{c.stride, c.stride}},
                     {"pads", std::vector<int64_t>{c.pad, c.PadW(), c.pad, c.PadW()}},
                     {"dilations", std::vector<int64_t>{1, 1}},
                     {"group", c.group}});
  g->AddOutput(y);
  return g;
}

// y = HardSwish(x * a + b) + r with scalar a, b (broadcast [1]).
std::unique_ptr<Graph> ChainWorkload(int64_t n) {
  auto g = std::make_unique<Graph>();
  g->set_opset_version(17);
  Value* x = *g->AddInput("in0", F32({n}));
  Value* a = *g->AddInput("in1", F32({1}));
  Value* b = *g->AddInput("in2", F32({1}));
  Value* r = *g->AddInput("in3", F32({n}));
  Value* t0 = *g->AddValue("t0", F32({n}));
  Value* t1 = *g->AddValue("t1", F32({n}));
  Value* t2 = *g->AddValue("t2", F32({n}));
  Value* y = *g->AddValue("out0", F32({n}));
  (void)*g->AddNode("Mul", "n0", {x, a}, {t0});
  (void)*g->AddNode("Add", "n1", {t0, b}, {t1});
  (void)*g->AddNode("HardSwish", "n2", {t1}, {t2});
  (void)*g->AddNode("Add", "n3", {t2, r}, {y});
  g->AddOutput(y);
  return g;
}

std::unique_ptr<Graph> SoftmaxWorkload(int64_t rows, int64_t cols) {
  auto g = std::make_unique<Graph>();
  g->set_opset_version(17);
  Value* x = *g->AddInput("in0", F32({rows, cols}));
  Value* y = *g->AddValue("out0", F32({rows, cols}));
  (void)*g->AddNode("Softmax", "n0", {x}, {y}, {{"axis", int64_t{-1}}});
  g->AddOutput(y);
  return g;
}

std::unique_ptr<Graph> LayerNormWorkload(int64_t rows, int64_t cols, float eps) {
  auto g = std::make_unique<Graph>();
  g->set_opset_version(17);
  Value* x = *g->AddInput("in0", F32({rows, cols}));
  Value* s = *g->AddInput("in1", F32({cols}));
  Value* b = *g->AddInput("in2", F32({cols}));
  Value* y = *g->AddValue("out0", F32({rows, cols}));
  (void)*g->AddNode("LayerNormalization", "n0", {x, s, b}, {y},
                    {{"axis", int64_t{-1}}, {"epsilon", eps}});
  g->AddOutput(y);
  return g;
}

// ---- Kiln side ---------------------------------------------------------------

struct KilnResult {
  bool ok = false;
  double seconds = 0;
  double default_seconds = 0;  // the default (untuned) schedule
  std::string config;
  size_t searched = 0, space = 0;
  std::string why;  // when !ok
  std::string llvm_ir;  // the best kernel's optimized LLVM IR
};

// Searches the workload's schedule space at `pool`'s thread count; leaves the
// best kernel's outputs in `args`' output buffers.
KilnResult TuneKiln(const Graph& g, const std::vector<void*>& args, kiln::runtime::ThreadPool& pool,
                    const kiln::CpuTarget& target, int repeats, bool quick) {
  KilnResult res;
  if (!kiln::CanCompile(g)) {
    res.why = "n/a (" + kiln::WorkloadKind(g) + ")";
    return res;
  }
  std::vector<kiln::ScheduleConfig> space = kiln::EnumerateSchedules(g, target);
  res.space = space.size();
  std::vector<kiln::ScheduleConfig> candidates = space;
  size_t limit = g_each ? space.size() : quick ? 8 : kMaxSearched;
  if (candidates.size() > limit) {
    std::mt19937 rng(7);
    std::shuffle(candidates.begin(), candidates.end(), rng);
    candidates.resize(limit);
    kiln::ScheduleConfig def = kiln::DefaultSchedule(g, target);
    if (std::find(candidates.begin(), candidates.end(), def) == candidates.end()) candidates.push_back(def);
  }
  std::unique_ptr<kiln::JitKernel> best;
  double best_s = 1e30;
  for (const kiln::ScheduleConfig& config : candidates) {
    auto kernel = kiln::JitCompile(g, config, target);
    if (!kernel.ok()) {
      res.why = kernel.status().ToString();
      continue;
    }
    ++res.searched;
    const kiln::JitKernel& k = **kernel;
    double s = MedianSeconds(
        [&] { pool.ParallelFor(k.num_tasks(), [&](int64_t b, int64_t e) { k.Run(args.data(), b, e); }); }, 3,
        0.01);
    if (g_each) std::printf("  %-40s %9.3f ms\n", config.ToString().c_str(), s * 1e3);
    if (s < best_s) {
      best_s = s;
      best = std::move(*kernel);
      res.config = config.ToString();
      res.llvm_ir = best->llvm_ir();
    }
  }
  if (!best) return res;
  if (auto def = kiln::JitCompile(g, kiln::DefaultSchedule(g, target), target); def.ok()) {
    const kiln::JitKernel& d = **def;
    res.default_seconds = MedianSeconds(
        [&] { pool.ParallelFor(d.num_tasks(), [&](int64_t b, int64_t e) { d.Run(args.data(), b, e); }); }, repeats);
  }
  const kiln::JitKernel& k = *best;
  res.seconds = MedianSeconds(
      [&] { pool.ParallelFor(k.num_tasks(), [&](int64_t b, int64_t e) { k.Run(args.data(), b, e); }); }, repeats);
  res.ok = true;
  return res;
}

// ---- peers -----------------------------------------------------------------

// STREAM triad a = b + s * c over n floats at `threads` OpenMP threads, bytes/s
// counting 3 * n * 4 bytes per pass.
double TriadBytesPerSecond(int64_t n, int threads, int repeats) {
  std::vector<float> a(n), b = Random(n, 11), c = Random(n, 12);
  const float s = 0.5f;
  float* pa = a.data();
  const float* pb = b.data();
  const float* pc = c.data();
  double t = MedianSeconds(
      [&] {
#pragma omp parallel for simd num_threads(threads) schedule(static)
        for (int64_t i = 0; i < n; ++i) pa[i] = pb[i] + s * pc[i];
      },
      repeats);
  return 3.0 * n * sizeof(float) / t;
}

#ifdef KILN_HAVE_DNNL
using dnnl::memory;

// oneDNN convolution (bias, no post-ops); `plain` forces nchw src/dst, else
// every layout is oneDNN's choice (inputs reordered once, untimed). Writes
// y in nchw.
double OneDnnConv(const ConvCase& c, const std::vector<float>& x, const std::vector<float>& w,
                  const std::vector<float>& bias, std::vector<float>& y, bool plain, int repeats) {
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  memory::dims src_dims = {c.n, c.c, c.h, c.w};
  memory::dims dst_dims = {c.n, c.k, c.OutH(), c.OutW()};
  memory::dims wei_dims = c.group == 1 ? memory::dims{c.k, c.c, c.kh, c.kw}
                                       : memory::dims{c.group, c.k / c.group, c.c / c.group, c.kh, c.kw};
  auto wei_tag = c.group == 1 ? memory::format_tag::oihw : memory::format_tag::goihw;
  auto f32 = memory::data_type::f32;
  memory::desc user_src(src_dims, f32, memory::format_tag::nchw);
  memory::desc user_dst(dst_dims, f32, memory::format_tag::nchw);
  memory::desc user_wei(wei_dims, f32, wei_tag);
  memory::desc bias_md({c.k}, f32, memory::format_tag::x);
  memory::desc src_md = plain ? user_src : memory::desc(src_dims, f32, memory::format_tag::any);
  memory::desc dst_md = plain ? user_dst : memory::desc(dst_dims, f32, memory::format_tag::any);
  memory::desc wei_md(wei_dims, f32, memory::format_tag::any);
  dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                       src_md, wei_md, bias_md, dst_md, {c.stride, c.stride},
                                       {c.pad, c.PadW()}, {c.pad, c.PadW()});
  dnnl::convolution_forward::primitive_desc pd(desc, eng);
  memory user_src_m(user_src, eng, const_cast<float*>(x.data()));
  memory user_wei_m(user_wei, eng, const_cast<float*>(w.data()));
  memory user_dst_m(user_dst, eng, y.data());
  memory bias_m(bias_md, eng, const_cast<float*>(bias.data()));
  auto prepared = [&](const memory::desc& want, memory& user) {
    if (want == user.get_desc()) return user;
    memory m(want, eng);
    dnnl::reorder(user, m).execute(strm, user, m);
    return m;
  };
  memory src_m = prepared(pd.src_desc(), user_src_m);
  memory wei_m = prepared(pd.weights_desc(), user_wei_m);
  memory dst_m = pd.dst_desc() == user_dst ? user_dst_m : memory(pd.dst_desc(), eng);
  strm.wait();
  dnnl::convolution_forward conv(pd);
  double s = MedianSeconds(
      [&] {
        conv.execute(strm, {{DNNL_ARG_SRC, src_m},
                            {DNNL_ARG_WEIGHTS, wei_m},
                            {DNNL_ARG_BIAS, bias_m},
                            {DNNL_ARG_DST, dst_m}});
        strm.wait();
      },
      repeats);
  if (dst_m.get_desc() != user_dst) {
    dnnl::reorder(dst_m, user_dst_m).execute(strm, dst_m, user_dst_m);
    strm.wait();
  }
  return s;
}

double OneDnnSoftmax(int64_t rows, int64_t cols, const std::vector<float>& x, std::vector<float>& y,
                     int repeats) {
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  memory::desc md({rows, cols}, memory::data_type::f32, memory::format_tag::nc);
  dnnl::softmax_forward::desc desc(dnnl::prop_kind::forward_inference, md, 1);
  dnnl::softmax_forward::primitive_desc pd(desc, eng);
  memory src(md, eng, const_cast<float*>(x.data())), dst(md, eng, y.data());
  dnnl::softmax_forward prim(pd);
  return MedianSeconds(
      [&] {
        prim.execute(strm, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
        strm.wait();
      },
      repeats);
}

double OneDnnLayerNorm(int64_t rows, int64_t cols, float eps, const std::vector<float>& x,
                       const std::vector<float>& scale, const std::vector<float>& shift, std::vector<float>& y,
                       int repeats) {
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  memory::desc md({rows, cols}, memory::data_type::f32, memory::format_tag::nc);
  memory::desc cmd({cols}, memory::data_type::f32, memory::format_tag::x);
  dnnl::layer_normalization_forward::desc desc(
      dnnl::prop_kind::forward_inference, md, eps,
      dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift);
  dnnl::layer_normalization_forward::primitive_desc pd(desc, eng);
  memory src(md, eng, const_cast<float*>(x.data())), dst(md, eng, y.data());
  memory sc(cmd, eng, const_cast<float*>(scale.data())), sh(cmd, eng, const_cast<float*>(shift.data()));
  dnnl::layer_normalization_forward prim(pd);
  return MedianSeconds(
      [&] {
        prim.execute(strm, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}, {DNNL_ARG_SCALE, sc}, {DNNL_ARG_SHIFT, sh}});
        strm.wait();
      },
      repeats);
}
#endif  // KILN_HAVE_DNNL

// Largest |a - b| / (1 + |b|).
double MaxRelDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    m = std::max(m, std::fabs(double(a[i]) - b[i]) / (1.0 + std::fabs(double(b[i]))));
  }
  return m;
}

// ---- table -------------------------------------------------------------------

struct Row {
  std::string name;
  int threads = 1;
  KilnResult kiln;
  double peer_s = 0;         // 0: no peer number
  const char* peer_name = "";
  double extra_s = 0;        // oneDNN blocked layouts (convs)
  double bytes = 0;          // bytes that must move
  double triad_bps = 0;
  double err = -1;           // max rel diff Kiln vs peer, -1 unknown
};

std::string Ms(double s) {
  if (s <= 0) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f", s * 1e3);
  return buf;
}

void PrintHeader() {
  std::printf("%-30s %3s %10s %10s %10s %10s %7s %9s %7s %9s %6s  %s\n", "case", "thr", "kiln ms", "default ms", "peer ms",
              "blocked ms", "ratio", "kiln GB/s", "%triad", "err", "tried", "best config (peer)");
}

void PrintRow(const Row& r) {
  std::string ratio = "n/a", gbs = "n/a", triad = "n/a", err = "-";
  char buf[64];
  if (r.kiln.ok && r.peer_s > 0) {
    std::snprintf(buf, sizeof(buf), "%.2f", r.peer_s / r.kiln.seconds);
    ratio = buf;
  }
  if (r.kiln.ok && r.bytes > 0) {
    std::snprintf(buf, sizeof(buf), "%.1f", r.bytes / r.kiln.seconds / 1e9);
    gbs = buf;
    std::snprintf(buf, sizeof(buf), "%.0f%%", 100.0 * r.bytes / r.kiln.seconds / r.triad_bps);
    triad = buf;
  }
  if (r.err >= 0) {
    std::snprintf(buf, sizeof(buf), "%.1e", r.err);
    err = buf;
  }
  std::string tried = r.kiln.ok ? std::to_string(r.kiln.searched) + "/" + std::to_string(r.kiln.space) : "-";
  std::string cfg = r.kiln.ok ? r.kiln.config : r.kiln.why;
  std::printf("%-30s %3d %10s %10s %10s %10s %7s %9s %7s %9s %6s  %s (%s)\n", r.name.c_str(), r.threads,
              Ms(r.kiln.ok ? r.kiln.seconds : 0).c_str(), Ms(r.kiln.ok ? r.kiln.default_seconds : 0).c_str(),
              Ms(r.peer_s).c_str(), Ms(r.extra_s).c_str(),
              ratio.c_str(), gbs.c_str(), triad.c_str(), err.c_str(), tried.c_str(), cfg.c_str(), r.peer_name);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  int repeats = 7;
  std::vector<std::string> only;
  std::string dump_dir;
  std::vector<int> thread_counts = {1, 2};
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
      repeats = 3;
    } else if (std::strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) {
      repeats = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--cpu-time") == 0) {
      g_cpu_time = true;
    } else if (std::strcmp(argv[i], "--each") == 0) {
      g_each = true;
    } else if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      thread_counts = {std::max(1, std::atoi(argv[++i]))};
    } else if (std::strcmp(argv[i], "--dump-ir") == 0 && i + 1 < argc) {
      dump_dir = argv[++i];
    } else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
      std::string list = argv[++i];
      for (size_t start = 0; start <= list.size();) {
        size_t end = list.find(',', start);
        if (end == std::string::npos) end = list.size();
        if (end > start) only.push_back(list.substr(start, end - start));
        start = end + 1;
      }
    } else {
      std::fprintf(stderr, "usage: %s [--quick] [--repeat N] [--only WORD[,WORD...]] [--threads N] [--cpu-time] [--each] [--dump-ir DIR]\n", argv[0]);
      return 2;
    }
  }
  kiln::CpuTarget target = kiln::CpuTarget::Host();
  std::printf("target %s (%s), %d hardware threads, %d timed samples per case (median)\n",
              target.Key().c_str(), target.cpu.c_str(), omp_get_num_procs(), repeats);
#ifndef KILN_HAVE_DNNL
  std::printf("built without oneDNN: peer columns are n/a\n");
#endif
  const int64_t kChain = quick ? (int64_t{1} << 22) : (int64_t{1} << 24);
  const int64_t kRows = 512, kCols = 768;
  const float kEps = 1e-5f;
  std::vector<ConvCase> convs = {
      {"conv 3x224x224->32 3x3 s2", 1, 3, 224, 224, 32, 3, 3, 2, 1, 1},
      {"conv 64x56x56->64 3x3 p1", 1, 64, 56, 56, 64, 3, 3, 1, 1, 1},
      // Inception-v3: a strided 3x3 on 35x35 and the factorised 7x1 on 17x17.
      {"conv 288x35x35->384 3x3 s2", 1, 288, 35, 35, 384, 3, 3, 2, 0, 1},
      // HRNet's stride-2 3x3 transitions (channels in the vector lanes).
      {"conv 128x56x56->256 3x3 s2", 1, 128, 56, 56, 256, 3, 3, 2, 1, 1},
      {"conv 160x17x17->192 7x1 p3", 1, 160, 17, 17, 192, 7, 1, 1, 3, 1, 0},
      {"conv 160x17x17->192 1x7 p3", 1, 160, 17, 17, 192, 1, 7, 1, 0, 1, 3},
      // CRNN's last conv: a long reduction (512 channels x 4 taps) on one row.
      {"conv 512x2x34->512 2x2", 1, 512, 2, 34, 512, 2, 2, 1, 0, 1},
      {"dwconv 128x28x28 3x3 p1", 1, 128, 28, 28, 128, 3, 3, 1, 1, 128},
      // MobileNetV2 / EfficientNet-B0 depthwise layers.
      {"dwconv 32x112x112 3x3 p1", 1, 32, 112, 112, 32, 3, 3, 1, 1, 32},
      {"dwconv 96x112x112 3x3 s2", 1, 96, 112, 112, 96, 3, 3, 2, 1, 96},
      {"dwconv 144x56x56 3x3 p1", 1, 144, 56, 56, 144, 3, 3, 1, 1, 144},
      {"dwconv 480x14x14 5x5 p2", 1, 480, 14, 14, 480, 5, 5, 1, 2, 480},
      {"dwconv 960x7x7 3x3 p1", 1, 960, 7, 7, 960, 3, 3, 1, 1, 960},
      {"pwconv 128x28x28->256 1x1", 1, 128, 28, 28, 256, 1, 1, 1, 0, 1},
      // MobileNetV2's late pointwise layers: few pixels per channel.
      {"pwconv 96x14x14->576 1x1", 1, 96, 14, 14, 576, 1, 1, 1, 0, 1},
      {"pwconv 960x7x7->160 1x1", 1, 960, 7, 7, 160, 1, 1, 1, 0, 1},
      // Keras MobileNetV2 at 160x160: the last layers run on 5x5 maps.
      {"pwconv 240x5x5->1280 1x1", 1, 240, 5, 5, 1280, 1, 1, 1, 0, 1},
      {"pwconv 720x5x5->240 1x1", 1, 720, 5, 5, 240, 1, 1, 1, 0, 1},
      // Xception's middle flow: 728 channels on 19x19 maps (10x10 in the
      // keras export); ResNet-50 stage 3 bottleneck 1x1s.
      {"pwconv 728x19x19->728 1x1", 1, 728, 19, 19, 728, 1, 1, 1, 0, 1},
      {"pwconv 728x10x10->728 1x1", 1, 728, 10, 10, 728, 1, 1, 1, 0, 1},
      {"pwconv 256x14x14->1024 1x1", 1, 256, 14, 14, 1024, 1, 1, 1, 0, 1},
      {"pwconv 1024x14x14->256 1x1", 1, 1024, 14, 14, 256, 1, 1, 1, 0, 1},
  };

  auto selected = [&](const std::string& name) {
    if (only.empty()) return true;
    for (const std::string& w : only) {
      if (name.find(w) != std::string::npos) return true;
    }
    return false;
  };

  std::vector<Row> rows;
  auto record = [&](const Row& r) {
    PrintRow(r);
    rows.push_back(r);
    if (dump_dir.empty() || r.kiln.llvm_ir.empty()) return;
    std::string file = r.name;
    for (char& ch : file) {
      if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    }
    file = dump_dir + "/" + file + "_t" + std::to_string(r.threads) + ".ll";
    if (FILE* f = std::fopen(file.c_str(), "w")) {
      std::fputs(r.kiln.llvm_ir.c_str(), f);
      std::fclose(f);
    }
  };
  for (int threads : thread_counts) {
    kiln::runtime::ThreadPool pool(threads);
    omp_set_num_threads(threads);
    double triad = TriadBytesPerSecond(kChain, threads, repeats);
    std::printf("triad (%ld floats, %d thread%s): %.1f GB/s\n", static_cast<long>(kChain), threads,
                threads > 1 ? "s" : "", triad / 1e9);
    PrintHeader();
    std::fflush(stdout);

    for (const ConvCase& c : convs) {
      if (!selected(c.name)) continue;
      Row r;
      r.name = c.name;
      r.threads = threads;
      r.triad_bps = triad;
      r.peer_name = "oneDNN nchw";
      std::vector<float> x = Random(c.n * c.c * c.h * c.w, 1);
      std::vector<float> w = Random(c.k * (c.c / c.group) * c.kh * c.kw, 2, -0.2f, 0.2f);
      std::vector<float> bias = Random(c.k, 3);
      int64_t out_n = c.n * c.k * c.OutH() * c.OutW();
      std::vector<float> y_kiln(out_n), y_peer(out_n), y_blocked(out_n);
      auto g = ConvWorkload(c);
      r.kiln = TuneKiln(*g, {x.data(), w.data(), bias.data(), y_kiln.data()}, pool, target, repeats, quick);
#ifdef KILN_HAVE_DNNL
      r.peer_s = OneDnnConv(c, x, w, bias, y_peer, /*plain=*/true, repeats);
      r.extra_s = OneDnnConv(c, x, w, bias, y_blocked, /*plain=*/false, repeats);
      if (r.kiln.ok) r.err = MaxRelDiff(y_kiln, y_peer);
#endif
      record(r);
    }

    if (selected("hardswish")) {  // Fused elementwise chain vs triad.
      Row r;
      r.name = "hardswish(x*a+b)+r 16M";
      if (quick) r.name = "hardswish(x*a+b)+r 4M";
      r.threads = threads;
      r.triad_bps = triad;
      r.peer_name = "triad-equivalent time";
      std::vector<float> x = Random(kChain, 4, -5, 5), res = Random(kChain, 5), y(kChain);
      std::vector<float> a = {1.5f}, b = {0.25f};
      auto g = ChainWorkload(kChain);
      r.kiln = TuneKiln(*g, {x.data(), a.data(), b.data(), res.data(), y.data()}, pool, target, repeats, quick);
      r.bytes = 3.0 * kChain * sizeof(float);
      r.peer_s = r.bytes / triad;
      if (r.kiln.ok) {
        std::vector<float> want(kChain);
        for (int64_t i = 0; i < kChain; ++i) {
          float t = x[i] * a[0] + b[0];
          want[i] = t * std::max(0.0f, std::min(1.0f, t / 6.0f + 0.5f)) + res[i];
        }
        r.err = MaxRelDiff(y, want);
      }
      record(r);
    }

    if (selected("softmax")) {  // Softmax over the last axis.
      Row r;
      r.name = "softmax 512x768";
      r.threads = threads;
      r.triad_bps = triad;
      r.peer_name = "oneDNN softmax";
      std::vector<float> x = Random(kRows * kCols, 6, -4, 4), y_kiln(kRows * kCols), y_peer(kRows * kCols);
      auto g = SoftmaxWorkload(kRows, kCols);
      r.kiln = TuneKiln(*g, {x.data(), y_kiln.data()}, pool, target, repeats, quick);
      r.bytes = 2.0 * kRows * kCols * sizeof(float);
#ifdef KILN_HAVE_DNNL
      r.peer_s = OneDnnSoftmax(kRows, kCols, x, y_peer, repeats);
      if (r.kiln.ok) r.err = MaxRelDiff(y_kiln, y_peer);
#endif
      record(r);
    }

    if (selected("layernorm")) {  // Layer normalization over the last axis, with scale and shift.
      Row r;
      r.name = "layernorm 512x768";
      r.threads = threads;
      r.triad_bps = triad;
      r.peer_name = "oneDNN layer_normalization";
      std::vector<float> x = Random(kRows * kCols, 8, -3, 3), scale = Random(kCols, 9), shift = Random(kCols, 10);
      std::vector<float> y_kiln(kRows * kCols), y_peer(kRows * kCols);
      auto g = LayerNormWorkload(kRows, kCols, kEps);
      r.kiln = TuneKiln(*g, {x.data(), scale.data(), shift.data(), y_kiln.data()}, pool, target, repeats, quick);
      r.bytes = (2.0 * kRows * kCols + 2.0 * kCols) * sizeof(float);
#ifdef KILN_HAVE_DNNL
      r.peer_s = OneDnnLayerNorm(kRows, kCols, kEps, x, scale, shift, y_peer, repeats);
      if (r.kiln.ok) r.err = MaxRelDiff(y_kiln, y_peer);
#endif
      record(r);
    }
  }

  std::printf("\nsummary (ratio = Kiln speed / peer speed; chain: peer = triad)\n");
  PrintHeader();
  for (const Row& r : rows) PrintRow(r);
  return 0;
}
