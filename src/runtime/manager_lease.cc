// NewLeaseLeaderElection: the Lease-based LeaderElector seen through the Manager's
// LeaderElection interface. Kept apart from manager.cc so the Manager links without the
// Kubernetes client when no lease is used (tests, the agent).
#include <condition_variable>
#include <mutex>

#include "runtime/leader_election.h"
#include "runtime/manager.h"

namespace gg::runtime {
namespace {

class LeaseLeaderElection final : public LeaderElection {
 public:
  struct State {
    std::mutex mu;
    std::condition_variable_any cv;
    bool started = false;  // on_started_leading seen
    bool stopped = false;  // on_stopped_leading seen
  };

  LeaseLeaderElection(std::shared_ptr<State> state, std::unique_ptr<LeaderElector> elector)
      : state_(std::move(state)), elector_(std::move(elector)) {}
  ~LeaseLeaderElection() override { elector_->Stop(); }

  Status Run(std::stop_token stop,
             std::function<void(std::stop_token)> on_started_leading) override {
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
  std::shared_ptr<State> state_;
  std::unique_ptr<LeaderElector> elector_;
};

}  // namespace

StatusOr<std::unique_ptr<LeaderElection>> NewLeaseLeaderElection(k8s::RestClient& client,
                                                                  Clock& clock,
                                                                  LeaderElectionConfig config) {
  auto state = std::make_shared<LeaseLeaderElection::State>();
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
  GG_ASSIGN_OR_RETURN(auto elector, LeaderElector::Create(client, clock, std::move(config)));
  return std::unique_ptr<LeaderElection>(
      std::make_unique<LeaseLeaderElection>(std::move(state), std::move(elector)));
}

}  // namespace gg::runtime
