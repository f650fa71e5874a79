// PackedReport: the varint layout of a cached GPUNodeHealth status and its intern table.
//
// Layout: observedAt and heartbeatTime as 8 fixed bytes each (nanoseconds since the epoch),
// then nodeName, agentVersion, expectedGpus, the GPUs, the Xids and the sources. Integers are
// LEB128 varints (signed ones zigzag), doubles their 8 bytes, optionals a presence bit in a
// per-record mask. A string is a varint header whose low 2 bits say how it is stored.
#include "operator/packed_report.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <unordered_map>

namespace gg::op {
namespace {

// A new field in these structs must be packed too: these fire until packed_report.cc knows it.
static_assert(sizeof(api::GpuNodeHealthStatus) == 160, "GpuNodeHealthStatus changed: pack it");
static_assert(sizeof(api::GpuStatus) == 440, "GpuStatus changed: pack the new field");
static_assert(sizeof(api::XidEvent) == 208, "XidEvent changed: pack the new field");
static_assert(sizeof(api::SourceStatus) == 72, "SourceStatus changed: pack the new field");
static_assert(sizeof(api::MigDevice) == 96, "MigDevice changed: pack the new field");

enum StrKind : std::uint64_t { kInline = 0, kInterned = 1, kUuid16 = 2, kSelf = 3 };
constexpr std::size_t kMaxInterned = 4096;  // distinct strings; later ones are stored inline
constexpr std::size_t kMaxInternLen = 128;
constexpr std::size_t kTimesBytes = 16;

// Append-only: an id, once given, names the same text for the life of the process, so equal
// strings always pack to equal bytes.
class InternTable {
 public:
  std::optional<std::uint64_t> Id(std::string_view s) {
    if (s.size() > kMaxInternLen) return std::nullopt;
    std::scoped_lock lock(mu_);
    if (auto it = ids_.find(s); it != ids_.end()) return it->second;
    if (strings_.size() >= kMaxInterned) return std::nullopt;
    strings_.emplace_back(s);
    bytes_ += sizeof(std::string) + s.size() + 32;  // text, header, map node (approximate)
    ids_.emplace(strings_.back(), strings_.size() - 1);
    return strings_.size() - 1;
  }
  std::string Get(std::uint64_t id) {
    std::scoped_lock lock(mu_);
    return id < strings_.size() ? strings_[id] : std::string();
  }
  std::size_t Bytes() {
    std::scoped_lock lock(mu_);
    return bytes_;
  }

 private:
  std::mutex mu_;
  std::deque<std::string> strings_;  // deque: growing keeps the map's string_views valid
  std::unordered_map<std::string_view, std::uint64_t> ids_;
  std::size_t bytes_ = 0;
};

InternTable& Interned() {
  static auto* t = new InternTable();  // never destroyed: packs may run during exit
  return *t;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // upper case too: packing must give back the same text
}

bool IsDashAt(std::size_t i) { return i == 12 || i == 17 || i == 22 || i == 27; }

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (lowercase hex) → 16 bytes.
bool PackUuid(std::string_view s, unsigned char out[16]) {
  if (s.size() != 40 || s.substr(0, 4) != "GPU-") return false;
  int n = 0;
  for (std::size_t i = 4; i < s.size(); ++i) {
    if (IsDashAt(i)) {
      if (s[i] != '-') return false;
      continue;
    }
    int d = HexDigit(s[i]);
    if (d < 0) return false;
    if (n % 2 == 0)
      out[n / 2] = static_cast<unsigned char>(d << 4);
    else
      out[n / 2] |= static_cast<unsigned char>(d);
    ++n;
  }
  return n == 32;
}

std::string UnpackUuid(const unsigned char in[16]) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s = "GPU-";
  for (int n = 0; n < 32; ++n) {
    if (IsDashAt(s.size())) s += '-';
    s += kHex[n % 2 == 0 ? in[n / 2] >> 4 : in[n / 2] & 0xf];
  }
  return s;
}

std::int64_t Nanos(WallTime t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}
WallTime FromNanos(std::int64_t ns) {
  return WallTime(std::chrono::duration_cast<WallTime::duration>(std::chrono::nanoseconds(ns)));
}

class Writer {
 public:
  explicit Writer(std::string_view self) : self_(self) {}
  void U(std::uint64_t v) {
    while (v >= 0x80) {
      out_ += static_cast<char>((v & 0x7f) | 0x80);
      v >>= 7;
    }
    out_ += static_cast<char>(v);
  }
  void I(std::int64_t v) {
    U((static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63));
  }
  void Fixed(std::int64_t v) { out_.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void D(double v) { out_.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void T(WallTime t) { I(Nanos(t)); }
  // `vocabulary`: a string that repeats across the fleet, worth interning.
  void S(std::string_view s, bool vocabulary = false) {
    unsigned char uuid[16];
    if (!self_.empty() && s == self_) {
      U(kSelf);
    } else if (PackUuid(s, uuid)) {
      U(kUuid16);
      out_.append(reinterpret_cast<const char*>(uuid), 16);
    } else if (auto id = vocabulary ? Interned().Id(s) : std::nullopt) {
      U(*id << 2 | kInterned);
    } else {
      U(s.size() << 2 | kInline);
      out_.append(s);
    }
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string_view self_;
  std::string out_;
};

class Reader {
 public:
  Reader(std::string_view in, std::string_view self) : in_(in), self_(self) {}
  std::uint64_t U() {
    std::uint64_t v = 0;
    for (int shift = 0; pos_ < in_.size() && shift < 64; shift += 7) {
      auto b = static_cast<unsigned char>(in_[pos_++]);
      v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) break;
    }
    return v;
  }
  std::int64_t I() {
    std::uint64_t u = U();
    return static_cast<std::int64_t>(u >> 1) ^ -static_cast<std::int64_t>(u & 1);
  }
  template <typename V>
  V Raw() {
    V v{};
    if (pos_ + sizeof v <= in_.size()) std::memcpy(&v, in_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return v;
  }
  WallTime T() { return FromNanos(I()); }
  // A list length: never more than the bytes left (a corrupt count cannot allocate much).
  std::size_t Count() {
    return static_cast<std::size_t>(
        std::min<std::uint64_t>(U(), in_.size() - std::min(pos_, in_.size())));
  }
  std::string S() {
    std::uint64_t h = U();
    switch (h & 3) {
      case kSelf:
        return std::string(self_);
      case kUuid16: {
        unsigned char b[16] = {};
        if (pos_ + 16 <= in_.size()) std::memcpy(b, in_.data() + pos_, 16);
        pos_ += 16;
        return UnpackUuid(b);
      }
      case kInterned:
        return Interned().Get(h >> 2);
      default: {
        std::string s(in_.substr(std::min(pos_, in_.size()), h >> 2));
        pos_ += h >> 2;
        return s;
      }
    }
  }

 private:
  std::string_view in_;
  std::string_view self_;
  std::size_t pos_ = 0;
};

// Every optional of a GpuStatus, in mask-bit order; `f` is called with each.
template <typename G, typename F>
void ForEachOptional(G& g, F&& f) {
  f(g.mig_pending_enabled), f(g.temperature_c), f(g.slowdown_temperature_c);
  f(g.shutdown_temperature_c), f(g.power_watts), f(g.power_limit_watts);
  f(g.ecc_corrected_volatile), f(g.ecc_uncorrected_volatile), f(g.ecc_corrected_aggregate);
  f(g.ecc_uncorrected_aggregate), f(g.remapped_rows_correctable), f(g.remapped_rows_uncorrectable);
  f(g.retired_pages_sbe), f(g.retired_pages_dbe), f(g.pcie_replay_count);
  f(g.nvlink_links_total), f(g.nvlink_links_down), f(g.nvlink_error_count);
}

// Every plain bool of a GpuStatus, in flag-bit order.
template <typename G, typename F>
void ForEachBool(G& g, F&& f) {
  f(g.lost), f(g.mig_enabled), f(g.ecc_enabled), f(g.remap_pending), f(g.remap_failure);
  f(g.retired_pages_pending);
}

template <typename V>
void PutValue(Writer& w, const V& v) {
  if constexpr (std::is_same_v<V, double>)
    w.D(v);
  else if constexpr (std::is_same_v<V, bool>)
    w.U(v ? 1 : 0);
  else if constexpr (std::is_signed_v<V>)
    w.I(v);
  else
    w.U(v);
}

template <typename V>
V GetValue(Reader& r) {
  if constexpr (std::is_same_v<V, double>)
    return r.Raw<double>();
  else if constexpr (std::is_same_v<V, bool>)
    return r.U() != 0;
  else if constexpr (std::is_signed_v<V>)
    return static_cast<V>(r.I());
  else
    return static_cast<V>(r.U());
}

void PackMig(Writer& w, const api::MigDevice& m) {
  w.U(m.index);
  w.S(m.uuid);
  w.U(m.gpu_instance);
  w.U(m.compute_instance);
  w.S(m.profile, /*vocabulary=*/true);
  w.U(m.memory_mib ? 1 : 0);
  if (m.memory_mib) w.U(*m.memory_mib);
}

api::MigDevice UnpackMig(Reader& r) {
  api::MigDevice m;
  m.index = static_cast<std::uint32_t>(r.U());
  m.uuid = r.S();
  m.gpu_instance = static_cast<std::uint32_t>(r.U());
  m.compute_instance = static_cast<std::uint32_t>(r.U());
  m.profile = r.S();
  if (r.U()) m.memory_mib = r.U();
  return m;
}

void PackGpu(Writer& w, const api::GpuStatus& g) {
  w.I(g.index);
  w.S(g.uuid);
  w.S(g.name, /*vocabulary=*/true);
  w.S(g.serial);
  w.S(g.pci_bus_id);
  std::uint64_t flags = 0, bit = 1;
  ForEachBool(g, [&](bool b) { flags |= b ? bit : 0, bit <<= 1; });
  w.U(flags);
  std::uint64_t mask = 0;
  bit = 1;
  ForEachOptional(g, [&](const auto& o) { mask |= o ? bit : 0, bit <<= 1; });
  w.U(mask);
  ForEachOptional(g, [&](const auto& o) {
    if (o) PutValue(w, *o);
  });
  w.U(g.throttle_reasons.size());
  for (const auto& t : g.throttle_reasons) w.S(t, /*vocabulary=*/true);
  w.U(g.mig_devices.size());
  for (const auto& m : g.mig_devices) PackMig(w, m);
  w.S(g.recovery_action, /*vocabulary=*/true);
}

api::GpuStatus UnpackGpu(Reader& r) {
  api::GpuStatus g;
  g.index = static_cast<int>(r.I());
  g.uuid = r.S();
  g.name = r.S();
  g.serial = r.S();
  g.pci_bus_id = r.S();
  std::uint64_t flags = r.U(), bit = 1;
  ForEachBool(g, [&](bool& b) { b = (flags & bit) != 0, bit <<= 1; });
  std::uint64_t mask = r.U();
  bit = 1;
  ForEachOptional(g, [&](auto& o) {
    using V = typename std::remove_reference_t<decltype(o)>::value_type;
    if (mask & bit) o = GetValue<V>(r);
    bit <<= 1;
  });
  g.throttle_reasons.resize(r.Count());
  for (auto& t : g.throttle_reasons) t = r.S();
  g.mig_devices.resize(r.Count());
  for (auto& m : g.mig_devices) m = UnpackMig(r);
  g.recovery_action = r.S();
  return g;
}

void PackXid(Writer& w, const api::XidEvent& x) {
  w.I(x.xid);
  w.U((x.sxid ? 1 : 0) | (x.gpu_instance ? 2 : 0) | (x.compute_instance ? 4 : 0));
  w.S(x.gpu_uuid);
  w.S(x.pci_bus_id);
  w.I(x.count);
  w.T(x.first_seen);
  w.T(x.last_seen);
  w.S(x.category, /*vocabulary=*/true);
  w.S(x.recommended_action, /*vocabulary=*/true);
  w.S(x.message);
  if (x.gpu_instance) w.U(*x.gpu_instance);
  if (x.compute_instance) w.U(*x.compute_instance);
}

api::XidEvent UnpackXid(Reader& r) {
  api::XidEvent x;
  x.xid = static_cast<int>(r.I());
  std::uint64_t flags = r.U();
  x.sxid = flags & 1;
  x.gpu_uuid = r.S();
  x.pci_bus_id = r.S();
  x.count = r.I();
  x.first_seen = r.T();
  x.last_seen = r.T();
  x.category = r.S();
  x.recommended_action = r.S();
  x.message = r.S();
  if (flags & 2) x.gpu_instance = static_cast<std::uint32_t>(r.U());
  if (flags & 4) x.compute_instance = static_cast<std::uint32_t>(r.U());
  return x;
}

}  // namespace

PackedReport PackedReport::Pack(const api::GpuNodeHealthStatus& s, std::string_view self) {
  Writer w(self);
  w.Fixed(Nanos(s.observed_at));
  w.Fixed(Nanos(s.heartbeat_time));
  w.S(s.node_name);
  w.S(s.agent_version, /*vocabulary=*/true);
  w.I(s.expected_gpus);
  w.U(s.gpus.size());
  for (const auto& g : s.gpus) PackGpu(w, g);
  w.U(s.xids.size());
  for (const auto& x : s.xids) PackXid(w, x);
  w.U(s.sources.size());
  for (const auto& src : s.sources) {
    w.S(src.name, /*vocabulary=*/true);
    w.U(static_cast<std::uint64_t>(src.state));
    w.S(src.message, /*vocabulary=*/true);
  }
  PackedReport p;
  p.bytes_ = w.Take();
  p.bytes_.shrink_to_fit();
  return p;
}

api::GpuNodeHealthStatus PackedReport::Unpack(std::string_view self) const {
  api::GpuNodeHealthStatus s;
  if (bytes_.empty()) return s;
  Reader r(bytes_, self);
  s.observed_at = FromNanos(r.Raw<std::int64_t>());
  s.heartbeat_time = FromNanos(r.Raw<std::int64_t>());
  s.node_name = r.S();
  s.agent_version = r.S();
  s.expected_gpus = static_cast<int>(r.I());
  s.gpus.resize(r.Count());
  for (auto& g : s.gpus) g = UnpackGpu(r);
  s.xids.resize(r.Count());
  for (auto& x : s.xids) x = UnpackXid(r);
  s.sources.resize(r.Count());
  for (auto& src : s.sources) {
    src.name = r.S();
    src.state = static_cast<api::SourceState>(r.U());
    src.message = r.S();
  }
  return s;
}

bool PackedReport::SameFactsBytes(const PackedReport& o) const {
  if (bytes_.size() < kTimesBytes || o.bytes_.size() < kTimesBytes) return false;
  return std::string_view(bytes_).substr(kTimesBytes) ==
         std::string_view(o.bytes_).substr(kTimesBytes);
}

std::size_t PackedReport::InternedBytes() { return Interned().Bytes(); }

}  // namespace gg::op
