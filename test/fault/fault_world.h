// The fault suite's world: the in-process simulator seeded with CRDs, GPU nodes, GPU pods,
// PDBs, reports and policies, plus observers that read the world the way an auditor would
// (taints, cordons, conditions, Events, policy status, who sent which request). Operators run
// in-process on a RecordingTransport (per-replica request log, partition switch) or as real
// processes behind an ApiProxy (fault/api_proxy.h).
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "api/gpu_node_health.h"
#include "api/test_reports.h"
#include "common/clock.h"
#include "fault/api_proxy.h"
#include "k8s/rest_client.h"
#include "k8s/transport.h"
#include "metrics/registry.h"
#include "operator/operator.h"
#include "sim/server.h"
#include "sim/test_objects.h"

namespace gg::fault {

using json = nlohmann::json;
using namespace std::chrono_literals;

inline constexpr char kPolicies[] = "/apis/gpuguardian.io/v1alpha1/gpuhealthpolicies";
inline constexpr char kReports[] = "/apis/gpuguardian.io/v1alpha1/gpunodehealths";

// Polls until `f` holds or the deadline passes (deadlines are generous: CI machines are loaded).
inline bool WaitFor(const std::function<bool()>& f, std::chrono::milliseconds timeout = 60s) {
  auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (f()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return f();
}

inline double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// A transport decorator: logs every request with its answer and, while partitioned, fails
// each one as an unreachable network would (Unavailable, nothing reaches the server).
class RecordingTransport final : public k8s::Transport {
 public:
  explicit RecordingTransport(std::unique_ptr<k8s::Transport> inner) : inner_(std::move(inner)) {}
  StatusOr<k8s::HttpResponse> Do(const k8s::HttpRequest& req) override {
    std::size_t i = Log(req);
    if (partitioned_.load()) return UnavailableError("partitioned (test)");
    auto r = inner_->Do(req);
    if (r.ok()) SetStatus(i, r->status);
    return r;
  }
  StatusOr<k8s::HttpResponse> Stream(const k8s::HttpRequest& req, const ChunkFn& on_chunk,
                                     std::stop_token stop) override {
    std::size_t i = Log(req);
    if (partitioned_.load()) return UnavailableError("partitioned (test)");
    const int gen = cut_generation_.load();
    bool cut = false;
    auto r = inner_->Stream(
        req,
        [&](std::string_view chunk) {
          // A partition or a server going away also breaks streams that are already open.
          if (partitioned_.load() || cut_generation_.load() != gen) {
            cut = true;
            return false;
          }
          return on_chunk(chunk);
        },
        stop);
    if (r.ok()) SetStatus(i, r->status);
    if (cut) return UnavailableError("connection reset (test)");
    return r;
  }
  std::string Host() const override { return inner_->Host(); }
  void InvalidateCredentials() override { inner_->InvalidateCredentials(); }

  void Partition(bool on) { partitioned_.store(on); }
  // Resets every open stream (as an API server that goes down does); new ones are unaffected.
  void CutStreams() { cut_generation_.fetch_add(1); }
  std::vector<ProxiedRequest> Requests() const {
    std::scoped_lock lock(mu_);
    return log_;
  }

 private:
  std::size_t Log(const k8s::HttpRequest& req) {
    ProxiedRequest r;
    r.method = req.method;
    r.path = req.path;
    r.sent = std::chrono::steady_clock::now();
    std::scoped_lock lock(mu_);
    log_.push_back(std::move(r));
    return log_.size() - 1;
  }
  void SetStatus(std::size_t i, int status) {
    std::scoped_lock lock(mu_);
    log_[i].status = status;
  }
  std::unique_ptr<k8s::Transport> inner_;
  std::atomic<bool> partitioned_{false};
  std::atomic<int> cut_generation_{0};
  mutable std::mutex mu_;
  std::vector<ProxiedRequest> log_;
};

inline bool IsEventWrite(const ProxiedRequest& r) {
  return r.method != "GET" && r.path.find("/events") != std::string::npos;
}
// Writes the operator makes to the world (not its own Lease, not reads). Events are left out:
// they record decisions made while leading and are still delivered after a lost lease
// (events/aggregating.h); tests check them apart.
inline bool IsWrite(const ProxiedRequest& r) {
  if (r.method == "GET" || IsEventWrite(r)) return false;
  return r.path.find("/leases") == std::string::npos;
}
inline bool IsLeaseWrite(const ProxiedRequest& r) {
  return r.method != "GET" && r.path.find("/leases") != std::string::npos;
}
// "ns/pod" of an eviction request, "" otherwise.
inline std::string EvictedPod(const ProxiedRequest& r) {
  if (r.method != "POST") return "";
  auto end = r.path.find("/eviction");
  if (end == std::string::npos) return "";
  auto ns = r.path.find("/namespaces/");
  auto pods = r.path.find("/pods/");
  if (ns == std::string::npos || pods == std::string::npos) return "";
  return r.path.substr(ns + 12, pods - ns - 12) + "/" + r.path.substr(pods + 6, end - pods - 6);
}
// Accepted evictions (201) per pod, summed over request logs.
inline std::map<std::string, int> AcceptedEvictions(
    const std::vector<std::vector<ProxiedRequest>>& logs) {
  std::map<std::string, int> out;
  for (const auto& log : logs)
    for (const auto& r : log) {
      std::string pod = EvictedPod(r);
      if (!pod.empty() && r.status >= 200 && r.status < 300) ++out[pod];
    }
  return out;
}

// One operator replica in this process, with its own client, transport log and registry.
struct RunningOperator {
  std::unique_ptr<metrics::Registry> registry = std::make_unique<metrics::Registry>();
  RecordingTransport* transport = nullptr;  // owned by client
  std::unique_ptr<k8s::RestClient> client;
  std::unique_ptr<op::Operator> op;
  std::stop_source stop;
  std::jthread thread;
  Status result;
  std::atomic<bool> done{false};
  ~RunningOperator() { Stop(); }
  void Stop() {
    stop.request_stop();
    if (thread.joinable()) thread.join();
  }
  double Metric(std::string_view name, const metrics::LabelValues& labels = {}) {
    return registry->Value(name, labels);
  }
};

class FaultWorld : public ::testing::Test {
 protected:
  // time_scale 30: a pod's 30 s grace period takes 1 s.
  void StartSim(double time_scale = 30) {
    sim::SimOptions o;
    o.bookmark_interval = 200ms;
    o.time_scale = time_scale;
    auto s = sim::SimServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    sim_ = std::move(*s);
    ASSERT_TRUE(sim_->Create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                             sim::GuardianCrd("gpuhealthpolicies", "GPUHealthPolicy"))
                    .ok());
    ASSERT_TRUE(sim_->Create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                             sim::GuardianCrd("gpunodehealths", "GPUNodeHealth"))
                    .ok());
    for (const char* ns : {"ml", "gpu-guardian-system"})
      ASSERT_TRUE(
          sim_->Create("/api/v1/namespaces",
                       {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}})
              .ok());
  }
  void SetUp() override { StartSim(); }
  void TearDown() override {
    ops_.clear();
    if (sim_) sim_->Stop();
  }

  // Operator tuned for test time (same code paths, shorter periods).
  static op::OperatorConfig FastConfig(std::string identity, bool leader_elect) {
    op::OperatorConfig cfg;
    cfg.metrics_addr = "127.0.0.1:0";
    cfg.identity = std::move(identity);
    cfg.leader_elect = leader_elect;
    cfg.leader_election_namespace = "gpu-guardian-system";
    cfg.lease_duration = 3s;
    cfg.renew_deadline = 2s;
    cfg.retry_period = 300ms;
    cfg.drain_poll_interval = 200ms;
    cfg.eviction_backoff_initial = 200ms;
    cfg.eviction_backoff_max = 2s;
    cfg.event_retry_sleep = 200ms;
    return cfg;
  }

  RunningOperator& StartOperator(op::OperatorConfig cfg, Clock& clock = RealClock::Default()) {
    auto r = std::make_unique<RunningOperator>();
    k8s::ClientConfig cc;
    cc.server = sim_->Url();
    auto curl = k8s::CurlTransport::Create(cc);
    EXPECT_TRUE(curl.ok()) << curl.status();
    auto rec = std::make_unique<RecordingTransport>(std::move(*curl));
    r->transport = rec.get();
    r->client = std::make_unique<k8s::RestClient>(std::move(rec), cc, clock);
    r->op = std::make_unique<op::Operator>(*r->client, clock, *r->registry, std::move(cfg));
    RunningOperator* raw = r.get();
    r->thread = std::jthread([raw] {
      raw->result = raw->op->Run(raw->stop.get_token());
      raw->done.store(true);
    });
    ops_.push_back(std::move(r));
    return *raw;
  }

  void AddNode(const std::string& name) {
    json n = {{"apiVersion", "v1"},
              {"kind", "Node"},
              {"metadata", {{"name", name}, {"labels", {{"nvidia.com/gpu.present", "true"}}}}},
              {"spec", json::object()},
              {"status",
               {{"capacity", {{"nvidia.com/gpu", "8"}}},
                {"allocatable", {{"nvidia.com/gpu", "8"}}},
                {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
    ASSERT_TRUE(sim_->Create("/api/v1/nodes", n).ok());
  }

  // A bare GPU pod bound to `node` (no controller, so policies set drain.force: an evicted
  // pod is gone for good and the pods that ever existed on a node are exactly known).
  void AddPod(const std::string& name, const std::string& node, const std::string& app,
              int grace_seconds = 30) {
    json p = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", name}, {"namespace", "ml"}, {"labels", {{"app", app}}}}},
              {"spec",
               {{"nodeName", node},
                {"terminationGracePeriodSeconds", grace_seconds},
                {"containers",
                 {{{"name", "c"},
                   {"image", "cuda"},
                   {"resources",
                    {{"requests", {{"nvidia.com/gpu", "1"}}},
                     {"limits", {{"nvidia.com/gpu", "1"}}}}}}}}}},
              {"status", {{"phase", "Running"}}}};
    ASSERT_TRUE(sim_->Create("/api/v1/namespaces/ml/pods", p).ok());
  }

  // A ReplicaSet of GPU pods; the simulator's controllers create, schedule and run them.
  void AddReplicaSet(const std::string& name, int replicas, int grace_seconds = 30) {
    ASSERT_TRUE(sim_->Create("/apis/apps/v1/namespaces/ml/replicasets",
                             sim::GpuReplicaSet(name, "ml", replicas, grace_seconds))
                    .ok());
  }

  void AddPdb(const std::string& app, int min_available) {
    ASSERT_TRUE(sim_->Create("/apis/policy/v1/namespaces/ml/poddisruptionbudgets",
                             sim::MinAvailablePdb(app, "ml", min_available))
                    .ok());
  }

  json PodsOn(const std::string& node) {
    json out = json::array();
    auto l = sim_->List("/api/v1/namespaces/ml/pods");
    if (!l.ok()) return out;
    for (auto& p : (*l)["items"])
      if (p["spec"].value("nodeName", "") == node) out.push_back(p);
    return out;
  }
  // Pods on `node` that are neither terminating nor gone.
  int LivePodsOn(const std::string& node) {
    int n = 0;
    for (auto& p : PodsOn(node))
      if (!p["metadata"].contains("deletionTimestamp")) ++n;
    return n;
  }

  static json DefaultSpec() {
    return json::parse(R"({
      "nodeSelector": {"matchLabels": {"nvidia.com/gpu.present": "true"}},
      "rules": [{"name": "fatal-xid", "xid": {"codes": [79]}, "count": 1, "action": "Drain"}],
      "unknown": {"after": "1h", "action": "Event"},
      "remediation": {"taint": {"effect": "NoSchedule"},
                      "drain": {"scope": "GPUPods", "timeout": "10m", "force": true}},
      "recovery": {"automatic": true, "healthyFor": "2s"},
      "safety": {"maxUnhealthy": "100%", "maxNodesPerHour": 1000, "maxConcurrentDrains": 100}
    })");
  }
  void CreatePolicy(const std::string& name, json spec) {
    json p = {{"apiVersion", "gpuguardian.io/v1alpha1"},
              {"kind", "GPUHealthPolicy"},
              {"metadata", {{"name", name}}},
              {"spec", spec}};
    ASSERT_TRUE(sim_->Create(kPolicies, p).ok());
  }

  static api::GpuNodeHealthStatus HealthyReport(const std::string& node, WallTime now) {
    return api::testing::HealthyReport(node, now, 2);
  }
  static api::GpuNodeHealthStatus HealthyReport(const std::string& node) {
    return HealthyReport(node, RealClock::Default().Now());
  }
  static api::GpuNodeHealthStatus XidReport(const std::string& node, int xid = 79) {
    auto s = HealthyReport(node);
    api::testing::AddXid(s, xid);
    return s;
  }
  // Direct store write: bypasses the simulator's fault injection (the agent's path is not
  // under test here, the operator's is).
  void WriteReport(const std::string& node, const api::GpuNodeHealthStatus& s) {
    ASSERT_TRUE(
        sim::PutReportStatus(*sim_, node, json::parse(api::EncodeGpuNodeHealthStatus(s))).ok());
  }

  json Node(const std::string& name) {
    auto n = sim_->Get("/api/v1/nodes/" + name);
    return n.ok() ? *n : json();
  }
  static bool HasOurTaint(const json& node) {
    if (!node.is_object() || !node.contains("spec")) return false;
    for (auto& t : node["spec"].value("taints", json::array()))
      if (t.value("key", "") == api::kTaintKey) return true;
    return false;
  }
  static bool Cordoned(const json& node) {
    return node.is_object() && node.contains("spec") && node["spec"].value("unschedulable", false);
  }
  static std::string Condition(const json& node) {
    if (!node.is_object() || !node.contains("status")) return "";
    for (auto& c : node["status"].value("conditions", json::array()))
      if (c.value("type", "") == api::kConditionType) return c.value("status", "");
    return "";
  }
  std::vector<json> Events(const std::string& reason, const std::string& object = "") {
    std::vector<json> out;
    auto l = sim_->List("/api/v1/events");
    if (!l.ok()) return out;
    for (auto& e : (*l)["items"]) {
      if (e.value("reason", "") != reason) continue;
      if (!object.empty() && e["involvedObject"].value("name", "") != object) continue;
      out.push_back(e);
    }
    return out;
  }
  json PolicyStatus(const std::string& name) {
    auto p = sim_->Get(std::string(kPolicies) + "/" + name);
    if (!p.ok() || !p->contains("status") || !(*p)["status"].is_object()) return json::object();
    return (*p)["status"];
  }
  static std::string PolicyCondition(const json& status, const std::string& type) {
    for (auto& c : status.value("conditions", json::array()))
      if (c.value("type", "") == type) return c.value("status", "");
    return "";
  }

  // Sum of the simulator's apiserver_request_total samples whose labels contain every
  // `must` fragment (e.g. {"verb=\"watch\""}, {"code=\"503\""}), read over HTTP /metrics.
  double SimRequests(const std::vector<std::string>& must) {
    if (!admin_) {
      k8s::ClientConfig cc;
      cc.server = sim_->Url();
      auto c = k8s::RestClient::Create(cc, RealClock::Default());
      if (!c.ok()) return -1;
      admin_ = std::move(*c);
    }
    auto text = admin_->RawGet("/metrics");
    if (!text.ok()) return -1;
    double sum = 0;
    std::size_t pos = 0;
    const std::string name = "apiserver_request_total{";
    while ((pos = text->find(name, pos)) != std::string::npos) {
      auto close = text->find('}', pos);
      auto eol = text->find('\n', close);
      std::string labels = text->substr(pos, close - pos);
      bool ok = true;
      for (const auto& m : must) ok = ok && labels.find(m) != std::string::npos;
      if (ok) sum += std::strtod(text->c_str() + close + 1, nullptr);
      pos = eol == std::string::npos ? text->size() : eol;
    }
    return sum;
  }

  std::unique_ptr<sim::SimServer> sim_;
  std::unique_ptr<k8s::RestClient> admin_;
  std::vector<std::unique_ptr<RunningOperator>> ops_;
};

// Four GPU pods on gpu-0 paced by a PDB (one disruption at a time, 2 s grace each), one pod on
// each other node. The drain of gpu-0 therefore takes several seconds and can be interrupted.
class DrainWorld : public FaultWorld {
 protected:
  // gpu-0 runs the four pods of ReplicaSet "train" (grace 60 s → 2 s) under a PDB of
  // minAvailable 3: one eviction at a time, the next only once the replacement runs elsewhere,
  // so the drain takes several seconds and can be interrupted. Other nodes run "serve" pods.
  void Seed(int nodes = 4) {
    AddNode("gpu-0");
    AddReplicaSet("train", 4, 60);
    ASSERT_TRUE(WaitFor([&] { return LivePodsOn("gpu-0") == 4; })) << PodsOn("gpu-0").dump();
    for (auto& p : PodsOn("gpu-0")) train_pods_.insert("ml/" + p["metadata"].value("name", ""));
    WatchGpu0();
    for (int i = 1; i < nodes; ++i) AddNode("gpu-" + std::to_string(i));
    AddPdb("train", 3);
    for (int i = 2; i < nodes; ++i)
      AddPod("serve-" + std::to_string(i), "gpu-" + std::to_string(i), "serve");
    for (int i = 0; i < nodes; ++i)
      WriteReport("gpu-" + std::to_string(i), HealthyReport("gpu-" + std::to_string(i)));
    CreatePolicy("default", DefaultSpec());
  }
  // gpu-0 is empty; with `event`, the operator also said so (NodeDrained). An Event due just
  // as leadership is lost is dropped, not sent by a non-leader: tests with lease losses skip it.
  bool DrainDone(bool event = true) {
    return PodsOn("gpu-0").empty() && (!event || !Events("NodeDrained", "gpu-0").empty());
  }
  // Every pod that was on gpu-0 at the start accepted exactly one eviction; any other accepted
  // eviction was of a pod seen on gpu-0 (sampled every 20 ms; an evicted pod stays >= 2 s), and
  // no pod accepted two.
  void ExpectEachPodEvictedOnce(const std::vector<std::vector<ProxiedRequest>>& logs) {
    auto ev = AcceptedEvictions(logs);
    for (const auto& p : train_pods_) EXPECT_EQ(ev[p], 1) << p;
    std::set<std::string> seen = SeenOnGpu0();
    for (const auto& [pod, n] : ev) {
      EXPECT_LE(n, 1) << pod << " evicted twice";
      if (n > 0) {
        EXPECT_TRUE(seen.count(pod)) << pod << " evicted but never on gpu-0";
      }
    }
  }
  std::set<std::string> SeenOnGpu0() {
    std::scoped_lock lock(seen_mu_);
    return seen_;
  }
  void WatchGpu0() {
    sampler_ = std::jthread([this](std::stop_token st) {
      while (!st.stop_requested()) {
        for (auto& p : PodsOn("gpu-0")) {
          std::scoped_lock lock(seen_mu_);
          seen_.insert("ml/" + p["metadata"].value("name", ""));
        }
        std::this_thread::sleep_for(20ms);
      }
    });
  }
  void TearDown() override {
    sampler_.request_stop();
    if (sampler_.joinable()) sampler_.join();
    FaultWorld::TearDown();
  }
  std::mutex seen_mu_;
  std::set<std::string> seen_;
  std::jthread sampler_;
  std::set<std::string> train_pods_;
};

// Samples nodes' spec.unschedulable every few ms on a thread: the history of cordon/uncordon
// transitions after construction, with times, as an observer of the world would see it.
class CordonRecorder {
 public:
  struct Change {
    std::string node;
    bool cordoned;
    std::chrono::steady_clock::time_point at;
  };
  CordonRecorder(sim::SimServer& sim, std::vector<std::string> nodes)
      : sim_(sim), nodes_(std::move(nodes)) {
    thread_ = std::jthread([this](std::stop_token st) {
      std::map<std::string, bool> last;
      while (!st.stop_requested()) {
        for (const auto& n : nodes_) {
          auto j = sim_.Get("/api/v1/nodes/" + n);
          if (!j.ok()) continue;
          bool c = (*j)["spec"].value("unschedulable", false);
          auto it = last.find(n);
          if (it == last.end()) {
            last[n] = c;  // the starting state is not a change
          } else if (it->second != c) {
            it->second = c;
            std::scoped_lock lock(mu_);
            changes_.push_back({n, c, std::chrono::steady_clock::now()});
          }
        }
        std::this_thread::sleep_for(5ms);
      }
    });
  }
  ~CordonRecorder() { thread_.request_stop(); }
  std::vector<Change> Changes() {
    std::scoped_lock lock(mu_);
    return changes_;
  }

 private:
  sim::SimServer& sim_;
  std::vector<std::string> nodes_;
  std::mutex mu_;
  std::vector<Change> changes_;
  std::jthread thread_;
};

}  // namespace gg::fault
