// XidRing: the report's bounded list of recent Xids, aggregated by (xid, sxid, GPU, MIG
// GPU instance / compute instance when known) with
// count / firstSeen / lastSeen. When full, the entry seen least recently is dropped. The
// same Xid usually arrives twice (NVML event and kernel log); a repeat of one (xid, GPU) from
// a *different* source within `dedupe_window` refreshes the entry without counting twice.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "api/gpu_node_health.h"
#include "common/clock.h"

namespace gg::agent {

class XidRing {
 public:
  static constexpr std::size_t kDefaultCapacity = 64;
  static constexpr std::size_t kMaxMessageBytes = 256;

  explicit XidRing(std::size_t capacity = kDefaultCapacity,
                   Duration dedupe_window = std::chrono::seconds(2));

  // Adds `e` (its count, usually 1) seen by `source`. Returns how many occurrences were
  // counted (0 when folded into a duplicate from another source).
  int64_t Add(const api::XidEvent& e, const std::string& source);

  // Entries ordered by lastSeen, newest last.
  std::vector<api::XidEvent> Entries() const;
  std::size_t size() const;
  std::size_t capacity() const { return capacity_; }
  uint64_t evicted() const;
  uint64_t changes() const;  // bumped on every Add that altered an entry

 private:
  struct Entry {
    api::XidEvent event;
    std::string last_source;
    uint64_t seq = 0;  // insertion order, to break lastSeen ties
  };
  static bool SameKey(const api::XidEvent& a, const api::XidEvent& b);

  const std::size_t capacity_;
  const Duration dedupe_window_;
  mutable std::mutex mu_;
  std::vector<Entry> entries_;
  uint64_t seq_ = 0;
  uint64_t evicted_ = 0;
  uint64_t changes_ = 0;
};

}  // namespace gg::agent
