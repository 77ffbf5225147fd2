// The benchmarks' one timing protocol: warm-ups, then `repeats` samples, each
// running the call until a minimum time has passed; the median per call.
#pragma once

#include <time.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace kiln::bench {

struct TimingOptions {
  int warmups = 1;
  double min_seconds = 0.02;  // per sample
  // Process CPU time instead of wall time: on a loaded machine it leaves out
  // the time other processes had the cores (single-thread runs only).
  bool cpu_time = false;
};

inline double NowSeconds(bool cpu_time) {
  if (cpu_time) {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Median seconds per call of `fn`.
inline double MedianSeconds(const std::function<void()>& fn, int repeats, const TimingOptions& options = {}) {
  for (int i = 0; i < options.warmups; ++i) fn();
  std::vector<double> samples;
  for (int r = 0; r < repeats; ++r) {
    int iters = 0;
    const double start = NowSeconds(options.cpu_time);
    double elapsed = 0;
    do {
      fn();
      ++iters;
      elapsed = NowSeconds(options.cpu_time) - start;
    } while (elapsed < options.min_seconds);
    samples.push_back(elapsed / iters);
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

}  // namespace kiln::bench
