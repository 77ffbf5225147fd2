// One compile request, start to end: import, partition, key workloads, tune
// each distinct workload, generate code, write and store the package. Progress
// is reported through a callback; the gRPC layer streams it.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kiln/v1/compile.pb.h"
#include "kiln/v1/report.pb.h"
#include "server/admission.h"
#include "server/model_check.h"
#include "server/tuner.h"
#include "tuning_db/tuning_db.h"

namespace kiln::server {

struct CompileOutput {
  kiln::v1::CompileResult result;
};

// The key under which a compile's package is remembered for lookups: model
// bytes, bound shapes, target and compiler version.
std::string CompileKey(const std::string& model_bytes,
                       const google::protobuf::RepeatedPtrField<kiln::v1::ShapeBinding>& shapes,
                       const std::string& target_key);

// CompileKey of a request's model (ONNX bytes, or the serialized graph).
std::string CompileKeyFor(const kiln::v1::CompileRequest& request, const std::string& target_key);

class CompilePipeline {
 public:
  // `checker` times a new package against the one it would replace (null: no
  // whole-model check; the new package always replaces the old). Every
  // model, of a compile or a report, is held to `model_limits` once parsed.
  // `ptxas` is the assembler GPU packages are built with (PtxAssembler::Find:
  // empty looks on the PATH and in /usr/local/cuda; none: PTX-only packages).
  CompilePipeline(tuningdb::TuningDb* db, Tuner* tuner, const ModelChecker* checker,
                  ModelLimits model_limits = {}, std::string ptxas = "")
      : db_(db), tuner_(tuner), checker_(checker), model_limits_(model_limits), ptxas_(std::move(ptxas)) {}

  // Resolves a request's target, run on `threads` (a request's threads; 0
  // is 1), to the record target key (RecordTargetKey) and codegen target:
  //   "" / "cpu" / "cpu:<name>"  this server's CPU, or a named one
  //   "cuda"                     the GPU the farm's live GPU workers are (the
  //                              key most of them measure for)
  //   "cuda:sm_XY"               that SM: the farm's workers of it, else the
  //                              bare "cuda/sm_XY" (no records: untuned)
  // INVALID_ARGUMENT for an unknown name, a negative or absurd thread count,
  // threads on a GPU, or "cuda" while no GPU worker is registered.
  absl::StatusOr<std::pair<std::string, Target>> ResolveTarget(const std::string& target, int threads) const;

  // `tuning_allowed` (optional) is asked once the request is known to want
  // tuning: when it refuses, the compile ends with its status unless the
  // tuning database already answers every workload (nothing would be
  // measured, now or in the background); see AdmissionControl.
  // `pay_after_cancel` (optional) pays for the trials of the tuning jobs this
  // compile leaves running when `cancelled` ends it (Tuner::Tune).
  absl::StatusOr<CompileOutput> Run(const kiln::v1::CompileRequest& request,
                                    const std::function<void(const kiln::v1::Progress&)>& on_progress,
                                    const std::function<bool()>& cancelled,
                                    const std::function<absl::Status()>& tuning_allowed = nullptr,
                                    const Tuner::TrialPayer& pay_after_cancel = nullptr);

  // What the database holds on tuning the request's model (partitioned as a
  // compile would) or job; see server/tuning_report.h.
  absl::StatusOr<kiln::v1::TuningReport> Report(const kiln::v1::ReportRequest& request);

 private:
  // The compile cache's answer for the request (nullopt: compile): the
  // result an earlier compile of its key stored, when the request asks no
  // budget and no more trials than that compile's records satisfy, no record
  // of its workloads was added since, and its package is still stored.
  absl::StatusOr<std::optional<CompileOutput>> FromCache(const kiln::v1::CompileRequest& request,
                                                         const std::string& target_key) const;

  // Whether some distinct workload has fewer measured schedules than `trials`
  // (or its whole space, when smaller) on the target.
  bool LeftToTune(const std::vector<Workload>& workloads, const std::string& target_key, const Target& target,
                  int trials) const;

  // ResolveTarget for "cuda..." names.
  absl::StatusOr<std::pair<std::string, Target>> ResolveGpuTarget(const std::string& target, int threads) const;

  tuningdb::TuningDb* db_;
  Tuner* tuner_;
  const ModelChecker* checker_;
  const ModelLimits model_limits_;
  const std::string ptxas_;
};

}  // namespace kiln::server
