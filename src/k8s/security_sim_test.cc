// Client-side security against the in-process simulator: TLS is verified by default (a server
// certificate from another CA is refused, also when the CA comes from a kubeconfig), and a
// rotated service-account token file is picked up on the next request, before the old token
// stops working (as the kubelet rotates projected tokens: an atomic symlink swap).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "k8s/config.h"
#include "k8s/rest_client.h"
#include "sim/server.h"
#include "sim/tls.h"

namespace gg::k8s {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct ScratchDir {
  fs::path path = fs::temp_directory_path() /
                  ("gg-sec-" + std::to_string(::getpid()) + "-" +
                   std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
  ScratchDir() { fs::create_directories(path); }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string Write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name) << text;
    return (path / name).string();
  }
};

std::unique_ptr<sim::SimServer> StartSim(sim::SimOptions o) {
  o.kubelet = o.scheduler = o.controllers = false;
  auto s = sim::SimServer::Start(std::move(o));
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

json Node(const std::string& name) {
  return {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", name}}}};
}

RestClientOptions NoRetries() {
  RestClientOptions ro;
  ro.max_attempts = 1;
  return ro;
}

TEST(TlsVerification, AServerCertificateFromAnotherCaIsRefused) {
  sim::SimOptions o;
  o.tls = true;
  auto sim = StartSim(o);
  ASSERT_NE(sim, nullptr);
  ASSERT_TRUE(sim->Create("/api/v1/nodes", Node("n1")).ok());
  auto other = sim::GenerateTlsMaterial();
  ASSERT_TRUE(other.ok()) << other.status();
  ASSERT_NE(other->ca_cert_pem, sim->CaCertPem());

  // A CA given inline: the wrong one fails the handshake (FailedPrecondition, not a retryable
  // Unavailable), the right one works, so the failure is the CA and nothing else.
  ClientConfig cfg;
  cfg.server = sim->Url();
  cfg.ca_pem = other->ca_cert_pem;
  auto wrong = RestClient::Create(cfg, RealClock::Default(), NoRetries());
  ASSERT_TRUE(wrong.ok());
  auto r = (*wrong)->Get(kNodes, "", "n1");
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status();
  cfg.ca_pem = sim->CaCertPem();
  auto right = RestClient::Create(cfg, RealClock::Default(), NoRetries());
  ASSERT_TRUE(right.ok());
  EXPECT_TRUE((*right)->Get(kNodes, "", "n1").ok());

  // The same through a kubeconfig (certificate-authority-data) as the binaries load it.
  ScratchDir dir;
  std::string path = (dir.path / "kubeconfig").string();
  ASSERT_TRUE(sim::WriteKubeconfig(path, sim->Url(), other->ca_cert_pem, "admin").ok());
  auto from_file = LoadKubeconfig(path);
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  EXPECT_FALSE(from_file->insecure_skip_tls_verify) << "verification is on unless asked off";
  auto kc = RestClient::Create(*from_file, RealClock::Default(), NoRetries());
  ASSERT_TRUE(kc.ok());
  auto kr = (*kc)->Get(kNodes, "", "n1");
  EXPECT_EQ(kr.status().code(), StatusCode::kFailedPrecondition) << kr.status();

  // And a watch, which uses the streaming path of the transport.
  Status w = (*wrong)->Watch(kNodes, "", WatchOptions{}, [](std::string_view) { return true; }, {});
  EXPECT_EQ(w.code(), StatusCode::kFailedPrecondition) << w;
}

// The kubelet writes projected tokens with an atomic writer: a new timestamped directory,
// then the `..data` symlink is swapped; `token` points through `..data`.
class ProjectedToken {
 public:
  explicit ProjectedToken(fs::path dir) : dir_(std::move(dir)) {}
  void Write(const std::string& token) {
    fs::path ts = dir_ / ("..ts" + std::to_string(++gen_));
    fs::create_directories(ts);
    std::ofstream(ts / "token") << token;
    fs::path tmp = dir_ / "..data_tmp";
    fs::create_directory_symlink(ts.filename(), tmp);
    fs::rename(tmp, dir_ / "..data");
    if (!fs::exists(fs::symlink_status(dir_ / "token")))
      fs::create_symlink(fs::path("..data") / "token", dir_ / "token");
  }
  std::string path() const { return (dir_ / "token").string(); }

 private:
  fs::path dir_;
  int gen_ = 0;
};

TEST(TokenRotation, TheRotatedTokenIsUsedOnTheNextRequestWithoutA401) {
  ScratchDir dir;
  std::string rbac = dir.Write("rbac.yaml", R"(apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: node-reader}
rules: [{apiGroups: [""], resources: [nodes], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: node-reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: node-reader}
subjects:
- {kind: ServiceAccount, name: agent, namespace: gg}
)");
  sim::SimOptions o;
  o.authz = "rbac";
  o.rbac_files = {rbac};
  // Two generations of one service account's projected token.
  o.token_users = {{"token-gen-1", "system:serviceaccount:gg:agent"},
                   {"token-gen-2", "system:serviceaccount:gg:agent"}};
  auto sim = StartSim(o);
  ASSERT_NE(sim, nullptr);
  ASSERT_TRUE(sim->Create("/api/v1/nodes", Node("n1")).ok());
  ClientConfig admin_cfg;
  admin_cfg.server = sim->Url();
  admin_cfg.token = "admin";
  auto admin = RestClient::Create(admin_cfg, RealClock::Default(), NoRetries());
  ASSERT_TRUE(admin.ok());

  fs::path sa = dir.path / "serviceaccount";
  fs::create_directories(sa);
  ProjectedToken token(sa);
  token.Write("token-gen-1");
  ClientConfig cfg;
  cfg.server = sim->Url();
  cfg.token_file = token.path();
  auto client = RestClient::Create(cfg, RealClock::Default(), NoRetries());
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->Get(kNodes, "", "n1").ok());

  // Rotate to a token the server does not know: the very next request must carry it and be
  // refused, so the file is re-read when it changes, not only every minute.
  token.Write("token-gen-unknown");
  auto r = (*client)->Get(kNodes, "", "n1");
  EXPECT_EQ(r.status().code(), StatusCode::kUnauthenticated) << r.status();
  auto refused = (*client)->RequestCounts()["GET 401"];
  EXPECT_GE(refused, 1u);
  // Rotate to the next valid generation: the next request is accepted at once, with no 401
  // first (a client that re-read only after a 401 would show one more refusal here).
  token.Write("token-gen-2");
  auto ok = (*client)->Get(kNodes, "", "n1");
  EXPECT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*client)->RequestCounts()["GET 401"], refused);
  EXPECT_EQ((*client)->RequestCounts()["GET 200"], 2u);
}

}  // namespace
}  // namespace gg::k8s
