// The compile pipeline as a flat list of stages.
#include "server/compile_pipeline.h"

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "base/digest.h"
#include "base/log.h"
#include "base/status_macros.h"
#include "compiler_core/codegen/schedule_space.h"
#include "compiler_core/driver/compile_driver.h"
#include "compiler_core/driver/version.h"
#include "compiler_core/package/manifest_reader.h"
#include "server/farm_target.h"
#include "server/search_strategy.h"
#include "server/task_scheduler.h"
#include "server/tuning_report.h"

namespace kiln::server {

std::string CompileKey(const std::string& model_bytes,
                       const google::protobuf::RepeatedPtrField<kiln::v1::ShapeBinding>& shapes,
                       const std::string& target_key) {
  std::map<std::string, std::string> sorted;
  for (const auto& b : shapes) sorted[b.input()] = absl::StrJoin(b.dims(), ",");
  std::string text = absl::StrCat("model=", Sha256Hex(model_bytes), "\n");
  for (const auto& [name, dims] : sorted) absl::StrAppend(&text, "shape ", name, "=", dims, "\n");
  absl::StrAppend(&text, "target=", target_key, "\ncompiler=", kCompilerVersion,
                  "\nspace=", kScheduleSpaceVersion, "\n");
  return Sha256Hex(text);
}

namespace {

// The most threads a compile may ask its candidates to be measured on.
constexpr int kMaxThreads = 1024;

// A request's model (ONNX bytes or Kiln's graph) with its shape bindings.
absl::StatusOr<std::unique_ptr<Graph>> ImportRequestModel(
    const std::string& onnx_model, const kiln::v1::Graph* graph,
    const google::protobuf::RepeatedPtrField<kiln::v1::ShapeBinding>& shapes) {
  ModelSource source;
  source.onnx_model = onnx_model;
  source.graph = graph;
  for (const auto& b : shapes) source.input_shapes[b.input()] = std::vector<int64_t>(b.dims().begin(), b.dims().end());
  return ImportModel(source);
}

// The records behind a group's schedule, as the result and the manifest say.
kiln::v1::ScheduleProvenance ProvenanceOf(const TuneOutcome& t, const std::string& target_key) {
  kiln::v1::ScheduleProvenance p;
  p.set_record_target(target_key);
  p.set_space_version(kScheduleSpaceVersion);
  if (t.record_keys.empty()) {
    p.set_source(kiln::v1::ScheduleProvenance::DEFAULT);
    return p;
  }
  p.set_source(kiln::v1::ScheduleProvenance::RECORDS);
  for (const std::string& key : t.record_keys) p.add_record_keys(key);
  p.set_mean_ms(t.median_ms);
  p.set_schedules_ranked(t.schedules_ranked);
  return p;
}

// Whether the stored package `previous_digest` runs the same kernels as
// `package` (false when either cannot be read: then it is timed).
bool SameKernelsAs(tuningdb::TuningDb& db, const std::string& previous_digest, const std::string& package) {
  auto previous = db.GetArtifact(previous_digest);
  if (!previous.ok() || !*previous) return false;
  auto a = ReadPackageInfo(**previous);
  auto b = ReadPackageInfo(package);
  return a.ok() && b.ok() && SameKernels(a->manifest, b->manifest);
}

// What a compile answers when the cache answers for `r`'s compile: the same
// package and choices, all from the database, nothing measured, replaced or warned.
kiln::v1::CompileResult CacheAnswer(const kiln::v1::CompileResult& r) {
  kiln::v1::CompileResult cached = r;
  cached.clear_model_check();
  cached.clear_warnings();
  cached.clear_tuning_stop();
  cached.clear_compile_seconds();
  cached.set_trials_measured(0);
  cached.set_tuning_in_background(false);
  for (kiln::v1::GroupReport& g : *cached.mutable_groups()) {
    g.set_from_database(true);
    g.set_trials_measured(0);
  }
  return cached;
}

}  // namespace

namespace {
// How long a compile for a named target waits for a worker of it to register
// before it compiles untuned (docs/operations.md, "Targets").
constexpr std::chrono::milliseconds kNamedTargetGrace{2000};
}  // namespace

absl::StatusOr<std::pair<std::string, Target>> CompilePipeline::ResolveGpuTarget(const std::string& target,
                                                                                   int threads) const {
  if (threads > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("threads ", threads, " applies to CPU targets; target '", target, "' is a GPU"));
  }
  std::optional<GpuTarget> named;
  if (target != "cuda") {
    // A full farm key ("cuda/sm_90/<model>/<versions>") names its records.
    if (std::optional<GpuTarget> keyed = GpuTargetOfKey(target);
        keyed && absl::StrContains(absl::string_view(target).substr(5), "/")) {
      return std::make_pair(target, Target(*keyed));
    }
    absl::StatusOr<GpuTarget> t = GpuTarget::Named(target);
    if (!t.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("target '", target, "': ", t.status().message(),
                                                     "; or 'cuda' for the farm's GPU workers"));
    }
    named = *t;
  }
  // The key most live GPU workers (of the named SM) measure for.
  std::map<std::string, int> keys;
  for (const WorkerView& w : tuner_->broker()->Workers()) {
    std::optional<GpuTarget> g = GpuTargetOfKey(w.target_key);
    if (g && !w.draining && (!named || *g == *named)) keys[w.target_key] += 1;
  }
  std::string best;
  for (const auto& [key, count] : keys) {
    if (best.empty() || count > keys[best]) best = key;
  }
  if (!best.empty()) return std::make_pair(best, Target(*GpuTargetOfKey(best)));
  if (!named) {
    return absl::InvalidArgumentError(
        "target 'cuda' means the GPUs of this farm's workers, and no GPU worker is registered: start "
        "`kiln-worker --device cuda:N` on a GPU host, or name an SM (--target cuda:sm_90) to compile untuned");
  }
  return std::make_pair(named->Key(), Target(*named));
}

absl::StatusOr<std::pair<std::string, Target>> CompilePipeline::ResolveTarget(const std::string& target,
                                                                                int threads) const {
  if (threads < 0 || threads > kMaxThreads) {
    return absl::InvalidArgumentError(
        absl::StrCat("threads ", threads, " is out of range: 0 or 1 (one thread) to ", kMaxThreads));
  }
  if (absl::StartsWith(target, "cuda")) return ResolveGpuTarget(target, threads);
  CpuTarget host = HostFarmTarget();
  if (target.empty() || target == "cpu" || target == absl::StrCat("cpu:", host.cpu) ||
      target == host.Key()) {
    return std::make_pair(RecordTargetKey(host.Key(), threads), host);
  }
  // A named target: an x86-64 level or an LLVM CPU name, "cpu:" optional.
  absl::string_view name = target;
  absl::ConsumePrefix(&name, "cpu:");
  absl::StatusOr<CpuTarget> named = CpuTarget::Named(std::string(name));
  if (!named.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("target '", target, "': ", named.status().message(),
                                                   "; or 'cpu' for this server's own (", host.Key(), ")"));
  }
  return std::make_pair(RecordTargetKey(named->Key(), threads), *named);
}

absl::StatusOr<CompileOutput> CompilePipeline::Run(const kiln::v1::CompileRequest& request,
                                                   const std::function<void(const kiln::v1::Progress&)>& on_progress,
                                                   const std::function<bool()>& cancelled,
                                                   const std::function<absl::Status()>& tuning_allowed,
                                                   const Tuner::TrialPayer& pay_after_cancel) {
  auto start = std::chrono::steady_clock::now();
  kiln::v1::Progress p;
  auto report = [&](const std::string& stage, const std::string& message) {
    p.set_stage(stage);
    p.set_message(message);
    on_progress(p);
  };

  // 0. The compile cache: the answer of an earlier compile of the key while
  // the records behind it are unchanged (after the options are checked).
  const std::string search = request.search().empty() ? kDefaultSearchStrategy : request.search();
  RETURN_IF_ERROR(MakeSearchStrategy(search, nullptr).status());
  {
    ASSIGN_OR_RETURN(auto resolved, ResolveTarget(request.target(), request.threads()));
    ASSIGN_OR_RETURN(std::optional<CompileOutput> cached, FromCache(request, resolved.first));
    if (cached) {
      report("cache", absl::StrCat("answered from the compile cache: ", cached->result.package_digest()));
      cached->result.set_compile_seconds(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      return *std::move(cached);
    }
  }

  // 1. Import.
  report("import", "importing the model");
  ASSIGN_OR_RETURN(std::unique_ptr<Graph> graph,
                   ImportRequestModel(request.onnx_model(), request.has_graph() ? &request.graph() : nullptr,
                                      request.shapes()));
  RETURN_IF_ERROR(CheckModelLimits(*graph, model_limits_));
  ASSIGN_OR_RETURN(auto resolved, ResolveTarget(request.target(), request.threads()));
  const auto& [target_key, target] = resolved;
  // A target no worker measures (another CPU than the farm's) compiles with
  // its defaults and says so: measuring its candidates here would be wrong.
  std::vector<std::string> warnings;
  const bool wants_tuning = request.trials_per_group() > 0 || request.budget_trials() > 0 ||
                            request.budget_seconds() > 0;
  bool untunable = false;
  if (wants_tuning && !(target == Target(HostFarmTarget()))) {
    // A worker of the target may still be registering (a farm that just
    // started): give it kNamedTargetGrace before compiling untuned.
    const auto deadline = std::chrono::steady_clock::now() + kNamedTargetGrace;
    while (tuner_->LiveWorkers(target_key) == 0 && std::chrono::steady_clock::now() < deadline && !cancelled()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    untunable = tuner_->LiveWorkers(target_key) == 0;
  }
  if (untunable) {
    const std::string how = target.is_gpu()
                                ? absl::StrCat("`kiln-worker --device cuda:N` on a host with an ", target.gpu().Arch(),
                                               " GPU")
                                : absl::StrCat("`kiln-worker --target ", target.cpu().cpu, "` on a machine that runs it");
    warnings.push_back(absl::StrCat("no worker measures target ", target_key, " (",
                                    target.is_gpu() ? target.gpu().Arch() : target.cpu().cpu,
                                    "): compiled untuned with its default schedules; start ", how, " to tune"));
    report("target", absl::StrCat("warning: ", warnings.back()));
  }

  // 2-3. Optimise, partition into fusion groups, one workload per group (the
  // same stages `kiln inspect` shows); refuse a model with groups no lowering
  // takes before anything is tuned.
  report("optimize", absl::StrCat("optimizing ", graph->nodes().size(), " nodes"));
  ASSIGN_OR_RETURN(PreparedModel model, PrepareModel(std::move(graph), PrepareOptionsFor(target)));
  RETURN_IF_ERROR(CheckCompilable(model, target));
  const Partition& partition = model.partition;
  const std::vector<Workload>& workloads = model.workloads;
  p.set_groups_total(static_cast<int>(partition.groups.size()));

  // Where the records of the model's workloads stand before tuning: when
  // nothing is added until the package is stored, its answer is cached.
  std::vector<std::string> distinct_workloads;
  for (const Workload& w : workloads) {
    if (std::find(distinct_workloads.begin(), distinct_workloads.end(), w.key) == distinct_workloads.end()) {
      distinct_workloads.push_back(w.key);
    }
  }
  ASSIGN_OR_RETURN(std::string records_before, db_->RecordsSeen(distinct_workloads, target_key, kScheduleSpaceVersion));

  // 4. Tune: the whole-model budget through the task scheduler, or each
  // distinct workload to trials_per_group.
  int trials = untunable ? 0 : std::max(0, request.trials_per_group());
  std::map<std::string, TuneOutcome> tuned;
  int trials_measured = 0;
  std::string tuning_stop;
  TuningBudget budget{std::max(0, request.budget_trials()), std::max(0.0, request.budget_seconds())};
  if (untunable) budget = TuningBudget{};
  // Tuning refused (a client over its budget): what the database answers
  // still compiles; a budget always has something left to spend on.
  if (tuning_allowed && (budget.enabled() || trials > 0)) {
    if (absl::Status allowed = tuning_allowed();
        !allowed.ok() && (budget.enabled() || LeftToTune(workloads, target_key, target, trials))) {
      return allowed;
    }
  }
  // The trials per workload the records this compile answers from satisfy
  // (once it is done; -1: it leaves tuning to the background).
  int trials_satisfied = budget.enabled() ? 0 : trials;
  // A progressive compile answers from the database now: its tuning is for
  // the background compile the service starts when something is left to do.
  bool tuning_left = false;
  if (request.progressive()) {
    tuning_left = budget.enabled() || LeftToTune(workloads, target_key, target, trials);
    if (tuning_left) trials_satisfied = -1;
    trials = 0;
    budget = TuningBudget{};
  }
  if (budget.enabled()) {
    std::vector<TaskScheduler::Task> tasks;
    std::map<std::string, size_t> task_of;
    for (const Workload& w : workloads) {
      auto [it, added] = task_of.emplace(w.key, tasks.size());
      if (added) {
        tasks.push_back(TaskScheduler::Task{&w, 0, static_cast<int>(EnumerateSchedules(*w.graph, target).size())});
      }
      tasks[it->second].count += 1;
    }
    TaskScheduler scheduler(std::move(tasks), budget, TaskScheduler::Options{});
    int turns = 0;
    auto run = scheduler.Run(
        [&](const Workload& w, int goal) -> absl::StatusOr<TuneOutcome> {
          ++turns;
          report("tune", absl::StrCat("budget: turn ", turns, ", ", w.op_summary, " to ", goal, " trials"));
          auto outcome = tuner_->Tune(
              w, target_key, target, goal, search,
              [&](const TuneProgress& tp) {
                p.set_trials_measured(trials_measured + tp.trials_done);
                p.set_best_so_far_ms(tp.best_ms);
                report("tune", absl::StrCat("budget: turn ", turns, ", ", w.op_summary, ": ", tp.trials_done,
                                            "/", tp.trials_total, " trials"));
              },
              cancelled, pay_after_cancel);
          if (!outcome.ok()) {
            return absl::Status(outcome.status().code(), absl::StrCat("tuning ", w.op_summary, " (workload ",
                                                                      w.key.substr(0, 12), "): ",
                                                                      outcome.status().message()));
          }
          trials_measured += outcome->trials_measured;
          p.set_trials_measured(trials_measured);
          return outcome;
        },
        cancelled);
    if (!run.ok()) return run.status();
    tuned = std::move(*run);
    tuning_stop = scheduler.stop_reason();
    p.set_groups_done(static_cast<int>(workloads.size()));
  }
  if (!budget.enabled()) {
    // Each distinct workload once, as many at a time as the target has live
    // workers: while one job confirms its winner or chooses its next round,
    // the other workers measure another workload's candidates.
    std::vector<size_t> firsts;  // the first group of each distinct workload
    {
      std::set<std::string> seen;
      for (size_t i = 0; i < workloads.size(); ++i) {
        if (seen.insert(workloads[i].key).second) firsts.push_back(i);
      }
    }
    const int parallel = trials > 0 ? std::max(1, tuner_->LiveWorkers(target_key)) : 1;
    std::mutex mu;  // guards p, the progress callback, tuned, trials_measured, in_flight, next, failure
    std::map<size_t, int> in_flight;  // group -> trials its running job measured so far
    size_t next = 0;
    absl::Status failure;
    auto progress_locked = [&](const std::string& message) {
      int running = 0;
      for (const auto& [group, done] : in_flight) running += done;
      int groups_done = 0;
      for (const Workload& w : workloads) groups_done += tuned.count(w.key) ? 1 : 0;
      p.set_groups_done(groups_done);
      p.set_trials_measured(trials_measured + running);
      // Nothing to measure: the schedules come from the database or are the defaults.
      report(trials > 0 ? "tune" : "schedule", message);
    };
    auto tune_next = [&]() {
      while (true) {
        size_t i = 0;
        {
          std::lock_guard<std::mutex> lock(mu);
          if (next >= firsts.size() || !failure.ok()) return;
          if (cancelled()) {
            failure = absl::CancelledError("compile cancelled");
            return;
          }
          i = firsts[next++];
          in_flight[i] = 0;
          p.set_best_so_far_ms(0);
          progress_locked(absl::StrCat("group ", i, " (", workloads[i].op_summary, ")"));
        }
        const Workload& w = workloads[i];
        auto outcome = tuner_->Tune(
            w, target_key, target, trials, search,
            [&](const TuneProgress& tp) {
              std::lock_guard<std::mutex> lock(mu);
              in_flight[i] = tp.trials_done;
              p.set_best_so_far_ms(tp.best_ms);
              progress_locked(absl::StrCat("group ", i, " (", w.op_summary, "): ", tp.trials_done, "/",
                                           tp.trials_total, " trials"));
            },
            cancelled, pay_after_cancel);
        std::lock_guard<std::mutex> lock(mu);
        in_flight.erase(i);
        if (!outcome.ok()) {
          if (failure.ok()) {
            failure = absl::Status(outcome.status().code(), absl::StrCat("tuning group ", i, " (", w.op_summary,
                                                                         "): ", outcome.status().message()));
          }
          return;
        }
        trials_measured += outcome->trials_measured;
        tuned[w.key] = *outcome;
        progress_locked(absl::StrCat("group ", i, " (", w.op_summary, ") done"));
      }
    };
    std::vector<std::thread> helpers;
    for (int k = 1; k < parallel && k < static_cast<int>(firsts.size()); ++k) helpers.emplace_back(tune_next);
    tune_next();
    for (std::thread& t : helpers) t.join();
    if (!failure.ok()) return failure;
    p.set_groups_done(static_cast<int>(workloads.size()));
    p.set_trials_measured(trials_measured);
  }

  // 5. Codegen and package.
  report("codegen", "generating code and writing the package");
  std::vector<ScheduleConfig> configs;
  PackageOptions popts;
  for (const Workload& w : workloads) {
    const TuneOutcome& t = tuned[w.key];
    configs.push_back(t.config);
    popts.provenance.push_back(ProvenanceOf(t, target_key));
  }
  popts.model_name = request.model_name();
  if (target.is_gpu()) {
    popts.target = HostFarmTarget();
    popts.gpu = GpuPackageOptions{target.gpu(), ptxas_};
  } else {
    popts.target = target.cpu();
  }
  popts.tuned_threads = ParseRecordTargetKey(target_key).threads;
  ASSIGN_OR_RETURN(PackageBytes pkg, BuildPackage(model, configs, popts));

  // 6. Store: the artifact and the compile key that finds it again.
  report("package", "storing the package");
  ASSIGN_OR_RETURN(std::string digest, db_->PutArtifact(pkg.bytes));
  if (digest != pkg.digest) return absl::InternalError("artifact store digest differs from the package's");
  tuningdb::CompileEntry entry;
  entry.compile_key = CompileKeyFor(request, target_key);
  entry.package_digest = digest;
  entry.package_size = static_cast<int64_t>(pkg.bytes.size());
  entry.created_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
  // 7. The whole-model check, when this package would replace another under
  // the key (not for a progressive compile's first answer, which must not
  // wait): the previous package stays if the new one is slower.
  CompileOutput out;
  kiln::v1::CompileResult& r = out.result;
  ASSIGN_OR_RETURN(std::optional<tuningdb::CompileEntry> previous, db_->GetCompileEntry(entry.compile_key));
  if (checker_ != nullptr && !request.progressive() && previous && previous->package_digest != digest) {
    ASSIGN_OR_RETURN(bool present, db_->HasArtifact(previous->package_digest));
    if (present && SameKernelsAs(*db_, previous->package_digest, pkg.bytes)) {
      // Only the records behind the same schedules changed (a re-measurement,
      // an import): the code is the same, there is nothing to time.
      r.mutable_model_check()->set_previous_digest(previous->package_digest);
      r.mutable_model_check()->set_message(
          "same schedules as the package it replaces (only the records behind them changed): replaced it untimed");
    } else if (present) {
      report("check", "timing the whole model against the package it would replace");
      *r.mutable_model_check() = checker_->Compare(target_key, previous->package_digest, digest, cancelled);
      if (r.model_check().kept_previous()) {
        ASSIGN_OR_RETURN(std::optional<std::string> kept, db_->GetArtifact(previous->package_digest));
        if (kept) {
          entry = *previous;
          pkg.bytes = *std::move(kept);
        } else {
          r.mutable_model_check()->set_kept_previous(false);
          r.mutable_model_check()->set_message(
              absl::StrCat(r.model_check().message(), ", but it has left the artifact store; replaced it"));
        }
      }
    }
  }
  r.set_package_digest(entry.package_digest);
  r.set_package_size(static_cast<int64_t>(pkg.bytes.size()));
  r.set_trials_measured(trials_measured);
  r.set_target(target_key);
  for (const std::string& w : warnings) r.add_warnings(w);
  r.set_tuning_stop(tuning_stop);
  r.set_tuning_in_background(tuning_left);
  for (size_t i = 0; i < partition.groups.size(); ++i) {
    const FusionGroup& g = partition.groups[i];
    const TuneOutcome& t = tuned[workloads[i].key];
    kiln::v1::GroupReport* gr = r.add_groups();
    gr->set_index(static_cast<int>(i));
    gr->set_workload_key(workloads[i].key);
    gr->set_kind(g.kind);
    for (const Node* n : g.nodes) {
      gr->add_ops(n->op_type());
      gr->add_nodes(n->name());
    }
    gr->set_schedule_config(configs[i].ToString());
    gr->set_median_ms(t.median_ms);
    gr->set_from_database(t.from_database);
    gr->set_trials_measured(t.trials_measured);
    *gr->mutable_provenance() = popts.provenance[i];
  }
  // The answer a later compile of the key gets from the cache while no
  // record of these workloads is added; only when none was added during
  // this compile (by its tuning or another's), so that none escaped its choices.
  ASSIGN_OR_RETURN(std::string records_after, db_->RecordsSeen(distinct_workloads, target_key, kScheduleSpaceVersion));
  if (trials_satisfied >= 0 && records_after == records_before) {
    entry.result = CacheAnswer(r).SerializeAsString();
    entry.trials = trials_satisfied;
    entry.records_seen = records_after;
  } else {
    entry.result.clear();
    entry.records_seen.clear();
  }
  RETURN_IF_ERROR(db_->PutCompileEntry(entry));
  // Code generation frees most of what it allocated, in many threads' malloc
  // arenas; glibc keeps freed pages mapped, and a server compiling new models
  // all day grew ~0.5 MiB per compile that way (bench/load_bench.cc). Give
  // them back: a few milliseconds, once per compile that generated code.
  malloc_trim(0);
  r.set_compile_seconds(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  LogInfo("compiled", {{"model", request.model_name()}, {"digest", digest},
                       {"groups", absl::StrCat(partition.groups.size())},
                       {"trials", absl::StrCat(trials_measured)}});
  return out;
}

absl::StatusOr<std::optional<CompileOutput>> CompilePipeline::FromCache(const kiln::v1::CompileRequest& request,
                                                                        const std::string& target_key) const {
  if (request.budget_trials() > 0 || request.budget_seconds() > 0) return std::nullopt;  // always tunes on
  ASSIGN_OR_RETURN(std::optional<tuningdb::CompileEntry> entry, db_->GetCompileEntry(CompileKeyFor(request, target_key)));
  if (!entry || entry->result.empty() || std::max(0, request.trials_per_group()) > entry->trials) return std::nullopt;
  ASSIGN_OR_RETURN(std::string seen,
                   db_->RecordsSeen(tuningdb::TuningDb::WorkloadsOfRecordsSeen(entry->records_seen), target_key,
                                    kScheduleSpaceVersion));
  if (seen != entry->records_seen) return std::nullopt;  // records added since: compile again
  ASSIGN_OR_RETURN(bool present, db_->HasArtifact(entry->package_digest));
  CompileOutput out;
  if (!present || !out.result.ParseFromString(entry->result)) return std::nullopt;
  return out;
}

bool CompilePipeline::LeftToTune(const std::vector<Workload>& workloads, const std::string& target_key,
                                  const Target& target, int trials) const {
  if (trials <= 0) return false;
  std::set<std::string> seen;
  for (const Workload& w : workloads) {
    if (!seen.insert(w.key).second) continue;
    auto measured = db_->MeasuredConfigs(w.key, target_key, kScheduleSpaceVersion);
    const size_t goal = std::min<size_t>(trials, EnumerateSchedules(*w.graph, target).size());
    if (!measured.ok() || measured->size() < goal) return true;
  }
  return false;
}

std::string CompileKeyFor(const kiln::v1::CompileRequest& request, const std::string& target_key) {
  const std::string model_bytes = request.has_graph() ? request.graph().SerializeAsString() : request.onnx_model();
  return CompileKey(model_bytes, request.shapes(), target_key);
}

absl::StatusOr<kiln::v1::TuningReport> CompilePipeline::Report(const kiln::v1::ReportRequest& request) {
  if (request.subject_case() == kiln::v1::ReportRequest::kJobId) {
    ASSIGN_OR_RETURN(std::optional<tuningdb::TuningJob> job, db_->GetJob(request.job_id()));
    if (!job) return absl::NotFoundError(absl::StrCat("no tuning job ", request.job_id(), " in ", db_->path()));
    ASSIGN_OR_RETURN(kiln::v1::TuningReport report,
                     ReportJob(*db_, request.job_id(), tuner_->ResolveTarget(job->target_key)));
    report.set_model_name(request.model_name());
    return report;
  }
  if (request.subject_case() == kiln::v1::ReportRequest::SUBJECT_NOT_SET) {
    return absl::InvalidArgumentError("report request names no model and no job");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Graph> graph,
                   ImportRequestModel(request.onnx_model(), request.has_graph() ? &request.graph() : nullptr,
                                      request.shapes()));
  RETURN_IF_ERROR(CheckModelLimits(*graph, model_limits_));
  ASSIGN_OR_RETURN(auto resolved, ResolveTarget(request.target(), request.threads()));
  ASSIGN_OR_RETURN(PreparedModel model, PrepareModel(std::move(graph), PrepareOptionsFor(resolved.second)));
  ASSIGN_OR_RETURN(kiln::v1::TuningReport report, ReportModel(*db_, model, resolved.first, resolved.second));
  report.set_model_name(request.model_name());
  return report;
}

}  // namespace kiln::server
