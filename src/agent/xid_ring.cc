// XidRing implementation (see xid_ring.h).
#include "agent/xid_ring.h"

#include <algorithm>

namespace gg::agent {

XidRing::XidRing(std::size_t capacity, Duration dedupe_window)
    : capacity_(capacity == 0 ? 1 : capacity), dedupe_window_(dedupe_window) {}

bool XidRing::SameKey(const api::XidEvent& a, const api::XidEvent& b) {
  if (a.xid != b.xid || a.sxid != b.sxid) return false;
  // Different MIG instances of one GPU are different entries (the operator can fence one
  // instance); a sighting without attribution (e.g. NVML without privilege) folds into the
  // attributed one.
  if (a.gpu_instance && b.gpu_instance && *a.gpu_instance != *b.gpu_instance) return false;
  if (a.compute_instance && b.compute_instance && *a.compute_instance != *b.compute_instance)
    return false;
  // A GPU is identified by UUID when known, else by the PCI address from the log.
  if (!a.gpu_uuid.empty() || !b.gpu_uuid.empty()) return a.gpu_uuid == b.gpu_uuid;
  return a.pci_bus_id == b.pci_bus_id;
}

int64_t XidRing::Add(const api::XidEvent& in, const std::string& source) {
  api::XidEvent e = in;
  if (e.count <= 0) e.count = 1;
  if (e.message.size() > kMaxMessageBytes) e.message.resize(kMaxMessageBytes);
  if (e.first_seen == WallTime{}) e.first_seen = e.last_seen;
  if (e.last_seen == WallTime{}) e.last_seen = e.first_seen;

  std::scoped_lock lock(mu_);
  ++changes_;
  for (auto& entry : entries_) {
    if (!SameKey(entry.event, e)) continue;
    auto& x = entry.event;
    const bool duplicate = entry.last_source != source && e.count == 1 &&
                           e.last_seen - x.last_seen < dedupe_window_ &&
                           x.last_seen - e.last_seen < dedupe_window_;
    int64_t counted = duplicate ? 0 : e.count;
    x.count += counted;
    x.first_seen = std::min(x.first_seen, e.first_seen);
    x.last_seen = std::max(x.last_seen, e.last_seen);
    if (!e.message.empty()) x.message = e.message;
    // Fill what the first sighting lacked (kmsg knows the PCI address, NVML the UUID).
    if (x.gpu_uuid.empty()) x.gpu_uuid = e.gpu_uuid;
    if (x.pci_bus_id.empty()) x.pci_bus_id = e.pci_bus_id;
    if (!x.gpu_instance) x.gpu_instance = e.gpu_instance;
    if (!x.compute_instance) x.compute_instance = e.compute_instance;
    // A later driver-reported action or category refines the classification.
    if (!e.recommended_action.empty()) x.recommended_action = e.recommended_action;
    if (!e.category.empty()) x.category = e.category;
    entry.last_source = source;
    entry.seq = ++seq_;
    return counted;
  }
  if (entries_.size() >= capacity_) {
    auto oldest =
        std::min_element(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) {
          return a.event.last_seen != b.event.last_seen ? a.event.last_seen < b.event.last_seen
                                                        : a.seq < b.seq;
        });
    entries_.erase(oldest);
    ++evicted_;
  }
  entries_.push_back(Entry{e, source, ++seq_});
  return e.count;
}

std::vector<api::XidEvent> XidRing::Entries() const {
  std::vector<const Entry*> sorted;
  std::scoped_lock lock(mu_);
  sorted.reserve(entries_.size());
  for (const auto& e : entries_) sorted.push_back(&e);
  std::sort(sorted.begin(), sorted.end(), [](const Entry* a, const Entry* b) {
    return a->event.last_seen != b->event.last_seen ? a->event.last_seen < b->event.last_seen
                                                    : a->seq < b->seq;
  });
  std::vector<api::XidEvent> out;
  out.reserve(sorted.size());
  for (const auto* e : sorted) out.push_back(e->event);
  return out;
}

std::size_t XidRing::size() const {
  std::scoped_lock lock(mu_);
  return entries_.size();
}
uint64_t XidRing::evicted() const {
  std::scoped_lock lock(mu_);
  return evicted_;
}
uint64_t XidRing::changes() const {
  std::scoped_lock lock(mu_);
  return changes_;
}

}  // namespace gg::agent
