// Test-only package assembly and kernel compilation (see test_package.h).
#include "tests/client/runtime/test_package.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/digest.h"
#include "base/file.h"
#include "gtest/gtest.h"
#include "proto/kiln/v1/package_layout.h"

namespace kiln::testing {

namespace {

// The directories MakeTempDir made in this process, removed when it exits.
std::vector<std::string>& TempDirs() {
  static auto* dirs = new std::vector<std::string>();
  return *dirs;
}

void RemoveTempDirs() {
  std::error_code ignored;
  for (const std::string& d : TempDirs()) std::filesystem::remove_all(d, ignored);
}

}  // namespace

std::string MakeTempDir() {
  std::string tmpl = ::testing::TempDir() + "/kiln_client_XXXXXX";
  char* dir = mkdtemp(tmpl.data());
  if (dir == nullptr) return ::testing::TempDir();
  if (TempDirs().empty()) std::atexit(RemoveTempDirs);
  TempDirs().push_back(dir);
  return dir;
}

bool HaveClang() {
  static const bool have = std::system("clang-19 --version > /dev/null 2>&1") == 0;
  return have;
}

absl::StatusOr<std::string> CompileToObject(const std::string& source, const std::string& lang) {
  if (!HaveClang()) return absl::UnavailableError("clang-19 is not installed");
  static std::atomic<int> counter{0};
  const std::string dir = MakeTempDir();
  const std::string src = dir + "/k" + std::to_string(counter++) + (lang == "c" ? ".c" : ".s");
  const std::string obj = src + ".o";
  WriteFile(src, source);
  const std::string cmd = "clang-19 -c -O2 -fPIC -march=native -o " + obj + " " + src + " 2> " + src + ".log";
  if (std::system(cmd.c_str()) != 0) {
    std::ifstream log(src + ".log");
    std::stringstream ss;
    ss << log.rdbuf();
    return absl::InternalError("clang-19 failed: " + ss.str());
  }
  std::ifstream in(obj, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Sha256Raw(std::string_view bytes) {
  const Sha256Bytes md = Sha256(bytes);
  return std::string(reinterpret_cast<const char*>(md.data()), md.size());
}

void Reseal(std::string* package) {
  const size_t body = package->size() - package::kTrailerSize;
  package->replace(body, package::kTrailerSize, Sha256Raw(std::string_view(*package).substr(0, body)));
}

std::string BuildPackage(const kiln::v1::PackageManifest& manifest_in, std::string_view code,
                         std::string_view weights,
                         const std::function<void(kiln::v1::PackageManifest*)>& tamper) {
  kiln::v1::PackageManifest m = manifest_in;
  m.set_format_version(package::kFormatVersion);
  // Room for the offset fields and for whatever `tamper` adds.
  const int64_t reserved = static_cast<int64_t>(m.ByteSizeLong()) + 1024;
  const int64_t code_offset = package::AlignUp(package::kHeaderSize + reserved);
  const int64_t weights_offset = package::AlignUp(code_offset + static_cast<int64_t>(code.size()));
  m.set_code_offset(code_offset);
  m.set_code_size(static_cast<int64_t>(code.size()));
  m.set_weights_offset(weights_offset);
  m.set_weights_size(static_cast<int64_t>(weights.size()));
  if (tamper) tamper(&m);
  std::string manifest;
  m.SerializeToString(&manifest);
  EXPECT_LE(static_cast<int64_t>(manifest.size()), reserved);

  std::string out(static_cast<size_t>(weights_offset + weights.size()), '\0');
  package::Header header{};
  std::memcpy(header.magic, package::kMagic, sizeof(header.magic));
  header.format_version = package::kFormatVersion;
  header.manifest_offset = package::kHeaderSize;
  header.manifest_size = manifest.size();
  std::memcpy(out.data(), &header, sizeof(header));
  out.replace(package::kHeaderSize, manifest.size(), manifest);
  out.replace(code_offset, code.size(), code);
  out.replace(weights_offset, weights.size(), weights);
  out += Sha256Raw(out);
  return out;
}

void WriteFile(const std::string& path, std::string_view bytes) {
  absl::Status written = WriteFileAtomic(path, bytes);
  ASSERT_TRUE(written.ok()) << written;
}

}  // namespace kiln::testing
