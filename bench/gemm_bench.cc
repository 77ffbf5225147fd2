// GEMM: Kiln's best schedule (random sample of the schedule space, plus the
// default) against oneDNN on the same machine, in the same run, at 1 and 2
// threads. Each case has a second row with a bias + ReLU epilogue: Kiln's fused
// kernel against oneDNN's matmul primitive with a bias and an eltwise_relu
// post-op (the plain row uses dnnl_sgemm). Prints GFLOP/s (2*M*N*K per run)
// and the ratio Kiln / oneDNN.
//
//   build/bench/kiln_bench_gemm [--quick] [--samples N] [--only MxNxK]
//
// Kiln at 2 threads splits the kernel's tasks in two halves: the caller runs
// one, a helper thread that spin-waits for work (as OpenMP's threads do) the
// other; the "pool" column times the same best kernel through the runtime's
// ThreadPool (condition-variable wake-ups). oneDNN (OpenMP) gets
// omp_set_num_threads before each of its measurements.
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "bench/timing.h"
#include "client/runtime/thread_pool.h"
#include "compiler_core/codegen/jit.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/codegen/target.h"
#include "compiler_core/ir/graph.h"

#ifdef KILN_HAVE_OPENMP
#include <omp.h>
#endif
#ifdef KILN_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl.hpp>
#endif


namespace {

using kiln::DType;
using kiln::Graph;
using kiln::TensorType;

using kiln::bench::MedianSeconds;

// MatMul [m,k] x [k,n]; with `bias_relu`, Relu(MatMul + bias[n]) as one
// fused workload (inputs A, B, bias).
std::unique_ptr<Graph> MatMulWorkload(int64_t m, int64_t n, int64_t k, bool bias_relu) {
  auto g = std::make_unique<Graph>();
  auto* a = *g->AddInput("in0", TensorType::Static(DType::kFloat32, {m, k}));
  auto* b = *g->AddInput("in1", TensorType::Static(DType::kFloat32, {k, n}));
  if (!bias_relu) {
    auto* y = *g->AddValue("out0", TensorType::Static(DType::kFloat32, {m, n}));
    (void)*g->AddNode("MatMul", "n0", {a, b}, {y});
    g->AddOutput(y);
    return g;
  }
  auto* bias = *g->AddInput("in2", TensorType::Static(DType::kFloat32, {n}));
  auto* t0 = *g->AddValue("t0", TensorType::Static(DType::kFloat32, {m, n}));
  auto* t1 = *g->AddValue("t1", TensorType::Static(DType::kFloat32, {m, n}));
  auto* y = *g->AddValue("out0", TensorType::Static(DType::kFloat32, {m, n}));
  (void)*g->AddNode("MatMul", "n0", {a, b}, {t0});
  (void)*g->AddNode("Add", "n1", {t0, bias}, {t1});
  (void)*g->AddNode("Relu", "n2", {t1}, {y});
  g->AddOutput(y);
  return g;
}

struct Case {
  int64_t m, n, k;
};

void SetPeerThreads(int threads) {
#ifdef KILN_HAVE_OPENMP
  omp_set_num_threads(threads);
#else
  (void)threads;
#endif
}

// Two threads for the duration of a measurement: Run() gives the helper the
// second half of the tasks, runs the first half, and spins until both are done.
class SpinPair {
 public:
  SpinPair() : helper_([this] { Loop(); }) {}
  ~SpinPair() {
    stop_.store(true, std::memory_order_release);
    gen_.fetch_add(1, std::memory_order_acq_rel);
    helper_.join();
  }
  void Run(const kiln::JitKernel& k, void* const* args) {
    int64_t n = k.num_tasks(), half = (n + 1) / 2;
    kernel_ = &k;
    args_ = args;
    lo_ = half;
    hi_ = n;
    done_.store(false, std::memory_order_relaxed);
    gen_.fetch_add(1, std::memory_order_acq_rel);
    k.Run(args, 0, half);
    while (!done_.load(std::memory_order_acquire)) _mm_pause();
  }

 private:
  void Loop() {
    uint64_t seen = 0;
    for (;;) {
      uint64_t g;
      while ((g = gen_.load(std::memory_order_acquire)) == seen) _mm_pause();
      seen = g;
      if (stop_.load(std::memory_order_acquire)) return;
      kernel_->Run(args_, lo_, hi_);
      done_.store(true, std::memory_order_release);
    }
  }
  std::atomic<uint64_t> gen_{0};
  std::atomic<bool> done_{true};
  std::atomic<bool> stop_{false};
  const kiln::JitKernel* kernel_ = nullptr;
  void* const* args_ = nullptr;
  int64_t lo_ = 0, hi_ = 0;
  std::thread helper_;
};

#ifdef KILN_HAVE_DNNL
// oneDNN matmul primitive: dst = relu(src x weights + bias).
class DnnlFusedMatMul {
 public:
  DnnlFusedMatMul(const Case& c, float* a, float* b, float* bias, float* y)
      : engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    dnnl::memory::desc a_md({c.m, c.k}, dt::f32, tag::ab);
    dnnl::memory::desc b_md({c.k, c.n}, dt::f32, tag::ab);
    dnnl::memory::desc bias_md({1, c.n}, dt::f32, tag::ab);
    dnnl::memory::desc y_md({c.m, c.n}, dt::f32, tag::ab);
    dnnl::post_ops ops;
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(ops);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, bias_md, y_md), attr, engine_);
    prim_ = dnnl::matmul(pd);
    args_ = {{DNNL_ARG_SRC, dnnl::memory(a_md, engine_, a)},
             {DNNL_ARG_WEIGHTS, dnnl::memory(b_md, engine_, b)},
             {DNNL_ARG_BIAS, dnnl::memory(bias_md, engine_, bias)},
             {DNNL_ARG_DST, dnnl::memory(y_md, engine_, y)}};
  }
  void Run() {
    prim_.execute(stream_, args_);
    stream_.wait();
  }

 private:
  dnnl::engine engine_;
  dnnl::stream stream_;
  dnnl::matmul prim_;
  std::unordered_map<int, dnnl::memory> args_;
};
#endif

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  int samples = 24;
  std::string only;
  bool each = false;  // --each: every sampled schedule's GFLOP/s at 1 thread
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
      samples = 8;
    } else if (std::strcmp(argv[i], "--samples") == 0 && i + 1 < argc) {
      samples = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
      only = argv[++i];
    } else if (std::strcmp(argv[i], "--each") == 0) {
      each = true;
    } else {
      std::fprintf(stderr, "usage: %s [--quick] [--samples N] [--only MxNxK] [--each]\n", argv[0]);
      return 2;
    }
  }
  // The last three: one GEMM of a Winograd convolution (K x tiles x C) of
  // ResNet's 56x56x64 (F(4x4)), 14x14x256 (F(4x4)) and 7x7x512 (F(2x2)) layers.
  std::vector<Case> cases = {{256, 256, 256},   {512, 512, 512},   {1024, 1024, 1024}, {2048, 2048, 2048},
                             {64, 768, 768},    {512, 3072, 768},  {1, 1000, 1280},    {64, 196, 64},
                             {256, 16, 256},    {512, 16, 512}};
  if (!only.empty() && std::count(only.begin(), only.end(), 'x') == 2) {  // any MxNxK
    Case c;
    if (std::sscanf(only.c_str(), "%ldx%ldx%ld", &c.m, &c.n, &c.k) == 3 &&
        std::none_of(cases.begin(), cases.end(), [&](const Case& x) { return x.m == c.m && x.n == c.n && x.k == c.k; })) {
      cases.push_back(c);
    }
  }
  kiln::CpuTarget target = kiln::CpuTarget::Host();
  kiln::runtime::ThreadPool pool2(2);
  std::printf("target %s (%s); kiln: default + %d random schedules per case, 1 and 2 threads\n",
              target.Key().c_str(), target.cpu.c_str(), samples);
  std::printf("%-22s %3s %7s %10s %12s %7s %9s  %s\n", "case (MxNxK)", "thr", "points", "kiln GF/s",
              "onednn GF/s", "ratio", "pool GF/s", "best schedule");
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (const Case& c : cases) {
    char shape[48];
    std::snprintf(shape, sizeof(shape), "%ldx%ldx%ld", static_cast<long>(c.m), static_cast<long>(c.n),
                  static_cast<long>(c.k));
    if (!only.empty() && only != shape) continue;
    std::vector<float> a(c.m * c.k), b(c.k * c.n), bias(c.n), y(c.m * c.n);
    for (float& v : a) v = dist(rng);
    for (float& v : b) v = dist(rng);
    for (float& v : bias) v = dist(rng);
    double flops = 2.0 * c.m * c.n * c.k;
    int repeats = quick ? 3 : 5;
    for (bool bias_relu : {false, true}) {
      auto g = MatMulWorkload(c.m, c.n, c.k, bias_relu);
      std::vector<kiln::ScheduleConfig> space = kiln::EnumerateSchedules(*g, target);
      // The default first, then a random sample of the rest (the whole space when it is small).
      kiln::ScheduleConfig def = kiln::DefaultSchedule(*g, target);
      std::vector<kiln::ScheduleConfig> rest;
      for (const auto& s : space) {
        if (s != def) rest.push_back(s);
      }
      std::mt19937 pick(static_cast<uint32_t>(c.m * 131 + c.n * 17 + c.k + bias_relu));
      std::shuffle(rest.begin(), rest.end(), pick);
      std::vector<kiln::ScheduleConfig> trial = {def};
      for (size_t i = 0; i < rest.size() && static_cast<int>(trial.size()) <= samples; ++i) {
        trial.push_back(rest[i]);
      }
      std::vector<std::unique_ptr<kiln::JitKernel>> kernels;
      std::vector<std::string> names;
      for (const auto& config : trial) {
        auto kernel = kiln::JitCompile(*g, config, target);
        if (!kernel.ok()) {
          std::fprintf(stderr, "%s %s: %s\n", shape, config.ToString().c_str(),
                       std::string(kernel.status().message()).c_str());
          continue;
        }
        kernels.push_back(std::move(*kernel));
        names.push_back(config.ToString());
      }
      std::vector<void*> args = {a.data(), b.data()};
      if (bias_relu) args.push_back(bias.data());
      args.push_back(y.data());
#ifdef KILN_HAVE_DNNL
      std::unique_ptr<DnnlFusedMatMul> fused;
      if (bias_relu) fused = std::make_unique<DnnlFusedMatMul>(c, a.data(), b.data(), bias.data(), y.data());
#endif
      for (int threads : {1, 2}) {
        std::unique_ptr<SpinPair> pair;
        if (threads == 2) pair = std::make_unique<SpinPair>();
        auto run = [&](const kiln::JitKernel& k) {
          if (threads == 1) {
            k.Run(args.data(), 0, k.num_tasks());
          } else {
            pair->Run(k, args.data());
          }
        };
        double best = 1e30;
        size_t best_i = 0;
        for (size_t i = 0; i < kernels.size(); ++i) {
          double s = MedianSeconds([&] { run(*kernels[i]); }, quick ? 1 : 3);
          if (each && threads == 1) std::printf("  %-40s %8.1f GF/s\n", names[i].c_str(), flops / s / 1e9);
          if (s < best) {
            best = s;
            best_i = i;
          }
        }
        // The winner again, then the peer, with more repeats.
        best = MedianSeconds([&] { run(*kernels[best_i]); }, repeats);
        pair.reset();
        double pool = 0;
        if (threads == 2) {
          const kiln::JitKernel& k = *kernels[best_i];
          pool = MedianSeconds(
              [&] {
                pool2.ParallelFor(k.num_tasks(), [&](int64_t lo, int64_t hi) { k.Run(args.data(), lo, hi); });
              },
              repeats);
        }
        double peer = 0;
#ifdef KILN_HAVE_DNNL
        SetPeerThreads(threads);
        peer = MedianSeconds(
            [&] {
              if (bias_relu) {
                fused->Run();
              } else {
                dnnl_sgemm('N', 'N', c.m, c.n, c.k, 1.0f, a.data(), c.k, b.data(), c.n, 0.0f, y.data(), c.n);
              }
            },
            repeats);
#endif
        std::string name = std::string(shape) + (bias_relu ? "+bias+relu" : "");
        double kiln_gf = flops / best / 1e9;
        double peer_gf = peer > 0 ? flops / peer / 1e9 : 0;
        std::string pool_gf = pool > 0 ? std::to_string(static_cast<int>(flops / pool / 1e9 + 0.5)) : "-";
        std::printf("%-22s %3d %7zu %10.1f %12.1f %7.2f %9s  %s\n", name.c_str(), threads, space.size(), kiln_gf,
                    peer_gf, peer > 0 ? kiln_gf / peer_gf : 0.0, pool_gf.c_str(), names[best_i].c_str());
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
