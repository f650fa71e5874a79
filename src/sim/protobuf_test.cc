// Protobuf decoding of Kubernetes request bodies: hand-encoded messages against the table
// generated from the upstream generated.proto files.
#include "sim/protobuf.h"

#include <gtest/gtest.h>

namespace gg::sim {
namespace {

using nlohmann::json;

std::string Varint(std::uint64_t v) {
  std::string s;
  while (v >= 0x80) {
    s += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  s += static_cast<char>(v);
  return s;
}
std::string Bytes(int field, const std::string& b) {
  return Varint(static_cast<std::uint64_t>(field) << 3 | 2) + Varint(b.size()) + b;
}
std::string Int(int field, std::uint64_t v) {
  return Varint(static_cast<std::uint64_t>(field) << 3) + Varint(v);
}
std::string Envelope(const std::string& api_version, const std::string& kind,
                     const std::string& raw) {
  std::string type_meta = Bytes(1, api_version) + Bytes(2, kind);
  return std::string("k8s\0", 4) + Bytes(1, type_meta) + Bytes(2, raw);
}

TEST(Protobuf, ConfigMapWithMetaMapsAndBinaryData) {
  // ObjectMeta{name=cm, namespace="", labels{a:b}, creationTimestamp{}}
  std::string meta =
      Bytes(1, "cm") + Bytes(3, "") + Bytes(11, Bytes(1, "a") + Bytes(2, "b")) + Bytes(8, "");
  std::string cm = Bytes(1, meta) + Bytes(2, Bytes(1, "k") + Bytes(2, "v")) +
                   Bytes(3, Bytes(1, "bin") + Bytes(2, std::string("\x00\xff", 2)));
  auto j = DecodeK8sProtobuf(Envelope("v1", "ConfigMap", cm));
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ((*j)["apiVersion"], "v1");
  EXPECT_EQ((*j)["kind"], "ConfigMap");
  EXPECT_EQ((*j)["metadata"]["name"], "cm");
  EXPECT_FALSE((*j)["metadata"].contains("namespace"));  // "" is omitempty in Go's JSON
  EXPECT_TRUE((*j)["metadata"]["creationTimestamp"].is_null());
  EXPECT_EQ((*j)["metadata"]["labels"]["a"], "b");
  EXPECT_EQ((*j)["data"]["k"], "v");
  EXPECT_EQ((*j)["binaryData"]["bin"], "AP8=");  // standard base64, padded
}

TEST(Protobuf, ExplicitZeroOfAPointerFieldSurvives) {
  // DeploymentSpec.replicas (*int32) = 0; DeleteOptions.gracePeriodSeconds (*int64) = 0.
  auto d = DecodeProtobufMessage(Bytes(2, Int(1, 0)), "k8s.io.api.apps.v1.Deployment");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ((*d)["spec"]["replicas"], 0);
  auto o = DecodeK8sProtobuf(Envelope("v1", "DeleteOptions", Int(1, 0) + Bytes(5, "All")));
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ((*o)["gracePeriodSeconds"], 0);
  EXPECT_EQ((*o)["dryRun"], json::array({"All"}));
}

TEST(Protobuf, WrappersBecomeTheirJsonForms) {
  // ServicePort{port=80, targetPort=IntOrString{type=1,strVal="http"}}; Time{seconds}.
  std::string port = Int(3, 80) + Bytes(4, Int(1, 1) + Bytes(3, "http"));
  auto s = DecodeProtobufMessage(Bytes(1, port), "k8s.io.api.core.v1.ServiceSpec");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)["ports"][0]["port"], 80);
  EXPECT_EQ((*s)["ports"][0]["targetPort"], "http");
  auto m = DecodeProtobufMessage(Bytes(8, Int(1, 1767225600)),
                                 "k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)["creationTimestamp"], "2026-01-01T00:00:00Z");
  // ResourceRequirements.limits map<string, Quantity>.
  auto rr = DecodeProtobufMessage(Bytes(1, Bytes(1, "cpu") + Bytes(2, Bytes(1, "500m"))),
                                  "k8s.io.api.core.v1.ResourceRequirements");
  ASSERT_TRUE(rr.ok()) << rr.status();
  EXPECT_EQ((*rr)["limits"]["cpu"], "500m");
}

TEST(Protobuf, BadInputIsRefusedNotDropped) {
  EXPECT_FALSE(DecodeK8sProtobuf("{\"kind\":\"ConfigMap\"}").ok());
  auto unknown = DecodeK8sProtobuf(Envelope("v1", "ConfigMap", Bytes(99, "x")));
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("unknown field number 99"), std::string::npos);
  auto truncated = DecodeK8sProtobuf(Envelope("v1", "ConfigMap", Bytes(1, "abc").substr(0, 3)));
  EXPECT_FALSE(truncated.ok());
  auto kind = DecodeK8sProtobuf(Envelope("v1", "NoSuchKind", ""));
  ASSERT_FALSE(kind.ok());
  EXPECT_EQ(kind.status().code(), StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace gg::sim
