// Policy usability and the policy status write.
#include "operator/cluster_view.h"

namespace gg::op {

const api::GpuHealthPolicy* UsablePolicy(const PolicyObject& obj, std::string* why) {
  if (!obj.policy) {
    if (why) *why = obj.decode_error.empty() ? "undecodable policy" : obj.decode_error;
    return nullptr;
  }
  auto errs = api::ValidatePolicySpec(obj.policy->spec);
  if (!errs.empty()) {
    if (why) *why = api::ValidationStatus(errs).message();
    return nullptr;
  }
  return &*obj.policy;
}

Status RestPolicyStatusWriter::WriteStatus(const std::string& policy,
                                           const api::GpuHealthPolicyStatus& s) {
  if (is_leader_ && !is_leader_()) return UnavailableError("not the leader: write skipped");
  std::string body = "{\"status\":" + api::EncodeGpuHealthPolicyStatus(s) + "}";
  auto r =
      client_.Patch(k8s::kGpuHealthPolicies, "", policy, k8s::PatchType::kMerge, body, "status");
  return r.ok() ? OkStatus() : r.status().WithContext("writing status of policy " + policy);
}

}  // namespace gg::op
