// Package loading and verification: checksum, digest, and bounds of every manifest field.
#include "client/runtime/package_reader.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "base/digest.h"
#include "base/status_macros.h"
#include "proto/kiln/v1/package_layout.h"

namespace kiln::runtime {
namespace {

using kiln::v1::PackageBuffer;

// Sizes beyond this are corrupt, not big models.
constexpr int64_t kMaxBytes = int64_t{1} << 42;

uint8_t* AllocateAligned(size_t bytes) {
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  return static_cast<uint8_t*>(std::aligned_alloc(64, rounded));
}

// [offset, offset + size) lies in [0, limit), with no overflow.
bool InRange(int64_t offset, int64_t size, int64_t limit) {
  return offset >= 0 && size >= 0 && offset <= limit && size <= limit - offset;
}

const char* KindName(int kind) {
  switch (kind) {
    case PackageBuffer::INPUT: return "input";
    case PackageBuffer::OUTPUT: return "output";
    case PackageBuffer::CONSTANT: return "constant";
    case PackageBuffer::SCRATCH: return "scratch";
    default: return "unspecified";
  }
}

}  // namespace

int64_t DataTypeSize(kiln::v1::DataType dtype) {
  switch (dtype) {
    case kiln::v1::FLOAT32: return 4;
    case kiln::v1::FLOAT16: return 2;
    case kiln::v1::BFLOAT16: return 2;
    case kiln::v1::FLOAT64: return 8;
    case kiln::v1::INT8: return 1;
    case kiln::v1::INT16: return 2;
    case kiln::v1::INT32: return 4;
    case kiln::v1::INT64: return 8;
    case kiln::v1::UINT8: return 1;
    case kiln::v1::BOOL: return 1;
    case kiln::v1::UINT16: return 2;
    case kiln::v1::UINT32: return 4;
    case kiln::v1::UINT64: return 8;
    default: return 0;
  }
}

absl::StatusOr<std::unique_ptr<Package>> Package::Load(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    return absl::NotFoundError(absl::StrCat("package '", path, "': cannot open: ", std::strerror(errno)));
  }
  std::unique_ptr<Package> pkg(new Package());
  pkg->name_ = path;
  absl::Status status;
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    status = absl::InvalidArgumentError("not a regular file");
  }
  const int64_t size = st.st_size;
  if (status.ok()) {
    pkg->size_ = static_cast<size_t>(size);
    pkg->data_ = AllocateAligned(pkg->size_);
    if (pkg->data_ == nullptr) {
      status = absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", size, " bytes"));
    } else if (std::fread(pkg->data_, 1, pkg->size_, f) != pkg->size_) {
      status = absl::DataLossError("short read");
    }
  }
  std::fclose(f);
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat("package '", path, "': ", status.message()));
  }
  RETURN_IF_ERROR(pkg->Verify());
  return pkg;
}

absl::StatusOr<std::unique_ptr<Package>> Package::FromBytes(std::string_view bytes, const std::string& name) {
  std::unique_ptr<Package> pkg(new Package());
  pkg->name_ = name;
  pkg->size_ = bytes.size();
  pkg->data_ = AllocateAligned(bytes.size());
  if (pkg->data_ == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("package '", name, "': cannot allocate ", bytes.size(), " bytes"));
  }
  std::memcpy(pkg->data_, bytes.data(), bytes.size());
  RETURN_IF_ERROR(pkg->Verify());
  return pkg;
}

Package::~Package() {
  object_.reset();
  std::free(weights_copy_);
  std::free(data_);
}

std::string_view Package::code() const {
  return std::string_view(reinterpret_cast<const char*>(data_) + manifest_.code_offset(),
                          static_cast<size_t>(manifest_.code_size()));
}

absl::Status Package::Verify() {
  const std::string ctx = absl::StrCat("package '", name_, "'");
  auto invalid = [&](const std::string& what) { return absl::InvalidArgumentError(absl::StrCat(ctx, ": ", what)); };
  const int64_t size = static_cast<int64_t>(size_);
  if (size < package::kHeaderSize + package::kTrailerSize) {
    return invalid(absl::StrCat("truncated (", size, " bytes, a package has at least ",
                                package::kHeaderSize + package::kTrailerSize, ")"));
  }
  package::Header header;
  std::memcpy(&header, data_, sizeof(header));
  if (std::memcmp(header.magic, package::kMagic, sizeof(package::kMagic)) != 0) {
    return invalid("bad magic (not a Kiln package)");
  }
  if (header.format_version != package::kFormatVersion) {
    return invalid(absl::StrCat("unsupported format version ", header.format_version, " (this runtime reads ",
                                package::kFormatVersion, ")"));
  }
  const int64_t body = size - package::kTrailerSize;
  const std::string_view bytes(reinterpret_cast<const char*>(data_), static_cast<size_t>(size_));
  const Sha256Bytes hash = Sha256(bytes.substr(0, static_cast<size_t>(body)));
  if (std::memcmp(hash.data(), data_ + body, hash.size()) != 0) {
    return absl::DataLossError(ctx + ": checksum mismatch");
  }
  digest_ = ContentDigest(bytes);

  if (header.manifest_offset > static_cast<uint64_t>(body) || header.manifest_size > static_cast<uint64_t>(body) ||
      static_cast<int64_t>(header.manifest_offset) < package::kHeaderSize ||
      !InRange(static_cast<int64_t>(header.manifest_offset), static_cast<int64_t>(header.manifest_size), body)) {
    return invalid(absl::StrCat("manifest (offset ", header.manifest_offset, ", size ", header.manifest_size,
                                ") out of range of the file (", size, " bytes)"));
  }
  if (!manifest_.ParseFromArray(data_ + header.manifest_offset, static_cast<int>(header.manifest_size))) {
    return invalid("manifest is not a valid kiln.v1.PackageManifest");
  }
  const v1::PackageManifest& m = manifest_;
  if (m.format_version() != 0 && m.format_version() != static_cast<int32_t>(package::kFormatVersion)) {
    return invalid(absl::StrCat("manifest format version ", m.format_version(), " is unsupported"));
  }
  if (!InRange(m.code_offset(), m.code_size(), body)) {
    return invalid(absl::StrCat("code section (offset ", m.code_offset(), ", size ", m.code_size(),
                                ") out of range of the file (", size, " bytes)"));
  }
  if (!InRange(m.weights_offset(), m.weights_size(), body)) {
    return invalid(absl::StrCat("weights section (offset ", m.weights_offset(), ", size ", m.weights_size(),
                                ") out of range of the file (", size, " bytes)"));
  }
  if (m.arena_bytes() < 0 || m.arena_bytes() > kMaxBytes) {
    return invalid(absl::StrCat("arena size ", m.arena_bytes(), " is invalid"));
  }
  if (m.steps_size() > 0 && m.code_size() == 0) return invalid("package has steps but no code");

  const int num_buffers = m.buffers_size();
  for (int i = 0; i < num_buffers; ++i) {
    const v1::PackageBuffer& b = m.buffers(i);
    std::string bctx = absl::StrCat("buffer ", i, b.name().empty() ? "" : absl::StrCat(" '", b.name(), "'"));
    if (b.kind() < PackageBuffer::INPUT || b.kind() > PackageBuffer::SCRATCH) {
      return invalid(absl::StrCat(bctx, ": unknown kind ", static_cast<int>(b.kind())));
    }
    if (b.size_bytes() < 0 || b.size_bytes() > kMaxBytes) {
      return invalid(absl::StrCat(bctx, ": size ", b.size_bytes(), " is invalid"));
    }
    if (b.kind() == PackageBuffer::CONSTANT && !InRange(b.offset(), b.size_bytes(), m.weights_size())) {
      return invalid(absl::StrCat(bctx, ": constant (offset ", b.offset(), ", size ", b.size_bytes(),
                                  ") out of range of the weights (", m.weights_size(), " bytes)"));
    }
    if (b.kind() == PackageBuffer::SCRATCH && !InRange(b.offset(), b.size_bytes(), m.arena_bytes())) {
      return invalid(absl::StrCat(bctx, ": scratch (offset ", b.offset(), ", size ", b.size_bytes(),
                                  ") out of range of the arena (", m.arena_bytes(), " bytes)"));
    }
  }

  auto check_tensor = [&](const v1::PackageTensor& t, const char* role) -> absl::Status {
    std::string tctx = absl::StrCat(role, " '", t.name(), "'");
    if (t.name().empty()) return invalid(absl::StrCat(role, " with an empty name"));
    if (t.buffer() < 0 || t.buffer() >= num_buffers) {
      return invalid(absl::StrCat(tctx, ": buffer index ", t.buffer(), " out of range (", num_buffers,
                                  " buffers)"));
    }
    int64_t bytes = DataTypeSize(t.dtype());
    if (bytes == 0) return invalid(absl::StrCat(tctx, ": unsupported dtype ", static_cast<int>(t.dtype())));
    for (int64_t d : t.dims()) {
      if (d < 0 || __builtin_mul_overflow(bytes, d, &bytes) || bytes > kMaxBytes) {
        return invalid(absl::StrCat(tctx, ": invalid dims"));
      }
    }
    const v1::PackageBuffer& b = m.buffers(t.buffer());
    if (bytes != b.size_bytes()) {
      return invalid(absl::StrCat(tctx, ": ", bytes, " bytes but its buffer ", t.buffer(), " holds ",
                                  b.size_bytes()));
    }
    return absl::OkStatus();
  };
  std::set<std::string> names;
  std::vector<int> input_refs(num_buffers, 0);
  for (const v1::PackageTensor& t : m.inputs()) {
    RETURN_IF_ERROR(check_tensor(t, "input"));
    if (!names.insert(t.name()).second) return invalid(absl::StrCat("input '", t.name(), "' appears twice"));
    if (m.buffers(t.buffer()).kind() != PackageBuffer::INPUT) {
      return invalid(absl::StrCat("input '", t.name(), "': buffer ", t.buffer(), " is a ",
                                  KindName(m.buffers(t.buffer()).kind()), " buffer"));
    }
    if (++input_refs[t.buffer()] > 1) {
      return invalid(absl::StrCat("input '", t.name(), "': buffer ", t.buffer(), " is bound to two inputs"));
    }
  }
  for (int i = 0; i < num_buffers; ++i) {
    if (m.buffers(i).kind() == PackageBuffer::INPUT && input_refs[i] == 0) {
      return invalid(absl::StrCat("input buffer ", i, " belongs to no input"));
    }
  }
  names.clear();
  for (const v1::PackageTensor& t : m.outputs()) {
    RETURN_IF_ERROR(check_tensor(t, "output"));
    if (!names.insert(t.name()).second) return invalid(absl::StrCat("output '", t.name(), "' appears twice"));
  }
  for (int s = 0; s < m.steps_size(); ++s) {
    const v1::PackageStep& step = m.steps(s);
    std::string sctx = absl::StrCat("step ", s, " ('", step.symbol(), "')");
    if (step.symbol().empty()) return invalid(absl::StrCat("step ", s, ": empty kernel symbol"));
    if (step.num_tasks() < 0) return invalid(absl::StrCat(sctx, ": negative task count ", step.num_tasks()));
    for (int a = 0; a < step.args_size(); ++a) {
      if (step.args(a) < 0 || step.args(a) >= num_buffers) {
        return invalid(absl::StrCat(sctx, ": argument ", a, " buffer index ", step.args(a), " out of range (",
                                    num_buffers, " buffers)"));
      }
    }
  }

  weights_ = data_ + m.weights_offset();
  if (reinterpret_cast<uintptr_t>(weights_) % package::kAlignment != 0) {
    weights_copy_ = AllocateAligned(static_cast<size_t>(m.weights_size()));
    if (weights_copy_ == nullptr) return absl::ResourceExhaustedError(ctx + ": cannot allocate weights");
    std::memcpy(weights_copy_, weights_, static_cast<size_t>(m.weights_size()));
    weights_ = weights_copy_;
  }
  return absl::OkStatus();
}

absl::StatusOr<const LoadedObject*> Package::Object() const {
  std::call_once(object_once_, [this] {
    auto obj = LoadedObject::Load(code(), absl::StrCat("package '", name_, "': code"));
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
