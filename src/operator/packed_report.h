// PackedReport: a GPUNodeHealth status as the operator's cache keeps it — a few hundred bytes
// of varints instead of the decoded structs (an 8-GPU report decoded is ~4 KB: each GpuStatus
// is ~0.4 KB of mostly empty optionals and strings). Lossless: Unpack gives back exactly what
// was packed, so every decision reads the same facts it read before. Strings that repeat
// across the fleet (model name, agent version, source names, Xid categories and actions) are
// interned once per process; NVML-shaped GPU UUIDs ("GPU-" + 32 lowercase hex digits in 8-4-4-
// 4-12 groups) are kept as their 16 bytes; the node's own name as one byte.
//
// The two timestamps (observedAt, heartbeatTime) lead the bytes, so a heartbeat that changes
// nothing else is noticed by comparing the rest (SameFactsBytes) without unpacking.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "api/gpu_node_health.h"

namespace gg::op {

class PackedReport {
 public:
  PackedReport() = default;
  // `self` is the object's name: a status whose nodeName equals it stores one byte for it.
  static PackedReport Pack(const api::GpuNodeHealthStatus& s, std::string_view self);

  bool empty() const { return bytes_.empty(); }
  api::GpuNodeHealthStatus Unpack(std::string_view self) const;
  // True when everything but observedAt/heartbeatTime is byte-identical (then SameFacts
  // holds). False does not mean the facts differ: SameFacts also ignores power draw and
  // small temperature moves — unpack and ask it.
  bool SameFactsBytes(const PackedReport& o) const;
  // Heap bytes held (the interned strings are shared; InternedBytes).
  std::size_t MemoryBytes() const { return bytes_.capacity() > 15 ? bytes_.capacity() + 1 : 0; }
  std::size_t size() const { return bytes_.size(); }

  // Process-wide intern table, for benchmarks.
  static std::size_t InternedBytes();

 private:
  std::string bytes_;
};

}  // namespace gg::op
