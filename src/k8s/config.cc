// Config loaders (in-cluster, kubeconfig, flags) and the rotating bearer-token source.
#include "k8s/config.h"

#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/strings.h"

namespace gg::k8s {
namespace {

StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// base64 (standard alphabet, padding and whitespace tolerated) for *-data fields.
StatusOr<std::string> Base64Decode(std::string_view in, std::string_view field) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
  };
  std::string out;
  unsigned buf = 0;
  int bits = 0;
  for (char c : in) {
    if (c == '=' || std::isspace(static_cast<unsigned char>(c))) continue;
    int v = val(c);
    if (v < 0) return InvalidArgumentError(std::string(field) + ": invalid base64");
    buf = (buf << 6) | static_cast<unsigned>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((buf >> bits) & 0xFF));
    }
  }
  return out;
}

std::string JoinPath(const std::string& base, const std::string& p) {
  if (p.empty() || p[0] == '/' || base.empty()) return p;
  return base.back() == '/' ? base + p : base + "/" + p;
}

std::string DirName(const std::string& path) {
  auto pos = path.rfind('/');
  if (pos == std::string::npos) return ".";
  if (pos == 0) return "/";
  return path.substr(0, pos);
}

// The `sub` map of the entry named `name` in a kubeconfig list; nullopt when absent.
std::optional<YAML::Node> FindNamed(const YAML::Node& list, const std::string& name,
                                    const char* sub) {
  if (!list || !list.IsSequence()) return std::nullopt;
  for (const auto& item : list) {
    if (!item.IsMap()) continue;
    const YAML::Node n = item["name"];
    if (n && n.IsScalar() && n.as<std::string>() == name) {
      const YAML::Node s = item[sub];
      if (!s || !s.IsMap()) return std::nullopt;
      return s;
    }
  }
  return std::nullopt;
}

std::string Str(const YAML::Node& n, const char* key) {
  if (!n || !n.IsMap() || !n[key] || !n[key].IsScalar()) return "";
  return n[key].as<std::string>();
}

}  // namespace

ConfigEnv ConfigEnv::Real() {
  ConfigEnv env;
  env.getenv = [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
  env.read_file = [](const std::string& path) { return ReadWholeFile(path); };
  env.file_exists = [](const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0;
  };
  return env;
}

StatusOr<ClientConfig> LoadInCluster(const ConfigEnv& env, const std::string& sa_dir) {
  auto host = env.getenv("KUBERNETES_SERVICE_HOST");
  auto port = env.getenv("KUBERNETES_SERVICE_PORT");
  if (!host || host->empty() || !port || port->empty()) {
    return FailedPreconditionError(
        "not running in a cluster: KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT are unset");
  }
  ClientConfig c;
  std::string h = *host;
  if (h.find(':') != std::string::npos && h.front() != '[') h = "[" + h + "]";  // IPv6
  c.server = "https://" + h + ":" + *port;
  c.token_file = sa_dir + "/token";
  auto token = env.read_file(c.token_file);
  if (!token.ok()) {
    return FailedPreconditionError("in-cluster: cannot read service-account token " + c.token_file +
                                   ": " + token.status().message());
  }
  c.ca_file = sa_dir + "/ca.crt";
  auto ca = env.read_file(c.ca_file);
  if (!ca.ok()) {
    return FailedPreconditionError("in-cluster: cannot read CA bundle " + c.ca_file + ": " +
                                   ca.status().message());
  }
  c.ca_pem = *ca;
  auto ns = env.read_file(sa_dir + "/namespace");
  if (ns.ok()) c.default_namespace = std::string(TrimSpace(*ns));
  return c;
}

namespace {

// The kubeconfig user's credentials into `c`: a token, a token file or a client certificate
// and key; exec plugins, auth providers and basic auth are refused with the reason.
Status ApplyUser(const YAML::Node& user, const std::string& user_name, const std::string& base_dir,
                 ClientConfig& c) {
  if (user["exec"]) {
    std::string cmd = Str(user["exec"], "command");
    return UnimplementedError("kubeconfig: user \"" + user_name +
                              "\" uses an exec credential plugin (" + cmd +
                              "), which gpu-guardian does not support; use a token, "
                              "tokenFile or client certificate");
  }
  if (user["auth-provider"]) {
    std::string name = Str(user["auth-provider"], "name");
    return UnimplementedError("kubeconfig: user \"" + user_name + "\" uses auth-provider \"" +
                              name + "\", which gpu-guardian does not support");
  }
  if (user["username"] || user["password"]) {
    return UnimplementedError("kubeconfig: user \"" + user_name +
                              "\" uses basic auth (username/password), which is not supported");
  }
  c.token = Str(user, "token");
  if (auto tf = Str(user, "tokenFile"); !tf.empty()) c.token_file = JoinPath(base_dir, tf);
  if (auto d = Str(user, "client-certificate-data"); !d.empty()) {
    GG_ASSIGN_OR_RETURN(c.client_cert_pem, Base64Decode(d, "client-certificate-data"));
  } else if (auto f = Str(user, "client-certificate"); !f.empty()) {
    c.client_cert_file = JoinPath(base_dir, f);
  }
  if (auto d = Str(user, "client-key-data"); !d.empty()) {
    GG_ASSIGN_OR_RETURN(c.client_key_pem, Base64Decode(d, "client-key-data"));
  } else if (auto f = Str(user, "client-key"); !f.empty()) {
    c.client_key_file = JoinPath(base_dir, f);
  }
  bool has_cert = !c.client_cert_pem.empty() || !c.client_cert_file.empty();
  bool has_key = !c.client_key_pem.empty() || !c.client_key_file.empty();
  if (has_cert != has_key) {
    return InvalidArgumentError("kubeconfig: user \"" + user_name +
                                "\" needs both a client certificate and a client key");
  }
  return OkStatus();
}

}  // namespace

StatusOr<ClientConfig> ParseKubeconfig(std::string_view yaml, const std::string& base_dir,
                                       const std::string& context, const ConfigEnv& env) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError(std::string("kubeconfig: invalid YAML: ") + e.what());
  }
  try {
    if (!root || !root.IsMap()) return InvalidArgumentError("kubeconfig: not a YAML mapping");
    std::string ctx_name = context.empty() ? Str(root, "current-context") : context;
    if (ctx_name.empty()) return InvalidArgumentError("kubeconfig: no current-context set");
    auto ctx_node = FindNamed(root["contexts"], ctx_name, "context");
    if (!ctx_node) return NotFoundError("kubeconfig: context \"" + ctx_name + "\" not found");
    const YAML::Node ctx = *ctx_node;
    std::string cluster_name = Str(ctx, "cluster");
    std::string user_name = Str(ctx, "user");
    auto cluster_node = FindNamed(root["clusters"], cluster_name, "cluster");
    if (!cluster_node) {
      return NotFoundError("kubeconfig: cluster \"" + cluster_name + "\" not found");
    }
    const YAML::Node cluster = *cluster_node;
    ClientConfig c;
    c.default_namespace = Str(ctx, "namespace");
    c.server = Str(cluster, "server");
    if (c.server.empty()) {
      return InvalidArgumentError("kubeconfig: cluster \"" + cluster_name + "\" has no server");
    }
    while (!c.server.empty() && c.server.back() == '/') c.server.pop_back();
    if (cluster["insecure-skip-tls-verify"]) {
      c.insecure_skip_tls_verify = cluster["insecure-skip-tls-verify"].as<bool>();
    }
    if (auto data = Str(cluster, "certificate-authority-data"); !data.empty()) {
      GG_ASSIGN_OR_RETURN(c.ca_pem, Base64Decode(data, "certificate-authority-data"));
    } else if (auto file = Str(cluster, "certificate-authority"); !file.empty()) {
      c.ca_file = JoinPath(base_dir, file);
      auto pem = env.read_file(c.ca_file);
      if (!pem.ok()) {
        return FailedPreconditionError("kubeconfig: certificate-authority " + c.ca_file + ": " +
                                       pem.status().message());
      }
      c.ca_pem = *pem;
    }
    if (!user_name.empty()) {
      auto user_node = FindNamed(root["users"], user_name, "user");
      if (!user_node) return NotFoundError("kubeconfig: user \"" + user_name + "\" not found");
      GG_RETURN_IF_ERROR(ApplyUser(*user_node, user_name, base_dir, c));
    }
    return c;
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError(std::string("kubeconfig: ") + e.what());
  }
}

StatusOr<ClientConfig> LoadKubeconfig(const std::string& path, const std::string& context,
                                      const ConfigEnv& env) {
  auto text = env.read_file(path);
  if (!text.ok()) return NotFoundError("kubeconfig " + path + ": " + text.status().message());
  auto c = ParseKubeconfig(*text, DirName(path), context, env);
  if (!c.ok()) return c.status().WithContext(path);
  return c;
}

StatusOr<ClientConfig> ResolveConfig(const std::string& kubeconfig_flag,
                                     const std::string& server_flag, const ConfigEnv& env) {
  if (!server_flag.empty()) {
    ClientConfig c;
    c.server = server_flag;
    if (c.server.find("://") == std::string::npos) c.server = "http://" + c.server;
    while (!c.server.empty() && c.server.back() == '/') c.server.pop_back();
    return c;
  }
  if (!kubeconfig_flag.empty()) return LoadKubeconfig(kubeconfig_flag, "", env);
  if (auto kc = env.getenv("KUBECONFIG"); kc && !kc->empty()) {
    std::stringstream ss(*kc);
    std::string item;
    while (std::getline(ss, item, ':')) {
      if (!item.empty() && env.file_exists(item)) return LoadKubeconfig(item, "", env);
    }
  }
  if (auto home = env.getenv("HOME"); home && !home->empty()) {
    std::string p = *home + "/.kube/config";
    if (env.file_exists(p)) return LoadKubeconfig(p, "", env);
  }
  auto in_cluster = LoadInCluster(env);
  if (in_cluster.ok()) return in_cluster;
  return FailedPreconditionError(
      "no Kubernetes configuration: pass --server or --kubeconfig, set $KUBECONFIG, create "
      "~/.kube/config, or run in a cluster (" +
      in_cluster.status().message() + ")");
}

BearerTokenSource::BearerTokenSource(std::string static_token, std::string token_file,
                                     std::chrono::seconds max_age)
    : token_(std::move(static_token)), file_(std::move(token_file)), max_age_(max_age) {}

std::string BearerTokenSource::Token() {
  std::scoped_lock lock(mu_);
  if (file_.empty()) return token_;
  struct stat st {};
  bool have_stat = ::stat(file_.c_str(), &st) == 0;
  auto now = std::chrono::steady_clock::now();
  // The kubelet's atomic writer swaps in a new file: a new inode is a change even when the
  // coarse file-system clock gives it the same mtime.
  bool changed = have_stat && (st.st_mtim.tv_sec != mtime_.tv_sec ||
                               st.st_mtim.tv_nsec != mtime_.tv_nsec || st.st_ino != ino_);
  if (!loaded_ || changed || now - read_at_ >= max_age_) {
    auto text = ReadWholeFile(file_);
    if (text.ok()) {
      std::string t(TrimSpace(*text));
      if (!t.empty()) token_ = std::move(t);
      loaded_ = true;
      if (have_stat) {
        mtime_ = st.st_mtim;
        ino_ = st.st_ino;
      }
    }
    read_at_ = now;
  }
  return token_;
}

void BearerTokenSource::Invalidate() {
  std::scoped_lock lock(mu_);
  loaded_ = false;
}

}  // namespace gg::k8s
