// Informer: one paged LIST, then WATCH forever from the list's resourceVersion (bookmarks on),
// resuming from the last seen resourceVersion when a stream ends or breaks. It re-LISTs only on
// 410 Gone/Expired or an undecodable event — never periodically (except in the opt-in poll
// mode, InformerOptions::poll_interval, which replaces WATCH by a periodic LIST). Keeps a
// thread-safe cache of projections keyed by "namespace/name" and calls handlers
// (OnAdd/OnUpdate/OnDelete) on its own thread after the cache is updated; deletes discovered by a
// relist are delivered too.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/clock.h"
#include "common/log.h"
#include "common/status.h"
#include "k8s/codec.h"
#include "k8s/objects.h"
#include "k8s/resource.h"
#include "k8s/rest_client.h"

namespace gg::runtime {

struct InformerOptions {
  std::string namespace_;  // "" = all namespaces
  std::string label_selector;
  std::string field_selector;
  std::int64_t page_size = 500;
  // Watch requests ask the server to end the stream after a random time in [min, 2*min);
  // the informer then resumes from the last resourceVersion (no LIST).
  int watch_timeout_seconds = 300;
  // A busy watch is read in batches at most this far apart (HttpRequest::read_coalesce): the
  // handlers of a batch run back to back and wake a work queue's worker once (WakeBatch),
  // not once per event. The latency it adds is small next to a fence's seconds.
  std::chrono::milliseconds watch_read_coalesce{5};
  Duration backoff_initial = std::chrono::milliseconds(200);
  Duration backoff_max = std::chrono::seconds(30);
  // Poll mode when > 0: never WATCH; a full paged LIST every poll_interval instead, diffed
  // against the cache so the same add/update/delete handlers fire (an unchanged
  // resourceVersion is no update). It reproduces the original design's polling for the API-load
  // comparison (bench/) and serves clusters whose RBAC forbids watches. Changes are seen up to
  // poll_interval late and every poll moves the whole collection over the wire.
  Duration poll_interval = Duration::zero();
};

// Counters for tests and benchmarks ("zero periodic LISTs").
struct InformerStats {
  std::atomic<std::uint64_t> lists{0};       // completed LISTs (initial + relists)
  std::atomic<std::uint64_t> list_pages{0};  // LIST requests (pages)
  std::atomic<std::uint64_t> relists{0};     // LISTs after the first (polls in poll mode)
  std::atomic<std::uint64_t> watches{0};     // WATCH requests started
  std::atomic<std::uint64_t> events{0};      // ADDED/MODIFIED/DELETED applied
  std::atomic<std::uint64_t> bookmarks{0};
  std::atomic<std::uint64_t> errors{0};  // failed requests / bad events
};

// Non-template core: the list/watch loop. The typed Informer<T> supplies the cache.
class InformerCore {
 public:
  InformerCore(k8s::RestClient& client, k8s::ResourceType type, Clock& clock,
               InformerOptions options);
  virtual ~InformerCore();
  InformerCore(const InformerCore&) = delete;
  InformerCore& operator=(const InformerCore&) = delete;

  // Starts the loop on a jthread. Handlers must be added before.
  void Start();
  // Requests stop and joins (prompt: the watch is cancelled).
  void Stop();
  bool HasSynced() const { return synced_.load(); }
  // Waits (on the real monotonic clock, polling) until synced, stopped or timed out.
  bool WaitForSync(std::stop_token stop, std::chrono::milliseconds timeout) const;
  const InformerStats& stats() const { return stats_; }
  const k8s::ResourceType& type() const { return type_; }
  // The resourceVersion the next watch resumes from.
  std::string LastResourceVersion() const;

 protected:
  // Relist protocol: BeginRelist(); OnListPage()* ; EndRelist() (drops objects not seen).
  virtual void BeginRelist() = 0;
  virtual StatusOr<k8s::ListPageInfo> OnListPage(std::string& body) = 0;
  virtual void EndRelist() = 0;
  // One watch line; sets *rv to the event's resourceVersion. kOutOfRange for 410 ERROR
  // events, InvalidArgument for undecodable lines (both → relist).
  virtual Status OnWatchLine(std::string_view line, std::string* rv) = 0;
  // A LIST failed (the loop logs it and retries with backoff).
  virtual void OnListError(const Status& s) { (void)s; }
  // For an optional type whose LIST is refused for good (no permission, not served): counts as
  // synced so that waiting for caches does not wait for it; the loop keeps retrying.
  void MarkSyncedWithoutList() { synced_.store(true); }

  InformerStats stats_;
  Logger log_;

 private:
  void Run(std::stop_token stop);
  Status ListAll(std::stop_token stop);
  k8s::WatchOptions NextWatchOptions(std::uint64_t& rng);
  Status WatchOnce(const k8s::WatchOptions& wo, std::stop_token stop, Status* line_status);

  k8s::RestClient& client_;
  k8s::ResourceType type_;
  Clock& clock_;
  InformerOptions options_;
  std::atomic<bool> synced_{false};
  mutable std::mutex rv_mu_;
  std::string rv_;
  std::jthread thread_;
};

template <typename T>
struct EventHandlers {
  std::function<void(const T& obj)> on_add;
  std::function<void(const T& old_obj, const T& new_obj)> on_update;
  std::function<void(const T& obj)> on_delete;
};

// How T is decoded; defaults to k8s/codec.h (instantiated for every built-in projection).
template <typename T>
struct InformerCodec {
  std::function<StatusOr<k8s::ObjectList<T>>(std::string& body,
                                             const std::function<void(T&&)>& sink)>
      parse_list_into = [](std::string& body, const std::function<void(T&&)>& sink) {
        return k8s::ParseListInto<T>(body, sink);
      };
  std::function<StatusOr<k8s::WatchEvent<T>>(std::string_view line)> parse_event =
      [](std::string_view line) { return k8s::ParseWatchEvent<T>(line, /*padded=*/true); };
};

// T must have `k8s::ObjectMeta meta`.
template <typename T>
class Informer final : public InformerCore {
 public:
  using Ptr = std::shared_ptr<const T>;

  Informer(k8s::RestClient& client, k8s::ResourceType type, Clock& clock,
           InformerOptions options = {}, InformerCodec<T> codec = {})
      : InformerCore(client, std::move(type), clock, std::move(options)),
        codec_(std::move(codec)) {}
  ~Informer() override { Stop(); }

  void AddEventHandler(EventHandlers<T> h) {
    std::scoped_lock lock(handlers_mu_);
    handlers_.push_back(std::move(h));
  }

  // Cache reads (any thread). Objects are immutable snapshots.
  Ptr Get(std::string_view ns, std::string_view name) const {
    std::string key = ns.empty() ? std::string(name) : std::string(ns) + "/" + std::string(name);
    return GetByKey(key);
  }
  Ptr GetByKey(const std::string& key) const {
    std::shared_lock lock(mu_);
    auto it = items_.find(key);
    return it == items_.end() ? nullptr : it->second;
  }
  std::vector<Ptr> List() const {
    std::shared_lock lock(mu_);
    std::vector<Ptr> out;
    out.reserve(items_.size());
    for (const auto& [k, v] : items_) out.push_back(v);
    return out;
  }
  std::vector<std::string> ListKeys() const {
    std::shared_lock lock(mu_);
    std::vector<std::string> out;
    out.reserve(items_.size());
    for (const auto& [k, v] : items_) out.push_back(k);
    return out;
  }
  // Calls fn under a shared lock: keep it short, do not call back into the informer's writers.
  void ForEach(const std::function<void(const T&)>& fn) const {
    std::shared_lock lock(mu_);
    for (const auto& [k, v] : items_) fn(*v);
  }
  std::size_t Size() const {
    std::shared_lock lock(mu_);
    return items_.size();
  }

 protected:
  void BeginRelist() override { seen_.clear(); }
  StatusOr<k8s::ListPageInfo> OnListPage(std::string& body) override {
    ForgetLookup();
    k8s::PreviousLabels hint(&CachedLabels, this);
    auto sink = [this](T&& obj) { Upsert(std::move(obj), /*from_list=*/true); };
    std::function<void(T &&)> fn = sink;
    auto list = codec_.parse_list_into(body, fn);
    if (!list.ok()) return list.status();
    return k8s::ListPageInfo{list->resource_version, list->continue_token};
  }
  void EndRelist() override {
    ForgetLookup();
    std::vector<Ptr> gone;
    {
      std::unique_lock lock(mu_);
      for (auto it = items_.begin(); it != items_.end();) {
        if (!seen_.count(it->first)) {
          gone.push_back(it->second);
          it = items_.erase(it);
        } else {
          ++it;
        }
      }
    }
    seen_.clear();
    for (const auto& g : gone) Dispatch(nullptr, nullptr, g.get());
  }
  Status OnWatchLine(std::string_view line, std::string* rv) override {
    ForgetLookup();
    auto ev = [&] {
      k8s::PreviousLabels hint(&CachedLabels, this);
      return codec_.parse_event(line);
    }();
    if (!ev.ok()) return ev.status();
    switch (ev->type) {
      case k8s::WatchEventType::kError:
        return ev->error;
      case k8s::WatchEventType::kBookmark:
        *rv = ev->object.meta.resource_version;
        stats_.bookmarks.fetch_add(1, std::memory_order_relaxed);
        return OkStatus();
      case k8s::WatchEventType::kDeleted: {
        *rv = ev->object.meta.resource_version;
        ForgetLookup();  // the entry it found is erased below
        Ptr old;
        {
          std::unique_lock lock(mu_);
          auto it = items_.find(ev->object.meta.Key());
          if (it != items_.end()) {
            old = std::move(it->second);
            items_.erase(it);
          }
        }
        stats_.events.fetch_add(1, std::memory_order_relaxed);
        // Deliver the final state the server sent.
        Dispatch(nullptr, nullptr, &ev->object);
        return OkStatus();
      }
      default:
        *rv = ev->object.meta.resource_version;
        stats_.events.fetch_add(1, std::memory_order_relaxed);
        Upsert(std::move(ev->object), /*from_list=*/false);
        return OkStatus();
    }
  }

 private:
  void Upsert(T&& obj, bool from_list) {
    // The entry the decoder's label lookup found: replaced in place, no second map lookup.
    Ptr* slot = TakeLookedUpSlot(obj.meta);
    // Only this thread writes items_: what it reads here is still there below.
    Ptr prev = slot ? *slot : GetByKey(obj.meta.Key());
    if (prev) ShareUnchangedMaps(*prev, obj);
    auto fresh = std::make_shared<const T>(std::move(obj));
    Ptr old;
    {
      std::unique_lock lock(mu_);
      if (slot) {
        old = std::exchange(*slot, fresh);
      } else {
        auto [it, inserted] = items_.try_emplace(fresh->meta.Key(), fresh);
        if (!inserted) old = std::exchange(it->second, fresh);
      }
    }
    if (from_list) seen_.insert(fresh->meta.Key());
    // A relist that finds an unchanged object is not an update.
    if (old && old->meta.resource_version == fresh->meta.resource_version) return;
    Dispatch(fresh.get(), old.get(), nullptr);
  }
  // The labels of the cached version of an object being decoded (PreviousLabels): only this
  // thread replaces cached objects, so they stay alive until the decoded one is stored.
  // Where it found them is kept for Upsert (TakeLookedUpSlot).
  static const k8s::LabelMap* CachedLabels(const void* self, std::string_view ns,
                                           std::string_view name) {
    // `self` is this informer (OnWatchLine/OnListPage install it), which is not const.
    auto* inf = static_cast<Informer*>(const_cast<void*>(self));
    std::string& key = inf->looked_up_key_;
    key.assign(ns);
    if (!ns.empty()) key += '/';
    key += name;
    {
      std::shared_lock lock(inf->mu_);
      auto it = inf->items_.find(key);
      // Node-based map: the entry's address holds until this thread erases it.
      inf->looked_up_ = it == inf->items_.end() ? nullptr : &it->second;
    }
    return inf->looked_up_ ? &(*inf->looked_up_)->meta.labels : nullptr;
  }
  // The cache entry of `meta`'s object if CachedLabels found it while decoding, else null.
  Ptr* TakeLookedUpSlot(const k8s::ObjectMeta& meta) {
    Ptr* slot = std::exchange(looked_up_, nullptr);
    if (!slot) return nullptr;
    const std::string& k = looked_up_key_;
    const std::size_t ns = meta.namespace_.size();
    const bool same = ns == 0 ? k == meta.name
                              : k.size() == ns + 1 + meta.name.size() &&
                                    k.starts_with(meta.namespace_) && k[ns] == '/' &&
                                    std::string_view(k).substr(ns + 1) == meta.name;
    return same ? slot : nullptr;
  }
  // Also drops what a decode that failed after its lookup left behind.
  void ForgetLookup() { looked_up_ = nullptr; }
  // Labels and annotations that did not change keep the cached object's arrays (LabelMap
  // copies share them), so an update does not add a copy per node for the fleet index.
  static void ShareUnchangedMaps(const T& prev, T& obj) {
    if (prev.meta.labels == obj.meta.labels) obj.meta.labels = prev.meta.labels;
    if (prev.meta.annotations == obj.meta.annotations) obj.meta.annotations = prev.meta.annotations;
  }
  // (added) new, (updated) new+old, (deleted) gone.
  void Dispatch(const T* now, const T* old, const T* gone) {
    std::scoped_lock lock(handlers_mu_);
    for (const auto& h : handlers_) {
      if (gone) {
        if (h.on_delete) h.on_delete(*gone);
      } else if (old) {
        if (h.on_update) h.on_update(*old, *now);
      } else if (h.on_add) {
        h.on_add(*now);
      }
    }
  }

  InformerCodec<T> codec_;
  mutable std::shared_mutex mu_;
  std::unordered_map<std::string, Ptr> items_;
  std::unordered_set<std::string> seen_;  // keys seen during the current relist
  // The last CachedLabels lookup (informer thread only; see TakeLookedUpSlot).
  std::string looked_up_key_;
  Ptr* looked_up_ = nullptr;
  std::mutex handlers_mu_;
  std::vector<EventHandlers<T>> handlers_;
};

}  // namespace gg::runtime
