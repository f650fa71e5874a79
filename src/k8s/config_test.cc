// Config loading: kubeconfig variants, in-cluster, flags, token rotation.
#include "k8s/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "k8s/backoff.h"

namespace gg::k8s {
namespace {

struct FakeEnv {
  std::map<std::string, std::string> vars, files;
  ConfigEnv Env() {
    ConfigEnv e;
    e.getenv = [this](const std::string& n) -> std::optional<std::string> {
      auto it = vars.find(n);
      if (it == vars.end()) return std::nullopt;
      return it->second;
    };
    e.read_file = [this](const std::string& p) -> StatusOr<std::string> {
      auto it = files.find(p);
      if (it == files.end()) return NotFoundError("no file " + p);
      return it->second;
    };
    e.file_exists = [this](const std::string& p) { return files.count(p) > 0; };
    return e;
  }
};

constexpr char kKubeconfig[] = R"(
apiVersion: v1
kind: Config
current-context: prod
contexts:
- name: prod
  context: {cluster: c1, user: u1, namespace: gpu-system}
- name: dev
  context: {cluster: c2, user: u2}
- name: exec
  context: {cluster: c1, user: u3}
- name: provider
  context: {cluster: c1, user: u4}
clusters:
- name: c1
  cluster:
    server: https://10.0.0.1:6443/
    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==
- name: c2
  cluster:
    server: https://dev:443
    certificate-authority: certs/ca.crt
    insecure-skip-tls-verify: true
users:
- name: u1
  user:
    token: abc123
- name: u2
  user:
    tokenFile: tok
    client-certificate: certs/c.crt
    client-key: certs/c.key
- name: u3
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: gke-gcloud-auth-plugin
- name: u4
  user:
    auth-provider:
      name: oidc
)";

TEST(ConfigTest, KubeconfigCurrentContext) {
  FakeEnv fe;
  auto c = ParseKubeconfig(kKubeconfig, "/home/u/.kube", "", fe.Env());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server, "https://10.0.0.1:6443");
  EXPECT_EQ(c->ca_pem, "-----BEGIN CERTIFICATE-----\n");
  EXPECT_EQ(c->token, "abc123");
  EXPECT_FALSE(c->insecure_skip_tls_verify);
  EXPECT_EQ(c->default_namespace, "gpu-system");
}

TEST(ConfigTest, KubeconfigFilesRelativeToItsDirectory) {
  FakeEnv fe;
  fe.files["/home/u/.kube/certs/ca.crt"] = "CA PEM";
  auto c = ParseKubeconfig(kKubeconfig, "/home/u/.kube", "dev", fe.Env());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->ca_pem, "CA PEM");
  EXPECT_EQ(c->token_file, "/home/u/.kube/tok");
  EXPECT_EQ(c->client_cert_file, "/home/u/.kube/certs/c.crt");
  EXPECT_EQ(c->client_key_file, "/home/u/.kube/certs/c.key");
  EXPECT_TRUE(c->insecure_skip_tls_verify);
}

TEST(ConfigTest, UnsupportedAuthIsAClearError) {
  FakeEnv fe;
  auto e = ParseKubeconfig(kKubeconfig, "/", "exec", fe.Env());
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(e.status().message().find("exec"), std::string::npos);
  EXPECT_NE(e.status().message().find("gke-gcloud-auth-plugin"), std::string::npos);
  auto p = ParseKubeconfig(kKubeconfig, "/", "provider", fe.Env());
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(p.status().message().find("oidc"), std::string::npos);
}

TEST(ConfigTest, BrokenKubeconfigs) {
  FakeEnv fe;
  EXPECT_EQ(ParseKubeconfig("::: not yaml [", "/", "", fe.Env()).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseKubeconfig("a: b", "/", "", fe.Env()).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseKubeconfig(kKubeconfig, "/", "missing", fe.Env()).status().code(),
            StatusCode::kNotFound);
  EXPECT_FALSE(ParseKubeconfig("current-context: x\ncontexts: 5\n", "/", "", fe.Env()).ok());
  // Missing CA file is reported, not ignored.
  EXPECT_FALSE(ParseKubeconfig(kKubeconfig, "/nowhere", "dev", fe.Env()).ok());
}

TEST(ConfigTest, InCluster) {
  FakeEnv fe;
  EXPECT_EQ(LoadInCluster(fe.Env(), "/sa").status().code(), StatusCode::kFailedPrecondition);
  fe.vars["KUBERNETES_SERVICE_HOST"] = "10.96.0.1";
  fe.vars["KUBERNETES_SERVICE_PORT"] = "443";
  fe.files["/sa/token"] = "tok";
  fe.files["/sa/ca.crt"] = "CA";
  fe.files["/sa/namespace"] = "gpu-system\n";
  auto c = LoadInCluster(fe.Env(), "/sa");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->server, "https://10.96.0.1:443");
  EXPECT_EQ(c->token_file, "/sa/token");
  EXPECT_EQ(c->ca_pem, "CA");
  EXPECT_EQ(c->default_namespace, "gpu-system");
  fe.vars["KUBERNETES_SERVICE_HOST"] = "fd00::1";
  EXPECT_EQ(LoadInCluster(fe.Env(), "/sa")->server, "https://[fd00::1]:443");
}

TEST(ConfigTest, ResolveOrder) {
  FakeEnv fe;
  auto s = ResolveConfig("", "127.0.0.1:8001", fe.Env());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->server, "http://127.0.0.1:8001");
  EXPECT_TRUE(s->token.empty());
  EXPECT_EQ(ResolveConfig("", "", fe.Env()).status().code(), StatusCode::kFailedPrecondition);
  fe.vars["HOME"] = "/home/u";
  fe.files["/home/u/.kube/config"] = kKubeconfig;
  auto h = ResolveConfig("", "", fe.Env());
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->token, "abc123");
  fe.files["/k2"] = std::string(kKubeconfig)
                        .replace(std::string(kKubeconfig).find("current-context: prod"), 21,
                                 "current-context: dev");
  fe.files["/certs/ca.crt"] = "x";
  fe.vars["KUBECONFIG"] = "/missing:/k2";
  auto k = ResolveConfig("", "", fe.Env());
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->server, "https://dev:443");
}

TEST(TokenSourceTest, RereadsWhenTheFileRotates) {
  auto dir = std::filesystem::temp_directory_path() /
             ("gg-token-" + std::to_string(::getpid()) + "-" +
              std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
  std::filesystem::create_directories(dir);
  auto path = (dir / "token").string();
  { std::ofstream(path) << "first\n"; }
  BearerTokenSource src("", path);
  EXPECT_EQ(src.Token(), "first");
  // Kubelet rotates by writing a new file (atomic rename): the mtime changes.
  { std::ofstream(path + ".tmp") << "second"; }
  std::filesystem::last_write_time(
      path + ".tmp", std::filesystem::last_write_time(path) + std::chrono::seconds(1));
  std::filesystem::rename(path + ".tmp", path);
  EXPECT_EQ(src.Token(), "second");
  // An unreadable file keeps the last good token.
  std::filesystem::remove(path);
  src.Invalidate();
  EXPECT_EQ(src.Token(), "second");
  std::filesystem::remove_all(dir);
  BearerTokenSource fixed("static", "");
  EXPECT_EQ(fixed.Token(), "static");
}

TEST(BackoffTest, GrowsCapsAndJitters) {
  Backoff b(std::chrono::milliseconds(100), std::chrono::seconds(1), 2.0, 0.0, 1);
  EXPECT_EQ(b.Next(), std::chrono::milliseconds(100));
  EXPECT_EQ(b.Next(), std::chrono::milliseconds(200));
  EXPECT_EQ(b.Next(), std::chrono::milliseconds(400));
  EXPECT_EQ(b.Next(), std::chrono::milliseconds(800));
  EXPECT_EQ(b.Next(), std::chrono::seconds(1));
  b.Reset();
  EXPECT_EQ(b.Next(), std::chrono::milliseconds(100));
  Backoff j(std::chrono::milliseconds(100), std::chrono::seconds(10), 2.0, 0.2, 7);
  for (int i = 0; i < 50; ++i) {
    j.Reset();
    Duration d = j.Next();
    EXPECT_GE(d, std::chrono::milliseconds(80));
    EXPECT_LE(d, std::chrono::milliseconds(120));
  }
}

TEST(TokenBucketTest, BurstThenRate) {
  FakeClock clock;
  TokenBucket tb(10, 3, clock);
  EXPECT_TRUE(tb.TryAcquire());
  EXPECT_TRUE(tb.TryAcquire());
  EXPECT_TRUE(tb.TryAcquire());
  EXPECT_FALSE(tb.TryAcquire());
  clock.Advance(std::chrono::milliseconds(100));
  EXPECT_TRUE(tb.TryAcquire());
  EXPECT_FALSE(tb.TryAcquire());
  EXPECT_EQ(tb.Reserve(), Duration(std::chrono::milliseconds(100)));
  EXPECT_EQ(tb.Reserve(), Duration(std::chrono::milliseconds(200)));
}

}  // namespace
}  // namespace gg::k8s
