// Pods as real processes (gpu-guardian-sim --exec-images): the simulator binary runs pods of
// tiny images (/bin/sh, kubectl, python3 under their own names) and the shipped agent
// DaemonSet, checked through kubectl and the node roots as a user would see them. Needs root
// and namespaces; skips (with the simulator's own reason) where they are missing.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "e2e/process.h"

namespace {

namespace fs = std::filesystem;
using gg::e2e::Process;
using gg::e2e::TempDir;
using nlohmann::json;
using namespace std::chrono_literals;

struct CmdResult {
  int rc = -1;
  std::string out;
};

CmdResult Sh(const std::string& cmd) {
  CmdResult r;
  FILE* f = ::popen((cmd + " 2>&1").c_str(), "r");
  if (f == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) r.out.append(buf, n);
  int st = ::pclose(f);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Polls `fn` until it returns true or `timeout` passes.
template <typename Fn>
bool Eventually(Fn fn, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (fn()) return true;
    std::this_thread::sleep_for(200ms);
  }
  return fn();
}

// A simulator with --exec-images over a directory of "images" and a node root.
class Cluster {
 public:
  explicit Cluster(int nodes = 2) {
    img_ = dir_.path() + "/images";
    root_ = dir_.path() + "/root";
    kc_ = dir_.path() + "/kubeconfig";
    fs::create_directories(img_);
    for (const char* tool : {"sh", "kubectl", "python3", "sleep"}) {
      auto p = Sh(std::string("command -v ") + tool);
      std::string path = p.out.substr(0, p.out.find('\n'));
      if (p.rc == 0 && !path.empty()) fs::create_symlink(path, img_ + "/" + tool);
    }
    fs::create_symlink(std::string(GG_BIN_DIR) + "/gpu-guardian-agent",
                       img_ + "/gpu-guardian-agent");
    // Another simulator running pods on this machine holds the pod network: wait for it.
    for (int attempt = 0; attempt < 60; ++attempt) {
      sim_ = std::make_unique<Process>(
          std::vector<std::string>{std::string(GG_BIN_DIR) + "/gpu-guardian-sim", "--listen",
                                   "127.0.0.1:0", "--tls", "--write-kubeconfig", kc_, "--nodes",
                                   std::to_string(nodes), "--authz", "rbac", "--exec-images", img_,
                                   "--node-root", root_},
          dir_.path() + "/sim.log");
      auto deadline = std::chrono::steady_clock::now() + 20s;
      while (sim_->Running() && sim_->Log().find("listening on") == std::string::npos &&
             std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(50ms);
      if (sim_->Log().find("listening on") != std::string::npos) return;
      sim_->Stop(SIGTERM, 5s);
      error_ = sim_->Log();
      if (error_.find("runs pods on this machine") == std::string::npos) return;
      std::this_thread::sleep_for(2s);
    }
  }
  bool up() const { return error_.empty() || sim_->Running(); }
  const std::string& error() const { return error_; }
  Process& sim() { return *sim_; }
  const std::string& root() const { return root_; }
  const std::string& dir() const { return dir_.path(); }

  CmdResult Kubectl(const std::string& args) const {
    return Sh("kubectl --kubeconfig " + kc_ + " " + args);
  }
  CmdResult Apply(const std::string& yaml) const {
    std::string f = dir_.path() + "/apply-" + std::to_string(++n_) + ".yaml";
    std::ofstream(f) << yaml;
    return Kubectl("apply --validate=false -f " + f);
  }
  json Get(const std::string& what) const {
    auto r = Kubectl("get " + what + " -o json");
    if (r.rc != 0) return json();
    return json::parse(r.out, nullptr, false);
  }
  std::string ContainerState(const json& pod) const {
    if (!pod.is_object() || !pod["status"].contains("containerStatuses")) return "";
    const json& st = pod["status"]["containerStatuses"][0]["state"];
    return st.empty() ? "" : st.begin().key();
  }
  bool PodReady(const std::string& ns, const std::string& name) const {
    json p = Get("pod -n " + ns + " " + name);
    if (!p.is_object()) return false;
    for (const auto& c : p["status"].value("conditions", json::array()))
      if (c.value("type", "") == "Ready") return c.value("status", "") == "True";
    return false;
  }

 private:
  TempDir dir_;
  std::string img_, root_, kc_, error_;
  std::unique_ptr<Process> sim_;
  mutable int n_ = 0;
};

#define REQUIRE_CLUSTER(c)                                                          \
  if (Sh("command -v kubectl").rc != 0) GTEST_SKIP() << "kubectl is not installed"; \
  if (!(c).up()) {                                                                  \
    if ((c).error().find("needs root") != std::string::npos ||                      \
        (c).error().find("namespaces") != std::string::npos)                        \
      GTEST_SKIP() << (c).error();                                                  \
    FAIL() << "simulator did not start: " << (c).error();                           \
  }

constexpr char kRbac[] = R"YAML(
apiVersion: v1
kind: ServiceAccount
metadata: {name: runner, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: pod-reader, namespace: default}
rules:
- {apiGroups: [""], resources: [pods], verbs: [get, list]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: runner-reads-pods, namespace: default}
subjects: [{kind: ServiceAccount, name: runner, namespace: default}]
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: pod-reader}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg, namespace: default}
data: {color: blue}
)YAML";
constexpr char kSecret[] = R"YAML(
apiVersion: v1
kind: Secret
metadata: {name: sec, namespace: default}
data: {password: aHVudGVyMg==}
)YAML";

// One pod shows env, identity, in-cluster access, network, probes and logs.
TEST(PodRunner, RunsAPodAsAProcessWithWhatAKubeletGivesIt) {
  Cluster c;
  REQUIRE_CLUSTER(c);
  ASSERT_EQ(c.Apply(kRbac).rc, 0);
  // Secrets are checked where the API server serves them.
  auto secret = c.Apply(kSecret);
  bool have_secrets = secret.rc == 0;
  if (!have_secrets)
    std::printf("no Secret kind in this simulator (%s): secretKeyRef not checked\n",
                secret.out.c_str());
  std::string pod = R"YAML(
apiVersion: v1
kind: Pod
metadata: {name: probe-me, namespace: default}
spec:
  serviceAccountName: runner
  containers:
  - name: main
    image: registry.example/tools/sh:1
    command: [sh, -c]
    args:
    - |
      echo "ENV node=$NODE pod=$POD ns=$NS ip=$POD_IP host=$HOST_IP color=$COLOR password=$PASSWORD expanded=$(EXPANDED)"
      echo "HOSTNAME $(hostname) HOME=$HOME"
      echo "SA-NS $(cat /var/run/secrets/kubernetes.io/serviceaccount/namespace)"
      kubectl get pods -n default -o name && echo "LIST-PODS ok"
      kubectl get configmaps -n default 2>&1 | sed "s/^/DENIED /"
      echo "API $KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT"
      exec python3 -m http.server 8080
    env:
    - {name: NODE, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}
    - {name: POD, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
    - {name: NS, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}
    - {name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}
    - {name: HOST_IP, valueFrom: {fieldRef: {fieldPath: status.hostIP}}}
    - {name: COLOR, valueFrom: {configMapKeyRef: {name: cfg, key: color}}}
    - {name: PASSWORD, valueFrom: {secretKeyRef: {name: sec, key: password, optional: true}}}
    - {name: EXPANDED, value: "$(COLOR)-x"}
    readinessProbe:
      httpGet: {path: /, port: 8080}
      periodSeconds: 1
)YAML";
  ASSERT_EQ(c.Apply(pod).rc, 0);
  ASSERT_TRUE(Eventually([&] { return c.PodReady("default", "probe-me"); }, 90s))
      << c.Kubectl("get pod probe-me -o yaml").out << c.Kubectl("logs probe-me").out;
  json p = c.Get("pod -n default probe-me");
  std::string node = p["spec"]["nodeName"], ip = p["status"]["podIP"], host = p["status"]["hostIP"];
  json n = c.Get("node " + node);
  std::string cidr = n["spec"]["podCIDR"];
  EXPECT_EQ(ip.rfind(cidr.substr(0, cidr.rfind('.') + 1), 0), 0u) << ip << " not in " << cidr;
  std::string internal;
  for (const auto& a : n["status"]["addresses"])
    if (a["type"] == "InternalIP") internal = a["address"];
  EXPECT_EQ(host, internal);
  EXPECT_NE(c.Kubectl("get pod probe-me --no-headers").out.find("1/1"), std::string::npos);

  std::string logs;
  ASSERT_TRUE(Eventually(
      [&] {
        logs = c.Kubectl("logs probe-me").out;
        return logs.find("API ") != std::string::npos;
      },
      20s))
      << logs;
  EXPECT_NE(
      logs.find("ENV node=" + node + " pod=probe-me ns=default ip=" + ip + " host=" + host +
                " color=blue password=" + (have_secrets ? "hunter2" : "") + " expanded=blue-x"),
      std::string::npos)
      << logs;
  EXPECT_NE(logs.find("HOSTNAME probe-me HOME=/root\n"), std::string::npos) << logs;
  EXPECT_NE(logs.find("SA-NS default"), std::string::npos) << logs;
  EXPECT_NE(logs.find("pod/probe-me"), std::string::npos) << logs;  // the SA may list pods
  EXPECT_NE(logs.find("LIST-PODS ok"), std::string::npos) << logs;
  // ... and is refused what its Role does not grant, as its own user.
  EXPECT_NE(logs.find("DENIED Error from server (Forbidden)"), std::string::npos) << logs;
  EXPECT_NE(logs.find("system:serviceaccount:default:runner"), std::string::npos) << logs;
  EXPECT_NE(logs.find("API 10.96.0.1:443"), std::string::npos) << logs;

  // The pod IP answers from this host (the readiness probe went the same way).
  auto curl = Sh("python3 -c \"import urllib.request;print(urllib.request.urlopen('http://" + ip +
                 ":8080/', timeout=5).status)\"");
  EXPECT_EQ(curl.out, "200\n") << curl.out;
  // Logs: timestamps and tailLines as the real server gives them.
  auto tail = c.Kubectl("logs probe-me --tail=1 --timestamps").out;
  EXPECT_EQ(std::count(tail.begin(), tail.end(), '\n'), 1) << tail;
  EXPECT_EQ(tail.rfind("20", 0), 0u) << tail;  // an RFC 3339 timestamp first
  EXPECT_NE(
      c.Kubectl("logs probe-me -c nope").out.find("container nope is not valid for pod probe-me"),
      std::string::npos);
  // The log file is the node's, in the CRI format.
  json uid = p["metadata"]["uid"];
  std::string file = c.root() + "/" + node + "/var/log/pods/default_probe-me_" +
                     uid.get<std::string>() + "/main/0.log";
  EXPECT_NE(Slurp(file).find(" stdout F HOSTNAME probe-me HOME=/root"), std::string::npos) << file;
}

TEST(PodRunner, RestartsExitedContainersAndKeepsThePreviousLog) {
  Cluster c;
  REQUIRE_CLUSTER(c);
  ASSERT_EQ(c.Apply(R"YAML(
apiVersion: v1
kind: Pod
metadata: {name: crashy, namespace: default}
spec:
  containers:
  - name: main
    image: sh
    command: [sh, -c, 'echo "run $(cat /proc/uptime)"; sleep 0.5; echo "bye"; exit 3']
)YAML")
                .rc,
            0);
  // `kubectl logs -f` follows the running instance until it exits.
  CmdResult follow;
  EXPECT_TRUE(Eventually(
      [&] {
        follow = c.Kubectl("logs -f crashy");
        return follow.rc == 0 && follow.out.find("bye") != std::string::npos;
      },
      30s))
      << follow.out;
  json p;
  ASSERT_TRUE(Eventually(
      [&] {
        p = c.Get("pod -n default crashy");
        return p.is_object() && p["status"].contains("containerStatuses") &&
               p["status"]["containerStatuses"][0].value("restartCount", 0) >= 2;
      },
      60s))
      << p.dump(2);
  const json& cs = p["status"]["containerStatuses"][0];
  EXPECT_EQ(cs["lastState"]["terminated"]["exitCode"], 3);
  EXPECT_EQ(cs["lastState"]["terminated"]["reason"], "Error");
  auto prev = c.Kubectl("logs crashy --previous");
  EXPECT_EQ(prev.rc, 0) << prev.out;
  EXPECT_NE(prev.out.find("run "), std::string::npos) << prev.out;
  EXPECT_NE(prev.out.find("bye"), std::string::npos) << prev.out;
  EXPECT_NE(c.Kubectl("get pod crashy --no-headers").out.find("0/1"), std::string::npos);
}

TEST(PodRunner, DeletionSendsSigtermWaitsTheGracePeriodThenKills) {
  Cluster c;
  REQUIRE_CLUSTER(c);
  // One pod ignores SIGTERM (killed after its 3 s grace), one exits on it at once.
  ASSERT_EQ(c.Apply(R"YAML(
apiVersion: v1
kind: Pod
metadata: {name: stubborn, namespace: default}
spec:
  terminationGracePeriodSeconds: 3
  containers:
  - name: main
    image: sh
    command: [sh, -c, 'trap "echo got-term" TERM; echo started; while true; do sleep 0.1; done']
---
apiVersion: v1
kind: Pod
metadata: {name: polite, namespace: default}
spec:
  terminationGracePeriodSeconds: 30
  containers:
  - name: main
    image: sleep
    args: ["4243"]
)YAML")
                .rc,
            0);
  ASSERT_TRUE(Eventually(
      [&] { return c.PodReady("default", "stubborn") && c.PodReady("default", "polite"); }, 30s));
  ASSERT_TRUE(Eventually(
      [&] { return c.Kubectl("logs stubborn").out.find("started") != std::string::npos; }, 10s));
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(c.Kubectl("delete pod polite --wait=true --timeout=60s").rc, 0);
  auto polite = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(polite, 10s);  // SIGTERM ended it long before its 30 s grace
  t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(c.Kubectl("delete pod stubborn --wait=false").rc, 0);
  std::string log;
  ASSERT_TRUE(Eventually(
      [&] {
        log = c.Kubectl("logs stubborn").out;
        return log.find("got-term") != std::string::npos;
      },
      5s))
      << log;
  ASSERT_TRUE(Eventually([&] { return c.Kubectl("get pod stubborn").rc != 0; }, 30s));
  auto stubborn = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(stubborn, 2500ms);  // it outlived SIGTERM until the grace period ran out
  EXPECT_EQ(Sh("pgrep -f 'slee[p] 4243'").out, "");
}

TEST(PodRunner, NothingOutlivesAKilledSimulator) {
  std::string links_before = Sh("ip -o link show | grep -c ggp- || true").out;
  {
    Cluster c;
    REQUIRE_CLUSTER(c);
    ASSERT_EQ(c.Apply(R"YAML(
apiVersion: v1
kind: Pod
metadata: {name: orphan-candidate, namespace: default}
spec:
  containers:
  - name: main
    image: sh
    command: [sh, -c, 'S=sleep; $S 4242 & $S 4242 & wait']
)YAML")
                  .rc,
              0);
    ASSERT_TRUE(
        Eventually([&] { return Sh("pgrep -f 'slee[p] 4242' | wc -l").out == "2\n"; }, 30s));
    EXPECT_NE(Sh("ip -o link show | grep -c ggp-").out, "0\n");
    c.sim().Stop(SIGKILL, 5s);
    EXPECT_TRUE(Eventually([&] { return Sh("pgrep -f 'slee[p] 4242'").out.empty(); }, 10s))
        << Sh("ps -ef | grep 'slee[p] 4242'").out;
    EXPECT_TRUE(Eventually(
        [&] { return Sh("ip -o link show | grep -c ggp- || true").out == links_before; }, 10s));
  }
  EXPECT_EQ(Sh("ip -o link show | grep -c ggp- || true").out, links_before);
}

// The shipped agent DaemonSet, unmodified, on fake GPUs and the node root's /dev/kmsg.
TEST(PodRunner, ShippedAgentDaemonSetSeesFakeGpusAndNodeKmsg) {
  Cluster c(2);
  REQUIRE_CLUSTER(c);
  const std::string deploy = std::string(GG_SOURCE_DIR) + "/deploy/";
  for (const char* f : {"namespace.yaml", "crds/gpunodehealths.yaml", "crds/gpuhealthpolicies.yaml",
                        "rbac/agent.yaml", "agent/daemonset.yaml"}) {
    auto r = c.Kubectl("apply --validate=false -f " + deploy + f);
    ASSERT_EQ(r.rc, 0) << f << ": " << r.out;
  }
  json nodes = c.Get("nodes");
  ASSERT_TRUE(nodes.is_object());
  std::string node = nodes["items"][0]["metadata"]["name"];
  json h;
  // The agent creates its report and then writes its status (a subresource: the create's
  // status is dropped), so a read in between finds no status yet.
  auto status_list = [&](const char* field) {
    auto st = h.find("status");
    return st != h.end() && st->is_object() ? st->value(field, json::array()) : json::array();
  };
  ASSERT_TRUE(Eventually(
      [&] {
        h = c.Get("gpunodehealths " + node);
        return h.is_object() && status_list("gpus").size() == 8;
      },
      60s))
      << h.dump(2) << c.Kubectl("get pods -A -o wide").out;
  // The GPUs are the node's: the UUIDs the runner wrote into the node's state file.
  std::string state = Slurp(c.root() + "/" + node + "/nvml.yaml");
  auto u = state.find("  - GPU-");
  ASSERT_NE(u, std::string::npos) << state;
  EXPECT_EQ(h["status"]["gpus"][0]["uuid"], state.substr(u + 4, state.find('\n', u) - u - 4))
      << state;
  json pods = c.Get("pods -n gpu-guardian");
  for (const auto& p : pods["items"])
    EXPECT_NE(c.Kubectl("get pod -n gpu-guardian --no-headers " +
                        p["metadata"]["name"].get<std::string>())
                  .out.find("1/1"),
              std::string::npos);
  // The DaemonSet's securityContext holds: only CAP_SYSLOG, no new privileges, a read-only
  // root filesystem, /dev/kmsg mounted read-only.
  std::string pid = Sh("pgrep -f 'gpu-guardian-agen[t] --source' | head -1").out;
  pid = pid.substr(0, pid.find('\n'));
  ASSERT_FALSE(pid.empty());
  std::string status = Slurp("/proc/" + pid + "/status");
  EXPECT_NE(status.find("CapBnd:\t0000000400000000"), std::string::npos) << status;
  EXPECT_NE(status.find("NoNewPrivs:\t1"), std::string::npos) << status;
  EXPECT_EQ(Sh("awk '$5==\"/\"{print $6}' /proc/" + pid + "/mountinfo").out.rfind("ro,", 0), 0u);
  EXPECT_EQ(Sh("awk '$5==\"/dev/kmsg\"{print $6}' /proc/" + pid + "/mountinfo").out.rfind("ro,", 0),
            0u);
  // A kernel message appended to the node's /dev/kmsg reaches the agent.
  std::ofstream(c.root() + "/" + node + "/dev/kmsg", std::ios::app)
      << "4,2001,16450076435595,-;NVRM: Xid (PCI:0000:1a:00): 79, pid='<unknown>', name=<unknown>, "
         "GPU has fallen off the bus.\n";
  // An Xid as an NVML event, appended to the node's GPU timeline.
  std::ofstream(c.root() + "/" + node + "/nvml.yaml", std::ios::app)
      << "  - {at: 0s, gpu: 2, xid: 48}\n"
         "  - {at: 0s, gpu: 1, temperature: 92}\n"
         "  - {at: 0s, gpu: 4, ecc: {uncorrectable_volatile: 2}}\n"
         "  - {at: 0s, gpu: 5, lost: true}\n";
  auto has_xid = [&](int xid) {
    h = c.Get("gpunodehealths " + node);
    if (!h.is_object()) return false;
    for (const auto& x : status_list("xids"))
      if (x.is_object() && x.value("xid", 0) == xid) return true;
    return false;
  };
  EXPECT_TRUE(Eventually([&] { return has_xid(79); }, 10s)) << h.dump(2);
  EXPECT_TRUE(Eventually([&] { return has_xid(48); }, 10s)) << h.dump(2);
  // Temperature, ECC counters and a lost GPU, through NVML as the agent reads them.
  auto gpu = [&](int i) {
    for (const auto& g : status_list("gpus"))
      if (g.is_object() && g.value("index", -1) == i) return g;
    return json::object();
  };
  EXPECT_TRUE(Eventually(
      [&] {
        h = c.Get("gpunodehealths " + node);
        return h.is_object() && gpu(1).value("temperatureC", 0) == 92 &&
               gpu(4).value("ecc", json::object()).value("uncorrectedVolatile", 0) == 2 &&
               gpu(5).value("lost", false);
      },
      15s))
      << h.dump(2);
}

}  // namespace

namespace {

// exec and tcpSocket probes: a failing exec liveness probe restarts a container that would
// run forever; a tcpSocket readiness probe makes it ready once its port listens.
TEST(PodRunner, ExecLivenessRestartsAndTcpReadinessGates) {
  Cluster c;
  REQUIRE_CLUSTER(c);
  ASSERT_EQ(c.Apply(R"YAML(
apiVersion: v1
kind: Pod
metadata: {name: probed, namespace: default}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: sh
    # A bare listener (python3 -m http.server can take seconds to import on a busy machine).
    command: [python3, -c, 'import socket,time; s=socket.socket(); s.bind(("", 9000)); s.listen(); print("up", flush=True); time.sleep(1e6)']
    livenessProbe:
      exec: {command: [sh, -c, 'test -e /tmp/never-there-$HOSTNAME-x']}
      initialDelaySeconds: 4
      periodSeconds: 1
      failureThreshold: 2
    readinessProbe:
      tcpSocket: {port: 9000}
      periodSeconds: 1
)YAML")
                .rc,
            0);
  EXPECT_TRUE(Eventually([&] { return c.PodReady("default", "probed"); }, 30s))
      << c.Kubectl("get pod probed -o yaml").out;
  json p;
  EXPECT_TRUE(Eventually(
      [&] {
        p = c.Get("pod -n default probed");
        return p.is_object() && p["status"].contains("containerStatuses") &&
               p["status"]["containerStatuses"][0].value("restartCount", 0) >= 1;
      },
      40s))
      << p.dump(2);
  EXPECT_EQ(p["status"]["containerStatuses"][0]["lastState"]["terminated"]["exitCode"], 143)
      << p.dump(2);  // SIGTERM from the kubelet, exit 128+15
  // The kubelet's Events tell the story (kubectl describe pod).
  json evs = c.Get("events -n default");
  std::set<std::string> reasons;
  for (const auto& e : evs.value("items", json::array()))
    if (e["involvedObject"].value("name", "") == "probed") reasons.insert(e.value("reason", ""));
  for (const char* r : {"Pulled", "Created", "Started", "Unhealthy", "Killing"})
    EXPECT_EQ(reasons.count(r), 1u) << r << " missing from " << evs.dump(1);
}

}  // namespace

namespace {

// No silent fallback: without root, or without --tls, --exec-images refuses to start.
TEST(PodRunner, RefusesToStartWithoutWhatItNeeds) {
  TempDir dir;
  const std::string sim = std::string(GG_BIN_DIR) + "/gpu-guardian-sim";
  const std::string common =
      " --listen 127.0.0.1:0 --exec-images " + dir.path() + " --node-root " + dir.path() + "/root";
  auto no_tls = Sh(sim + common);
  EXPECT_NE(no_tls.rc, 0);
  EXPECT_NE(no_tls.out.find("--exec-images needs --tls"), std::string::npos) << no_tls.out;
  EXPECT_EQ(no_tls.out.find("listening on"), std::string::npos) << no_tls.out;
  if (::geteuid() == 0) {
    auto under_run = Sh(sim + " --listen 127.0.0.1:0 --tls --exec-images " + dir.path() +
                        " --node-root /run/gg-pod-runner-test-root");
    EXPECT_NE(under_run.rc, 0);
    EXPECT_NE(under_run.out.find("is under /run"), std::string::npos) << under_run.out;
    EXPECT_FALSE(fs::exists("/run/gg-pod-runner-test-root"));
  }
  if (Sh("command -v setpriv").rc != 0 || ::geteuid() != 0)
    GTEST_SKIP() << "needs root and setpriv";
  ::chmod(dir.path().c_str(), 0755);
  auto unprivileged =
      Sh("setpriv --reuid=65534 --regid=65534 --clear-groups " + sim + common + " --tls");
  EXPECT_NE(unprivileged.rc, 0);
  EXPECT_NE(unprivileged.out.find("needs root"), std::string::npos) << unprivileged.out;
  EXPECT_EQ(unprivileged.out.find("listening on"), std::string::npos) << unprivileged.out;
}

}  // namespace

namespace {

// Init containers run one after another to completion before the pod's containers; their
// logs and statuses are the pod's too.
TEST(PodRunner, InitContainersRunToCompletionFirst) {
  Cluster c;
  REQUIRE_CLUSTER(c);
  ASSERT_EQ(c.Apply(R"YAML(
apiVersion: v1
kind: Pod
metadata: {name: inits, namespace: default}
spec:
  volumes: [{name: work, emptyDir: {}}]
  initContainers:
  - name: first
    image: sh
    command: [sh, -c, 'echo first > /run/work/order; sleep 0.5; echo first-done']
    volumeMounts: [{name: work, mountPath: /run/work}]
  - name: second
    image: sh
    command: [sh, -c, 'echo second >> /run/work/order']
    volumeMounts: [{name: work, mountPath: /run/work}]
  containers:
  - name: main
    image: sh
    command: [sh, -c, 'cat /run/work/order; echo main; exec sleep 3600']
    volumeMounts: [{name: work, mountPath: /run/work}]
)YAML")
                .rc,
            0);
  ASSERT_TRUE(Eventually([&] { return c.PodReady("default", "inits"); }, 30s))
      << c.Kubectl("get pod inits -o yaml").out;
  std::string logs;
  EXPECT_TRUE(Eventually(
      [&] {
        logs = c.Kubectl("logs inits -c main").out;
        return logs.find("main") != std::string::npos;
      },
      10s));
  EXPECT_EQ(logs, "first\nsecond\nmain\n");
  EXPECT_EQ(c.Kubectl("logs inits -c first").out, "first-done\n");
  json p = c.Get("pod -n default inits");
  ASSERT_EQ(p["status"]["initContainerStatuses"].size(), 2u) << p.dump(2);
  for (const auto& s : p["status"]["initContainerStatuses"])
    EXPECT_EQ(s["state"]["terminated"]["reason"], "Completed") << s.dump();
}

}  // namespace

namespace {

// A startup probe holds the other probes and readiness back until it succeeds.
TEST(PodRunner, StartupProbeGatesStartedAndReady) {
  Cluster c;
  REQUIRE_CLUSTER(c);
  ASSERT_EQ(c.Apply(R"YAML(
apiVersion: v1
kind: Pod
metadata: {name: slow-start, namespace: default}
spec:
  volumes: [{name: gate, hostPath: {path: /gate, type: DirectoryOrCreate}}]
  containers:
  - name: main
    image: sleep
    args: ["3600"]
    volumeMounts: [{name: gate, mountPath: /run/gate}]
    startupProbe:
      exec: {command: [test, -e, /run/gate/ok]}
      periodSeconds: 1
      failureThreshold: 1000
)YAML")
                .rc,
            0);
  json p;
  auto cstatus = [&] {
    p = c.Get("pod -n default slow-start");
    return p.is_object() && p["status"].contains("containerStatuses")
               ? p["status"]["containerStatuses"][0]
               : json();
  };
  ASSERT_TRUE(Eventually(
      [&] { return c.ContainerState(c.Get("pod -n default slow-start")) == "running"; }, 30s));
  std::this_thread::sleep_for(3s);  // several failed startup probes
  json s = cstatus();
  EXPECT_EQ(s["started"], false) << s.dump();
  EXPECT_EQ(s["ready"], false) << s.dump();
  std::string node = p["spec"]["nodeName"];
  std::ofstream(c.root() + "/" + node + "/gate/ok") << "go\n";
  EXPECT_TRUE(Eventually(
      [&] {
        json st = cstatus();
        return st.is_object() && st["started"] == true && st["ready"] == true;
      },
      15s))
      << p.dump(2);
  EXPECT_TRUE(c.PodReady("default", "slow-start"));
}

}  // namespace

namespace {

// An exec preStop hook runs before SIGTERM when the pod is deleted.
TEST(PodRunner, PreStopHookRunsBeforeSigterm) {
  Cluster c;
  REQUIRE_CLUSTER(c);
  ASSERT_EQ(c.Apply(R"YAML(
apiVersion: v1
kind: Pod
metadata: {name: hooked, namespace: default}
spec:
  terminationGracePeriodSeconds: 10
  volumes: [{name: gate, hostPath: {path: /gate, type: DirectoryOrCreate}}]
  containers:
  - name: main
    image: sh
    command: [sh, -c, 'trap "test -e /run/gate/prestop && echo after-hook > /run/gate/term; exit 0" TERM; while true; do sleep 0.1; done']
    volumeMounts: [{name: gate, mountPath: /run/gate}]
    lifecycle:
      preStop:
        exec: {command: [sh, -c, 'echo hook > /run/gate/prestop']}
)YAML")
                .rc,
            0);
  ASSERT_TRUE(Eventually([&] { return c.PodReady("default", "hooked"); }, 30s));
  json p = c.Get("pod -n default hooked");
  std::string node = p["spec"]["nodeName"];
  ASSERT_EQ(c.Kubectl("delete pod hooked --wait=true --timeout=60s").rc, 0);
  EXPECT_EQ(Slurp(c.root() + "/" + node + "/gate/prestop"), "hook\n");
  EXPECT_EQ(Slurp(c.root() + "/" + node + "/gate/term"), "after-hook\n");  // SIGTERM came after it
}

}  // namespace
