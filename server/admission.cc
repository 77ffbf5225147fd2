// Per-client limits of the compile server: model caps, concurrent and queued
// compiles, tuning budgets.
#include "server/admission.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/auth.h"

namespace kiln::server {
namespace {

// The payload that carries the limit's flag on a LimitExceededError.
constexpr char kLimitPayload[] = "type.kiln.dev/kiln.limit";

std::string Plural(int64_t n, const char* one, const char* many) { return absl::StrCat(n, " ", n == 1 ? one : many); }

std::string Seconds(AdmissionControl::Clock::duration d) {
  const double s = std::chrono::duration<double>(d).count();
  return absl::StrCat(static_cast<int64_t>(s * 10 + 0.5) / 10.0, " s");
}

}  // namespace

absl::Status LimitExceededError(const std::string& flag, const std::string& message) {
  absl::Status s = absl::ResourceExhaustedError(message);
  s.SetPayload(kLimitPayload, absl::Cord(flag));
  return s;
}

std::optional<std::string> LimitOf(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kResourceExhausted) return std::nullopt;
  absl::optional<absl::Cord> flag = status.GetPayload(kLimitPayload);
  if (!flag) return std::nullopt;
  return std::string(*flag);
}

absl::Status CheckModelLimits(const Graph& graph, const ModelLimits& limits) {
  const int64_t nodes = static_cast<int64_t>(graph.nodes().size());
  if (limits.max_nodes > 0 && nodes > limits.max_nodes) {
    return LimitExceededError(
        "max-model-nodes",
        absl::StrCat("the model has ", nodes, " nodes (limit --max-model-nodes=", limits.max_nodes, ")"));
  }
  if (limits.max_initializer_bytes > 0) {
    int64_t bytes = 0;
    for (const Value* v : graph.constants()) bytes += v->constant().size_bytes();
    if (bytes > limits.max_initializer_bytes) {
      const int64_t mib = limits.max_initializer_bytes >> 20;
      return LimitExceededError(
          "max-initializer-mb",
          absl::StrCat("the model's initializers hold ", bytes, " bytes (limit --max-initializer-mb=",
                       mib << 20 == limits.max_initializer_bytes ? absl::StrCat(mib)
                                                                 : absl::StrCat(limits.max_initializer_bytes, " bytes"),
                       ")"));
    }
  }
  return absl::OkStatus();
}

std::string ClientKey(const grpc::ServerContext& context) {
  if (std::string identity = CallerIdentity(&context); !identity.empty()) return identity;
  // "ipv4:127.0.0.1:5000", "ipv6:[::1]:5000", "unix:/path": the host alone.
  std::string peer = context.peer();
  if (absl::StartsWith(peer, "ipv4:")) {
    peer = peer.substr(5);
    return peer.substr(0, peer.rfind(':'));
  }
  if (absl::StartsWith(peer, "ipv6:[")) {
    peer = peer.substr(6);
    return peer.substr(0, peer.find(']'));
  }
  return peer;
}

// ---- Slot

AdmissionControl::Slot::~Slot() { owner_->Release(client_); }

void AdmissionControl::Slot::Measured(int64_t total) {
  int64_t delta = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (total <= charged_) return;
    delta = total - charged_;
    charged_ = total;
  }
  owner_->Charge(client_, delta);
}

absl::Status AdmissionControl::Slot::TuningAllowed() const { return owner_->TuningAllowed(client_); }

// ---- AdmissionControl

void AdmissionControl::ExpireTrialsLocked(ClientState& state, Clock::time_point now) {
  while (!state.trials.empty() && state.trials.front().first + options_.tuning_window <= now) {
    state.trials_sum -= state.trials.front().second;
    state.trials.pop_front();
  }
}

bool AdmissionControl::MayRunLocked(const ClientState& state) const {
  return options_.max_compiles_per_client <= 0 || state.running < options_.max_compiles_per_client;
}

bool AdmissionControl::MayStartLocked(uint64_t ticket, const std::string& client) {
  if (options_.max_compiles > 0 && running_ >= options_.max_compiles) return false;
  ClientState& state = StateLocked(client);
  if (state.waiting.empty() || state.waiting.front() != ticket || !MayRunLocked(state)) return false;
  // An earlier compile of another client that may start goes first.
  for (const auto& [t, other] : waiting_) {
    if (t >= ticket) break;
    const ClientState& o = StateLocked(other);
    if (o.waiting.front() == t && MayRunLocked(o)) return false;
  }
  return true;
}

void AdmissionControl::ForgetIfIdleLocked(const std::string& client) {
  auto it = clients_.find(client);
  if (it == clients_.end()) return;
  ExpireTrialsLocked(it->second, now_());
  if (it->second.running == 0 && it->second.waiting.empty() && it->second.trials.empty()) clients_.erase(it);
}

void AdmissionControl::SweepLocked() {
  const Clock::time_point now = now_();
  for (auto it = clients_.begin(); it != clients_.end();) {
    ExpireTrialsLocked(it->second, now);
    const ClientState& c = it->second;
    it = c.running == 0 && c.waiting.empty() && c.trials.empty() ? clients_.erase(it) : std::next(it);
  }
}

absl::StatusOr<std::shared_ptr<AdmissionControl::Slot>> AdmissionControl::Admit(
    const std::string& client, Clock::time_point deadline, const std::function<bool()>& cancelled) {
  std::unique_lock<std::mutex> lock(mu_);
  if (next_ticket_ % kSweepEvery == 0) SweepLocked();
  ClientState& state = StateLocked(client);  // std::map: stays valid while the entry does
  const bool server_full = options_.max_compiles > 0 && running_ >= options_.max_compiles;
  // Nobody waiting ahead (of this client, or another that may start): start now.
  const uint64_t ticket = ++next_ticket_;
  state.waiting.push_back(ticket);
  waiting_.emplace(ticket, client);
  if (!MayStartLocked(ticket, client)) {
    const int queued = static_cast<int>(state.waiting.size()) - 1;  // ahead of this one, of this client
    if (queued >= options_.max_queued_per_client) {
      state.waiting.pop_back();
      waiting_.erase(ticket);
      absl::Status refused;
      if (options_.max_queued_per_client <= 0 && !server_full) {
        refused = LimitExceededError(
            "max-compiles-per-client",
            absl::StrCat("client '", client, "' has ", Plural(state.running, "compile", "compiles"),
                         " running (limit --max-compiles-per-client=", options_.max_compiles_per_client, ")"));
      } else if (options_.max_queued_per_client <= 0) {
        refused = LimitExceededError("max-compiles",
                                     absl::StrCat("the server has ", Plural(running_, "compile", "compiles"),
                                                  " running (limit --max-compiles=", options_.max_compiles, ")"));
      } else {
        refused = LimitExceededError(
            "max-queued-per-client",
            absl::StrCat("client '", client, "' has ", Plural(state.running, "compile", "compiles"), " running and ",
                         queued, " waiting (limit --max-queued-per-client=", options_.max_queued_per_client,
                         "; --max-compiles-per-client=", options_.max_compiles_per_client,
                         ", --max-compiles=", options_.max_compiles, ")"));
      }
      ForgetIfIdleLocked(client);
      return refused;
    }
    const Clock::time_point since = Clock::now();
    while (!MayStartLocked(ticket, client)) {
      absl::Status stop;
      if (cancelled && cancelled()) {
        stop =
            absl::CancelledError(absl::StrCat("compile cancelled while waiting for a slot of client '", client, "'"));
      } else if (Clock::now() >= deadline) {
        stop = absl::DeadlineExceededError(
            absl::StrCat("deadline exceeded after ", Seconds(Clock::now() - since), " waiting for a slot: client '",
                         client, "' has ", Plural(state.running, "compile", "compiles"),
                         " running (limit --max-compiles-per-client=", options_.max_compiles_per_client,
                         "), the server ", running_, " (limit --max-compiles=", options_.max_compiles, ")"));
      }
      if (!stop.ok()) {
        state.waiting.erase(std::find(state.waiting.begin(), state.waiting.end(), ticket));
        waiting_.erase(ticket);
        ForgetIfIdleLocked(client);
        cv_.notify_all();  // the next of this client may start now
        return stop;
      }
      cv_.wait_until(lock, std::min(deadline, Clock::now() + std::chrono::milliseconds(50)));
    }
  }
  state.waiting.pop_front();
  waiting_.erase(ticket);
  ++state.running;
  ++running_;
  cv_.notify_all();  // another client's compile behind this one may start too
  return std::shared_ptr<Slot>(new Slot(this, client));
}

void AdmissionControl::Release(const std::string& client) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = clients_.find(client);
  if (it != clients_.end()) --it->second.running;
  --running_;
  ForgetIfIdleLocked(client);
  cv_.notify_all();
}

void AdmissionControl::Charge(const std::string& client, int64_t trials) {
  if (trials <= 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  ClientState& state = StateLocked(client);
  const Clock::time_point now = now_();
  ExpireTrialsLocked(state, now);
  const auto bucket = std::max<Clock::duration>(options_.tuning_window / kBuckets, std::chrono::milliseconds(1));
  if (state.trials.empty() || now - state.trials.back().first >= bucket) {
    state.trials.emplace_back(now, trials);
  } else {
    state.trials.back().second += trials;
  }
  state.trials_sum += trials;
}

absl::Status AdmissionControl::TuningAllowed(const std::string& client) {
  if (options_.tuning_trials_per_client <= 0) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(mu_);
  ClientState& state = StateLocked(client);
  ExpireTrialsLocked(state, now_());
  if (state.trials_sum < options_.tuning_trials_per_client) return absl::OkStatus();
  // The oldest bucket leaves the window first; the budget is back once enough have.
  const Clock::duration wait = state.trials.front().first + options_.tuning_window - now_();
  return LimitExceededError("tuning-trials-per-client",
                            absl::StrCat("client '", client, "' has measured ", state.trials_sum,
                                         " tuning trials in the last ", options_.tuning_window.count(),
                                         " s (limit --tuning-trials-per-client=", options_.tuning_trials_per_client,
                                         " per --tuning-window-s=", options_.tuning_window.count(),
                                         "); compiles the tuning database answers still work; the oldest of "
                                         "these trials leave the window in ",
                                         Seconds(wait)));
}

AdmissionControl::Usage AdmissionControl::UsageOf(const std::string& client) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = clients_.find(client);
  if (it == clients_.end()) return {};
  ExpireTrialsLocked(it->second, now_());
  return Usage{it->second.running, static_cast<int>(it->second.waiting.size()), it->second.trials_sum};
}

int AdmissionControl::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_;
}

int AdmissionControl::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(waiting_.size());
}

int AdmissionControl::clients_tracked() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(clients_.size());
}

ServerMetrics::Collector AdmissionControl::Collector() const {
  return [this] {
    auto gauge = [](std::string name, std::string help, double value) {
      prometheus::MetricFamily f;
      f.name = std::move(name);
      f.help = std::move(help);
      f.type = prometheus::MetricType::Gauge;
      prometheus::ClientMetric m;
      m.gauge.value = value;
      f.metric.push_back(std::move(m));
      return f;
    };
    std::vector<prometheus::MetricFamily> families;
    families.push_back(
        gauge("kiln_compiles_running", "Compile requests holding a slot now (background tuning included)", running()));
    families.push_back(gauge("kiln_compiles_waiting", "Compile requests waiting for a slot now", queued()));
    return families;
  };
}

}  // namespace kiln::server
