// kiln: the command-line client of Kiln (compile, tune, report, run, eval, inspect, lookup, compare, example, db,
// admin).
// Every flag value is checked here, before a command runs: a bad one is a usage
// error (exit 2). Exit codes: base/exit_codes.h, docs/cli.md.
#include <CLI/CLI.hpp>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "base/exit_codes.h"
#include "base/log.h"
#include "client/commands.h"
#include "compiler_core/driver/version.h"

namespace {

using namespace kiln::client;

// A CLI11 check of one value of `flag` by a parser that answers with a status.
// CLI11 puts the flag in front of the message: the parser's is dropped.
template <typename Parse>
CLI::Validator StatusCheck(const std::string& flag, const std::string& description, Parse parse) {
  return CLI::Validator(
      [flag, parse](std::string& value) -> std::string {
        const absl::Status s = parse(value);
        std::string message(s.message());
        if (message.rfind(flag + " ", 0) == 0) message.erase(0, flag.size() + 1);
        return message;
      },
      description);
}

CLI::Validator ShapeFlag() {
  return StatusCheck("--shape", "NAME=D0,D1,...", [](const std::string& v) {
    std::string name;
    std::vector<int64_t> dims;
    return ParseShapeFlag(v, &name, &dims);
  });
}

CLI::Validator InputFlag() {
  return StatusCheck("--input", "NAME=FILE", [](const std::string& v) {
    const size_t eq = v.find('=');
    const bool named_pb = eq == std::string::npos && v.size() > 3 && v.compare(v.size() - 3, 3, ".pb") == 0;
    if (named_pb || (eq != std::string::npos && eq > 0 && eq + 1 < v.size())) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("'", v, "': expected NAME=FILE (or a named .pb FILE)"));
  });
}

CLI::Validator BudgetFlag() {
  return StatusCheck("--budget", "TRIALS|DURATION", [](const std::string& v) { return ParseBudget(v).status(); });
}

// --shape and --input name each input once (either may be null): checked when
// the subcommand's flags are all parsed, as CLI11 checks one value at a time.
void RejectRepeatedNames(CLI::App* command, const std::vector<std::string>* shapes,
                         const std::vector<std::string>* inputs) {
  command->parse_complete_callback([shapes, inputs] {
    for (const auto& [flag, values] : {std::pair{"--shape", shapes}, std::pair{"--input", inputs}}) {
      if (values == nullptr) continue;
      if (absl::Status s = CheckDistinctNames(flag, *values); !s.ok()) {
        throw CLI::ValidationError(std::string(s.message()));
      }
    }
  });
}

// A number >= 0 (CLI11's NonNegativeNumber names the largest double in its message).
CLI::Validator NonNegative() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        char* end = nullptr;
        const double number = std::strtod(value.c_str(), &end);
        if (!value.empty() && *end == '\0' && number >= 0) return "";
        return "'" + value + "' is not a number >= 0";
      },
      "NUMBER >= 0");
}

const CLI::Range kConnectTimeout(0.001, 86400.0);
constexpr char kDeadlineHelp[] =
    "seconds the compile may take, queueing for a server slot and tuning included; past it the server stops the "
    "compile and the command fails with DEADLINE_EXCEEDED (exit 5); default: 12 h";
const CLI::Range kDeadline(0.001, 30 * 86400.0);
constexpr char kConnectTimeoutHelp[] =
    "seconds to wait for --server to accept a connection before failing with UNAVAILABLE (exit 5)";

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kiln: compile ONNX models with a Kiln tuning farm and run the packages"};
  app.require_subcommand(1);
  // Options of `kiln` itself may also follow the subcommand's.
  app.fallthrough();
  app.set_version_flag("--version", kiln::VersionText("kiln"));
  std::string log_level = "warning";
  auto* log_level_flag =
      app.add_option("--log-level", log_level,
                     "logs on stderr at this level and above: debug, info, warning, error (-q: error). The "
                     "embedded farm logs at info what a kiln-server would log")
          ->capture_default_str()
          ->check(CLI::IsMember({"debug", "info", "warn", "warning", "error"}));
  // How --server is reached when it serves TLS and checks credentials.
  kiln::client::ChannelSecurity security;
  app.add_option("--tls-ca", security.tls_ca, "--server serves TLS: its certificate's CA (PEM) [env KILN_TLS_CA]");
  app.add_option("--tls-cert", security.tls_cert, "a client certificate for mutual TLS (PEM) [env KILN_TLS_CERT]");
  app.add_option("--tls-key", security.tls_key, "the client certificate's private key (PEM) [env KILN_TLS_KEY]");
  app.add_option("--token-file", security.token_file,
                 "a file holding the bearer token sent with every call (needs --tls-ca) [env KILN_TOKEN_FILE]");

  CompileOptions compile;
  auto* c = app.add_subcommand("compile", "compile a model into a package");
  c->add_option("model", compile.model, "ONNX model file")->required();
  c->add_option("--shape", compile.shapes, "bind an input's shape: NAME=D0,D1,...")->check(ShapeFlag());
  c->add_option("--target", compile.target, "target to compile for")->capture_default_str();
  c->add_option("--trials", compile.trials,
                "schedules measured per workload, in total: a workload with fewer is tuned further "
                "(0: no tuning)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  c->add_option("--search", compile.search, "how candidates are proposed: random or evolutionary (learned cost model)")
      ->capture_default_str()
      ->check(CLI::IsMember({"random", "evolutionary"}));
  c->add_option("--budget", compile.budget,
                "whole-model tuning budget, spent where it lowers the model's latency most (instead of "
                "--trials per workload): N measured trials, or a time (90s, 10m, 1h)")
      ->check(BudgetFlag());
  c->add_option("--threads", compile.threads,
                "threads the package will run with (kiln run --threads): every candidate is measured on this "
                "many, and its records are kept apart from other thread counts")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  c->add_option("--server", compile.server, "HOST:PORT of a kiln-server; omitted: an embedded farm");
  c->add_option("--connect-timeout", compile.connect_timeout_s, kConnectTimeoutHelp)
      ->capture_default_str()
      ->check(kConnectTimeout);
  c->add_option("--deadline", compile.deadline_s, kDeadlineHelp)->check(kDeadline);
  c->add_option("--db", compile.db, "embedded farm's tuning database (default ~/.kiln/tuning.db)");
  c->add_option("-o,--output", compile.output, "package file to write")->required();
  c->add_flag("-q,--quiet", compile.quiet, "no progress and no logs below error: stdout has the result alone");
  c->add_flag("--json", compile.json, "print the compile result as JSON");
  RejectRepeatedNames(c, &compile.shapes, nullptr);
  c->add_flag("--progressive", compile.progressive,
              "answer at once with the best package the database gives (defaults elsewhere); the server tunes on "
              "in the background and `kiln lookup` gets the faster package later (needs --server)");

  TuneOptions tune;
  auto* t = app.add_subcommand("tune", "spend a whole-model tuning budget, continuing from the database's records, "
                                       "and write a tuning report");
  t->add_option("model", tune.compile.model, "ONNX model file")->required();
  t->add_option("--shape", tune.compile.shapes, "bind an input's shape: NAME=D0,D1,...")->check(ShapeFlag());
  t->add_option("--target", tune.compile.target, "target to tune for")->capture_default_str();
  t->add_option("--budget", tune.compile.budget, "N measured trials, or a time (90s, 10m, 1h); default 10m")
      ->check(BudgetFlag());
  t->add_option("--search", tune.compile.search, "how candidates are proposed: random or evolutionary")
      ->capture_default_str()
      ->check(CLI::IsMember({"random", "evolutionary"}));
  t->add_option("--threads", tune.compile.threads, "threads the package will run with; candidates are measured on them")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  t->add_option("--server", tune.compile.server, "HOST:PORT of a kiln-server; omitted: an embedded farm");
  t->add_option("--connect-timeout", tune.compile.connect_timeout_s, kConnectTimeoutHelp)
      ->capture_default_str()
      ->check(kConnectTimeout);
  t->add_option("--deadline", tune.compile.deadline_s, kDeadlineHelp)->check(kDeadline);
  t->add_option("--db", tune.compile.db, "embedded farm's tuning database (default ~/.kiln/tuning.db)");
  t->add_option("-o,--output", tune.compile.output, "also write the tuned package here");
  t->add_option("--report", tune.report, "HTML report file (default <model>.tuning.html)");
  t->add_flag("-q,--quiet", tune.compile.quiet, "no progress and no logs below error");
  t->add_flag("--json", tune.compile.json, "print the compile result and the report as JSON");
  RejectRepeatedNames(t, &tune.compile.shapes, nullptr);

  ReportOptions report;
  auto* rep = app.add_subcommand("report", "how tuning went for a model or a tuning job, from the database");
  rep->add_option("subject", report.subject, "ONNX model file, or a tuning job id")->required();
  rep->add_option("--shape", report.shapes, "bind an input's shape: NAME=D0,D1,...")->check(ShapeFlag());
  rep->add_option("--target", report.target, "target of the records")->capture_default_str();
  rep->add_option("--threads", report.threads, "the records of compiles for this many threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  rep->add_option("--server", report.server, "HOST:PORT of a kiln-server; omitted: the database itself");
  rep->add_option("--connect-timeout", report.connect_timeout_s, kConnectTimeoutHelp)
      ->capture_default_str()
      ->check(kConnectTimeout);
  rep->add_option("--db", report.db, "tuning database (default ~/.kiln/tuning.db)");
  rep->add_option("-o,--output", report.output, "write an HTML report (SVG charts) here");
  rep->add_flag("--json", report.json, "print the report as JSON");
  RejectRepeatedNames(rep, &report.shapes, nullptr);

  RunOptions run;
  auto* r = app.add_subcommand("run", "run a package");
  r->add_option("package", run.package, ".kpkg file")->required();
  r->add_option("--input", run.inputs, "NAME=FILE (.npy or ONNX TensorProto .pb)")->check(InputFlag());
  r->add_option("--output-dir", run.output_dir, "write each output as DIR/<name>.npy");
  r->add_option("--repeat", run.repeat, "time N more runs and print latency as JSON")
      ->check(CLI::Range(0, 1000000000));
  r->add_option("--threads", run.threads, "threads of the runtime's pool (0: every hardware thread)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1024));
  r->add_flag("--json", run.json, "print a JSON summary");
  r->add_option("--profile", run.profile,
                "time each kernel over the runs and print the N fusion groups that take the most time")
      ->check(CLI::Range(0, 1000000));
  r->add_flag("--keep-denormals", run.keep_denormals,
              "compute with IEEE denormal floats; by default a CPU run treats them as zero, which keeps layers "
              "whose values decay below 2^-126 from running many times slower");
  RejectRepeatedNames(r, nullptr, &run.inputs);

  EvalOptions eval;
  auto* e = app.add_subcommand("eval", "run a model through the reference interpreter");
  e->add_option("model", eval.model, "ONNX model file")->required();
  e->add_option("--shape", eval.shapes, "bind an input's shape: NAME=D0,D1,...")->check(ShapeFlag());
  e->add_option("--input", eval.inputs, "NAME=FILE (.npy or .pb)")->check(InputFlag());
  e->add_option("--output-dir", eval.output_dir, "write each output as DIR/<name>.npy");
  e->add_flag("--dump-graph", eval.dump_graph, "print the imported graph IR to stderr");
  e->add_flag("--json", eval.json, "print each output's name, dtype, dims and file as JSON");
  RejectRepeatedNames(e, &eval.shapes, &eval.inputs);

  InspectOptions inspect;
  auto* in = app.add_subcommand(
      "inspect", "print a model's optimised graph and fusion groups, or a package's manifest and the records behind it");
  in->add_option("model", inspect.model, "ONNX model file, or a package (.kpkg)")->required();
  in->add_option("--shape", inspect.shapes, "bind an input's shape: NAME=D0,D1,...")->check(ShapeFlag());
  in->add_flag("--json", inspect.json, "print as JSON");
  in->add_option("--dot", inspect.dot, "write Graphviz (groups as clusters) to this file");
  in->add_option("--dump-after", inspect.dump_after, "dump the graph IR after this pass (or 'all') to stderr");
  in->add_flag("--pass-timing", inspect.pass_timing, "print each pass's time to stderr");
  CLI::Option* group_opt = in->add_option("--group", inspect.group,
                                          "print group N's workload graph, schedule and loop IR (the kernel's code)")
                               ->check(CLI::NonNegativeNumber);
  in->add_option("--schedule", inspect.schedule,
                 "with --group: lower at this schedule (k=v,...) instead of the default")
      ->needs(group_opt);
  in->add_flag("--llvm-ir", inspect.llvm_ir, "with --group: also print the kernel's optimized LLVM IR")
      ->needs(group_opt);
  in->add_flag("--asm", inspect.assembly,
               "with --group: also print the kernel's assembly for the target, after a count of its innermost "
               "loops' multiply-adds, spills and reloads")
      ->needs(group_opt);
  in->add_option("--target", inspect.target,
                 "prepare, schedule and lower for this target: cpu, an x86-64 level or LLVM CPU name, or "
                 "cuda:sm_XY")
      ->capture_default_str();
  in->add_flag("--ptx", inspect.ptx, "with --group and a cuda target: also print the kernel's PTX")->needs(group_opt);
  RejectRepeatedNames(in, &inspect.shapes, nullptr);

  LookupOptions lookup;
  auto* l = app.add_subcommand("lookup", "fetch the package of an earlier compile; never compiles");
  l->add_option("model", lookup.model, "ONNX model file")->required();
  l->add_option("--shape", lookup.shapes, "NAME=D0,D1,...")->check(ShapeFlag());
  l->add_option("--target", lookup.target)->capture_default_str();
  l->add_option("--threads", lookup.threads, "the compile for this many threads (kiln compile --threads)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  l->add_option("--server", lookup.server, "HOST:PORT of a kiln-server")->required();
  l->add_option("--connect-timeout", lookup.connect_timeout_s, kConnectTimeoutHelp)
      ->capture_default_str()
      ->check(kConnectTimeout);
  l->add_option("--cache-dir", lookup.cache_dir, "local package cache (default ~/.kiln/packages)");
  l->add_option("-o,--output", lookup.output, "package file to write")->required();
  l->add_flag("--json", lookup.json,
              "print the server's answer, the package file and where it came from (cache, server) as JSON");
  RejectRepeatedNames(l, &lookup.shapes, nullptr);

  CompareOptions compare;
  auto* cmp = app.add_subcommand("compare", "compare two folders of .npy outputs");
  cmp->add_option("expected", compare.expected_dir, "reference outputs")->required();
  cmp->add_option("actual", compare.actual_dir, "outputs to check")->required();
  cmp->add_option("--atol", compare.atol, "absolute tolerance")->capture_default_str()->check(NonNegative());
  cmp->add_option("--rtol", compare.rtol, "relative tolerance")->capture_default_str()->check(NonNegative());
  cmp->add_flag("--json", compare.json, "print each output's max abs error and the verdict as JSON");

  ExampleOptions example;
  auto* ex = app.add_subcommand("example", "write an example model and its input");
  ex->add_option("name", example.name, "example name (mlp)")->capture_default_str();
  ex->add_option("-o,--output-dir", example.output_dir, "folder to write into")->required();

  DbOptions db;
  auto* d = app.add_subcommand("db", "inspect and maintain a tuning database");
  d->require_subcommand(1);
  std::string db_help = "tuning database file (default ~/.kiln/tuning.db)";
  auto* d_export = d->add_subcommand("export", "write every record as JSON lines to stdout");
  d_export->add_option("--db", db.db, db_help);
  auto* d_import = d->add_subcommand("import", "import JSON lines (idempotent)");
  d_import->add_option("file", db.file, "JSON-lines file, or - for stdin")->required();
  d_import->add_option("--db", db.db, db_help);
  d_import->add_flag("--json", db.json, "print the counts as JSON");
  auto* d_stats = d->add_subcommand("stats", "counts and best-record coverage");
  d_stats->add_option("--db", db.db, db_help);
  d_stats->add_flag("--json", db.json, "print as JSON");
  auto* d_gc = d->add_subcommand("gc", "evict unpinned artifacts, least recently used first");
  d_gc->add_option("--db", db.db, db_help);
  d_gc->add_option("--max-bytes", db.max_bytes, "keep at most this many artifact bytes")
      ->required()
      ->check(NonNegative());
  d_gc->add_flag("--json", db.json, "print what was freed and what remains as JSON");

  AdminOptions admin;
  auto* adm = app.add_subcommand("admin", "operate a kiln-server's farm: workers, tuning jobs, artifacts (admin role)");
  adm->require_subcommand(1);
  auto admin_server = [&admin](CLI::App* sub) {
    sub->add_option("--server", admin.server, "HOST:PORT of a kiln-server")->required();
    sub->add_option("--connect-timeout", admin.connect_timeout_s, kConnectTimeoutHelp)
        ->capture_default_str()
        ->check(kConnectTimeout);
    sub->add_flag("--json", admin.json, "print the server's answer as JSON");
  };
  auto* a_workers = adm->add_subcommand("workers", "the registered workers, what they hold, and the queue");
  admin_server(a_workers);
  auto* a_drain = adm->add_subcommand("drain", "give a worker no more tasks; it reports what it holds and stops");
  a_drain->add_option("worker", admin.worker_id, "worker id (kiln admin workers)")->required();
  admin_server(a_drain);
  auto* a_jobs = adm->add_subcommand("jobs", "tuning jobs, newest first");
  a_jobs->add_option("--state", admin.state, "only jobs in this state")
      ->check(CLI::IsMember({"running", "done", "failed", "cancelled"}));
  a_jobs->add_option("--limit", admin.limit, "at most this many")->capture_default_str()->check(CLI::Range(1, 100000));
  admin_server(a_jobs);
  auto* a_cancel = adm->add_subcommand("cancel", "end a running tuning job; the compiles waiting on it fail");
  a_cancel->add_option("job", admin.job_id, "tuning job id (kiln admin jobs)")->required()->check(CLI::PositiveNumber);
  a_cancel->add_option("--reason", admin.reason, "kept in the job's message");
  admin_server(a_cancel);
  auto* a_gc = adm->add_subcommand("gc", "evict the server's unpinned artifacts, least recently used first");
  a_gc->add_option("--max-bytes", admin.max_bytes, "keep at most this many artifact bytes")
      ->required()
      ->check(NonNegative());
  admin_server(a_gc);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& err) {
    return app.exit(err) == 0 ? kiln::kExitOk : kiln::kExitUsage;
  }
  // Logs go to stderr; the CLI's embedded farm keeps below warning to itself
  // unless asked, and -q keeps everything below error.
  const bool quiet = (*c && compile.quiet) || (*t && tune.compile.quiet);
  kiln::SetMinLogLevel(log_level_flag->count() > 0 ? *kiln::ParseLogLevel(log_level)
                       : quiet                     ? kiln::LogLevel::kError
                                                   : kiln::LogLevel::kWarning);
  kiln::client::SetServerSecurity(kiln::client::WithEnvironment(security));
  if (*c) return RunCompile(compile);
  if (*t) return RunTune(tune);
  if (*rep) return RunReport(report);
  if (*r) return RunRun(run);
  if (*e) return RunEval(eval);
  if (*in) return RunInspect(inspect);
  if (*l) return RunLookup(lookup);
  if (*cmp) return RunCompare(compare);
  if (*ex) return RunExample(example);
  if (*adm) {
    for (auto* sub : {a_workers, a_drain, a_jobs, a_cancel, a_gc}) {
      if (*sub) admin.action = sub->get_name();
    }
    return RunAdmin(admin);
  }
  if (*d) {
    for (auto* sub : {d_export, d_import, d_stats, d_gc}) {
      if (*sub) db.action = sub->get_name();
    }
    return RunDb(db);
  }
  return kiln::kExitUsage;
}
