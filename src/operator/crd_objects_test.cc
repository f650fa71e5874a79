// CRD projection codecs: list and watch decoding, bad input kept with its error.
#include "operator/crd_objects.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "operator/node_writer.h"

namespace gg::op {
namespace {

TEST(CrdObjectsTest, PolicyListAndWatch) {
  std::string list = R"({"kind":"GPUHealthPolicyList","metadata":{"resourceVersion":"42"},"items":[
    {"apiVersion":"gpuguardian.io/v1alpha1","kind":"GPUHealthPolicy",
     "metadata":{"name":"default","uid":"u1","resourceVersion":"40","generation":3},
     "spec":{"nodeSelector":{"matchLabels":{"a":"b"}},"dryRun":true}},
    {"metadata":{"name":"broken","resourceVersion":"41"},"spec":{"dryRun":"yes"}}]})";
  std::vector<PolicyObject> got;
  auto codec = PolicyCodec();
  auto r = codec.parse_list_into(list, [&](PolicyObject&& p) { got.push_back(std::move(p)); });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->resource_version, "42");
  ASSERT_EQ(got.size(), 2u);
  ASSERT_TRUE(got[0].policy.has_value());
  EXPECT_EQ(got[0].policy->generation, 3);
  EXPECT_TRUE(got[0].policy->spec.dry_run);
  EXPECT_EQ(got[0].policy->spec.node_selector.match_labels.at("a"), "b");
  EXPECT_FALSE(got[1].policy.has_value());
  EXPECT_FALSE(got[1].decode_error.empty());

  auto ev = codec.parse_event(
      R"({"type":"DELETED","object":{"metadata":{"name":"default","resourceVersion":"50"}}})");
  ASSERT_TRUE(ev.ok());
  EXPECT_EQ(ev->type, k8s::WatchEventType::kDeleted);
  EXPECT_EQ(ev->object.meta.resource_version, "50");
  auto gone = codec.parse_event(
      R"({"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"too old"}})");
  ASSERT_TRUE(gone.ok());
  EXPECT_EQ(gone->type, k8s::WatchEventType::kError);
  EXPECT_EQ(gone->error.code(), StatusCode::kOutOfRange);
  EXPECT_FALSE(codec.parse_event("not json").ok());
}

TEST(CrdObjectsTest, NodeHealthStatusDecoded) {
  auto o = DecodeNodeHealthObject(
      R"({"metadata":{"name":"n1","resourceVersion":"7"},
          "status":{"nodeName":"n1","observedAt":"2026-01-01T00:00:00Z","gpus":[{"index":0,"uuid":"GPU-1"}]}})");
  ASSERT_TRUE(o.ok()) << o.status();
  ASSERT_TRUE(o->HasStatus()) << o->decode_error;
  EXPECT_EQ(o->Unpacked()->gpus.size(), 1u);
  auto none = DecodeNodeHealthObject(R"({"metadata":{"name":"n2"}})");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->HasStatus());
  auto bad = DecodeNodeHealthObject(R"({"metadata":{"name":"n3"},"status":{"gpus":"many"}})");
  ASSERT_TRUE(bad.ok());
  EXPECT_FALSE(bad->HasStatus());
  EXPECT_FALSE(bad->decode_error.empty());
  EXPECT_FALSE(DecodeNodeHealthObject(R"({"metadata":{}})").ok());
}

TEST(NodeWriterTest, PatchBodyKeepsWholeTaintListAndPrecondition) {
  NodeSpecChange c;
  c.taints = std::vector<k8s::Taint>{{"admin", "x", "NoSchedule", {}},
                                     {"gpuguardian.io/unhealthy", "Xid79", "NoSchedule", {}}};
  c.unschedulable = true;
  c.annotations["gpuguardian.io/remediation"] = std::string("{}");
  c.resource_version = "99";
  auto j = nlohmann::json::parse(NodeSpecPatchBody(c));
  EXPECT_EQ(j["metadata"]["resourceVersion"], "99");
  EXPECT_EQ(j["spec"]["taints"].size(), 2u);
  EXPECT_EQ(j["spec"]["taints"][0]["key"], "admin");
  EXPECT_EQ(j["spec"]["unschedulable"], true);
  NodeSpecChange undo;
  undo.taints = std::vector<k8s::Taint>{};
  undo.unschedulable = false;
  undo.annotations["gpuguardian.io/remediation"] = std::nullopt;
  auto u = nlohmann::json::parse(NodeSpecPatchBody(undo));
  EXPECT_TRUE(u["spec"]["taints"].is_null());
  EXPECT_TRUE(u["spec"]["unschedulable"].is_null());
  EXPECT_TRUE(u["metadata"]["annotations"]["gpuguardian.io/remediation"].is_null());
  EXPECT_FALSE(u["metadata"].contains("resourceVersion"));
}

}  // namespace
}  // namespace gg::op
