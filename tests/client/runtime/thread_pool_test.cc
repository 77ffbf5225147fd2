// ThreadPool: every index exactly once, contiguous ranges, concurrent and nested use.
#include "client/runtime/thread_pool.h"

#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

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

}  // namespace
}  // namespace kiln::runtime
