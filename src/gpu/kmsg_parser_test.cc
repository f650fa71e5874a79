// Table-driven tests of ParseKmsgLine over real-world NVRM/SXid variants and garbage.
#include "gpu/kmsg_parser.h"

#include <gtest/gtest.h>

#include <random>

namespace gg::gpu {
namespace {

struct Case {
  const char* name;
  const char* line;
  int xid;
  const char* pci;  // normalized
  int64_t pid;      // -1: absent
  const char* process;
  const char* message;
};

const Case kCases[] = {
    {"kmsg_unknown_pid",
     "4,1234,16450076435595,-;NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU "
     "has fallen off the bus.",
     79, "0000:3b:00.0", -1, "", "GPU has fallen off the bus."},
    {"with_pid_name",
     "NVRM: Xid (PCI:0000:18:00): 109, pid=1797828, name=pt_main_thread, Ch 00000008, errorString "
     "CTX SWITCH TIMEOUT, Info 0x58005",
     109, "0000:18:00.0", 1797828, "pt_main_thread",
     "Ch 00000008, errorString CTX SWITCH TIMEOUT, Info 0x58005"},
    {"channel_id",
     "NVRM: Xid (PCI:0000:b7:00): 32, pid=2280636, name=train.3, Channel ID 0000000d intr0 "
     "00040000",
     32, "0000:b7:00.0", 2280636, "train.3", "Channel ID 0000000d intr0 00040000"},
    {"no_pid",
     "NVRM: Xid (PCI:0000:55:00): 48, An uncorrectable double bit error (DBE) has been detected on "
     "GPU in the framebuffer at partition 6, subpartition 0.",
     48, "0000:55:00.0", -1, "",
     "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at "
     "partition 6, subpartition 0."},
    {"old_pid_no_name", "NVRM: Xid (PCI:0000:01:00): 79, pid=1173, GPU has fallen off the bus.", 79,
     "0000:01:00.0", 1173, "", "GPU has fallen off the bus."},
    {"no_pci_prefix", "NVRM: Xid (0000:03:00): 14, Channel 00000001", 14, "0000:03:00.0", -1, "",
     "Channel 00000001"},
    {"mig_gi", "NVRM: Xid (PCI:0000:3b:00 GPU-I:05): 43, pid=99, name=python, Ch 00000010", 43,
     "0000:3b:00.0", 99, "python", "Ch 00000010"},
    {"mig_gi_ci",
     "NVRM: Xid (PCI:0000:3b:00 GPU-I:01 GPU-CI:00): 31, pid=4242, name=app, MMU Fault: ENGINE "
     "GRAPHICS",
     31, "0000:3b:00.0", 4242, "app", "MMU Fault: ENGINE GRAPHICS"},
    {"nvlink5",
     "NVRM: Xid (PCI:0018:01:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 08 (0x004505c6 0x00000000 "
     "0x00000000)",
     149, "0018:01:00.0", -1, "",
     "NETIR_LINK_EVT Fatal XC0 i0 Link 08 (0x004505c6 0x00000000 0x00000000)"},
    {"recovery_154",
     "NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU "
     "Reset Required)",
     154, "0000:3b:00.0", -1, "",
     "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"},
    {"xid_45_previous",
     "NVRM: Xid (PCI:0000:3b:00): 45, pid=12, name=x, Ch 00000001, caused by previous Xid 79", 45,
     "0000:3b:00.0", 12, "x", "Ch 00000001, caused by previous Xid 79"},
    {"minimal", "NVRM: Xid (PCI:0000:3b:00): 79", 79, "0000:3b:00.0", -1, "", ""},
    {"vmd_domain", "NVRM: Xid (PCI:10000:01:00): 95, Uncontained", 95, "10000:01:00.0", -1, "",
     "Uncontained"},
    {"journald",
     "Nov 29 10:00:00 host kernel: [16450076.435595] NVRM: Xid (PCI:0000:3B:00): 63, Row remapper "
     "event",
     63, "0000:3b:00.0", -1, "", "Row remapper event"},
    {"dmesg_T",
     "[Fri Aug 30 11:43:09 2024] NVRM: Xid (PCI:0001:c1:00): 13, pid='<unknown>', name=<unknown>, "
     "Graphics SM Warp Exception on (GPC 1, TPC 3, SM 0): Out Of Range Address",
     13, "0001:c1:00.0", -1, "",
     "Graphics SM Warp Exception on (GPC 1, TPC 3, SM 0): Out Of Range Address"},
    {"gddr_171", "NVRM: Xid (PCI:0000:3b:00): 171, GDDR, Uncorrectable DRAM error in FBPA 3", 171,
     "0000:3b:00.0", -1, "", "GDDR, Uncorrectable DRAM error in FBPA 3"},
    {"kmsg_caller_field",
     "3,99,5000,-,caller=T123;NVRM: Xid (PCI:0000:3b:00): 62, pid=1, name=a, Internal "
     "micro-controller halt",
     62, "0000:3b:00.0", 1, "a", "Internal micro-controller halt"},
    {"kmsg_dictionary",
     "4,1235,16450076435600,-;NVRM: Xid (PCI:0000:3b:00): 119, Timeout after 6s\n SUBSYSTEM=pci\n "
     "DEVICE=+pci:0000:3b:00.0",
     119, "0000:3b:00.0", -1, "", "Timeout after 6s"},
    {"fallen_single", "NVRM: GPU 0000:18:00.0: GPU has fallen off the bus.", 79, "0000:18:00.0", -1,
     "", "GPU has fallen off the bus"},
    {"fallen_multi_kmsg",
     "4,77,123,-;NVRM: The NVIDIA GPU 0000:b3:00.0\\x0aNVRM: (PCI ID: 10de:26b5) installed in this "
     "system has\\x0aNVRM: fallen off the bus and is not responding to commands.",
     79, "0000:b3:00.0", -1, "", "GPU has fallen off the bus"},
};

TEST(KmsgParserTest, RealWorldVariants) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    auto x = ParseKmsgLine(c.line);
    ASSERT_TRUE(x.has_value());
    EXPECT_EQ(x->xid, c.xid);
    EXPECT_EQ(x->pci_bus_id, c.pci);
    if (c.pid < 0) {
      EXPECT_FALSE(x->pid.has_value());
    } else {
      ASSERT_TRUE(x->pid.has_value());
      EXPECT_EQ(*x->pid, c.pid);
    }
    EXPECT_EQ(x->process_name, c.process);
    EXPECT_EQ(x->message, c.message);
    EXPECT_FALSE(x->sxid);
  }
}

TEST(KmsgParserTest, KmsgHeaderFields) {
  auto x = ParseKmsgLine(
      "4,1234,16450076435595,-;NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.");
  ASSERT_TRUE(x);
  EXPECT_EQ(x->kmsg_seq, 1234u);
  EXPECT_EQ(x->ts_usec, 16450076435595u);
  EXPECT_EQ(x->pci_domain, 0u);
  EXPECT_EQ(x->pci_bus, 0x3bu);
  EXPECT_EQ(x->pci_device, 0u);

  auto d = ParseKmsgLine("[ 1234.5] NVRM: Xid (PCI:0000:3b:00): 79, x");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->ts_usec, 1234500000u);
  EXPECT_FALSE(d->kmsg_seq);
}

TEST(KmsgParserTest, MigInstances) {
  auto x = ParseKmsgLine("NVRM: Xid (PCI:0000:3b:00 GPU-I:01 GPU-CI:02): 31, pid=1, name=a, m");
  ASSERT_TRUE(x);
  EXPECT_EQ(x->gpu_instance, 1u);
  EXPECT_EQ(x->compute_instance, 2u);
  auto y = ParseKmsgLine("NVRM: Xid (PCI:0000:3b:00): 31, m");
  ASSERT_TRUE(y);
  EXPECT_FALSE(y->gpu_instance);
}

TEST(KmsgParserTest, Nvlink5Details) {
  auto x = ParseKmsgLine(
      "NVRM: Xid (PCI:0018:01:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 08 (0x004505c6 0x0)");
  ASSERT_TRUE(x);
  EXPECT_EQ(x->fatal, true);
  EXPECT_EQ(x->link, 8);
  auto y =
      ParseKmsgLine("NVRM: Xid (PCI:0018:01:00): 145, RLW_REMAP Nonfatal XC1 i2 Link 17 (0x1 0x2)");
  ASSERT_TRUE(y);
  EXPECT_EQ(y->fatal, false);
  EXPECT_EQ(y->link, 17);
}

TEST(KmsgParserTest, Sxid) {
  auto x = ParseKmsgLine(
      "6,5,100,-;nvidia-nvswitch3: SXid (PCI:0000:c1:00.0): 28006, Non-fatal, Link 46 MC TS "
      "crumbstore MCTO (First)");
  ASSERT_TRUE(x);
  EXPECT_TRUE(x->sxid);
  EXPECT_EQ(x->xid, 28006);
  EXPECT_EQ(x->nvswitch, 3);
  EXPECT_EQ(x->pci_bus_id, "0000:c1:00.0");
  EXPECT_EQ(x->fatal, false);
  EXPECT_EQ(x->link, 46);

  auto f = ParseKmsgLine("nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 26008, SOE Watchdog error");
  ASSERT_TRUE(f);
  EXPECT_TRUE(f->sxid);
  EXPECT_EQ(f->xid, 26008);
  EXPECT_FALSE(f->fatal.has_value());
  EXPECT_FALSE(f->link.has_value());
  auto g = ParseKmsgLine(
      "nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 30 LTSSM Fault Up");
  ASSERT_TRUE(g);
  EXPECT_EQ(g->fatal, true);
  EXPECT_EQ(g->link, 30);
}

TEST(KmsgParserTest, FallenOffFlags) {
  auto x = ParseKmsgLine("NVRM: GPU 0000:18:00.0: GPU has fallen off the bus.");
  ASSERT_TRUE(x);
  EXPECT_TRUE(x->fallen_off_bus);
  EXPECT_EQ(x->xid, 79);
}

TEST(KmsgParserTest, NotOurs) {
  const char* kLines[] = {
      "",
      "4,1,2,-;usb 1-1: new high-speed USB device number 2 using xhci_hcd",
      "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  580.105.08",
      "NVRM: GPU at PCI:0000:3b:00: GPU-6a3f0c9e-1d2b-4c5d-8e7f-0123456789ab",
      "NVRM: GPU Board Serial Number: 1652321001234",
      "NVRM: Xid (PCI:zzzz:3b:00): 79, bad pci",
      "NVRM: Xid (PCI:0000:3b:00): abc, not a number",
      "NVRM: Xid (PCI:0000:3b:00): 79abc",
      "NVRM: Xid (PCI:0000:3b:00",
      "NVRM: Xid (",
      "NVRM: Xid (PCI:0000:3b:00 GPU-I:): 43, x",
      "nvidia-nvswitch: SXid (PCI:0000:c1:00.0): 1, x",
      "SXid",
      "NVRM: fallen off the bus and is not responding to commands.",
      "4,1234,16450076435595;NVRM without header end",
  };
  for (const char* l : kLines) {
    SCOPED_TRACE(l);
    EXPECT_FALSE(ParseKmsgLine(l).has_value());
  }
}

TEST(KmsgParserTest, PciHelpers) {
  uint32_t d = 0, b = 0, dev = 0, f = 9;
  ASSERT_TRUE(ParsePciBusId("00000000:3B:00.0", &d, &b, &dev, &f));
  EXPECT_EQ(d, 0u);
  EXPECT_EQ(b, 0x3bu);
  EXPECT_EQ(f, 0u);
  ASSERT_TRUE(ParsePciBusId("3b:01.1", &d, &b, &dev, &f));
  EXPECT_EQ(dev, 1u);
  EXPECT_EQ(f, 1u);
  EXPECT_FALSE(ParsePciBusId("3b", &d, &b, &dev));
  EXPECT_FALSE(ParsePciBusId("0:0:0:0", &d, &b, &dev));
  EXPECT_FALSE(ParsePciBusId("123456789:00:00", &d, &b, &dev));
  EXPECT_EQ(FormatPciBusId(0, 0x3b, 0), "0000:3b:00.0");
}

TEST(KmsgParserTest, RandomGarbageNeverCrashes) {
  std::mt19937 rng(42);
  const std::string seeds[] = {"NVRM: Xid (PCI:0000:3b:00 GPU-I:01): 79, pid=1, name=x, y",
                               "nvidia-nvswitch3: SXid (PCI:0000:c1:00.0): 28006, Fatal, Link 4",
                               "4,1,2,-;NVRM: GPU 0000:18:00.0: GPU has fallen off the bus."};
  for (int i = 0; i < 20000; ++i) {
    std::string s = seeds[static_cast<size_t>(i) % 3];
    int edits = 1 + static_cast<int>(rng() % 6);
    for (int e = 0; e < edits && !s.empty(); ++e) {
      size_t pos = rng() % s.size();
      switch (rng() % 3) {
        case 0:
          s[pos] = static_cast<char>(rng() % 256);
          break;
        case 1:
          s.erase(pos, 1 + rng() % 4);
          break;
        default:
          s.insert(pos, 1, static_cast<char>(rng() % 256));
          break;
      }
    }
    (void)ParseKmsgLine(s);
  }
}

}  // namespace
}  // namespace gg::gpu
