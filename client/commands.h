// The `kiln` CLI's subcommands. Each takes its typed options and returns the
// process exit code (base/exit_codes.h, docs/cli.md); errors are printed as
// "kiln <cmd>: <CODE>: <message>" on stderr.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/file.h"  // ReadFile, WriteFileAtomic for the subcommands
#include "client/channel_credentials.h"
#include "compiler_core/ir/tensor.h"
#include "kiln/v1/compile.pb.h"
#include "kiln/v1/report.pb.h"

namespace kiln::server {
class EmbeddedFarm;
}

namespace kiln::client {

struct CompileOptions {
  std::string model;
  std::vector<std::string> shapes;  // NAME=D0,D1,...
  std::string target = "cpu";
  int trials = 16;
  std::string search = "evolutionary";  // random | evolutionary
  std::string budget;               // whole-model budget: "500" trials, or "90s", "10m", "1h"
  std::string server;               // empty: embedded farm
  std::string db;                   // embedded farm's database
  std::string output;
  bool quiet = false;
  bool json = false;
  bool progressive = false;         // answer at once; the server tunes on in the background (needs --server)
  int threads = 1;                  // threads the package will run with; candidates are measured on them
  double connect_timeout_s = 10;    // how long to wait for --server to accept a connection
  double deadline_s = 0;            // the compile call's deadline (--deadline); 0: none (12 h)
};

// `kiln tune`: a whole-model budget, the package, and a report.
struct TuneOptions {
  CompileOptions compile;           // budget defaults to "10m"; output may be empty (no package)
  std::string report;               // HTML report file; empty: <model stem>.tuning.html
};

// `kiln report MODEL|JOB`: the database's record of tuning a model or a job.
struct ReportOptions {
  std::string subject;              // an ONNX model file, or a tuning job id
  std::vector<std::string> shapes;
  std::string target = "cpu";
  int threads = 1;                  // records measured on this many threads
  std::string server;
  std::string db;
  std::string output;               // HTML file; empty: the terminal summary only
  bool json = false;
  double connect_timeout_s = 10;
};

struct RunOptions {
  std::string package;
  std::vector<std::string> inputs;  // NAME=FILE
  std::string output_dir;
  int repeat = 0;
  int threads = 1;  // 0: every hardware thread
  bool json = false;
  int profile = 0;  // print the N fusion groups that take the most time
  bool keep_denormals = false;  // IEEE denormals instead of the session's flush to zero
};

struct EvalOptions {
  std::string model;
  std::vector<std::string> shapes;
  std::vector<std::string> inputs;
  std::string output_dir;
  bool dump_graph = false;
  bool json = false;  // each output's name, dtype, dims and file as JSON
};

struct LookupOptions {
  std::string model;
  std::vector<std::string> shapes;
  std::string target = "cpu";
  int threads = 1;        // a compile for this many threads
  std::string server;
  std::string cache_dir;  // local package cache, checked first
  std::string output;
  bool json = false;
  double connect_timeout_s = 10;
};

struct CompareOptions {
  std::string expected_dir;
  std::string actual_dir;
  double atol = 1e-5;
  double rtol = 1e-4;
  bool json = false;
};

struct ExampleOptions {
  std::string name = "mlp";
  std::string output_dir;
};

// `kiln db export|import|stats|gc` on a tuning database file.
struct DbOptions {
  std::string action;      // "export", "import", "stats", "gc"
  std::string db;          // default ~/.kiln/tuning.db
  std::string file;        // import: JSON-lines file, "-" for stdin
  bool json = false;       // stats, import, gc
  int64_t max_bytes = -1;  // gc
};

// `kiln admin workers|drain|jobs|cancel|gc` against a kiln-server (AdminService:
// the admin role when the server checks credentials).
struct AdminOptions {
  std::string action;       // "workers", "drain", "jobs", "cancel", "gc"
  std::string server;
  double connect_timeout_s = 10;
  std::string worker_id;    // drain
  int64_t job_id = 0;       // cancel
  std::string reason;       // cancel
  std::string state;        // jobs: running, done, failed, cancelled; empty: all
  int limit = 20;           // jobs: newest first
  int64_t max_bytes = -1;   // gc
  bool json = false;
};

// `kiln inspect`: the optimised graph and its fusion groups.
struct InspectOptions {
  std::string model;
  std::vector<std::string> shapes;  // NAME=D0,D1,...
  bool json = false;
  std::string dot;  // write Graphviz here when set
  std::vector<std::string> dump_after;  // pass names, or "all": graph dumps on stderr
  bool pass_timing = false;             // per-pass timing on stderr
  int group = -1;                       // >= 0: print this group's workload, schedule and loop IR instead
  std::string schedule;                 // with group: this schedule instead of the default
  bool llvm_ir = false;                 // with group: also the kernel's optimized LLVM IR
  bool assembly = false;                // with group: also the kernel's assembly and its inner loops' counts
  std::string target = "cpu";           // partition, schedule and lower for it (Target::Named)
  bool ptx = false;                     // with group and a GPU target: also the kernel's PTX
};

int RunCompile(const CompileOptions& options);
int RunRun(const RunOptions& options);
int RunEval(const EvalOptions& options);
int RunLookup(const LookupOptions& options);
int RunCompare(const CompareOptions& options);
int RunExample(const ExampleOptions& options);
int RunDb(const DbOptions& options);
int RunInspect(const InspectOptions& options);
int RunTune(const TuneOptions& options);
int RunReport(const ReportOptions& options);
int RunAdmin(const AdminOptions& options);

class KilnClient;

// The farm a command talks to: --server's address, or an embedded farm (the
// server and `workers` CPU workers in this process, each measuring on up to
// `worker_threads` threads) on the database `db` (default
// ~/.kiln/tuning.db), for as long as the connection lives. A compile for a
// GPU (`target` "cuda...") adds, with workers > 0, a GPU worker for cuda:0
// through the kiln-worker installed beside this program (without a GPU it
// does not start, and the compile says it compiled untuned).
class FarmConnection {
 public:
  static absl::StatusOr<std::unique_ptr<FarmConnection>> Open(const std::string& server, const std::string& db,
                                                               int workers, int worker_threads = 1,
                                                               const std::string& target = "");
  ~FarmConnection();
  const std::string& address() const { return address_; }
  // A client of the farm: the embedded one in plaintext, --server as
  // ConnectClient reaches it.
  absl::StatusOr<std::unique_ptr<KilnClient>> Connect(double connect_timeout_s) const;

 private:
  FarmConnection() = default;
  std::unique_ptr<server::EmbeddedFarm> farm_;
  std::string address_;
};

// --budget: "500" is trials; "90s", "10m", "1h" are seconds of tuning:
// {trials, 0} or {0, seconds}; INVALID_ARGUMENT otherwise.
absl::StatusOr<std::pair<int, double>> ParseBudget(const std::string& text);

// How --server is reached (kiln's --tls-ca, --tls-cert, --tls-key,
// --token-file and their environment variables); set once by main().
void SetServerSecurity(const ChannelSecurity& security);

// A client of the kiln-server at `address`, connected with the security set
// above: waits up to `connect_timeout_s` for it, then UNAVAILABLE naming the
// address.
absl::StatusOr<std::unique_ptr<KilnClient>> ConnectClient(const std::string& address, double connect_timeout_s);

// The compile request of `kiln compile`'s options (model file, shapes,
// target, trials or budget, search); INVALID_ARGUMENT for a bad flag value.
absl::StatusOr<kiln::v1::CompileRequest> CompileRequestFor(const CompileOptions& options);
// Compiles with a progress line on stderr (none when quiet) under a deadline
// of `deadline_s` (0: none); fetches the package into `output` unless it is
// empty.
absl::StatusOr<kiln::v1::CompileResult> CompileWithProgress(KilnClient& client,
                                                            const kiln::v1::CompileRequest& request, bool quiet,
                                                            const std::string& output, double deadline_s = 0);
// The compile's summary lines on stdout, and one line per group when `groups`.
void PrintCompileSummary(const kiln::v1::CompileResult& result, const std::string& output, bool groups);
// The report's HTML page (client/tuning_report_view.h) into a file.
absl::Status WriteTuningReport(const kiln::v1::TuningReport& report, const std::string& html_path);
// The message as JSON (client/json_output.h: every field present, int64 as numbers).
std::string ToJson(const google::protobuf::Message& message);

// Shared by the subcommands. Prints the error and returns its exit code
// (ExitCodeFor in base/exit_codes.h).
int ReportError(const std::string& command, const absl::Status& status);
absl::Status ParseShapeFlag(const std::string& flag, std::string* name, std::vector<int64_t>* dims);
// INVALID_ARGUMENT naming the first NAME that two of the NAME=... `values` of
// `flag` share ("--shape": NAME ends at the last '='; "--input": at the first).
absl::Status CheckDistinctNames(const std::string& flag, const std::vector<std::string>& values);
// Every --shape flag as a request's ShapeBinding; an input bound twice is INVALID_ARGUMENT.
absl::Status AddShapeBindings(const std::vector<std::string>& flags,
                              google::protobuf::RepeatedPtrField<kiln::v1::ShapeBinding>* bindings);
// --input flags as tensors by name: NAME=FILE (.npy or ONNX TensorProto .pb),
// or a .pb FILE alone, named by its TensorProto's name field. A name given
// twice, or a .pb without NAME= and without a name inside, is INVALID_ARGUMENT.
absl::StatusOr<std::map<std::string, Tensor>> ReadInputFlags(const std::vector<std::string>& flags);
std::string DefaultKilnHome();  // $HOME/.kiln
// Output names may contain '/' or ':'; those become '_' in file names.
std::string FileNameFor(const std::string& tensor_name);

}  // namespace kiln::client
