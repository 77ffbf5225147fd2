// ThreadPool: every index exactly once, contiguous ranges, concurrent and nested use.
#include "client/runtime/thread_pool.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "client/runtime/float_control.h"
#include "gtest/gtest.h"

namespace kiln::runtime {
namespace {

TEST(ThreadPoolTest, CoversEveryIndexExactlyOnce) {
  for (int threads = 1; threads <= 4; ++threads) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.num_threads(), threads);
    for (int64_t n : {0, 1, 7, 1000}) {
      for (int rep = 0; rep < 20; ++rep) {
        std::vector<std::atomic<int>> hits(n);
        std::atomic<int> calls{0};
        std::mutex mu;
        std::set<std::thread::id> ids;
        pool.ParallelFor(n, [&](int64_t begin, int64_t end) {
          ASSERT_LT(begin, end);
          ASSERT_GE(begin, 0);
          ASSERT_LE(end, n);
          ++calls;
          for (int64_t i = begin; i < end; ++i) ++hits[i];
          std::lock_guard<std::mutex> lock(mu);
          ids.insert(std::this_thread::get_id());
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
        EXPECT_LE(calls.load(), threads);
        EXPECT_EQ(calls.load(), n == 0 ? 0 : std::min<int64_t>(n, threads));
        if (threads == 1) EXPECT_TRUE(n == 0 || (ids.size() == 1 && *ids.begin() == std::this_thread::get_id()));
      }
    }
  }
}

TEST(ThreadPoolTest, DefaultSizeIsHardwareConcurrency) {
  ThreadPool pool(0);
  EXPECT_GE(pool.num_threads(), 1);
}

TEST(ThreadPoolTest, ConcurrentCallersAreSerialisedCorrectly) {
  ThreadPool pool(3);
  std::vector<std::thread> callers;
  std::atomic<int64_t> total{0};
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&] {
      for (int rep = 0; rep < 50; ++rep) {
        pool.ParallelFor(100, [&](int64_t b, int64_t e) { total += e - b; });
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(total.load(), 4 * 50 * 100);
}

TEST(ThreadPoolTest, NestedParallelForRunsInline) {
  ThreadPool pool(4);
  std::atomic<int64_t> total{0};
  pool.ParallelFor(8, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      pool.ParallelFor(10, [&](int64_t b2, int64_t e2) { total += e2 - b2; });
    }
  });
  EXPECT_EQ(total.load(), 80);
}

// Every range runs under the caller's floating-point control word, on the
// workers too, whichever word the caller has; the caller's stays as it was.
TEST(ThreadPoolTest, RangesRunUnderTheCallersFloatControl) {
  ThreadPool pool(3);
  const uint32_t original = FloatControl();
  for (bool flush : {true, false, true}) {
    const uint32_t word = WithDenormals(original, flush);
    const ScopedFloatControl scope(word);
    bool ran_on_a_worker = false;
    for (int attempt = 0; attempt < 50 && !ran_on_a_worker; ++attempt) {
      std::mutex mu;
      std::vector<std::pair<std::thread::id, uint32_t>> seen;
      pool.ParallelFor(3, [&](int64_t, int64_t) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));  // let the workers take ranges
        std::lock_guard<std::mutex> lock(mu);
        seen.emplace_back(std::this_thread::get_id(), FloatControl());
      });
      ASSERT_EQ(seen.size(), 3u);
      for (const auto& [id, control] : seen) {
        EXPECT_EQ(control, word) << "flush=" << flush;
        if (id != std::this_thread::get_id()) ran_on_a_worker = true;
      }
      EXPECT_EQ(FloatControl(), word);
    }
    EXPECT_TRUE(ran_on_a_worker) << "no range ran on a worker thread in 50 tries";
  }
  EXPECT_EQ(FloatControl(), original);
}

TEST(FloatControlTest, DenormalBits) {
  const uint32_t original = FloatControl();
  EXPECT_TRUE(FlushesDenormals(WithDenormals(original, true)));
  EXPECT_FALSE(FlushesDenormals(WithDenormals(original, false)));
  EXPECT_EQ(WithDenormals(WithDenormals(original, true), false), WithDenormals(original, false));
  {
    const ScopedFloatControl scope(WithDenormals(original, true));
    volatile float tiny = 0x1p-126f;  // the smallest normal float
    EXPECT_EQ(tiny * 0.5f, 0.0f) << "FTZ: a denormal result is flushed";
    volatile float denormal_bits = 0x1p-130f;  // a denormal literal, read as 0 under DAZ
    EXPECT_EQ(denormal_bits * 4.0f, 0.0f);
  }
  EXPECT_EQ(FloatControl(), original);
  {
    const ScopedFloatControl scope(WithDenormals(original, false));
    volatile float tiny = 0x1p-126f;
    EXPECT_EQ(tiny * 0.5f, 0x1p-127f) << "gradual underflow";
  }
  EXPECT_EQ(FloatControl(), original);
}

}  // namespace
}  // namespace kiln::runtime
