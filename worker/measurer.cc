// Build, check and time one candidate kernel on the host CPU.
#include "worker/measurer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <vector>

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "base/digest.h"
#include "base/status_macros.h"
#include "client/runtime/float_control.h"
#include "client/runtime/thread_pool.h"
#include "compiler_core/codegen/jit.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/frontend/graph_proto.h"
#include "compiler_core/frontend/interpreter.h"
#include "compiler_core/frontend/op_registry.h"
#include "compiler_core/frontend/ops/conv_blocking.h"
#include "compiler_core/ir/float16.h"
#include "worker/reference_cache.h"

namespace kiln::worker {
namespace {

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// splitmix64: a tiny, fully specified generator (std distributions are not
// portable across standard libraries).
struct SplitMix64 {
  uint64_t state;
  uint64_t Next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1) with 24 bits of resolution (exact in float32).
  double NextSymmetric() { return static_cast<double>(Next() >> 40) / 8388608.0 - 1.0; }
};

double ElementAt(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kFloat32: return t.data<float>()[i];
    case DType::kFloat64: return t.data<double>()[i];
    case DType::kFloat16:
    case DType::kBFloat16: return NarrowToFloat(t.dtype(), t.data<uint16_t>()[i]);
    case DType::kInt8: return t.data<int8_t>()[i];
    case DType::kInt16: return t.data<int16_t>()[i];
    case DType::kInt32: return t.data<int32_t>()[i];
    case DType::kInt64: return static_cast<double>(t.data<int64_t>()[i]);
    case DType::kUInt8: return t.data<uint8_t>()[i];
    case DType::kUInt16: return t.data<uint16_t>()[i];
    case DType::kUInt32: return t.data<uint32_t>()[i];
    case DType::kUInt64: return static_cast<double>(t.data<uint64_t>()[i]);
    case DType::kBool: return t.data<uint8_t>()[i] ? 1.0 : 0.0;
    case DType::kUnknown: break;
  }
  return std::numeric_limits<double>::quiet_NaN();
}

// Integers are drawn from [0, bound) (bound 1 to 4).
void FillRandom(Tensor* t, SplitMix64* rng, uint64_t bound) {
  const int64_t n = t->num_elements();
  for (int64_t i = 0; i < n; ++i) {
    switch (t->dtype()) {
      case DType::kFloat32: t->data<float>()[i] = static_cast<float>(rng->NextSymmetric()); break;
      case DType::kFloat64: t->data<double>()[i] = rng->NextSymmetric(); break;
      case DType::kFloat16:
      case DType::kBFloat16:
        t->data<uint16_t>()[i] = FloatToNarrow(t->dtype(), static_cast<float>(rng->NextSymmetric()));
        break;
      case DType::kInt8: t->data<int8_t>()[i] = static_cast<int8_t>(rng->Next() % bound); break;
      case DType::kInt16: t->data<int16_t>()[i] = static_cast<int16_t>(rng->Next() % bound); break;
      case DType::kInt32: t->data<int32_t>()[i] = static_cast<int32_t>(rng->Next() % bound); break;
      case DType::kInt64: t->data<int64_t>()[i] = static_cast<int64_t>(rng->Next() % bound); break;
      case DType::kUInt8: t->data<uint8_t>()[i] = static_cast<uint8_t>(rng->Next() % bound); break;
      case DType::kUInt16: t->data<uint16_t>()[i] = static_cast<uint16_t>(rng->Next() % bound); break;
      case DType::kUInt32: t->data<uint32_t>()[i] = static_cast<uint32_t>(rng->Next() % bound); break;
      case DType::kUInt64: t->data<uint64_t>()[i] = rng->Next() % bound; break;
      case DType::kBool: t->data<uint8_t>()[i] = static_cast<uint8_t>(rng->Next() & 1); break;
      case DType::kUnknown: break;
    }
  }
}

// The bound of the integers drawn for each graph input that some node reads
// as indices into another tensor's axis (Gather, GatherElements, GatherND,
// ScatterElements, ScatterND): that axis's smallest static extent, so that
// random indices stay in range (an embedding of 2 token types takes 0 or 1).
std::map<const Value*, uint64_t> IndexBounds(const Graph& graph) {
  std::map<const Value*, uint64_t> bounds;
  auto limit = [&](const Value* indices, int64_t extent) {
    if (indices == nullptr || extent <= 0) return;
    auto [it, inserted] = bounds.emplace(indices, static_cast<uint64_t>(extent));
    if (!inserted) it->second = std::min<uint64_t>(it->second, static_cast<uint64_t>(extent));
  };
  for (const auto& node : graph.nodes()) {
    const std::string& op = node->op_type();
    if (node->num_inputs() < 2 || node->input(0) == nullptr || node->input(1) == nullptr) continue;
    const TensorType& data = node->input(0)->type();
    if (!data.known || !data.IsStatic()) continue;
    const std::vector<int64_t> dims = data.StaticDims();
    const int64_t rank = static_cast<int64_t>(dims.size());
    if (op == "Gather" || op == "GatherElements" || op == "ScatterElements") {
      int64_t axis = node->GetInt("axis", 0);
      if (axis < 0) axis += rank;
      if (axis >= 0 && axis < rank) limit(node->input(1), dims[axis]);
    } else if (op == "GatherND" || op == "ScatterND") {
      const int64_t batch = node->GetInt("batch_dims", 0);
      for (int64_t a = batch; a < rank; ++a) limit(node->input(1), dims[a]);
    }
  }
  return bounds;
}

// The scales of the floats drawn for weights, 1/sqrt(fan-in), as a trained
// (or Xavier-initialised) network has them:
//   - a kiln.Recurrence's recurrent weights [ND, H, G*H]: 1/sqrt(H). Uniform
//     [-1, 1) weights make a long recurrence chaotic, and the rounding
//     differences of any two correct summation orders then grow past every
//     tolerance within a few dozen steps (crnn's T=33, H=256 LSTM).
//   - a Conv's or kiln.BlockedConv's weights: 1/sqrt(input channels per
//     group x taps); a MatMul's, Gemm's or kiln.PackedMatMul's B:
//     1/sqrt(K). Unscaled, a long reduction's sums reach sqrt(K)/3 (28 for
//     DeepSpeech2's 32-channel 21x11 conv) while an epilogue (a Clip to
//     random bounds) shrinks the output whose rms sets the tolerance: every
//     correct candidate failed by 1.5e-4 against a tolerance of 9e-5.
std::map<const Value*, double> WeightScales(const Graph& graph) {
  std::map<const Value*, double> scales;
  auto scale = [&](const Value* w, int64_t fan_in) {
    if (w != nullptr && fan_in > 0) scales[w] = 1.0 / std::sqrt(static_cast<double>(fan_in));
  };
  auto dims = [](const Value* v) {
    return v != nullptr && v->type().known && v->type().IsStatic() ? v->type().StaticDims() : std::vector<int64_t>{};
  };
  for (const auto& node : graph.nodes()) {
    const std::string& op = node->op_type();
    const bool kiln = node->domain() == kKilnDomain;
    if (node->num_inputs() < 2) continue;
    const Value* a = node->input(0);
    const Value* w = node->input(1);
    const std::vector<int64_t> wd = dims(w), ad = dims(a);
    if (kiln && op == "Recurrence") {
      if (wd.size() == 3) scale(w, wd[1]);
    } else if (((!kiln && op == "Conv") || (kiln && op == "BlockedConv")) && wd.size() >= 3) {
      // [K, C/g, taps...] (blocked: once unblocked): C/g times the taps.
      const std::vector<int64_t> unblocked = kiln ? ops::UnblockedWeightDims(wd, ad.size()) : wd;
      if (unblocked.size() >= 3) {
        scale(w, std::accumulate(unblocked.begin() + 1, unblocked.end(), int64_t{1}, std::multiplies<>()));
      }
    } else if (((!kiln && (op == "MatMul" || op == "Gemm")) || (kiln && op == "PackedMatMul")) && !ad.empty()) {
      const bool trans_a = op != "MatMul" && node->GetInt("transA", 0) != 0;
      scale(w, trans_a && ad.size() == 2 ? ad[0] : ad.back());
    }
  }
  return scales;
}

// Bytes written by FlushCpuCache: twice L2 + L3 as sysconf reports them, at
// least 8 MiB and at most 64 MiB (sysconf may report a whole socket's L3, of
// which one core's cluster sees a fraction); 64 MiB when the sizes are unknown.
size_t FlushBytes() {
  const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (l2 <= 0 && l3 <= 0) return size_t{64} << 20;
  const size_t caches = static_cast<size_t>(std::max(l2, 0L)) + static_cast<size_t>(std::max(l3, 0L));
  return std::clamp(2 * caches, size_t{8} << 20, size_t{64} << 20);
}

// Writes through a buffer larger than L2 + L3 so that every timed run starts
// with cold caches. Allocated once per process.
void FlushCpuCache() {
  static const size_t bytes = FlushBytes();
  static uint8_t* const buffer = [] {
    auto* p = new uint8_t[bytes];
    std::memset(p, 0, bytes);
    return p;
  }();
  volatile uint8_t* p = buffer;
  for (size_t i = 0; i < bytes; i += 64) p[i] = static_cast<uint8_t>(p[i] + 1);
}

kiln::v1::MeasureResult Failure(const kiln::v1::MeasureTask& task, kiln::v1::MeasureError error,
                                std::string message) {
  return FailedMeasurement(task.task_id(), error, std::move(message));
}

// Runs every task of the kernel as the runtime's session runs a package step:
// split across the pool when it has more than one thread, else on the caller.
void RunAllTasks(const JitKernel& kernel, void* const* args, runtime::ThreadPool* pool) {
  if (pool != nullptr && pool->num_threads() > 1 && kernel.num_tasks() > 1) {
    pool->ParallelFor(kernel.num_tasks(), [&kernel, args](int64_t b, int64_t e) { kernel.Run(args, b, e); });
  } else {
    kernel.Run(args, 0, kernel.num_tasks());
  }
}

}  // namespace

double Percentile(const std::vector<double>& sorted, double q) {
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

MeasureSettings MeasureSettings::FromProto(const kiln::v1::MeasureOptions& options) {
  MeasureSettings s;
  if (options.warmup_runs() > 0) s.warmup_runs = options.warmup_runs();
  if (options.min_repeats() > 0) s.min_repeats = options.min_repeats();
  if (options.min_time_ms() > 0) s.min_time_ms = options.min_time_ms();
  if (options.rtol() > 0) s.rtol = options.rtol();
  if (options.atol() > 0) s.atol = options.atol();
  s.flush_cache = options.flush_cache();
  s.max_repeats = std::max(s.max_repeats, s.min_repeats);
  return s;
}

absl::StatusOr<std::map<std::string, Tensor>> MakeMeasureInputs(const Graph& graph,
                                                                const std::string& seed_key) {
  std::map<std::string, Tensor> inputs;
  const uint64_t seed = Fnv1a(seed_key);
  const std::map<const Value*, uint64_t> index_bounds = IndexBounds(graph);
  const std::map<const Value*, double> weight_scales = WeightScales(graph);
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    const Value* v = graph.inputs()[i];
    const TensorType& type = v->type();
    if (!type.known || !type.IsStatic()) {
      return absl::InvalidArgumentError(
          absl::StrCat("workload input ", v->name(), " has no static shape: ", type.ToString()));
    }
    if (DTypeSize(type.dtype) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("workload input ", v->name(), " has an unknown dtype"));
    }
    Tensor t(type.dtype, type.StaticDims());
    SplitMix64 rng{seed ^ (0x632be59bd9b4e019ull * (i + 1))};
    auto bound = index_bounds.find(v);
    FillRandom(&t, &rng, bound == index_bounds.end() ? 4 : std::clamp<uint64_t>(bound->second, 1, 4));
    if (auto scale = weight_scales.find(v); scale != weight_scales.end() && t.dtype() == DType::kFloat32) {
      for (int64_t e = 0; e < t.num_elements(); ++e) t.data<float>()[e] *= static_cast<float>(scale->second);
    }
    inputs.emplace(v->name(), std::move(t));
  }
  return inputs;
}

std::string CompareOutput(const std::string& name, const Tensor& got, const Tensor& ref,
                          double rtol, double atol, double* max_abs_error) {
  *max_abs_error = 0.0;
  if (got.num_elements() != ref.num_elements()) {
    *max_abs_error = std::numeric_limits<double>::infinity();
    return absl::StrCat("output ", name, ": ", got.num_elements(), " elements, reference has ",
                        ref.num_elements());
  }
  // Reassociated f32 sums (a long dot product, a reduction) err in proportion
  // to the size of their terms, not of the result: an element near zero from
  // cancellation gets the output's RMS magnitude as its scale.
  double sum_sq = 0;
  int64_t finite = 0;
  for (int64_t i = 0; i < ref.num_elements(); ++i) {
    const double r = ElementAt(ref, i);
    if (std::isfinite(r)) {
      sum_sq += r * r;
      ++finite;
    }
  }
  const double rms = finite > 0 ? std::sqrt(sum_sq / static_cast<double>(finite)) : 0.0;
  int64_t bad = 0;
  int64_t first_bad = -1;
  double first_got = 0, first_ref = 0;
  for (int64_t i = 0; i < ref.num_elements(); ++i) {
    const double g = ElementAt(got, i), r = ElementAt(ref, i);
    bool ok;
    double err;
    if (std::isnan(r) || std::isnan(g)) {
      ok = std::isnan(r) && std::isnan(g);
      err = ok ? 0.0 : std::numeric_limits<double>::infinity();
    } else if (g == r) {  // also equal infinities
      ok = true;
      err = 0.0;
    } else {
      err = std::fabs(g - r);
      ok = err <= atol + rtol * (std::fabs(r) + rms);
    }
    *max_abs_error = std::max(*max_abs_error, err);
    if (!ok) {
      if (first_bad < 0) {
        first_bad = i;
        first_got = g;
        first_ref = r;
      }
      ++bad;
    }
  }
  if (bad == 0) return "";
  return absl::StrCat("output ", name, ": ", bad, " of ", ref.num_elements(),
                      " elements differ; first at index ", first_bad, ": got ", first_got,
                      ", expected ", first_ref, " (max abs error ", *max_abs_error, ", rtol ", rtol,
                      ", atol ", atol, ", output rms ", rms, ")");
}

kiln::v1::MeasureResult FailedMeasurement(const std::string& task_id, kiln::v1::MeasureError error,
                                          std::string message) {
  kiln::v1::MeasureResult r;
  r.set_task_id(task_id);
  r.set_error(error);
  r.set_error_message(std::move(message));
  return r;
}

std::string ReferenceKey(const kiln::v1::MeasureTask& task) {
  return absl::StrCat(Sha256Hex(task.workload().SerializeAsString()), " ", task.workload_key());
}

absl::StatusOr<Reference> ComputeReference(const Graph& graph, const std::string& workload_key) {
  Reference r;
  ASSIGN_OR_RETURN(r.inputs, MakeMeasureInputs(graph, workload_key));
  absl::StatusOr<std::map<std::string, Tensor>> outputs = Evaluate(graph, r.inputs);
  if (!outputs.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("reference interpreter failed on workload ", workload_key, ": ", outputs.status().message()));
  }
  for (const Value* v : graph.outputs()) {
    auto it = outputs->find(v->name());
    if (it == outputs->end()) {
      return absl::InvalidArgumentError(absl::StrCat("reference interpreter produced no output ", v->name()));
    }
    r.outputs.push_back(std::move(it->second));
  }
  return r;
}

absl::StatusOr<std::optional<kiln::v1::MeasureResult>> SetUpMeasurement(const kiln::v1::MeasureTask& task,
                                                                         const Target& target, MeasureSetup* setup) {
  ASSIGN_OR_RETURN(setup->graph, GraphFromProto(task.workload()));
  const Graph& graph = *setup->graph;

  // The candidate's schedule.
  if (task.space_version() != 0 && task.space_version() != kScheduleSpaceVersion) {
    return Failure(task, kiln::v1::BUILD_ERROR,
                   absl::StrCat("schedule space version ", task.space_version(),
                                " is not this worker's version ", kScheduleSpaceVersion));
  }
  absl::StatusOr<ScheduleConfig> config = ScheduleConfig::Parse(task.schedule_config());
  if (!config.ok()) {
    return Failure(task, kiln::v1::BUILD_ERROR,
                   absl::StrCat("bad schedule config \"", task.schedule_config(),
                                "\": ", config.status().message()));
  }
  setup->config = *config;
  if (absl::Status valid = ValidateSchedule(graph, setup->config, target); !valid.ok()) {
    return Failure(task, kiln::v1::BUILD_ERROR,
                   absl::StrCat("invalid schedule \"", task.schedule_config(),
                                "\": ", valid.message()));
  }

  // Inputs and the reference outputs: computed once per workload and key
  // (the inputs' seed) in this process, shared by its candidates.
  ASSIGN_OR_RETURN(setup->reference, ReferenceCache::Process().GetOrCompute(ReferenceKey(task), [&]() {
                     return ComputeReference(graph, task.workload_key());
                   }));
  setup->inputs = setup->reference->inputs;  // the candidate may write them: a copy of its own
  for (const Tensor& t : setup->reference->outputs) setup->outputs.emplace_back(t.dtype(), t.dims());
  return std::nullopt;
}

std::optional<kiln::v1::MeasureResult> CheckOutputs(const kiln::v1::MeasureTask& task, const MeasureSetup& setup,
                                                    const MeasureSettings& settings, double* max_abs_error) {
  *max_abs_error = 0.0;
  std::string first_mismatch;
  for (size_t i = 0; i < setup.outputs.size(); ++i) {
    double err = 0.0;
    std::string mismatch = CompareOutput(setup.graph->outputs()[i]->name(), setup.outputs[i], setup.reference->outputs[i],
                                         settings.rtol, settings.atol, &err);
    *max_abs_error = std::max(*max_abs_error, err);
    if (!mismatch.empty() && first_mismatch.empty()) first_mismatch = std::move(mismatch);
  }
  if (first_mismatch.empty()) return std::nullopt;
  kiln::v1::MeasureResult r = Failure(task, kiln::v1::WRONG_ANSWER, first_mismatch);
  r.set_max_abs_error(*max_abs_error);
  return r;
}

std::vector<double> TimeRuns(const MeasureSettings& settings, const std::function<double()>& run_ms) {
  using Clock = std::chrono::steady_clock;
  std::vector<double> times_ms;
  double measured_ms = 0.0;
  const Clock::time_point loop_start = Clock::now();
  while (true) {
    const double ms = run_ms();
    times_ms.push_back(ms);
    measured_ms += ms;
    const int n = static_cast<int>(times_ms.size());
    if (n < settings.min_repeats) continue;
    if (measured_ms >= settings.min_time_ms || n >= settings.max_repeats) break;
    const double total_ms = std::chrono::duration<double, std::milli>(Clock::now() - loop_start).count();
    if (total_ms >= settings.max_total_ms) break;
  }
  std::sort(times_ms.begin(), times_ms.end());
  return times_ms;
}

kiln::v1::MeasureResult TimedResult(const kiln::v1::MeasureTask& task, const std::vector<double>& sorted_ms,
                                    double max_abs_error) {
  kiln::v1::MeasureResult r;
  r.set_task_id(task.task_id());
  r.set_error(kiln::v1::MEASURE_OK);
  r.set_median_ms(Percentile(sorted_ms, 0.5));
  r.set_p10_ms(Percentile(sorted_ms, 0.1));
  r.set_p90_ms(Percentile(sorted_ms, 0.9));
  r.set_repeats(static_cast<int32_t>(sorted_ms.size()));
  r.set_max_abs_error(max_abs_error);
  return r;
}

absl::StatusOr<kiln::v1::MeasureResult> Measure(const kiln::v1::MeasureTask& task,
                                                const CpuTarget& target) {
  const MeasureSettings settings = MeasureSettings::FromProto(task.options());
  MeasureSetup setup;
  ASSIGN_OR_RETURN(std::optional<kiln::v1::MeasureResult> refused, SetUpMeasurement(task, target, &setup));
  if (refused) return *refused;
  const Graph& graph = *setup.graph;

  // Build.
  absl::StatusOr<std::unique_ptr<JitKernel>> kernel = JitCompile(graph, setup.config, target);
  if (!kernel.ok()) {
    return Failure(task, kiln::v1::BUILD_ERROR,
                   absl::StrCat("jit compile of \"", task.schedule_config(),
                                "\" failed: ", kernel.status().message()));
  }

  // The threads the package will run it on; the check runs on them too, so a
  // schedule whose tasks race is a wrong answer.
  std::unique_ptr<runtime::ThreadPool> pool;
  if (task.threads() > 1) pool = std::make_unique<runtime::ThreadPool>(task.threads());

  // Kernel ABI: graph inputs in order, then graph outputs in order.
  std::vector<void*> args;
  for (const Value* v : graph.inputs()) args.push_back(setup.inputs.at(v->name()).raw());
  for (Tensor& t : setup.outputs) args.push_back(t.raw());

  // Under the floating-point mode a session runs kernels in: denormals
  // flushed (client/runtime/float_control.h).
  const runtime::ScopedFloatControl float_control(runtime::WithDenormals(runtime::FloatControl(), true));

  // Check: poison the outputs (all-ones bytes: NaN for floats) so that elements
  // a kernel fails to write are caught, run once, compare.
  for (Tensor& t : setup.outputs) {
    if (t.size_bytes() > 0) std::memset(t.raw(), 0xff, static_cast<size_t>(t.size_bytes()));
  }
  RunAllTasks(**kernel, args.data(), pool.get());
  double max_abs_error = 0.0;
  if (std::optional<kiln::v1::MeasureResult> wrong = CheckOutputs(task, setup, settings, &max_abs_error)) {
    return *wrong;
  }

  // Time: warm-up, then repeats until both min_repeats and min_time_ms are met
  // (capped by max_repeats / max_total_ms), each run timed alone.
  using Clock = std::chrono::steady_clock;
  for (int i = 0; i < settings.warmup_runs; ++i) RunAllTasks(**kernel, args.data(), pool.get());
  std::vector<double> times_ms = TimeRuns(settings, [&] {
    if (settings.flush_cache) FlushCpuCache();
    const Clock::time_point t0 = Clock::now();
    RunAllTasks(**kernel, args.data(), pool.get());
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  });
  return TimedResult(task, times_ms, max_abs_error);
}

kiln::v1::MeasureResult MeasureAsResult(const kiln::v1::MeasureTask& task,
                                        const CpuTarget& target) {
  absl::StatusOr<kiln::v1::MeasureResult> r = Measure(task, target);
  if (r.ok()) return *std::move(r);
  return Failure(task, kiln::v1::BUILD_ERROR,
                 absl::StrCat("invalid workload: ", r.status().message()));
}

}  // namespace kiln::worker
