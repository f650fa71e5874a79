// ResourceClaim status writes per release over HTTP (sim/claim_status.h), as the operator
// makes them under deploy/rbac: status.devices is dropped on 1.32 (its gate off), kept from
// 1.33 for allocated devices only, and from 1.36 a change to a driver's entries also needs
// arbitrary-node:update on resourceclaims/driver named by that driver.
#include "sim/claim_status.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "sim/server.h"

namespace gg::sim {
namespace {

using nlohmann::json;

constexpr char kOperator[] = "system:serviceaccount:gpu-guardian:gpu-guardian-operator";
const std::string kRbac = std::string(GG_SOURCE_DIR) + "/deploy/rbac/";

class ClaimStatusSimTest : public ::testing::TestWithParam<std::string> {
 protected:
  void TearDown() override {
    if (sim_) sim_->Stop();
  }
  // `claim_rbac`: also the optional claim-status RBAC, its driver name replaced by `driver`.
  void Start(bool claim_rbac, const std::string& driver = "gpu.nvidia.com") {
    SimOptions o;
    o.kube_version = GetParam();
    o.authz = "rbac";
    o.rbac_files = {kRbac + "operator.yaml"};
    if (claim_rbac) {
      std::ifstream in(kRbac + "claim-status.yaml");
      std::stringstream text;
      text << in.rdbuf();
      std::string yaml = text.str();
      for (size_t at = yaml.find("[gpu.nvidia.com]"); at != std::string::npos;
           at = yaml.find("[gpu.nvidia.com]", at + 1)) {
        yaml.replace(at, 16, "[" + driver + "]");
      }
      rbac_copy_ = std::filesystem::temp_directory_path() /
                   ("claim-status-" + std::to_string(::getpid()) + ".yaml");
      std::ofstream(rbac_copy_) << yaml;
      o.rbac_files.push_back(rbac_copy_.string());
    }
    o.token_users = {{"op", kOperator}};
    o.kubelet = o.scheduler = o.controllers = false;
    auto s = SimServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    sim_ = std::move(*s);
    if (!rbac_copy_.empty()) std::filesystem::remove(rbac_copy_);
    ASSERT_TRUE(
        sim_->Create("/api/v1/namespaces",
                     {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "ml"}}}})
            .ok());
    json request = {{"name", "gpu"}, {"exactly", {{"deviceClassName", "gpu.nvidia.com"}}}};
    if (Version() == "v1beta1") request = {{"name", "gpu"}, {"deviceClassName", "gpu.nvidia.com"}};
    json claim = {{"apiVersion", "resource.k8s.io/" + Version()},
                  {"kind", "ResourceClaim"},
                  {"metadata", {{"name", "c"}, {"namespace", "ml"}}}};
    claim["spec"]["devices"]["requests"] = json::array({request});
    claim["status"]["allocation"]["devices"]["results"] = json::array(
        {{{"request", "gpu"}, {"driver", "gpu.nvidia.com"}, {"pool", "n1"}, {"device", "gpu-3"}}});
    ASSERT_TRUE(sim_->Insert(claim).ok());
  }
  std::string Version() const {
    return GetParam() >= "1.34" ? "v1" : GetParam() == "1.32" ? "v1beta1" : "v1beta2";
  }
  std::string Path() const {
    return "/apis/resource.k8s.io/" + Version() + "/namespaces/ml/resourceclaims/c";
  }
  // PUT .../status as the operator, with `entry` as the only status.devices entry.
  std::pair<int, json> PutDevices(const json& entry) {
    auto cur = sim_->Get(Path());
    if (!cur.ok()) return {0, json()};
    json c = *cur;
    c["status"]["devices"] = json::array({entry});
    httplib::Client cli(sim_->Url());
    httplib::Headers h = {{"Authorization", "Bearer op"}};
    auto r = cli.Put(Path() + "/status", h, c.dump(), "application/json");
    if (!r) return {0, json()};
    return {r->status, json::parse(r->body, nullptr, false)};
  }
  static json Entry(const std::string& device) {
    return {{"driver", "gpu.nvidia.com"},
            {"pool", "n1"},
            {"device", device},
            {"conditions",
             {{{"type", "GPUHealthy"},
               {"status", "False"},
               {"reason", "DeviceFenced"},
               {"message", "x"},
               {"lastTransitionTime", "2026-01-01T00:00:00Z"}}}}};
  }
  json StoredDevices() {
    auto c = sim_->Get(Path());
    return c.ok() ? c->value("status", json::object()).value("devices", json()) : json();
  }

  std::unique_ptr<SimServer> sim_;
  std::filesystem::path rbac_copy_;
};

// Without the optional RBAC the operator may not write claim status at all.
TEST_P(ClaimStatusSimTest, WithoutTheOptionalRbacTheWriteIsForbidden) {
  Start(false);
  auto [code, body] = PutDevices(Entry("gpu-3"));
  EXPECT_EQ(code, 403) << body.dump();
  EXPECT_TRUE(StoredDevices().is_null());
}

// With it: kept from 1.33, silently dropped on 1.32 (the gate is off there).
TEST_P(ClaimStatusSimTest, DeviceStatusIsKeptWhereTheReleaseServesIt) {
  Start(true);
  auto [code, body] = PutDevices(Entry("gpu-3"));
  ASSERT_EQ(code, 200) << body.dump();
  if (GetParam() == "1.32") {
    EXPECT_TRUE(StoredDevices().is_null()) << StoredDevices().dump();
    return;
  }
  json devs = StoredDevices();
  ASSERT_TRUE(devs.is_array()) << body.dump();
  EXPECT_EQ(devs[0]["conditions"][0]["reason"], "DeviceFenced");
  // An entry for a device the claim was not allocated is invalid.
  auto [bad, why] = PutDevices(Entry("gpu-4"));
  EXPECT_EQ(bad, 422) << why.dump();
}

// 1.36: the synthetic resourceclaims/driver permission is per driver name.
TEST_P(ClaimStatusSimTest, GranularAuthorizationIsPerDriver) {
  Start(true, "other.example.com");
  auto [code, body] = PutDevices(Entry("gpu-3"));
  if (GetParam() < "1.36") {
    EXPECT_EQ(code, 200) << body.dump();
    return;
  }
  EXPECT_EQ(code, 403) << body.dump();
  EXPECT_NE(body.value("message", "").find("resourceclaims/driver"), std::string::npos)
      << body.dump();
  EXPECT_NE(body.value("message", "").find("arbitrary-node:update"), std::string::npos)
      << body.dump();
}

INSTANTIATE_TEST_SUITE_P(KubeVersions, ClaimStatusSimTest,
                         ::testing::Values("1.32", "1.33", "1.35", "1.36"), [](const auto& info) {
                           std::string s = "k8s_" + info.param;
                           for (auto& c : s) c = c == '.' ? '_' : c;
                           return s;
                         });

}  // namespace
}  // namespace gg::sim
