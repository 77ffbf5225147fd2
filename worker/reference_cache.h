// The reference a candidate is checked against, kept per worker process:
// every candidate of a tuning job measures the same workload on the same
// deterministic inputs, and the reference interpreter takes seconds on a
// large one (a 1024^3 MatMul: ~3.5 s, against well under a millisecond for
// the kernel being measured on a GPU).
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler_core/ir/tensor.h"

namespace kiln::worker {

// A workload's measurement inputs and the interpreter's outputs for them.
struct Reference {
  std::map<std::string, Tensor> inputs;  // by graph input name
  std::vector<Tensor> outputs;           // per graph output
  int64_t Bytes() const;
};

// References by key, least recently used first out once their bytes pass
// max_bytes (a reference larger than that is computed and not kept).
// Thread-safe; concurrent misses of one key may each compute it.
class ReferenceCache {
 public:
  explicit ReferenceCache(int64_t max_bytes) : max_bytes_(max_bytes) {}

  // The reference under `key`, or `compute`'s (kept when it succeeds).
  absl::StatusOr<std::shared_ptr<const Reference>> GetOrCompute(
      const std::string& key, const std::function<absl::StatusOr<Reference>()>& compute);

  // Whether `key` is held (neither a hit nor a miss).
  bool Contains(const std::string& key) const;
  // Keeps `reference` under `key` (replacing nothing: a key already held
  // stays as it is), as GetOrCompute keeps what it computed.
  void Put(const std::string& key, std::shared_ptr<const Reference> reference);

  int64_t hits() const;
  int64_t misses() const;
  int64_t bytes() const;

  // The process's cache, of 1 GiB.
  static ReferenceCache& Process();

 private:
  using Entry = std::pair<std::string, std::shared_ptr<const Reference>>;
  const int64_t max_bytes_;
  mutable std::mutex mu_;
  std::list<Entry> entries_;  // most recently used first
  std::map<std::string, std::list<Entry>::iterator> index_;
  int64_t bytes_ = 0, hits_ = 0, misses_ = 0;
};

}  // namespace kiln::worker
