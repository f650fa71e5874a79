// WorkQueue implementation: one map of per-key state, two FIFO lanes of pointers into it
// (urgent, normal), and the keys waiting for their AddAfter time: a map, their deadlines in a
// binary heap and ONE clock timer for the earliest. (A timer per key cost ~200 bytes each — the
// closure, its shared id, the clock's entry — and an operator requeues every node of the
// fleet after each reconcile. An ordered set of deadlines cost 64 bytes a key, the heap ~25.)
#include "runtime/workqueue.h"

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <stop_token>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/wake_batch.h"

namespace gg::runtime {
namespace {

double Seconds(Duration d) { return std::chrono::duration<double>(d).count(); }

// Ready times closer than this are the same time for AddAfter.
constexpr Duration kSameTime = std::chrono::milliseconds(1);

}  // namespace

struct WorkQueue::Impl : std::enable_shared_from_this<WorkQueue::Impl> {
  struct Item {
    bool dirty = false;          // needs processing (queued, or re-queued once Done)
    bool processing = false;     // handed out by Get, not Done yet
    bool urgent = false;         // the pending (dirty) work is urgent
    bool handed_urgent = false;  // handed out from the urgent lane (requeues keep it)
    std::uint32_t refs = 0;      // lane entries pointing here (the item lives while > 0)
    std::uint64_t ticket = 0;    // the lane entry that is current; older ones are stale
    MonoTime added{};            // when it became dirty (queue duration metric)
  };
  using Node = std::pair<const std::string, Item>;
  // A lane entry. Moving a key to the urgent lane leaves its normal entry behind (removing
  // it from the middle of a deque would be O(n)); the ticket tells Pop it is stale.
  struct Entry {
    Node* node;
    std::uint64_t ticket;
  };
  // A waiting key's entry; its time is in its heap slot. 8 bytes keep the map node at 64.
  struct Waiting {
    std::uint32_t slot;  // index in `deadlines`
    Priority priority;
  };
  using WaitNode = std::pair<const std::string, Waiting>;
  // A heap slot. `node` points into `waiting` (node-based map: addresses are stable), so a
  // slot that moves updates its key's index without a look-up.
  struct Deadline {
    MonoTime ready;
    std::uint64_t seq;  // ties go in AddAfter order
    WaitNode* node;
    bool operator<(const Deadline& o) const {
      return std::tie(ready, seq) < std::tie(o.ready, o.seq);
    }
  };
  struct Running {
    const std::string* key;
    MonoTime started;
  };

  Impl(std::string n, Clock& c, std::unique_ptr<RateLimiter> l)
      : name(std::move(n)), clock(c), limiter(std::move(l)) {}

  const std::string name;
  Clock& clock;
  std::unique_ptr<RateLimiter> limiter;

  mutable std::mutex mu;
  // A plain condition variable: condition_variable_any's own internal mutex cost the woken
  // getter a second futex round per Add. Stop tokens wake waiters through WakeOnStop.
  std::condition_variable cv;
  // Node-based map: element addresses are stable, so lanes/running hold pointers into it.
  std::unordered_map<std::string, Item> items;
  std::deque<Entry> urgent_lane, normal_lane;
  std::size_t ready = 0;         // items dirty and not processing (each has one current entry)
  std::size_t ready_urgent = 0;  // of those, in the urgent lane
  std::uint64_t next_ticket = 0;
  std::vector<Running> running;  // at most one per worker
  std::unordered_map<std::string, Waiting> waiting;
  // Min-heap on (ready, seq). A deque: it grows and shrinks in 512-byte blocks, where a vector
  // holding the fleet's keys would double into a new block each time and leave the old ones
  // as holes in the heap (measured: more RSS, not less, than the ordered set it replaced).
  std::deque<Deadline> deadlines;
  std::uint64_t next_seq = 0;
  bool timer_set = false;
  TimerId timer = 0;
  MonoTime timer_at{};
  std::uint64_t timer_gen = 0;  // a callback of an older timer does nothing
  bool shutting_down = false;
  // Wakeups: getters asleep in Get, how many of them a notify is already on its way to, the
  // notifies owed once mu is released, and callers asleep in ShutDownWithDrain.
  int sleepers = 0;
  int signalled = 0;
  int to_wake = 0;
  int drain_waiters = 0;

  // Metrics; all null when no registry was given.
  metrics::Gauge* depth = nullptr;
  metrics::Counter* adds = nullptr;
  metrics::Histogram* queue_duration = nullptr;
  metrics::Histogram* work_duration = nullptr;
  metrics::Counter* retries = nullptr;
  metrics::Gauge* unfinished = nullptr;
  metrics::Gauge* longest = nullptr;

  MonoTime Now() const { return depth ? clock.Monotonic() : MonoTime{}; }

  // Wakes the waiters when `stop` is requested. Notified under mu, so the wakeup cannot fall
  // between a waiter's check of stop_requested() and its wait. Construct it before taking mu
  // (it runs at once when the stop was already requested).
  struct Waker {
    Impl* q;
    void operator()() const {
      std::scoped_lock lock(q->mu);
      q->cv.notify_all();
    }
  };
  std::stop_callback<Waker> WakeOnStop(std::stop_token stop) {
    return std::stop_callback<Waker>(std::move(stop), Waker{this});
  }

  // Requires mu. Appends the current entry of a ready item to its lane.
  void PushLocked(Node& node) {
    Item& item = node.second;
    item.ticket = ++next_ticket;
    ++item.refs;
    (item.urgent ? urgent_lane : normal_lane).push_back({&node, item.ticket});
    if (item.urgent) ++ready_urgent;
    ++ready;
    if (depth) depth->Inc();
    if (sleepers > signalled) {  // a getter is asleep and no notify is on its way to it yet
      ++signalled;
      ++to_wake;
    }
  }

  // Releases mu (held by `lock`), then sends the notifies PushLocked owes. Notifying after the
  // unlock: a getter woken while the adder still holds mu blocks on mu at once (two context
  // switches and two futex calls per Add, measured on the watch path).
  // Inside a WakeBatch (the handlers of one watch read) the notifies stay owed in to_wake and go
  // out once, when the batch closes: one wakeup for the read's keys, not one per key.
  void UnlockAndWake(std::unique_lock<std::mutex>& lock) {
    if (to_wake > 0 && WakeBatch::Defer(shared_from_this(), &Impl::WakeOwed)) {
      lock.unlock();
      return;
    }
    SendOwed(lock);
  }
  static void WakeOwed(void* self) {
    Impl& q = *static_cast<Impl*>(self);
    std::unique_lock lock(q.mu);
    q.SendOwed(lock);
  }
  void SendOwed(std::unique_lock<std::mutex>& lock) {
    int n = std::exchange(to_wake, 0);
    if (n > 0 && drain_waiters > 0) n = 2;  // one notify could reach the drainer, not a getter
    lock.unlock();
    if (n == 1) {
      cv.notify_one();
    } else if (n > 1) {
      cv.notify_all();
    }
  }

  // Requires mu.
  void AddLocked(const std::string& key, Priority priority) {
    if (shutting_down) return;
    const bool urgent = priority == Priority::kUrgent;
    auto [it, inserted] = items.try_emplace(key);
    Item& item = it->second;
    if (item.dirty) {
      if (!urgent || item.urgent) return;
      item.urgent = true;  // promote; the normal entry (if queued) goes stale
      if (item.processing) return;
      --ready;
      if (depth) depth->Dec();
      PushLocked(*it);
      return;
    }
    item.dirty = true;
    item.urgent = urgent;
    if (adds) {
      adds->Inc();
      item.added = Now();
    }
    if (item.processing) return;  // queued again by Done
    PushLocked(*it);
  }

  // Requires mu and ready > 0.
  std::string PopLocked() {
    for (;;) {
      auto& lane = urgent_lane.empty() ? normal_lane : urgent_lane;
      const bool from_urgent = &lane == &urgent_lane;
      Entry e = lane.front();
      lane.pop_front();
      Item& item = e.node->second;
      --item.refs;
      if (e.ticket != item.ticket || !item.dirty || item.processing) {
        if (!item.dirty && !item.processing && item.refs == 0)
          items.erase(items.find(e.node->first));
        continue;  // stale: the key moved lanes
      }
      --ready;
      if (from_urgent) --ready_urgent;
      item.dirty = false;
      item.processing = true;
      item.handed_urgent = item.urgent;
      item.urgent = false;
      MonoTime now = Now();
      if (depth) {
        depth->Dec();
        queue_duration->Observe(Seconds(now - item.added));
      }
      running.push_back({&e.node->first, now});
      return e.node->first;
    }
  }

  void CancelWaitingLocked() {
    if (timer_set) clock.Cancel(timer);
    timer_set = false;
    ++timer_gen;
    deadlines.clear();
    waiting.clear();
  }

  // --- the deadline heap (requires mu) ---
  void Place(std::size_t i, const Deadline& d) {
    deadlines[i] = d;
    d.node->second.slot = static_cast<std::uint32_t>(i);
  }
  void SiftUp(std::size_t i) {
    const Deadline d = deadlines[i];
    while (i > 0) {
      const std::size_t parent = (i - 1) / 2;
      if (!(d < deadlines[parent])) break;
      Place(i, deadlines[parent]);
      i = parent;
    }
    Place(i, d);
  }
  void SiftDown(std::size_t i) {
    const Deadline d = deadlines[i];
    const std::size_t n = deadlines.size();
    for (;;) {
      std::size_t child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n && deadlines[child + 1] < deadlines[child]) ++child;
      if (!(deadlines[child] < d)) break;
      Place(i, deadlines[child]);
      i = child;
    }
    Place(i, d);
  }
  // Removes the earliest deadline; its key stays in `waiting` for the caller.
  void PopEarliest() {
    const Deadline last = deadlines.back();
    deadlines.pop_back();
    if (deadlines.empty()) return;
    Place(0, last);
    SiftDown(0);
  }

  // Requires mu. `key` waits until `ready` (earliest time kept) in `priority`'s lane.
  void WaitLocked(const std::string& key, MonoTime ready, Priority priority,
                  const std::weak_ptr<Impl>& self) {
    auto [it, added] = waiting.try_emplace(key, Waiting{0, priority});
    if (!added) {
      it->second.priority = std::max(priority, it->second.priority);
      Deadline& d = deadlines[it->second.slot];
      // Already due sooner, or as good as (a requeue to the same wall deadline computed a few
      // microseconds later): keep that time.
      if (d.ready <= ready + kSameTime) return;
      d.ready = ready;  // earlier: the slot only moves up
      d.seq = ++next_seq;
      SiftUp(it->second.slot);
    } else {
      deadlines.push_back({ready, ++next_seq, &*it});
      SiftUp(deadlines.size() - 1);
    }
    ArmLocked(self);
  }

  // Requires mu. The one timer fires at the earliest deadline.
  void ArmLocked(const std::weak_ptr<Impl>& self) {
    if (deadlines.empty()) return;
    const MonoTime first = deadlines.front().ready;
    if (timer_set && timer_at <= first) return;  // fires in time; it re-arms for the rest
    if (timer_set) clock.Cancel(timer);
    const std::uint64_t gen = ++timer_gen;
    timer_set = true;
    timer_at = first;
    // The callback holds a weak reference: a queue destroyed meanwhile makes it a no-op.
    timer = clock.ScheduleAfter(std::max(Duration(0), first - clock.Monotonic()), [self, gen] {
      auto impl = self.lock();
      if (impl) impl->Fire(gen, self);
    });
  }

  // The timer: every key whose time has come joins its lane, then the timer is re-armed.
  void Fire(std::uint64_t gen, const std::weak_ptr<Impl>& self) {
    std::unique_lock lock(mu);
    if (gen != timer_gen) return;  // superseded or cancelled
    timer_set = false;
    const MonoTime now = clock.Monotonic();
    while (!deadlines.empty() && deadlines.front().ready <= now) {
      auto w = waiting.find(deadlines.front().node->first);
      PopEarliest();
      const std::string key = w->first;
      const Priority p = w->second.priority;
      waiting.erase(w);
      AddLocked(key, p);
    }
    ArmLocked(self);
    UnlockAndWake(lock);
  }

  double UnfinishedSeconds() const {
    std::scoped_lock lock(mu);
    MonoTime now = clock.Monotonic();
    double total = 0;
    for (const auto& r : running) total += Seconds(now - r.started);
    return total;
  }

  double LongestSeconds() const {
    std::scoped_lock lock(mu);
    MonoTime now = clock.Monotonic();
    double longest_s = 0;
    for (const auto& r : running) longest_s = std::max(longest_s, Seconds(now - r.started));
    return longest_s;
  }
};

WorkQueue::WorkQueue(std::string name, Clock& clock, metrics::Registry* registry,
                     std::unique_ptr<RateLimiter> limiter) {
  if (!limiter) limiter = DefaultControllerRateLimiter(clock);
  impl_ = std::make_shared<Impl>(std::move(name), clock, std::move(limiter));
  if (!registry) return;
  auto& r = *registry;
  const std::string& n = impl_->name;
  // One declaration table: the names and help of client-go's workqueue metrics.
  impl_->depth =
      &r.AddGauge("workqueue_depth", "Current depth of workqueue.", {"name"}).WithLabels({n});
  impl_->adds =
      &r.AddCounter("workqueue_adds_total", "Total number of adds handled by workqueue.", {"name"})
           .WithLabels({n});
  impl_->queue_duration =
      &r.AddHistogram("workqueue_queue_duration_seconds",
                      "How long in seconds an item stays in workqueue before being requested.",
                      {"name"}, metrics::ExponentialBuckets(1e-8, 10, 12))
           .WithLabels({n});
  impl_->work_duration =
      &r.AddHistogram("workqueue_work_duration_seconds",
                      "How long in seconds processing an item from workqueue takes.", {"name"},
                      metrics::ExponentialBuckets(1e-8, 10, 12))
           .WithLabels({n});
  impl_->retries = &r.AddCounter("workqueue_retries_total",
                                 "Total number of retries handled by workqueue.", {"name"})
                        .WithLabels({n});
  impl_->unfinished =
      &r.AddGauge("workqueue_unfinished_work_seconds",
                  "How many seconds of work has been done that is in progress and hasn't been "
                  "observed by work_duration. Large values indicate stuck threads.",
                  {"name"})
           .WithLabels({n});
  impl_->longest = &r.AddGauge("workqueue_longest_running_processor_seconds",
                               "How many seconds has the longest running processor for workqueue "
                               "been running.",
                               {"name"})
                        .WithLabels({n});
  Impl* impl = impl_.get();
  impl_->unfinished->SetCallback([impl] { return impl->UnfinishedSeconds(); });
  impl_->longest->SetCallback([impl] { return impl->LongestSeconds(); });
}

WorkQueue::~WorkQueue() {
  ShutDown();
  // Clearing waits for a scrape that is running the callback right now.
  if (impl_->unfinished) impl_->unfinished->SetCallback(nullptr);
  if (impl_->longest) impl_->longest->SetCallback(nullptr);
}

void WorkQueue::Add(const std::string& key, Priority priority) {
  std::unique_lock lock(impl_->mu);
  impl_->AddLocked(key, priority);
  impl_->UnlockAndWake(lock);
}

void WorkQueue::AddAfter(const std::string& key, Duration delay, std::optional<Priority> priority) {
  Impl& q = *impl_;
  std::unique_lock lock(q.mu);
  if (q.shutting_down) return;
  if (!priority) {
    auto item = q.items.find(key);
    const bool requeue =
        item != q.items.end() && item->second.processing && item->second.handed_urgent;
    priority = requeue ? Priority::kUrgent : Priority::kNormal;
  }
  if (delay <= Duration(0)) {
    q.AddLocked(key, *priority);
    q.UnlockAndWake(lock);
    return;
  }
  q.WaitLocked(key, q.clock.Monotonic() + delay, *priority, impl_);
}

void WorkQueue::AddRateLimited(const std::string& key) {
  {
    std::scoped_lock lock(impl_->mu);
    if (impl_->shutting_down) return;
    if (impl_->retries) impl_->retries->Inc();
  }
  AddAfter(key, impl_->limiter->When(key));
}

void WorkQueue::Forget(const std::string& key) { impl_->limiter->Forget(key); }

int WorkQueue::NumRequeues(const std::string& key) { return impl_->limiter->NumRequeues(key); }

std::optional<std::string> WorkQueue::Get(std::stop_token stop) {
  Impl& q = *impl_;
  auto on_stop = q.WakeOnStop(stop);
  std::unique_lock lock(q.mu);
  // Counted while inside wait (mu is released only there), so adders know to notify.
  ++q.sleepers;
  while (q.ready == 0 && !q.shutting_down && !stop.stop_requested()) {
    q.cv.wait(lock);
    // Every wake uses up one notify on its way (or was spurious): a getter that finds the key
    // already taken (by another getter, by TryGet) sleeps again counted as not signalled, so
    // the next Add wakes it.
    if (q.signalled > 0) --q.signalled;
  }
  --q.sleepers;
  if (q.ready == 0 || stop.stop_requested()) return std::nullopt;
  return q.PopLocked();
}

std::optional<std::string> WorkQueue::TryGet() {
  std::scoped_lock lock(impl_->mu);
  if (impl_->ready == 0) return std::nullopt;
  return impl_->PopLocked();
}

void WorkQueue::Done(const std::string& key) {
  Impl& q = *impl_;
  std::unique_lock lock(q.mu);
  auto it = q.items.find(key);
  if (it == q.items.end() || !it->second.processing) return;  // not handed out: ignore
  const std::string* k = &it->first;
  auto r = std::find_if(q.running.begin(), q.running.end(),
                        [k](const Impl::Running& x) { return x.key == k; });
  if (r != q.running.end()) {
    if (q.work_duration) q.work_duration->Observe(Seconds(q.Now() - r->started));
    *r = q.running.back();
    q.running.pop_back();
  }
  it->second.processing = false;
  it->second.handed_urgent = false;
  if (it->second.dirty) {
    q.PushLocked(*it);
  } else if (it->second.refs == 0) {
    q.items.erase(it);
  }
  if (q.running.empty() && q.drain_waiters > 0) q.to_wake = 2;  // ShutDownWithDrain: notify_all
  q.UnlockAndWake(lock);
}

void WorkQueue::ShutDown() {
  std::scoped_lock lock(impl_->mu);
  impl_->shutting_down = true;
  impl_->CancelWaitingLocked();
  impl_->cv.notify_all();
}

void WorkQueue::ShutDownWithDrain(std::stop_token stop) {
  ShutDown();
  Impl& q = *impl_;
  auto on_stop = q.WakeOnStop(stop);
  std::unique_lock lock(q.mu);
  ++q.drain_waiters;
  q.cv.wait(lock, [&] { return q.running.empty() || stop.stop_requested(); });
  --q.drain_waiters;
}

bool WorkQueue::ShuttingDown() const {
  std::scoped_lock lock(impl_->mu);
  return impl_->shutting_down;
}

std::size_t WorkQueue::Len() const {
  std::scoped_lock lock(impl_->mu);
  return impl_->ready;
}

std::size_t WorkQueue::UrgentLen() const {
  std::scoped_lock lock(impl_->mu);
  return impl_->ready_urgent;
}

std::size_t WorkQueue::Processing() const {
  std::scoped_lock lock(impl_->mu);
  return impl_->running.size();
}

std::size_t WorkQueue::Waiting() const {
  std::scoped_lock lock(impl_->mu);
  return impl_->waiting.size();
}

const std::string& WorkQueue::name() const { return impl_->name; }

}  // namespace gg::runtime
