// Simulated disruption controller: keeps each PodDisruptionBudget's status current.
#include <chrono>
#include <optional>
#include <set>

#include "sim/controller_util.h"
#include "sim/controllers.h"
#include "sim/pdb.h"
#include "sim/selector.h"

namespace gg::sim {

using internal::ControllerUid;
using internal::kPoll;
using internal::MakeNodeInfo;
using internal::NodeInfo;
using internal::NodeSelectorMatches;
using internal::PodActive;
using internal::SteadyTime;
using internal::StoreWatch;
using internal::Str;
using nlohmann::json;

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
          core_.store().ForEachLocked(
              pods_ri->storage, ns, "", [&](const std::string&, const ObjPtr& o) {
                if (!sel->SelectsNothing() && MatchesLabels(*sel, o->labels))
                  selected.push_back(json::parse(o->json));
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

}  // namespace gg::sim
