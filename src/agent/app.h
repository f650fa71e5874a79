// AgentApp: the agent's wiring, from a plain config (filled from flags by main.cc) to running
// objects: XidClassifier (flags + DP_* env), sources, Node look-up, publishers, metrics and
// the /metrics + /healthz server. Kept out of main() so tests can run the whole agent
// in-process against the simulator.
#pragma once

#include <iosfwd>
#include <memory>
#include <stop_token>
#include <string>
#include <vector>

#include "agent/agent.h"
#include "agent/agent_metrics.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/status.h"
#include "gpu/nvml_api.h"
#include "gpu/xid_catalog.h"
#include "k8s/config.h"
#include "k8s/rest_client.h"
#include "metrics/http_server.h"
#include "metrics/registry.h"

namespace gg::agent {

class NvmlSource;

// The agent's version as written into reports (the CMake project version).
std::string_view AgentVersion();

inline constexpr char kDefaultMetricsAddr[] = ":9402";

struct AgentConfig {
  std::string node_name;                            // --node-name (default $NODE_NAME)
  std::string kubeconfig;                           // --kubeconfig
  std::string server;                               // --server
  std::vector<std::string> sources = {"nvml"};      // --source nvml,kmsg,file,script
  std::string file_path;                            // --file (source "file")
  std::string script_path;                          // --script (source "script")
  double time_scale = 1.0;                          // --time-scale (script timelines)
  std::vector<std::string> publish = {"resource"};  // --publish resource,annotation
  Duration heartbeat = std::chrono::minutes(5);     // --heartbeat
  // --lease-namespace: where the node's heartbeat Lease lives ("": the pod's own namespace
  // from the service-account namespace file, then $POD_NAMESPACE, else gpu-guardian).
  std::string lease_namespace;
  Duration sweep_interval = std::chrono::seconds(10);  // --sweep-interval
  Duration debounce = std::chrono::milliseconds(200);  // --debounce
  bool once = false;                                   // --once
  bool print = false;                                  // --print
  std::string metrics_addr = kDefaultMetricsAddr;      // --metrics-addr ("" or "0": off)
  std::string xid_ignore;                              // --xid-ignore 13,31
  std::string xid_critical;                            // --xid-critical 63
  bool honor_device_plugin_env = true;                 // DP_DISABLE/ENABLE_HEALTHCHECKS
  // --xid-ignore-dp-defaults: also ignore the device plugin's hard-coded "application" Xids
  // (gpu::kDevicePluginIgnoredXids: 13,31,43,45,68,109), as the plugin always does; an Xid
  // listed in --xid-critical or DP_ENABLE_HEALTHCHECKS stays critical.
  bool xid_ignore_dp_defaults = false;
  std::string kmsg_path = "/dev/kmsg";             // --kmsg-path
  bool kmsg_from_boot = false;                     // --kmsg-from-boot
  std::string nvml_library = "libnvidia-ml.so.1";  // --nvml-library
  std::size_t xid_ring_size = 64;                  // --xid-ring-size
  std::chrono::milliseconds nvml_deadline{5000};   // --nvml-deadline
};

// Flag-level checks (unknown source/publish names, missing --file/--script, node name when
// publishing). InvalidArgument naming the flag.
Status ValidateConfig(const AgentConfig& config);
// The namespace of the node's heartbeat Lease when --lease-namespace is not given: the pod's
// own (<sa_dir>/namespace, then $POD_NAMESPACE), else api::kDefaultNamespace.
std::string DefaultLeaseNamespace(const k8s::ConfigEnv& env = k8s::ConfigEnv::Real(),
                                  const std::string& sa_dir = k8s::kServiceAccountDir);
// "nvml,kmsg" -> {"nvml","kmsg"} (trimmed, empty items dropped).
std::vector<std::string> SplitList(std::string_view list);

class AgentApp {
 public:
  // `nvml_override` replaces the dlopen loader for the nvml source (tests); `client_override`
  // replaces the RestClient built from kubeconfig/--server. Both must outlive the app.
  static StatusOr<std::unique_ptr<AgentApp>> Create(AgentConfig config, Clock& clock,
                                                    metrics::Registry& registry,
                                                    Logger log = Logger(),
                                                    gpu::NvmlApi* nvml_override = nullptr,
                                                    k8s::RestClient* client_override = nullptr);
  ~AgentApp();

  // --once: read every source to its current end, print (when config.print) and return the
  // exit code: 0 when every source is OK, 1 when any is Unavailable or Degraded (the report
  // is still printed/written), 2 when the write failed. With publishing configured (not
  // --print) the report is also written once.
  int RunOnce(std::ostream& out);
  // Runs until `stop`: starts the metrics server, sources, builder, publishers.
  Status Start(std::stop_token stop);
  void Stop();

  Agent& agent() { return *agent_; }
  int metrics_port() const { return metrics_port_; }
  const AgentConfig& config() const { return config_; }
  // The Xid classification in force (flags + DP_* environment).
  const gpu::XidClassifier& classifier() const { return *classifier_; }

 private:
  AgentApp(AgentConfig config, Clock& clock, metrics::Registry& registry, Logger log);
  Status Wire(gpu::NvmlApi* nvml_override, k8s::RestClient* client_override);
  Status MakeClassifier();
  Status MakeClient(k8s::RestClient* client_override);
  int ReadExpectedGpus();
  Status MakeSources(gpu::NvmlApi* nvml_override, int expected);
  std::unique_ptr<Source> MakeKmsgSource(NvmlSource* gpu_source);
  void MakePublishers();

  AgentConfig config_;
  Clock& clock_;
  metrics::Registry& registry_;
  Logger log_;
  std::unique_ptr<gpu::XidClassifier> classifier_;
  std::unique_ptr<gpu::NvmlApi> nvml_;  // the real loader when the nvml source is on
  std::unique_ptr<k8s::RestClient> owned_client_;
  k8s::RestClient* client_ = nullptr;
  std::unique_ptr<AgentMetrics> metrics_;
  std::unique_ptr<Agent> agent_;
  std::unique_ptr<metrics::HealthServer> server_;
  int metrics_port_ = 0;
};

}  // namespace gg::agent
