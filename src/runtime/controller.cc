// Controller: worker loop, exception containment, requeue decisions, metrics.
#include "runtime/controller.h"

#include <chrono>
#include <cstdio>
#include <exception>
#include <random>
#include <thread>
#include <vector>

namespace gg::runtime {
namespace {

struct ReconcileContext {
  const Logger* log = nullptr;
  const std::string* id = nullptr;
};
thread_local ReconcileContext tls_context;

// A random UUID (version 4 layout) per reconcile, like controller-runtime's reconcileID.
std::string NewReconcileId() {
  thread_local std::mt19937_64 rng(std::random_device{}() ^
                                   std::hash<std::thread::id>{}(std::this_thread::get_id()));
  std::uint64_t hi = rng(), lo = rng();
  hi = (hi & 0xffffffffffff0fffULL) | 0x0000000000004000ULL;
  lo = (lo & 0x3fffffffffffffffULL) | 0x8000000000000000ULL;
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(hi >> 32),
                static_cast<unsigned>((hi >> 16) & 0xffff), static_cast<unsigned>(hi & 0xffff),
                static_cast<unsigned>(lo >> 48),
                static_cast<unsigned long long>(lo & 0xffffffffffffULL));
  return buf;
}

// controller-runtime's reconcile_time_seconds buckets, trimmed.
std::vector<double> ReconcileBuckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30, 60};
}

}  // namespace

Logger ReconcileLogger() { return tls_context.log ? *tls_context.log : Logger(); }

std::string CurrentReconcileId() { return tls_context.id ? *tls_context.id : std::string(); }

Controller::Controller(std::string name, Reconciler& reconciler, WorkQueue& queue,
                       ControllerOptions options, metrics::Registry& registry, Logger log)
    : name_(std::move(name)),
      reconciler_(reconciler),
      queue_(queue),
      options_(std::move(options)),
      log_(log.WithValues({{"controller", name_}})) {
  if (options_.workers < 1) options_.workers = 1;
  // Declaration table (controller-runtime names); every series exists at zero from here on.
  auto& total = registry.AddCounter("controller_runtime_reconcile_total",
                                    "Total number of reconciliations per controller.",
                                    {"controller", "result"});
  success_ = &total.WithLabels({name_, kResultSuccess});
  error_ = &total.WithLabels({name_, kResultError});
  requeue_ = &total.WithLabels({name_, kResultRequeue});
  requeue_after_ = &total.WithLabels({name_, kResultRequeueAfter});
  errors_total_ =
      &registry
           .AddCounter("controller_runtime_reconcile_errors_total",
                       "Total number of reconciliation errors per controller.", {"controller"})
           .WithLabels({name_});
  terminal_errors_total_ =
      &registry
           .AddCounter("controller_runtime_terminal_reconcile_errors_total",
                       "Total number of terminal reconciliation errors per controller.",
                       {"controller"})
           .WithLabels({name_});
  panics_total_ = &registry
                       .AddCounter("controller_runtime_reconcile_panics_total",
                                   "Total number of reconciliation panics (exceptions caught) "
                                   "per controller.",
                                   {"controller"})
                       .WithLabels({name_});
  reconcile_time_ = &registry
                         .AddHistogram("controller_runtime_reconcile_time_seconds",
                                       "Length of time per reconciliation per controller.",
                                       {"controller"}, ReconcileBuckets())
                         .WithLabels({name_});
  active_workers_ =
      &registry
           .AddGauge("controller_runtime_active_workers",
                     "Number of currently used workers per controller.", {"controller"})
           .WithLabels({name_});
  max_concurrent_ =
      &registry
           .AddGauge("controller_runtime_max_concurrent_reconciles",
                     "Maximum number of concurrent reconciles per controller.", {"controller"})
           .WithLabels({name_});
  max_concurrent_->Set(options_.workers);
}

Controller::~Controller() = default;

Status Controller::Run(std::stop_token stop) {
  log_.Info("starting workers", {{"workers", options_.workers}});
  {
    // Workers return when `stop` is requested (after their current item) or the queue is
    // shut down by its owner; shutting it down here also drops pending AddAfter timers.
    // Declared first so it outlives the joins below.
    std::stop_callback on_stop(stop, [this] { queue_.ShutDown(); });
    std::vector<std::jthread> workers;
    workers.reserve(static_cast<std::size_t>(options_.workers));
    for (int i = 0; i < options_.workers; ++i)
      workers.emplace_back([this, stop](std::stop_token) { Worker(stop); });
  }  // joins the workers
  log_.Info("workers stopped");
  return OkStatus();
}

void Controller::Worker(std::stop_token stop) {
  while (!stop.stop_requested()) {
    if (!ProcessNext(stop)) return;
  }
}

bool Controller::ProcessNext(std::stop_token stop) {
  std::optional<std::string> key = queue_.Get(stop);
  if (!key) return false;
  ReconcileKey(*key, stop);
  queue_.Done(*key);
  return true;
}

void Controller::ReconcileKey(const std::string& key, std::stop_token stop) {
  ++active_;
  active_workers_->Inc();
  const std::string id = NewReconcileId();
  const Logger log = log_.WithValues({{"key", key}, {"reconcile_id", id}});
  tls_context = {&log, &id};

  auto start = std::chrono::steady_clock::now();
  StatusOr<Result> result = Result{};
  try {
    result = reconciler_.Reconcile(key, stop);
  } catch (const std::exception& e) {
    panics_total_->Inc();
    result = InternalError(std::string("reconcile threw an exception: ") + e.what());
  } catch (...) {
    panics_total_->Inc();
    result = InternalError("reconcile threw a non-standard exception");
  }
  reconcile_time_->Observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());

  const Requeue r = RequeueFor(result);
  if (r.is_error) {
    errors_total_->Inc();
    error_->Inc();
  }
  switch (r.action) {
    case RequeueAction::kForget:
      queue_.Forget(key);
      success_->Inc();
      log.Debug("reconciled");
      break;
    case RequeueAction::kRequeueRateLimited:
      if (r.is_error) {
        log.Error("reconciler error",
                  {{"error", result.status().ToString()}, {"retries", queue_.NumRequeues(key)}});
      } else {
        requeue_->Inc();
      }
      queue_.AddRateLimited(key);
      break;
    case RequeueAction::kRequeueAfter:
      if (r.is_error) {
        log.Error("reconciler error; retrying when the server asked",
                  {{"error", result.status().ToString()},
                   {"after_s", std::chrono::duration<double>(r.after).count()}});
      } else {
        queue_.Forget(key);
        requeue_after_->Inc();
      }
      queue_.AddAfter(key, r.after);
      break;
    case RequeueAction::kTerminal:
      terminal_errors_total_->Inc();
      queue_.Forget(key);
      log.Error("terminal reconciler error; not retrying", {{"error", result.status().ToString()}});
      if (options_.on_terminal_error) {
        try {
          options_.on_terminal_error(key, result.status());
        } catch (...) {
          log.Error("on_terminal_error threw; ignored");
        }
      }
      break;
  }
  tls_context = {};
  active_workers_->Dec();
  --active_;
}

}  // namespace gg::runtime
