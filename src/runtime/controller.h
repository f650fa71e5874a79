// Controller: N worker threads taking keys from a WorkQueue and calling a Reconciler, with
// controller-runtime's semantics: exceptions are caught and counted (never crash), the
// outcome is mapped to forget/requeue by RequeueFor (runtime/requeue.h), and the
// controller_runtime_* metrics are kept. A key is never reconciled by two workers at once
// (the queue guarantees it).
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "common/log.h"
#include "common/status.h"
#include "metrics/registry.h"
#include "runtime/requeue.h"
#include "runtime/runnable.h"
#include "runtime/workqueue.h"

namespace gg::runtime {

// Level-based and idempotent: read the world for `key`, write the difference. Never branch
// on the event that caused it. `stop` is requested at shutdown: return promptly.
class Reconciler {
 public:
  virtual ~Reconciler() = default;
  virtual StatusOr<Result> Reconcile(const std::string& key, std::stop_token stop) = 0;
};

struct ControllerOptions {
  int workers = 1;  // MaxConcurrentReconciles; values < 1 become 1
  bool needs_leader_election = true;
  // Called (on the worker) for terminal errors, e.g. to record an Event. Optional.
  std::function<void(const std::string& key, const Status& error)> on_terminal_error;
};

// The logger of the reconcile running on this thread (fields controller, key,
// reconcile_id), for reconcilers and the code they call; a plain Logger elsewhere.
Logger ReconcileLogger();
// The id of the reconcile running on this thread ("" elsewhere).
std::string CurrentReconcileId();

class Controller final : public Runnable {
 public:
  // `queue`, `reconciler` and `registry` must outlive the controller.
  Controller(std::string name, Reconciler& reconciler, WorkQueue& queue, ControllerOptions options,
             metrics::Registry& registry, Logger log = Logger());
  ~Controller() override;

  std::string Name() const override { return name_; }
  // Starts the workers and blocks until `stop`; then shuts the queue down, lets each worker
  // finish its current item, and joins them.
  Status Run(std::stop_token stop) override;
  bool NeedsLeaderElection() const override { return options_.needs_leader_election; }

  WorkQueue& queue() { return queue_; }
  int ActiveWorkers() const { return active_.load(); }

  // Processes one key from the queue on the calling thread (tests); false when the queue
  // is shut down or `stop` was requested.
  bool ProcessNext(std::stop_token stop);

 private:
  void Worker(std::stop_token stop);
  void ReconcileKey(const std::string& key, std::stop_token stop);

  std::string name_;
  Reconciler& reconciler_;
  WorkQueue& queue_;
  ControllerOptions options_;
  Logger log_;
  std::atomic<int> active_{0};
  // Metrics handles (label controller=name_).
  metrics::Counter* success_;
  metrics::Counter* error_;
  metrics::Counter* requeue_;
  metrics::Counter* requeue_after_;
  metrics::Counter* errors_total_;
  metrics::Counter* terminal_errors_total_;
  metrics::Counter* panics_total_;
  metrics::Histogram* reconcile_time_;
  metrics::Gauge* active_workers_;
  metrics::Gauge* max_concurrent_;
};

}  // namespace gg::runtime
