// Pure parser for NVIDIA driver lines in the kernel log: /dev/kmsg records
// ("pri,seq,ts_usec,flags[,...];message") and plain dmesg/journal text. Recognizes every NVRM
// Xid variant (with/without pid and process name, MIG GPU-I/GPU-CI, no "PCI:" prefix),
// nvswitch SXids and "fallen off the bus" without an Xid (reported as Xid 79).
// No I/O, no clock: safe to fuzz.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gg::gpu {

struct KmsgXid {
  int xid = 0;                  // Xid or SXid number; 79 for "fallen off the bus" lines
  bool sxid = false;            // nvidia-nvswitchN SXid
  bool fallen_off_bus = false;  // synthesized from a "fallen off the bus" line without an Xid
  int nvswitch = -1;            // N of nvidia-nvswitchN for SXids
  std::optional<bool> fatal;    // SXid "Fatal"/"Non-fatal"; NVLink5 "Fatal"/"Nonfatal"
  std::optional<int> link;      // SXid / NVLink5 "Link NN"
  // PCI address as integers and normalized text "0000:3b:00.0" (lower-case, >= 4-digit
  // domain, function .0 when the driver omitted it).
  uint32_t pci_domain = 0;
  uint32_t pci_bus = 0;
  uint32_t pci_device = 0;
  uint32_t pci_function = 0;
  std::string pci_bus_id;
  std::optional<int64_t> pid;                // absent for "pid='<unknown>'" or no pid
  std::string process_name;                  // empty for "<unknown>" or none
  std::optional<uint32_t> gpu_instance;      // MIG "GPU-I:NN"
  std::optional<uint32_t> compute_instance;  // MIG "GPU-CI:NN"
  std::string message;                       // text after the Xid/pid/name (may be empty)
  std::optional<uint64_t> kmsg_seq;          // from a /dev/kmsg record header
  std::optional<uint64_t> ts_usec;           // kmsg monotonic µs since boot (or dmesg [s.us])
};

// One line or one kmsg record (its continuation " KEY=value" lines and escaped "\x0a" are
// handled). nullopt for anything that is not an NVIDIA Xid/SXid/fallen-off-bus line.
std::optional<KmsgXid> ParseKmsgLine(std::string_view line);

// "0000:3b:00.0" from integers (the normalized form above).
std::string FormatPciBusId(uint32_t domain, uint32_t bus, uint32_t device, uint32_t function = 0);
// Parses "0000:3b:00", "00000000:3B:00.0", "3b:00.0" (domain 0) into integers.
bool ParsePciBusId(std::string_view text, uint32_t* domain, uint32_t* bus, uint32_t* device,
                   uint32_t* function = nullptr);

}  // namespace gg::gpu
