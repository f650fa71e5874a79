// Store implementation: ordered maps per resource, history window, watcher fan-out.
#include "sim/store.h"

#include <algorithm>
#include <unordered_set>

namespace gg::sim {

const char* EventTypeName(EventType t) {
  switch (t) {
    case EventType::kAdded:
      return "ADDED";
    case EventType::kModified:
      return "MODIFIED";
    case EventType::kDeleted:
      return "DELETED";
    case EventType::kBookmark:
      return "BOOKMARK";
    case EventType::kError:
      return "ERROR";
  }
  return "ERROR";
}

namespace {

// Looks strings up by view: every object write interns all its label keys and values, and a
// std::string per lookup was an allocation each (4 % of the sim's CPU per node write).
struct ViewHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};

const std::string* Intern(std::string_view s) {
  static std::mutex mu;
  static std::unordered_set<std::string, ViewHash, std::equal_to<>>* pool =
      new std::unordered_set<std::string, ViewHash, std::equal_to<>>();
  std::scoped_lock lock(mu);
  auto it = pool->find(s);
  if (it == pool->end()) it = pool->emplace(s).first;
  return &*it;  // unordered_set nodes never move
}

}  // namespace

Labels::Labels(const FieldMap& m) {
  kv_.reserve(m.size());
  for (const auto& [k, v] : m) kv_.emplace_back(Intern(k), Intern(v));
  std::sort(kv_.begin(), kv_.end(),
            [](const auto& a, const auto& b) { return *a.first < *b.first; });
}

const std::string* Labels::Find(std::string_view key) const {
  auto it = std::lower_bound(kv_.begin(), kv_.end(), key,
                             [](const auto& p, std::string_view k) { return *p.first < k; });
  return it != kv_.end() && *it->first == key ? it->second : nullptr;
}

bool MatchesLabels(const LabelSelector& s, const Labels& l) {
  if (s.Empty()) return true;
  return s.Matches([&](std::string_view k) { return l.Find(k); });
}

bool Watcher::Matches(const Obj& o) const {
  if (!ns_.empty() && o.ns != ns_) return false;
  return MatchesLabels(ls_, o.labels) && fs_.Matches(o.fields);
}

void Watcher::Push(const WatchEvent& ev, std::size_t limit) {
  // Runs under the store lock for every watcher of every write: filter before copying.
  if (ev.storage != storage_) return;
  bool now = ev.obj && Matches(*ev.obj);
  // History entries drop `prev`; then assume the selector result did not change.
  bool before = ev.prev ? Matches(*ev.prev) : now;
  EventType type = ev.type;
  if (type == EventType::kDeleted) {
    if (!before && !now) return;
  } else if (type == EventType::kModified) {
    if (!now && !before) return;
    if (now && !before) type = EventType::kAdded;
    if (!now && before) type = EventType::kDeleted;
  } else if (!now) {
    return;
  }
  bool wake = false;
  {
    std::scoped_lock lock(mu_);
    if (closed_) return;
    if (q_.size() >= limit) {
      overflow_ = true;
      closed_ = true;
      q_.clear();
      wake = true;
    } else {
      // Only a reader waiting on an empty queue needs a wakeup; one already woken drains
      // everything queued meanwhile. A wakeup per event per watcher cost more than the event.
      wake = q_.empty();
      WatchEvent& e = q_.emplace_back();
      e.rv = ev.rv;
      e.type = type;
      e.storage = ev.storage;
      e.obj = ev.obj;
      e.prev = ev.prev;
    }
  }
  if (wake) cv_.notify_one();
}

void Watcher::Close() {
  {
    std::scoped_lock lock(mu_);
    closed_ = true;
  }
  cv_.notify_all();
}

bool Watcher::Pop(std::deque<WatchEvent>& out, std::chrono::milliseconds wait) {
  std::unique_lock lock(mu_);
  if (q_.empty() && !closed_) cv_.wait_for(lock, wait, [&] { return !q_.empty() || closed_; });
  if (!q_.empty()) {
    out.swap(q_);
    if (!q_.empty()) {  // `out` was not empty: append instead
      for (auto& e : q_) out.push_back(std::move(e));
      q_.clear();
    }
    return true;
  }
  return !closed_;
}

bool Watcher::overflowed() const {
  std::scoped_lock lock(mu_);
  return overflow_;
}

bool Watcher::QueueEmpty() const {
  std::scoped_lock lock(mu_);
  return q_.empty();
}

std::uint64_t Store::rv() const {
  std::scoped_lock lock(mu_);
  return rv_;
}

ObjPtr Store::GetLocked(const std::string& storage, const std::string& key) const {
  auto it = data_.find(storage);
  if (it == data_.end()) return nullptr;
  auto jt = it->second.find(key);
  return jt == it->second.end() ? nullptr : jt->second;
}

void Store::PutLocked(const std::string& storage, const std::string& key, ObjPtr obj) {
  auto& m = data_[storage];
  WatchEvent e;
  e.rv = obj->rv;
  e.storage = storage;
  auto it = m.find(key);
  if (it == m.end()) {
    e.type = EventType::kAdded;
    m.emplace(key, obj);
  } else {
    e.type = EventType::kModified;
    e.prev = it->second;
    it->second = obj;
  }
  e.obj = std::move(obj);
  rv_ = e.rv;
  FanOutLocked(e);
}

void Store::RemoveLocked(const std::string& storage, const std::string& key, ObjPtr last) {
  auto& m = data_[storage];
  auto it = m.find(key);
  WatchEvent e;
  e.rv = last->rv;
  e.type = EventType::kDeleted;
  e.storage = storage;
  if (it != m.end()) {
    e.prev = it->second;
    m.erase(it);
  }
  e.obj = std::move(last);
  rv_ = e.rv;
  FanOutLocked(e);
}

void Store::FanOutLocked(const WatchEvent& e) {
  for (auto& w : watchers_) w->Push(e, queue_limit_);
  auto [it, added] = history_.try_emplace(e.storage);
  History& h = it->second;
  if (added) h.compacted_rv = compacted_floor_;
  h.events.push_back(e);
  // Keep the history lean: the previous state is only needed for live fan-out.
  h.events.back().prev = nullptr;
  // A full window drops its oldest event: the version it held is freed once no newer state
  // or watcher holds it, so a fleet rewritten end to end reuses that memory.
  while (h.events.size() > history_limit_) {
    h.compacted_rv = h.events.front().rv;
    h.events.pop_front();
  }
}

std::uint64_t Store::CompactedRvLocked(const std::string& storage) const {
  auto it = history_.find(storage);
  return it == history_.end() ? compacted_floor_ : it->second.compacted_rv;
}

void Store::ForEachLocked(
    const std::string& storage, const std::string& ns, const std::string& after,
    const std::function<bool(const std::string& key, const ObjPtr&)>& fn) const {
  auto it = data_.find(storage);
  if (it == data_.end()) return;
  const auto& m = it->second;
  std::string prefix = ns.empty() ? std::string() : ns + "/";
  auto jt = after.empty() ? m.lower_bound(prefix) : m.upper_bound(after);
  for (; jt != m.end(); ++jt) {
    if (!prefix.empty() && jt->first.compare(0, prefix.size(), prefix) != 0) break;
    if (!fn(jt->first, jt->second)) break;
  }
}

std::size_t Store::CountLocked(const std::string& storage) const {
  auto it = data_.find(storage);
  return it == data_.end() ? 0 : it->second.size();
}

std::size_t Store::TotalObjects() const {
  std::scoped_lock lock(mu_);
  std::size_t n = 0;
  for (const auto& [k, m] : data_) n += m.size();
  return n;
}

std::map<std::string, std::size_t> Store::Counts() const {
  std::scoped_lock lock(mu_);
  std::map<std::string, std::size_t> out;
  for (const auto& [k, m] : data_) out[k] = m.size();
  return out;
}

Store::WatchStart Store::StartWatch(const std::string& storage, const std::string& ns,
                                    LabelSelector ls, FieldSelector fs,
                                    std::optional<std::uint64_t> from_rv) {
  WatchStart ws;
  auto w = std::make_shared<Watcher>(storage, ns, std::move(ls), std::move(fs));
  std::scoped_lock lock(mu_);
  const std::uint64_t compacted = CompactedRvLocked(storage);
  if (from_rv && *from_rv < compacted) {
    ws.too_old_rv = *from_rv;
    ws.oldest_rv = compacted + 1;
    return ws;
  }
  ws.start_rv = rv_;
  if (!from_rv) {
    ForEachLocked(storage, ns, "", [&](const std::string&, const ObjPtr& o) {
      if (w->Matches(*o)) {
        WatchEvent e;
        e.rv = o->rv;
        e.type = EventType::kAdded;
        e.storage = storage;
        e.obj = o;
        w->q_.push_back(std::move(e));
      }
      return true;
    });
  } else if (auto h = history_.find(storage); h != history_.end()) {
    const auto& events = h->second.events;
    auto first = std::upper_bound(events.begin(), events.end(), *from_rv,
                                  [](std::uint64_t rv, const WatchEvent& e) { return rv < e.rv; });
    for (auto e = first; e != events.end(); ++e) w->Push(*e, SIZE_MAX);
  }
  ws.initial_count = from_rv ? 0 : w->q_.size();
  watchers_.push_back(w);
  ws.watcher = std::move(w);
  return ws;
}

void Store::StopWatch(const std::shared_ptr<Watcher>& w) {
  std::scoped_lock lock(mu_);
  watchers_.remove(w);
}

void Store::CloseAllWatches() {
  std::scoped_lock lock(mu_);
  for (auto& w : watchers_) w->Close();
}

std::size_t Store::WatchCount() const {
  std::scoped_lock lock(mu_);
  return watchers_.size();
}

bool Store::ChangedSinceLocked(const std::string& storage, std::uint64_t rv) const {
  if (rv < CompactedRvLocked(storage)) return true;
  auto h = history_.find(storage);
  return h != history_.end() && !h->second.events.empty() && h->second.events.back().rv > rv;
}

void Store::Compact() {
  std::scoped_lock lock(mu_);
  for (auto& [storage, h] : history_) {
    h.events.clear();
    h.compacted_rv = rv_;
  }
  compacted_floor_ = rv_;
}

}  // namespace gg::sim
