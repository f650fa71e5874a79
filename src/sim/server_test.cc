// SimServer over real loopback HTTP: CRUD, conflicts, selectors, paging, watch (bookmarks,
// 410), patches, eviction with PDBs, discovery, fault injection.
#include "sim/server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "sim/test_util.h"

namespace gg::sim {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

struct Resp {
  int code = 0;
  json body;
  std::string raw;
  std::string retry_after;
};

class SimServerTest : public ::testing::Test {
 protected:
  void SetUp() override { StartSim(SimOptions{}); }
  void StartSim(SimOptions o) {
    o.bookmark_interval = 200ms;
    if (sim_) sim_->Stop();
    auto s = SimServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    sim_ = std::move(*s);
    cli_ = std::make_unique<httplib::Client>(sim_->Url());
    cli_->set_read_timeout(30, 0);
  }
  Resp Do(const std::string& method, const std::string& path, const json& body = nullptr,
          const std::string& ct = "application/json") {
    httplib::Result r{nullptr, httplib::Error::Unknown};
    std::string b = body.is_null() ? "" : body.dump();
    if (method == "GET") r = cli_->Get(path);
    if (method == "POST") r = cli_->Post(path, b, ct);
    if (method == "PUT") r = cli_->Put(path, b, ct);
    if (method == "PATCH") r = cli_->Patch(path, b, ct);
    if (method == "DELETE") r = cli_->Delete(path, b, ct);
    Resp out;
    if (!r) return out;
    out.code = r->status;
    out.raw = r->body;
    out.body = json::parse(r->body, nullptr, false);
    out.retry_after = r->get_header_value("Retry-After");
    return out;
  }
  static json Node(const std::string& name, json labels = json::object()) {
    return {{"apiVersion", "v1"},
            {"kind", "Node"},
            {"metadata", {{"name", name}, {"labels", labels}}},
            {"spec", json::object()},
            {"status",
             {{"capacity", {{"nvidia.com/gpu", "8"}}},
              {"allocatable", {{"nvidia.com/gpu", "8"}}},
              {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
  }
  static json Pod(const std::string& name, const std::string& node, json labels = json::object()) {
    json p = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", name}, {"namespace", "default"}, {"labels", labels}}},
              {"spec", {{"containers", {{{"name", "c"}, {"image", "busybox"}}}}}}};
    if (!node.empty()) p["spec"]["nodeName"] = node;
    return p;
  }
  std::unique_ptr<SimServer> sim_;
  std::unique_ptr<httplib::Client> cli_;
};

TEST_F(SimServerTest, CrudAndServerSetMetadata) {
  auto c = Do("POST", "/api/v1/nodes", Node("n1"));
  ASSERT_EQ(c.code, 201) << c.raw;
  EXPECT_FALSE(c.body["metadata"]["uid"].get<std::string>().empty());
  EXPECT_FALSE(c.body["metadata"]["creationTimestamp"].get<std::string>().empty());
  std::string rv = c.body["metadata"]["resourceVersion"];
  auto g = Do("GET", "/api/v1/nodes/n1");
  ASSERT_EQ(g.code, 200);
  EXPECT_EQ(g.body["metadata"]["resourceVersion"], rv);
  EXPECT_EQ(g.body["kind"], "Node");
  // Duplicate create -> 409 AlreadyExists.
  auto d = Do("POST", "/api/v1/nodes", Node("n1"));
  EXPECT_EQ(d.code, 409);
  EXPECT_EQ(d.body["reason"], "AlreadyExists");
  EXPECT_EQ(d.body["message"], "nodes \"n1\" already exists");
  // Missing -> 404 Status.
  auto nf = Do("GET", "/api/v1/nodes/nope");
  EXPECT_EQ(nf.code, 404);
  EXPECT_EQ(nf.body["kind"], "Status");
  EXPECT_EQ(nf.body["reason"], "NotFound");
  EXPECT_EQ(nf.body["details"]["kind"], "nodes");
  // Unknown path.
  auto up = Do("GET", "/apis/nope/v1/things");
  EXPECT_EQ(up.code, 404);
  EXPECT_EQ(up.body["message"], "the server could not find the requested resource");
  // Delete.
  auto del = Do("DELETE", "/api/v1/nodes/n1");
  EXPECT_EQ(del.code, 200);
  EXPECT_EQ(Do("GET", "/api/v1/nodes/n1").code, 404);
}

TEST_F(SimServerTest, OptimisticConcurrencyAndGeneration) {
  json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                {"kind", "Lease"},
                {"metadata", {{"name", "op-lock"}}},
                {"spec", {{"holderIdentity", "a"}, {"leaseDurationSeconds", 15}}}};
  auto c = Do("POST", "/apis/coordination.k8s.io/v1/namespaces/default/leases", lease);
  ASSERT_EQ(c.code, 201) << c.raw;
  json stale = c.body;
  json upd = c.body;
  upd["spec"]["holderIdentity"] = "b";
  auto u = Do("PUT", "/apis/coordination.k8s.io/v1/namespaces/default/leases/op-lock", upd);
  ASSERT_EQ(u.code, 200) << u.raw;
  stale["spec"]["holderIdentity"] = "c";
  auto conflict =
      Do("PUT", "/apis/coordination.k8s.io/v1/namespaces/default/leases/op-lock", stale);
  EXPECT_EQ(conflict.code, 409);
  EXPECT_EQ(conflict.body["reason"], "Conflict");
  EXPECT_EQ(conflict.body["message"],
            "Operation cannot be fulfilled on leases.coordination.k8s.io \"op-lock\": the object "
            "has been modified; please apply your changes to the latest version and try again");
  EXPECT_EQ(conflict.body["details"]["group"], "coordination.k8s.io");

  // Generation bumps on spec changes only.
  json ds = json::parse(R"({"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"agent"},
    "spec":{"selector":{"matchLabels":{"app":"agent"}},
            "template":{"metadata":{"labels":{"app":"agent"}},
                        "spec":{"containers":[{"name":"a","image":"agent:1"}]}}}})");
  auto dc = Do("POST", "/apis/apps/v1/namespaces/default/daemonsets", ds);
  ASSERT_EQ(dc.code, 201) << dc.raw;
  EXPECT_EQ(dc.body["metadata"]["generation"], 1);
  auto p1 = Do("PATCH", "/apis/apps/v1/namespaces/default/daemonsets/agent",
               {{"metadata", {{"labels", {{"x", "y"}}}}}}, "application/merge-patch+json");
  EXPECT_EQ(p1.body["metadata"]["generation"], 1) << p1.raw;
  auto p2 = Do("PATCH", "/apis/apps/v1/namespaces/default/daemonsets/agent/status",
               {{"status", {{"numberReady", 3}}}}, "application/merge-patch+json");
  EXPECT_EQ(p2.body["metadata"]["generation"], 1) << p2.raw;
  EXPECT_EQ(p2.body["status"]["numberReady"], 3);
  auto p3 = Do("PATCH", "/apis/apps/v1/namespaces/default/daemonsets/agent",
               {{"spec", {{"minReadySeconds", 5}}}, {"status", {{"numberReady", 9}}}},
               "application/merge-patch+json");
  EXPECT_EQ(p3.body["metadata"]["generation"], 2) << p3.raw;
  EXPECT_EQ(p3.body["status"]["numberReady"], 3);  // status ignored on the main resource
}

TEST_F(SimServerTest, SelectorsAndPaging) {
  for (int i = 0; i < 7; ++i)
    ASSERT_TRUE(sim_->Create("/api/v1/nodes",
                             Node("n" + std::to_string(i),
                                  {{"gpu", i % 2 ? "a100" : "h100"}, {"idx", std::to_string(i)}}))
                    .ok());
  auto l = Do("GET", "/api/v1/nodes?labelSelector=gpu%3Dh100");
  ASSERT_EQ(l.code, 200);
  EXPECT_EQ(l.body["items"].size(), 4u);
  EXPECT_EQ(l.body["kind"], "NodeList");
  l = Do("GET", "/api/v1/nodes?labelSelector=gpu%20in%20(a100),idx!=1");
  EXPECT_EQ(l.body["items"].size(), 2u) << l.raw;
  l = Do("GET", "/api/v1/nodes?fieldSelector=metadata.name%3Dn3");
  ASSERT_EQ(l.body["items"].size(), 1u);
  EXPECT_EQ(l.body["items"][0]["metadata"]["name"], "n3");
  auto bad = Do("GET", "/api/v1/nodes?fieldSelector=spec.foo%3Dx");
  EXPECT_EQ(bad.code, 400);
  // Paging.
  std::vector<std::string> names;
  std::string cont;
  int pages = 0;
  do {
    auto p = Do("GET", "/api/v1/nodes?limit=3" + (cont.empty() ? "" : "&continue=" + cont));
    ASSERT_EQ(p.code, 200) << p.raw;
    for (auto& it : p.body["items"]) names.push_back(it["metadata"]["name"]);
    cont = p.body["metadata"].value("continue", "");
    ++pages;
  } while (!cont.empty() && pages < 10);
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(names.size(), 7u);
  // Empty list still has items: [].
  auto e = Do("GET", "/apis/policy/v1/namespaces/default/poddisruptionbudgets");
  ASSERT_TRUE(e.body["items"].is_array());
  // Pods by node (drain's query) across namespaces.
  StartSim(SimOptions{.kubelet = false, .scheduler = false, .controllers = false});
  ASSERT_TRUE(sim_->Create("/api/v1/namespaces/default/pods", Pod("a", "n1")).ok());
  ASSERT_TRUE(sim_->Create("/api/v1/namespaces/default/pods", Pod("b", "n2")).ok());
  l = Do("GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1&limit=500");
  ASSERT_EQ(l.body["items"].size(), 1u) << l.raw;
  EXPECT_EQ(l.body["items"][0]["metadata"]["name"], "a");
}

TEST_F(SimServerTest, Patches) {
  ASSERT_TRUE(sim_->Create("/api/v1/nodes", Node("n1")).ok());
  // cordon / uncordon (SMP, null deletes)
  auto p = Do("PATCH", "/api/v1/nodes/n1", {{"spec", {{"unschedulable", true}}}},
              "application/strategic-merge-patch+json");
  ASSERT_EQ(p.code, 200) << p.raw;
  EXPECT_EQ(p.body["spec"]["unschedulable"], true);
  p = Do("PATCH", "/api/v1/nodes/n1", {{"spec", {{"unschedulable", nullptr}}}},
         "application/strategic-merge-patch+json");
  EXPECT_FALSE(p.body["spec"].contains("unschedulable")) << p.raw;
  // taints: atomic list
  p = Do("PATCH", "/api/v1/nodes/n1?fieldManager=kubectl-taint&fieldValidation=Strict",
         {{"spec", {{"taints", {{{"effect", "NoSchedule"}, {"key", "k"}, {"value", "v"}}}}}}},
         "application/strategic-merge-patch+json");
  ASSERT_EQ(p.code, 200) << p.raw;
  EXPECT_EQ(p.body["spec"]["taints"].size(), 1u);
  // label with merge patch
  p = Do("PATCH", "/api/v1/nodes/n1", {{"metadata", {{"labels", {{"a", "b"}}}}}},
         "application/merge-patch+json");
  EXPECT_EQ(p.body["metadata"]["labels"]["a"], "b");
  // json patch
  p = Do("PATCH", "/api/v1/nodes/n1",
         json::array({{{"op", "add"}, {"path", "/metadata/labels/c"}, {"value", "d"}}}),
         "application/json-patch+json");
  ASSERT_EQ(p.code, 200) << p.raw;
  EXPECT_EQ(p.body["metadata"]["labels"]["c"], "d");
  auto tf = Do("PATCH", "/api/v1/nodes/n1",
               json::array({{{"op", "test"}, {"path", "/metadata/labels/c"}, {"value", "x"}}}),
               "application/json-patch+json");
  EXPECT_EQ(tf.code, 422) << tf.raw;
  // Stale RV in a patch -> 409.
  auto cf = Do("PATCH", "/api/v1/nodes/n1", {{"metadata", {{"resourceVersion", "1"}}}},
               "application/merge-patch+json");
  EXPECT_EQ(cf.code, 409) << cf.raw;
  // status subresource: SMP on conditions merges by type; spec changes are dropped.
  p = Do("PATCH", "/api/v1/nodes/n1/status",
         {{"status", {{"conditions", {{{"type", "GPUHealthy"}, {"status", "False"}}}}}},
          {"spec", {{"unschedulable", true}}}},
         "application/strategic-merge-patch+json");
  ASSERT_EQ(p.code, 200) << p.raw;
  EXPECT_EQ(p.body["status"]["conditions"].size(), 2u) << p.raw;
  EXPECT_FALSE(p.body["spec"].contains("unschedulable"));
  // dryRun=All does not persist.
  std::uint64_t rv = sim_->ResourceVersion();
  p = Do("PATCH", "/api/v1/nodes/n1?dryRun=All", {{"metadata", {{"labels", {{"dry", "run"}}}}}},
         "application/merge-patch+json");
  EXPECT_EQ(p.code, 200);
  EXPECT_EQ(sim_->ResourceVersion(), rv);
  EXPECT_FALSE((*sim_->Get("/api/v1/nodes/n1"))["metadata"]["labels"].contains("dry"));
}

TEST_F(SimServerTest, ValidationAndBadInput) {
  auto r = Do("POST", "/api/v1/nodes", json{{"metadata", {{"name", "Bad_Name"}}}});
  EXPECT_EQ(r.code, 422) << r.raw;
  EXPECT_EQ(r.body["reason"], "Invalid");
  httplib::Result raw = cli_->Post("/api/v1/nodes", "{not json", "application/json");
  ASSERT_TRUE(raw);
  EXPECT_EQ(raw->status, 400);
  // generateName
  auto g = Do("POST", "/api/v1/namespaces/default/events",
              {{"metadata", {{"generateName", "ev-"}}},
               {"involvedObject", {{"kind", "Node"}, {"name", "n1"}}},
               {"reason", "Test"},
               {"message", "m"},
               {"type", "Normal"}});
  ASSERT_EQ(g.code, 201) << g.raw;
  std::string name = g.body["metadata"]["name"];
  EXPECT_EQ(name.size(), 8u);
  EXPECT_EQ(name.substr(0, 3), "ev-");
  // Namespace must exist.
  json pod = Pod("p", "");
  pod["metadata"].erase("namespace");
  auto ns = Do("POST", "/api/v1/namespaces/nope/pods", pod);
  EXPECT_EQ(ns.code, 404) << ns.raw;
}

TEST_F(SimServerTest, EventsBothGroupsOneStore) {
  json ev = {{"apiVersion", "events.k8s.io/v1"},
             {"kind", "Event"},
             {"metadata", {{"name", "n1.abc"}, {"namespace", "default"}}},
             {"eventTime", "2026-01-02T03:04:05.123456Z"},
             {"reportingController", "gpuguardian.io/operator"},
             {"reportingInstance", "op-0"},
             {"action", "Taint"},
             {"reason", "NodeTainted"},
             {"note", "tainted"},
             {"type", "Normal"},
             {"regarding", {{"kind", "Node"}, {"name", "n1"}, {"apiVersion", "v1"}}}};
  auto c = Do("POST", "/apis/events.k8s.io/v1/namespaces/default/events", ev);
  ASSERT_EQ(c.code, 201) << c.raw;
  EXPECT_EQ(c.body["apiVersion"], "events.k8s.io/v1");
  EXPECT_EQ(c.body["note"], "tainted");
  auto core = Do("GET", "/api/v1/namespaces/default/events/n1.abc");
  ASSERT_EQ(core.code, 200);
  EXPECT_EQ(core.body["message"], "tainted");
  EXPECT_EQ(core.body["involvedObject"]["name"], "n1");
  auto l =
      Do("GET", "/api/v1/events?fieldSelector=involvedObject.kind%3DNode,involvedObject.name%3Dn1");
  EXPECT_EQ(l.body["items"].size(), 1u) << l.raw;
}

// Reads a watch stream on a thread, collecting events.
class WatchReader {
 public:
  WatchReader(const std::string& url, const std::string& path) {
    thread_ = std::thread([this, url, path] {
      httplib::Client c(url);
      c.set_read_timeout(60, 0);
      auto r = c.Get(path, [this](const char* data, size_t len) {
        std::scoped_lock lock(mu_);
        buf_.append(data, len);
        std::size_t nl;
        while ((nl = buf_.find('\n')) != std::string::npos) {
          events_.push_back(json::parse(buf_.substr(0, nl), nullptr, false));
          buf_.erase(0, nl + 1);
        }
        return !stop_.load();
      });
      status_ = r ? r->status : -1;
      done_ = true;
    });
  }
  ~WatchReader() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  std::vector<json> Events() {
    std::scoped_lock lock(mu_);
    return events_;
  }
  std::vector<json> OfType(const std::string& t) {
    std::vector<json> out;
    for (auto& e : Events())
      if (e.value("type", "") == t) out.push_back(e);
    return out;
  }
  bool done() const { return done_; }

 private:
  std::mutex mu_;
  std::string buf_;
  std::vector<json> events_;
  std::atomic<bool> stop_{false}, done_{false};
  std::atomic<int> status_{0};
  std::thread thread_;
};

TEST_F(SimServerTest, WatchFromListRvWithBookmarks) {
  ASSERT_TRUE(sim_->Create("/api/v1/nodes", Node("n1")).ok());
  auto l = Do("GET", "/api/v1/nodes");
  std::string rv = l.body["metadata"]["resourceVersion"];
  std::size_t base = sim_->ActiveWatches();
  WatchReader w(sim_->Url(),
                "/api/v1/nodes?watch=True&allowWatchBookmarks=True&resourceVersion=" + rv);
  ASSERT_TRUE(WaitFor([&] { return sim_->ActiveWatches() > base; }));
  ASSERT_TRUE(sim_->Create("/api/v1/nodes", Node("n2")).ok());
  ASSERT_TRUE(
      sim_->MergePatch("/api/v1/nodes/n2", {{"metadata", {{"labels", {{"a", "b"}}}}}}).ok());
  ASSERT_TRUE(sim_->Delete("/api/v1/nodes/n2").ok());
  ASSERT_TRUE(
      WaitFor([&] { return w.OfType("DELETED").size() == 1 && !w.OfType("BOOKMARK").empty(); }));
  auto added = w.OfType("ADDED");
  ASSERT_EQ(added.size(), 1u);  // n1 predates the RV: not replayed
  EXPECT_EQ(added[0]["object"]["metadata"]["name"], "n2");
  EXPECT_EQ(w.OfType("MODIFIED").size(), 1u);
  auto bm = w.OfType("BOOKMARK");
  EXPECT_EQ(bm[0]["object"]["kind"], "Node");
  EXPECT_FALSE(bm[0]["object"]["metadata"]["resourceVersion"].get<std::string>().empty());
}

TEST_F(SimServerTest, WatchInitialStateSelectorsAndTimeout) {
  ASSERT_TRUE(sim_->Create("/api/v1/nodes", Node("n1", {{"pool", "a"}})).ok());
  ASSERT_TRUE(sim_->Create("/api/v1/nodes", Node("n2", {{"pool", "b"}})).ok());
  WatchReader w(sim_->Url(), "/api/v1/nodes?watch=1&labelSelector=pool%3Da&timeoutSeconds=2");
  ASSERT_TRUE(WaitFor([&] { return w.OfType("ADDED").size() == 1; }));
  // Relabel n2 into the selection -> ADDED; n1 out -> DELETED.
  ASSERT_TRUE(
      sim_->MergePatch("/api/v1/nodes/n2", {{"metadata", {{"labels", {{"pool", "a"}}}}}}).ok());
  ASSERT_TRUE(
      sim_->MergePatch("/api/v1/nodes/n1", {{"metadata", {{"labels", {{"pool", "c"}}}}}}).ok());
  ASSERT_TRUE(
      WaitFor([&] { return w.OfType("ADDED").size() == 2 && w.OfType("DELETED").size() == 1; }));
  // timeoutSeconds ends the stream.
  EXPECT_TRUE(WaitFor([&] { return w.done(); }, 15s));
}

TEST_F(SimServerTest, WatchTooOldResourceVersionIs410) {
  SimOptions o;
  o.watch_history = 5;
  o.kubelet = o.controllers = false;
  StartSim(o);
  for (int i = 0; i < 20; ++i)
    ASSERT_TRUE(sim_->Create("/api/v1/nodes", Node("n" + std::to_string(i))).ok());
  WatchReader w(sim_->Url(), "/api/v1/nodes?watch=true&resourceVersion=2");
  ASSERT_TRUE(WaitFor([&] { return w.done(); }));
  auto evs = w.Events();
  ASSERT_EQ(evs.size(), 1u);
  EXPECT_EQ(evs[0]["type"], "ERROR");
  EXPECT_EQ(evs[0]["object"]["code"], 410);
  EXPECT_EQ(evs[0]["object"]["reason"], "Expired");
  EXPECT_EQ(
      evs[0]["object"]["message"].get<std::string>().rfind("too old resource version: 2 (", 0), 0u);
  // A recent RV works.
  std::string rv = std::to_string(sim_->ResourceVersion() - 2);
  WatchReader w2(sim_->Url(),
                 "/api/v1/nodes?watch=true&allowWatchBookmarks=true&resourceVersion=" + rv);
  ASSERT_TRUE(WaitFor([&] { return w2.OfType("ADDED").size() == 2; }));
}

// Each resource keeps its own window, as kube-apiserver keeps a watch cache per resource: a
// burst of writes to another resource does not expire a node watch's resourceVersion.
TEST_F(SimServerTest, WatchHistoryIsPerResource) {
  SimOptions o;
  o.watch_history = 5;
  o.kubelet = o.controllers = o.scheduler = false;
  StartSim(o);
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(sim_->Create("/api/v1/nodes", Node("n" + std::to_string(i))).ok());
  const std::string after_nodes = std::to_string(sim_->ResourceVersion());
  const std::string before_nodes = std::to_string(sim_->ResourceVersion() - 3);
  for (int i = 0; i < 20; ++i) {
    json cm = {{"apiVersion", "v1"},
               {"kind", "ConfigMap"},
               {"metadata", {{"name", "cm" + std::to_string(i)}}},
               {"data", {{"k", "v"}}}};
    ASSERT_EQ(Do("POST", "/api/v1/namespaces/default/configmaps", cm).code, 201);
  }
  // Nodes: all three creations replay from before them.
  WatchReader nodes(
      sim_->Url(),
      "/api/v1/nodes?watch=true&allowWatchBookmarks=true&resourceVersion=" + before_nodes);
  ASSERT_TRUE(WaitFor([&] { return nodes.OfType("ADDED").size() == 3; }));
  EXPECT_TRUE(nodes.OfType("ERROR").empty());
  // ConfigMaps: 20 events through a 5-event window, so the first ones are gone.
  WatchReader cms(sim_->Url(), "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=" +
                                   after_nodes);
  ASSERT_TRUE(WaitFor([&] { return cms.done(); }));
  auto evs = cms.Events();
  ASSERT_EQ(evs.size(), 1u);
  EXPECT_EQ(evs[0]["object"]["code"], 410);
}

TEST_F(SimServerTest, EvictionHonorsPdb) {
  ASSERT_TRUE(sim_->Create("/api/v1/nodes", Node("n1")).ok());
  for (const char* n : {"a", "b"}) {
    auto r = Do("POST", "/api/v1/namespaces/default/pods", Pod(n, "n1", {{"app", "infer"}}));
    ASSERT_EQ(r.code, 201) << r.raw;
  }
  // The simulated kubelet runs bound pods.
  ASSERT_TRUE(WaitFor([&] {
    auto l = Do("GET", "/api/v1/pods?fieldSelector=status.phase%3DRunning");
    return l.body["items"].size() == 2;
  }));
  json pdb = {{"apiVersion", "policy/v1"},
              {"kind", "PodDisruptionBudget"},
              {"metadata", {{"name", "infer-pdb"}}},
              {"spec", {{"minAvailable", 2}, {"selector", {{"matchLabels", {{"app", "infer"}}}}}}}};
  ASSERT_EQ(Do("POST", "/apis/policy/v1/namespaces/default/poddisruptionbudgets", pdb).code, 201);
  ASSERT_TRUE(WaitFor([&] {
    auto g = Do("GET", "/apis/policy/v1/namespaces/default/poddisruptionbudgets/infer-pdb");
    return g.body["status"].value("observedGeneration", 0) == 1 &&
           g.body["status"].value("currentHealthy", 0) == 2;
  }));
  json ev = {{"kind", "Eviction"},
             {"apiVersion", "policy/v1"},
             {"metadata", {{"name", "a"}, {"namespace", "default"}}},
             {"deleteOptions", json::object()}};
  auto blocked = Do("POST", "/api/v1/namespaces/default/pods/a/eviction", ev);
  EXPECT_EQ(blocked.code, 429) << blocked.raw;
  EXPECT_EQ(blocked.body["reason"], "TooManyRequests");
  EXPECT_EQ(blocked.body["message"],
            "Cannot evict pod as it would violate the pod's disruption budget.");
  // Relax the budget.
  ASSERT_EQ(Do("PATCH", "/apis/policy/v1/namespaces/default/poddisruptionbudgets/infer-pdb",
               {{"spec", {{"minAvailable", 1}}}}, "application/merge-patch+json")
                .code,
            200);
  ASSERT_TRUE(WaitFor([&] {
    auto g = Do("GET", "/apis/policy/v1/namespaces/default/poddisruptionbudgets/infer-pdb");
    return g.body["status"].value("observedGeneration", 0) == 2 &&
           g.body["status"].value("disruptionsAllowed", 0) == 1;
  }));
  auto ok = Do("POST", "/api/v1/namespaces/default/pods/a/eviction", ev);
  EXPECT_EQ(ok.code, 201) << ok.raw;
  EXPECT_EQ(ok.body["status"], "Success");
  // Graceful: terminating first, then gone after the grace period (30 s / time scale).
  auto term = Do("GET", "/api/v1/namespaces/default/pods/a");
  if (term.code == 200) {
    EXPECT_TRUE(term.body["metadata"].contains("deletionTimestamp"));
  }
  // Immediate delete with grace 0 removes at once.
  auto d = Do("DELETE", "/api/v1/namespaces/default/pods/b", {{"gracePeriodSeconds", 0}});
  EXPECT_EQ(d.code, 200);
  EXPECT_EQ(Do("GET", "/api/v1/namespaces/default/pods/b").code, 404);
}

TEST_F(SimServerTest, GracefulDeletionFinishesAfterGrace) {
  SimOptions o;
  o.time_scale = 30;  // 30 s grace -> 1 s
  StartSim(o);
  ASSERT_TRUE(sim_->Create("/api/v1/nodes", Node("n1")).ok());
  ASSERT_EQ(Do("POST", "/api/v1/namespaces/default/pods", Pod("a", "n1")).code, 201);
  ASSERT_TRUE(WaitFor([&] {
    return Do("GET", "/api/v1/namespaces/default/pods/a").body["status"].value("phase", "") ==
           "Running";
  }));
  auto d = Do("DELETE", "/api/v1/namespaces/default/pods/a");
  ASSERT_EQ(d.code, 200);
  EXPECT_TRUE(d.body["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ(d.body["metadata"]["deletionGracePeriodSeconds"], 30);
  EXPECT_TRUE(WaitFor([&] { return Do("GET", "/api/v1/namespaces/default/pods/a").code == 404; }));
}

// The Deployment controller makes one ReplicaSet of the template; the ReplicaSet
// controller keeps spec.replicas pods, replacing an evicted one and following a scale.
TEST_F(SimServerTest, DeploymentReplaceEvictedPodsAndScales) {
  SimOptions o;
  o.time_scale = 30;
  StartSim(o);
  ASSERT_TRUE(sim_->Create("/api/v1/nodes", Node("n1")).ok());
  json dep = json::parse(R"({"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},
    "spec":{"replicas":2,"selector":{"matchLabels":{"app":"web"}},
      "template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"c","image":"web"}]}}}})");
  ASSERT_EQ(Do("POST", "/apis/apps/v1/namespaces/default/deployments", dep).code, 201);
  auto running = [&] {
    std::vector<std::string> names;
    Resp l = Do("GET", "/api/v1/namespaces/default/pods?labelSelector=app%3Dweb");
    for (const auto& p : l.body["items"])
      if (p["status"].value("phase", "") == "Running" &&
          !p["metadata"].contains("deletionTimestamp"))
        names.push_back(p["metadata"]["name"]);
    return names;
  };
  ASSERT_TRUE(WaitFor([&] { return running().size() == 2; }, 60s))
      << Do("GET", "/api/v1/namespaces/default/pods").raw;
  auto rss = Do("GET", "/apis/apps/v1/namespaces/default/replicasets").body["items"];
  ASSERT_EQ(rss.size(), 1u);
  EXPECT_EQ(rss[0]["metadata"]["ownerReferences"][0]["kind"], "Deployment");
  EXPECT_TRUE(rss[0]["spec"]["template"]["metadata"]["labels"].contains("pod-template-hash"));
  std::string victim = running()[0];
  json ev = {{"kind", "Eviction"},
             {"apiVersion", "policy/v1"},
             {"metadata", {{"name", victim}, {"namespace", "default"}}}};
  ASSERT_EQ(Do("POST", "/api/v1/namespaces/default/pods/" + victim + "/eviction", ev).code, 201);
  ASSERT_TRUE(WaitFor(
      [&] {
        auto n = running();
        return n.size() == 2 && std::find(n.begin(), n.end(), victim) == n.end();
      },
      60s));
  ASSERT_EQ(Do("PATCH", "/apis/apps/v1/namespaces/default/deployments/web",
               {{"spec", {{"replicas", 3}}}}, "application/merge-patch+json")
                .code,
            200);
  EXPECT_TRUE(WaitFor([&] { return running().size() == 3; }, 60s));
  EXPECT_EQ(Do("GET", "/apis/apps/v1/namespaces/default/replicasets").body["items"].size(), 1u);
}

TEST_F(SimServerTest, Discovery) {
  auto api = Do("GET", "/api");
  EXPECT_EQ(api.body["kind"], "APIVersions");
  auto apis = Do("GET", "/apis");
  EXPECT_EQ(apis.body["kind"], "APIGroupList");
  bool policy = false;
  for (auto& g : apis.body["groups"]) policy |= g["name"] == "policy";
  EXPECT_TRUE(policy);
  auto v1 = Do("GET", "/api/v1");
  bool eviction = false;
  for (auto& r : v1.body["resources"])
    if (r["name"] == "pods/eviction") {
      eviction = true;
      EXPECT_EQ(r["group"], "policy");
      EXPECT_EQ(r["version"], "v1");
      EXPECT_EQ(r["kind"], "Eviction");
    }
  EXPECT_TRUE(eviction);
  EXPECT_FALSE(v1.body.contains("apiVersion"));
  auto ver = Do("GET", "/version");
  EXPECT_EQ(ver.body["major"], "1");
  EXPECT_EQ(Do("GET", "/healthz").raw, "ok");
  // resource.k8s.io per kube version.
  auto dra = Do("GET", "/apis/resource.k8s.io/v1");
  EXPECT_EQ(dra.code, 200);
  auto alpha = Do("GET", "/apis/resource.k8s.io/v1alpha3");
  bool dtr = false;
  for (auto& r : alpha.body["resources"]) dtr |= r["name"] == "devicetaintrules";
  EXPECT_TRUE(dtr);
}

TEST_F(SimServerTest, CrdServesCustomResources) {
  json crd =
      json::parse(R"({"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
    "metadata":{"name":"gpuhealthpolicies.gpuguardian.io"},
    "spec":{"group":"gpuguardian.io","scope":"Cluster",
      "names":{"plural":"gpuhealthpolicies","singular":"gpuhealthpolicy","kind":"GPUHealthPolicy","shortNames":["ghp"]},
      "versions":[{"name":"v1alpha1","served":true,"storage":true,"subresources":{"status":{}},
        "schema":{"openAPIV3Schema":{"type":"object","properties":{
          "spec":{"type":"object","properties":{"maxUnhealthy":{"type":"integer","minimum":0}}},
          "status":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}}}]}})");
  auto c = Do("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd);
  ASSERT_EQ(c.code, 201) << c.raw;
  EXPECT_EQ(c.body["status"]["conditions"][1]["type"], "Established");
  auto disc = Do("GET", "/apis/gpuguardian.io/v1alpha1");
  ASSERT_EQ(disc.code, 200) << disc.raw;
  EXPECT_EQ(disc.body["resources"].size(), 2u);
  json cr = {{"apiVersion", "gpuguardian.io/v1alpha1"},
             {"kind", "GPUHealthPolicy"},
             {"metadata", {{"name", "default"}}},
             {"spec", {{"maxUnhealthy", 3}}},
             {"status", {{"x", 1}}}};
  auto cc = Do("POST", "/apis/gpuguardian.io/v1alpha1/gpuhealthpolicies", cr);
  ASSERT_EQ(cc.code, 201) << cc.raw;
  EXPECT_FALSE(cc.body.contains("status"));  // stripped on create
  // Schema validation.
  cr["metadata"]["name"] = "bad";
  cr["spec"]["maxUnhealthy"] = -1;
  auto bad = Do("POST", "/apis/gpuguardian.io/v1alpha1/gpuhealthpolicies", cr);
  EXPECT_EQ(bad.code, 422) << bad.raw;
  // SMP is not allowed for CRs.
  auto smp = Do("PATCH", "/apis/gpuguardian.io/v1alpha1/gpuhealthpolicies/default",
                {{"spec", {{"maxUnhealthy", 4}}}}, "application/strategic-merge-patch+json");
  EXPECT_EQ(smp.code, 415);
  // PUT without RV on a CR -> 422.
  json put = cc.body;
  put["metadata"].erase("resourceVersion");
  EXPECT_EQ(Do("PUT", "/apis/gpuguardian.io/v1alpha1/gpuhealthpolicies/default", put).code, 422);
  // Status subresource via merge patch (what Python's patch_cluster_custom_object_status does).
  auto st = Do("PATCH", "/apis/gpuguardian.io/v1alpha1/gpuhealthpolicies/default/status",
               {{"status", {{"observedGeneration", 1}}}}, "application/merge-patch+json");
  ASSERT_EQ(st.code, 200) << st.raw;
  EXPECT_EQ(st.body["status"]["observedGeneration"], 1);
  // Deleting the CRD removes the resource.
  EXPECT_EQ(
      Do("DELETE",
         "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gpuhealthpolicies.gpuguardian.io")
          .code,
      200);
  EXPECT_EQ(Do("GET", "/apis/gpuguardian.io/v1alpha1/gpuhealthpolicies").code, 404);
}

TEST_F(SimServerTest, FaultInjection) {
  FaultConfig f;
  FaultRule r;
  r.verb = "patch";
  r.resource = "nodes";
  r.error_rate = 1;
  r.error_code = 503;
  r.retry_after_seconds = 2;
  r.remaining = 1;
  f.rules.push_back(r);
  sim_->SetFaults(f);
  ASSERT_TRUE(sim_->Create("/api/v1/nodes", Node("n1")).ok());
  auto p = Do("PATCH", "/api/v1/nodes/n1", {{"metadata", {{"labels", {{"a", "b"}}}}}},
              "application/merge-patch+json");
  EXPECT_EQ(p.code, 503);
  EXPECT_EQ(p.retry_after, "2");
  p = Do("PATCH", "/api/v1/nodes/n1", {{"metadata", {{"labels", {{"a", "b"}}}}}},
         "application/merge-patch+json");
  EXPECT_EQ(p.code, 200);  // count exhausted
  // Over HTTP: outage window.
  auto set = Do("POST", "/_sim/faults", {{"outageSeconds", 30}});
  ASSERT_EQ(set.code, 200) << set.raw;
  EXPECT_EQ(Do("GET", "/api/v1/nodes").code, 503);
  EXPECT_EQ(Do("GET", "/healthz").code, 200);
  EXPECT_EQ(Do("DELETE", "/_sim/faults").code, 200);
  EXPECT_EQ(Do("GET", "/api/v1/nodes").code, 200);
  // Watch cut after N events.
  ASSERT_EQ(Do("POST", "/_sim/faults", {{"watchCutAfterEvents", 1}}).code, 200);
  ASSERT_TRUE(sim_->Create("/api/v1/nodes", Node("n2")).ok());
  WatchReader w(sim_->Url(), "/api/v1/nodes?watch=1");
  EXPECT_TRUE(WaitFor([&] { return w.done(); }));
  EXPECT_EQ(w.Events().size(), 1u);
  // Metrics count requests.
  auto m = cli_->Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(
      m->body.find("apiserver_request_total{verb=\"patch\",resource=\"nodes\",code=\"503\"} 1"),
      std::string::npos)
      << m->body;
  EXPECT_NE(m->body.find("apiserver_storage_objects{resource=\"core/nodes\"} 2"),
            std::string::npos);
}

// Wire details of writes as kube-apiserver answers them: dryRun in query and DeleteOptions
// bodies and evictions, a create carrying a resourceVersion, review kinds.
TEST_F(SimServerTest, DryRunEverywhereAndCreateWithResourceVersion) {
  ASSERT_EQ(Do("POST", "/api/v1/nodes", Node("n1")).code, 201);
  ASSERT_EQ(Do("POST", "/api/v1/namespaces/default/pods", Pod("p1", "n1")).code, 201);
  // DeleteOptions body.
  auto d = Do("DELETE", "/api/v1/nodes/n1",
              json{{"kind", "DeleteOptions"}, {"apiVersion", "v1"}, {"dryRun", {"All"}}});
  EXPECT_EQ(d.code, 200) << d.raw;
  EXPECT_EQ(Do("GET", "/api/v1/nodes/n1").code, 200);
  d = Do("DELETE", "/api/v1/nodes/n1", json{{"dryRun", {"Everything"}}});
  EXPECT_EQ(d.code, 400) << d.raw;
  EXPECT_NE(d.body.value("message", "").find("supported values: \"All\""), std::string::npos)
      << d.raw;
  EXPECT_EQ(Do("GET", "/api/v1/nodes/n1").code, 200);
  // Eviction with deleteOptions.dryRun: answered as a real eviction, nothing deleted.
  json ev = {{"apiVersion", "policy/v1"},
             {"kind", "Eviction"},
             {"metadata", {{"name", "p1"}, {"namespace", "default"}}},
             {"deleteOptions", {{"dryRun", {"All"}}}}};
  auto e = Do("POST", "/api/v1/namespaces/default/pods/p1/eviction", ev);
  EXPECT_EQ(e.code, 201) << e.raw;
  auto pod = Do("GET", "/api/v1/namespaces/default/pods/p1");
  ASSERT_EQ(pod.code, 200);
  EXPECT_FALSE(pod.body["metadata"].contains("deletionTimestamp")) << pod.raw;
  // Query dryRun on create and update.
  EXPECT_EQ(Do("POST", "/api/v1/namespaces/default/configmaps?dryRun=All",
               json{{"metadata", {{"name", "c"}}}})
                .code,
            201);
  EXPECT_EQ(Do("GET", "/api/v1/namespaces/default/configmaps/c").code, 404);
  EXPECT_EQ(Do("POST", "/api/v1/namespaces/default/configmaps?dryRun=Nope",
               json{{"metadata", {{"name", "c"}}}})
                .code,
            400);
  // A create with a (positive) resourceVersion: the storage layer's bare 500.
  auto rv = Do("POST", "/api/v1/namespaces/default/configmaps",
               json{{"metadata", {{"name", "c"}, {"resourceVersion", "42"}}}});
  EXPECT_EQ(rv.code, 500) << rv.raw;
  EXPECT_EQ(rv.body.value("message", ""),
            "resourceVersion should not be set on objects to be created");
  EXPECT_EQ(Do("GET", "/api/v1/namespaces/default/configmaps/c").code, 404);
  EXPECT_EQ(Do("POST", "/api/v1/namespaces/default/configmaps",
               json{{"metadata", {{"name", "c"}, {"resourceVersion", "0"}}}})
                .code,
            201);
}

TEST_F(SimServerTest, AccessReviewsWithoutAuthzAllowAndValidate) {
  json ssar = {{"apiVersion", "authorization.k8s.io/v1"},
               {"kind", "SelfSubjectAccessReview"},
               {"spec", {{"resourceAttributes", {{"verb", "list"}, {"resource", "nodes"}}}}}};
  auto r = Do("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", ssar);
  ASSERT_EQ(r.code, 201) << r.raw;
  EXPECT_EQ(r.body["status"]["allowed"], true);
  ssar["spec"] = json::object();
  r = Do("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", ssar);
  EXPECT_EQ(r.code, 422) << r.raw;
  json sar = {{"apiVersion", "authorization.k8s.io/v1"},
              {"kind", "SubjectAccessReview"},
              {"spec", {{"resourceAttributes", {{"verb", "get"}, {"resource", "pods"}}}}}};
  r = Do("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", sar);
  EXPECT_EQ(r.code, 422) << r.raw;  // user or groups required
  EXPECT_EQ(Do("GET", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews").code, 405);
  auto disc = Do("GET", "/apis/authorization.k8s.io/v1");
  ASSERT_EQ(disc.code, 200);
  for (const auto& res : disc.body["resources"])
    EXPECT_EQ(res["verbs"], json::array({"create"})) << res.dump();
}

TEST_F(SimServerTest, ListResourceVersionMatchAndRemainingItemCount) {
  for (int i = 0; i < 5; ++i)
    ASSERT_EQ(Do("POST", "/api/v1/nodes", Node("n" + std::to_string(i))).code, 201);
  auto page = Do("GET", "/api/v1/nodes?limit=2");
  ASSERT_EQ(page.code, 200);
  EXPECT_EQ(page.body["metadata"]["remainingItemCount"], 3) << page.raw;
  auto filtered = Do("GET", "/api/v1/nodes?limit=2&labelSelector=x!%3Dy");
  EXPECT_FALSE(filtered.body["metadata"].contains("remainingItemCount")) << filtered.raw;
  std::string rv = page.body["metadata"]["resourceVersion"];
  auto exact = Do("GET", "/api/v1/nodes?resourceVersionMatch=Exact&resourceVersion=" + rv);
  EXPECT_EQ(exact.code, 200) << exact.raw;
  EXPECT_EQ(exact.body["metadata"]["resourceVersion"], rv);
  EXPECT_EQ(Do("GET", "/api/v1/nodes?resourceVersionMatch=Exact&resourceVersion=0").code, 422);
  EXPECT_EQ(Do("GET", "/api/v1/nodes?resourceVersionMatch=Sometimes&resourceVersion=1").code, 422);
  EXPECT_EQ(Do("GET", "/api/v1/nodes?resourceVersionMatch=NotOlderThan").code, 422);
  ASSERT_EQ(Do("PATCH", "/api/v1/nodes/n1", json{{"metadata", {{"labels", {{"a", "b"}}}}}},
               "application/merge-patch+json")
                .code,
            200);
  auto gone = Do("GET", "/api/v1/nodes?resourceVersionMatch=Exact&resourceVersion=" + rv);
  EXPECT_EQ(gone.code, 410) << gone.raw;
  EXPECT_EQ(Do("GET", "/api/v1/nodes?resourceVersionMatch=NotOlderThan&resourceVersion=" + rv).code,
            200);
}

}  // namespace
}  // namespace gg::sim
