// GPUNodeHealth (gpuguardian.io/v1alpha1): the per-node report the agent publishes and the
// operator reads. It carries raw facts plus the agent's Xid classification; decisions are the
// operator's. Wire names are camelCase JSON; see docs/api.md for the full shape.
//
// The same struct is also the payload of the legacy Node annotation of the original
// gpu-guardian-operator design (docs/reference/README.md) `gpuguardian.io/health` (compact JSON,
// with "v": 1).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/status.h"

namespace gg::api {

inline constexpr char kGroup[] = "gpuguardian.io";
inline constexpr char kVersion[] = "v1alpha1";
inline constexpr char kApiVersion[] = "gpuguardian.io/v1alpha1";
inline constexpr char kHealthAnnotation[] = "gpuguardian.io/health";
inline constexpr char kRemediationAnnotation[] = "gpuguardian.io/remediation";
inline constexpr char kTaintKey[] = "gpuguardian.io/unhealthy";
inline constexpr char kExcludeLabel[] = "gpuguardian.io/exclude";
inline constexpr char kConditionType[] = "GPUHealthy";
// The agent's per-node heartbeat Lease (coordination.k8s.io/v1) in its own namespace: named
// kAgentLeasePrefix + node name, holderIdentity = node name, labelled kAgentLeaseLabel=true
// (the operator's informer selects them by that label).
inline constexpr char kAgentLeasePrefix[] = "gpu-guardian-agent-";
inline constexpr char kAgentLeaseLabel[] = "gpuguardian.io/agent-lease";
// The heartbeat Lease's name for a node, and the node a Lease name speaks for ("" when the name
// is not kAgentLeasePrefix + a node name).
std::string AgentLeaseName(std::string_view node);
std::string_view AgentLeaseNode(std::string_view lease_name);
// Where the shipped manifests (deploy/) run the agent and the operator.
inline constexpr char kDefaultNamespace[] = "gpu-guardian";

// State of one telemetry source ("nvml", "kmsg", "file", "script").
enum class SourceState { kOk, kDegraded, kUnavailable };
std::string_view SourceStateName(SourceState s);  // "OK" | "Degraded" | "Unavailable"

struct SourceStatus {
  std::string name;
  SourceState state = SourceState::kUnavailable;
  std::string message;  // why degraded/unavailable (e.g. "libnvidia-ml.so.1: not found")
};

// One Xid (or SXid) seen on the node, aggregated by (xid, gpu) in a bounded ring.
struct XidEvent {
  int xid = 0;
  bool sxid = false;       // NVSwitch SXid rather than GPU Xid
  std::string gpu_uuid;    // empty when it could not be mapped to a GPU
  std::string pci_bus_id;  // as printed by the driver, normalized "0000:3b:00.0"
  int64_t count = 0;       // occurrences since first_seen
  WallTime first_seen{};
  WallTime last_seen{};
  std::string category;            // catalog category, e.g. "Memory", "Bus", "Application"
  std::string recommended_action;  // catalog or driver action: IGNORE, RESTART_APP, RESET_GPU,
                                   // RESTART_BM, CONTACT_SUPPORT, ...
  std::string message;             // last raw text (truncated to 256 bytes)
  // MIG attribution: the GPU instance / compute instance the driver blamed (kernel log
  // "GPU-I:NN GPU-CI:NN", NVML event gpuInstanceId/computeInstanceId). Absent for a
  // whole-GPU error or a GPU without MIG.
  std::optional<uint32_t> gpu_instance;
  std::optional<uint32_t> compute_instance;
};

// One MIG device (a compute instance inside a GPU instance) of a MIG-enabled GPU.
struct MigDevice {
  uint32_t index = 0;                  // NVML MIG device slot on the parent GPU
  std::string uuid;                    // "MIG-..."
  uint32_t gpu_instance = 0;           // GPU-instance id (the "GPU-I" of kernel Xids)
  uint32_t compute_instance = 0;       // compute-instance id ("GPU-CI")
  std::string profile;                 // e.g. "1g.10gb", from the MIG device's name; may be empty
  std::optional<uint64_t> memory_mib;  // framebuffer of the instance
};

struct GpuStatus {
  int index = 0;
  std::string uuid;  // "GPU-..."; key used by policies and DRA mapping
  std::string name;  // model name
  std::string serial;
  std::string pci_bus_id;    // "00000000:3B:00.0" as NVML prints it
  bool lost = false;         // NVML_ERROR_GPU_IS_LOST, fallen off the bus, or call hang
  bool mig_enabled = false;  // current MIG mode
  std::optional<bool> mig_pending_enabled;  // MIG mode after the next GPU reset; absent if unknown
  std::vector<MigDevice> mig_devices;       // MIG devices, by slot index (empty without MIG)

  std::optional<int> temperature_c;
  std::optional<int> slowdown_temperature_c;
  std::optional<int> shutdown_temperature_c;
  // Active clock-event (throttle) reason names, e.g. "HwThermalSlowdown", "SwPowerCap".
  std::vector<std::string> throttle_reasons;
  std::optional<double> power_watts;
  std::optional<double> power_limit_watts;

  bool ecc_enabled = false;
  std::optional<uint64_t> ecc_corrected_volatile;
  std::optional<uint64_t> ecc_uncorrected_volatile;
  std::optional<uint64_t> ecc_corrected_aggregate;
  std::optional<uint64_t> ecc_uncorrected_aggregate;

  // Row remapping (Ampere+); absent on older GPUs, which report retired pages instead.
  std::optional<uint32_t> remapped_rows_correctable;
  std::optional<uint32_t> remapped_rows_uncorrectable;
  bool remap_pending = false;
  bool remap_failure = false;
  std::optional<uint32_t> retired_pages_sbe;
  std::optional<uint32_t> retired_pages_dbe;
  bool retired_pages_pending = false;

  std::optional<uint64_t> pcie_replay_count;
  std::optional<int> nvlink_links_total;
  std::optional<int> nvlink_links_down;
  std::optional<uint64_t> nvlink_error_count;  // CRC + replay + recovery, summed

  // Driver-reported GPU recovery action (NVML field 230): "None", "GpuReset", "NodeReboot",
  // "DrainP2P", "DrainAndReset"; empty when not supported.
  std::string recovery_action;
};

// GPUNodeHealth.status
struct GpuNodeHealthStatus {
  std::string node_name;
  std::string agent_version;
  WallTime observed_at{};     // when these facts were collected
  WallTime heartbeat_time{};  // last time the agent wrote (changes or heartbeat)
  int expected_gpus = 0;      // node's nvidia.com/gpu capacity as the agent saw it (0 = unknown)
  std::vector<GpuStatus> gpus;
  std::vector<XidEvent> xids;  // recent, bounded (default 64 entries), newest last
  std::vector<SourceStatus> sources;
};

// Codecs (gpu_node_health_codec.cc). Decode is strict on types (wrong type ->
// InvalidArgument naming the field) and ignores unknown fields. Encode produces the
// `status` object only; the agent wraps it in the full resource.
StatusOr<GpuNodeHealthStatus> DecodeGpuNodeHealthStatus(std::string_view status_json);
std::string EncodeGpuNodeHealthStatus(const GpuNodeHealthStatus& status);
// Legacy annotation payload: {"v":1, ...status fields...}.
StatusOr<GpuNodeHealthStatus> DecodeHealthAnnotation(std::string_view annotation);
std::string EncodeHealthAnnotation(const GpuNodeHealthStatus& status);

// Equality of facts, ignoring observed_at/heartbeat_time (used to write only on change).
bool SameFacts(const GpuNodeHealthStatus& a, const GpuNodeHealthStatus& b);

}  // namespace gg::api
