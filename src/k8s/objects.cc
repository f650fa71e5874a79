// Projection helpers: LabelMap storage, ownership, label selector matching.
#include "k8s/objects.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <ostream>
#include <unordered_map>
#include <unordered_set>

namespace gg::k8s {

// "key\0value", interned. refs counts the LabelMaps holding it; the table owns none. A 16-byte
// header: a node's own pair ("kubernetes.io/hostname\0<name>") then fits a 64-byte chunk.
struct LabelMap::Interned {
  std::atomic<std::uint32_t> refs{1};
  std::uint32_t size = 0;     // key + '\0' + value
  std::uint16_t key_len = 0;  // label and annotation keys are at most 317 bytes
  // Set once the pair is held by many maps at once; from then on it goes into shared sets for
  // as long as it lives (a node's own pair never does, whatever order maps are built in).
  std::atomic<bool> common{false};
  std::uint32_t hash = 0;
  // Text follows the header (one allocation per pair).
  const char* data() const { return reinterpret_cast<const char*>(this + 1); }
  std::string_view text() const { return {data(), size}; }
  std::string_view key() const { return {data(), key_len}; }
  std::string_view value() const { return {data() + key_len + 1, size - key_len - 1}; }
};

namespace {

using Interned = LabelMap::Interned;

// Drops one of several references without a lock; false when `refs` holds the last one, which
// the caller must drop under the lock where new references are taken (so an object is never
// revived after it was found unreferenced and freed).
bool DropUnlessLast(std::atomic<std::uint32_t>& refs) {
  std::uint32_t r = refs.load(std::memory_order_relaxed);
  while (r > 1) {
    if (refs.compare_exchange_weak(r, r - 1, std::memory_order_acq_rel)) return true;
  }
  return false;
}

// Sharded so informer threads parsing at once rarely meet on one mutex.
class InternTable {
 public:
  Interned* Intern(std::string_view text, std::uint16_t key_len) {
    const auto h = static_cast<std::uint32_t>(std::hash<std::string_view>{}(text));
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
    if (DropUnlessLast(e->refs)) return;
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

// A map's array: its own pairs and the shared set it extends, each sorted by key, their keys
// disjoint. A shared set is a Rep too (base null), interned by content in SetTable. 16 bytes
// of header, so a node whose labels are a shared set plus its hostname costs 24 bytes here.
struct LabelMap::Rep {
  std::atomic<std::uint32_t> refs{1};
  std::uint32_t n = 0;  // own entries, stored after the header (each holds one reference)
  Rep* base = nullptr;  // the shared set (holds one reference), or null
  Interned** data() { return reinterpret_cast<Interned**>(this + 1); }
  std::span<Interned* const> own() const {
    return {reinterpret_cast<Interned* const*>(this + 1), n};
  }
  std::span<Interned* const> shared() const {
    return base ? base->own() : std::span<Interned* const>();
  }
};

// The growing list between Append and FinishAppend, and AppendLike's walk over `prev`.
struct LabelMap::Builder {
  std::vector<Interned*> entries;  // in arrival order, one reference each unless lent
  // Per entry, 1 when AppendLike took it from prev's shared set without a reference of its
  // own: prev keeps it alive until FinishAppend. When the finished map takes over a shared
  // set that holds it, it needs no reference at all (a watch event that leaves the fleet-wide
  // labels alone then touches none of their counts); any other outcome first gives it its
  // reference (Settle).
  std::vector<std::uint8_t> lent;
  const Rep* prev = nullptr;
  std::uint32_t prev_own = 0, prev_shared = 0;
  void Push(Interned* e, bool is_lent) {
    entries.push_back(e);
    lent.push_back(is_lent ? 1 : 0);
  }
  void Settle();
};

void LabelMap::Builder::Settle() {
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (lent[i]) InternTable::Ref(entries[i]);
    lent[i] = 0;
  }
}

namespace {

using Rep = LabelMap::Rep;
static_assert(sizeof(Rep) == 16);
static_assert(sizeof(Interned) == 16);

// A pair held by at least this many maps at once is a fleet-wide one (the builder's reference
// counts; a node's own pair is held by at most its cached version and the one being decoded).
constexpr std::uint32_t kCommonRefs = 4;
// Fewer common pairs than this stay in the map's own array (a shared set costs a look-up).
constexpr std::size_t kMinShared = 8;

Rep* NewRep(std::span<Interned* const> own, Rep* base) {
  void* mem = ::operator new(sizeof(Rep) + own.size() * sizeof(Interned*));
  auto* r = new (mem) Rep;
  r->n = static_cast<std::uint32_t>(own.size());
  r->base = base;
  std::copy(own.begin(), own.end(), r->data());
  return r;
}

void FreeRep(Rep* r) {
  r->~Rep();
  ::operator delete(r);
}

std::size_t RepBytes(const Rep* r) { return sizeof(Rep) + r->n * sizeof(Interned*); }

std::size_t HashOf(std::span<Interned* const> pairs) {
  std::size_t h = pairs.size();
  for (const Interned* e : pairs) h = (h ^ e->hash) * 0x100000001b3ULL;
  return h;
}

// The shared sets, interned by their pairs (the same pointers in the same order).
class SetTable {
 public:
  // `sorted` holds one reference per pair; they move into the set, or are dropped when an
  // equal set exists. The caller gets one reference to the set.
  Rep* Intern(std::span<Interned* const> sorted) {
    const std::size_t h = HashOf(sorted);
    lookups_.fetch_add(1, std::memory_order_relaxed);
    std::scoped_lock lock(mu_);
    auto it = sets_.find(Key{sorted, h});
    if (it != sets_.end()) {
      (*it)->refs.fetch_add(1, std::memory_order_relaxed);
      for (Interned* e : sorted) Table().Unref(e);
      return *it;
    }
    Rep* r = NewRep(sorted, nullptr);
    sets_.insert(r);
    bytes_.fetch_add(RepBytes(r), std::memory_order_relaxed);
    return r;
  }

  // As InternTable::Unref: the last reference is dropped under the lock Intern takes.
  void Release(Rep* r) {
    if (DropUnlessLast(r->refs)) return;
    std::scoped_lock lock(mu_);
    if (r->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    sets_.erase(r);
    bytes_.fetch_sub(RepBytes(r), std::memory_order_relaxed);
    for (Interned* e : r->own()) Table().Unref(e);
    FreeRep(r);
  }

  std::size_t Bytes() const { return bytes_.load(); }
  std::size_t Lookups() const { return lookups_.load(std::memory_order_relaxed); }

 private:
  struct Key {
    std::span<Interned* const> pairs;
    std::size_t hash;
  };
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(const Rep* r) const { return HashOf(r->own()); }
    std::size_t operator()(const Key& k) const { return k.hash; }
  };
  struct Eq {
    using is_transparent = void;
    static bool Same(std::span<Interned* const> a, std::span<Interned* const> b) {
      return std::equal(a.begin(), a.end(), b.begin(), b.end());
    }
    bool operator()(const Rep* a, const Rep* b) const { return a == b; }
    bool operator()(const Key& k, const Rep* r) const { return Same(k.pairs, r->own()); }
    bool operator()(const Rep* r, const Key& k) const { return Same(k.pairs, r->own()); }
  };
  std::mutex mu_;
  std::unordered_set<Rep*, Hash, Eq> sets_;
  std::atomic<std::size_t> bytes_{0}, lookups_{0};
};

SetTable& Sets() {
  static SetTable* t = new SetTable;  // never destroyed, like Table()
  return *t;
}

void ReleaseRep(Rep* r) {
  if (r->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  for (Interned* e : r->own()) Table().Unref(e);
  if (r->base) Sets().Release(r->base);
  FreeRep(r);
}

bool KeyLess(const Interned* a, const Interned* b) { return a->key() < b->key(); }

// Calls fn(pair) over own and shared pairs merged in key order.
template <typename Fn>
void ForEachSorted(const Rep* r, Fn&& fn) {
  if (!r) return;
  auto own = r->own();
  auto shared = r->shared();
  std::size_t i = 0, j = 0;
  while (i < own.size() || j < shared.size()) {
    if (j == shared.size() || (i < own.size() && KeyLess(own[i], shared[j]))) {
      fn(own[i++]);
    } else {
      fn(shared[j++]);
    }
  }
}

// The map's pairs in key order, each with a new reference.
std::vector<Interned*> Flatten(const Rep* r) {
  std::vector<Interned*> out;
  out.reserve(r ? r->n + r->shared().size() + 1 : 1);
  ForEachSorted(r, [&](Interned* e) {
    InternTable::Ref(e);
    out.push_back(e);
  });
  return out;
}

const Interned* FindIn(std::span<Interned* const> sorted, std::string_view key) {
  auto it = std::lower_bound(sorted.begin(), sorted.end(), key,
                             [](const Interned* e, std::string_view k) { return e->key() < k; });
  return it != sorted.end() && (*it)->key() == key ? *it : nullptr;
}

// AppendLike's walk: moves *at past the keys below `key` in `sorted`; the pair there when it is
// key=value.
Interned* WalkTo(std::span<Interned* const> sorted, std::uint32_t* at, std::string_view key,
                 std::string_view value) {
  for (; *at < sorted.size(); ++*at) {
    Interned* e = sorted[*at];
    const int c = e->key().compare(key);  // one compare per step: keys mostly match
    if (c > 0) return nullptr;
    if (c == 0) {
      if (e->value() != value) return nullptr;
      ++*at;
      return e;
    }
  }
  return nullptr;
}

bool IsCommon(Interned* e) {
  if (e->common.load(std::memory_order_relaxed)) return true;
  if (e->refs.load(std::memory_order_relaxed) < kCommonRefs) return false;
  e->common.store(true, std::memory_order_relaxed);
  return true;
}

LabelMap::Builder* Untag(LabelMap::Rep* r) {
  return reinterpret_cast<LabelMap::Builder*>(reinterpret_cast<std::uintptr_t>(r) &
                                              ~std::uintptr_t{1});
}

LabelMap::Rep* Tag(LabelMap::Builder* b) {
  return reinterpret_cast<LabelMap::Rep*>(reinterpret_cast<std::uintptr_t>(b) | 1U);
}

// One spare builder per thread: decoding a watch event then allocates no list.
thread_local std::unique_ptr<LabelMap::Builder> spare_builder;

// Whether the builder's entries (sorted, keys unique) hold exactly the shared set `set`: every
// pair of it, and no other fleet-wide pair. Pointer compares only.
bool HoldsExactly(const LabelMap::Builder& b, const Rep* set) {
  const auto pairs = set->own();
  if (pairs.size() > b.entries.size()) return false;
  std::size_t j = 0;
  for (Interned* e : b.entries) {
    if (j < pairs.size() && e == pairs[j]) {
      ++j;
    } else if (IsCommon(e)) {
      return false;  // a fleet-wide pair the set lacks: intern the new set
    }
  }
  return j == pairs.size();
}

// The finished map for a builder that HoldsExactly(set): the set (one reference) plus the
// other entries. The set holds its pairs, so those give back the reference they took (lent
// ones took none); the others keep or take one. The caller drops the builder's entries.
LabelMap::Rep* TakeOverSet(LabelMap::Builder& b, Rep* set) {
  const auto pairs = set->own();
  thread_local std::vector<Interned*> own;
  own.clear();
  std::size_t j = 0;
  for (std::size_t i = 0; i < b.entries.size(); ++i) {
    Interned* e = b.entries[i];
    if (j < pairs.size() && e == pairs[j]) {
      ++j;
      if (!b.lent[i]) Table().Unref(e);  // never the last: the set holds one
    } else {
      if (b.lent[i]) InternTable::Ref(e);
      own.push_back(e);
    }
  }
  set->refs.fetch_add(1, std::memory_order_relaxed);
  return NewRep(own, set);
}

}  // namespace

LabelMap::LabelMap(const LabelMap& o) : rep_(o.rep_) {
  if (!rep_) return;
  if (o.Building()) {
    auto* b = new Builder;
    b->entries = Untag(o.rep_)->entries;
    for (Interned* e : b->entries) InternTable::Ref(e);
    b->lent.assign(b->entries.size(), 0);  // the copy holds a reference to each
    rep_ = Tag(b);
    return;
  }
  rep_->refs.fetch_add(1, std::memory_order_relaxed);
}

LabelMap& LabelMap::operator=(const LabelMap& o) {
  if (rep_ == o.rep_ && !Building()) return *this;
  LabelMap copy(o);
  std::swap(rep_, copy.rep_);
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
  if (!r) return;
  if ((reinterpret_cast<std::uintptr_t>(r) & 1U) == 0) {
    ReleaseRep(r);
    return;
  }
  std::unique_ptr<Builder> b(Untag(r));
  // Lent entries hold no reference (and the map they came from may be gone by now).
  for (std::size_t i = 0; i < b->entries.size(); ++i) {
    if (!b->lent[i]) Table().Unref(b->entries[i]);
  }
}

LabelMap::Builder* LabelMap::StartBuilding() {
  if (Building()) return Untag(rep_);
  std::unique_ptr<Builder> b = std::move(spare_builder);
  if (!b) b = std::make_unique<Builder>();
  b->entries = Flatten(rep_);  // what the map held stays, Append adds to it
  b->lent.assign(b->entries.size(), 0);
  b->prev = nullptr;
  b->prev_own = b->prev_shared = 0;
  clear();
  rep_ = Tag(b.release());
  return Untag(rep_);
}

void LabelMap::Adopt(std::span<Interned* const> sorted) {
  thread_local std::vector<Interned*> own, shared;
  own.clear();
  shared.clear();
  std::size_t common = 0;
  for (Interned* e : sorted) common += IsCommon(e) ? 1 : 0;
  Rep* base = nullptr;
  if (common >= kMinShared) {
    for (Interned* e : sorted)
      (e->common.load(std::memory_order_relaxed) ? shared : own).push_back(e);
    base = Sets().Intern(shared);
  } else {
    own.assign(sorted.begin(), sorted.end());
  }
  Rep* r = base || !own.empty() ? NewRep(own, base) : nullptr;
  clear();
  rep_ = r;
}

std::size_t LabelMap::size() const {
  if (Building()) return Untag(rep_)->entries.size();
  return rep_ ? rep_->n + rep_->shared().size() : 0;
}

std::size_t LabelMap::SharedSize() const { return rep_ && !Building() ? rep_->shared().size() : 0; }

bool LabelMap::SameSharedSet(const LabelMap& o) const {
  if (!rep_ || !o.rep_ || Building() || o.Building()) return false;
  return rep_->base && rep_->base == o.rep_->base;
}

std::size_t LabelMap::MemoryBytes() const {
  std::size_t b = sizeof(*this);
  if (!rep_ || Building()) return b;
  b += RepBytes(rep_);
  if (rep_->base) {
    const std::uint32_t holders = rep_->base->refs.load(std::memory_order_relaxed);
    b += RepBytes(rep_->base) / std::max<std::uint32_t>(holders, 1);
  }
  return b;
}

std::size_t LabelMap::InternedEntries() { return Table().Entries(); }
std::size_t LabelMap::InternedBytes() { return Table().Bytes() + Sets().Bytes(); }
std::size_t LabelMap::SharedSetLookups() { return Sets().Lookups(); }

LabelMap::LabelMap(std::initializer_list<std::pair<std::string_view, std::string_view>> init) {
  for (const auto& [k, v] : init) Set(k, v);
}

std::optional<std::string_view> LabelMap::Get(std::string_view key) const {
  if (!rep_ || Building()) return std::nullopt;
  const Interned* e = FindIn(rep_->own(), key);
  if (!e) e = FindIn(rep_->shared(), key);
  if (!e) return std::nullopt;
  return e->value();
}

namespace {
// The interned "key\0value" pair, or null when either contains a NUL or the key is longer
// than 64 KiB (Kubernetes allows 317 bytes).
Interned* InternPair(std::string_view key, std::string_view value) {
  if (key.find('\0') != std::string_view::npos || value.find('\0') != std::string_view::npos ||
      key.size() > std::numeric_limits<std::uint16_t>::max()) {
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
  return Table().Intern({buf, n}, static_cast<std::uint16_t>(key.size()));
}
}  // namespace

bool LabelMap::Append(std::string_view key, std::string_view value) {
  Interned* e = InternPair(key, value);
  if (!e) return false;
  StartBuilding()->Push(e, /*is_lent=*/false);
  return true;
}

bool LabelMap::AppendLike(const LabelMap* prev, std::string_view key, std::string_view value) {
  if (!prev || prev == this || !prev->rep_ || prev->Building()) return Append(key, value);
  Builder* b = StartBuilding();
  const Rep* pr = prev->rep_;
  if (b->prev != pr) {
    b->Settle();  // what was lent came from another map
    b->prev = pr;
    b->prev_own = b->prev_shared = 0;
  }
  // The shared set first: it holds most of a node's pairs.
  if (Interned* e = WalkTo(pr->shared(), &b->prev_shared, key, value)) {
    b->Push(e, /*is_lent=*/true);
    return true;
  }
  Interned* e = WalkTo(pr->own(), &b->prev_own, key, value);
  if (!e) return Append(key, value);
  InternTable::Ref(e);
  b->Push(e, /*is_lent=*/false);
  return true;
}

void LabelMap::FinishAppend(std::span<const LabelMap> others) {
  if (!Building()) return;
  std::unique_ptr<Builder> b(Untag(rep_));
  rep_ = nullptr;
  auto& v = b->entries;
  // The API server sends keys sorted; equal keys stay in arrival order, the last one wins.
  bool sorted_unique = true;
  for (std::size_t i = 0; sorted_unique && i + 1 < v.size(); ++i)
    sorted_unique = v[i]->key().compare(v[i + 1]->key()) < 0;
  if (!sorted_unique) {
    b->Settle();
    std::stable_sort(v.begin(), v.end(), KeyLess);
    for (std::size_t i = 0; i + 1 < v.size(); ++i) {
      if (v[i]->key() != v[i + 1]->key()) continue;
      Table().Unref(v[i]);
      v[i] = nullptr;
    }
    std::erase(v, nullptr);
    b->lent.assign(v.size(), 0);
  }
  // A shared set to take over as it is: prev's, else one of the maps decoded just before.
  Rep* set = b->prev ? b->prev->base : nullptr;
  if (set && !HoldsExactly(*b, set)) set = nullptr;
  for (std::size_t i = 0; !set && i < others.size(); ++i) {
    const Rep* o = others[i].rep_;
    if (!o || others[i].Building() || !o->base) continue;
    if ((b->prev && o->base == b->prev->base) || !HoldsExactly(*b, o->base)) continue;
    set = o->base;
  }
  if (set) {
    rep_ = TakeOverSet(*b, set);
  } else {
    b->Settle();
    Adopt(v);
  }
  v.clear();
  b->lent.clear();
  if (v.capacity() <= 1024) spare_builder = std::move(b);
}

bool LabelMap::Set(std::string_view key, std::string_view value) {
  Interned* e = InternPair(key, value);
  if (!e) return false;
  FinishAppend();
  std::vector<Interned*> v = Flatten(rep_);
  auto it = std::lower_bound(v.begin(), v.end(), e, KeyLess);
  if (it != v.end() && (*it)->key() == key) {
    Table().Unref(*it);
    *it = e;
  } else {
    v.insert(it, e);
  }
  Adopt(v);
  return true;
}

bool LabelMap::Erase(std::string_view key) {
  FinishAppend();
  if (!Get(key)) return false;
  std::vector<Interned*> v = Flatten(rep_);
  auto it = std::find_if(v.begin(), v.end(), [&](const Interned* e) { return e->key() == key; });
  Table().Unref(*it);
  v.erase(it);
  Adopt(v);
  return true;
}

void LabelMap::ForEach(const std::function<void(std::string_view, std::string_view)>& fn) const {
  if (Building()) return;
  ForEachSorted(rep_, [&](const Interned* e) { fn(e->key(), e->value()); });
}

std::map<std::string, std::string> LabelMap::ToMap() const {
  std::map<std::string, std::string> out;
  ForEach([&](std::string_view k, std::string_view v) { out.emplace(k, v); });
  return out;
}

bool operator==(const LabelMap& a, const LabelMap& b) {
  // Interned: equal pairs are the same pointer, and both maps are sorted by key.
  if (a.rep_ == b.rep_) return true;
  if (a.size() != b.size()) return false;
  if (a.size() == 0) return true;
  if (a.Building() || b.Building()) return false;
  const LabelMap::Rep* ra = a.rep_;
  const LabelMap::Rep* rb = b.rep_;
  if (ra->base == rb->base) {
    return std::equal(ra->own().begin(), ra->own().end(), rb->own().begin(), rb->own().end());
  }
  // The same pairs may be split differently (a pair turned common in between).
  thread_local std::vector<const LabelMap::Interned*> pa, pb;
  pa.clear();
  pb.clear();
  ForEachSorted(ra, [&](const LabelMap::Interned* e) { pa.push_back(e); });
  ForEachSorted(rb, [&](const LabelMap::Interned* e) { pb.push_back(e); });
  return pa == pb;
}

// ConditionList: one immutable vector per distinct list, reference-counted, interned by value.
struct ConditionList::Rep {
  std::atomic<std::uint32_t> refs{1};
  std::size_t hash = 0;
  std::vector<NodeCondition> items;
};

namespace {

std::size_t HashTime(const std::optional<WallTime>& t) {
  return t ? std::hash<std::int64_t>{}(t->time_since_epoch().count()) : 0x51ed;
}

std::size_t HashConditions(const std::vector<NodeCondition>& v) {
  std::hash<std::string> hs;
  std::size_t h = v.size();
  auto mix = [&h](std::size_t x) { h = (h ^ x) * 0x100000001b3ULL; };
  for (const NodeCondition& c : v) {
    mix(hs(c.type));
    mix(hs(c.status));
    mix(hs(c.reason));
    mix(hs(c.message));
    mix(HashTime(c.last_transition_time));
    mix(HashTime(c.last_heartbeat_time));
  }
  return h;
}

// Lists by their hash (a multimap: the few lists that collide are compared whole).
class ConditionTable {
 public:
  using Rep = ConditionList::Rep;
  // The interned list equal to `v`, with one reference for the caller.
  Rep* Intern(std::vector<NodeCondition>&& v) {
    const std::size_t h = HashConditions(v);
    std::scoped_lock lock(mu_);
    auto [first, last] = lists_.equal_range(h);
    for (auto it = first; it != last; ++it) {
      if (it->second->items != v) continue;
      it->second->refs.fetch_add(1, std::memory_order_relaxed);
      return it->second;
    }
    auto* r = new Rep;
    r->hash = h;
    r->items = std::move(v);
    r->items.shrink_to_fit();
    lists_.emplace(h, r);
    return r;
  }
  static void Ref(Rep* r) { r->refs.fetch_add(1, std::memory_order_relaxed); }
  // As InternTable::Unref: the last reference is dropped under the lock Intern takes.
  void Unref(Rep* r) {
    if (DropUnlessLast(r->refs)) return;
    std::scoped_lock lock(mu_);
    if (r->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    auto [first, last] = lists_.equal_range(r->hash);
    for (auto it = first; it != last; ++it) {
      if (it->second != r) continue;
      lists_.erase(it);
      break;
    }
    delete r;
  }
  std::size_t Size() {
    std::scoped_lock lock(mu_);
    return lists_.size();
  }

 private:
  std::mutex mu_;
  std::unordered_multimap<std::size_t, Rep*> lists_;
};

ConditionTable& Conditions() {
  static ConditionTable* t = new ConditionTable;  // never destroyed, like Table()
  return *t;
}

}  // namespace

ConditionList::ConditionList(std::initializer_list<NodeCondition> init) {
  Assign(std::vector<NodeCondition>(init));
}

ConditionList::ConditionList(const ConditionList& o) : rep_(o.rep_) {
  if (rep_) ConditionTable::Ref(rep_);
}

ConditionList& ConditionList::operator=(const ConditionList& o) {
  if (rep_ == o.rep_) return *this;
  if (o.rep_) ConditionTable::Ref(o.rep_);
  clear();
  rep_ = o.rep_;
  return *this;
}

ConditionList& ConditionList::operator=(ConditionList&& o) noexcept {
  ConditionList taken(std::move(o));  // self-move leaves the list as it was
  std::swap(rep_, taken.rep_);
  return *this;
}

ConditionList::~ConditionList() { clear(); }

void ConditionList::clear() {
  if (rep_) Conditions().Unref(rep_);
  rep_ = nullptr;
}

const NodeCondition* ConditionList::begin() const { return rep_ ? rep_->items.data() : nullptr; }

std::size_t ConditionList::size() const { return rep_ ? rep_->items.size() : 0; }

void ConditionList::push_back(NodeCondition c) {
  std::vector<NodeCondition> v = ToVector();
  v.push_back(std::move(c));
  Assign(std::move(v));
}

void ConditionList::Assign(std::vector<NodeCondition> v) {
  Rep* r = v.empty() ? nullptr : Conditions().Intern(std::move(v));
  clear();
  rep_ = r;
}

std::size_t ConditionList::MemoryBytes() const {
  if (!rep_) return 0;
  std::size_t b = sizeof(Rep) + rep_->items.capacity() * sizeof(NodeCondition);
  for (const auto& c : rep_->items) {
    for (const std::string* s : {&c.type, &c.status, &c.reason, &c.message}) {
      if (s->capacity() > 15) b += s->capacity() + 1;
    }
  }
  return b / std::max<std::uint32_t>(rep_->refs.load(std::memory_order_relaxed), 1);
}

std::size_t ConditionList::InternedLists() { return Conditions().Size(); }

const OwnerReference* ObjectMeta::Controller() const {
  for (const auto& r : owner_references) {
    if (r.controller) return &r;
  }
  return nullptr;
}

namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // upper case is not the canonical form: kept as text, read back as sent
}

// The 16 bytes of a canonical RFC 4122 UUID (variant bits 10), as two big-endian words.
bool ParseUuid(std::string_view s, std::uint64_t* hi, std::uint64_t* lo) {
  if (s.size() != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-') return false;
  std::uint64_t w[2] = {0, 0};
  int nibble = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i == 8 || i == 13 || i == 18 || i == 23) continue;
    const int d = HexDigit(s[i]);
    if (d < 0) return false;
    w[nibble / 16] = (w[nibble / 16] << 4) | static_cast<std::uint64_t>(d);
    ++nibble;
  }
  if ((w[1] >> 62) != 2) return false;  // variant 10: byte 8 is 0x80-0xBF, so lo is never 0
  *hi = w[0];
  *lo = w[1];
  return true;
}

}  // namespace

void Uid::Assign(std::string_view s) {
  if (ParseUuid(s, &hi_, &lo_)) return;
  lo_ = 0;
  hi_ = 0;
  if (s.empty()) return;
  auto* block = static_cast<char*>(::operator new(sizeof(std::uint32_t) + s.size()));
  const auto n = static_cast<std::uint32_t>(s.size());
  std::memcpy(block, &n, sizeof n);
  std::memcpy(block + sizeof n, s.data(), s.size());
  hi_ = reinterpret_cast<std::uintptr_t>(block);
}

void Uid::Release() {
  if (!Packed() && hi_ != 0) ::operator delete(reinterpret_cast<char*>(hi_));
  hi_ = lo_ = 0;
}

Uid& Uid::operator=(const Uid& o) {
  if (this != &o) {
    Release();
    if (o.Packed()) {
      hi_ = o.hi_;
      lo_ = o.lo_;
    } else {
      Assign(o.str());
    }
  }
  return *this;
}

Uid& Uid::operator=(Uid&& o) noexcept {
  if (this != &o) {
    Release();
    hi_ = o.hi_;
    lo_ = o.lo_;
    o.hi_ = o.lo_ = 0;
  }
  return *this;
}

std::string Uid::str() const {
  if (!Packed()) {
    if (hi_ == 0) return {};
    const auto* block = reinterpret_cast<const char*>(hi_);
    std::uint32_t n = 0;
    std::memcpy(&n, block, sizeof n);
    return std::string(block + sizeof n, n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(36, '-');
  std::size_t pos = 0;
  for (int i = 0; i < 32; ++i) {
    if (pos == 8 || pos == 13 || pos == 18 || pos == 23) ++pos;
    const std::uint64_t w = i < 16 ? hi_ : lo_;
    out[pos++] = kHex[(w >> (60 - 4 * (i % 16))) & 0xF];
  }
  return out;
}

std::size_t Uid::MemoryBytes() const {
  if (Packed() || hi_ == 0) return 0;
  std::uint32_t n = 0;
  std::memcpy(&n, reinterpret_cast<const char*>(hi_), sizeof n);
  return sizeof n + n;
}

bool operator==(const Uid& a, const Uid& b) {
  if (a.Packed() || b.Packed()) return a.hi_ == b.hi_ && a.lo_ == b.lo_;
  return a.str() == b.str();
}

std::ostream& operator<<(std::ostream& os, const Uid& u) { return os << u.str(); }

const std::string& CompactString::Empty() {
  static const std::string empty;
  return empty;
}

std::ostream& operator<<(std::ostream& os, const CompactString& s) { return os << s.str(); }

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
