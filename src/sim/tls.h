// TLS material for `gpu-guardian-sim --tls`: a throwaway self-signed CA and a server
// certificate for 127.0.0.1 / ::1 / localhost signed by it (OpenSSL 3 EVP, EC P-256), and
// a kubeconfig writer that kubectl, the Python client and our own client accept.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace gg::sim {

struct TlsMaterial {
  std::string ca_cert_pem;
  std::string ca_key_pem;
  std::string server_cert_pem;
  std::string server_key_pem;
  // Paths written by WriteTlsFiles (empty before).
  std::string ca_cert_path, server_cert_path, server_key_path;
};

// Generates a CA ("gpu-guardian-sim CA", valid 1 day back .. `valid_days` ahead) and a
// server cert with SANs DNS:localhost, IP:127.0.0.1, IP:::1 (+ `extra_dns_names`),
// extendedKeyUsage serverAuth.
StatusOr<TlsMaterial> GenerateTlsMaterial(int valid_days = 30,
                                          const std::vector<std::string>& extra_dns_names = {});

// Writes ca.crt, tls.crt, tls.key (0600) into `dir` (created if missing) and fills the
// *_path members.
Status WriteTlsFiles(TlsMaterial& m, const std::string& dir);

// Writes a kubeconfig (YAML) with one cluster/user/context named "gpu-guardian-sim":
// cluster.server = server_url, certificate-authority-data = base64(ca_pem) when non-empty;
// user.token when non-empty; file mode 0600. `user_name` names the user entry
// (default "gpu-guardian-sim").
Status WriteKubeconfig(const std::string& path, std::string_view server_url,
                       std::string_view ca_pem, std::string_view token,
                       std::string_view user_name = "gpu-guardian-sim");

std::string Base64Encode(std::string_view data);

}  // namespace gg::sim
