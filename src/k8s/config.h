// Client configuration: where the API server is and how to authenticate. Loaders for the
// in-cluster service account, kubeconfig files (yaml-cpp) and the `--server` flag used with
// `kubectl proxy`. BearerTokenSource re-reads a rotating service-account token file.
#pragma once

#include <chrono>
#include <ctime>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/status.h"

namespace gg::k8s {

struct ClientConfig {
  std::string server;  // "https://10.0.0.1:443", "http://127.0.0.1:8001"
  std::string ca_pem;  // PEM bundle (takes precedence over ca_file)
  std::string ca_file;
  std::string client_cert_pem, client_key_pem;    // PEM data
  std::string client_cert_file, client_key_file;  // or files
  std::string token;                              // static bearer token
  std::string token_file;  // re-read when it rotates (mtime change, or at least every minute)
  bool insecure_skip_tls_verify = false;     // only when the kubeconfig says so
  std::chrono::milliseconds timeout{30000};  // per request (watches use their own)
  double qps = 0;                            // client-side rate limit; 0 = off (APF does the rest)
  int burst = 0;
  std::string user_agent;         // default "gpu-guardian/<version>"
  std::string default_namespace;  // in-cluster namespace file or the context's namespace
};

// Injected environment/file access so loaders are testable without touching the real machine.
struct ConfigEnv {
  std::function<std::optional<std::string>(const std::string& name)> getenv;
  std::function<StatusOr<std::string>(const std::string& path)> read_file;
  std::function<bool(const std::string& path)> file_exists;
  static ConfigEnv Real();
};

inline constexpr char kServiceAccountDir[] = "/var/run/secrets/kubernetes.io/serviceaccount";

// In-cluster: KUBERNETES_SERVICE_HOST/PORT, <sa_dir>/token (as token_file), <sa_dir>/ca.crt,
// <sa_dir>/namespace. FailedPrecondition when not running in a cluster.
StatusOr<ClientConfig> LoadInCluster(const ConfigEnv& env = ConfigEnv::Real(),
                                     const std::string& sa_dir = kServiceAccountDir);

// Kubeconfig: current-context (or `context`), cluster server, certificate-authority(-data),
// client-certificate(-data), client-key(-data), token, tokenFile, insecure-skip-tls-verify.
// exec / auth-provider / username+password → Unimplemented naming the mechanism.
// Relative file paths are resolved against the kubeconfig's directory.
StatusOr<ClientConfig> LoadKubeconfig(const std::string& path, const std::string& context = "",
                                      const ConfigEnv& env = ConfigEnv::Real());
StatusOr<ClientConfig> ParseKubeconfig(std::string_view yaml, const std::string& base_dir,
                                       const std::string& context = "",
                                       const ConfigEnv& env = ConfigEnv::Real());

// Order: --server flag (plain http for `kubectl proxy`, no auth) → --kubeconfig flag →
// $KUBECONFIG (first existing file of a ':'-list) → ~/.kube/config → in-cluster.
StatusOr<ClientConfig> ResolveConfig(const std::string& kubeconfig_flag,
                                     const std::string& server_flag,
                                     const ConfigEnv& env = ConfigEnv::Real());

// Supplies the bearer token for each request. A file-backed source re-reads the file when its
// mtime changes and at least every `max_age`, and can be forced after a 401.
class BearerTokenSource {
 public:
  BearerTokenSource(std::string static_token, std::string token_file,
                    std::chrono::seconds max_age = std::chrono::seconds(60));
  // "" when there is no token. A file that cannot be read keeps the last good token.
  std::string Token();
  void Invalidate();  // next Token() re-reads the file
  bool file_backed() const { return !file_.empty(); }

 private:
  std::mutex mu_;
  std::string token_;
  std::string file_;
  std::chrono::seconds max_age_;
  std::timespec mtime_{};
  unsigned long ino_ = 0;  // st_ino of the file last read
  std::chrono::steady_clock::time_point read_at_{};
  bool loaded_ = false;
};

}  // namespace gg::k8s
