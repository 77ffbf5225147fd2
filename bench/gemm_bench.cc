// GEMM: Kiln's best schedule, found by measuring every point of the schedule
// space, against oneDNN's sgemm on the same machine in the same run (1 thread).
// Each case has a second row with a bias + ReLU epilogue: Kiln's fused kernel
// against oneDNN's sgemm followed by a separate bias + ReLU loop. Prints a
// table of GFLOP/s (2*M*N*K per run) and the ratio Kiln / oneDNN.
//
//   build/bench/kiln_bench_gemm [--quick]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "compiler_core/graph.h"
#include "compiler_core/jit.h"
#include "compiler_core/schedule_space.h"
#include "compiler_core/target.h"

#ifdef KILN_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

namespace {

using kiln::DType;
using kiln::Graph;
using kiln::TensorType;

// Median of `repeats` timed calls after two warm-ups, in seconds; each timed
// call repeats `fn` until it has run for at least 20 ms.
double MedianSeconds(const std::function<void()>& fn, int repeats = 7) {
  fn();
  fn();
  std::vector<double> samples;
  for (int r = 0; r < repeats; ++r) {
    int iters = 0;
    auto start = std::chrono::steady_clock::now();
    double elapsed = 0;
    do {
      fn();
      ++iters;
      elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    } while (elapsed < 0.02);
    samples.push_back(elapsed / iters);
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

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

}  // namespace

int main(int argc, char** argv) {
  bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  std::vector<Case> cases = {{256, 256, 256}, {512, 512, 512}, {64, 768, 768}, {1, 1000, 1280}};
  if (!quick) cases.push_back({1024, 1024, 1024});
  kiln::CpuTarget target = kiln::CpuTarget::Host();
  std::printf("target %s (%s), 1 thread\n", target.Key().c_str(), target.cpu.c_str());
  std::printf("%-24s %10s %12s %12s %8s  %s\n", "case", "configs", "kiln GF/s", "onednn GF/s", "ratio",
              "best schedule");
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (const Case& c : cases) {
    std::vector<float> a(c.m * c.k), b(c.k * c.n), bias(c.n), y(c.m * c.n);
    for (float& v : a) v = dist(rng);
    for (float& v : b) v = dist(rng);
    for (float& v : bias) v = dist(rng);
    double flops = 2.0 * c.m * c.n * c.k;
    for (bool bias_relu : {false, true}) {
      auto g = MatMulWorkload(c.m, c.n, c.k, bias_relu);
      std::vector<kiln::ScheduleConfig> space = kiln::EnumerateSchedules(*g, target);
      double best = 1e30;
      std::string best_config;
      for (const auto& config : space) {
        auto kernel = kiln::JitCompile(*g, config, target);
        if (!kernel.ok()) continue;
        std::vector<void*> args = {a.data(), b.data()};
        if (bias_relu) args.push_back(bias.data());
        args.push_back(y.data());
        const kiln::JitKernel& k = **kernel;
        double s = MedianSeconds([&] { k.Run(args.data(), 0, k.num_tasks()); }, quick ? 3 : 5);
        if (s < best) {
          best = s;
          best_config = config.ToString();
        }
      }
      double peer = 0;
#ifdef KILN_HAVE_DNNL
      peer = MedianSeconds([&] {
        dnnl_sgemm('N', 'N', c.m, c.n, c.k, 1.0f, a.data(), c.k, b.data(), c.n, 0.0f, y.data(), c.n);
        if (bias_relu) {
          for (int64_t i = 0; i < c.m; ++i) {
            float* row = y.data() + i * c.n;
            for (int64_t j = 0; j < c.n; ++j) row[j] = std::max(row[j] + bias[j], 0.0f);
          }
        }
      });
#endif
      char name[48];
      std::snprintf(name, sizeof(name), "%ldx%ldx%ld%s", static_cast<long>(c.m), static_cast<long>(c.n),
                    static_cast<long>(c.k), bias_relu ? "+bias+relu" : "");
      double kiln_gf = flops / best / 1e9;
      double peer_gf = peer > 0 ? flops / peer / 1e9 : 0;
      std::printf("%-24s %10zu %12.1f %12.1f %8.2f  %s\n", name, space.size(), kiln_gf, peer_gf,
                  peer > 0 ? kiln_gf / peer_gf : 0.0, best_config.c_str());
      std::fflush(stdout);
    }
  }
  return 0;
}
