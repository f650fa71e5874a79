// remediation.escalate with the real binaries (simulator, operator, an agent playing a fault
// script): the test registers a remediator's CRDs (FakeRemediationTemplate, FakeRemediation)
// and a template; a node whose GPU is lost is fenced and drained, then a FakeRemediation named
// after the node appears with the template's spec.template.spec, and it is deleted once the
// GPU is back for healthyFor.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <thread>

#include "api/gpu_node_health.h"
#include "common/clock.h"
#include "e2e/process.h"
#include "k8s/codec.h"
#include "k8s/config.h"
#include "k8s/resource.h"
#include "k8s/rest_client.h"

namespace gg::e2e {
namespace {

using namespace std::chrono_literals;

constexpr char kPolicy[] = R"(apiVersion: gpuguardian.io/v1alpha1
kind: GPUHealthPolicy
metadata: {name: escalate}
spec:
  nodeSelector: {matchLabels: {nvidia.com/gpu.present: "true"}}
  rules:
    - {name: gpu-lost, gpuLost: true, action: Drain}
  remediation:
    drain: {timeout: 10s, gracePeriodSeconds: 1}
    escalate:
      template: {apiVersion: test.gpuguardian.io/v1alpha1, kind: FakeRemediationTemplate,
                 namespace: remediators, name: reboot}
  recovery: {healthyFor: 3s}
  safety: {maxUnhealthy: "50%"}
)";
constexpr char kTemplate[] = R"({"apiVersion":"test.gpuguardian.io/v1alpha1",
  "kind":"FakeRemediationTemplate","metadata":{"name":"reboot","namespace":"remediators"},
  "spec":{"template":{"spec":{"strategy":"Reboot","timeoutSeconds":300}}}})";
// GPU 2 lost from 1 s to 40 s (time enough for a loaded machine to fence and drain).
constexpr char kScript[] =
    "{gpus: 8, timeline: [{at: 1s, gpu: 2, lost: true}, {at: 40s, gpu: 2, clear: true}]}";

k8s::ResourceType Kind(std::string kind, std::string plural) {
  return k8s::ResourceType{"test.gpuguardian.io", "v1alpha1", std::move(plural), std::move(kind),
                           true};
}

bool Eventually(const std::function<bool()>& done, std::chrono::seconds limit) {
  for (const auto end = std::chrono::steady_clock::now() + limit;
       std::chrono::steady_clock::now() < end; std::this_thread::sleep_for(200ms)) {
    if (done()) return true;
  }
  return done();
}

TEST(Escalate, RemediationObjectAfterTheDrainGoneOnRecovery) {
  const std::string bin = GG_BIN_DIR, src = GG_SOURCE_DIR;
  TempDir dir;
  auto at = [&](const char* f) { return dir.path() + "/" + f; };
  std::ofstream(at("policy.yaml")) << kPolicy;
  std::ofstream(at("script.yaml")) << kScript;
  Process sim(
      {bin + "/gpu-guardian-sim", "--listen", "127.0.0.1:0", "--scenario",
       src + "/deploy/demo/cluster.yaml", "--apply", src + "/deploy/namespace.yaml", "--apply",
       src + "/deploy/crds", "--apply", src + "/test/e2e/testdata/fake-remediation-crds.yaml",
       "--apply", at("policy.yaml"), "--write-kubeconfig", at("kubeconfig")},
      at("sim.log"));
  ASSERT_NE(sim.WaitForLog("listening on", 30s), "") << sim.Log();
  auto cfg = k8s::LoadKubeconfig(at("kubeconfig"));
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  auto api = k8s::RestClient::Create(*cfg, RealClock::Default());
  ASSERT_TRUE(api.ok()) << api.status();
  auto created = (*api)->Create(Kind("FakeRemediationTemplate", "fakeremediationtemplates"),
                                "remediators", kTemplate);
  ASSERT_TRUE(created.ok()) << created.status() << sim.Log();
  Process op({bin + "/gpu-guardian-operator", "--kubeconfig", at("kubeconfig"), "--metrics-addr",
              "127.0.0.1:0"},
             at("operator.log"));
  Process agent({bin + "/gpu-guardian-agent", "--node-name", "dgx-4", "--kubeconfig",
                 at("kubeconfig"), "--source", "script", "--script", at("script.yaml"),
                 "--heartbeat", "30s", "--sweep-interval", "500ms", "--metrics-addr", "0"},
                at("agent.log"));
  const auto remediations = Kind("FakeRemediation", "fakeremediations");
  auto object = [&]() -> std::optional<nlohmann::json> {
    auto body = (*api)->Get(remediations, "remediators", "dgx-4");
    if (!body.ok()) return std::nullopt;
    return nlohmann::json::parse(*body, nullptr, false);
  };
  // The record says the drain ended and the object exists (two writes: wait for both).
  auto drained_and_handed_over = [&] {
    auto body = (*api)->Get(k8s::kNodes, "", "dgx-4");
    if (!body.ok() || !object()) return false;
    auto n = k8s::ParseObject<k8s::Node>(*body);
    auto rec = n.ok() ? n->meta.annotations.Get(api::kRemediationAnnotation) : std::nullopt;
    return rec && rec->find("\"escalation\"") != std::string::npos && n->unschedulable;
  };
  ASSERT_TRUE(Eventually(drained_and_handed_over, 38s)) << op.Log() << agent.Log();
  auto obj = object();
  ASSERT_TRUE(obj && obj->is_object());
  EXPECT_EQ((*obj)["spec"], nlohmann::json::parse(R"({"strategy":"Reboot","timeoutSeconds":300})"));
  EXPECT_EQ((*obj)["metadata"]["labels"]["gpuguardian.io/node"], "dgx-4");
  EXPECT_EQ((*obj)["metadata"]["labels"]["app.kubernetes.io/managed-by"], "gpu-guardian");
  // The GPU is back at 40 s: healthy for 3 s, then the object goes with our fences.
  EXPECT_TRUE(Eventually([&] { return !object(); }, 45s)) << op.Log();
  EXPECT_NE(op.Log().find("remediation object deleted"), std::string::npos);
}

}  // namespace
}  // namespace gg::e2e
