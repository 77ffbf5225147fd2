// Shared by the loop-IR lowering tests: building small workload graphs,
// random data, and a spread of schedule points to compile.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler_core/codegen/jit.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/codegen/target.h"
#include "compiler_core/frontend/interpreter.h"
#include "compiler_core/frontend/shape_inference.h"
#include "compiler_core/ir/graph.h"
#include "tests/compiler_core/codegen/codegen_testing.h"

namespace kiln::loop_ir_testing {

using Attrs = std::map<std::string, AttrValue>;
using Ints = std::vector<int64_t>;
using codegen_testing::RunTasksUnevenly;

using Builder = codegen_testing::GraphBuilder;

// Uniform floats in [lo, hi] from `seed`, and element counts.
inline constexpr auto& Random = codegen_testing::RandomData;
using codegen_testing::Product;
inline constexpr auto& Count = codegen_testing::Product;

// The host's ISA and vector units with an L2 of at most 1 MiB. The
// cache-dependent defaults some tests pin (weights past L2, packed panels of
// B, reduction chunks) were written for the 512 KiB and 1 MiB L2s of Zen 3-5;
// a 2 MiB L2 (Sapphire Rapids and later Xeons) moves them, as it should
// (CpuTarget::L2Bytes). Icelake-SP's CPU name (1 MiB, full-width FMA units,
// like every 2 MiB one) stands in for the host's; the features, and so the
// code the tests run, stay the host's.
inline CpuTarget HostWithL2AtMost1MiB() {
  CpuTarget t = CpuTarget::Host();
  if (t.L2Bytes() > (int64_t{1} << 20)) t.cpu = "icelake-server";
  return t;
}

// The default, the first and the last points of the space of `g` for
// `target` (a CpuTarget or a GpuTarget) and up to `count` more spread evenly
// over it, each once.
template <typename TargetT>
std::vector<ScheduleConfig> SpreadPoints(const Graph& g, const TargetT& target, size_t count) {
  std::vector<ScheduleConfig> space = EnumerateSchedules(g, target);
  std::vector<ScheduleConfig> out;
  auto add = [&](const ScheduleConfig& c) {
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  };
  if (space.empty()) return out;
  add(DefaultSchedule(g, target));
  add(space.front());
  add(space.back());
  for (size_t i = 1; i <= count; ++i) add(space[i * space.size() / (count + 1)]);
  return out;
}

// First, last, default and up to five evenly spread points of the space.
inline std::vector<ScheduleConfig> Points(const Graph& g, const CpuTarget& target) {
  return SpreadPoints(g, target, 5);
}

// A builder with explicit output shapes (no shape inference), for graphs
// whose intermediate types the test states itself.
struct TypedBuilder {
  std::unique_ptr<Graph> g = std::make_unique<Graph>();
  int count = 0;
  Value* In(const std::vector<int64_t>& d) {
    return *g->AddInput("x" + std::to_string(count++), TensorType::Static(DType::kFloat32, d));
  }
  Value* Op(const std::string& op, std::vector<Value*> ins, const std::vector<int64_t>& out,
            std::map<std::string, AttrValue> attrs = {}) {
    Value* y = *g->AddValue("v" + std::to_string(count++), TensorType::Static(DType::kFloat32, out));
    EXPECT_TRUE(g->AddNode(op, "n" + std::to_string(count++), ins, {y}, std::move(attrs)).ok());
    return y;
  }
};

// JIT-compiles `g` at each of `configs` and compares every output with the
// reference interpreter (rtol 1e-4, atol 1e-5). Inputs: in0 in [-1, 1], the
// rest in [-0.5, 0.5]; outputs start as NaN; tasks run in three uneven ranges.
inline void CheckConfigsAgainstInterpreter(const Graph& g, const std::vector<ScheduleConfig>& configs,
                                           const CpuTarget& target) {
  codegen_testing::CheckConfigsAgainstInterpreter(
      g, codegen_testing::RandomFeeds(g, 7, -0.5f, 0.5f, -1.0f, 1.0f), configs, target);
}

}  // namespace kiln::loop_ir_testing
