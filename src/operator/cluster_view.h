// ClusterView: the reconcilers' read side (informer caches in production, maps in tests),
// and PolicyStatusWriter, the write of GPUHealthPolicy status.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "api/gpu_health_policy.h"
#include "k8s/objects.h"
#include "k8s/rest_client.h"
#include "operator/crd_objects.h"
#include "runtime/informer.h"

namespace gg::op {

class ClusterView {
 public:
  virtual ~ClusterView() = default;
  virtual std::shared_ptr<const k8s::Node> Node(const std::string& name) const = 0;
  virtual std::shared_ptr<const NodeHealthObject> Report(const std::string& node) const = 0;
  virtual std::shared_ptr<const PolicyObject> Policy(const std::string& name) const = 0;
  virtual std::vector<std::shared_ptr<const PolicyObject>> Policies() const = 0;
};

class InformerView final : public ClusterView {
 public:
  InformerView(runtime::Informer<k8s::Node>& nodes, runtime::Informer<NodeHealthObject>& reports,
               runtime::Informer<PolicyObject>& policies)
      : nodes_(nodes), reports_(reports), policies_(policies) {}
  std::shared_ptr<const k8s::Node> Node(const std::string& name) const override {
    return nodes_.GetByKey(name);
  }
  std::shared_ptr<const NodeHealthObject> Report(const std::string& node) const override {
    return reports_.GetByKey(node);
  }
  std::shared_ptr<const PolicyObject> Policy(const std::string& name) const override {
    return policies_.GetByKey(name);
  }
  std::vector<std::shared_ptr<const PolicyObject>> Policies() const override {
    return policies_.List();
  }

 private:
  runtime::Informer<k8s::Node>& nodes_;
  runtime::Informer<NodeHealthObject>& reports_;
  runtime::Informer<PolicyObject>& policies_;
};

// The policy when it decoded and passed ValidatePolicySpec; else nullptr and `why`.
const api::GpuHealthPolicy* UsablePolicy(const PolicyObject& obj, std::string* why = nullptr);

class PolicyStatusWriter {
 public:
  virtual ~PolicyStatusWriter() = default;
  virtual Status WriteStatus(const std::string& policy, const api::GpuHealthPolicyStatus& s) = 0;
};

// PATCH gpuhealthpolicies/<name>/status (merge patch), only while leading.
class RestPolicyStatusWriter final : public PolicyStatusWriter {
 public:
  RestPolicyStatusWriter(k8s::RestClient& client, std::function<bool()> is_leader)
      : client_(client), is_leader_(std::move(is_leader)) {}
  Status WriteStatus(const std::string& policy, const api::GpuHealthPolicyStatus& s) override;

 private:
  k8s::RestClient& client_;
  std::function<bool()> is_leader_;
};

}  // namespace gg::op
