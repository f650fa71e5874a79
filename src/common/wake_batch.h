// WakeBatch: collects the wakeups a thread sends while it produces a burst of work, and sends
// each once when the burst ends. One read of a watch stream delivers N events; without a
// batch each event's WorkQueue::Add wakes a sleeping worker, which takes the one key, sleeps
// again and is woken by the next Add: N wakeups, N context switches. Inside a batch the worker
// is woken once, when the read is done, and finds all N keys.
//
// Producers that take part (WorkQueue) ask Defer() before they notify; everything else on the
// thread notifies as usual. Batches nest: the wakes go out when the outermost one closes.
// A producer must not wait, inside a batch, for a consumer whose wake it deferred.
#pragma once

#include <memory>

namespace gg {

class WakeBatch {
 public:
  WakeBatch();
  ~WakeBatch();  // sends the deferred wakes (outermost batch only)
  WakeBatch(const WakeBatch&) = delete;
  WakeBatch& operator=(const WakeBatch&) = delete;

  // With a batch open on this thread: arranges for wake(owner.get()) to run when it closes
  // (once per owner, however often it is deferred; `owner` is kept alive until then) and
  // returns true. With none open: returns false and the caller wakes now.
  static bool Defer(const std::shared_ptr<void>& owner, void (*wake)(void*));
};

}  // namespace gg
