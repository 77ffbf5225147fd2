// A pass pipeline is data: an ordered list of passes, run with the verifier
// between them, each one timed, and a textual dump after the passes asked for.
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler_core/passes/pass.h"

namespace kiln {

struct PassRecord {
  std::string name;
  bool changed = false;
  double milliseconds = 0;
};

struct PassPipelineOptions {
  // Pass names after which the graph is dumped ("all" dumps after every pass).
  std::set<std::string> dump_after;
  // Receives (pass name, Graph::ToText()) for every dump.
  std::function<void(const std::string&, const std::string&)> dump;
  // Run VerifyGraph after every pass that changed the graph.
  bool verify = true;
};

class PassPipeline {
 public:
  explicit PassPipeline(std::string name) : name_(std::move(name)) {}
  PassPipeline& Add(std::unique_ptr<GraphPass> pass) {
    passes_.push_back(std::move(pass));
    return *this;
  }
  const std::string& name() const { return name_; }
  std::vector<std::string> PassNames() const;

  // Runs every pass once, in order. A verifier failure after a pass is an
  // INTERNAL error naming the pass: a pass broke an invariant.
  absl::StatusOr<std::vector<PassRecord>> Run(Graph& graph, const PassPipelineOptions& options) const;

 private:
  std::string name_;
  std::vector<std::unique_ptr<GraphPass>> passes_;
};

}  // namespace kiln
