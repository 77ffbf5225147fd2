// Admission control of the compile server: what one client may ask of the
// farm at a time (docs/operations.md, "Limits"). Going over a limit is
// RESOURCE_EXHAUSTED whose message names the limit, its flag and its value.
#pragma once

#include <grpcpp/server_context.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compiler_core/ir/graph.h"
#include "server/metrics.h"

namespace kiln::server {

// Caps on one model, checked once it is parsed and before anything is
// optimised (the request's bytes are capped by gRPC before it is parsed:
// ServerOptions::max_request_bytes). 0: unlimited.
struct ModelLimits {
  int64_t max_nodes = 250000;                 // --max-model-nodes
  int64_t max_initializer_bytes = 1ll << 30;  // --max-initializer-mb: constants, summed
};

// OK, or RESOURCE_EXHAUSTED naming the cap `graph` is over ("the model has
// 1200 nodes (limit --max-model-nodes=1000)").
absl::Status CheckModelLimits(const Graph& graph, const ModelLimits& limits);

// A RESOURCE_EXHAUSTED status for the limit `flag` (e.g. "max-model-nodes"),
// which LimitOf() reads back: the label of kiln_admission_refused_total.
absl::Status LimitExceededError(const std::string& flag, const std::string& message);
// The flag of the limit a status from LimitExceededError names; nullopt for
// any other status.
std::optional<std::string> LimitOf(const absl::Status& status);

// Who a call is from, for per-client limits: the identity the auth file gives
// its credential, else the peer's host ("127.0.0.1", "::1"; all calls from one
// host share its limits).
std::string ClientKey(const grpc::ServerContext& context);

// Concurrent compiles per client and server-wide, with a bounded queue per
// client, and a per-client tuning budget over a rolling window. Thread-safe.
//
// A compile takes a Slot for as long as it runs (a progressive compile's
// background tuning keeps it until that ends). A client at its concurrency
// limit waits in its queue, first come first served, until a slot frees, its
// call is cancelled or its deadline passes; with its queue full it is refused
// at once. Waiting compiles of different clients are admitted in arrival
// order, except that a client at its own limit holds up no other client.
//
// Tuning trials are charged to the client as its compiles report them
// measured. Once the client has measured its budget within the window, a
// compile that would measure more is refused (one that the tuning database
// answers still compiles); a compile admitted under the budget runs to its end,
// so a client may overshoot by what its compiles in flight measure.
class AdmissionControl {
 public:
  struct Options {
    int max_compiles_per_client = 8;           // --max-compiles-per-client; 0: unlimited
    int max_queued_per_client = 32;            // --max-queued-per-client; 0: no queue, refused at once
    int max_compiles = 0;                      // --max-compiles, server-wide; 0: unlimited
    int64_t tuning_trials_per_client = 0;      // --tuning-trials-per-client per window; 0: unlimited
    std::chrono::seconds tuning_window{3600};  // --tuning-window-s
  };

  // A running compile's place; destroying it frees the place.
  class Slot {
   public:
    ~Slot();
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    const std::string& client() const { return client_; }
    // Charges the trials this compile measured beyond what was charged before:
    // `total` is the compile's running total (a smaller one charges nothing).
    void Measured(int64_t total);
    // OK while the client has tuning budget left; RESOURCE_EXHAUSTED naming
    // the budget when it has none.
    absl::Status TuningAllowed() const;

   private:
    friend class AdmissionControl;
    Slot(AdmissionControl* owner, std::string client) : owner_(owner), client_(std::move(client)) {}
    AdmissionControl* owner_;
    std::string client_;
    std::mutex mu_;
    int64_t charged_ = 0;
  };

  // What one client has now.
  struct Usage {
    int running = 0;
    int queued = 0;
    int64_t trials_in_window = 0;
  };

  using Clock = std::chrono::steady_clock;

  explicit AdmissionControl(Options options) : options_(options) {}
  AdmissionControl(const AdmissionControl&) = delete;
  AdmissionControl& operator=(const AdmissionControl&) = delete;

  // A slot for a compile of `client`, waiting for one if need be until
  // `deadline` (DEADLINE_EXCEEDED) or `cancelled()` (CANCELLED; polled every
  // 50 ms). RESOURCE_EXHAUSTED naming the limit (LimitOf) when the client's
  // queue is full.
  absl::StatusOr<std::shared_ptr<Slot>> Admit(const std::string& client, Clock::time_point deadline,
                                              const std::function<bool()>& cancelled);

  Usage UsageOf(const std::string& client);
  // Charges `client` trials measured outside any compile of its: a tuning job
  // its cancelled compile left running (Tuner::Tune's pay_after_leaving). A
  // compile's own trials are charged through its Slot.
  void Charge(const std::string& client, int64_t trials);
  // Compiles running and waiting, server-wide.
  int running() const;
  int queued() const;
  // Clients with state kept (a compile running or waiting, or trials charged
  // within the window): what the memory of this class grows with.
  int clients_tracked() const;
  const Options& options() const { return options_; }

  // kiln_compiles_running and kiln_compiles_waiting, at scrape time.
  ServerMetrics::Collector Collector() const;

  // For tests: the clock the tuning window is measured on.
  void SetClockForTest(std::function<Clock::time_point()> now) { now_ = std::move(now); }

 private:
  // The trials of one client within the window, in buckets of window/kBuckets.
  static constexpr int kBuckets = 60;
  struct ClientState {
    int running = 0;
    std::deque<uint64_t> waiting;                              // tickets, oldest first
    std::deque<std::pair<Clock::time_point, int64_t>> trials;  // bucket start, trials
    int64_t trials_sum = 0;
  };

  // Require mu_.
  ClientState& StateLocked(const std::string& client) { return clients_[client]; }
  void ExpireTrialsLocked(ClientState& state, Clock::time_point now);
  bool MayRunLocked(const ClientState& state) const;
  bool MayStartLocked(uint64_t ticket, const std::string& client);
  void ForgetIfIdleLocked(const std::string& client);
  // Forgets every idle client whose trials have left the window.
  void SweepLocked();
  static constexpr uint64_t kSweepEvery = 256;  // admissions

  void Release(const std::string& client);
  absl::Status TuningAllowed(const std::string& client);

  const Options options_;
  std::function<Clock::time_point()> now_ = [] { return Clock::now(); };

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, ClientState> clients_;
  std::map<uint64_t, std::string> waiting_;  // ticket -> client, every waiting compile
  uint64_t next_ticket_ = 0;
  int running_ = 0;
};

}  // namespace kiln::server
