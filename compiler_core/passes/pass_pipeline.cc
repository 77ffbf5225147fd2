// Running a pass pipeline: verify, time, dump.
#include "compiler_core/passes/pass_pipeline.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "compiler_core/frontend/verifier.h"

namespace kiln {

std::vector<std::string> PassPipeline::PassNames() const {
  std::vector<std::string> names;
  for (const auto& p : passes_) names.push_back(p->name());
  return names;
}

absl::StatusOr<std::vector<PassRecord>> PassPipeline::Run(Graph& graph,
                                                          const PassPipelineOptions& options) const {
  std::vector<PassRecord> records;
  for (const auto& pass : passes_) {
    auto start = std::chrono::steady_clock::now();
    absl::StatusOr<bool> changed = pass->Run(graph);
    PassRecord r;
    r.name = pass->name();
    r.milliseconds = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (!changed.ok()) {
      return absl::Status(changed.status().code(),
                          absl::StrCat("pass ", r.name, ": ", changed.status().message()));
    }
    r.changed = *changed;
    if (r.changed && options.verify) {
      if (absl::Status s = VerifyGraph(graph); !s.ok()) {
        return absl::InternalError(absl::StrCat("pass ", r.name, " left an invalid graph: ", s.message()));
      }
    }
    if (options.dump && (options.dump_after.count(r.name) || options.dump_after.count("all"))) {
      options.dump(r.name, graph.ToText());
    }
    records.push_back(std::move(r));
  }
  return records;
}

}  // namespace kiln
