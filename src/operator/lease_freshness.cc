// AgentLeases implementation (see lease_freshness.h).
#include "operator/lease_freshness.h"

#include <algorithm>
#include <mutex>
#include <vector>

#include "api/gpu_node_health.h"
#include "k8s/codec.h"
#include "k8s/resource.h"

namespace gg::op {
namespace {

runtime::InformerOptions LeaseOptions(const std::string& ns, Duration poll_interval) {
  runtime::InformerOptions o;
  o.namespace_ = ns;
  o.label_selector = AgentLeases::LabelSelector();
  o.poll_interval = poll_interval;
  return o;
}

}  // namespace

AgentLeases::AgentLeases(k8s::RestClient& client, Clock& clock, const std::string& lease_namespace,
                         Duration poll_interval)
    : InformerCore(client, k8s::kLeases, clock, LeaseOptions(lease_namespace, poll_interval)),
      namespace_(lease_namespace) {}

void AgentLeases::OnListError(const Status& s) {
  if (s.code() != StatusCode::kPermissionDenied && !IsNotFound(s)) return;  // transient
  MarkSyncedWithoutList();
  if (refusal_logged_) return;
  refusal_logged_ = true;
  log_.Error(
      "cannot list the agents' heartbeat Leases: node freshness comes from the reports alone",
      {{"namespace", namespace_},
       {"error", s.ToString()},
       {"fix", "grant list and watch on leases in that namespace (deploy/rbac/operator.yaml)"}});
}

AgentLeases::~AgentLeases() { Stop(); }

std::string AgentLeases::LabelSelector() { return std::string(api::kAgentLeaseLabel) + "=true"; }

std::string AgentLeases::NodeOf(const k8s::Lease& lease) {
  const std::string_view node = api::AgentLeaseNode(lease.meta.name);
  if (node.empty() || !lease.renew_time || lease.holder_identity != node) return "";
  return lease.holder_identity;
}

std::vector<AgentLeases::Entry>::iterator AgentLeases::Find(const std::string& node) {
  return std::lower_bound(renew_ns_.begin(), renew_ns_.end(), node,
                          [](const Entry& e, const std::string& n) { return e.first < n; });
}
std::vector<AgentLeases::Entry>::const_iterator AgentLeases::Find(const std::string& node) const {
  return std::lower_bound(renew_ns_.begin(), renew_ns_.end(), node,
                          [](const Entry& e, const std::string& n) { return e.first < n; });
}

std::optional<WallTime> AgentLeases::RenewTime(const std::string& node) const {
  std::shared_lock lock(mu_);
  auto it = Find(node);
  if (it == renew_ns_.end() || it->first != node) return std::nullopt;
  return WallTime(
      std::chrono::duration_cast<WallTime::duration>(std::chrono::nanoseconds(it->second)));
}

std::size_t AgentLeases::Size() const {
  std::shared_lock lock(mu_);
  return renew_ns_.size();
}

void AgentLeases::Apply(const k8s::Lease& lease, bool from_list) {
  const std::string node = NodeOf(lease);
  if (node.empty()) {
    // No longer one of ours (holder changed, renewTime gone): its node has no Lease.
    const std::string_view named = api::AgentLeaseNode(lease.meta.name);
    if (!named.empty()) Forget(std::string(named));
    return;
  }
  const std::int64_t ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(lease.renew_time->time_since_epoch())
          .count();
  bool changed = false;
  {
    std::unique_lock lock(mu_);
    auto it = Find(node);
    if (it == renew_ns_.end() || it->first != node) {
      renew_ns_.insert(it, Entry(node, ns));
      changed = true;
    } else {
      changed = it->second != ns;
      it->second = ns;
    }
  }
  if (from_list) seen_.insert(node);
  if (changed && on_change_) on_change_(node);
}

void AgentLeases::Forget(const std::string& node) {
  std::size_t erased = 0;
  {
    std::unique_lock lock(mu_);
    auto it = Find(node);
    if (it != renew_ns_.end() && it->first == node) {
      renew_ns_.erase(it);
      erased = 1;
    }
  }
  if (erased > 0 && on_change_) on_change_(node);
}

void AgentLeases::BeginRelist() { seen_.clear(); }

StatusOr<k8s::ListPageInfo> AgentLeases::OnListPage(std::string& body) {
  std::function<void(k8s::Lease &&)> sink = [this](k8s::Lease&& l) {
    Apply(l, /*from_list=*/true);
  };
  auto list = k8s::ParseListInto<k8s::Lease>(body, sink);
  if (!list.ok()) return list.status();
  return k8s::ListPageInfo{list->resource_version, list->continue_token};
}

void AgentLeases::EndRelist() {
  std::vector<std::string> gone;
  {
    std::shared_lock lock(mu_);
    for (const auto& [node, ns] : renew_ns_)
      if (!seen_.count(node)) gone.push_back(node);
  }
  seen_ = {};  // clear() would keep a bucket per node until the next relist
  for (const auto& node : gone) Forget(node);
  std::unique_lock lock(mu_);
  renew_ns_.shrink_to_fit();  // the LIST grew it by doubling
}

Status AgentLeases::OnWatchLine(std::string_view line, std::string* rv) {
  auto ev = k8s::ParseWatchEvent<k8s::Lease>(line, /*padded=*/true);
  if (!ev.ok()) return ev.status();
  if (ev->type == k8s::WatchEventType::kError) return ev->error;
  *rv = ev->object.meta.resource_version;
  if (ev->type == k8s::WatchEventType::kBookmark) {
    stats_.bookmarks.fetch_add(1, std::memory_order_relaxed);
    return OkStatus();
  }
  stats_.events.fetch_add(1, std::memory_order_relaxed);
  if (ev->type == k8s::WatchEventType::kDeleted) {
    const std::string_view named = api::AgentLeaseNode(ev->object.meta.name);
    if (!named.empty()) Forget(std::string(named));
    return OkStatus();
  }
  Apply(ev->object, /*from_list=*/false);
  return OkStatus();
}

}  // namespace gg::op
