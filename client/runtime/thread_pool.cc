// Worker threads plus the caller share the contiguous ranges of one ParallelFor.
#include "client/runtime/thread_pool.h"

#include <algorithm>
#include <chrono>

#include "client/runtime/float_control.h"

namespace kiln::runtime {
namespace {
thread_local bool t_inside_task = false;

// How long a thread spins before it sleeps on a condition variable.
constexpr std::chrono::microseconds kSpin(100);

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Spins until `done()` or kSpin has passed; true if done.
template <typename Done>
bool SpinUntil(Done done) {
  auto until = std::chrono::steady_clock::now() + kSpin;
  for (int i = 0;; ++i) {
    if (done()) return true;
    CpuRelax();
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > until) return done();
  }
}
}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  num_threads_ = num_threads;
  workers_.reserve(num_threads - 1);
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    spin_stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::WorkerLoop() {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    lock.unlock();
    SpinUntil([&] { return spin_stop_.load(std::memory_order_relaxed) ||
                           spin_generation_.load(std::memory_order_acquire) != seen; });
    lock.lock();
    work_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    lock.unlock();
    RunChunks();
    lock.lock();
  }
}

int64_t ThreadPool::RunChunks() {
  int64_t ran = 0;
  std::unique_lock<std::mutex> lock(mu_);
  while (fn_ != nullptr && next_chunk_ < num_chunks_) {
    const int64_t c = next_chunk_++;
    const auto* fn = fn_;
    const uint32_t control = float_control_;
    const int64_t base = n_ / num_chunks_, rem = n_ % num_chunks_;
    const int64_t begin = c * base + std::min(c, rem);
    const int64_t end = begin + base + (c < rem ? 1 : 0);
    lock.unlock();
    // Workers take the caller's word; on the caller this is the word it has.
    if (FloatControl() != control) SetFloatControl(control);
    t_inside_task = true;
    (*fn)(begin, end);
    t_inside_task = false;
    ++ran;
    lock.lock();
    spin_pending_.fetch_sub(1, std::memory_order_release);
    if (++chunks_done_ == num_chunks_) done_cv_.notify_all();
  }
  return ran;
}

void ThreadPool::ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (num_threads_ == 1 || n == 1 || t_inside_task) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    n_ = n;
    num_chunks_ = std::min<int64_t>(n, num_threads_);
    next_chunk_ = 0;
    chunks_done_ = 0;
    float_control_ = FloatControl();
    ++generation_;
    spin_pending_.store(num_chunks_, std::memory_order_relaxed);
    spin_generation_.store(generation_, std::memory_order_release);
  }
  work_cv_.notify_all();
  RunChunks();
  SpinUntil([&] { return spin_pending_.load(std::memory_order_acquire) == 0; });
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return chunks_done_ == num_chunks_; });
  fn_ = nullptr;
}

}  // namespace kiln::runtime
