// WorkQueue: client-go's rate-limited, de-duplicating work queue of string keys.
//  - Add(k): a key is queued at most once; a key that is being processed (between Get and
//    Done) and is added again is queued once more when Done(k) is called — so one key is
//    never processed by two workers at the same time.
//  - AddAfter(k, d): adds after d on the injected Clock (FakeClock tests advance time);
//    repeated AddAfter of a waiting key keeps the earliest time.
//  - AddRateLimited(k): AddAfter(k, limiter.When(k)); Forget(k) resets k's backoff.
//  - ShutDown(): Add is ignored from then on, Get hands out what is left, then returns
//    nullopt. ShutDownWithDrain() also waits until every item handed out is Done.
//  - Two lanes: Get hands out every kUrgent key before any kNormal one (FIFO within a lane),
//    so work that matters now (a fault) never waits behind a backlog of housekeeping (the
//    initial reconcile of 100k nodes). An urgent Add of a key queued as normal moves it to the
//    urgent lane; a normal Add never demotes. A requeue (AddAfter without a priority,
//    AddRateLimited) keeps the lane the key was handed out from.
// Add/Get/Done take one mutex and allocate nothing beyond the key's own entry.
// Metrics (label name=<queue name>): workqueue_depth, workqueue_adds_total,
// workqueue_queue_duration_seconds, workqueue_work_duration_seconds, workqueue_retries_total,
// workqueue_unfinished_work_seconds, workqueue_longest_running_processor_seconds.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>

#include "common/clock.h"
#include "metrics/registry.h"
#include "runtime/rate_limiter.h"

namespace gg::runtime {

enum class Priority { kNormal, kUrgent };

class WorkQueue {
 public:
  // `registry` may be null (no metrics). `limiter` null → DefaultControllerRateLimiter(clock).
  WorkQueue(std::string name, Clock& clock, metrics::Registry* registry = nullptr,
            std::unique_ptr<RateLimiter> limiter = nullptr);
  ~WorkQueue();  // ShutDown(), cancels pending AddAfter timers
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  void Add(const std::string& key, Priority priority = Priority::kNormal);
  // No priority: the lane `key` was handed out from if it is being processed (a requeue),
  // else normal. A key already waiting keeps the higher of the two priorities.
  void AddAfter(const std::string& key, Duration delay,
                std::optional<Priority> priority = std::nullopt);
  void AddRateLimited(const std::string& key);
  void Forget(const std::string& key);
  int NumRequeues(const std::string& key);

  // Blocks until a key is available. nullopt when the queue is shut down and empty, or when
  // `stop` is requested.
  std::optional<std::string> Get(std::stop_token stop = {});
  // Non-blocking Get (nullopt when nothing is ready).
  std::optional<std::string> TryGet();
  // Marks `key` (returned by Get) as processed; re-queues it if it was added meanwhile.
  void Done(const std::string& key);

  void ShutDown();
  // ShutDown() and wait until every key handed out by Get is Done, or `stop` is requested.
  void ShutDownWithDrain(std::stop_token stop = {});
  bool ShuttingDown() const;

  // Keys queued and ready (not counting those being processed or waiting in AddAfter).
  std::size_t Len() const;
  std::size_t UrgentLen() const;   // of Len(), those in the urgent lane
  std::size_t Processing() const;  // keys between Get and Done
  std::size_t Waiting() const;     // keys waiting for an AddAfter/AddRateLimited delay
  const std::string& name() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;  // shared with pending timer callbacks
};

}  // namespace gg::runtime
