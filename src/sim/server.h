// SimServer: the in-memory Kubernetes API server (gpu-guardian-sim) as an in-process object.
// Start() binds and serves HTTP(S) on loopback; tests and the population code may also use
// the direct store API below, which bypasses HTTP but still bumps resourceVersion and
// notifies watchers. Wire contract: docs/reference/kubernetes-api.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/status.h"

namespace gg::sim {

struct SimOptions {
  std::string listen = "127.0.0.1:0";  // HOST:PORT; port 0 picks a free one
  bool tls = false;
  // With tls: PEM files to serve; when empty a CA + server cert are generated into
  // tls_dir (a temp dir when empty). The CA is available via CaCertPem().
  std::string tls_cert_file, tls_key_file, tls_dir;
  std::string kube_version = "1.35";  // 1.33 | 1.34 | 1.35 | 1.36 (resource.k8s.io versions)
  // Directory with the real OpenAPI v3 documents (release-1.32 layout). Empty: the
  // compiled-in default (the repo copy in src/sim/data/openapi), if present.
  std::string openapi_dir;
  std::size_t watch_history = 20000;  // events kept per resource for watch resume; older RV -> 410
  std::size_t watcher_queue_limit = 200000;           // a watcher this far behind is closed
  int http_threads = 256;                             // each open watch holds one
  std::chrono::milliseconds bookmark_interval{1000};  // idle time before a BOOKMARK
  // Simulated cluster behavior.
  bool kubelet = true;      // finishes pod termination after grace; marks bound pods Running
  bool scheduler = true;    // binds pending pods to schedulable nodes with free nvidia.com/gpu
  bool controllers = true;  // DaemonSet/ReplicaSet pods, PDB status
  double time_scale = 1.0;  // grace periods are divided by this
  // Start the simulated cluster's loops only at StartControllers(): a caller seeding a
  // population inserts it first, so the loops' initial sync sees it whole (otherwise a
  // ReplicaSet inserted before its pods gets replacements created for them).
  bool defer_controllers = false;
  std::size_t max_body_bytes = 3 * 1024 * 1024;
  Clock* clock = nullptr;  // nullptr: RealClock::Default()
  // Authorization: "" (allow all) or "rbac" (needs sim/rbac.h); bearer token -> user map
  // comes from token_users ("token" -> "system:serviceaccount:ns:name").
  // Tokens map to users; "system:masters" members (the default "admin" token of the
  // kubeconfig) bypass authorization like cluster-admin.
  std::string authz;
  std::vector<std::pair<std::string, std::string>> token_users;
  std::vector<std::string> rbac_files;  // YAML manifests loaded into the authorizer
  bool log_requests = false;
  // Pods as real processes (sim/pod_runner.h): a pod whose image basename is an executable
  // in exec_images runs as a process on its node; node_root holds the nodes' files
  // (ROOT/<node>/dev/kmsg, nvml.yaml, var/log/pods). Needs root and tls.
  std::string exec_images, node_root;
  std::string pod_init_exe;   // runs `__gg_pod_init FD`; empty: this process's executable
  std::string fake_nvml_dir;  // libnvidia-ml.so.1 for GPU pods; empty: next to exec_images
};

// One rule of fault injection. Empty verb/resource match everything.
struct FaultRule {
  std::string verb;             // get list watch create update patch delete deletecollection
  std::string resource;         // plural, e.g. "pods" ("pods/eviction" also matches subresource)
  double error_rate = 0;        // probability [0,1] of answering error_code
  int error_code = 500;         // 429/500/503/...
  int retry_after_seconds = 0;  // Retry-After header (and details.retryAfterSeconds)
  std::chrono::milliseconds latency{0};  // added before handling
  int remaining = -1;                    // how many more times it may fire (-1: unlimited)
};

struct FaultConfig {
  std::vector<FaultRule> rules;
  // Whole API (not /_sim, /healthz) answers 503 until this monotonic deadline.
  std::chrono::steady_clock::time_point outage_until{};
  int watch_cut_after_events = 0;           // >0: close every watch stream after N events
  int force_watch_410 = 0;                  // next N watch requests answer ERROR 410 Expired
  std::size_t slow_body_bytes_per_sec = 0;  // >0: LIST/GET bodies dribbled at this rate
};

class SimServer {
 public:
  static StatusOr<std::unique_ptr<SimServer>> Start(SimOptions opts);
  ~SimServer();
  SimServer(const SimServer&) = delete;
  SimServer& operator=(const SimServer&) = delete;

  std::string Url() const;  // "http://127.0.0.1:PORT" (https with tls)
  int Port() const;
  const SimOptions& options() const;
  std::string CaCertPem() const;  // with tls: the CA the clients must trust

  // Direct store access (api paths as on the wire, e.g. "/api/v1/nodes",
  // "/api/v1/namespaces/default/pods/p1", "/apis/apps/v1/namespaces/ns/daemonsets").
  // Create keeps .status as given (seeding; the HTTP path resets it as the real server does).
  Status Create(std::string_view api_path_of_collection, const nlohmann::json& obj);
  StatusOr<nlohmann::json> CreateAndGet(std::string_view api_path_of_collection,
                                        const nlohmann::json& obj);
  StatusOr<nlohmann::json> Get(std::string_view api_path_of_object);
  // Replaces the object (main resource + status); resourceVersion in obj is checked if set.
  StatusOr<nlohmann::json> Update(std::string_view api_path_of_object, const nlohmann::json& obj);
  // RFC 7386 merge patch of the whole object (status included).
  StatusOr<nlohmann::json> MergePatch(std::string_view api_path_of_object,
                                      const nlohmann::json& patch);
  // Immediate removal (no grace, finalizers ignored).
  Status Delete(std::string_view api_path_of_object);
  StatusOr<nlohmann::json> List(std::string_view api_path_of_collection);
  // Seeds one object whose collection follows from apiVersion/kind/metadata.namespace
  // (what population and scenarios emit). Status kept as given.
  Status Insert(const nlohmann::json& obj);
  std::uint64_t ResourceVersion() const;  // current global RV
  std::size_t ObjectCount() const;
  // Starts the simulated cluster's loops (kubelet, scheduler, controllers) if they are
  // deferred; a no-op when they already run.
  void StartControllers();

  // Fault injection (same as POST /_sim/faults).
  void SetFaults(FaultConfig faults);
  void ClearFaults();
  // Drops all watch history up to now: any watch resuming from an older RV gets 410.
  void CompactHistory();
  std::size_t ActiveWatches() const;

  void Stop();

  struct Impl;

 private:
  explicit SimServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gg::sim
