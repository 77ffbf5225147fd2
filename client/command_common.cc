// Helpers shared by the CLI's subcommands: flag parsing, files, error output.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/exit_codes.h"
#include "base/status_macros.h"
#include "client/commands.h"
#include "client/json_output.h"
#include "client/kiln_client.h"
#include "client/tensor_io.h"
#include "server/embedded_farm.h"

namespace kiln::client {

int ReportError(const std::string& command, const absl::Status& status) {
  std::fprintf(stderr, "kiln %s: %s: %s\n", command.c_str(),
               absl::StatusCodeToString(status.code()).c_str(), std::string(status.message()).c_str());
  return ExitCodeFor(status.code());
}

namespace {
ChannelSecurity& ServerSecurity() {
  static ChannelSecurity security;
  return security;
}
}  // namespace

void SetServerSecurity(const ChannelSecurity& security) { ServerSecurity() = security; }

absl::StatusOr<std::unique_ptr<KilnClient>> ConnectClient(const std::string& address, double connect_timeout_s) {
  return KilnClient::Connect(address, absl::Seconds(connect_timeout_s), ServerSecurity());
}

absl::Status CheckDistinctNames(const std::string& flag, const std::vector<std::string>& values) {
  std::set<std::string> seen;
  for (const std::string& value : values) {
    // As the flags are parsed: --shape's NAME ends at its last '=', --input's at its first.
    const size_t eq = flag == "--shape" ? value.rfind('=') : value.find('=');
    if (eq == std::string::npos) continue;  // no NAME= (an --input .pb named inside): checked when read
    const std::string name = value.substr(0, eq);
    if (!seen.insert(name).second) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": '", name, "' is given twice"));
    }
  }
  return absl::OkStatus();
}

absl::Status ParseShapeFlag(const std::string& flag, std::string* name, std::vector<int64_t>* dims) {
  size_t eq = flag.rfind('=');
  if (eq == std::string::npos || eq == 0) {
    return absl::InvalidArgumentError(absl::StrCat("--shape '", flag, "': expected NAME=D0,D1,..."));
  }
  *name = flag.substr(0, eq);
  dims->clear();
  std::string rest = flag.substr(eq + 1);
  if (rest.empty()) return absl::OkStatus();  // a scalar
  for (absl::string_view part : absl::StrSplit(rest, ',')) {
    int64_t d;
    if (!absl::SimpleAtoi(part, &d) || d < 0) {
      return absl::InvalidArgumentError(absl::StrCat("--shape '", flag, "': '", std::string(part),
                                                     "' is not a dimension"));
    }
    dims->push_back(d);
  }
  return absl::OkStatus();
}

absl::Status AddShapeBindings(const std::vector<std::string>& flags,
                              google::protobuf::RepeatedPtrField<kiln::v1::ShapeBinding>* bindings) {
  RETURN_IF_ERROR(CheckDistinctNames("--shape", flags));
  for (const std::string& flag : flags) {
    std::string name;
    std::vector<int64_t> dims;
    RETURN_IF_ERROR(ParseShapeFlag(flag, &name, &dims));
    kiln::v1::ShapeBinding* b = bindings->Add();
    b->set_input(name);
    for (int64_t d : dims) b->add_dims(d);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::map<std::string, Tensor>> ReadInputFlags(const std::vector<std::string>& flags) {
  std::map<std::string, Tensor> inputs;
  for (const std::string& flag : flags) {
    const size_t eq = flag.find('=');
    std::string name, path;
    if (eq == std::string::npos && absl::EndsWith(flag, ".pb")) {
      path = flag;
      ASSIGN_OR_RETURN(name, TensorProtoName(path));
      if (name.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--input '", flag, "': the TensorProto has no name; give it as NAME=FILE"));
      }
    } else if (eq == std::string::npos || eq == 0 || eq + 1 == flag.size()) {
      return absl::InvalidArgumentError(absl::StrCat("--input '", flag, "': expected NAME=FILE (or a named .pb FILE)"));
    } else {
      name = flag.substr(0, eq);
      path = flag.substr(eq + 1);
    }
    ASSIGN_OR_RETURN(Tensor t, ReadTensorFile(path));
    if (!inputs.emplace(name, std::move(t)).second) {
      return absl::InvalidArgumentError(absl::StrCat("--input: input '", name, "' is given twice"));
    }
  }
  return inputs;
}

std::string DefaultKilnHome() {
  const char* home = std::getenv("HOME");
  return absl::StrCat(home && *home ? home : "/tmp", "/.kiln");
}

std::string FileNameFor(const std::string& tensor_name) {
  std::string s = tensor_name;
  for (char& c : s) {
    if (c == '/' || c == ':' || c == '\\') c = '_';
  }
  return s;
}

// The kiln-worker that came with this kiln: installed beside it, or in the
// build tree's worker/ folder; else whichever the PATH has.
std::string SiblingWorker() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path();
  for (const std::filesystem::path& p : {self / "kiln-worker", self.parent_path() / "worker" / "kiln-worker"}) {
    if (std::filesystem::is_regular_file(p, ec)) return p.string();
  }
  return "kiln-worker";
}

absl::StatusOr<std::unique_ptr<FarmConnection>> FarmConnection::Open(const std::string& server, const std::string& db,
                                                                     int workers, int worker_threads,
                                                                     const std::string& target) {
  std::unique_ptr<FarmConnection> c(new FarmConnection());
  c->address_ = server;
  if (server.empty()) {
    server::EmbeddedFarm::Options options;
    options.server.db_path = db.empty() ? DefaultKilnHome() + "/tuning.db" : db;
    options.workers = workers;
    options.worker_threads = std::max(1, worker_threads);
    if (workers > 0 && absl::StartsWith(target, "cuda")) {
      options.gpu_device = "cuda:0";
      options.worker_executable = SiblingWorker();
    }
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(options.server.db_path).parent_path(), ec);
    ASSIGN_OR_RETURN(c->farm_, server::EmbeddedFarm::Start(options));
    c->address_ = c->farm_->address();
  }
  return c;
}

FarmConnection::~FarmConnection() = default;

absl::StatusOr<std::unique_ptr<KilnClient>> FarmConnection::Connect(double connect_timeout_s) const {
  if (farm_ != nullptr) return KilnClient::Connect(address_, absl::Seconds(connect_timeout_s));
  return ConnectClient(address_, connect_timeout_s);
}

std::string ToJson(const google::protobuf::Message& message) { return ProtoToJson(message); }

}  // namespace kiln::client
