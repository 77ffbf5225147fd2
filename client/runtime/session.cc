// Session: buffer binding and step execution over the thread pool.
#include "client/runtime/session.h"

#include <sys/mman.h>

#include <chrono>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace kiln::runtime {
namespace {

using kiln::v1::PackageBuffer;

// Large buffers come from mmap: zeroed lazily, so an unused arena costs nothing.
constexpr int64_t kMmapThreshold = int64_t{1} << 20;

void* AllocateZeroed(int64_t bytes) {
  if (bytes >= kMmapThreshold) {
    void* p = mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
  }
  size_t rounded = static_cast<size_t>((bytes + 63) / 64 * 64);
  if (rounded == 0) rounded = 64;
  void* p = std::aligned_alloc(64, rounded);
  if (p != nullptr) std::memset(p, 0, rounded);
  return p;
}

void FreeZeroed(void* p, int64_t bytes) {
  if (bytes >= kMmapThreshold) {
    munmap(p, static_cast<size_t>(bytes));
  } else {
    std::free(p);
  }
}

std::string Describe(const kiln::v1::PackageTensor& t) {
  return absl::StrCat(kiln::v1::DataType_Name(t.dtype()), "[", absl::StrJoin(t.dims(), ","), "]");
}

}  // namespace

absl::StatusOr<std::unique_ptr<Session>> Session::Create(std::shared_ptr<const Package> package,
                                                         ThreadPool* pool) {
  if (package == nullptr) return absl::InvalidArgumentError("session: null package");
  const kiln::v1::PackageManifest& m = package->manifest();
  std::unique_ptr<Session> s(new Session());
  s->package_ = package;
  s->pool_ = pool;
  auto allocate = [&](int64_t bytes, const std::string& what) -> absl::StatusOr<void*> {
    void* p = AllocateZeroed(bytes);
    if (p == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("package '", package->name(), "': cannot allocate ", bytes, " bytes for ", what));
    }
    s->owned_.push_back({p, bytes});
    return p;
  };
  ASSIGN_OR_RETURN(void* arena, allocate(m.arena_bytes(), "the arena"));
  s->buffers_.resize(m.buffers_size(), nullptr);
  for (int i = 0; i < m.buffers_size(); ++i) {
    const PackageBuffer& b = m.buffers(i);
    switch (b.kind()) {
      case PackageBuffer::INPUT:
      case PackageBuffer::OUTPUT: {
        ASSIGN_OR_RETURN(s->buffers_[i], allocate(b.size_bytes(), absl::StrCat("buffer ", i)));
        break;
      }
      case PackageBuffer::CONSTANT:
        // The kernels' ABI passes void* const*; constants are never written.
        s->buffers_[i] = const_cast<uint8_t*>(package->weights()) + b.offset();
        break;
      case PackageBuffer::SCRATCH:
        s->buffers_[i] = static_cast<uint8_t*>(arena) + b.offset();
        break;
      default:
        return absl::InternalError("unverified buffer kind");
    }
  }
  s->input_bound_.assign(m.inputs_size(), false);
  if (m.steps_size() > 0) {
    ASSIGN_OR_RETURN(const LoadedObject* object, package->Object());
    for (int i = 0; i < m.steps_size(); ++i) {
      const kiln::v1::PackageStep& ps = m.steps(i);
      auto fn = object->Lookup(ps.symbol());
      if (!fn.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("package '", package->name(), "': step ", i,
                                                       ": kernel '", ps.symbol(), "' is not in the code object"));
      }
      Step step;
      step.kernel = reinterpret_cast<Kernel>(*fn);
      step.num_tasks = ps.num_tasks();
      for (int a : ps.args()) step.args.push_back(s->buffers_[a]);
      s->steps_.push_back(std::move(step));
    }
  }
  return s;
}

Session::~Session() {
  for (const auto& [p, bytes] : owned_) FreeZeroed(p, bytes);
}

absl::Status Session::SetInput(const std::string& name, const void* data, size_t bytes) {
  const kiln::v1::PackageManifest& m = package_->manifest();
  for (int i = 0; i < m.inputs_size(); ++i) {
    const kiln::v1::PackageTensor& t = m.inputs(i);
    if (t.name() != name) continue;
    const int64_t expected = m.buffers(t.buffer()).size_bytes();
    if (static_cast<int64_t>(bytes) != expected) {
      return absl::InvalidArgumentError(absl::StrCat("input '", name, "': expected ", expected, " bytes (",
                                                     Describe(t), "), got ", bytes));
    }
    if (bytes > 0 && data == nullptr) return absl::InvalidArgumentError(absl::StrCat("input '", name, "': null data"));
    if (bytes > 0) std::memcpy(buffers_[t.buffer()], data, bytes);
    input_bound_[i] = true;
    return absl::OkStatus();
  }
  std::vector<std::string> names;
  for (const auto& t : m.inputs()) names.push_back(t.name());
  return absl::NotFoundError(absl::StrCat("no input named '", name, "' (inputs: ", absl::StrJoin(names, ", "), ")"));
}

absl::Status Session::Run(std::vector<double>* step_seconds) {
  for (int i = 0; i < num_inputs(); ++i) {
    if (!input_bound_[i]) {
      return absl::FailedPreconditionError(absl::StrCat("input '", input_info(i).name(), "' is not bound"));
    }
  }
  if (step_seconds != nullptr) step_seconds->resize(steps_.size(), 0.0);
  for (size_t i = 0; i < steps_.size(); ++i) {
    const Step& step = steps_[i];
    if (step.num_tasks == 0) continue;
    auto start = step_seconds != nullptr ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
    void* const* args = step.args.data();
    if (pool_ != nullptr && pool_->num_threads() > 1 && step.num_tasks > 1) {
      Kernel kernel = step.kernel;
      pool_->ParallelFor(step.num_tasks, [kernel, args](int64_t b, int64_t e) { kernel(args, b, e); });
    } else {
      step.kernel(args, 0, step.num_tasks);
    }
    if (step_seconds != nullptr) {
      (*step_seconds)[i] += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
  }
  return absl::OkStatus();
}

const void* Session::OutputData(int index) const {
  return buffers_[package_->manifest().outputs(index).buffer()];
}

size_t Session::OutputBytes(int index) const {
  const kiln::v1::PackageManifest& m = package_->manifest();
  return static_cast<size_t>(m.buffers(m.outputs(index).buffer()).size_bytes());
}

}  // namespace kiln::runtime
