// Throwaway CA + server certificate (OpenSSL 3 EVP, EC P-256) and the kubeconfig writer.
#include "sim/tls.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "sim/api_util.h"

namespace gg::sim {

namespace {

struct Free {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(BIO* p) const { BIO_free(p); }
  void operator()(X509_EXTENSION* p) const { X509_EXTENSION_free(p); }
};
template <typename T>
using Ptr = std::unique_ptr<T, Free>;

Status SslError(const std::string& what) { return InternalError("tls: " + what + " failed"); }

Ptr<EVP_PKEY> NewKey() { return Ptr<EVP_PKEY>(EVP_EC_gen("P-256")); }

std::string BioString(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  return n > 0 && data ? std::string(data, static_cast<size_t>(n)) : std::string();
}

StatusOr<std::string> KeyPem(EVP_PKEY* key) {
  Ptr<BIO> bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1)
    return SslError("writing private key");
  return BioString(bio.get());
}

StatusOr<std::string> CertPem(X509* cert) {
  Ptr<BIO> bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1) return SslError("writing certificate");
  return BioString(bio.get());
}

Status AddExt(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  Ptr<X509_EXTENSION> ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value));
  if (!ext || X509_add_ext(cert, ext.get(), -1) != 1)
    return SslError(std::string("extension ") + value);
  return OkStatus();
}

StatusOr<Ptr<X509>> MakeCert(EVP_PKEY* key, const char* cn, X509* issuer, int valid_days) {
  Ptr<X509> cert(X509_new());
  if (!cert) return SslError("X509_new");
  X509_set_version(cert.get(), 2);
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof serial) != 1) return SslError("RAND_bytes");
  serial[0] &= 0x7f;
  BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
  if (!bn) return SslError("serial");
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get()));
  BN_free(bn);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -24L * 3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(valid_days) * 24 * 3600);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("gpu-guardian-sim"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn),
                             -1, -1, 0);
  X509_set_issuer_name(cert.get(), issuer ? X509_get_subject_name(issuer) : name);
  return cert;
}

}  // namespace

StatusOr<TlsMaterial> GenerateTlsMaterial(int valid_days,
                                          const std::vector<std::string>& extra_dns_names) {
  if (valid_days <= 0 || valid_days > 3650)
    return InvalidArgumentError("tls: valid_days must be in 1..3650");
  for (const auto& n : extra_dns_names)
    if (n.empty() || n.find_first_of(",:\n\r ") != std::string::npos)
      return InvalidArgumentError("tls: invalid DNS name \"" + n + "\"");
  auto ca_key = NewKey();
  auto srv_key = NewKey();
  if (!ca_key || !srv_key) return SslError("EC key generation");
  GG_ASSIGN_OR_RETURN(auto ca, MakeCert(ca_key.get(), "gpu-guardian-sim CA", nullptr, valid_days));
  GG_RETURN_IF_ERROR(AddExt(ca.get(), ca.get(), NID_basic_constraints, "critical,CA:TRUE"));
  GG_RETURN_IF_ERROR(
      AddExt(ca.get(), ca.get(), NID_key_usage, "critical,keyCertSign,cRLSign,digitalSignature"));
  GG_RETURN_IF_ERROR(AddExt(ca.get(), ca.get(), NID_subject_key_identifier, "hash"));
  if (X509_sign(ca.get(), ca_key.get(), EVP_sha256()) <= 0) return SslError("signing CA");

  GG_ASSIGN_OR_RETURN(auto srv, MakeCert(srv_key.get(), "gpu-guardian-sim", ca.get(), valid_days));
  // Also the names and address pods use for the API server (10.96.0.1, kubernetes.default.svc:
  // the pod runner's in-cluster endpoint).
  std::string san =
      "DNS:localhost,IP:127.0.0.1,IP:::1,IP:10.96.0.1,DNS:kubernetes,DNS:kubernetes.default,"
      "DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local";
  for (const auto& n : extra_dns_names) san += ",DNS:" + n;
  GG_RETURN_IF_ERROR(AddExt(srv.get(), ca.get(), NID_basic_constraints, "critical,CA:FALSE"));
  GG_RETURN_IF_ERROR(
      AddExt(srv.get(), ca.get(), NID_key_usage, "critical,digitalSignature,keyEncipherment"));
  GG_RETURN_IF_ERROR(AddExt(srv.get(), ca.get(), NID_ext_key_usage, "serverAuth"));
  GG_RETURN_IF_ERROR(AddExt(srv.get(), ca.get(), NID_subject_alt_name, san.c_str()));
  GG_RETURN_IF_ERROR(AddExt(srv.get(), ca.get(), NID_authority_key_identifier, "keyid:always"));
  if (X509_sign(srv.get(), ca_key.get(), EVP_sha256()) <= 0)
    return SslError("signing server certificate");

  TlsMaterial m;
  GG_ASSIGN_OR_RETURN(m.ca_cert_pem, CertPem(ca.get()));
  GG_ASSIGN_OR_RETURN(m.ca_key_pem, KeyPem(ca_key.get()));
  GG_ASSIGN_OR_RETURN(m.server_cert_pem, CertPem(srv.get()));
  GG_ASSIGN_OR_RETURN(m.server_key_pem, KeyPem(srv_key.get()));
  return m;
}

namespace {

Status WriteFile(const std::string& path, std::string_view data, bool secret) {
  std::error_code ec;
  std::filesystem::remove(path, ec);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return UnavailableError("cannot write " + path);
  if (secret) ::chmod(path.c_str(), 0600);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  out.close();
  if (!out) return UnavailableError("cannot write " + path);
  return OkStatus();
}

}  // namespace

Status WriteTlsFiles(TlsMaterial& m, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return UnavailableError("cannot create " + dir + ": " + ec.message());
  std::string ca = dir + "/ca.crt", crt = dir + "/tls.crt", key = dir + "/tls.key";
  GG_RETURN_IF_ERROR(WriteFile(ca, m.ca_cert_pem, false));
  GG_RETURN_IF_ERROR(WriteFile(crt, m.server_cert_pem, false));
  GG_RETURN_IF_ERROR(WriteFile(key, m.server_key_pem, true));
  m.ca_cert_path = ca;
  m.server_cert_path = crt;
  m.server_key_path = key;
  return OkStatus();
}

std::string Base64Encode(std::string_view data) {
  static constexpr char kTable[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((data.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < data.size(); i += 3) {
    uint32_t v = (static_cast<uint8_t>(data[i]) << 16) | (static_cast<uint8_t>(data[i + 1]) << 8) |
                 static_cast<uint8_t>(data[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out += kTable[(v >> s) & 63];
  }
  if (i < data.size()) {
    uint32_t v = static_cast<uint8_t>(data[i]) << 16;
    if (i + 1 < data.size()) v |= static_cast<uint8_t>(data[i + 1]) << 8;
    out += kTable[(v >> 18) & 63];
    out += kTable[(v >> 12) & 63];
    out += i + 1 < data.size() ? kTable[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

Status WriteKubeconfig(const std::string& path, std::string_view server_url,
                       std::string_view ca_pem, std::string_view token,
                       std::string_view user_name) {
  if (server_url.empty()) return InvalidArgumentError("kubeconfig: server URL is empty");
  if (user_name.empty()) user_name = "gpu-guardian-sim";
  std::string cluster = "    server: " + DoubleQuote(server_url) + "\n";
  if (!ca_pem.empty()) cluster += "    certificate-authority-data: " + Base64Encode(ca_pem) + "\n";
  std::string user =
      token.empty() ? "  user: {}\n" : "  user:\n    token: " + DoubleQuote(token) + "\n";
  std::string yaml =
      "apiVersion: v1\n"
      "kind: Config\n"
      "preferences: {}\n"
      "clusters:\n"
      "- name: gpu-guardian-sim\n"
      "  cluster:\n" +
      cluster +
      "users:\n"
      "- name: " +
      DoubleQuote(user_name) + "\n" + user +
      "contexts:\n"
      "- name: gpu-guardian-sim\n"
      "  context:\n"
      "    cluster: gpu-guardian-sim\n"
      "    user: " +
      DoubleQuote(user_name) +
      "\n"
      "current-context: gpu-guardian-sim\n";
  auto parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  return WriteFile(path, yaml, true);
}

}  // namespace gg::sim
