// Lease-based leader election (coordination.k8s.io/v1) following client-go's algorithm:
// GET the Lease, create it if missing, take it over when its holder has not renewed within
// leaseDurationSeconds as observed on OUR clock, renew every RetryPeriod, give up after
// RenewDeadline without a successful renew. PUTs carry the resourceVersion, so a 409 Conflict
// decides races. On clean shutdown the lease is released (holderIdentity "") so another
// replica takes over at once.
//
// Lease requests go through a client of their own on the same transport: no retries and a
// per-request deadline of half the renew deadline, so a renewal that meets 429/503 with a long
// Retry-After (or a hung server) fails fast and is retried on the election's own schedule
// instead of sleeping through the renew deadline inside the client.
// A follower also watches the one Lease (fieldSelector metadata.name=...) while it campaigns
// and tries at once when the holder releases it, so a clean handover takes milliseconds, not
// a retry period; polling every retry period goes on regardless (the fallback when watching
// fails, e.g. without the `watch` verb).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>

#include "common/clock.h"
#include "common/log.h"
#include "common/status.h"
#include "k8s/objects.h"
#include "k8s/rest_client.h"

namespace gg::runtime {

struct LeaderElectionConfig {
  std::string lease_namespace;
  std::string lease_name;
  std::string identity;  // unique per replica (hostname + "_" + random)
  Duration lease_duration = std::chrono::seconds(15);
  Duration renew_deadline = std::chrono::seconds(10);
  Duration retry_period = std::chrono::seconds(2);
  bool release_on_cancel = true;
  // Called on the elector thread; must not block for long.
  std::function<void()> on_started_leading;
  // Called once when leadership ends: lost (renew deadline passed / lease taken) or released.
  // A process that lost the lease should exit non-zero (see LeaderElector::lost()).
  std::function<void()> on_stopped_leading;
  std::function<void(const std::string& identity)> on_new_leader;  // observed holder changed
  // Follower: watch the Lease and try as soon as it is released (see above).
  bool watch_lease = true;
};

// InvalidArgument unless lease_duration > renew_deadline > 1.2 * retry_period > 0 and the
// lease name, namespace and identity are set. (Sub-second values are allowed for tests.)
Status ValidateLeaderElectionConfig(const LeaderElectionConfig& c);

class LeaderElector {
 public:
  static StatusOr<std::unique_ptr<LeaderElector>> Create(k8s::RestClient& client, Clock& clock,
                                                         LeaderElectionConfig config);
  ~LeaderElector();
  LeaderElector(const LeaderElector&) = delete;
  LeaderElector& operator=(const LeaderElector&) = delete;

  // Runs acquire → renew on a jthread until Stop() or leadership is lost.
  void Start();
  // Stops; if leading and release_on_cancel, releases the lease first.
  void Stop();

  // Cheap check for write paths: leading and the last successful renew is within the
  // renew deadline.
  bool IsLeader() const;
  // True once leadership was lost without Stop() (the process should exit non-zero).
  bool lost() const { return lost_.load(); }
  bool running() const { return running_.load(); }
  std::string CurrentLeader() const;
  const std::string& identity() const { return config_.identity; }

  // One acquire-or-renew step (exposed for tests). OK when we hold the lease afterwards;
  // FailedPrecondition when another holder's lease is still valid; other errors as returned.
  Status TryAcquireOrRenew();
  // PUT holderIdentity="" (if we hold it).
  Status Release();

 private:
  LeaderElector(k8s::RestClient& client, Clock& clock, LeaderElectionConfig config);
  void Run(std::stop_token stop);
  void SetLeading(bool leading);
  // The steps of TryAcquireOrRenew and Run.
  Status CreateLease(WallTime now, MonoTime now_mono, std::int32_t duration_s);
  void ObserveLease(const k8s::Lease& current, MonoTime now_mono);
  bool Acquire(std::stop_token stop);
  bool RenewWhileLeading(std::stop_token stop);
  void ReleaseOnCancel();
  Duration Jittered(Duration d);
  // Sleeps `d` on the clock; returns early when the watch saw the lease released. False when
  // `stop` was requested.
  bool SleepUnlessReleased(Duration d, std::stop_token stop);
  void WatchLease(std::stop_token stop);
  void NoteReleased();

  std::unique_ptr<k8s::RestClient> lease_client_;  // no retries, bounded requests
  k8s::RestClient& client_;                        // *lease_client_
  Clock& clock_;
  LeaderElectionConfig config_;
  Logger log_;

  mutable std::mutex mu_;
  std::optional<k8s::Lease> observed_;  // last raw record seen
  std::string observed_raw_key_;        // holder|renew|transitions|duration (change detection)
  MonoTime observed_time_{};
  MonoTime last_renew_{};
  std::atomic<bool> leading_{false};
  std::atomic<bool> lost_{false};
  std::atomic<bool> running_{false};
  std::uint64_t jitter_state_;

  std::mutex wake_mu_;
  bool released_seen_ = false;        // the watch saw holderIdentity "" (or deletion)
  std::stop_source* wake_ = nullptr;  // the acquire loop's current sleep
  std::jthread watcher_;              // while campaigning
  std::jthread thread_;
};

}  // namespace gg::runtime
