// ReferenceCache: computed once per key, least recently used out past its
// bytes, failures not kept; and a tuning job's candidates share one
// reference through SetUpMeasurement.
#include "worker/reference_cache.h"

#include <gtest/gtest.h>

#include "tests/worker/workload_protos.h"
#include "worker/measurer.h"

namespace kiln::worker {
namespace {

// A reference of one input of `floats` floats, all `value`, and no outputs.
Reference Filled(int64_t floats, float value) {
  Reference r;
  Tensor t(DType::kFloat32, {floats});
  for (int64_t i = 0; i < floats; ++i) t.data<float>()[i] = value;
  r.inputs.emplace("x", std::move(t));
  return r;
}

TEST(ReferenceCacheTest, ComputesEachKeyOnce) {
  ReferenceCache cache(1 << 20);
  int computed = 0;
  auto compute = [&]() -> absl::StatusOr<Reference> {
    ++computed;
    return Filled(4, 2.5f);
  };
  auto a = cache.GetOrCompute("w", compute);
  auto b = cache.GetOrCompute("w", compute);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(computed, 1);
  EXPECT_EQ(a->get(), b->get());
  EXPECT_EQ((*b)->inputs.at("x").data<float>()[3], 2.5f);
  EXPECT_EQ(cache.hits(), 1);
  EXPECT_EQ(cache.misses(), 1);
  EXPECT_EQ(cache.bytes(), 16);
}

TEST(ReferenceCacheTest, LeastRecentlyUsedLeavesFirstAndOversizedAreNotKept) {
  ReferenceCache cache(3 * 400);  // three references of 100 floats
  int computed = 0;
  auto of = [&](float v) {
    return [&computed, v]() -> absl::StatusOr<Reference> {
      ++computed;
      return Filled(100, v);
    };
  };
  for (const char* key : {"a", "b", "c"}) ASSERT_TRUE(cache.GetOrCompute(key, of(1)).ok());
  ASSERT_TRUE(cache.GetOrCompute("a", of(1)).ok());  // a is now the most recent
  ASSERT_TRUE(cache.GetOrCompute("d", of(1)).ok());  // b leaves
  EXPECT_EQ(computed, 4);
  ASSERT_TRUE(cache.GetOrCompute("a", of(1)).ok());
  ASSERT_TRUE(cache.GetOrCompute("c", of(1)).ok());
  EXPECT_EQ(computed, 4);
  ASSERT_TRUE(cache.GetOrCompute("b", of(1)).ok());
  EXPECT_EQ(computed, 5);
  EXPECT_EQ(cache.bytes(), 3 * 400);
  // Larger than the whole cache: handed out, not kept, nothing evicted.
  auto big = cache.GetOrCompute("big", [&]() -> absl::StatusOr<Reference> { return Filled(1000, 3); });
  ASSERT_TRUE(big.ok());
  EXPECT_EQ((*big)->inputs.at("x").num_elements(), 1000);
  EXPECT_EQ(cache.bytes(), 3 * 400);
  ASSERT_TRUE(cache.GetOrCompute("b", of(1)).ok());
  EXPECT_EQ(computed, 5);
}

TEST(ReferenceCacheTest, FailuresAreNotKept) {
  ReferenceCache cache(1 << 20);
  int calls = 0;
  auto failing = [&]() -> absl::StatusOr<Reference> {
    ++calls;
    return absl::InvalidArgumentError("reference interpreter failed");
  };
  EXPECT_EQ(cache.GetOrCompute("w", failing).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cache.GetOrCompute("w", failing).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(cache.bytes(), 0);
}

// Two candidates of one workload: the second set-up reuses the first's
// inputs and reference, each with its own copy to write.
TEST(ReferenceCacheTest, CandidatesOfAWorkloadShareItsReference) {
  const kiln::v1::MeasureTask first = testing::MakeTask("mm-a", testing::MatMulGraph(12, 20, 28), "");
  kiln::v1::MeasureTask second = first;
  second.set_task_id("mm-b");
  ReferenceCache& cache = ReferenceCache::Process();
  const int64_t hits = cache.hits(), misses = cache.misses();
  MeasureSetup a, b;
  ASSERT_TRUE(SetUpMeasurement(first, Target(CpuTarget::Host()), &a).ok());
  a.inputs.begin()->second.data<float>()[0] = 1e30f;  // a candidate that wrote its input
  ASSERT_TRUE(SetUpMeasurement(second, Target(CpuTarget::Host()), &b).ok());
  EXPECT_EQ(cache.misses(), misses + 1);
  EXPECT_EQ(cache.hits(), hits + 1);
  EXPECT_NE(b.inputs.begin()->second.data<float>()[0], 1e30f);
  ASSERT_EQ(b.reference->outputs.size(), 1u);
  EXPECT_EQ(b.reference->outputs[0].bytes(), a.reference->outputs[0].bytes());
  EXPECT_EQ(b.outputs[0].dims(), b.reference->outputs[0].dims());
  // Another workload key (another seed for the inputs) is another reference.
  kiln::v1::MeasureTask reseeded = first;
  reseeded.set_workload_key("another-key");
  MeasureSetup c;
  ASSERT_TRUE(SetUpMeasurement(reseeded, Target(CpuTarget::Host()), &c).ok());
  EXPECT_EQ(cache.misses(), misses + 2);
}

}  // namespace
}  // namespace kiln::worker
