// Simulated kubelet, disruption controller, scheduler and workload controllers.
#include "sim/controllers.h"

#include <chrono>
#include <deque>
#include <map>
#include <set>
#include <tuple>

#include "common/time_util.h"
#include "sim/pdb.h"
#include "sim/selector.h"

namespace gg::sim {

using nlohmann::json;
using SteadyTime = std::chrono::steady_clock::time_point;

namespace {

constexpr auto kPoll = std::chrono::milliseconds(50);

// An in-process watch that restarts (with a fresh initial state) if it overflows.
class StoreWatch {
 public:
  StoreWatch(Store& store, std::string storage) : store_(store), storage_(std::move(storage)) {
    Restart();
  }
  ~StoreWatch() { store_.StopWatch(w_); }
  void Pop(std::deque<WatchEvent>& out, std::chrono::milliseconds wait) {
    if (!w_->Pop(out, wait)) {
      store_.StopWatch(w_);
      Restart();
    }
  }

 private:
  void Restart() {
    w_ = store_.StartWatch(storage_, "", LabelSelector(), FieldSelector(), std::nullopt).watcher;
  }
  Store& store_;
  std::string storage_;
  std::shared_ptr<Watcher> w_;
};

std::string Str(const json& j, std::initializer_list<const char*> path) {
  const json* cur = &j;
  for (const char* p : path) {
    if (!cur->is_object() || !cur->contains(p)) return "";
    cur = &(*cur)[p];
  }
  return cur->is_string() ? cur->get<std::string>() : "";
}

}  // namespace

long PodGpuRequest(const json& pod) {
  long total = 0;
  if (!pod.contains("spec") || !pod["spec"].is_object()) return 0;
  for (const auto& c : pod["spec"].value("containers", json::array())) {
    if (!c.is_object() || !c.contains("resources") || !c["resources"].is_object()) continue;
    const auto& r = c["resources"];
    for (const char* k : {"limits", "requests"}) {
      if (r.contains(k) && r[k].is_object() && r[k].contains("nvidia.com/gpu")) {
        const auto& v = r[k]["nvidia.com/gpu"];
        long n = 0;
        if (v.is_number_integer()) n = v.get<long>();
        if (v.is_string()) {
          try {
            n = std::stol(v.get<std::string>());
          } catch (...) {
          }
        }
        total += n;
        break;
      }
    }
  }
  return total;
}

bool ToleratesTaints(const json& pod, const json& node) {
  json tolerations = pod.contains("spec") ? pod["spec"].value("tolerations", json::array()) : json::array();
  json taints = node.contains("spec") ? node["spec"].value("taints", json::array()) : json::array();
  for (const auto& t : taints) {
    if (!t.is_object()) continue;
    std::string effect = t.value("effect", "");
    if (effect != "NoSchedule" && effect != "NoExecute") continue;
    bool ok = false;
    for (const auto& tol : tolerations) {
      if (!tol.is_object()) continue;
      std::string op = tol.value("operator", "Equal");
      std::string key = tol.value("key", "");
      std::string teff = tol.value("effect", "");
      if (!teff.empty() && teff != effect) continue;
      if (op == "Exists") {
        if (key.empty() || key == t.value("key", "")) ok = true;
      } else if (key == t.value("key", "") && tol.value("value", "") == t.value("value", "")) {
        ok = true;
      }
      if (ok) break;
    }
    if (!ok) return false;
  }
  return true;
}

void Controllers::Start() {
  if (opts_.kubelet) threads_.emplace_back([this](std::stop_token s) { KubeletLoop(s); });
  if (opts_.controllers) threads_.emplace_back([this](std::stop_token s) { PdbLoop(s); });
  if (opts_.scheduler) threads_.emplace_back([this](std::stop_token s) { SchedulerLoop(s); });
  if (opts_.controllers) threads_.emplace_back([this](std::stop_token s) { WorkloadLoop(s); });
}

void Controllers::Stop() {
  for (auto& t : threads_) t.request_stop();
  threads_.clear();  // joins
}

void Controllers::KubeletLoop(std::stop_token stop) {
  auto pods_ri = core_.registry().Find("", "v1", "pods");
  auto nodes_ri = core_.registry().Find("", "v1", "nodes");
  StoreWatch watch(core_.store(), pods_ri->storage);
  std::multimap<SteadyTime, std::tuple<std::string, std::string, std::string>> due;
  while (!stop.stop_requested()) {
    std::deque<WatchEvent> evs;
    watch.Pop(evs, kPoll);
    auto now = std::chrono::steady_clock::now();
    for (const auto& e : evs) {
      if (e.type == EventType::kDeleted) continue;
      json p = json::parse(e.obj->json, nullptr, false);
      if (!p.is_object()) continue;
      const json& md = p["metadata"];
      if (md.contains("deletionTimestamp")) {
        long grace = md.value("deletionGracePeriodSeconds", 0L);
        auto delay = std::chrono::milliseconds(
            static_cast<long>(static_cast<double>(grace) * 1000.0 / std::max(opts_.time_scale, 1e-6)));
        due.emplace(now + delay, std::make_tuple(e.obj->ns, e.obj->name, e.obj->uid));
        continue;
      }
      std::string node = Str(p, {"spec", "nodeName"});
      std::string phase = Str(p, {"status", "phase"});
      if (node.empty() || !(phase.empty() || phase == "Pending")) continue;
      if (!core_.Get(Target{nodes_ri, "", node, ""}).ok()) continue;
      std::string ts = core_.NowRfc3339();
      json conds = json::array();
      for (const char* c : {"PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"})
        conds.push_back({{"type", c}, {"status", "True"}, {"lastProbeTime", nullptr}, {"lastTransitionTime", ts}});
      json cstat = json::array();
      for (const auto& c : p["spec"].value("containers", json::array()))
        cstat.push_back({{"name", c.value("name", "")},
                         {"image", c.value("image", "")},
                         {"imageID", ""},
                         {"ready", true},
                         {"started", true},
                         {"restartCount", 0},
                         {"state", {{"running", {{"startedAt", ts}}}}}});
      json patch = {{"status",
                     {{"phase", "Running"},
                      {"startTime", ts},
                      {"hostIP", "10.0.0.1"},
                      {"podIP", "10.244.0.1"},
                      {"conditions", conds},
                      {"containerStatuses", cstat}}}};
      core_.Patch(Target{pods_ri, e.obj->ns, e.obj->name, "status"}, "application/merge-patch+json",
                  patch, WriteOpts{});
    }
    while (!due.empty() && due.begin()->first <= now) {
      auto [ns, name, uid] = due.begin()->second;
      due.erase(due.begin());
      core_.FinishTermination(Target{pods_ri, ns, name, ""}, uid);
    }
  }
}

void Controllers::PdbLoop(std::stop_token stop) {
  auto pods_ri = core_.registry().Find("", "v1", "pods");
  auto pdb_ri = core_.registry().Find("policy", "v1", "poddisruptionbudgets");
  StoreWatch pods(core_.store(), pods_ri->storage);
  StoreWatch pdbs(core_.store(), pdb_ri->storage);
  std::set<std::string> dirty;
  auto scale = [this](const json& ref, std::string_view ns) -> std::optional<int> {
    std::string kind = ref.value("kind", "");
    std::string name = ref.value("name", "");
    std::shared_ptr<const ResourceInfo> ri;
    if (kind == "ReplicaSet") ri = core_.registry().Find("apps", "v1", "replicasets");
    if (kind == "Deployment") ri = core_.registry().Find("apps", "v1", "deployments");
    if (kind == "StatefulSet") ri = core_.registry().Find("apps", "v1", "statefulsets");
    if (!ri) return std::nullopt;
    auto r = core_.Get(Target{ri, std::string(ns), name, ""});
    if (!r.ok() || !r.obj.contains("spec")) return std::nullopt;
    return r.obj["spec"].value("replicas", 1);
  };
  while (!stop.stop_requested()) {
    std::deque<WatchEvent> evs;
    pdbs.Pop(evs, std::chrono::milliseconds(0));
    pods.Pop(evs, kPoll);
    for (const auto& e : evs) dirty.insert(e.obj->ns);
    if (dirty.empty()) continue;
    std::set<std::string> again;
    for (const auto& ns : dirty) {
      for (const json& pdb : core_.ListObjects(pdb_ri->storage, ns)) {
        std::vector<json> selected;
        auto sel = LabelSelector::FromJson(pdb["spec"].value("selector", json()));
        if (sel.ok()) {
          std::scoped_lock lock(core_.store().mu());
          core_.store().ForEachLocked(pods_ri->storage, ns, "", [&](const std::string&, const ObjPtr& o) {
            if (!sel->SelectsNothing() && sel->Matches(o->labels)) selected.push_back(json::parse(o->json));
            return true;
          });
        }
        auto st = ComputePdbStatus(pdb, selected, core_.NowRfc3339(), scale);
        if (!st.ok()) continue;
        json next = ApplyPdbStatus(pdb, *st, core_.NowRfc3339());
        if (next.value("status", json()) == pdb.value("status", json())) continue;
        Target t{pdb_ri, ns, pdb["metadata"].value("name", ""), "status"};
        auto r = core_.Update(t, next, WriteOpts{});
        if (!r.ok() && r.err->code == 409) again.insert(ns);
      }
    }
    dirty = std::move(again);
  }
}

void Controllers::SchedulerLoop(std::stop_token stop) {
  while (!stop.stop_requested()) std::this_thread::sleep_for(kPoll);
}

void Controllers::WorkloadLoop(std::stop_token stop) {
  while (!stop.stop_requested()) std::this_thread::sleep_for(kPoll);
}

}  // namespace gg::sim
