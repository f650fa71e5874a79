// Store: every object serialized once (JSON string) with its labels and selectable fields
// indexed, one global resourceVersion, a bounded event history per resource (as
// kube-apiserver keeps one watch cache per resource) and per-watcher queues.
// LIST is string concatenation; writers never block on watchers (a watcher that falls
// too far behind is closed, and its client relists).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sim/selector.h"

namespace gg::sim {

// An object's labels as sorted pairs of interned strings. Label keys and most values repeat
// across objects (a GPU node has ~50 feature-discovery labels): as std::strings they cost
// ~6 KB per node, half again the node's JSON. Interned strings live for the process.
class Labels {
 public:
  Labels() = default;
  explicit Labels(const FieldMap& m);
  const std::string* Find(std::string_view key) const;
  std::size_t size() const { return kv_.size(); }

 private:
  std::vector<std::pair<const std::string*, const std::string*>> kv_;
};
bool MatchesLabels(const LabelSelector& s, const Labels& l);

struct Obj {
  std::string json;  // the full object, metadata.resourceVersion == rv
  std::uint64_t rv = 0;
  std::string ns, name, uid, api_version;
  Labels labels;
  FieldMap fields;  // metadata.name, metadata.namespace + the resource's selectable fields
};
using ObjPtr = std::shared_ptr<const Obj>;

enum class EventType { kAdded, kModified, kDeleted, kBookmark, kError };
const char* EventTypeName(EventType t);

struct WatchEvent {
  std::uint64_t rv = 0;
  EventType type = EventType::kAdded;
  std::string storage;
  ObjPtr obj;   // new state (DELETED: last state with the deletion RV)
  ObjPtr prev;  // previous state for MODIFIED/DELETED (selector transitions)
};

class Watcher {
 public:
  Watcher(std::string storage, std::string ns, LabelSelector ls, FieldSelector fs)
      : storage_(std::move(storage)), ns_(std::move(ns)), ls_(std::move(ls)), fs_(std::move(fs)) {}
  // Waits up to `wait` for events; moves them into `out`. False once closed and drained.
  bool Pop(std::deque<WatchEvent>& out, std::chrono::milliseconds wait);
  bool overflowed() const;
  bool Matches(const Obj& o) const;
  const std::string& storage() const { return storage_; }
  bool QueueEmpty() const;

 private:
  friend class Store;
  void Push(const WatchEvent& e, std::size_t limit);  // called under the store lock
  void Close();
  std::string storage_, ns_;
  LabelSelector ls_;
  FieldSelector fs_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<WatchEvent> q_;
  bool closed_ = false;
  bool overflow_ = false;
};

class Store {
 public:
  // `history`: events kept per resource (storage) for watch resumes; older RVs answer 410.
  Store(std::size_t history, std::size_t queue_limit)
      : history_limit_(history), queue_limit_(queue_limit) {}

  // The lock guarding everything below *Locked; handlers take it for read-modify-write.
  std::mutex& mu() const { return mu_; }
  std::uint64_t rv() const;
  std::uint64_t RvLocked() const { return rv_; }
  std::uint64_t NextRvLocked() { return rv_ + 1; }

  ObjPtr GetLocked(const std::string& storage, const std::string& key) const;
  // Stores obj (its rv must be NextRvLocked()) and emits ADDED/MODIFIED.
  void PutLocked(const std::string& storage, const std::string& key, ObjPtr obj);
  // Removes the object; `last` is its final state carrying the deletion RV (NextRvLocked()).
  void RemoveLocked(const std::string& storage, const std::string& key, ObjPtr last);
  // Visits objects in key order starting after `after` ("" = from the start) within
  // namespace `ns` ("" = all). Stop by returning false.
  void ForEachLocked(const std::string& storage, const std::string& ns, const std::string& after,
                     const std::function<bool(const std::string& key, const ObjPtr&)>& fn) const;
  std::size_t CountLocked(const std::string& storage) const;
  // Whether `storage` may have changed after `rv`: true when an event of it newer than `rv`
  // is in the history, or when `rv` predates the history (nothing is known then).
  bool ChangedSinceLocked(const std::string& storage, std::uint64_t rv) const;
  std::size_t TotalObjects() const;
  std::map<std::string, std::size_t> Counts() const;

  // Watch start. from_rv: nullopt = send current state first (RV "" / "0");
  // otherwise replay history after it, or Expired when it is older than the window.
  struct WatchStart {
    std::shared_ptr<Watcher> watcher;
    std::uint64_t too_old_rv = 0;  // >0: 410 for this RV
    std::uint64_t oldest_rv = 0;
    std::uint64_t start_rv = 0;     // the store's RV when the watch started
    std::size_t initial_count = 0;  // synthetic ADDED events queued first
  };
  WatchStart StartWatch(const std::string& storage, const std::string& ns, LabelSelector ls,
                        FieldSelector fs, std::optional<std::uint64_t> from_rv);
  void StopWatch(const std::shared_ptr<Watcher>& w);
  void CloseAllWatches();
  std::size_t WatchCount() const;
  // Forget history: every resume from an RV before now answers 410.
  void Compact();

 private:
  void FanOutLocked(const WatchEvent& e);
  mutable std::mutex mu_;
  std::uint64_t rv_ = 0;
  std::unordered_map<std::string, std::map<std::string, ObjPtr>> data_;
  // One resource's recent events: every event of it with rv > compacted_rv.
  struct History {
    std::deque<WatchEvent> events;
    std::uint64_t compacted_rv = 0;
  };
  // The compacted RV of a resource: its history's, or for one never written, the last Compact.
  std::uint64_t CompactedRvLocked(const std::string& storage) const;
  std::unordered_map<std::string, History> history_;
  std::uint64_t compacted_floor_ = 0;  // Compact()'s RV
  std::size_t history_limit_;
  std::size_t queue_limit_;
  std::list<std::shared_ptr<Watcher>> watchers_;
};

}  // namespace gg::sim
