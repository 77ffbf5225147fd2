// ReferenceCache: a byte-bounded LRU map of references.
#include "worker/reference_cache.h"

namespace kiln::worker {

int64_t Reference::Bytes() const {
  int64_t n = 0;
  for (const auto& [name, t] : inputs) n += t.size_bytes();
  for (const Tensor& t : outputs) n += t.size_bytes();
  return n;
}

absl::StatusOr<std::shared_ptr<const Reference>> ReferenceCache::GetOrCompute(
    const std::string& key, const std::function<absl::StatusOr<Reference>()>& compute) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      entries_.splice(entries_.begin(), entries_, it->second);
      ++hits_;
      return entries_.front().second;
    }
    ++misses_;
  }
  // Computed outside the lock: other workloads' measurements go on meanwhile.
  absl::StatusOr<Reference> computed = compute();
  if (!computed.ok()) return computed.status();
  auto reference = std::make_shared<const Reference>(*std::move(computed));
  Put(key, reference);
  return reference;
}

bool ReferenceCache::Contains(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  return index_.count(key) > 0;
}

void ReferenceCache::Put(const std::string& key, std::shared_ptr<const Reference> reference) {
  const int64_t size = reference->Bytes();
  if (size > max_bytes_) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (index_.count(key) > 0) return;  // another thread kept its own meanwhile
  entries_.emplace_front(key, std::move(reference));
  index_[key] = entries_.begin();
  bytes_ += size;
  while (bytes_ > max_bytes_) {
    bytes_ -= entries_.back().second->Bytes();
    index_.erase(entries_.back().first);
    entries_.pop_back();
  }
}

int64_t ReferenceCache::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

int64_t ReferenceCache::misses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return misses_;
}

int64_t ReferenceCache::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

ReferenceCache& ReferenceCache::Process() {
  static ReferenceCache* cache = new ReferenceCache(int64_t{1} << 30);
  return *cache;
}

}  // namespace kiln::worker
