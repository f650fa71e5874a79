// Manager: runs a process's components in controller-runtime's start order and stops them
// together.
//   1. health/metrics server (served whether or not this process leads)
//   2. caches (informers), then waits until all have synced (timeout → error)
//   3. runnables that do not need leader election
//   4. leader election (when one is given; otherwise step 5 follows at once)
//   5. leader-only runnables (controllers), started once the lease is held
// Stop (the stop_token, e.g. SIGTERM): leader runnables stop first, then before_release runs,
// then the lease is released, then the rest — all within graceful_shutdown_timeout (5 s). Losing
// the lease or a runnable failing ends Run() with an error (the process should then exit non-zero).
// Health: /readyz check "informers-synced" (all caches synced), /healthz check "runnables"
// (no runnable has failed).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/log.h"
#include "common/status.h"
#include "metrics/http_server.h"
#include "runtime/runnable.h"

namespace gg::k8s {
class RestClient;
}  // namespace gg::k8s

namespace gg::runtime {

struct ManagerOptions {
  // Address for the health server when one is given and not started yet ("" = leave it).
  std::string health_listen = "127.0.0.1:0";
  std::chrono::milliseconds cache_sync_timeout = std::chrono::minutes(2);
  std::chrono::milliseconds graceful_shutdown_timeout = std::chrono::seconds(5);
  std::chrono::milliseconds sync_poll_interval = std::chrono::milliseconds(10);
  // Runs once the leader runnables have stopped and before the lease is released (when this
  // process led): the last writes that belong to this term, e.g. flushing queued Events, so a
  // successor never sees them arrive after it took over. Must return promptly (bounded).
  std::function<void()> before_release;
};

class Manager {
 public:
  // `server` and `election` may be null; they and every added Runnable must outlive Run().
  explicit Manager(ManagerOptions options = {}, Logger log = Logger(),
                   metrics::HealthServer* server = nullptr, LeaderElection* election = nullptr);
  ~Manager();
  Manager(const Manager&) = delete;
  Manager& operator=(const Manager&) = delete;

  // Sorted by r.NeedsLeaderElection(). Add everything before Run().
  void Add(Runnable& r);
  // A cache: started right after the server; Run waits until has_synced() is true.
  void AddCache(Runnable& r, std::function<bool()> has_synced);
  // Any informer-like type with Start(), Stop(), HasSynced() (runtime/informer.h).
  template <typename T>
  void AddInformer(std::string name, T& informer) {
    owned_.push_back(std::make_unique<StartStopRunnable>(
        std::move(name), [&informer] { informer.Start(); }, [&informer] { informer.Stop(); },
        false));
    AddCache(*owned_.back(), [&informer] { return informer.HasSynced(); });
  }

  // Blocks until `stop` (→ OK after a clean shutdown; DeadlineExceeded when something did
  // not stop within graceful_shutdown_timeout — those threads are left detached) or a
  // failure: server bind error, cache sync timeout, lost lease, a runnable's error.
  Status Run(std::stop_token stop);

  bool CachesSynced() const;
  bool Leading() const;
  int HealthPort() const { return server_ ? server_->port() : 0; }

 private:
  struct Shared;
  struct Task;
  struct CacheEntry {
    Runnable* runnable;
    std::function<bool()> has_synced;
  };
  std::shared_ptr<Task> Spawn(std::string name, std::function<Status()> fn, bool is_leader);
  // The steps of Run.
  struct RunState;
  void WaitForCacheSync(std::stop_token stop);
  void StartLeaderRunnables(RunState& rs);
  std::shared_ptr<Task> SpawnLeaderElection(std::stop_token election_stop);
  void WaitWhileRunning(RunState& rs, std::stop_token stop);
  void StopInOrder(RunState& rs);
  std::vector<std::string> ReapTasks(RunState& rs);

  ManagerOptions options_;
  Logger log_;
  metrics::HealthServer* server_;
  LeaderElection* election_;
  std::vector<CacheEntry> caches_;
  std::vector<Runnable*> runnables_;
  std::vector<Runnable*> leader_runnables_;
  std::vector<std::unique_ptr<Runnable>> owned_;
  std::shared_ptr<Shared> shared_;  // shared with task threads and health checks
};

// The Lease-based runtime::LeaderElector (runtime/leader_election.h) seen through the
// LeaderElection interface: creates the elector from `config` (its callbacks are wrapped,
// user callbacks still run) and runs it for the Manager. Lost lease → Run returns Aborted.
//
// Before campaigning it checks that the Lease can be written where it is configured: a
// dry-run create of the Lease (nothing is stored; the server runs its admission, so a
// namespace that does not exist answers 404 and a missing RBAC grant 403). Until the check
// passes it does not campaign, logs an error naming the namespace and the fix, retries every
// retry period, and CampaignStatus() carries the reason (the operator's /readyz check
// "leader-election"), so a replica that can never lead says so instead of looking healthy.
class LeaseLeaderElection : public LeaderElection {
 public:
  // OK once the Lease namespace check passed (or while it has not run yet); the reason
  // otherwise.
  virtual Status CampaignStatus() const = 0;
};
struct LeaderElectionConfig;
StatusOr<std::unique_ptr<LeaseLeaderElection>> NewLeaseLeaderElection(
    k8s::RestClient& client, Clock& clock, LeaderElectionConfig config,
    Logger log = Logger().WithName("leader-election"));

}  // namespace gg::runtime
