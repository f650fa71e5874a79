// ResourceWriter / AnnotationWriter implementation (see k8s_writers.h).
#include "agent/k8s_writers.h"

#include <nlohmann/json.hpp>

#include "common/time_util.h"
#include "k8s/codec.h"
#include "k8s/errors.h"
#include "k8s/resource.h"

namespace gg::agent {
namespace {

using Json = nlohmann::json;

constexpr const char* kStatusTopLevel[] = {"nodeName",      "agentVersion", "observedAt",
                                           "heartbeatTime", "expectedGPUs", "gpus",
                                           "xids",          "sources"};

std::string DumpJson(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// metadata.resourceVersion of a written object ("" when the body says nothing usable).
std::string ResourceVersionOf(const std::string& body) {
  Json j = Json::parse(body, nullptr, false);
  if (!j.is_object() || !j.contains("metadata") || !j["metadata"].is_object()) return "";
  const Json& rv = j["metadata"].value("resourceVersion", Json());
  return rv.is_string() ? rv.get<std::string>() : "";
}

}  // namespace

ResourceWriter::ResourceWriter(k8s::RestClient& client, std::string node_name, Logger log)
    : client_(client), node_(std::move(node_name)), log_(std::move(log)) {}

std::string ResourceWriter::StatusPatchBody(const api::GpuNodeHealthStatus& report) {
  Json status = Json::parse(api::EncodeGpuNodeHealthStatus(report), nullptr, false);
  if (!status.is_object()) status = Json::object();
  for (const char* key : kStatusTopLevel)
    if (!status.contains(key)) status[key] = nullptr;
  Json body = Json::object();
  body["status"] = std::move(status);
  return DumpJson(body);
}

std::string ResourceWriter::HeartbeatPatchBody(WallTime heartbeat_time,
                                               const std::string& resource_version) {
  Json body = {{"metadata", {{"resourceVersion", resource_version}}},
               {"status", {{"heartbeatTime", FormatRfc3339Micro(heartbeat_time)}}}};
  return DumpJson(body);
}

std::string ResourceWriter::NewObjectBody(const std::string& node_name,
                                          const std::string& node_uid) {
  Json obj = {
      {"apiVersion", api::kApiVersion},
      {"kind", "GPUNodeHealth"},
      {"metadata",
       {{"name", node_name},
        {"labels", {{"app.kubernetes.io/managed-by", kFieldManager}}},
        {"ownerReferences",
         Json::array(
             {{{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node_name}, {"uid", node_uid}}})}}},
  };
  return DumpJson(obj);
}

Status ResourceWriter::EnsureObject() {
  auto got = client_.Get(k8s::kGpuNodeHealths, "", node_);
  if (got.ok()) {
    exists_ = true;
    return OkStatus();
  }
  if (!IsNotFound(got.status())) return got.status().WithContext("reading GPUNodeHealth");
  auto node = client_.Get(k8s::kNodes, "", node_);
  if (!node.ok()) return node.status().WithContext("reading Node " + node_ + " for its uid");
  auto meta = k8s::ParseObject<k8s::Node>(*node);
  if (!meta.ok()) return meta.status().WithContext("parsing Node " + node_);
  if (meta->meta.uid.empty()) return InvalidArgumentError("Node " + node_ + " has no uid");
  if (on_capacity_ && meta->gpu_capacity >= 0 && meta->gpu_capacity <= 1024)
    on_capacity_(static_cast<int>(meta->gpu_capacity));
  k8s::WriteOptions wo;
  wo.field_manager = kFieldManager;
  auto created = client_.Create(k8s::kGpuNodeHealths, "", NewObjectBody(node_, meta->meta.uid), wo);
  if (!created.ok() && !IsAlreadyExists(created.status()))
    return created.status().WithContext("creating GPUNodeHealth " + node_);
  if (created.ok()) log_.Info("created GPUNodeHealth", {{"node", node_}});
  exists_ = true;
  return OkStatus();
}

Status ResourceWriter::Write(const api::GpuNodeHealthStatus& report) {
  if (!exists_) GG_RETURN_IF_ERROR(EnsureObject());
  k8s::WriteOptions wo;
  wo.field_manager = kFieldManager;
  const std::string body = StatusPatchBody(report);
  written_rv_.clear();
  auto r =
      client_.Patch(k8s::kGpuNodeHealths, "", node_, k8s::PatchType::kMerge, body, "status", wo);
  if (!r.ok() && IsNotFound(r.status())) {
    // Deleted behind our back (or by garbage collection): create again and retry once.
    exists_ = false;
    GG_RETURN_IF_ERROR(EnsureObject());
    r = client_.Patch(k8s::kGpuNodeHealths, "", node_, k8s::PatchType::kMerge, body, "status", wo);
  }
  if (!r.ok()) return r.status().WithContext("writing GPUNodeHealth status");
  written_rv_ = ResourceVersionOf(*r);
  if (lease_ && !lease_tried_) {
    // The Lease exists from the first report on, so the operator sees it before it matters.
    lease_tried_ = true;
    (void)RenewLease(report.heartbeat_time);
  }
  return OkStatus();
}

bool ResourceWriter::RenewLease(WallTime now) {
  // About an hour between tries at the default 5-minute heartbeat.
  constexpr int kLeasePauseHeartbeats = 11;
  if (!lease_) return false;
  if (lease_paused_ > 0) {
    --lease_paused_;
    return false;
  }
  const Status st = lease_->Renew(now);
  if (st.ok()) {
    if (lease_failing_) log_.Info("node Lease renewed again", {{"lease", lease_->name()}});
    lease_failing_ = false;
    lease_error_.clear();
    return true;
  }
  // A transient failure (timeout, 5xx, 429) is tried again at the next heartbeat; anything
  // else says this cluster or its RBAC does not take the Lease.
  const StatusCode c = st.code();
  const bool transient = c == StatusCode::kUnavailable || c == StatusCode::kDeadlineExceeded ||
                         c == StatusCode::kResourceExhausted || k8s::IsConflict(st);
  if (!transient) lease_paused_ = kLeasePauseHeartbeats;
  lease_failing_ = true;
  if (st.ToString() != lease_error_) {
    lease_error_ = st.ToString();
    log_.Warn("cannot renew the node Lease; heartbeats patch the report instead",
              {{"lease", lease_->lease_namespace() + "/" + lease_->name()},
               {"error", lease_error_},
               {"next_try", transient ? std::string("next heartbeat")
                                      : std::to_string(kLeasePauseHeartbeats) + " heartbeats"}});
  }
  return false;
}

Status ResourceWriter::Heartbeat(const api::GpuNodeHealthStatus& report) {
  if (!exists_ || written_rv_.empty()) return Write(report);
  if (RenewLease(report.heartbeat_time)) return OkStatus();
  k8s::WriteOptions wo;
  wo.field_manager = kFieldManager;
  auto r = client_.Patch(k8s::kGpuNodeHealths, "", node_, k8s::PatchType::kMerge,
                         HeartbeatPatchBody(report.heartbeat_time, written_rv_), "status", wo);
  if (r.ok()) {
    written_rv_ = ResourceVersionOf(*r);
    return OkStatus();
  }
  // Changed (a conflict) or deleted since our last write: only the whole report is sure to
  // leave the object saying what we know.
  if (k8s::IsConflict(r.status()) || IsNotFound(r.status())) return Write(report);
  written_rv_.clear();  // unsure what landed: the next heartbeat writes the whole report
  return r.status().WithContext("renewing GPUNodeHealth heartbeatTime");
}

AnnotationWriter::AnnotationWriter(k8s::RestClient& client, std::string node_name)
    : client_(client), node_(std::move(node_name)) {}

Status AnnotationWriter::Write(const api::GpuNodeHealthStatus& report) {
  Json body = {
      {"metadata",
       {{"annotations", {{api::kHealthAnnotation, api::EncodeHealthAnnotation(report)}}}}}};
  k8s::WriteOptions wo;
  wo.field_manager = kFieldManager;
  auto r = client_.Patch(k8s::kNodes, "", node_, k8s::PatchType::kMerge, DumpJson(body), "", wo);
  if (!r.ok()) return r.status().WithContext("annotating Node " + node_);
  return OkStatus();
}

StatusOr<int> ReadNodeGpuCapacity(k8s::RestClient& client, const std::string& node_name) {
  auto body = client.Get(k8s::kNodes, "", node_name);
  if (!body.ok()) return body.status().WithContext("reading Node " + node_name);
  auto node = k8s::ParseObject<k8s::Node>(*body);
  if (!node.ok()) return node.status().WithContext("parsing Node " + node_name);
  if (node->gpu_capacity < 0 || node->gpu_capacity > 1024) return 0;
  return static_cast<int>(node->gpu_capacity);
}

}  // namespace gg::agent
