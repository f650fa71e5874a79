// Small projections of Kubernetes objects: only the fields decisions need, so caches stay
// small (a Node is a few hundred bytes plus its labels, not 15 KB). Parsed by k8s/codec.h.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/label_selector.h"
#include "common/status.h"

namespace gg::k8s {

// A compact string→string map (labels, kept annotations). Each "key=value" pair is interned:
// stored once per process, reference-counted, and shared by every map that holds it. GPU
// nodes carry ~50 labels that are the same across the fleet (GFD/NFD), so the decoders'
// maps go one step further: the pairs that many maps hold (seen in ≥ 4 maps at once, then
// for as long as the pair lives) form a shared *set*, itself interned, and a map keeps a
// pointer to that set plus its own few pairs (the hostname): ~100 bytes a node instead of a
// pointer per label. Entries are kept sorted by key (Get is a binary search). Copies share
// the map's array (copy-on-write, reference-counted): the informer's Node and the operator's
// fleet index hold one per node, not two. A map is not synchronized (like std::map); the
// intern tables and the shared arrays' counts are.
class LabelMap {
 public:
  LabelMap() = default;
  LabelMap(std::initializer_list<std::pair<std::string_view, std::string_view>> init);
  LabelMap(const LabelMap& o);
  LabelMap(LabelMap&& o) noexcept : rep_(o.rep_) { o.rep_ = nullptr; }
  LabelMap& operator=(const LabelMap& o);
  LabelMap& operator=(LabelMap&& o) noexcept;
  ~LabelMap();

  std::optional<std::string_view> Get(std::string_view key) const;
  bool Has(std::string_view key) const { return Get(key).has_value(); }
  // Inserts or replaces (copies the map's array: O(size)). Keys/values containing '\0', and
  // keys over 64 KiB, are rejected (false).
  bool Set(std::string_view key, std::string_view value);
  // Bulk fill for decoders: Append adds a pair to a growing list without looking for its key;
  // FinishAppend then sorts it, drops the earlier pairs of a repeated key (the last one wins,
  // as with Set), moves the fleet-wide pairs into a shared set and stores the map exactly
  // sized. Between the two calls only Append, AppendLike, FinishAppend, size and destruction
  // are valid; every Append must be followed by a FinishAppend.
  bool Append(std::string_view key, std::string_view value);
  // Append for a map that usually repeats `prev` (the cached version of the same object):
  // prev is walked alongside the keys appended (in key order, as the API server sends them)
  // and a pair equal to prev's is shared without a lookup in the intern table. `prev` must
  // stay alive and unchanged until FinishAppend.
  bool AppendLike(const LabelMap* prev, std::string_view key, std::string_view value);
  // When the finished map's fleet-wide pairs are exactly prev's shared set, or else the set of
  // one of `others` (maps decoded just before, e.g. a list's items from other node groups), it
  // takes that set over without hashing, locking or counting its pairs.
  void FinishAppend(std::span<const LabelMap> others = {});
  bool Erase(std::string_view key);
  std::size_t size() const;
  bool empty() const { return size() == 0; }
  void clear();
  void ForEach(const std::function<void(std::string_view, std::string_view)>& fn) const;
  std::map<std::string, std::string> ToMap() const;
  // This map's memory: its own array (shared by its copies; each copy counts it) and its
  // share of the fleet-wide set it points to (the set's bytes ÷ the maps holding it). The
  // interned text is shared by every map (InternedBytes).
  std::size_t MemoryBytes() const;
  void ShrinkToFit() {}  // maps are always stored exactly sized
  // Pairs held in the shared set rather than in this map's own array (for tests/benchmarks).
  std::size_t SharedSize() const;
  // Whether both maps hold the same shared set (none is not a set).
  bool SameSharedSet(const LabelMap& o) const;
  // Order-insensitive, like comparing the maps.
  friend bool operator==(const LabelMap& a, const LabelMap& b);

  // Process-wide intern tables: distinct pairs, and the bytes of the pairs (text + header)
  // and of the shared sets, for benchmarks.
  static std::size_t InternedEntries();
  static std::size_t InternedBytes();
  // How many times a finished map looked its shared set up in the set table (hash and lock)
  // instead of taking one over, for tests.
  static std::size_t SharedSetLookups();

  struct Interned;  // objects.cc
  struct Rep;       // objects.cc: a count, the shared set (or null) and the own entries
  struct Builder;   // objects.cc: the growing list between Append and FinishAppend

 private:
  bool Building() const { return (reinterpret_cast<std::uintptr_t>(rep_) & 1U) != 0; }
  Builder* StartBuilding();
  // Replaces the content with `sorted` (by key, keys unique), taking its references.
  void Adopt(std::span<Interned* const> sorted);
  // null = empty; with the low bit set, a Builder (between Append and FinishAppend)
  Rep* rep_ = nullptr;
};

struct OwnerReference {
  std::string api_version, kind, name, uid;
  bool controller = false;
  friend bool operator==(const OwnerReference&, const OwnerReference&) = default;
};

// Text that is usually empty in one pointer instead of a 32-byte std::string: a cluster-scoped
// object's namespace (every Node and GPU report of the fleet), a cached report's decode error.
// Non-empty text lives on the heap. Reads like a const std::string.
class CompactString {
 public:
  CompactString() = default;
  CompactString(std::string_view s)  // NOLINT: assigned from text like a string
      : s_(s.empty() ? nullptr : std::make_unique<const std::string>(s)) {}
  CompactString(const std::string& s) : CompactString(std::string_view(s)) {}  // NOLINT
  CompactString(const char* s) : CompactString(std::string_view(s)) {}         // NOLINT
  CompactString(const CompactString& o) : CompactString(o.str()) {}
  CompactString(CompactString&&) noexcept = default;
  CompactString& operator=(const CompactString& o) { return *this = CompactString(o); }
  CompactString& operator=(CompactString&&) noexcept = default;

  bool empty() const { return s_ == nullptr; }
  std::size_t size() const { return str().size(); }
  const std::string& str() const { return s_ ? *s_ : Empty(); }
  operator const std::string&() const { return str(); }  // NOLINT: reads like a string
  operator std::string_view() const { return str(); }    // NOLINT
  friend bool operator==(const CompactString& a, const CompactString& b) {
    return a.str() == b.str();
  }
  friend bool operator==(const CompactString& a, std::string_view b) { return a.str() == b; }
  friend bool operator==(const CompactString& a, const std::string& b) { return a.str() == b; }
  friend bool operator==(const CompactString& a, const char* b) { return a.str() == b; }
  friend std::ostream& operator<<(std::ostream& os, const CompactString& s);

 private:
  static const std::string& Empty();
  std::unique_ptr<const std::string> s_;
};

// metadata.uid in 16 bytes instead of a 32-byte std::string plus a 48-byte heap block: the
// API server's uids are RFC 4122 UUIDs ("8-4-4-4-12" lowercase hex, variant bits 10), kept as
// their 16 bytes; any other string (the server's uid is opaque) is kept whole on the heap and
// read back unchanged. Reads as a string (str(), a conversion, comparison with text).
class Uid {
 public:
  Uid() = default;
  Uid(std::string_view s) { Assign(s); }  // NOLINT: assigned from text like a string
  Uid(const std::string& s) : Uid(std::string_view(s)) {}  // NOLINT
  Uid(const char* s) : Uid(std::string_view(s)) {}         // NOLINT
  Uid(const Uid& o) { *this = o; }
  Uid(Uid&& o) noexcept : hi_(o.hi_), lo_(o.lo_) { o.hi_ = o.lo_ = 0; }
  Uid& operator=(const Uid& o);
  Uid& operator=(Uid&& o) noexcept;
  ~Uid() { Release(); }

  bool empty() const { return hi_ == 0 && lo_ == 0; }
  std::string str() const;
  operator std::string() const { return str(); }  // NOLINT: reads like the string it was
  // Heap bytes held (0 for a UUID kept as 16 bytes).
  std::size_t MemoryBytes() const;
  friend bool operator==(const Uid& a, const Uid& b);
  friend bool operator==(const Uid& a, std::string_view b) { return a.str() == b; }
  friend bool operator==(const Uid& a, const std::string& b) { return a.str() == b; }
  friend bool operator==(const Uid& a, const char* b) { return a.str() == b; }
  friend std::ostream& operator<<(std::ostream& os, const Uid& u);

 private:
  // A UUID: its bytes 0-7 and 8-15 (byte 8 holds the variant bits, never 0). Else hi_ is a
  // heap "length, text" block (null: empty) and lo_ is 0.
  bool Packed() const { return lo_ != 0; }
  void Assign(std::string_view s);
  void Release();
  std::uint64_t hi_ = 0;
  std::uint64_t lo_ = 0;
};

// metadata.ownerReferences in one pointer (most cached objects — every Node, every report —
// have none): a vector allocated only when the first reference is added.
class OwnerReferences {
 public:
  OwnerReferences() = default;
  OwnerReferences(const OwnerReferences& o)
      : v_(o.v_ ? std::make_unique<std::vector<OwnerReference>>(*o.v_) : nullptr) {}
  OwnerReferences(OwnerReferences&&) noexcept = default;
  OwnerReferences& operator=(const OwnerReferences& o) {
    if (this != &o) *this = OwnerReferences(o);
    return *this;
  }
  OwnerReferences& operator=(OwnerReferences&&) noexcept = default;

  const OwnerReference* begin() const { return v_ ? v_->data() : nullptr; }
  const OwnerReference* end() const { return v_ ? v_->data() + v_->size() : nullptr; }
  std::size_t size() const { return v_ ? v_->size() : 0; }
  bool empty() const { return size() == 0; }
  std::size_t capacity() const { return v_ ? v_->capacity() : 0; }
  const OwnerReference& operator[](std::size_t i) const { return (*v_)[i]; }
  void push_back(OwnerReference r) {
    if (!v_) v_ = std::make_unique<std::vector<OwnerReference>>();
    v_->push_back(std::move(r));
  }
  friend bool operator==(const OwnerReferences& a, const OwnerReferences& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  std::unique_ptr<std::vector<OwnerReference>> v_;
};

// An optional time in 8 bytes (std::optional<WallTime> takes 16): the nanosecond count
// INT64_MIN (the year 1677) stands for "none". Reads like std::optional.
class OptionalTime {
 public:
  OptionalTime() = default;
  OptionalTime(std::nullopt_t) {}                                  // NOLINT
  OptionalTime(WallTime t) : ns_(t.time_since_epoch().count()) {}  // NOLINT
  OptionalTime(const std::optional<WallTime>& t)                   // NOLINT
      : ns_(t ? t->time_since_epoch().count() : kNone) {}
  bool has_value() const { return ns_ != kNone; }
  explicit operator bool() const { return has_value(); }
  WallTime operator*() const { return WallTime(WallTime::duration(ns_)); }
  WallTime value() const { return **this; }
  void reset() { ns_ = kNone; }
  operator std::optional<WallTime>() const {  // NOLINT
    return has_value() ? std::optional<WallTime>(**this) : std::nullopt;
  }
  friend bool operator==(const OptionalTime&, const OptionalTime&) = default;

 private:
  static constexpr WallTime::rep kNone = std::numeric_limits<WallTime::rep>::min();
  WallTime::rep ns_ = kNone;
};

// 136 bytes (was 208): every cached Node and report holds one, so the rarely present fields
// (namespace, ownerReferences, the timestamps) and the uid take the least room their values
// allow.
struct ObjectMeta {
  std::string name;
  CompactString namespace_;
  std::string resource_version;
  Uid uid;
  std::int64_t generation = 0;
  LabelMap labels;
  // Node and Pod projections keep only annotations under "gpuguardian.io/" plus
  // "kubernetes.io/config.mirror"; other projections keep them all.
  LabelMap annotations;
  OwnerReferences owner_references;
  OptionalTime creation_timestamp;
  OptionalTime deletion_timestamp;

  // The ownerReference with controller=true, if any.
  const OwnerReference* Controller() const;
  // "ns/name" or "name".
  std::string Key() const;
};

// A resourceVersion as a number, to tell whether a cache has reached one of our writes; 0 when
// it is not a plain decimal (the server may use any opaque string: never compare then).
std::uint64_t ResourceVersionNumber(std::string_view rv);

struct Taint {
  std::string key, value, effect;  // effect: NoSchedule | PreferNoSchedule | NoExecute
  std::optional<WallTime> time_added;
  friend bool operator==(const Taint&, const Taint&) = default;
};

struct NodeCondition {
  std::string type, status, reason, message;  // status: True | False | Unknown
  std::optional<WallTime> last_transition_time;
  std::optional<WallTime> last_heartbeat_time;
  friend bool operator==(const NodeCondition&, const NodeCondition&) = default;
};

// A Node's conditions: an immutable list interned by value, so every Node whose list is equal
// shares one copy. Across a fleet our GPUHealthy condition mostly repeats (same status, reason
// and message; times written by the operator in the same second), so a node costs a pointer
// here instead of ~200 bytes. Read like a vector; a write (push_back, erase_if, Assign) builds
// a new list. Equal lists are the same list, so comparing is a pointer compare.
class ConditionList {
 public:
  ConditionList() = default;
  ConditionList(std::initializer_list<NodeCondition> init);
  ConditionList(const ConditionList& o);
  ConditionList(ConditionList&& o) noexcept : rep_(o.rep_) { o.rep_ = nullptr; }
  ConditionList& operator=(const ConditionList& o);
  ConditionList& operator=(ConditionList&& o) noexcept;
  ~ConditionList();

  const NodeCondition* begin() const;
  const NodeCondition* end() const { return begin() + size(); }
  std::size_t size() const;
  bool empty() const { return size() == 0; }
  const NodeCondition& operator[](std::size_t i) const { return begin()[i]; }
  std::vector<NodeCondition> ToVector() const { return {begin(), end()}; }

  void push_back(NodeCondition c);
  void Assign(std::vector<NodeCondition> v);
  template <typename Pred>
  std::size_t erase_if(Pred pred) {
    std::vector<NodeCondition> v = ToVector();
    const std::size_t n = std::erase_if(v, pred);
    if (n > 0) Assign(std::move(v));
    return n;
  }
  void clear();
  // This node's share: the list's bytes ÷ the Nodes holding it.
  std::size_t MemoryBytes() const;
  // Distinct lists in the process, for benchmarks.
  static std::size_t InternedLists();

  friend bool operator==(const ConditionList& a, const ConditionList& b) {
    return a.rep_ == b.rep_;
  }

  struct Rep;  // objects.cc

 private:
  Rep* rep_ = nullptr;  // null = empty
};

inline constexpr char kGpuResource[] = "nvidia.com/gpu";

struct Node {
  ObjectMeta meta;
  bool unschedulable = false;
  std::vector<Taint> taints;
  // Our own "GPUHealthy" whole; other detectors' conditions (nodeCondition rules) without
  // message and heartbeat; the kubelet's Ready and pressure conditions only while they are not
  // in their healthy state (Ready=True, the others False: ~200 bytes a node no decision reads).
  ConditionList conditions;
  std::int64_t gpu_capacity = 0;     // status.capacity["nvidia.com/gpu"]
  std::int64_t gpu_allocatable = 0;  // status.allocatable["nvidia.com/gpu"]

  const NodeCondition* FindCondition(std::string_view type) const;
  const Taint* FindTaint(std::string_view key) const;
};

inline constexpr char kMirrorPodAnnotation[] = "kubernetes.io/config.mirror";

struct Pod {
  ObjectMeta meta;
  std::string node_name;
  std::string phase;  // Pending | Running | Succeeded | Failed | Unknown
  std::optional<std::int32_t> priority;
  std::string priority_class_name;
  std::int64_t gpu_requests = 0;  // sum over containers of max(requests, limits) of nvidia.com/gpu
  bool has_empty_dir = false;
  std::vector<std::string> resource_claims;  // claim object names (status) or spec names
  std::optional<std::int64_t> termination_grace_period_seconds;

  bool IsMirror() const { return meta.annotations.Has(kMirrorPodAnnotation); }
  bool IsFinished() const { return phase == "Succeeded" || phase == "Failed"; }
  // Kind of the controller owner ("DaemonSet", "ReplicaSet", ...), "" when none.
  std::string_view ControllerKind() const;
};

// metav1.LabelSelector (common/label_selector.h); Matches(LabelMap) reads the packed labels.
using LabelSelector = gg::LabelSelector;
using LabelSelectorRequirement = gg::LabelSelectorRequirement;

struct PodDisruptionBudget {
  ObjectMeta meta;
  std::optional<LabelSelector> selector;
  std::int32_t disruptions_allowed = 0;
  std::int32_t current_healthy = 0;
  std::int32_t desired_healthy = 0;
  std::int32_t expected_pods = 0;
  std::int64_t observed_generation = 0;
};

// DaemonSets, ReplicaSets and Namespaces: metadata is enough (ownership look-ups).
struct DaemonSet {
  ObjectMeta meta;
};
struct ReplicaSet {
  ObjectMeta meta;
};
struct Namespace {
  ObjectMeta meta;
  std::string phase;
};

struct Lease {
  ObjectMeta meta;
  std::string holder_identity;
  std::optional<std::int32_t> lease_duration_seconds;
  std::optional<WallTime> acquire_time;
  std::optional<WallTime> renew_time;
  std::int32_t lease_transitions = 0;
};

struct ObjectReference {
  std::string api_version, kind, namespace_, name, uid;
};

// core/v1 Event (the fields the recorder reads back).
struct Event {
  ObjectMeta meta;
  ObjectReference involved_object;
  std::string reason, message, type;  // type: Normal | Warning
  std::int32_t count = 0;
  std::optional<WallTime> first_timestamp, last_timestamp, event_time;
  std::string reporting_component, reporting_instance, source_component;
};

// resource.k8s.io ResourceSlice (v1beta1 "basic" devices and v1 flat devices both read).
struct Device {
  std::string name;
  // Attribute values flattened to strings ("uuid" → "GPU-…", ints/bools/versions as text).
  std::map<std::string, std::string> attributes;
  // Device taints the driver published (KEP-5055: `taints`, v1beta1 `basic.taints`).
  std::vector<Taint> taints;
};
struct ResourceSlice {
  ObjectMeta meta;
  std::string driver;
  std::string pool_name;
  std::string node_name;
  std::vector<Device> devices;
};

struct DeviceAllocation {
  std::string request, driver, pool, device;
};
struct ResourceClaim {
  ObjectMeta meta;
  std::vector<DeviceAllocation> allocations;  // status.allocation.devices.results
  std::vector<ObjectReference> reserved_for;  // status.reservedFor (kind from "resource")
};

// Metadata-only view of any object (PartialObjectMetadata-like).
struct PartialObject {
  ObjectMeta meta;
};

template <typename T>
struct ObjectList {
  std::vector<T> items;
  std::string resource_version;
  std::string continue_token;
};

enum class WatchEventType { kAdded, kModified, kDeleted, kBookmark, kError };
std::string_view WatchEventTypeName(WatchEventType t);

template <typename T>
struct WatchEvent {
  WatchEventType type = WatchEventType::kAdded;
  T object;      // for BOOKMARK only meta.resource_version is set
  Status error;  // for ERROR: the server's Status mapped to a code (410 → OutOfRange)
};

}  // namespace gg::k8s
