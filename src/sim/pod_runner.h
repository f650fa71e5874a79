// PodRunner: the part of the simulated kubelet that runs pods as real processes
// (`gpu-guardian-sim --exec-images DIR --node-root ROOT`). A pod qualifies when one of its
// containers' image repository basename names an executable in DIR
// ("ghcr.io/gpu-guardian/gpu-guardian-agent:0.1.0" -> DIR/gpu-guardian-agent); other
// containers of that pod, and all other pods, stay simulated.
//
// Each real pod gets what a kubelet + container runtime give it (docs/sim.md, "Pods as real
// processes"): its own pid, network, UTS, mount and IPC namespaces with an init process
// (pod_init.h) as pid 1; hostname = pod name; a veth pair with the pod IP (from the node's
// podCIDR); the API server at 10.96.0.1:443 (a relay to the simulator's listener);
// KUBERNETES_SERVICE_* and the service-account token, ca.crt and namespace at
// /var/run/secrets/kubernetes.io/serviceaccount; env with fieldRef/configMapKeyRef/
// secretKeyRef; the container securityContext (user, capabilities, no_new_privs, read-only
// root); hostPath volumes under ROOT/<node>/; the fake libnvidia-ml.so.1 for pods that ask
// for GPUs (NVIDIA_VISIBLE_DEVICES); init containers; startup/liveness/readiness probes
// driving Ready; restarts with back-off; SIGTERM, grace, SIGKILL on deletion; kubelet
// Events; CRI-format logs under
// ROOT/<node>/var/log/pods/<ns>_<name>_<uid>/<container>/<restartCount>.log.
//
// Everything dies with the simulator: pod inits carry PR_SET_PDEATHSIG, and a pid namespace
// takes all its processes down with its init; the veths go with their namespaces.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "common/status.h"

namespace gg::sim {

class ApiCore;

inline constexpr char kPodApiServerIp[] = "10.96.0.1";  // kubernetes.default.svc
inline constexpr int kPodApiServerPort = 443;

struct PodRunnerOptions {
  std::string exec_images;    // DIR of executables named after image basenames
  std::string node_root;      // ROOT: per-node files (ROOT/<node>/dev/kmsg, nvml.yaml, logs)
  std::string init_exe;       // a binary that runs PodInitMain on `__gg_pod_init FD`
  std::string fake_nvml_dir;  // holds libnvidia-ml.so.1 (empty: no GPU library injected)
  std::string api_host;       // where the relay connects (the simulator's listener)
  int api_port = 0;
  std::string ca_pem;       // the CA pods trust (ca.crt)
  double time_scale = 1.0;  // grace periods and restart back-off are divided by it
  // Bearer tokens of the pods' service accounts (user "system:serviceaccount:NS:NAME").
  std::function<void(const std::string& token, const std::string& user)> add_token;
  std::function<void(const std::string& token)> remove_token;
};

// One container's log file as the pods/log subresource needs it.
struct PodLogFile {
  std::string path;
  bool running = false;  // the container instance writing it still runs (follow keeps going)
};

class PodRunner {
 public:
  // Fails with a clear error without root, namespace support, the `ip` tool, or when another
  // simulator on this machine already runs pods (pod addresses and routes are per machine).
  static StatusOr<std::unique_ptr<PodRunner>> Create(ApiCore& core, PodRunnerOptions opts);
  ~PodRunner();
  PodRunner(const PodRunner&) = delete;
  PodRunner& operator=(const PodRunner&) = delete;

  // The executable for `image`, or "" when the image stays simulated.
  std::string ExecutableFor(const std::string& image) const;
  // True when `pod` has a container this runner runs.
  bool Handles(const nlohmann::json& pod) const;
  // Starts a bound pod on its node (asynchronously). `pod_ip`/`host_ip` are allocated.
  void Admit(const nlohmann::json& pod, const nlohmann::json& node, const std::string& pod_ip,
             const std::string& host_ip);
  // The pod got a deletionTimestamp: SIGTERM, wait `grace_seconds` (scaled), SIGKILL, then
  // remove the pod object (FinishTermination).
  void Terminate(const std::string& uid, long grace_seconds);
  // The pod object is gone: stop whatever still runs at once.
  void Forget(const std::string& uid);
  bool Runs(const std::string& uid) const;

  // The log of `container` of pod ns/name (previous: the instance before the last restart).
  // NotFound for pods this runner does not run; InvalidArgument for a bad container name.
  StatusOr<PodLogFile> LogFile(const std::string& ns, const std::string& name,
                               const std::string& container, bool previous) const;

  struct Impl;

 private:
  explicit PodRunner(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// "ghcr.io/gpu-guardian/gpu-guardian-operator:0.1.0" -> "gpu-guardian-operator".
std::string ImageBaseName(const std::string& image);
// Kubernetes $(VAR) expansion of command/args/env values ("$$" escapes, unknown refs kept).
std::string ExpandVars(const std::string& s, const std::map<std::string, std::string>& vars);

}  // namespace gg::sim
