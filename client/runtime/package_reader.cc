// Package loading and verification: checksum, digest, and bounds of every manifest field.
#include "client/runtime/package_reader.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <tuple>

#include "base/cpu_features.h"
#include "base/digest.h"
#include "proto/kiln/v1/package_layout.h"

namespace kiln::runtime {
namespace {

// Sizes beyond this are corrupt, not big models.
constexpr int64_t kMaxBytes = int64_t{1} << 42;

// Page aligned: the file's page-aligned sections stay so in memory (see
// package::kPageAlignment).
uint8_t* AllocateAligned(size_t bytes) {
  constexpr size_t kPage = static_cast<size_t>(package::kPageAlignment);
  size_t rounded = (bytes + kPage - 1) / kPage * kPage;
  if (rounded == 0) rounded = kPage;
  return static_cast<uint8_t*>(std::aligned_alloc(kPage, rounded));
}

// [offset, offset + size) lies in [0, limit), with no overflow.
bool InRange(int64_t offset, int64_t size, int64_t limit) {
  return offset >= 0 && size >= 0 && offset <= limit && size <= limit - offset;
}

// Why the section `name` at [offset, offset + size) is not in a body of
// `body` bytes (of a file of `file` bytes), or "" when it is.
std::string SectionOutOfRange(const std::string& name, int64_t offset, int64_t size, int64_t body, size_t file) {
  if (InRange(offset, size, body)) return "";
  return Cat(name, " section (offset ", offset, ", size ", size, ") out of range of the file (", file, " bytes)");
}

const char* KindName(int kind) {
  switch (kind) {
    case ManifestBuffer::kInput:
      return "input";
    case ManifestBuffer::kOutput:
      return "output";
    case ManifestBuffer::kConstant:
      return "constant";
    case ManifestBuffer::kScratch:
      return "scratch";
    default:
      return "unspecified";
  }
}

// FAILED_PRECONDITION when the package's code needs CPU features this host
// lacks: loading it would end in an illegal instruction, not an error.
// The first two arguments of `step` that share a byte (package::
// ArgumentBytes), as indices; {-1, -1} when none do.
std::pair<int, int> OverlappingArguments(const Manifest& m, const ManifestStep& step, bool gpu) {
  std::vector<DeviceRange> ranges;
  for (int32_t a : step.args) {
    const ManifestBuffer& b = m.buffers[static_cast<size_t>(a)];
    const package::ArgumentBytes r = package::ArgumentBytesOf(a, b.kind == ManifestBuffer::kConstant,
                                                              b.kind == ManifestBuffer::kScratch, b.offset,
                                                              b.size_bytes, gpu);
    ranges.push_back(
        DeviceRange{static_cast<int>(r.space), static_cast<uint64_t>(r.begin), static_cast<uint64_t>(r.end)});
  }
  return FirstOverlap(ranges);
}

Status CheckHostRuns(const Manifest& m, const std::string& ctx) {
  std::vector<std::string> missing = MissingHostFeatures(m.target_features);
  if (missing.empty()) return OkStatus();
  std::string names;
  for (const std::string& f : missing) names += (names.empty() ? "" : ", ") + f;
  std::string target = m.target_cpu;
  if (!m.isa_level.empty()) target += " (" + m.isa_level + ")";
  return FailedPreconditionError(Cat(ctx, ": compiled for ", target, ", which needs CPU features this host lacks: ",
                                     names, "; this host runs ", HostIsaLevel(),
                                     ": compile for it, or for a level it runs (kiln compile --target ",
                                     HostIsaLevel(), ")"));
}

}  // namespace

Result<std::unique_ptr<Package>> Package::Load(const std::string& path, const CudaDriver* cuda) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    return NotFoundError(Cat("package '", path, "': cannot open: ", std::strerror(errno)));
  }
  std::unique_ptr<Package> pkg(new Package());
  pkg->name_ = path;
  pkg->cuda_ = cuda;
  Status status;
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    status = InvalidArgumentError("not a regular file");
  }
  const int64_t size = st.st_size;
  if (status.ok()) {
    pkg->size_ = static_cast<size_t>(size);
    pkg->data_ = AllocateAligned(pkg->size_);
    if (pkg->data_ == nullptr) {
      status = ResourceExhaustedError(Cat("cannot allocate ", size, " bytes"));
    } else if (std::fread(pkg->data_, 1, pkg->size_, f) != pkg->size_) {
      status = DataLossError("short read");
    }
  }
  std::fclose(f);
  if (!status.ok()) {
    return Status(status.code(), Cat("package '", path, "': ", status.message()));
  }
  RT_RETURN_IF_ERROR(pkg->Verify());
  return pkg;
}

Result<std::unique_ptr<Package>> Package::FromBytes(std::string_view bytes, const std::string& name,
                                                    const CudaDriver* cuda) {
  std::unique_ptr<Package> pkg(new Package());
  pkg->name_ = name;
  pkg->cuda_ = cuda;
  pkg->size_ = bytes.size();
  pkg->data_ = AllocateAligned(bytes.size());
  if (pkg->data_ == nullptr) {
    return ResourceExhaustedError(Cat("package '", name, "': cannot allocate ", bytes.size(), " bytes"));
  }
  std::memcpy(pkg->data_, bytes.data(), bytes.size());
  RT_RETURN_IF_ERROR(pkg->Verify());
  return pkg;
}

Package::~Package() {
  cuda_modules_.clear();
  object_.reset();
  std::free(weights_copy_);
  std::free(data_);
}

std::string_view Package::code() const {
  return std::string_view(reinterpret_cast<const char*>(data_) + manifest_.code_offset,
                          static_cast<size_t>(manifest_.code_size));
}

Status Package::Verify() {
  const std::string ctx = Cat("package '", name_, "'");
  auto invalid = [&](const std::string& what) { return InvalidArgumentError(Cat(ctx, ": ", what)); };
  const int64_t size = static_cast<int64_t>(size_);
  if (size < package::kHeaderSize + package::kTrailerSize) {
    return invalid(
        Cat("truncated (", size, " bytes, a package has at least ", package::kHeaderSize + package::kTrailerSize, ")"));
  }
  package::Header header;
  std::memcpy(&header, data_, sizeof(header));
  if (std::memcmp(header.magic, package::kMagic, sizeof(package::kMagic)) != 0) {
    return invalid("bad magic (not a Kiln package)");
  }
  if (header.format_version != package::kFormatVersion) {
    return invalid(Cat("unsupported format version ", header.format_version, " (this runtime reads ",
                       package::kFormatVersion, ")"));
  }
  const int64_t body = size - package::kTrailerSize;
  const std::string_view bytes(reinterpret_cast<const char*>(data_), static_cast<size_t>(size_));
  // One pass: the body's digest must be the trailer; the whole file's is the
  // package's content digest.
  Sha256Hasher hasher;
  hasher.Update(bytes.substr(0, static_cast<size_t>(body)));
  const Sha256Bytes hash = hasher.Finish();
  if (std::memcmp(hash.data(), data_ + body, hash.size()) != 0) {
    return DataLossError(ctx + ": checksum mismatch");
  }
  hasher.Update(bytes.substr(static_cast<size_t>(body)));
  digest_ = ContentDigestOf(hasher.Finish());

  if (header.manifest_offset > static_cast<uint64_t>(body) || header.manifest_size > static_cast<uint64_t>(body) ||
      static_cast<int64_t>(header.manifest_offset) < package::kHeaderSize ||
      !InRange(static_cast<int64_t>(header.manifest_offset), static_cast<int64_t>(header.manifest_size), body)) {
    return invalid(Cat("manifest (offset ", header.manifest_offset, ", size ", header.manifest_size,
                       ") out of range of the file (", size, " bytes)"));
  }
  Result<Manifest> decoded = DecodeManifest(data_ + header.manifest_offset, header.manifest_size);
  if (!decoded.ok()) return invalid(decoded.status().message());
  manifest_ = std::move(*decoded);
  const Manifest& m = manifest_;
  if (m.format_version != 0 && m.format_version != static_cast<int32_t>(package::kFormatVersion)) {
    return invalid(Cat("manifest format version ", m.format_version, " is unsupported"));
  }
  if (m.device != Device::kCpu && m.device != Device::kCuda) {
    return FailedPreconditionError(Cat(ctx, ": the package is for device kind ", static_cast<int>(m.device),
                                       ", which this runtime does not know (it runs CPU and CUDA packages)"));
  }
  // A CUDA package runs no host code: the host's CPU features do not matter.
  if (!is_cuda()) RT_RETURN_IF_ERROR(CheckHostRuns(m, ctx));
  for (const auto& [name, offset, length] : {std::tuple<const char*, int64_t, int64_t>{"code", m.code_offset, m.code_size},
                                              {"weights", m.weights_offset, m.weights_size}}) {
    if (std::string why = SectionOutOfRange(name, offset, length, body, size); !why.empty()) return invalid(why);
  }
  if (m.arena_bytes < 0 || m.arena_bytes > kMaxBytes) {
    return invalid(Cat("arena size ", m.arena_bytes, " is invalid"));
  }
  if (!is_cuda() && static_cast<int>(m.steps.size()) > 0 && m.code_size == 0) {
    return invalid("package has steps but no code");
  }

  const int num_buffers = static_cast<int>(m.buffers.size());
  for (int i = 0; i < num_buffers; ++i) {
    const ManifestBuffer& b = m.buffers[i];
    std::string bctx = Cat("buffer ", i, b.name.empty() ? "" : Cat(" '", b.name, "'"));
    if (b.kind < ManifestBuffer::kInput || b.kind > ManifestBuffer::kScratch) {
      return invalid(Cat(bctx, ": unknown kind ", static_cast<int>(b.kind)));
    }
    if (b.size_bytes < 0 || b.size_bytes > kMaxBytes) {
      return invalid(Cat(bctx, ": size ", b.size_bytes, " is invalid"));
    }
    if (b.kind == ManifestBuffer::kConstant && !InRange(b.offset, b.size_bytes, m.weights_size)) {
      return invalid(Cat(bctx, ": constant (offset ", b.offset, ", size ", b.size_bytes,
                         ") out of range of the weights (", m.weights_size, " bytes)"));
    }
    if (b.kind == ManifestBuffer::kScratch && !is_cuda() && !InRange(b.offset, b.size_bytes, m.arena_bytes)) {
      return invalid(Cat(bctx, ": scratch (offset ", b.offset, ", size ", b.size_bytes, ") out of range of the arena (",
                         m.arena_bytes, " bytes)"));
    }
  }

  auto check_tensor = [&](const ManifestTensor& t, const char* role) -> Status {
    std::string tctx = Cat(role, " '", t.name, "'");
    if (t.name.empty()) return invalid(Cat(role, " with an empty name"));
    // The C API names tensors by C strings: a NUL inside a name cannot be asked for.
    if (t.name.find('\0') != std::string::npos) {
      return invalid(Cat(role, " '", t.name.substr(0, t.name.find('\0')), "...': name contains a NUL byte"));
    }
    if (t.buffer < 0 || t.buffer >= num_buffers) {
      return invalid(Cat(tctx, ": buffer index ", t.buffer, " out of range (", num_buffers, " buffers)"));
    }
    int64_t bytes = DataTypeSize(t.dtype);
    if (bytes == 0) return invalid(Cat(tctx, ": unsupported dtype ", static_cast<int>(t.dtype)));
    for (int64_t d : t.dims) {
      if (d < 0 || __builtin_mul_overflow(bytes, d, &bytes) || bytes > kMaxBytes) {
        return invalid(Cat(tctx, ": invalid dims"));
      }
    }
    const ManifestBuffer& b = m.buffers[t.buffer];
    if (bytes != b.size_bytes) {
      return invalid(Cat(tctx, ": ", bytes, " bytes but its buffer ", t.buffer, " holds ", b.size_bytes));
    }
    return OkStatus();
  };
  std::set<std::string> names;
  std::vector<int> input_refs(num_buffers, 0);
  for (const ManifestTensor& t : m.inputs) {
    RT_RETURN_IF_ERROR(check_tensor(t, "input"));
    if (!names.insert(t.name).second) return invalid(Cat("input '", t.name, "' appears twice"));
    if (m.buffers[t.buffer].kind != ManifestBuffer::kInput) {
      return invalid(
          Cat("input '", t.name, "': buffer ", t.buffer, " is a ", KindName(m.buffers[t.buffer].kind), " buffer"));
    }
    if (++input_refs[t.buffer] > 1) {
      return invalid(Cat("input '", t.name, "': buffer ", t.buffer, " is bound to two inputs"));
    }
  }
  for (int i = 0; i < num_buffers; ++i) {
    if (m.buffers[i].kind == ManifestBuffer::kInput && input_refs[i] == 0) {
      return invalid(Cat("input buffer ", i, " belongs to no input"));
    }
  }
  names.clear();
  for (const ManifestTensor& t : m.outputs) {
    RT_RETURN_IF_ERROR(check_tensor(t, "output"));
    if (!names.insert(t.name).second) return invalid(Cat("output '", t.name, "' appears twice"));
  }
  for (int s = 0; s < static_cast<int>(m.steps.size()); ++s) {
    const ManifestStep& step = m.steps[s];
    std::string sctx = Cat("step ", s, " ('", step.symbol, "')");
    if (step.symbol.empty()) return invalid(Cat("step ", s, ": empty kernel symbol"));
    if (step.num_tasks < 0) return invalid(Cat(sctx, ": negative task count ", step.num_tasks));
    for (int a = 0; a < static_cast<int>(step.args.size()); ++a) {
      if (step.args[a] < 0 || step.args[a] >= num_buffers) {
        return invalid(
            Cat(sctx, ": argument ", a, " buffer index ", step.args[a], " out of range (", num_buffers, " buffers)"));
      }
    }
    if (is_cuda()) continue;  // VerifyCuda checks the device plan
    const auto [x, y] = OverlappingArguments(m, step, false);
    if (x >= 0) {
      return invalid(Cat(sctx, ": arguments ", x, " (buffer ", step.args[static_cast<size_t>(x)], ") and ", y,
                         " (buffer ", step.args[static_cast<size_t>(y)],
                         ") overlap in the memory plan; its kernel assumes they do not"));
    }
  }

  weights_ = data_ + m.weights_offset;
  if (reinterpret_cast<uintptr_t>(weights_) % package::kAlignment != 0) {
    weights_copy_ = AllocateAligned(static_cast<size_t>(m.weights_size));
    if (weights_copy_ == nullptr) return ResourceExhaustedError(ctx + ": cannot allocate weights");
    std::memcpy(weights_copy_, weights_, static_cast<size_t>(m.weights_size));
    weights_ = weights_copy_;
  }
  if (is_cuda()) RT_RETURN_IF_ERROR(VerifyCuda(ctx));
  return OkStatus();
}

Status Package::VerifyCuda(const std::string& ctx) {
  auto invalid = [&](const std::string& what) { return InvalidArgumentError(Cat(ctx, ": ", what)); };
  const Manifest& m = manifest_;
  if (!m.has_cuda) return invalid("a CUDA package without its CUDA section (kiln.v1.PackageCuda)");
  const ManifestCuda& c = m.cuda;
  const int64_t body = static_cast<int64_t>(size_) - package::kTrailerSize;
  if (c.sm <= 0 || c.sm >= 1000) return invalid(Cat("CUDA SM ", c.sm, " is invalid"));
  for (const auto& [name, offset, length] : {std::tuple<const char*, int64_t, int64_t>{"PTX", c.ptx_offset, c.ptx_size},
                                              {"cubin", c.cubin_offset, c.cubin_size}}) {
    if (std::string why = SectionOutOfRange(name, offset, length, body, size_); !why.empty()) return invalid(why);
  }
  if (!m.steps.empty() && c.ptx_size == 0) return invalid("package has steps but no PTX");
  if (ptx().find('\0') != std::string_view::npos) return invalid("the PTX section contains a NUL byte");
  if (c.arena_bytes < 0 || c.arena_bytes > kMaxBytes) return invalid(Cat("device arena size ", c.arena_bytes, " is invalid"));
  const int64_t align = c.buffer_alignment;
  if (align < 1 || align > 4096 || (align & (align - 1)) != 0) {
    return invalid(Cat("device buffer alignment ", align, " is not a power of two up to 4096"));
  }
  for (size_t i = 0; i < m.buffers.size(); ++i) {
    const ManifestBuffer& b = m.buffers[i];
    const std::string bctx = Cat("buffer ", i, b.name.empty() ? "" : Cat(" '", b.name, "'"));
    if (b.offset % align != 0) {
      return invalid(Cat(bctx, ": device offset ", b.offset, " is not a multiple of ", align));
    }
    if (b.kind != ManifestBuffer::kConstant && !InRange(b.offset, b.size_bytes, c.arena_bytes)) {
      return invalid(Cat(bctx, ": (offset ", b.offset, ", size ", b.size_bytes, ") out of range of the device arena (",
                         c.arena_bytes, " bytes)"));
    }
  }
  for (size_t s = 0; s < m.steps.size(); ++s) {
    const ManifestStep& step = m.steps[s];
    const ManifestLaunch& l = step.launch;
    const std::string sctx = Cat("step ", s, " ('", step.symbol, "')");
    if (l.blocks < 0 || l.blocks > INT32_MAX || l.threads < 1 || l.threads > 1024 || l.shared_bytes < 0) {
      return invalid(Cat(sctx, ": launch of ", l.blocks, " blocks of ", l.threads, " threads with ", l.shared_bytes,
                         " bytes of shared memory is invalid"));
    }
    const auto [x, y] = OverlappingArguments(m, step, true);
    if (x >= 0) {
      return invalid(Cat(sctx, ": arguments ", x, " (buffer ", step.args[static_cast<size_t>(x)], ") and ", y,
                         " (buffer ", step.args[static_cast<size_t>(y)],
                         ") overlap in the device plan; its kernel assumes they do not"));
    }
  }
  // The structure is sound: now the machine must be able to run it.
  if (cuda_ == nullptr) {
    Result<const CudaDriver*> driver = CudaDriver::Get();
    if (!driver.ok()) {
      return FailedPreconditionError(
          Cat(ctx, ": this package is for a CUDA GPU (sm_", c.sm, ") and ", driver.status().message()));
    }
    cuda_ = *driver;
  }
  return OkStatus();
}

std::string_view Package::ptx() const {
  return std::string_view(reinterpret_cast<const char*>(data_) + manifest_.cuda.ptx_offset,
                          static_cast<size_t>(manifest_.cuda.ptx_size));
}

std::string_view Package::cubin() const {
  return std::string_view(reinterpret_cast<const char*>(data_) + manifest_.cuda.cubin_offset,
                          static_cast<size_t>(manifest_.cuda.cubin_size));
}

Result<const CudaModule*> Package::Cuda(int ordinal) const {
  if (!is_cuda()) return FailedPreconditionError(Cat("package '", name_, "' is for the CPU, not a CUDA GPU"));
  std::lock_guard<std::mutex> lock(cuda_mutex_);
  auto it = cuda_modules_.find(ordinal);
  if (it != cuda_modules_.end()) return static_cast<const CudaModule*>(it->second.get());
  RT_ASSIGN_OR_RETURN(std::unique_ptr<CudaModule> module,
                      CudaModule::Load(*cuda_, manifest_, ptx(), cubin(), weights_, ordinal, name_));
  const CudaModule* loaded = module.get();
  cuda_modules_[ordinal] = std::move(module);
  return loaded;
}

Result<const LoadedObject*> Package::Object() const {
  std::call_once(object_once_, [this] {
    auto obj = LoadedObject::Load(code(), Cat("package '", name_, "': code"));
    if (obj.ok()) {
      object_ = std::move(*obj);
    } else {
      object_status_ = obj.status();
    }
  });
  if (!object_status_.ok()) return object_status_;
  return object_.get();
}

}  // namespace kiln::runtime
