// Proof under faults, with real processes on 127.0.0.1: a worker SIGKILLed or
// SIGSTOPped while it holds a lease, the server SIGKILLed in the middle of a
// tuning job, a measurement that crashes, hangs or has its memory trashed, and
// a tuning database whose disk is full or read-only. Records are counted with
// SQLite alone: none lost, none recorded twice, none from a stale lease.
// docs/testing.md ("Faults") says what each test proves.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "tests/e2e/cli_process.h"
#include "tests/e2e/farm_process.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using e2e::DbSnapshot;
using e2e::LogField;
using e2e::LogLines;
using e2e::ProcessFarm;
using e2e::ReadDb;
using e2e::ReadWholeFile;
using e2e::WaitUntil;
using std::chrono::seconds;

// A job's leader (and a runner-up) is measured again until measured twice, in
// up to this many passes (server::Tuner::kConfirmPasses).
constexpr int kConfirmPasses = 3;

std::string LastLease(const fs::path& log);  // below

class FaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("kiln_fault_" + std::to_string(getpid()) + "_" +
                                             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    ASSERT_EQ(e2e::RunCommand(kBin() + "/client/kiln example mlp -o " + (dir_ / "mlp").string(), dir_ / "example.log")
                  .exit_code,
              0)
        << ReadWholeFile(dir_ / "example.log");
  }
  void TearDown() override {
    if (!HasFailure()) {  // a failing test leaves its logs and database
      std::error_code ec;
      fs::remove_all(dir_, ec);
    }
  }
  static std::string kBin() { return e2e::kBin; }
  fs::path model() const { return dir_ / "mlp" / "mlp.onnx"; }
  fs::path db() const { return dir_ / "tuning.db"; }
  // A farm that notices a silent worker within 2 s.
  static std::vector<std::string> QuickExpiry() { return {"--heartbeat-ms", "300", "--worker-timeout-ms", "2000"}; }

  // A server that notices a silent worker within 2 s, and workers "alpha"
  // (its pid in *alpha) and "beta", both registered.
  void StartServerAndTwoWorkers(ProcessFarm& farm, pid_t* alpha) {
    ASSERT_GT(farm.StartServer(db(), QuickExpiry()), 0) << Logs();
    *alpha = farm.StartWorker("alpha");
    farm.StartWorker("beta");
    ASSERT_TRUE(
        WaitUntil([&] { return !farm.WorkerId("alpha").empty() && !farm.WorkerId("beta").empty(); }, seconds(30)))
        << Logs();
  }

  // The lease a frozen worker holds, from its "leased task" log line.
  struct HeldLease {
    std::string task, workload, config;
  };
  // Starts an 8-trial compile and stops (SIGSTOP) `worker` while it measures
  // one of its tasks: the lease it then holds.
  void CompileAndFreezeMidLease(ProcessFarm& farm, pid_t worker, pid_t* compile, HeldLease* held) {
    *compile = farm.StartCompile(model(), "x=8,64", 8, "compile");
    ASSERT_NE(e2e::StopWhileMeasuring(worker, seconds(60)), 0) << "the worker never measured" << Logs();
    const std::string line = LastLease(farm.Log("alpha"));
    *held = {LogField(line, "task"), LogField(line, "workload"), LogField(line, "config")};
    ASSERT_FALSE(held->task.empty()) << line;
  }

  // Every log of the farm, for a failure message.
  std::string Logs() const {
    std::string out;
    for (const auto& e : fs::directory_iterator(dir_)) {
      if (e.path().extension() != ".log") continue;
      std::string text = ReadWholeFile(e.path());
      if (text.size() > 6000) text = "..." + text.substr(text.size() - 6000);
      out += "\n=== " + e.path().filename().string() + "\n" + text;
    }
    return out;
  }

  fs::path dir_;
};

// The log line of the last task a worker leased ("" if none): the one it holds while it measures.
std::string LastLease(const fs::path& log) {
  auto lines = LogLines(log, "leased task");
  return lines.empty() ? "" : lines.back();
}

// The records of one schedule of one workload.
std::vector<e2e::DbRecord> RecordsOf(const DbSnapshot& db, const std::string& workload, const std::string& config) {
  std::vector<e2e::DbRecord> out;
  for (const auto& r : db.records) {
    if (r.workload == workload && r.config == config) out.push_back(r);
  }
  return out;
}

// What must hold of a database after any fault: SQLite finds it sound, every
// job is finished, each of its candidates points at one record of its own
// schedule, no record is shared, and no schedule was recorded more often than
// the confirmation passes allow (each at most twice, and per workload at most
// 2 * kConfirmPasses records beyond one per candidate).
void ExpectEveryJobDoneAndNoRecordTwice(const DbSnapshot& db) {
  ASSERT_EQ(db.error, "");
  EXPECT_EQ(db.integrity, "ok");
  ASSERT_FALSE(db.jobs.empty());
  const auto by_id = db.by_id();
  std::set<int64_t> linked;
  std::map<std::string, int> candidates_of;  // workload -> candidates
  for (const e2e::DbJob& job : db.jobs) {
    EXPECT_EQ(job.state, 1) << "job " << job.id << " of " << job.workload << " is not done";
    candidates_of[job.workload] += static_cast<int>(job.candidates.size());
    for (const auto& [config, record_id] : job.candidates) {
      ASSERT_NE(record_id, 0) << "job " << job.id << ": " << config << " unmeasured";
      auto it = by_id.find(record_id);
      ASSERT_NE(it, by_id.end()) << "job " << job.id << ": " << config << " points at a missing record";
      EXPECT_EQ(it->second->config, config);
      EXPECT_EQ(it->second->workload, job.workload);
      EXPECT_TRUE(linked.insert(record_id).second) << "record " << record_id << " serves two candidates";
    }
  }
  std::map<std::pair<std::string, std::string>, int> per_config;
  std::map<std::string, int> per_workload;
  for (const auto& r : db.records) {
    ++per_config[{r.workload, r.config}];
    ++per_workload[r.workload];
  }
  for (const auto& [key, n] : per_config) EXPECT_LE(n, 2) << key.first << " " << key.second << " recorded " << n;
  for (const auto& [workload, n] : per_workload) {
    EXPECT_GE(n, candidates_of[workload]) << workload;
    EXPECT_LE(n, candidates_of[workload] + 2 * kConfirmPasses) << workload;
  }
}

TEST_F(FaultTest, AWorkerKilledMidLeaseLosesItsTaskToAnotherAndTheCompileCompletes) {
  ProcessFarm farm(dir_);
  pid_t alpha = 0;
  ASSERT_NO_FATAL_FAILURE(StartServerAndTwoWorkers(farm, &alpha));
  const std::string alpha_id = farm.WorkerId("alpha"), beta_id = farm.WorkerId("beta");
  pid_t compile = 0;
  HeldLease held;
  ASSERT_NO_FATAL_FAILURE(CompileAndFreezeMidLease(farm, alpha, &compile, &held));
  const std::string &task = held.task, &workload = held.workload, &config = held.config;
  farm.Kill(alpha);  // its measuring child dies with it (PR_SET_PDEATHSIG)

  EXPECT_EQ(farm.Wait(compile, seconds(120)), 0) << Logs();
  EXPECT_NE(ReadWholeFile(farm.Log("compile")).find("2 groups (0 from the tuning database)"), std::string::npos)
      << ReadWholeFile(farm.Log("compile"));
  // The server took the lease back from the silent worker, and beta measured the task.
  EXPECT_FALSE(LogLines(farm.Log("server"), "lease lost", "task", task).empty()) << Logs();
  EXPECT_FALSE(LogLines(farm.Log("beta"), "measured task", "task", task).empty()) << Logs();

  DbSnapshot snap = ReadDb(db());
  ExpectEveryJobDoneAndNoRecordTwice(snap);
  bool by_beta = false;
  for (const auto& r : RecordsOf(snap, workload, config)) by_beta |= r.worker == beta_id;
  EXPECT_TRUE(by_beta) << "no record of " << config << " by " << beta_id;
}

TEST_F(FaultTest, AStoppedWorkerLosesItsLeaseAndItsLateReportIsRefused) {
  ProcessFarm farm(dir_);
  pid_t alpha = 0;
  ASSERT_NO_FATAL_FAILURE(StartServerAndTwoWorkers(farm, &alpha));
  const std::string alpha_id = farm.WorkerId("alpha"), beta_id = farm.WorkerId("beta");
  // Frozen while it measures: its measurement goes on in the child and ends,
  // but the worker can neither beat nor report.
  pid_t compile = 0;
  HeldLease held;
  ASSERT_NO_FATAL_FAILURE(CompileAndFreezeMidLease(farm, alpha, &compile, &held));
  const std::string &task = held.task, &workload = held.workload, &config = held.config;
  // The server retires it and re-queues the task; beta measures it.
  EXPECT_TRUE(WaitUntil([&] { return !LogLines(farm.Log("server"), "worker expired", "worker", alpha_id).empty(); },
                        seconds(30)))
      << Logs();
  EXPECT_TRUE(
      WaitUntil([&] { return !LogLines(farm.Log("beta"), "measured task", "task", task).empty(); }, seconds(60)))
      << Logs();
  EXPECT_FALSE(LogLines(farm.Log("server"), "lease lost", "task", task).empty()) << Logs();
  // What alpha reported before it was stopped (it may have measured a few
  // tasks first) stands; nothing may join it under its old id.
  auto records_by = [](const DbSnapshot& snap, const std::string& worker) {
    std::set<std::pair<std::string, std::string>> out;
    for (const auto& r : snap.records) {
      if (r.worker == worker) out.emplace(r.workload, r.config);
    }
    return out;
  };
  const auto alpha_before = records_by(ReadDb(db()), alpha_id);

  kill(alpha, SIGCONT);
  // Its result for the task arrives late, under its old id: refused. Then it
  // registers again under a new id and goes on measuring.
  EXPECT_TRUE(WaitUntil(
      [&] { return !LogLines(farm.Log("alpha"), "result rejected: lease no longer held", "task", task).empty(); },
      seconds(60)))
      << Logs();
  EXPECT_TRUE(WaitUntil([&] { return farm.WorkerId("alpha") != alpha_id; }, seconds(30))) << Logs();
  EXPECT_EQ(farm.Wait(compile, seconds(120)), 0) << Logs();
  const char state = e2e::ProcessState(alpha);
  EXPECT_TRUE(state != 0 && state != 'Z') << "alpha exited" << Logs();

  DbSnapshot snap = ReadDb(db());
  ExpectEveryJobDoneAndNoRecordTwice(snap);
  // The task's records: beta's, none from alpha's lost lease.
  bool by_beta = false;
  for (const auto& r : RecordsOf(snap, workload, config)) {
    EXPECT_NE(r.worker, alpha_id) << "the stale report of " << task << " was recorded";
    by_beta |= r.worker == beta_id;
  }
  EXPECT_TRUE(by_beta) << "no record of " << config << " by " << beta_id;
  EXPECT_EQ(records_by(snap, alpha_id), alpha_before);
}

TEST_F(FaultTest, AServerKilledMidJobResumesOnRestartWithNoRecordLostOrDuplicated) {
  ProcessFarm farm(dir_);
  const int port = farm.StartServer(db(), QuickExpiry());
  ASSERT_GT(port, 0) << Logs();
  const pid_t alpha = farm.StartWorker("alpha");
  ASSERT_TRUE(WaitUntil([&] { return !farm.WorkerId("alpha").empty(); }, seconds(30))) << Logs();
  const pid_t compile = farm.StartCompile(model(), "x=8,64", 12, "compile");

  // Freeze the farm in the middle of a job: the worker measuring one of its
  // candidates, some of the others recorded and some not.
  DbSnapshot before;
  bool mid_job = false;
  const auto give_up = std::chrono::steady_clock::now() + seconds(60);
  while (!mid_job && std::chrono::steady_clock::now() < give_up) {
    ASSERT_NE(e2e::StopWhileMeasuring(alpha, seconds(60)), 0) << "alpha never measured" << Logs();
    before = ReadDb(db());
    for (const auto& job : before.jobs) {
      int measured = 0;
      for (const auto& c : job.candidates) measured += c.second != 0;
      mid_job |= job.state == 0 && measured >= 1 && measured + 2 <= static_cast<int>(job.candidates.size());
    }
    if (!mid_job) {
      kill(alpha, SIGCONT);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ASSERT_TRUE(mid_job) << "never caught a job half measured" << Logs();
  farm.Kill(farm.server());
  before = ReadDb(db());  // what the killed server left on disk
  ASSERT_EQ(before.error, "");
  ASSERT_EQ(before.integrity, "ok");
  kill(alpha, SIGCONT);
  // The compile in flight loses its server: an error, not a hang.
  const int compile_exit = farm.Wait(compile, seconds(60));
  EXPECT_GT(compile_exit, 0) << Logs();

  // A new server on the same database and port resumes the job with no client;
  // the worker finds it again and registers anew.
  int again = 0;
  for (int attempt = 0; attempt < 20 && again == 0; ++attempt) {
    again = farm.StartServer(db(), QuickExpiry(), "server2", "127.0.0.1:" + std::to_string(port));
    if (again == 0) {
      farm.Wait(farm.server(), seconds(10));
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  }
  ASSERT_EQ(again, port) << Logs();
  EXPECT_TRUE(WaitUntil([&] { return !LogLines(farm.Log("server2"), "resuming tuning job").empty(); }, seconds(30)))
      << Logs();
  ASSERT_TRUE(WaitUntil(
      [&] {
        DbSnapshot now = ReadDb(db());
        if (!now.error.empty() || now.jobs.empty()) return false;
        for (const auto& job : now.jobs) {
          if (job.state == 0) return false;
        }
        return true;
      },
      seconds(120)))
      << Logs();

  // The compile again: the resumed job's records answer its group, the other is tuned now.
  const pid_t compile2 = farm.StartCompile(model(), "x=8,64", 12, "compile2");
  EXPECT_EQ(farm.Wait(compile2, seconds(120)), 0) << Logs();
  DbSnapshot after = ReadDb(db());
  ExpectEveryJobDoneAndNoRecordTwice(after);
  // None lost: every record the killed server had written is still there, and
  // every candidate it had recorded still points at the same record.
  const auto after_by_id = after.by_id();
  for (const auto& r : before.records) {
    auto it = after_by_id.find(r.id);
    ASSERT_NE(it, after_by_id.end()) << "record " << r.id << " lost";
    EXPECT_EQ(it->second->config, r.config);
    EXPECT_EQ(it->second->worker, r.worker);
  }
  std::map<int64_t, const e2e::DbJob*> after_jobs;
  for (const auto& job : after.jobs) after_jobs[job.id] = &job;
  for (const auto& job : before.jobs) {
    ASSERT_TRUE(after_jobs.count(job.id)) << "job " << job.id << " lost";
    const auto& now = after_jobs[job.id]->candidates;
    ASSERT_GE(now.size(), job.candidates.size());
    for (size_t i = 0; i < job.candidates.size(); ++i) {
      EXPECT_EQ(now[i].first, job.candidates[i].first);
      if (job.candidates[i].second != 0) EXPECT_EQ(now[i].second, job.candidates[i].second) << "measured twice";
    }
  }
  EXPECT_GT(after.records.size(), before.records.size());
}

// Writes 0xff over the writable memory of `pid` named `region` in
// its maps ("[heap]", "[stack]"); the bytes written.
size_t Trash(pid_t pid, const std::string& region) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  const int mem = open(("/proc/" + std::to_string(pid) + "/mem").c_str(), O_RDWR);
  if (mem < 0) return 0;
  size_t written = 0;
  for (std::string line; std::getline(maps, line);) {
    if (line.size() < region.size() || line.compare(line.size() - region.size(), region.size(), region) != 0) continue;
    unsigned long start = 0, end = 0;
    char perms[5] = {0};
    if (std::sscanf(line.c_str(), "%lx-%lx %4s", &start, &end, perms) != 3 || perms[1] != 'w') continue;
    const std::string junk(end - start, '\xff');
    const ssize_t n = pwrite(mem, junk.data(), junk.size(), static_cast<off_t>(start));
    if (n > 0) written += static_cast<size_t>(n);
  }
  close(mem);
  return written;
}

TEST_F(FaultTest, AMeasurementThatCrashesHangsOrTrashesItsMemoryIsATypedErrorAndTheWorkerLives) {
  ProcessFarm farm(dir_);
  ASSERT_GT(farm.StartServer(db(), {}), 0) << Logs();
  // A measurement of these tiny kernels takes well under a second; 5 s is its deadline.
  const pid_t alpha = farm.StartWorker("alpha", {"--task-timeout-ms", "5000"});
  ASSERT_TRUE(WaitUntil([&] { return !farm.WorkerId("alpha").empty(); }, seconds(30))) << Logs();
  const std::string alpha_id = farm.WorkerId("alpha");
  const pid_t compile = farm.StartCompile(model(), "x=8,64", 12, "compile");

  struct Fault {
    std::string name;
    std::function<bool(pid_t child)> inflict;
    std::set<std::string> results;  // what the worker may report
    std::string message;            // part of the error message ("" : any)
  };
  const std::vector<Fault> faults = {
      // The child arrives stopped: a signal sent now is delivered when it goes on.
      {"crash",
       [](pid_t child) { return kill(child, SIGSEGV) == 0 && kill(child, SIGCONT) == 0; },
       {"runtime_error"},
       "kernel crashed: signal 11"},
      {"hang", [](pid_t child) { return e2e::ProcessState(child) == 'T'; }, {"timeout"}, "exceeded its deadline"},
      // Its heap and stack overwritten: it crashes, or computes garbage, or spins.
      {"trashed memory",
       [](pid_t child) {
         const bool trashed = Trash(child, "[heap]") + Trash(child, "[stack]") > 0;
         return kill(child, SIGCONT) == 0 && trashed;
       },
       {"runtime_error", "wrong_answer", "timeout"},
       ""},
  };
  std::map<std::string, std::string> error_of;  // config -> the record's expected error
  for (const Fault& fault : faults) {
    SCOPED_TRACE(fault.name);
    const pid_t child = e2e::FreezeWhileMeasuring(alpha, seconds(60));
    ASSERT_NE(child, 0) << "alpha never measured" << Logs();
    const std::string held = LastLease(farm.Log("alpha"));
    const std::string task = LogField(held, "task");
    const bool inflicted = fault.inflict(child);
    kill(alpha, SIGCONT);
    ASSERT_TRUE(inflicted) << "cannot inflict it: " << strerror(errno);
    std::vector<std::string> measured;
    ASSERT_TRUE(WaitUntil(
        [&] { return !(measured = LogLines(farm.Log("alpha"), "measured task", "task", task)).empty(); }, seconds(60)))
        << Logs();
    const std::string result = LogField(measured.back(), "result");
    EXPECT_TRUE(fault.results.count(result)) << measured.back();
    EXPECT_NE(LogField(measured.back(), "error").find(fault.message), std::string::npos) << measured.back();
  }
  EXPECT_EQ(farm.Wait(compile, seconds(120)), 0) << Logs();
  // The worker lived through all of it, as the one registration it began with.
  const char state = e2e::ProcessState(alpha);
  EXPECT_TRUE(state != 0 && state != 'Z') << Logs();
  EXPECT_EQ(LogLines(farm.Log("alpha"), "registered").size(), 1u) << Logs();
  EXPECT_EQ(farm.WorkerId("alpha"), alpha_id);
  // The failures are records of their own kind, kept out of the answers.
  DbSnapshot snap = ReadDb(db());
  ExpectEveryJobDoneAndNoRecordTwice(snap);
  int failed = 0;
  for (const auto& r : snap.records) failed += r.error != 0;
  EXPECT_GE(failed, 3);
}

// A small filesystem of its own for the database (a tmpfs), so that it can
// fill up or be read-only without touching the machine's disks. Needs the
// right to mount (root with CAP_SYS_ADMIN); elsewhere the tests skip, saying so.
class SmallDisk {
 public:
  SmallDisk(const fs::path& dir, const std::string& size) : dir_(dir) {
    fs::create_directories(dir_);
    const std::string options = "size=" + size + ",mode=0755";
    if (mount("tmpfs", dir_.c_str(), "tmpfs", 0, options.c_str()) != 0) {
      why_not_ = std::string("cannot mount a tmpfs for the database: ") + strerror(errno) +
                 " (the disk-full and read-only tests need root with CAP_SYS_ADMIN)";
    }
  }
  ~SmallDisk() {
    if (why_not_.empty()) umount2(dir_.c_str(), MNT_DETACH);
  }
  const std::string& why_not() const { return why_not_; }
  // Writes a filler file until the disk is full.
  void Fill() {
    std::ofstream f(dir_ / "filler", std::ios::binary);
    const std::string chunk(4096, '\0');
    while (f.write(chunk.data(), chunk.size()) && f.flush()) {
    }
  }
  void Free() { fs::remove(dir_ / "filler"); }

 private:
  fs::path dir_;
  std::string why_not_;
};

// The records of a snapshot, by id: what a failed write must leave alone.
std::map<int64_t, std::string> RecordIds(const DbSnapshot& db) {
  std::map<int64_t, std::string> out;
  for (const auto& r : db.records) out[r.id] = r.workload + " " + r.config + " " + r.worker;
  return out;
}

// Nothing half-written: sound, and every measured candidate points at a
// record of its own schedule.
void ExpectConsistent(const DbSnapshot& db) {
  ASSERT_EQ(db.error, "");
  EXPECT_EQ(db.integrity, "ok");
  const auto by_id = db.by_id();
  for (const e2e::DbJob& job : db.jobs) {
    for (const auto& [config, record_id] : job.candidates) {
      if (record_id == 0) continue;
      auto it = by_id.find(record_id);
      ASSERT_NE(it, by_id.end()) << "job " << job.id << ": " << config << " points at a missing record";
      EXPECT_EQ(it->second->config, config);
    }
  }
}

TEST_F(FaultTest, ADatabaseOnAFullDiskIsAClearErrorNothingHalfWrittenAndTheServerServesOn) {
  SmallDisk disk(dir_ / "disk", "4m");
  if (!disk.why_not().empty()) GTEST_SKIP() << disk.why_not();
  const fs::path db = dir_ / "disk" / "tuning.db";
  ProcessFarm farm(dir_);
  ASSERT_GT(farm.StartServer(db, {}), 0) << Logs();
  const pid_t alpha = farm.StartWorker("alpha");
  ASSERT_TRUE(WaitUntil([&] { return !farm.WorkerId("alpha").empty(); }, seconds(30))) << Logs();
  ASSERT_EQ(farm.Wait(farm.StartCompile(model(), "x=8,64", 3, "first"), seconds(120)), 0) << Logs();
  const DbSnapshot full_before = ReadDb(db);
  ExpectEveryJobDoneAndNoRecordTwice(full_before);

  // Full between two compiles: the next compile fails naming the database.
  disk.Fill();
  const pid_t refused = farm.StartCompile(model(), "x=4,64", 3, "refused");
  EXPECT_EQ(farm.Wait(refused, seconds(120)), 1) << Logs();
  const std::string refusal = ReadWholeFile(farm.Log("refused"));
  EXPECT_NE(refusal.find("RESOURCE_EXHAUSTED"), std::string::npos) << refusal;
  EXPECT_NE(refusal.find("tuning db " + db.string()), std::string::npos) << refusal;
  EXPECT_NE(refusal.find("disk is full"), std::string::npos) << refusal;
  DbSnapshot snap = ReadDb(db);
  ExpectConsistent(snap);
  EXPECT_EQ(RecordIds(snap), RecordIds(full_before));
  EXPECT_EQ(snap.jobs.size(), full_before.jobs.size());

  // Full in the middle of a job: the worker frozen while it measures, the disk
  // filled, the worker let go. The compile fails, naming the database.
  disk.Free();
  const pid_t mid = farm.StartCompile(model(), "x=2,64", 12, "mid");
  DbSnapshot at_fill;
  bool mid_job = false;
  const auto give_up = std::chrono::steady_clock::now() + seconds(60);
  while (!mid_job && std::chrono::steady_clock::now() < give_up) {
    ASSERT_NE(e2e::StopWhileMeasuring(alpha, seconds(60)), 0) << "alpha never measured" << Logs();
    at_fill = ReadDb(db);
    for (const auto& job : at_fill.jobs) mid_job |= job.state == 0;
    if (!mid_job) {
      kill(alpha, SIGCONT);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ASSERT_TRUE(mid_job) << "never caught a job running" << Logs();
  disk.Fill();
  kill(alpha, SIGCONT);
  const int mid_exit = farm.Wait(mid, seconds(120));
  const std::string mid_error = ReadWholeFile(farm.Log("mid"));
  EXPECT_EQ(mid_exit, 1) << Logs();
  EXPECT_NE(mid_error.find("tuning db " + db.string()), std::string::npos) << mid_error;
  EXPECT_NE(mid_error.find("disk is full"), std::string::npos) << mid_error;
  snap = ReadDb(db);
  ExpectConsistent(snap);
  for (const auto& [id, what] : RecordIds(at_fill)) EXPECT_EQ(RecordIds(snap)[id], what) << "record " << id;

  // Space again: the same server compiles both, and the interrupted job ends.
  disk.Free();
  EXPECT_EQ(farm.Wait(farm.StartCompile(model(), "x=4,64", 3, "after"), seconds(120)), 0) << Logs();
  EXPECT_EQ(farm.Wait(farm.StartCompile(model(), "x=2,64", 12, "after_mid"), seconds(120)), 0) << Logs();
  ExpectEveryJobDoneAndNoRecordTwice(ReadDb(db));
  farm.Kill(farm.server());
}

TEST_F(FaultTest, ADatabaseOnAReadOnlyDiskIsRefusedAtStartNamingIt) {
  SmallDisk disk(dir_ / "disk", "4m");
  if (!disk.why_not().empty()) GTEST_SKIP() << disk.why_not();
  const fs::path db = dir_ / "disk" / "tuning.db";
  {
    ProcessFarm farm(dir_);
    ASSERT_GT(farm.StartServer(db, {}), 0) << Logs();
    farm.StartWorker("alpha");
    ASSERT_EQ(farm.Wait(farm.StartCompile(model(), "x=8,64", 3, "first"), seconds(120)), 0) << Logs();
    EXPECT_EQ(farm.Stop(farm.server()), 0);  // SIGTERM: a clean stop
  }
  const DbSnapshot before = ReadDb(db);
  ASSERT_EQ(before.error, "");
  ASSERT_FALSE(before.records.empty());
  ASSERT_EQ(mount(nullptr, (dir_ / "disk").c_str(), nullptr, MS_REMOUNT | MS_RDONLY, nullptr), 0) << strerror(errno);

  auto start = e2e::RunCommandSplit(kBin() + "/server/kiln-server --listen 127.0.0.1:0 --db " + db.string(),
                                    dir_ / "readonly_server");
  EXPECT_EQ(start.exit_code, 1) << start.err;
  EXPECT_NE(start.err.find("tuning db " + db.string()), std::string::npos) << start.err;
  EXPECT_NE(start.err.find("Read-only file system"), std::string::npos) << start.err;

  ASSERT_EQ(mount(nullptr, (dir_ / "disk").c_str(), nullptr, MS_REMOUNT, nullptr), 0) << strerror(errno);
  const DbSnapshot after = ReadDb(db);
  ASSERT_EQ(after.error, "");
  EXPECT_EQ(after.integrity, "ok");
  EXPECT_EQ(RecordIds(after), RecordIds(before));
}

}  // namespace
}  // namespace kiln
