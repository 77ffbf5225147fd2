// Cost-model features: one walk over the lowered loop IR, counting what each
// statement executes, weighted by the trip counts of its enclosing loops.
#include "compiler_core/codegen/loop_ir/features.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "compiler_core/codegen/loop_ir/gpu/lower.h"
#include "compiler_core/codegen/loop_ir/lower.h"
#include "compiler_core/codegen/schedule_space.h"

namespace kiln::loop_ir {
namespace {

// The lowering kinds (schedule_space.h's vocabulary), one-hot.
const std::vector<std::string>& Kinds() {
  static const std::vector<std::string> kKinds = {"matmul", "elementwise", "data_movement", "reduction",
                                                  "conv",   "conv_transpose", "pool",      "resize",
                                                  "topk",   "index",       "recurrence", "winograd_input",
                                                  "winograd_output", "conv_pair"};
  return kKinds;
}

// Every knob any lowering reads (lower_*.cc and gpu/lower_*.cc), one slot
// each, sorted.
const std::vector<std::string>& Knobs() {
  static const std::vector<std::string> kKnobs = {
      "bb", "bk",   "bm",  "bn", "bt", "cols", "cs", "dw", "ept", "gc", "gv",    "gw", "kb", "kc",   "ks",
      "ku", "kv",   "mc",  "mr", "nc", "nr",   "pu", "pw",  "rc", "rows",  "sk", "sort", "tasks", "tm",
      "tn", "tr",   "un",  "unroll", "ur", "vw"};
  return kKnobs;
}

// The loop IR part, in the order LoopFuncFeatures fills it.
const std::vector<std::string>& IrFeatureNames() {
  static const std::vector<std::string> kNames = {
      "ir.tasks",             // parallel loop extent
      "ir.flops",             // float arithmetic, lanes counted
      "ir.vector_flops",      // float arithmetic instructions in vectorized loops
      "ir.scalar_flops",      // float arithmetic outside vectorized loops
      "ir.vector_fraction",   // lanes of flops done as vectors / all flops (0..1, not log)
      "ir.calls",             // math function calls (exp, tanh, ...), lanes counted
      "ir.loads",             // load instructions (a vector load counts once)
      "ir.stores",            // store instructions
      "ir.input_loads",       // loads from kernel inputs
      "ir.temp_loads",        // loads from stack temporaries
      "ir.temp_stores",       // stores to stack temporaries
      "ir.index_ops",         // integer index arithmetic
      "ir.div_mod",           // integer division and modulo (expensive in inner loops)
      "ir.guarded",           // statements executed under an If (masks, tails)
      "ir.selects",           // Select expressions
      "ir.loops",             // loop statements executed (loop overhead)
      "ir.max_vector_lanes",  // widest vectorized loop
      "ir.unrolled",          // iterations emitted as unrolled copies
      "ir.max_depth",         // deepest loop nest (not log)
      "ir.inner_extent",      // extent of the innermost serial loop of the deepest nest
      "ir.input_bytes",       // argument bytes
      "ir.output_bytes",
      "ir.temp_bytes",        // stack allocations (sum of every Allocate)
      "ir.intensity",         // flops / argument bytes
      "ir.flops_per_task",
      "ir.bytes_per_task",    // argument bytes / tasks
      "ir.gpu_threads",       // GPU kernels: threads per block (0 on a CPU)
      "ir.shared_bytes",      // GPU kernels: static shared memory per block
  };
  return kNames;
}

float Log2p(double x) { return static_cast<float>(std::log2(1.0 + std::max(0.0, x))); }

struct Counts {
  double flops = 0, vector_flops = 0, scalar_flops = 0, vector_lane_flops = 0, calls = 0;
  double loads = 0, stores = 0, input_loads = 0, temp_loads = 0, temp_stores = 0;
  double index_ops = 0, div_mod = 0, guarded = 0, selects = 0, loops = 0, unrolled = 0;
  double temp_bytes = 0;
  int64_t max_lanes = 1;
  int max_depth = 0;
  int64_t inner_extent = 0;
};

class Walker {
 public:
  Counts counts;

  // `trips`: how often the statement runs; `lanes`: the width of the
  // vectorized loop it is in (1 outside); `guarded`: under an If.
  void Visit(const Stmt& s, double trips, int64_t lanes, bool guarded, int depth) {
    if (s == nullptr) return;
    switch (s->kind) {
      case StmtKind::kFor: {
        int64_t extent = 1;
        bool known = AsConst(s->extent, &extent);
        if (!known) extent = 4;  // a tail or a bound that depends on an outer variable
        VisitExpr(s->extent, trips, 1, guarded);
        counts.loops += trips;
        int64_t inner_lanes = lanes;
        double inner_trips = trips * static_cast<double>(extent);
        if (s->for_kind == ForKind::kVectorized) {
          inner_lanes = lanes * extent;
          counts.max_lanes = std::max(counts.max_lanes, inner_lanes);
          inner_trips = trips;  // one vector instruction per lane group
        } else if (s->for_kind == ForKind::kUnrolled) {
          counts.unrolled += trips * static_cast<double>(extent);
        }
        if (depth + 1 >= counts.max_depth && s->for_kind == ForKind::kSerial) {
          counts.max_depth = depth + 1;
          counts.inner_extent = extent;
        }
        counts.max_depth = std::max(counts.max_depth, depth + 1);
        for (const Stmt& b : s->body) Visit(b, inner_trips, inner_lanes, guarded, depth + 1);
        return;
      }
      case StmtKind::kStore:
        counts.stores += trips;
        if (s->buffer && s->buffer->role == BufferRole::kTemp) counts.temp_stores += trips;
        if (guarded) counts.guarded += trips;
        VisitExpr(s->index, trips, lanes, guarded);
        VisitExpr(s->value, trips, lanes, guarded);
        return;
      case StmtKind::kLet:
        VisitExpr(s->value, trips, lanes, guarded);
        for (const Stmt& b : s->body) Visit(b, trips, lanes, guarded, depth);
        return;
      case StmtKind::kAllocate:
        if (s->buffer) {
          counts.temp_bytes += static_cast<double>(s->buffer->num_elements()) * ScalarTypeBytes(s->buffer->dtype);
        }
        for (const Stmt& b : s->body) Visit(b, trips, lanes, guarded, depth);
        return;
      case StmtKind::kBlock:
        for (const Stmt& b : s->body) Visit(b, trips, lanes, guarded, depth);
        return;
      case StmtKind::kIf:
        VisitExpr(s->value, trips, lanes, guarded);
        // Either branch may run; both are counted (an upper bound).
        for (const Stmt& b : s->body) Visit(b, trips, lanes, true, depth);
        return;
      case StmtKind::kWarpReduce:
      case StmtKind::kFence:
        return;
    }
  }

 private:
  void VisitExpr(const Expr& e, double trips, int64_t lanes, bool guarded) {
    if (e == nullptr) return;
    switch (e->kind) {
      case ExprKind::kIntImm:
      case ExprKind::kFloatImm:
      case ExprKind::kVar:
        return;
      case ExprKind::kLoad:
        counts.loads += trips;
        if (e->buffer && e->buffer->role == BufferRole::kInput) counts.input_loads += trips;
        if (e->buffer && e->buffer->role == BufferRole::kTemp) counts.temp_loads += trips;
        break;
      case ExprKind::kCall:
        counts.calls += trips * static_cast<double>(lanes);
        break;
      case ExprKind::kSelect:
        counts.selects += trips;
        break;
      default:
        if (IsArith(e->kind)) {
          if (IsFloat(e->type)) {
            counts.flops += trips * static_cast<double>(lanes);
            if (lanes > 1) {
              counts.vector_flops += trips;
              counts.vector_lane_flops += trips * static_cast<double>(lanes);
            } else {
              counts.scalar_flops += trips;
            }
          } else {
            counts.index_ops += trips;
            if (e->kind == ExprKind::kDiv || e->kind == ExprKind::kMod) counts.div_mod += trips;
          }
        }
        break;
    }
    (void)guarded;
    for (const Expr& a : e->args) VisitExpr(a, trips, lanes, guarded);
  }
};

}  // namespace

const std::vector<std::string>& FeatureNames() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names;
    for (const std::string& k : Kinds()) names.push_back("kind." + k);
    for (const std::string& k : Knobs()) names.push_back("knob." + k);
    // The heuristic default knows a lot: how far a schedule is from it.
    for (const std::string& k : Knobs()) names.push_back("vs_default." + k);
    names.push_back("vs_default.knobs_differing");
    for (const std::string& n : IrFeatureNames()) names.push_back(n);
    return names;
  }();
  return kNames;
}

std::vector<float> LoopFuncFeatures(const LoopFunc& f) {
  Walker w;
  w.Visit(f.body, 1.0, 1, false, 0);
  const Counts& c = w.counts;
  double in_bytes = 0, out_bytes = 0;
  for (const Buffer& b : f.args) {
    double bytes = static_cast<double>(b->num_elements()) * ScalarTypeBytes(b->dtype);
    (b->role == BufferRole::kOutput ? out_bytes : in_bytes) += bytes;
  }
  // A GPU kernel's tasks are its blocks.
  const GpuLaunch launch = GpuLaunchOf(f);
  const bool gpu = IsGpuKernel(f);
  const double tasks = static_cast<double>(gpu ? launch.blocks : NumTasks(f));
  const double arg_bytes = in_bytes + out_bytes;
  std::vector<float> v = {
      Log2p(tasks),
      Log2p(c.flops),
      Log2p(c.vector_flops),
      Log2p(c.scalar_flops),
      c.flops > 0 ? static_cast<float>(c.vector_lane_flops / c.flops) : 0.0f,
      Log2p(c.calls),
      Log2p(c.loads),
      Log2p(c.stores),
      Log2p(c.input_loads),
      Log2p(c.temp_loads),
      Log2p(c.temp_stores),
      Log2p(c.index_ops),
      Log2p(c.div_mod),
      Log2p(c.guarded),
      Log2p(c.selects),
      Log2p(c.loops),
      Log2p(static_cast<double>(c.max_lanes)),
      Log2p(c.unrolled),
      static_cast<float>(c.max_depth),
      Log2p(static_cast<double>(c.inner_extent)),
      Log2p(in_bytes),
      Log2p(out_bytes),
      Log2p(c.temp_bytes),
      Log2p(arg_bytes > 0 ? c.flops / arg_bytes : 0),
      Log2p(c.flops / tasks),
      Log2p(arg_bytes / tasks),
      Log2p(gpu ? static_cast<double>(launch.threads) : 0),
      Log2p(static_cast<double>(launch.shared_bytes)),
  };
  return v;
}

absl::StatusOr<std::vector<float>> ScheduleFeatures(const Graph& workload, const ScheduleConfig& config,
                                                    const Target& target) {
  absl::Status why;
  const WorkloadLowering* lowering = FindLowering(workload, &why);
  if (lowering == nullptr) return why;
  absl::StatusOr<LoopFunc> f;
  if (target.is_gpu()) {
    const gpu::GpuWorkloadLowering* g = gpu::FindGpuLowering(workload, &why);
    if (g == nullptr) return why;
    f = g->lower(workload, config, target.gpu());
  } else {
    f = lowering->lower(workload, config, target.cpu());
  }
  if (!f.ok()) return f.status();
  std::vector<float> v;
  v.reserve(FeatureNames().size());
  for (const std::string& k : Kinds()) v.push_back(lowering->kind == k ? 1.0f : 0.0f);
  for (const std::string& k : Knobs()) {
    auto it = config.knobs.find(k);
    v.push_back(it == config.knobs.end() ? std::numeric_limits<float>::quiet_NaN()
                                         : static_cast<float>(it->second));
  }
  // log2(value / default value) per knob (0: as the default; NaN: unset or
  // not positive), then how many knobs differ from the default.
  const ScheduleConfig def = DefaultSchedule(workload, target);
  int differing = 0;
  for (const std::string& k : Knobs()) {
    auto it = config.knobs.find(k);
    auto dt = def.knobs.find(k);
    if (it == config.knobs.end() || dt == def.knobs.end()) {
      v.push_back(std::numeric_limits<float>::quiet_NaN());
      differing += (it == config.knobs.end()) != (dt == def.knobs.end()) ? 1 : 0;
      continue;
    }
    differing += it->second != dt->second ? 1 : 0;
    v.push_back(it->second > 0 && dt->second > 0
                    ? static_cast<float>(std::log2(static_cast<double>(it->second) / static_cast<double>(dt->second)))
                    : (it->second == dt->second ? 0.0f : std::numeric_limits<float>::quiet_NaN()));
  }
  v.push_back(static_cast<float>(differing));
  std::vector<float> ir = LoopFuncFeatures(*f);
  v.insert(v.end(), ir.begin(), ir.end());
  return v;
}

}  // namespace kiln::loop_ir
