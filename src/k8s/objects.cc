// Projection helpers: LabelMap storage, ownership, label selector matching.
#include "k8s/objects.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_set>

namespace gg::k8s {

// "key\0value", interned. refs counts the LabelMaps holding it; the table owns none.
struct LabelMap::Interned {
  std::atomic<std::uint32_t> refs{1};
  std::uint32_t key_len = 0;
  std::uint32_t size = 0;  // key + '\0' + value
  std::size_t hash = 0;
  // Text follows the header (one allocation per pair).
  const char* data() const { return reinterpret_cast<const char*>(this + 1); }
  std::string_view text() const { return {data(), size}; }
  std::string_view key() const { return {data(), key_len}; }
  std::string_view value() const { return {data() + key_len + 1, size - key_len - 1}; }
};

namespace {

using Interned = LabelMap::Interned;

// Sharded so informer threads parsing at once rarely meet on one mutex.
class InternTable {
 public:
  Interned* Intern(std::string_view text, std::uint32_t key_len) {
    const std::size_t h = std::hash<std::string_view>{}(text);
    Shard& sh = shards_[h % kShards];
    std::scoped_lock lock(sh.mu);
    auto it = sh.set.find(Key{text, h});
    if (it != sh.set.end()) {
      (*it)->refs.fetch_add(1, std::memory_order_relaxed);
      return *it;
    }
    void* mem = ::operator new(sizeof(Interned) + text.size());
    auto* e = new (mem) Interned;
    e->key_len = key_len;
    e->size = static_cast<std::uint32_t>(text.size());
    e->hash = h;
    std::memcpy(reinterpret_cast<char*>(e + 1), text.data(), text.size());
    sh.set.insert(e);
    entries_.fetch_add(1, std::memory_order_relaxed);
    bytes_.fetch_add(sizeof(Interned) + text.size(), std::memory_order_relaxed);
    return e;
  }

  static void Ref(Interned* e) { e->refs.fetch_add(1, std::memory_order_relaxed); }

  void Unref(Interned* e) {
    // Above one reference, drop it without the lock. The last one is dropped under the
    // shard lock, where Intern takes new references, so a pair is never revived after it
    // was found unreferenced and freed.
    std::uint32_t r = e->refs.load(std::memory_order_relaxed);
    while (r > 1) {
      if (e->refs.compare_exchange_weak(r, r - 1, std::memory_order_acq_rel)) return;
    }
    Shard& sh = shards_[e->hash % kShards];
    std::scoped_lock lock(sh.mu);
    if (e->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    sh.set.erase(e);
    entries_.fetch_sub(1, std::memory_order_relaxed);
    bytes_.fetch_sub(sizeof(Interned) + e->size, std::memory_order_relaxed);
    e->~Interned();
    ::operator delete(e);
  }

  std::size_t Entries() const { return entries_.load(); }
  std::size_t Bytes() const { return bytes_.load(); }

 private:
  struct Key {
    std::string_view text;
    std::size_t hash;
  };
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(const Interned* e) const { return e->hash; }
    std::size_t operator()(const Key& k) const { return k.hash; }
  };
  struct Eq {
    using is_transparent = void;
    bool operator()(const Interned* a, const Interned* b) const { return a == b; }
    bool operator()(const Key& k, const Interned* e) const { return k.text == e->text(); }
    bool operator()(const Interned* e, const Key& k) const { return k.text == e->text(); }
  };
  static constexpr std::size_t kShards = 16;
  struct Shard {
    std::mutex mu;
    std::unordered_set<Interned*, Hash, Eq> set;
  };
  Shard shards_[kShards];
  std::atomic<std::size_t> entries_{0}, bytes_{0};
};

// Never destroyed: LabelMaps in static storage may outlive any destruction order.
InternTable& Table() {
  static InternTable* t = new InternTable;
  return *t;
}

}  // namespace

struct LabelMap::Rep {
  std::atomic<std::uint32_t> refs{1};
  std::vector<Interned*> entries;
};

namespace {
const std::vector<LabelMap::Interned*> kNoEntries;
}  // namespace

LabelMap::LabelMap(const LabelMap& o) : rep_(o.rep_) {
  if (rep_) rep_->refs.fetch_add(1, std::memory_order_relaxed);
}

LabelMap& LabelMap::operator=(const LabelMap& o) {
  if (rep_ == o.rep_) return *this;
  if (o.rep_) o.rep_->refs.fetch_add(1, std::memory_order_relaxed);
  clear();
  rep_ = o.rep_;
  return *this;
}

LabelMap& LabelMap::operator=(LabelMap&& o) noexcept {
  if (this == &o) return *this;
  clear();
  rep_ = o.rep_;
  o.rep_ = nullptr;
  return *this;
}

LabelMap::~LabelMap() { clear(); }

void LabelMap::clear() {
  Rep* r = rep_;
  rep_ = nullptr;
  if (!r || r->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  for (Interned* e : r->entries) Table().Unref(e);
  delete r;
}

LabelMap::Rep* LabelMap::Unique() {
  if (!rep_) {
    rep_ = new Rep;
  } else if (rep_->refs.load(std::memory_order_acquire) != 1) {
    auto* copy = new Rep;
    copy->entries = rep_->entries;
    for (Interned* e : copy->entries) InternTable::Ref(e);
    clear();
    rep_ = copy;
  }
  return rep_;
}

std::size_t LabelMap::size() const { return rep_ ? rep_->entries.size() : 0; }

std::size_t LabelMap::MemoryBytes() const {
  return sizeof(*this) + (rep_ ? sizeof(Rep) + rep_->entries.capacity() * sizeof(void*) : 0);
}

void LabelMap::ShrinkToFit() {
  if (rep_ && rep_->entries.capacity() != rep_->entries.size()) Unique()->entries.shrink_to_fit();
}

std::size_t LabelMap::InternedEntries() { return Table().Entries(); }
std::size_t LabelMap::InternedBytes() { return Table().Bytes(); }

LabelMap::LabelMap(std::initializer_list<std::pair<std::string_view, std::string_view>> init) {
  for (const auto& [k, v] : init) Set(k, v);
}

std::optional<std::string_view> LabelMap::Get(std::string_view key) const {
  for (const Interned* e : rep_ ? rep_->entries : kNoEntries) {
    if (e->key() == key) return e->value();
  }
  return std::nullopt;
}

namespace {
// The interned "key\0value" pair, or null when either contains a NUL.
Interned* InternPair(std::string_view key, std::string_view value) {
  if (key.find('\0') != std::string_view::npos || value.find('\0') != std::string_view::npos) {
    return nullptr;
  }
  // Label keys are ≤ 317 bytes and values ≤ 63, so most pairs fit the stack buffer.
  char small[512];
  std::string large;
  const std::size_t n = key.size() + 1 + value.size();
  char* buf = small;
  if (n > sizeof(small)) {
    large.resize(n);
    buf = large.data();
  }
  std::memcpy(buf, key.data(), key.size());
  buf[key.size()] = '\0';
  std::memcpy(buf + key.size() + 1, value.data(), value.size());
  return Table().Intern({buf, n}, static_cast<std::uint32_t>(key.size()));
}
}  // namespace

bool LabelMap::Append(std::string_view key, std::string_view value) {
  Interned* e = InternPair(key, value);
  if (!e) return false;
  Unique()->entries.push_back(e);
  return true;
}

bool LabelMap::AppendLike(const LabelMap* prev, std::string_view key, std::string_view value) {
  if (prev && prev->rep_ && prev != this) {
    // The same position, or one off when a key was added or removed before this one.
    const auto& pe = prev->rep_->entries;
    const std::size_t i = size();
    for (std::size_t j : {i, i - 1, i + 1}) {
      if (j >= pe.size()) continue;  // i - 1 wraps around when i == 0
      Interned* e = pe[j];
      if (e->key() == key && e->value() == value) {
        InternTable::Ref(e);
        Unique()->entries.push_back(e);
        return true;
      }
    }
  }
  return Append(key, value);
}

void LabelMap::FinishAppend() {
  if (!rep_) return;
  auto& entries = Unique()->entries;
  if (entries.size() > 1) {
    // Sort positions by key (stable: equal keys stay in arrival order), keep each key's last.
    std::vector<std::uint32_t> order(entries.size());
    for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
      return entries[a]->key() < entries[b]->key();
    });
    bool dropped = false;
    for (std::size_t i = 0; i + 1 < order.size(); ++i) {
      if (entries[order[i]]->key() != entries[order[i + 1]]->key()) continue;
      Table().Unref(entries[order[i]]);
      entries[order[i]] = nullptr;
      dropped = true;
    }
    if (dropped) std::erase(entries, nullptr);
  }
  if (entries.empty()) {
    clear();
    return;
  }
  ShrinkToFit();
}

bool LabelMap::Set(std::string_view key, std::string_view value) {
  Interned* e = InternPair(key, value);
  if (!e) return false;
  for (Interned*& cur : Unique()->entries) {
    if (cur->key() == key) {
      Table().Unref(cur);
      cur = e;
      return true;
    }
  }
  rep_->entries.push_back(e);
  return true;
}

bool LabelMap::Erase(std::string_view key) {
  if (!Get(key)) return false;
  auto& entries = Unique()->entries;
  for (auto it = entries.begin(); it != entries.end(); ++it) {
    if ((*it)->key() == key) {
      Table().Unref(*it);
      entries.erase(it);
      break;
    }
  }
  if (entries.empty()) clear();
  return true;
}

void LabelMap::ForEach(const std::function<void(std::string_view, std::string_view)>& fn) const {
  for (const Interned* e : rep_ ? rep_->entries : kNoEntries) fn(e->key(), e->value());
}

std::map<std::string, std::string> LabelMap::ToMap() const {
  std::map<std::string, std::string> out;
  ForEach([&](std::string_view k, std::string_view v) { out.emplace(k, v); });
  return out;
}

bool operator==(const LabelMap& a, const LabelMap& b) {
  // Interned: equal pairs are the same pointer. Usually in the same order too.
  if (a.rep_ == b.rep_) return true;
  if (a.size() != b.size()) return false;
  if (a.size() == 0) return true;
  const auto& ae = a.rep_->entries;
  const auto& be = b.rep_->entries;
  if (ae == be) return true;
  for (const auto* e : ae) {
    if (std::find(be.begin(), be.end(), e) == be.end()) return false;
  }
  return true;
}

const OwnerReference* ObjectMeta::Controller() const {
  for (const auto& r : owner_references) {
    if (r.controller) return &r;
  }
  return nullptr;
}

std::string ObjectMeta::Key() const {
  if (namespace_.empty()) return name;
  std::string k;
  k.reserve(namespace_.size() + 1 + name.size());
  k += namespace_;
  k += '/';
  k += name;
  return k;
}

const NodeCondition* Node::FindCondition(std::string_view type) const {
  for (const auto& c : conditions) {
    if (c.type == type) return &c;
  }
  return nullptr;
}

const Taint* Node::FindTaint(std::string_view key) const {
  for (const auto& t : taints) {
    if (t.key == key) return &t;
  }
  return nullptr;
}

std::string_view Pod::ControllerKind() const {
  const OwnerReference* c = meta.Controller();
  return c ? std::string_view(c->kind) : std::string_view();
}

std::string_view WatchEventTypeName(WatchEventType t) {
  switch (t) {
    case WatchEventType::kAdded:
      return "ADDED";
    case WatchEventType::kModified:
      return "MODIFIED";
    case WatchEventType::kDeleted:
      return "DELETED";
    case WatchEventType::kBookmark:
      return "BOOKMARK";
    case WatchEventType::kError:
      return "ERROR";
  }
  return "UNKNOWN";
}

std::uint64_t ResourceVersionNumber(std::string_view rv) {
  std::uint64_t v = 0;
  auto [p, ec] = std::from_chars(rv.data(), rv.data() + rv.size(), v);
  return ec == std::errc() && p == rv.data() + rv.size() ? v : 0;
}

}  // namespace gg::k8s
