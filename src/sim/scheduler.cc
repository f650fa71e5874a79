// Simulated kube-scheduler. Filters nodes as the default profile does (NodeUnschedulable,
// TaintToleration, NodeAffinity incl. nodeSelector, NodeResourcesFit over the node's
// allocatable: cpu, memory, pods and extended resources such as nvidia.com/gpu), scores the
// feasible ones (preferred node affinity, PreferNoSchedule taints, least allocated) and binds.
// Every pod bound to a node counts against it until it is gone or terminal, so a terminating
// pod keeps its GPUs while it shuts down. A pod that fits nowhere gets PodScheduled=False
// (reason Unschedulable, the real "0/N nodes are available: ..." message) and a
// FailedScheduling Event; a bound one a Scheduled Event. Both Events are events.k8s.io/v1,
// from reportingController default-scheduler.
#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "sim/controller_util.h"
#include "sim/controllers.h"

namespace gg::sim {

using internal::FirstUntolerated;
using internal::kPoll;
using internal::NodeSelectorMatches;
using internal::PodRequests;
using internal::PodTerminal;
using internal::PodTolerations;
using internal::Resources;
using internal::SteadyTime;
using internal::Str;
using internal::Taint;
using nlohmann::json;

namespace {

constexpr const char* kSchedulerName = "default-scheduler";
constexpr const char* kNotHelpful = "Preemption is not helpful for scheduling";
constexpr const char* kNoVictims = "No preemption victims found for incoming pod";

struct SchedNode {
  json match;  // metadata (name, labels) for affinity
  std::vector<Taint> taints;
  bool unschedulable = false;
  Resources allocatable;  // only what the node reports
};

struct PendingPod {
  json pod;
  Resources req;
  std::vector<internal::Toleration> tols;
  bool attempt = true;       // try at the next pass
  std::string last_message;  // of the last FailedScheduling
  std::string event_name;    // its Event, for the series
  int event_count = 0;
  SteadyTime event_bumped{};
};

struct Assigned {
  std::string node;
  Resources req;
};

std::string ResourceReason(const std::string& name) {
  if (name == "pods") return "Too many pods";
  return "Insufficient " + name;
}

// Reasons this node cannot take the pod (empty: it fits), in the default filter order; each
// node contributes one plugin's reasons (NodeResourcesFit may give several).
std::vector<std::string> Filter(const PendingPod& p, const SchedNode& n, const Resources& used) {
  const json& spec = p.pod["spec"];
  if (n.unschedulable) {
    Taint t{"node.kubernetes.io/unschedulable", "", "NoSchedule", ""};
    bool tolerated = false;
    for (const auto& tol : p.tols) tolerated |= tol.Tolerates(t);
    if (!tolerated) return {"node(s) were unschedulable"};
  }
  if (const Taint* t = FirstUntolerated(n.taints, p.tols, {"NoSchedule", "NoExecute"}))
    return {"node(s) had untolerated taint {" + t->key + ": " + t->value + "}"};
  if (!NodeSelectorMatches(spec, n.match))
    return {"node(s) didn't match Pod's node affinity/selector"};
  std::vector<std::string> out;
  for (const auto& [name, want] : p.req) {
    if (want <= 0) continue;
    auto a = n.allocatable.find(name);
    bool core = name == "cpu" || name == "memory" || name == "pods" || name == "ephemeral-storage";
    // A node that does not report cpu/memory/pods at all (a hand-written test node) is not
    // limited in them; an extended resource it does not report is one it has none of.
    if (a == n.allocatable.end()) {
      if (core) continue;
      out.push_back(ResourceReason(name));
      continue;
    }
    auto u = used.find(name);
    std::int64_t in_use = u == used.end() ? 0 : u->second;
    if (in_use + want > a->second) out.push_back(ResourceReason(name));
  }
  return out;
}

bool IsResourceReason(const std::string& r) {
  return r.rfind("Insufficient ", 0) == 0 || r == "Too many pods";
}

}  // namespace

std::string UnschedulableMessage(std::size_t nodes, const std::vector<std::string>& reasons) {
  std::string head = "0/" + std::to_string(nodes) + " nodes are available";
  if (nodes == 0) return "no nodes available to schedule pods";
  std::map<std::string, int> hist;
  for (const auto& r : reasons) hist[r]++;
  std::vector<std::string> parts;
  for (const auto& [r, n] : hist) parts.push_back(std::to_string(n) + " " + r);
  std::sort(parts.begin(), parts.end());
  std::string msg = head + ": ";
  for (std::size_t i = 0; i < parts.size(); ++i) msg += (i ? ", " : "") + parts[i];
  msg += ".";
  return msg;
}

namespace {

// What the scheduler knows of a node from its object.
SchedNode ReadSchedNode(const std::string& name, const json& n) {
  SchedNode sn;
  sn.match = {
      {"metadata", {{"name", name}, {"labels", n["metadata"].value("labels", json::object())}}}};
  sn.taints = internal::NodeTaints(n);
  sn.unschedulable =
      n.contains("spec") && n["spec"].is_object() && n["spec"].value("unschedulable", false);
  const json* alloc = nullptr;
  if (n.contains("status") && n["status"].is_object()) {
    const json& st = n["status"];
    if (st.contains("allocatable") && st["allocatable"].is_object())
      alloc = &st["allocatable"];
    else if (st.contains("capacity") && st["capacity"].is_object())
      alloc = &st["capacity"];
  }
  if (alloc)
    for (const auto& [r, q] : alloc->items())
      if (auto v = internal::ParseQuantityMilli(q)) sn.allocatable[r] = *v;
  return sn;
}

// How many feasible nodes to find before choosing (percentageOfNodesToScore's adaptive
// default: all below 100 nodes, then 50% falling to 5%, at least 100).
std::size_t WantFeasible(std::size_t total) {
  if (total < 100) return total;
  long pct = std::max<long>(5, 50 - static_cast<long>(total) / 125);
  return std::max<std::size_t>(100, total * static_cast<std::size_t>(pct) / 100);
}

// The scheduler's cache (nodes, what each pod bound to a node holds, the pods waiting) and
// its scheduling passes.
class Scheduler {
 public:
  explicit Scheduler(ApiCore& core)
      : core_(core),
        pods_ri_(core.registry().Find("", "v1", "pods")),
        nodes_ri_(core.registry().Find("", "v1", "nodes")),
        pods_(core.store(), pods_ri_->storage),
        nodes_(core.store(), nodes_ri_->storage) {}

  void Run(std::stop_token stop);

 private:
  void Release(const std::string& key);
  void Assign(const std::string& key, const std::string& node, Resources req);
  void PopNodes();
  void PopPods();
  void OnPod(const std::string& key, json p);
  bool DuePass(SteadyTime now);
  void Pass(std::stop_token stop, SteadyTime now);
  std::vector<std::string> FindFeasible(const PendingPod& pp, std::vector<std::string>& reasons);
  std::string PreemptionMessage(const PendingPod& pp);
  void ReportUnschedulable(PendingPod& pp, const std::vector<std::string>& reasons, SteadyTime now);
  std::string ChooseNode(const PendingPod& pp, const std::vector<std::string>& feasible);
  void Bind(const std::string& key, const PendingPod& pp, const std::string& chosen);

  ApiCore& core_;
  std::shared_ptr<const ResourceInfo> pods_ri_, nodes_ri_;
  internal::StoreWatch pods_, nodes_;
  std::map<std::string, SchedNode> node_map_;
  std::vector<std::string> order_;  // node names, for round-robin sampling
  bool order_dirty_ = true;
  std::size_t next_start_ = 0;
  std::size_t want_feasible_ = 0;
  std::map<std::string, Assigned> assigned_;  // pod key -> node and requests
  std::map<std::string, Resources> used_;     // node -> requested by the pods on it
  std::map<std::string, PendingPod> pending_;
  bool retry_all_ = false;
  SteadyTime last_pass_{};
  const std::string instance_ = std::string(kSchedulerName) + "-sim";
};

void Scheduler::Release(const std::string& key) {
  auto it = assigned_.find(key);
  if (it == assigned_.end()) return;
  auto& u = used_[it->second.node];
  for (const auto& [r, v] : it->second.req) u[r] -= v;
  assigned_.erase(it);
}

void Scheduler::Assign(const std::string& key, const std::string& node, Resources req) {
  Release(key);
  auto& u = used_[node];
  for (const auto& [r, v] : req) u[r] += v;
  assigned_[key] = {node, std::move(req)};
}

void Scheduler::PopNodes() {
  std::deque<WatchEvent> evs;
  if (!nodes_.Pop(evs, std::chrono::milliseconds(0))) node_map_.clear();
  for (const auto& e : evs) {
    retry_all_ = true;
    order_dirty_ = true;
    if (e.type == EventType::kDeleted) {
      node_map_.erase(e.obj->name);
      continue;
    }
    json n = json::parse(e.obj->json, nullptr, false);
    if (!n.is_object()) continue;
    node_map_[e.obj->name] = ReadSchedNode(e.obj->name, n);
  }
}

void Scheduler::PopPods() {
  std::deque<WatchEvent> evs;
  if (!pods_.Pop(evs, kPoll)) {  // restarted: rebuild from the full state that follows
    assigned_.clear();
    used_.clear();
    pending_.clear();
    retry_all_ = true;
  }
  for (const auto& e : evs) {
    std::string key = e.obj->ns + "/" + e.obj->name;
    if (e.type == EventType::kDeleted) {
      if (assigned_.count(key)) retry_all_ = true;
      Release(key);
      pending_.erase(key);
      continue;
    }
    json p = json::parse(e.obj->json, nullptr, false);
    if (p.is_object()) OnPod(key, std::move(p));
  }
}

// A pod's change: a bound pod holds its requests, an unbound one of ours waits.
void Scheduler::OnPod(const std::string& key, json p) {
  std::string node = Str(p, {"spec", "nodeName"});
  if (!node.empty()) {
    pending_.erase(key);
    // Bound pods hold their requests until they are gone or terminal; a terminating
    // pod still runs (and holds its GPUs) through its grace period.
    if (PodTerminal(p)) {
      if (assigned_.count(key)) retry_all_ = true;
      Release(key);
    } else {
      Assign(key, node, PodRequests(p));
    }
    return;
  }
  Release(key);
  std::string sched = Str(p, {"spec", "schedulerName"});
  bool mine = sched.empty() || sched == kSchedulerName;
  if (!mine || PodTerminal(p) || p["metadata"].contains("deletionTimestamp")) {
    pending_.erase(key);
    return;
  }
  auto it = pending_.find(key);
  if (it == pending_.end()) {
    PendingPod pp;
    pp.req = PodRequests(p);
    pp.tols = PodTolerations(p);
    pp.pod = std::move(p);
    pending_.emplace(key, std::move(pp));
  } else if (it->second.pod["spec"] != p["spec"]) {
    it->second.req = PodRequests(p);
    it->second.tols = PodTolerations(p);
    it->second.pod = std::move(p);
    it->second.attempt = true;
  } else {
    it->second.pod = std::move(p);  // our own status write coming back
  }
}

// A pass at most every 100 ms, and only when some pod is worth another try.
bool Scheduler::DuePass(SteadyTime now) {
  if (pending_.empty() || now - last_pass_ < std::chrono::milliseconds(100)) return false;
  bool any = retry_all_;
  for (const auto& [k, pp] : pending_) any |= pp.attempt;
  return any;
}

// Nodes that pass the filters, visited round-robin from where the last pod stopped until
// enough are found; `reasons`: one per reason instance on the others, for the histogram.
std::vector<std::string> Scheduler::FindFeasible(const PendingPod& pp,
                                                 std::vector<std::string>& reasons) {
  const std::size_t total = order_.size();
  std::vector<std::string> feasible;
  std::size_t visited = 0;
  for (; visited < total && feasible.size() < want_feasible_; ++visited) {
    const std::string& name = order_[(next_start_ + visited) % total];
    auto why = Filter(pp, node_map_[name], used_[name]);
    if (why.empty())
      feasible.push_back(name);
    else
      reasons.insert(reasons.end(), why.begin(), why.end());
  }
  if (total > 0) next_start_ = (next_start_ + visited) % total;
  return feasible;
}

// The preemption half of the message: the simulator never preempts.
std::string Scheduler::PreemptionMessage(const PendingPod& pp) {
  std::map<std::string, int> pre;
  for (const auto& n : order_) {
    auto why = Filter(pp, node_map_[n], used_[n]);
    bool res = !why.empty() && std::all_of(why.begin(), why.end(), IsResourceReason);
    pre[res ? kNoVictims : kNotHelpful]++;
  }
  std::string msg = " preemption: 0/" + std::to_string(order_.size()) + " nodes are available: ";
  bool first = true;
  for (const auto& [r, n] : pre) {
    msg += (first ? "" : ", ") + std::to_string(n) + " " + r;
    first = false;
  }
  return msg + ".";
}

// PodScheduled=False and a FailedScheduling Event when the message changes; otherwise the
// Event's series is bumped now and then.
void Scheduler::ReportUnschedulable(PendingPod& pp, const std::vector<std::string>& reasons,
                                    SteadyTime now) {
  const json& pod = pp.pod;
  std::string ns = pod["metadata"].value("namespace", ""), name = pod["metadata"].value("name", "");
  const std::size_t total = order_.size();
  std::string msg = UnschedulableMessage(total, reasons);
  if (total > 0) msg += PreemptionMessage(pp);
  if (msg != pp.last_message) {
    json cond = {{"type", "PodScheduled"},    {"status", "False"},
                 {"reason", "Unschedulable"}, {"message", msg},
                 {"lastProbeTime", nullptr},  {"lastTransitionTime", core_.NowRfc3339()}};
    core_.Patch(Target{pods_ri_, ns, name, "status"}, "application/strategic-merge-patch+json",
                {{"status", {{"conditions", {cond}}}}}, WriteOpts{});
    pp.event_name = internal::RecordEvent(core_, pod, "Warning", "FailedScheduling", "Scheduling",
                                          msg, kSchedulerName, instance_);
    pp.event_count = 1;
    pp.event_bumped = now;
    pp.last_message = msg;
  } else if (!pp.event_name.empty() && now - pp.event_bumped >= std::chrono::seconds(5)) {
    internal::BumpEventSeries(core_, ns.empty() ? "default" : ns, pp.event_name, ++pp.event_count);
    pp.event_bumped = now;
  }
}

// Score: preferred node affinity (weight 2), PreferNoSchedule taints (weight 3), least
// allocated cpu/memory (weight 1); each normalised to 0..100 as the plugins do.
std::string Scheduler::ChooseNode(const PendingPod& pp, const std::vector<std::string>& feasible) {
  std::vector<std::int64_t> aff(feasible.size()), prefer(feasible.size());
  std::int64_t aff_max = 0, prefer_max = 0;
  for (std::size_t i = 0; i < feasible.size(); ++i) {
    const SchedNode& n = node_map_[feasible[i]];
    aff[i] = internal::PreferredAffinityScore(pp.pod["spec"], n.match);
    aff_max = std::max(aff_max, aff[i]);
    for (const auto& t : n.taints) {
      if (t.effect != "PreferNoSchedule") continue;
      bool ok = false;
      for (const auto& tol : pp.tols)
        ok |= (tol.effect.empty() || tol.effect == "PreferNoSchedule") && tol.Tolerates(t);
      if (!ok) prefer[i]++;
    }
    prefer_max = std::max(prefer_max, prefer[i]);
  }
  std::string chosen;
  double best = -1;
  for (std::size_t i = 0; i < feasible.size(); ++i) {
    const SchedNode& n = node_map_[feasible[i]];
    Resources& u = used_[feasible[i]];
    double least = 0;
    int counted = 0;
    for (const char* r : {"cpu", "memory"}) {
      auto a = n.allocatable.find(r);
      if (a == n.allocatable.end() || a->second <= 0) continue;
      auto q = pp.req.find(r);
      std::int64_t after = u[r] + (q == pp.req.end() ? 0 : q->second);
      least += std::max<double>(
          0, static_cast<double>(a->second - after) * 100.0 / static_cast<double>(a->second));
      ++counted;
    }
    double score =
        (counted ? least / counted : 0) +
        2.0 *
            (aff_max > 0 ? static_cast<double>(aff[i]) * 100.0 / static_cast<double>(aff_max) : 0) +
        3.0 * (prefer_max > 0 ? 100.0 - static_cast<double>(prefer[i]) * 100.0 /
                                            static_cast<double>(prefer_max)
                              : 100.0);
    if (score > best) {
      best = score;
      chosen = feasible[i];
    }
  }
  return chosen;
}

// Binds the pod, clears an earlier PodScheduled=False, and records the Scheduled Event.
void Scheduler::Bind(const std::string& key, const PendingPod& pp, const std::string& chosen) {
  const json& pod = pp.pod;
  std::string ns = pod["metadata"].value("namespace", ""), name = pod["metadata"].value("name", "");
  Target t{pods_ri_, ns, name, ""};
  json bind = {{"spec", {{"nodeName", chosen}}}};
  auto r = core_.Patch(t, "application/merge-patch+json", bind, WriteOpts{});
  if (!r.ok()) return;
  Assign(key, chosen, pp.req);  // assumed until the watch confirms it
  if (!pp.last_message.empty()) {
    json cond = {{"type", "PodScheduled"},
                 {"status", "True"},
                 {"lastProbeTime", nullptr},
                 {"lastTransitionTime", core_.NowRfc3339()}};
    core_.Patch(Target{pods_ri_, ns, name, "status"}, "application/strategic-merge-patch+json",
                {{"status", {{"conditions", {cond}}}}}, WriteOpts{});
  }
  internal::RecordEvent(core_, r.obj.is_object() ? r.obj : pod, "Normal", "Scheduled", "Binding",
                        "Successfully assigned " + ns + "/" + name + " to " + chosen,
                        kSchedulerName, instance_);
}

// One pass over the pods worth trying (all of them after a node or capacity change).
void Scheduler::Pass(std::stop_token stop, SteadyTime now) {
  last_pass_ = now;
  if (order_dirty_) {
    order_.clear();
    for (const auto& [name, n] : node_map_) order_.push_back(name);
    order_dirty_ = false;
    next_start_ = 0;
  }
  bool all = retry_all_;
  retry_all_ = false;
  want_feasible_ = WantFeasible(order_.size());
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (stop.stop_requested()) break;
    PendingPod& pp = it->second;
    if (!all && !pp.attempt) {
      ++it;
      continue;
    }
    pp.attempt = false;
    std::vector<std::string> reasons;
    std::vector<std::string> feasible = FindFeasible(pp, reasons);
    if (feasible.empty()) {
      ReportUnschedulable(pp, reasons, now);
      ++it;
      continue;
    }
    Bind(it->first, pp, ChooseNode(pp, feasible));
    it = pending_.erase(it);
  }
}

void Scheduler::Run(std::stop_token stop) {
  while (!stop.stop_requested()) {
    PopPods();  // waits up to kPoll for pod events
    // Nodes after pods: every node written before a pod that was just seen is then in the
    // cache (writes reach the watchers in order), so a pod created right after its nodes is
    // not placed on a cache that lacks some of them.
    PopNodes();
    auto now = std::chrono::steady_clock::now();
    if (DuePass(now)) Pass(stop, now);
  }
}

}  // namespace

void Controllers::SchedulerLoop(std::stop_token stop) { Scheduler(core_).Run(stop); }

}  // namespace gg::sim
