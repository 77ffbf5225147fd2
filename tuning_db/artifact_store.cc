// Blob files of the artifact store, written with POSIX calls so they can be
// fsynced before the rename that publishes them.
#include "tuning_db/artifact_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

#include "absl/strings/str_cat.h"

namespace kiln::tuningdb {
namespace {

absl::Status ErrnoError(int err, std::string_view what, const std::string& path) {
  std::string message = absl::StrCat("artifact store: ", std::string(what), " ", path, ": ",
                                     std::strerror(err));
  switch (err) {
    case ENOSPC:
    case EDQUOT:
      return absl::ResourceExhaustedError(message);
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::PermissionDeniedError(message);
    default:
      return absl::UnavailableError(message);
  }
}

// A name no other writer (thread or process) picks at the same time.
std::string TempSuffix() {
  static std::atomic<uint64_t> counter{0};
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return absl::StrCat(".tmp.", getpid(), ".", counter.fetch_add(1), ".", rng() % 1000000007);
}

}  // namespace

std::string ArtifactBlobDir::BlobPath(std::string_view digest) const {
  std::string hex(digest.substr(digest.find(':') + 1));
  return absl::StrCat(root_, "/sha256/", hex.substr(0, 2), "/", hex);
}

absl::Status ArtifactBlobDir::Write(std::string_view digest, std::string_view bytes) const {
  std::string path = BlobPath(digest);
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return ErrnoError(ec.value(), "creating directory", dir.string());

  std::string temp = path + TempSuffix();
  int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError(errno, "creating", temp);
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      close(fd);
      unlink(temp.c_str());
      return ErrnoError(err, "writing", temp);
    }
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) {
    int err = errno;
    close(fd);
    unlink(temp.c_str());
    return ErrnoError(err, "syncing", temp);
  }
  if (close(fd) != 0) {
    int err = errno;
    unlink(temp.c_str());
    return ErrnoError(err, "closing", temp);
  }
  if (rename(temp.c_str(), path.c_str()) != 0) {
    int err = errno;
    unlink(temp.c_str());
    return ErrnoError(err, "renaming into place", path);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::string>> ArtifactBlobDir::Read(std::string_view digest) const {
  std::string path = BlobPath(digest);
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::nullopt;
    return ErrnoError(errno, "opening", path);
  }
  std::string bytes;
  struct stat st;
  if (fstat(fd, &st) == 0 && st.st_size > 0) bytes.reserve(static_cast<size_t>(st.st_size));
  char buffer[1 << 16];
  while (true) {
    ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      close(fd);
      return ErrnoError(err, "reading", path);
    }
    if (n == 0) break;
    bytes.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return bytes;
}

absl::StatusOr<std::optional<int64_t>> ArtifactBlobDir::FileSize(std::string_view digest) const {
  std::string path = BlobPath(digest);
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return std::nullopt;
    return ErrnoError(errno, "inspecting", path);
  }
  return static_cast<int64_t>(st.st_size);
}

absl::Status ArtifactBlobDir::Remove(std::string_view digest) const {
  std::string path = BlobPath(digest);
  if (unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoError(errno, "removing", path);
  return absl::OkStatus();
}

}  // namespace kiln::tuningdb
