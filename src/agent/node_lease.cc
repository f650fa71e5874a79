// NodeLease implementation (see node_lease.h).
#include "agent/node_lease.h"

#include <nlohmann/json.hpp>

#include "agent/k8s_writers.h"
#include "api/gpu_node_health.h"
#include "common/time_util.h"
#include "k8s/codec.h"
#include "k8s/errors.h"
#include "k8s/resource.h"

namespace gg::agent {
namespace {

using Json = nlohmann::json;

// metadata.resourceVersion of a Lease the server returned ("" when unreadable).
std::string LeaseVersion(const std::string& body) {
  auto lease = k8s::ParseObject<k8s::Lease>(body);
  return lease.ok() ? lease->meta.resource_version : std::string();
}

k8s::WriteOptions Manager() {
  k8s::WriteOptions wo;
  wo.field_manager = kFieldManager;
  return wo;
}

}  // namespace

NodeLease::NodeLease(k8s::RestClient& client, std::string node_name, std::string lease_namespace,
                     std::int32_t duration_s)
    : client_(client),
      node_(std::move(node_name)),
      ns_(std::move(lease_namespace)),
      name_(NameFor(node_)),
      duration_s_(duration_s < 1 ? 1 : duration_s) {}

std::string NodeLease::NameFor(std::string_view node_name) {
  return api::AgentLeaseName(node_name);
}

std::string NodeLease::Body(const std::string& node_name, const std::string& lease_namespace,
                            const std::string& resource_version, std::int32_t duration_s,
                            WallTime renew_time) {
  Json meta = {
      {"name", NameFor(node_name)},
      {"namespace", lease_namespace},
      {"labels",
       {{api::kAgentLeaseLabel, "true"}, {"app.kubernetes.io/managed-by", kFieldManager}}}};
  if (!resource_version.empty()) meta["resourceVersion"] = resource_version;
  Json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                {"kind", "Lease"},
                {"metadata", std::move(meta)},
                {"spec",
                 {{"holderIdentity", node_name},
                  {"leaseDurationSeconds", duration_s},
                  {"renewTime", FormatRfc3339Micro(renew_time)}}}};
  return lease.dump(-1, ' ', false, Json::error_handler_t::replace);
}

Status NodeLease::Renew(WallTime now) {
  if (rv_.empty()) return ReadAndUpdate(now);
  Status st = Update(now);
  if (k8s::IsConflict(st)) return ReadAndUpdate(now);  // written by someone else since
  if (IsNotFound(st)) return Create(now);              // deleted since
  return st;
}

Status NodeLease::ReadAndUpdate(WallTime now) {
  rv_.clear();
  auto got = client_.Get(k8s::kLeases, ns_, name_);
  if (!got.ok() && IsNotFound(got.status())) return Create(now);
  if (!got.ok()) return got.status().WithContext("reading Lease " + ns_ + "/" + name_);
  rv_ = LeaseVersion(*got);
  if (rv_.empty())
    return InvalidArgumentError("Lease " + ns_ + "/" + name_ + " has no resourceVersion");
  return Update(now);
}

Status NodeLease::Create(WallTime now) {
  rv_.clear();
  auto r = client_.Create(k8s::kLeases, ns_, Body(node_, ns_, "", duration_s_, now), Manager());
  if (!r.ok()) return r.status().WithContext("creating Lease " + ns_ + "/" + name_);
  rv_ = LeaseVersion(*r);
  return OkStatus();
}

Status NodeLease::Update(WallTime now) {
  auto r =
      client_.Update(k8s::kLeases, ns_, name_, Body(node_, ns_, rv_, duration_s_, now), Manager());
  if (!r.ok()) {
    rv_.clear();
    return r.status().WithContext("renewing Lease " + ns_ + "/" + name_);
  }
  rv_ = LeaseVersion(*r);
  return OkStatus();
}

}  // namespace gg::agent
