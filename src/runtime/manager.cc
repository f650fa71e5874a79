// Manager: start order, failure propagation and bounded shutdown.
#include "runtime/manager.h"

#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

namespace gg::runtime {

Status StartStopRunnable::Run(std::stop_token stop) {
  if (start_) start_();
  std::mutex m;
  std::condition_variable_any cv;
  std::unique_lock lock(m);
  cv.wait(lock, stop, [] { return false; });
  if (stop_) stop_();
  return OkStatus();
}

// State shared with task threads and health checks, so that neither touches the Manager
// itself (a straggler thread or a late probe may outlive it).
struct Manager::Shared {
  std::mutex mu;
  std::condition_variable_any cv;
  bool stopping = false;  // errors returned after this are shutdown noise, not failures
  bool failed = false;
  Status failure;
  std::optional<std::stop_token> leading;  // set by the election's on_started_leading
  std::atomic<bool> caches_synced{false};
  std::atomic<bool> runnable_failed{false};
  std::atomic<bool> is_leader{false};
};

struct Manager::Task {
  std::string name;
  bool is_leader = false;
  bool done = false;  // guarded by Shared::mu
  std::thread thread;
};

Manager::Manager(ManagerOptions options, Logger log, metrics::HealthServer* server,
                 LeaderElection* election)
    : options_(std::move(options)),
      log_(log.WithName("manager")),
      server_(server),
      election_(election),
      shared_(std::make_shared<Shared>()) {
  if (server_) {
    std::weak_ptr<Shared> weak = shared_;
    server_->AddReadyCheck("informers-synced", [weak] {
      auto s = weak.lock();
      if (s && s->caches_synced) return OkStatus();
      return UnavailableError("informers not synced");
    });
    server_->AddHealthCheck("runnables", [weak] {
      auto s = weak.lock();
      if (s && s->runnable_failed) return UnavailableError("a runnable has failed");
      return OkStatus();
    });
  }
}

Manager::~Manager() = default;

void Manager::Add(Runnable& r) {
  (r.NeedsLeaderElection() ? leader_runnables_ : runnables_).push_back(&r);
}

void Manager::AddCache(Runnable& r, std::function<bool()> has_synced) {
  caches_.push_back({&r, std::move(has_synced)});
}

bool Manager::CachesSynced() const { return shared_->caches_synced; }
bool Manager::Leading() const { return shared_->is_leader; }

std::shared_ptr<Manager::Task> Manager::Spawn(std::string name, std::function<Status()> fn,
                                              bool is_leader) {
  auto task = std::make_shared<Task>();
  task->name = name;
  task->is_leader = is_leader;
  std::shared_ptr<Shared> shared = shared_;
  Logger log = log_;
  task->thread = std::thread([task, shared, log, fn = std::move(fn)] {
    Status s;
    try {
      s = fn();
    } catch (const std::exception& e) {
      s = InternalError(std::string("threw: ") + e.what());
    } catch (...) {
      s = InternalError("threw a non-standard exception");
    }
    std::scoped_lock lock(shared->mu);
    task->done = true;
    if (!s.ok()) {
      if (shared->stopping) {
        log.Info("runnable returned an error while stopping",
                 {{"runnable", task->name}, {"error", s.ToString()}});
      } else {
        log.Error("runnable failed", {{"runnable", task->name}, {"error", s.ToString()}});
        shared->runnable_failed = true;
        if (!shared->failed) {
          shared->failed = true;
          shared->failure = s.WithContext(task->name);
        }
      }
    }
    shared->cv.notify_all();
  });
  return task;
}

// One Run's threads and the stop sources that end them, in shutdown order.
struct Manager::RunState {
  std::vector<std::shared_ptr<Task>> tasks;
  std::stop_source leader_stop;    // leader runnables
  std::stop_source election_stop;  // the lease (released after leader runnables stopped)
  std::stop_source rest_stop;      // caches and other runnables
  bool leader_started = false;
  std::optional<std::stop_callback<std::function<void()>>> on_leading_lost;
};

void Manager::WaitForCacheSync(std::stop_token stop) {
  Shared& sh = *shared_;
  using Clock = std::chrono::steady_clock;
  auto deadline = Clock::now() + options_.cache_sync_timeout;
  std::unique_lock lock(sh.mu);
  while (!stop.stop_requested() && !sh.failed) {
    bool all = true;
    for (auto& c : caches_) all = all && (!c.has_synced || c.has_synced());
    if (all) {
      sh.caches_synced = true;
      break;
    }
    if (Clock::now() >= deadline) {
      sh.failed = true;
      sh.failure = DeadlineExceededError("timed out waiting for caches to sync");
      break;
    }
    sh.cv.wait_for(lock, stop, options_.sync_poll_interval, [&] { return sh.failed; });
  }
}

void Manager::StartLeaderRunnables(RunState& rs) {
  rs.leader_started = true;
  shared_->is_leader = true;
  log_.Info("starting leader runnables", {{"count", leader_runnables_.size()}});
  for (Runnable* r : leader_runnables_)
    rs.tasks.push_back(Spawn(
        r->Name(), [r, t = rs.leader_stop.get_token()] { return r->Run(t); }, true));
}

// The election's thread: it reports leadership through Shared::leading.
std::shared_ptr<Manager::Task> Manager::SpawnLeaderElection(std::stop_token election_stop) {
  LeaderElection* e = election_;
  std::shared_ptr<Shared> shared = shared_;
  return Spawn(
      "leader-election",
      [e, shared, t = election_stop]() -> Status {
        Status s = e->Run(t, [shared](std::stop_token leading) {
          std::scoped_lock lock(shared->mu);
          shared->leading = leading;
          shared->cv.notify_all();
        });
        shared->is_leader = false;
        // Ending before we asked it to is losing the lease, even if it says OK.
        if (s.ok() && !t.stop_requested()) s = AbortedError("leader election ended");
        if (!s.ok() && !t.stop_requested()) return s.WithContext("leader election lost");
        return s;
      },
      false);
}

// Waits for stop, a failure, or (with an election) the lease, starting the leader runnables
// when the lease is won.
void Manager::WaitWhileRunning(RunState& rs, std::stop_token stop) {
  Shared& sh = *shared_;
  std::unique_lock lock(sh.mu);
  while (!stop.stop_requested() && !sh.failed) {
    if (sh.leading && !rs.leader_started) {
      std::stop_token leading = *sh.leading;
      lock.unlock();
      rs.on_leading_lost.emplace(leading, std::function<void()>([&leader_stop = rs.leader_stop] {
                                   leader_stop.request_stop();
                                 }));
      StartLeaderRunnables(rs);
      lock.lock();
      continue;
    }
    sh.cv.wait(lock, stop, [&] { return sh.failed || (sh.leading && !rs.leader_started); });
  }
  sh.stopping = true;
}

// Shutdown, bounded: leader runnables, then the lease, then everything else.
void Manager::StopInOrder(RunState& rs) {
  Shared& sh = *shared_;
  const auto deadline = std::chrono::steady_clock::now() + options_.graceful_shutdown_timeout;
  auto wait_done = [&](auto pred) {
    std::unique_lock lock(sh.mu);
    sh.cv.wait_until(lock, deadline, [&] {
      for (auto& t : rs.tasks)
        if (pred(*t) && !t->done) return false;
      return true;
    });
  };
  rs.leader_stop.request_stop();
  wait_done([](const Task& t) { return t.is_leader; });
  if (rs.leader_started && options_.before_release) options_.before_release();
  sh.is_leader = false;
  rs.election_stop.request_stop();
  wait_done([](const Task& t) { return t.name == "leader-election"; });
  rs.rest_stop.request_stop();
  wait_done([](const Task&) { return true; });
  rs.on_leading_lost.reset();
}

// Joins the threads that stopped and detaches the rest; returns the names of the latter.
std::vector<std::string> Manager::ReapTasks(RunState& rs) {
  Shared& sh = *shared_;
  std::vector<std::string> stragglers;
  {
    std::scoped_lock lock(sh.mu);
    for (auto& t : rs.tasks) {
      if (!t->done) stragglers.push_back(t->name);
    }
  }
  for (auto& t : rs.tasks) {
    bool done;
    {
      std::scoped_lock lock(sh.mu);
      done = t->done;
    }
    // A thread that did not stop in time is left behind so the process can still exit.
    if (done) {
      t->thread.join();
    } else {
      t->thread.detach();
    }
  }
  return stragglers;
}

Status Manager::Run(std::stop_token stop) {
  Shared& sh = *shared_;
  RunState rs;
  bool started_server = false;

  auto failed = [&] {
    std::scoped_lock lock(sh.mu);
    return sh.failed;
  };

  // 1. Metrics and health first: served whether or not this replica leads.
  if (server_ && !server_->Running() && !options_.health_listen.empty()) {
    auto port = server_->Start(options_.health_listen);
    if (!port.ok()) return port.status().WithContext("starting health server");
    started_server = true;
  }

  // 2. Caches, then wait until all have synced.
  for (auto& c : caches_) {
    Runnable* r = c.runnable;
    rs.tasks.push_back(Spawn(
        r->Name(), [r, t = rs.rest_stop.get_token()] { return r->Run(t); }, false));
  }
  WaitForCacheSync(stop);
  if (sh.caches_synced) log_.Info("caches synced", {{"caches", caches_.size()}});

  // 3. Runnables that do not need the lease.
  if (!stop.stop_requested() && !failed()) {
    for (Runnable* r : runnables_)
      rs.tasks.push_back(Spawn(
          r->Name(), [r, t = rs.rest_stop.get_token()] { return r->Run(t); }, false));
  }

  // 4./5. Leader election, then leader runnables.
  if (!stop.stop_requested() && !failed()) {
    if (election_) {
      rs.tasks.push_back(SpawnLeaderElection(rs.election_stop.get_token()));
    } else {
      StartLeaderRunnables(rs);
    }
  }

  WaitWhileRunning(rs, stop);
  sh.caches_synced = false;  // not ready while shutting down
  log_.Info(failed() ? "stopping after failure" : "stopping");
  StopInOrder(rs);
  std::vector<std::string> stragglers = ReapTasks(rs);
  if (started_server) server_->Stop();

  std::scoped_lock lock(sh.mu);
  if (sh.failed) return sh.failure;
  if (!stragglers.empty()) {
    std::string names;
    for (auto& n : stragglers) names += (names.empty() ? "" : ", ") + n;
    log_.Error("runnables did not stop in time", {{"runnables", names}});
    return DeadlineExceededError("runnables did not stop within the graceful shutdown timeout: " +
                                 names);
  }
  log_.Info("stopped cleanly");
  return OkStatus();
}

}  // namespace gg::runtime
