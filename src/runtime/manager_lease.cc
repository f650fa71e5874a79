// NewLeaseLeaderElection: the Lease-based LeaderElector seen through the Manager's
// LeaderElection interface, with the Lease-namespace check that runs before campaigning.
// Kept apart from manager.cc so the Manager links without the Kubernetes client when no
// lease is used (tests, the agent).
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>

#include "k8s/resource.h"
#include "runtime/leader_election.h"
#include "runtime/manager.h"

namespace gg::runtime {
namespace {

// Why the Lease cannot be written, in words an operator acts on; OK when it can.
Status DiagnoseLeaseWrite(const Status& dry_run, const LeaderElectionConfig& c) {
  if (dry_run.ok() || dry_run.code() == StatusCode::kAlreadyExists) return OkStatus();
  const std::string where = "Lease " + c.lease_namespace + "/" + c.lease_name;
  if (dry_run.code() == StatusCode::kNotFound) {
    return FailedPreconditionError(
        "leader election cannot start: namespace \"" + c.lease_namespace +
        "\" does not exist (the " + where + " lives there); create it (kubectl create namespace " +
        c.lease_namespace + ") or pass --leader-election-namespace=<an existing namespace>");
  }
  if (dry_run.code() == StatusCode::kPermissionDenied) {
    return PermissionDeniedError("leader election cannot start: not allowed to create the " +
                                 where + " (" + dry_run.message() +
                                 "); grant get, create and update on leases.coordination.k8s.io "
                                 "in namespace " +
                                 c.lease_namespace);
  }
  return UnavailableError("leader election cannot start: checking the " + where +
                          " failed: " + dry_run.ToString());
}

class LeaseElectionImpl final : public LeaseLeaderElection {
 public:
  struct State {
    std::mutex mu;
    std::condition_variable_any cv;
    bool started = false;  // on_started_leading seen
    bool stopped = false;  // on_stopped_leading seen
  };

  LeaseElectionImpl(std::shared_ptr<State> state, std::unique_ptr<LeaderElector> elector,
                    k8s::RestClient& client, Clock& clock, LeaderElectionConfig config, Logger log)
      : state_(std::move(state)),
        elector_(std::move(elector)),
        client_(client),
        clock_(clock),
        config_(std::move(config)),
        log_(std::move(log)) {}
  ~LeaseElectionImpl() override { elector_->Stop(); }

  Status CampaignStatus() const override {
    std::scoped_lock lock(state_->mu);
    return campaign_status_;
  }

  Status Run(std::stop_token stop,
             std::function<void(std::stop_token)> on_started_leading) override {
    if (!WaitUntilLeaseWritable(stop)) return OkStatus();  // stopped before campaigning
    elector_->Start();
    std::stop_source leading;
    bool started = false;
    {
      std::unique_lock lock(state_->mu);
      state_->cv.wait(lock, stop, [&] { return state_->started || state_->stopped; });
      started = state_->started && !state_->stopped;
    }
    if (started && !stop.stop_requested()) {
      if (on_started_leading) on_started_leading(leading.get_token());
      std::unique_lock lock(state_->mu);
      state_->cv.wait(lock, stop, [&] { return state_->stopped; });
    }
    leading.request_stop();
    elector_->Stop();  // releases the lease when still held (release_on_cancel)
    if (elector_->lost()) return AbortedError("lease lost (not renewed within the deadline)");
    if (!stop.stop_requested()) return AbortedError("leader election ended unexpectedly");
    return OkStatus();
  }

  bool IsLeader() const override { return elector_->IsLeader(); }

 private:
  // Dry-run creates of the Lease until one passes (false: stopped first). Each failure is
  // logged as an error when its reason changes and at least every 30 s while it lasts.
  bool WaitUntilLeaseWritable(std::stop_token stop) {
    nlohmann::json lease = {
        {"apiVersion", "coordination.k8s.io/v1"},
        {"kind", "Lease"},
        {"metadata", {{"name", config_.lease_name}, {"namespace", config_.lease_namespace}}}};
    const std::string body = lease.dump();
    k8s::WriteOptions wo;
    wo.dry_run = true;
    std::string last_logged;
    MonoTime logged_at{};
    while (!stop.stop_requested()) {
      auto r = client_.Create(k8s::kLeases, config_.lease_namespace, body, wo);
      Status s = DiagnoseLeaseWrite(r.ok() ? OkStatus() : r.status(), config_);
      {
        std::scoped_lock lock(state_->mu);
        campaign_status_ = s;
      }
      if (s.ok()) {
        if (!last_logged.empty()) {
          log_.Info("the Lease can be written now; campaigning",
                    {{"namespace", config_.lease_namespace}, {"lease", config_.lease_name}});
        }
        return true;
      }
      if (stop.stop_requested()) return false;
      const MonoTime now = clock_.Monotonic();
      if (s.message() != last_logged || now - logged_at >= std::chrono::seconds(30)) {
        log_.Error(s.message(),
                   {{"namespace", config_.lease_namespace}, {"lease", config_.lease_name}});
        last_logged = s.message();
        logged_at = now;
      }
      if (!clock_.SleepFor(config_.retry_period, stop)) return false;
    }
    return false;
  }

  std::shared_ptr<State> state_;
  std::unique_ptr<LeaderElector> elector_;
  k8s::RestClient& client_;
  Clock& clock_;
  LeaderElectionConfig config_;
  Logger log_;
  Status campaign_status_;  // guarded by state_->mu
};

}  // namespace

StatusOr<std::unique_ptr<LeaseLeaderElection>> NewLeaseLeaderElection(k8s::RestClient& client,
                                                                      Clock& clock,
                                                                      LeaderElectionConfig config,
                                                                      Logger log) {
  auto state = std::make_shared<LeaseElectionImpl::State>();
  auto user_started = std::move(config.on_started_leading);
  auto user_stopped = std::move(config.on_stopped_leading);
  config.on_started_leading = [state, user_started] {
    if (user_started) user_started();
    std::scoped_lock lock(state->mu);
    state->started = true;
    state->cv.notify_all();
  };
  config.on_stopped_leading = [state, user_stopped] {
    if (user_stopped) user_stopped();
    std::scoped_lock lock(state->mu);
    state->stopped = true;
    state->cv.notify_all();
  };
  LeaderElectionConfig checked = config;  // the callbacks are the elector's alone
  checked.on_started_leading = nullptr;
  checked.on_stopped_leading = nullptr;
  checked.on_new_leader = nullptr;
  GG_ASSIGN_OR_RETURN(auto elector, LeaderElector::Create(client, clock, std::move(config)));
  return std::unique_ptr<LeaseLeaderElection>(std::make_unique<LeaseElectionImpl>(
      std::move(state), std::move(elector), client, clock, std::move(checked), std::move(log)));
}

}  // namespace gg::runtime
