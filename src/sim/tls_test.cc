// Tests for TLS material and kubeconfig writing (sim/tls.h).
#include "sim/tls.h"

#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "sim/rbac.h"  // ParseYamlDocuments

namespace gg::sim {
namespace {

X509* ReadCert(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* c = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  return c;
}

bool Verifies(const std::string& ca_pem, const std::string& cert_pem, const char* ip) {
  X509* ca = ReadCert(ca_pem);
  X509* cert = ReadCert(cert_pem);
  X509_STORE* store = X509_STORE_new();
  X509_STORE_add_cert(store, ca);
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  X509_STORE_CTX_init(ctx, store, cert, nullptr);
  X509_VERIFY_PARAM* param = X509_STORE_CTX_get0_param(ctx);
  X509_VERIFY_PARAM_set1_ip_asc(param, ip);
  X509_VERIFY_PARAM_set_purpose(param, X509_PURPOSE_SSL_SERVER);
  bool ok = X509_verify_cert(ctx) == 1;
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
  X509_free(cert);
  X509_free(ca);
  return ok;
}

TEST(TlsTest, CertificateChainsToCaForLoopback) {
  auto m = GenerateTlsMaterial();
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_NE(m->ca_cert_pem.find("BEGIN CERTIFICATE"), std::string::npos);
  EXPECT_NE(m->server_key_pem.find("PRIVATE KEY"), std::string::npos);
  EXPECT_TRUE(Verifies(m->ca_cert_pem, m->server_cert_pem, "127.0.0.1"));
  EXPECT_TRUE(Verifies(m->ca_cert_pem, m->server_cert_pem, "::1"));
  EXPECT_FALSE(Verifies(m->ca_cert_pem, m->server_cert_pem, "10.0.0.1"));
  auto other = GenerateTlsMaterial();
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(Verifies(other->ca_cert_pem, m->server_cert_pem, "127.0.0.1"));  // wrong CA
  EXPECT_FALSE(GenerateTlsMaterial(0).ok());
  EXPECT_FALSE(GenerateTlsMaterial(30, {"bad name"}).ok());
}

TEST(TlsTest, FilesAndKubeconfig) {
  auto dir = std::filesystem::temp_directory_path() / ("gg-tls-test-" + std::to_string(::getpid()));
  auto m = GenerateTlsMaterial();
  ASSERT_TRUE(m.ok());
  ASSERT_TRUE(WriteTlsFiles(*m, dir.string()).ok());
  EXPECT_TRUE(std::filesystem::exists(m->ca_cert_path));
  struct stat st {};
  ASSERT_EQ(::stat(m->server_key_path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::string kc = (dir / "kube" / "config").string();
  ASSERT_TRUE(
      WriteKubeconfig(kc, "https://127.0.0.1:6443", m->ca_cert_pem, "tok-en", "operator").ok());
  std::ifstream in(kc);
  std::stringstream ss;
  ss << in.rdbuf();
  auto docs = ParseYamlDocuments(ss.str());
  ASSERT_TRUE(docs.ok()) << docs.status();
  const auto& cfg = (*docs)[0];
  EXPECT_EQ(cfg["current-context"], "gpu-guardian-sim");
  EXPECT_EQ(cfg["clusters"][0]["cluster"]["server"], "https://127.0.0.1:6443");
  EXPECT_EQ(cfg["clusters"][0]["cluster"]["certificate-authority-data"],
            Base64Encode(m->ca_cert_pem));
  EXPECT_EQ(cfg["users"][0]["name"], "operator");
  EXPECT_EQ(cfg["users"][0]["user"]["token"], "tok-en");
  EXPECT_EQ(cfg["contexts"][0]["context"]["user"], "operator");
  ASSERT_TRUE(WriteKubeconfig(kc, "http://127.0.0.1:1", "", "", "").ok());
  std::ifstream in2(kc);
  std::stringstream ss2;
  ss2 << in2.rdbuf();
  auto plain = ParseYamlDocuments(ss2.str());
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE((*plain)[0]["clusters"][0]["cluster"].contains("certificate-authority-data"));
  EXPECT_FALSE(WriteKubeconfig(kc, "", "", "", "x").ok());
  std::filesystem::remove_all(dir);
}

TEST(TlsTest, Base64) {
  EXPECT_EQ(Base64Encode(""), "");
  EXPECT_EQ(Base64Encode("f"), "Zg==");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_EQ(Base64Encode("foo"), "Zm9v");
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
}

}  // namespace
}  // namespace gg::sim
