// Lease-based leader election (client-go tryAcquireOrRenew semantics on our Clock).
#include "runtime/leader_election.h"

#include <algorithm>
#include <random>

#include "k8s/backoff.h"
#include "k8s/builders.h"
#include "k8s/codec.h"
#include "k8s/errors.h"
#include "k8s/resource.h"
#include "metrics/registry.h"

namespace gg::runtime {
namespace {

// controller-runtime's leader_election_master_status{name}: 1 while this replica leads. Like
// controller-runtime's, it lives in the process-wide registry each binary serves.
metrics::GaugeFamily& MasterStatus() {
  static metrics::GaugeFamily& f = metrics::DefaultRegistry().AddGauge(
      "leader_election_master_status",
      "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 "
      "indicates master. 'name' is the string used to identify the lease.",
      {"name"});
  return f;
}

}  // namespace

Status ValidateLeaderElectionConfig(const LeaderElectionConfig& c) {
  if (c.lease_name.empty() || c.lease_namespace.empty()) {
    return InvalidArgumentError("leader election: lease name and namespace are required");
  }
  if (c.identity.empty()) return InvalidArgumentError("leader election: identity is required");
  if (c.retry_period <= Duration(0)) {
    return InvalidArgumentError("leader election: retry period must be positive");
  }
  if (!(c.lease_duration > c.renew_deadline)) {
    return InvalidArgumentError("leader election: lease duration must exceed renew deadline");
  }
  if (!(c.renew_deadline.count() > 1.2 * static_cast<double>(c.retry_period.count()))) {
    return InvalidArgumentError("leader election: renew deadline must exceed 1.2 x retry period");
  }
  return OkStatus();
}

StatusOr<std::unique_ptr<LeaderElector>> LeaderElector::Create(k8s::RestClient& client,
                                                               Clock& clock,
                                                               LeaderElectionConfig config) {
  GG_RETURN_IF_ERROR(ValidateLeaderElectionConfig(config));
  return std::unique_ptr<LeaderElector>(new LeaderElector(client, clock, std::move(config)));
}

namespace {

k8s::RestClientOptions LeaseClientOptions(const k8s::RestClient& base,
                                          const LeaderElectionConfig& c) {
  k8s::RestClientOptions o = base.options();
  o.max_attempts = 1;
  // Not tied to the process' shutdown: the release is the last request on SIGTERM.
  o.cancel_retries = {};
  // GET + PUT of one attempt fit in the renew deadline; never above the client's own timeout.
  auto t = std::max(std::chrono::duration_cast<std::chrono::milliseconds>(c.renew_deadline / 2),
                    std::chrono::milliseconds(100));
  if (base.config().timeout.count() > 0) t = std::min(t, base.config().timeout);
  o.request_timeout = t;
  return o;
}

}  // namespace

LeaderElector::LeaderElector(k8s::RestClient& client, Clock& clock, LeaderElectionConfig config)
    : lease_client_(client.WithOptions(LeaseClientOptions(client, config))),
      client_(*lease_client_),
      clock_(clock),
      config_(std::move(config)),
      log_(Logger()
               .WithName("leader-election")
               .WithValues({{"lease", config_.lease_namespace + "/" + config_.lease_name},
                            {"identity", config_.identity}})),
      jitter_state_(std::random_device{}()) {
  (void)MasterStatus().WithLabels({config_.lease_name});  // served as 0 until we lead
}

LeaderElector::~LeaderElector() { Stop(); }

void LeaderElector::Start() {
  if (thread_.joinable()) return;
  running_.store(true);
  thread_ = std::jthread([this](std::stop_token st) { Run(st); });
}

void LeaderElector::Stop() {
  if (!thread_.joinable()) return;
  thread_.request_stop();
  thread_.join();
}

void LeaderElector::NoteReleased() {
  std::scoped_lock lock(wake_mu_);
  released_seen_ = true;
  if (wake_) wake_->request_stop();
}

bool LeaderElector::SleepUnlessReleased(Duration d, std::stop_token stop) {
  std::stop_source wake;
  std::stop_callback on_stop(stop, [&wake] { wake.request_stop(); });
  {
    std::scoped_lock lock(wake_mu_);
    if (released_seen_) {
      released_seen_ = false;
      return !stop.stop_requested();
    }
    wake_ = &wake;
  }
  (void)clock_.SleepFor(d, wake.get_token());
  {
    std::scoped_lock lock(wake_mu_);
    wake_ = nullptr;
    released_seen_ = false;
  }
  return !stop.stop_requested();
}

// Watches the one Lease while campaigning; wakes the acquire loop when it is released or
// deleted. Errors (no `watch` verb, 410, a broken stream) back off up to the retry period ×
// 8; polling goes on meanwhile, so a failing watch only costs the fast path.
void LeaderElector::WatchLease(std::stop_token stop) {
  std::uint64_t seed;
  std::string rv;  // from the GET that saw the lease held: no change in between is missed
  {
    std::scoped_lock lock(mu_);
    seed = k8s::NextRandom(jitter_state_);
    rv = observed_raw_key_;
  }
  k8s::Backoff backoff(std::chrono::milliseconds(200), config_.retry_period * 8, 2.0, 0.2,
                       seed | 1);
  bool warned = false;
  while (!stop.stop_requested()) {
    k8s::WatchOptions wo;
    wo.field_selector = "metadata.name=" + config_.lease_name;
    wo.resource_version = rv;
    wo.allow_bookmarks = true;
    wo.timeout_seconds = 300;
    bool progressed = false;
    Status s = client_.Watch(
        k8s::kLeases, config_.lease_namespace, wo,
        [&](std::string_view line) {
          auto ev = k8s::ParseWatchEvent<k8s::Lease>(line, /*padded=*/true);
          if (!ev.ok() || ev->type == k8s::WatchEventType::kError) return true;
          progressed = true;
          if (!ev->object.meta.resource_version.empty()) rv = ev->object.meta.resource_version;
          if (ev->type == k8s::WatchEventType::kDeleted ||
              ((ev->type == k8s::WatchEventType::kModified ||
                ev->type == k8s::WatchEventType::kAdded) &&
               ev->object.holder_identity.empty())) {
            NoteReleased();
          }
          return true;
        },
        stop);
    if (stop.stop_requested()) return;
    if (s.code() == StatusCode::kOutOfRange) rv.clear();  // too old: start from now
    if (progressed) backoff.Reset();
    if (!s.ok() && !warned) {
      warned = true;  // once: polling still works, so this is not worth a log line per retry
      log_.Warn("watching the lease failed; polling only", {{"error", s.ToString()}});
    }
    if (!clock_.SleepFor(s.ok() ? Duration(0) : backoff.Next(), stop)) return;
  }
}

bool LeaderElector::IsLeader() const {
  if (!leading_.load(std::memory_order_acquire)) return false;
  std::scoped_lock lock(mu_);
  return clock_.Monotonic() - last_renew_ < config_.renew_deadline;
}

std::string LeaderElector::CurrentLeader() const {
  std::scoped_lock lock(mu_);
  return observed_ ? observed_->holder_identity : std::string();
}

Duration LeaderElector::Jittered(Duration d) {
  double u;
  {
    std::scoped_lock lock(mu_);
    u = k8s::NextUnit(jitter_state_);
  }
  return d + Duration(static_cast<Duration::rep>(static_cast<double>(d.count()) * 1.2 * u));
}

// No Lease yet: create it with this replica as the holder.
Status LeaderElector::CreateLease(WallTime now, MonoTime now_mono, std::int32_t duration_s) {
  k8s::Lease lease;
  lease.meta.name = config_.lease_name;
  lease.meta.namespace_ = config_.lease_namespace;
  lease.holder_identity = config_.identity;
  lease.lease_duration_seconds = duration_s;
  lease.acquire_time = now;
  lease.renew_time = now;
  auto created = client_.Create(k8s::kLeases, config_.lease_namespace, k8s::LeaseBody(lease));
  if (!created.ok()) return created.status();
  auto parsed = k8s::ParseObject<k8s::Lease>(*created);
  std::scoped_lock lock(mu_);
  observed_ = parsed.ok() ? *parsed : lease;
  observed_raw_key_ = observed_->meta.resource_version;
  observed_time_ = now_mono;
  last_renew_ = now_mono;
  return OkStatus();
}

// Records the Lease as read (when its record changed, by our clock) and says so when its
// holder changed.
void LeaderElector::ObserveLease(const k8s::Lease& current, MonoTime now_mono) {
  std::string previous_holder;
  bool holder_changed = false;
  {
    std::scoped_lock lock(mu_);
    previous_holder = observed_ ? observed_->holder_identity : std::string();
    if (current.meta.resource_version != observed_raw_key_ || !observed_) {
      // Validity is judged by when WE saw the record change, never the server's renewTime.
      observed_raw_key_ = current.meta.resource_version;
      observed_time_ = now_mono;
      holder_changed = previous_holder != current.holder_identity;
    }
    observed_ = current;
  }
  if (holder_changed && current.holder_identity != config_.identity) {
    // A standby says who leads once, and again whenever that changes.
    if (current.holder_identity.empty())
      log_.Info("lease released; campaigning", {{"previous_leader", previous_holder}});
    else
      log_.Info(previous_holder.empty() ? "another replica leads; standing by" : "new leader",
                {{"leader", current.holder_identity}});
  }
  if (holder_changed && config_.on_new_leader && !current.holder_identity.empty()) {
    config_.on_new_leader(current.holder_identity);
  }
}

Status LeaderElector::TryAcquireOrRenew() {
  const WallTime now = clock_.Now();
  const MonoTime now_mono = clock_.Monotonic();
  const auto duration_s = static_cast<std::int32_t>(std::max<std::int64_t>(
      1, std::chrono::duration_cast<std::chrono::seconds>(config_.lease_duration +
                                                          std::chrono::milliseconds(999))
             .count()));
  auto body = client_.Get(k8s::kLeases, config_.lease_namespace, config_.lease_name);
  if (!body.ok() && IsNotFound(body.status())) return CreateLease(now, now_mono, duration_s);
  if (!body.ok()) return body.status();
  GG_ASSIGN_OR_RETURN(k8s::Lease current, k8s::ParseObject<k8s::Lease>(*body));
  ObserveLease(current, now_mono);
  Duration held_for = current.lease_duration_seconds
                          ? Duration(std::chrono::seconds(*current.lease_duration_seconds))
                          : config_.lease_duration;
  bool mine = current.holder_identity == config_.identity;
  {
    std::scoped_lock lock(mu_);
    if (!current.holder_identity.empty() && !mine && observed_time_ + held_for > now_mono) {
      return FailedPreconditionError("lease held by " + current.holder_identity);
    }
  }
  k8s::Lease next = current;
  if (!mine) {
    next.acquire_time = now;
    next.lease_transitions = current.lease_transitions + 1;
  }
  next.holder_identity = config_.identity;
  next.lease_duration_seconds = duration_s;
  next.renew_time = now;
  auto updated = client_.Update(k8s::kLeases, config_.lease_namespace, config_.lease_name,
                                k8s::LeaseBody(next));
  if (!updated.ok()) return updated.status();
  auto parsed = k8s::ParseObject<k8s::Lease>(*updated);
  std::scoped_lock lock(mu_);
  observed_ = parsed.ok() ? *parsed : next;
  observed_raw_key_ = observed_->meta.resource_version;
  observed_time_ = now_mono;
  last_renew_ = now_mono;
  return OkStatus();
}

Status LeaderElector::Release() {
  k8s::Lease lease;
  {
    std::scoped_lock lock(mu_);
    if (!observed_ || observed_->holder_identity != config_.identity) return OkStatus();
    lease = *observed_;
  }
  const WallTime now = clock_.Now();
  lease.holder_identity.clear();
  lease.lease_duration_seconds = 1;
  lease.acquire_time = now;
  lease.renew_time = now;
  auto updated = client_.Update(k8s::kLeases, config_.lease_namespace, config_.lease_name,
                                k8s::LeaseBody(lease));
  if (!updated.ok()) return updated.status();
  std::scoped_lock lock(mu_);
  observed_ = lease;
  return OkStatus();
}

void LeaderElector::SetLeading(bool leading) {
  bool was = leading_.exchange(leading);
  if (was == leading) return;
  MasterStatus().WithLabels({config_.lease_name}).Set(leading ? 1 : 0);
  if (leading) {
    log_.Info("became leader");
    if (config_.on_started_leading) config_.on_started_leading();
  } else {
    log_.Info("stopped leading");
    if (config_.on_stopped_leading) config_.on_stopped_leading();
  }
}

// Acquire. False when stopped before the lease was ours.
bool LeaderElector::Acquire(std::stop_token stop) {
  // Once the lease is seen held by someone else, watch it for a release.
  // A failing acquire (API down, RBAC) is logged when it starts, when the error changes and
  // every few minutes while it lasts, not once per retry period.
  std::string last_error;
  MonoTime last_error_log{};
  int failures = 0;
  while (!stop.stop_requested()) {
    Status s = TryAcquireOrRenew();
    if (s.ok()) break;
    if (s.code() != StatusCode::kFailedPrecondition && !k8s::IsConflict(s)) {
      ++failures;
      const MonoTime now = clock_.Monotonic();
      const std::string err = s.ToString();
      if (err != last_error || now - last_error_log >= std::chrono::minutes(5)) {
        log_.Warn("acquiring lease failed", {{"error", err}, {"attempts", failures}});
        last_error = err;
        last_error_log = now;
      }
    } else if (!last_error.empty()) {
      log_.Info("lease readable again", {{"failed_attempts", failures}});
      last_error.clear();
      failures = 0;
    }
    if (config_.watch_lease && !watcher_.joinable()) {
      watcher_ = std::jthread([this](std::stop_token st) { WatchLease(st); });
    }
    if (!SleepUnlessReleased(Jittered(config_.retry_period), stop)) break;
  }
  if (watcher_.joinable()) {
    watcher_.request_stop();
    watcher_.join();
  }
  return !stop.stop_requested();
}

// Renews every RetryPeriod while leading; true when leadership was lost, false when stopped.
bool LeaderElector::RenewWhileLeading(std::stop_token stop) {
  // Renew every RetryPeriod; give up once RenewDeadline passed without a successful renew,
  // or at once when someone else validly holds the lease.
  bool lost = false;
  while (!stop.stop_requested()) {
    if (!clock_.SleepFor(config_.retry_period, stop)) break;
    {
      // Past the renew deadline IsLeader() is already false: leadership is over even if the
      // next renewal would succeed (client-go's renew loop ends at the deadline too).
      std::scoped_lock lock(mu_);
      if (clock_.Monotonic() - last_renew_ >= config_.renew_deadline) {
        lost = true;
        break;
      }
    }
    Status s = TryAcquireOrRenew();
    if (s.ok()) continue;
    log_.Warn("renewing lease failed", {{"error", s.ToString()}});
    MonoTime last;
    {
      std::scoped_lock lock(mu_);
      last = last_renew_;
    }
    if (s.code() == StatusCode::kFailedPrecondition ||
        clock_.Monotonic() - last >= config_.renew_deadline) {
      lost = true;
      break;
    }
  }
  return lost;
}

// A failed release costs the successor a whole lease duration: try a few times, briefly
// (no Retry-After waits: shutdown is bounded), unless someone else wrote the Lease.
void LeaderElector::ReleaseOnCancel() {
  Status r;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    r = Release();
    if (r.ok() || k8s::IsConflict(r) || !IsTransient(r) || attempt == 3) break;
    if (!clock_.SleepFor(std::chrono::milliseconds(100), {})) break;
  }
  if (!r.ok()) log_.Warn("releasing lease failed", {{"error", r.ToString()}});
}

void LeaderElector::Run(std::stop_token stop) {
  if (!Acquire(stop)) {
    running_.store(false);
    return;
  }
  SetLeading(true);
  if (RenewWhileLeading(stop)) {
    log_.Error("leader election lost");
    lost_.store(true);
  } else if (config_.release_on_cancel) {
    ReleaseOnCancel();
  }
  SetLeading(false);
  running_.store(false);
}

}  // namespace gg::runtime
