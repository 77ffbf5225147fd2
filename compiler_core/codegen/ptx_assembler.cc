// PtxAssembler: finding ptxas and running it on a temporary folder.
#include "compiler_core/codegen/ptx_assembler.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/file.h"
#include "base/status_macros.h"

extern char** environ;

namespace kiln {
namespace {

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

// A private folder for one assembly, removed when it goes out of scope.
class ScratchDir {
 public:
  static absl::StatusOr<ScratchDir> Make() {
    std::string pattern = (std::filesystem::temp_directory_path() / "kiln-ptxas-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      return absl::InternalError(absl::StrCat("cannot make a temporary folder from ", pattern));
    }
    return ScratchDir(pattern);
  }
  ScratchDir(ScratchDir&& o) noexcept : path_(std::move(o.path_)) { o.path_.clear(); }
  ~ScratchDir() {
    if (!path_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(path_, ec);
    }
  }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  explicit ScratchDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

}  // namespace

absl::StatusOr<PtxAssembler> PtxAssembler::Find(const std::string& path) {
  if (!path.empty()) {
    if (!IsExecutableFile(path)) return absl::NotFoundError(absl::StrCat("ptxas ", path, " is not an executable file"));
    return PtxAssembler(path);
  }
  std::vector<std::string> looked;
  const char* env_path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(env_path != nullptr ? env_path : "", ':', absl::SkipEmpty())) {
    std::string candidate = absl::StrCat(dir, "/ptxas");
    if (IsExecutableFile(candidate)) return PtxAssembler(candidate);
    looked.push_back(candidate);
  }
  const std::string cuda = "/usr/local/cuda/bin/ptxas";
  if (IsExecutableFile(cuda)) return PtxAssembler(cuda);
  looked.push_back(cuda);
  return absl::NotFoundError(absl::StrCat("no ptxas (the CUDA toolkit's PTX assembler) in ", absl::StrJoin(looked, ", ")));
}

absl::StatusOr<PtxAssembler::Run> PtxAssembler::Execute(const std::vector<std::string>& args) const {
  ASSIGN_OR_RETURN(ScratchDir dir, ScratchDir::Make());
  const std::string log = dir.File("log");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(path_.c_str()));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, path_.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return absl::InternalError(absl::StrCat("cannot run ", path_, ": ", std::strerror(rc)));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return absl::InternalError(absl::StrCat("waiting for ", path_, ": ", std::strerror(errno)));
  }
  Run run;
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  absl::StatusOr<std::string> out = ReadFile(log);
  if (out.ok()) run.out = *out;
  return run;
}

absl::StatusOr<std::string> PtxAssembler::Assemble(const std::string& ptx, const GpuTarget& target) const {
  ASSIGN_OR_RETURN(ScratchDir dir, ScratchDir::Make());
  const std::string in = dir.File("kernels.ptx"), out = dir.File("kernels.cubin");
  RETURN_IF_ERROR(WriteFileAtomic(in, ptx));
  ASSIGN_OR_RETURN(Run run, Execute({absl::StrCat("--gpu-name=", target.Arch()), "-O3", in, "-o", out}));
  if (run.status != 0) {
    return absl::InvalidArgumentError(absl::StrCat("ptxas (", path_, ") refused the PTX for ", target.Arch(),
                                                   " (exit ", run.status, "): ", absl::StripAsciiWhitespace(run.out)));
  }
  return ReadFile(out);
}

absl::StatusOr<std::string> PtxAssembler::Version() const {
  ASSIGN_OR_RETURN(Run run, Execute({"--version"}));
  if (run.status != 0) return absl::InternalError(absl::StrCat(path_, " --version exited ", run.status));
  std::vector<std::string> lines = absl::StrSplit(absl::StripAsciiWhitespace(run.out), '\n', absl::SkipEmpty());
  for (const std::string& line : lines) {
    if (absl::StrContains(line, "release")) return std::string(absl::StripAsciiWhitespace(line));
  }
  return lines.empty() ? std::string() : std::string(absl::StripAsciiWhitespace(lines.back()));
}

}  // namespace kiln
