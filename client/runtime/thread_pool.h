// A fixed pool of worker threads that runs the tasks of one kernel step in parallel.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln::runtime {

// ParallelFor(n, fn) splits [0, n) into at most num_threads() contiguous,
// non-empty ranges, calls fn(begin, end) once per range, and returns when all
// are done. The calling thread runs ranges too, so a pool of 1 thread has no
// workers and runs everything on the caller. Calls from several threads are
// serialised; a ParallelFor called from inside fn runs inline on that thread.
// Every range runs under the caller's floating-point control word
// (float_control.h: rounding, denormal flushing), whichever thread runs it,
// so results do not depend on the thread count. Meant to be created once per
// process (sized by --threads) and shared.
class ThreadPool {
 public:
  // num_threads <= 0 means one per hardware thread.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void ParallelFor(int64_t n, const std::function<void(int64_t begin, int64_t end)>& fn);
  int num_threads() const { return num_threads_; }

 private:
  void WorkerLoop();
  // Runs chunks of the current job until none are left; returns how many it ran.
  int64_t RunChunks();

  int num_threads_;
  std::vector<std::thread> workers_;
  std::mutex call_mu_;  // one ParallelFor at a time

  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  bool stop_ = false;
  uint64_t generation_ = 0;
  // The current job (fn_ is null between jobs); guarded by mu_.
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t num_chunks_ = 0;
  int64_t next_chunk_ = 0;
  int64_t chunks_done_ = 0;
  uint32_t float_control_ = 0;  // the caller's control word (FloatControl())
  // Mirrors for the spin phase (kernels come back to back; waking a sleeping
  // thread costs tens of microseconds): the published generation and the
  // chunks not finished yet.
  std::atomic<uint64_t> spin_generation_{0};
  std::atomic<int64_t> spin_pending_{0};
  std::atomic<bool> spin_stop_{false};
};

}  // namespace kiln::runtime
