// /openapi/v2 over loopback HTTP (JSON and gnostic protobuf, ETag, Accept) and the v3 -> v2
// conversion rules for built-in and custom resource schemas.
#include "sim/openapi_v2.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <set>

#include "sim/protobuf.h"
#include "sim/server.h"

namespace gg::sim {
namespace {

using nlohmann::json;

constexpr const char* kProtobufAccept =
    "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";

const json kCrd =
    json::parse(R"({"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
  "metadata":{"name":"gpuhealthpolicies.gpuguardian.io"},
  "spec":{"group":"gpuguardian.io","scope":"Cluster",
    "names":{"plural":"gpuhealthpolicies","singular":"gpuhealthpolicy","kind":"GPUHealthPolicy"},
    "versions":[{"name":"v1alpha1","served":true,"storage":true,"subresources":{"status":{}},
      "schema":{"openAPIV3Schema":{"type":"object","properties":{
        "spec":{"type":"object","required":["maxUnhealthy"],"properties":{
          "maxUnhealthy":{"type":"integer","minimum":0},
          "note":{"type":"string","nullable":true}}},
        "status":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}}}]}})");

class OpenApiV2Test : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = SimServer::Start(SimOptions{});
    ASSERT_TRUE(s.ok()) << s.status();
    sim_ = std::move(*s);
    cli_ = std::make_unique<httplib::Client>(sim_->Url());
    cli_->set_read_timeout(60, 0);
  }
  httplib::Result Get(const std::string& accept) {
    httplib::Headers h;
    if (!accept.empty()) h.emplace("Accept", accept);
    return cli_->Get("/openapi/v2", h);
  }
  json GetJson() {
    auto r = Get("application/json");
    if (!r || r->status != 200) return json();
    return json::parse(r->body, nullptr, false);
  }
  std::unique_ptr<SimServer> sim_;
  std::unique_ptr<httplib::Client> cli_;
};

// Every "$ref" in `j` (recursively).
void CollectRefs(const json& j, std::set<std::string>& out) {
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      if (k == "$ref" && v.is_string()) out.insert(v.get<std::string>());
      CollectRefs(v, out);
    }
  } else if (j.is_array()) {
    for (const auto& v : j) CollectRefs(v, out);
  }
}

TEST_F(OpenApiV2Test, JsonHasBuiltinKindsWithTheirExtensionsAndResolvableRefs) {
  json doc = GetJson();
  ASSERT_TRUE(doc.is_object());
  EXPECT_EQ(doc["swagger"], "2.0");
  const json& defs = doc["definitions"];
  ASSERT_TRUE(defs.contains("io.k8s.api.core.v1.Pod"));
  ASSERT_TRUE(defs.contains("io.k8s.api.core.v1.Node"));
  EXPECT_EQ(defs["io.k8s.api.core.v1.Pod"]["x-kubernetes-group-version-kind"][0]["kind"], "Pod");
  EXPECT_EQ(defs["io.k8s.api.core.v1.Node"]["x-kubernetes-group-version-kind"][0]["version"], "v1");
  // Strategic merge patch reads these: containers merge by name.
  const json& containers = defs["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
  EXPECT_EQ(containers["x-kubernetes-patch-strategy"], "merge");
  EXPECT_EQ(containers["x-kubernetes-patch-merge-key"], "name");
  EXPECT_EQ(containers["items"]["$ref"], "#/definitions/io.k8s.api.core.v1.Container");
  // A v3 allOf-wrapped ref is a plain $ref with its description beside it.
  const json& meta = defs["io.k8s.api.core.v1.Pod"]["properties"]["metadata"];
  EXPECT_EQ(meta["$ref"], "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta");
  EXPECT_FALSE(meta.contains("allOf"));
  EXPECT_FALSE(defs["io.k8s.apimachinery.pkg.util.intstr.IntOrString"].contains("oneOf"));
  std::set<std::string> refs;
  CollectRefs(doc, refs);
  for (const auto& r : refs) {
    ASSERT_EQ(r.rfind("#/definitions/", 0), 0u) << r;
    EXPECT_TRUE(defs.contains(r.substr(14))) << "dangling " << r;
  }
  // A path kubectl would use, with the body parameter v2 has instead of requestBody.
  const json& patch = doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"];
  EXPECT_EQ(patch["parameters"][0]["in"], "body");
  EXPECT_EQ(patch["x-kubernetes-group-version-kind"]["kind"], "Pod");
  EXPECT_NE(std::find(patch["consumes"].begin(), patch["consumes"].end(),
                      "application/strategic-merge-patch+json"),
            patch["consumes"].end());
}

TEST_F(OpenApiV2Test, CustomResourceDefinitionsAppearOnceEstablished) {
  auto before = Get("application/json");
  ASSERT_TRUE(before);
  EXPECT_EQ(
      json::parse(before->body)["definitions"].count("io.gpuguardian.v1alpha1.GPUHealthPolicy"),
      0u);
  ASSERT_TRUE(sim_->Create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", kCrd).ok());
  auto after = Get("application/json");
  ASSERT_TRUE(after);
  EXPECT_NE(before->get_header_value("Etag"), after->get_header_value("Etag"));
  json defs = json::parse(after->body)["definitions"];
  ASSERT_TRUE(defs.contains("io.gpuguardian.v1alpha1.GPUHealthPolicy"));
  const json& s = defs["io.gpuguardian.v1alpha1.GPUHealthPolicy"];
  EXPECT_EQ(
      s["x-kubernetes-group-version-kind"][0],
      json({{"group", "gpuguardian.io"}, {"kind", "GPUHealthPolicy"}, {"version", "v1alpha1"}}));
  EXPECT_EQ(s["properties"]["metadata"]["$ref"],
            "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta");
  // nullable and preserve-unknown-fields lose their type, as the real server publishes them.
  EXPECT_FALSE(s["properties"]["spec"]["properties"]["note"].contains("type"));
  EXPECT_FALSE(s["properties"]["status"].contains("type"));
  EXPECT_TRUE(defs.contains("io.gpuguardian.v1alpha1.GPUHealthPolicyList"));
  EXPECT_EQ(
      defs["io.gpuguardian.v1alpha1.GPUHealthPolicyList"]["properties"]["items"]["items"]["$ref"],
      "#/definitions/io.gpuguardian.v1alpha1.GPUHealthPolicy");
}

// The protobuf answer, read back with our own reader: a Document (swagger = 1, info = 2,
// paths = 8, definitions = 9) whose definitions are the JSON document's.
TEST_F(OpenApiV2Test, ProtobufDecodesToTheSameDefinitions) {
  ASSERT_TRUE(sim_->Create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", kCrd).ok());
  json doc = GetJson();
  auto r = Get(kProtobufAccept);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"),
            "application/com.github.proto-openapi.spec.v2.v1.0+protobuf");
  auto fields = ReadProtobufFields(r->body);
  ASSERT_TRUE(fields.ok()) << fields.status();
  std::string swagger;
  std::set<std::string> names;
  std::string pod_schema;
  std::size_t paths = 0;
  for (const auto& f : *fields) {
    if (f.number == 1) swagger = f.bytes;
    if (f.number == 8) {
      auto ps = ReadProtobufFields(f.bytes);
      ASSERT_TRUE(ps.ok());
      for (const auto& p : *ps) paths += p.number == 2;
    }
    if (f.number != 9) continue;
    auto defs = ReadProtobufFields(f.bytes);
    ASSERT_TRUE(defs.ok()) << defs.status();
    for (const auto& d : *defs) {
      auto named = ReadProtobufFields(d.bytes);  // NamedSchema{name = 1, value = 2}
      ASSERT_TRUE(named.ok() && named->size() == 2) << named.status();
      names.insert(std::string((*named)[0].bytes));
      if ((*named)[0].bytes == "io.k8s.api.core.v1.Pod") pod_schema = (*named)[1].bytes;
    }
  }
  EXPECT_EQ(swagger, "2.0");
  EXPECT_EQ(names.size(), doc["definitions"].size());
  EXPECT_EQ(paths, doc["paths"].size());
  EXPECT_TRUE(names.count("io.gpuguardian.v1alpha1.GPUHealthPolicy"));
  // The Pod schema's vendor extension (field 31): NamedAny{name, Any{yaml = 2}}.
  auto pod = ReadProtobufFields(pod_schema);
  ASSERT_TRUE(pod.ok());
  json gvk;
  for (const auto& f : *pod) {
    if (f.number != 31) continue;
    auto named = ReadProtobufFields(f.bytes);
    ASSERT_TRUE(named.ok());
    if ((*named)[0].bytes != "x-kubernetes-group-version-kind") continue;
    auto any = ReadProtobufFields((*named)[1].bytes);
    ASSERT_TRUE(any.ok());
    gvk = json::parse((*any)[0].bytes, nullptr, false);
  }
  EXPECT_EQ(gvk[0]["kind"], "Pod");
  EXPECT_EQ(r->get_header_value("Etag"), Get("")->get_header_value("Etag"));
}

TEST_F(OpenApiV2Test, AcceptChoosesTheFormOr406) {
  auto any = Get("");
  ASSERT_TRUE(any);
  EXPECT_EQ(any->status, 200);
  EXPECT_EQ(any->get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(any->get_header_value("Vary"), "Accept");
  auto html = Get("text/html");
  ASSERT_TRUE(html);
  EXPECT_EQ(html->status, 406);
  auto pb = Get("application/com.github.proto-openapi.spec.v2.v1.0+protobuf, application/json");
  ASSERT_TRUE(pb);
  EXPECT_EQ(pb->get_header_value("Content-Type"),
            "application/com.github.proto-openapi.spec.v2.v1.0+protobuf");
  EXPECT_EQ(OpenApiV2Format("application/json;q=0.5, " + std::string(kProtobufAccept)), "protobuf");
  EXPECT_EQ(OpenApiV2Format("text/plain, */*;q=0.1"), "json");
  EXPECT_EQ(OpenApiV2Format("*/*, " + std::string(kProtobufAccept)), "protobuf");  // concrete first
  EXPECT_EQ(OpenApiV2Format("application/json;q=0"), "");
  std::string etag = any->get_header_value("Etag");
  EXPECT_EQ(etag.size(), 130u) << etag;  // quoted SHA-512, upper-case hex
}

// Every release the simulator mimics converts cleanly: protobuf served (the encoder refuses
// any key Swagger 2.0 lacks), every $ref resolvable.
TEST(OpenApiV2Releases, EachKubeVersionServesAConsistentDocument) {
  for (const char* version : {"1.32", "1.33", "1.36"}) {
    SimOptions o;
    o.kube_version = version;
    auto s = SimServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    httplib::Client cli((*s)->Url());
    cli.set_read_timeout(60, 0);
    auto pb = cli.Get("/openapi/v2", {{"Accept", kProtobufAccept}});
    ASSERT_TRUE(pb);
    EXPECT_EQ(pb->status, 200) << version << ": " << pb->body;
    auto r = cli.Get("/openapi/v2");
    ASSERT_TRUE(r);
    json doc = json::parse(r->body, nullptr, false);
    ASSERT_TRUE(doc.is_object()) << version;
    EXPECT_EQ(doc["info"]["version"], "v" + std::string(version) + ".0");
    std::set<std::string> refs;
    CollectRefs(doc, refs);
    for (const auto& ref : refs)
      EXPECT_TRUE(doc["definitions"].contains(ref.substr(14))) << version << " " << ref;
    (*s)->Stop();
  }
}

TEST(OpenApiV2Schema, CrdStructuralSchemaLosesWhatV2CannotSay) {
  json s = json::parse(R"({"type":"object","required":["a","b"],"properties":{
    "a":{"type":"string","nullable":true},
    "b":{"type":"array","x-kubernetes-preserve-unknown-fields":true,"items":{"type":"string"}},
    "c":{"type":"object","x-kubernetes-embedded-resource":true,"properties":{"spec":{"type":"object"}}},
    "d":{"x-kubernetes-int-or-string":true,"anyOf":[{"type":"integer"},{"type":"string"}]}}})");
  json v2 = CrdSchemaV2(s, "example.com", "v1", "Thing");
  const json& p = v2["properties"];
  EXPECT_EQ(v2["required"], json::array({"b"}));  // a nullable property is not required
  EXPECT_FALSE(p["a"].contains("type"));
  EXPECT_FALSE(p["b"].contains("items"));
  EXPECT_FALSE(p["b"].contains("type"));  // an array without items is untyped
  EXPECT_EQ(p["c"]["properties"]["metadata"]["$ref"],
            "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta");
  EXPECT_EQ(p["c"]["required"], json::array({"kind", "apiVersion"}));
  EXPECT_FALSE(p["d"].contains("anyOf"));
  EXPECT_TRUE(p["d"]["x-kubernetes-int-or-string"].get<bool>());
  EXPECT_TRUE(p.contains("apiVersion") && p.contains("kind"));
  json open =
      CrdSchemaV2(json::parse(R"({"type":"object","x-kubernetes-preserve-unknown-fields":true,
    "properties":{"x":{"type":"string"}}})"),
                  "example.com", "v1", "Open");
  EXPECT_EQ(open.size(), 2u) << open;  // {type: object} and the GVK extension only
  EXPECT_TRUE(EncodeOpenApiV2Protobuf({{"definitions", {{"Thing", v2}}}}).ok());
}

TEST(OpenApiV2Schema, EncoderRejectsKeysSwagger2DoesNotHave) {
  auto bad =
      EncodeOpenApiV2Protobuf({{"definitions", {{"X", {{"type", "string"}, {"nullable", true}}}}}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("nullable"), std::string::npos) << bad.status();
  // SchemaV3ToV2 never produces one.
  json v2 = SchemaV3ToV2({{"type", "string"}, {"nullable", true}, {"oneOf", json::array()}});
  EXPECT_EQ(v2, json({{"type", "string"}}));
}

}  // namespace
}  // namespace gg::sim
