#include "common/wake_batch.h"

#include <utility>
#include <vector>

namespace gg {
namespace {

struct Deferred {
  std::shared_ptr<void> owner;
  void (*wake)(void*);
};

struct BatchState {
  int depth = 0;
  std::vector<Deferred> deferred;  // a few owners at most: a linear search beats a set
};

thread_local BatchState tls_batch;

}  // namespace

WakeBatch::WakeBatch() { ++tls_batch.depth; }

WakeBatch::~WakeBatch() {
  BatchState& b = tls_batch;
  if (--b.depth > 0) return;
  // A wake may run code that defers again (it opens no batch of its own, so that goes out at
  // once); take the list first so the loop never sees it change.
  std::vector<Deferred> now;
  now.swap(b.deferred);
  for (auto& d : now) d.wake(d.owner.get());
  now.clear();
  if (b.deferred.empty()) b.deferred.swap(now);  // keep the capacity for the next batch
}

bool WakeBatch::Defer(const std::shared_ptr<void>& owner, void (*wake)(void*)) {
  BatchState& b = tls_batch;
  if (b.depth == 0) return false;
  for (const auto& d : b.deferred) {
    if (d.owner.get() == owner.get() && d.wake == wake) return true;
  }
  b.deferred.push_back({owner, wake});
  return true;
}

}  // namespace gg
