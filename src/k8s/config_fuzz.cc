// libFuzzer target for kubeconfig parsing (yaml-cpp): any text gives a ClientConfig or a
// Status naming the problem, never a crash. File access is faked, so referenced files
// (certificate-authority, tokenFile, ...) are "missing" or a fixed PEM and nothing on the
// machine is read.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "k8s/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  gg::k8s::ConfigEnv env;
  env.getenv = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
  env.read_file = [](const std::string& path) -> gg::StatusOr<std::string> {
    if (path.find("missing") != std::string::npos)
      return gg::NotFoundError("no such file: " + path);
    return std::string("-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n");
  };
  env.file_exists = [](const std::string& path) {
    return path.find("missing") == std::string::npos;
  };
  (void)gg::k8s::ParseKubeconfig(in, "/kube", "", env).ok();
  // A named context exercises the lookup path too.
  (void)gg::k8s::ParseKubeconfig(in, "/kube", "ctx", env).ok();
  return 0;
}
