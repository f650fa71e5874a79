// XidRing: aggregation by (xid, GPU), cross-source de-duplication, bounds and order.
#include "agent/xid_ring.h"

#include <gtest/gtest.h>

namespace gg::agent {
namespace {

using std::chrono::seconds;

WallTime T(int s) { return WallTime(seconds(1'800'000'000 + s)); }

api::XidEvent Xid(int xid, std::string uuid, WallTime at, std::string msg = "") {
  api::XidEvent e;
  e.xid = xid;
  e.gpu_uuid = std::move(uuid);
  e.count = 1;
  e.first_seen = e.last_seen = at;
  e.message = std::move(msg);
  return e;
}

TEST(XidRing, AggregatesByXidAndGpu) {
  XidRing ring(8);
  EXPECT_EQ(ring.Add(Xid(79, "GPU-a", T(0), "first"), "nvml"), 1);
  EXPECT_EQ(ring.Add(Xid(79, "GPU-a", T(10), "second"), "nvml"), 1);
  ring.Add(Xid(79, "GPU-b", T(5)), "nvml");
  ring.Add(Xid(13, "GPU-a", T(6)), "nvml");
  auto e = ring.Entries();
  ASSERT_EQ(e.size(), 3u);
  // Newest last: GPU-b@5, 13@6, GPU-a 79@10.
  EXPECT_EQ(e[0].gpu_uuid, "GPU-b");
  EXPECT_EQ(e[1].xid, 13);
  EXPECT_EQ(e[2].xid, 79);
  EXPECT_EQ(e[2].count, 2);
  EXPECT_EQ(e[2].first_seen, T(0));
  EXPECT_EQ(e[2].last_seen, T(10));
  EXPECT_EQ(e[2].message, "second");
}

TEST(XidRing, SameXidFromAnotherSourceIsNotCountedTwice) {
  XidRing ring(8, seconds(2));
  auto nvml = Xid(48, "GPU-a", T(0));
  auto kmsg = Xid(48, "GPU-a", T(1), "NVRM: Xid (PCI:0000:3b:00): 48, DBE");
  kmsg.pci_bus_id = "0000:3b:00.0";
  EXPECT_EQ(ring.Add(nvml, "nvml"), 1);
  EXPECT_EQ(ring.Add(kmsg, "kmsg"), 0);
  auto e = ring.Entries();
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].count, 1);
  EXPECT_EQ(e[0].pci_bus_id, "0000:3b:00.0");  // filled in from the kernel line
  EXPECT_EQ(e[0].message, kmsg.message);
  // Outside the window it is a new occurrence.
  EXPECT_EQ(ring.Add(Xid(48, "GPU-a", T(30)), "nvml"), 1);
  EXPECT_EQ(ring.Entries()[0].count, 2);
}

TEST(XidRing, UnmappedXidsAreKeyedByPci) {
  XidRing ring(8);
  auto a = Xid(79, "", T(0));
  a.pci_bus_id = "0000:3b:00.0";
  auto b = a;
  b.pci_bus_id = "0000:5e:00.0";
  ring.Add(a, "kmsg");
  ring.Add(b, "kmsg");
  ring.Add(a, "kmsg");
  ASSERT_EQ(ring.size(), 2u);
}

TEST(XidRing, BoundedEvictsLeastRecentlySeen) {
  XidRing ring(3);
  ring.Add(Xid(1, "GPU-a", T(1)), "nvml");
  ring.Add(Xid(2, "GPU-a", T(2)), "nvml");
  ring.Add(Xid(3, "GPU-a", T(3)), "nvml");
  ring.Add(Xid(1, "GPU-a", T(4)), "nvml");  // 1 is now the newest
  ring.Add(Xid(4, "GPU-a", T(5)), "nvml");  // evicts 2
  auto e = ring.Entries();
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(ring.evicted(), 1u);
  EXPECT_EQ(e[0].xid, 3);
  EXPECT_EQ(e[1].xid, 1);
  EXPECT_EQ(e[2].xid, 4);
  for (int i = 0; i < 1000; ++i) ring.Add(Xid(100 + i, "GPU-a", T(10 + i)), "nvml");
  EXPECT_EQ(ring.size(), 3u);
  EXPECT_EQ(ring.Entries().back().xid, 1099);
}

TEST(XidRing, AggregateCountsAndLongMessages) {
  XidRing ring(4);
  auto flood = Xid(13, "GPU-a", T(0), std::string(1000, 'x'));
  flood.count = 500;  // an aggregated kmsg callback
  EXPECT_EQ(ring.Add(flood, "kmsg"), 500);
  auto e = ring.Entries();
  EXPECT_EQ(e[0].count, 500);
  EXPECT_EQ(e[0].message.size(), XidRing::kMaxMessageBytes);
}

TEST(XidRing, MigInstancesOfOneGpuAreSeparateEntries) {
  XidRing ring(8);
  auto at = [](int xid, std::optional<uint32_t> gi, std::optional<uint32_t> ci, WallTime t) {
    api::XidEvent e = Xid(xid, "GPU-a", t);
    e.gpu_instance = gi;
    e.compute_instance = ci;
    return e;
  };
  ring.Add(at(13, 3, 0, T(0)), "kmsg");
  ring.Add(at(13, 5, 0, T(1)), "kmsg");
  ring.Add(at(13, 3, 0, T(30)), "kmsg");
  // NVML saw the first one too, without attribution: folded, not a third entry.
  EXPECT_EQ(ring.Add(at(13, std::nullopt, std::nullopt, T(31)), "nvml"), 0);
  auto e = ring.Entries();
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].gpu_instance, 5u);
  EXPECT_EQ(e[0].count, 1);
  EXPECT_EQ(e[1].gpu_instance, 3u);
  EXPECT_EQ(e[1].compute_instance, 0u);
  EXPECT_EQ(e[1].count, 2);
  // An attribution learnt later fills an entry that had none.
  XidRing r2(8);
  r2.Add(at(43, std::nullopt, std::nullopt, T(0)), "nvml");
  EXPECT_EQ(r2.Add(at(43, 1, 2, T(0)), "kmsg"), 0);
  ASSERT_EQ(r2.size(), 1u);
  EXPECT_EQ(r2.Entries()[0].gpu_instance, 1u);
  EXPECT_EQ(r2.Entries()[0].compute_instance, 2u);
}

}  // namespace
}  // namespace gg::agent
