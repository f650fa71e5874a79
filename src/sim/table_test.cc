// Server-side printing helpers: Accept negotiation, HumanDuration, the printer-column JSONPath
// subset, built-in and CRD rows.
#include "sim/table.h"

#include <gtest/gtest.h>

#include "common/time_util.h"
#include "sim/registry.h"

namespace gg::sim {
namespace {

using nlohmann::json;
using namespace std::chrono;

TEST(TableTest, AcceptNegotiation) {
  EXPECT_EQ(TableVersionFromAccept("application/json;as=Table;v=v1;g=meta.k8s.io,"
                                   "application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
                                   "application/json"),
            "meta.k8s.io/v1");
  EXPECT_EQ(TableVersionFromAccept("application/json;as=Table;v=v1beta1;g=meta.k8s.io"),
            "meta.k8s.io/v1beta1");
  EXPECT_FALSE(TableVersionFromAccept("application/json"));
  EXPECT_FALSE(TableVersionFromAccept(""));
  // Plain JSON listed first wins; protobuf is skipped (we never serve it).
  EXPECT_FALSE(
      TableVersionFromAccept("application/json, application/json;as=Table;v=v1;g=meta.k8s.io"));
  EXPECT_EQ(
      TableVersionFromAccept("application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,"
                             "application/json;as=Table;v=v1;g=meta.k8s.io"),
      "meta.k8s.io/v1");
  EXPECT_TRUE(ConversionFromAccept(
      "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json",
      "APIGroupDiscoveryList", "apidiscovery.k8s.io", {"v2"}));
  EXPECT_FALSE(ConversionFromAccept(
      "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json",
      "APIGroupDiscoveryList", "apidiscovery.k8s.io", {"v2"}));
  EXPECT_FALSE(ParseIncludeObject("Everything").ok());
}

TEST(TableTest, HumanDurationMatchesKubectl) {
  EXPECT_EQ(HumanDuration(seconds(-5)), "<invalid>");
  EXPECT_EQ(HumanDuration(seconds(45)), "45s");
  EXPECT_EQ(HumanDuration(seconds(119)), "119s");
  EXPECT_EQ(HumanDuration(seconds(200)), "3m20s");
  EXPECT_EQ(HumanDuration(minutes(5)), "5m");
  EXPECT_EQ(HumanDuration(minutes(90)), "90m");
  EXPECT_EQ(HumanDuration(hours(5) + minutes(7)), "5h7m");
  EXPECT_EQ(HumanDuration(hours(30)), "30h");
  EXPECT_EQ(HumanDuration(hours(24 * 3 + 4)), "3d4h");
  EXPECT_EQ(HumanDuration(hours(24 * 333)), "333d");
  EXPECT_EQ(HumanDuration(hours(24 * (365 * 3 + 10))), "3y10d");
}

TEST(TableTest, JsonPathSubset) {
  json doc = json::parse(R"({"status":{"n":3,"conditions":[{"type":"Ready","status":"True"},
    {"type":"BrakeEngaged","status":"False"}]},"metadata":{"labels":{"a.b/c":"x"}},
    "spec":{"items":[{"v":1},{"v":2}]}})");
  auto one = [&](const char* p) -> json {
    auto r = JsonPathFind(doc, p);
    EXPECT_TRUE(r.ok()) << p << ": " << r.status();
    return r.ok() && !r->empty() ? *(*r)[0] : json("<none>");
  };
  EXPECT_EQ(one(".status.n"), 3);
  EXPECT_EQ(one(".status.conditions[?(@.type==\"BrakeEngaged\")].status"), "False");
  EXPECT_EQ(one(".status.conditions[?(@.type!=\"Ready\")].type"), "BrakeEngaged");
  EXPECT_EQ(one(".metadata.labels['a.b/c']"), "x");
  EXPECT_EQ(one(".spec.items[1].v"), 2);
  EXPECT_EQ(one(".spec.items[-1].v"), 2);
  EXPECT_EQ(one("{.status.n}"), 3);
  EXPECT_EQ(JsonPathFind(doc, ".spec.items[*].v")->size(), 2u);
  EXPECT_TRUE(JsonPathFind(doc, ".status.missing")->empty());
  EXPECT_FALSE(JsonPathFind(doc, ".status.conditions[?(@.type~\"x\")]").ok());
  EXPECT_FALSE(JsonPathFind(doc, "status n").ok());
}

TEST(TableTest, NodeAndCustomResourceRows) {
  Registry reg("1.35");
  auto nodes = reg.Find("", "v1", "nodes");
  WallTime now = *ParseRfc3339("2026-01-02T00:00:00Z");
  json node = json::parse(R"({"metadata":{"name":"n1","creationTimestamp":"2026-01-01T00:00:00Z",
    "labels":{"node-role.kubernetes.io/gpu":"","kubernetes.io/role":"worker"}},
    "spec":{"unschedulable":true},
    "status":{"conditions":[{"type":"Ready","status":"False"}],"nodeInfo":{"kubeletVersion":"v1.35.0"}}})");
  json row = TableRow(*nodes, node, node, now, IncludeObject::kMetadata);
  EXPECT_EQ(row["cells"][0], "n1");
  EXPECT_EQ(row["cells"][1], "NotReady,SchedulingDisabled");
  EXPECT_EQ(row["cells"][2], "gpu,worker");
  EXPECT_EQ(row["cells"][3], "24h");
  EXPECT_EQ(row["cells"][4], "v1.35.0");
  EXPECT_EQ(row["cells"][5], "<none>");  // Internal-IP
  EXPECT_EQ(row["object"]["kind"], "PartialObjectMetadata");
  EXPECT_EQ(row["cells"].size(), TableColumns(*nodes).size());

  json crd =
      json::parse(R"({"metadata":{"name":"ghps.x.io"},"spec":{"group":"x.io","scope":"Cluster",
    "names":{"plural":"ghps","kind":"GHP"},"versions":[{"name":"v1","served":true,"storage":true,
    "additionalPrinterColumns":[{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"},
      {"name":"Matched","type":"integer","jsonPath":".status.matched"},
      {"name":"Paused","type":"boolean","jsonPath":".spec.paused","priority":1},
      {"name":"Seen","type":"date","jsonPath":".status.seen"}]}]}})");
  ASSERT_TRUE(reg.ApplyCrd(crd).ok());
  auto ghp = reg.Find("x.io", "v1", "ghps");
  ASSERT_TRUE(ghp);
  json cols = TableColumns(*ghp);
  ASSERT_EQ(cols.size(), 5u);
  EXPECT_EQ(cols[3]["priority"], 1);
  json obj = json::parse(R"({"metadata":{"name":"p"},"spec":{},
    "status":{"matched":7,"seen":"2026-01-01T23:00:00Z","conditions":[{"type":"Ready","status":"True"}]}})");
  json r = TableRow(*ghp, obj, obj, now, IncludeObject::kNone);
  EXPECT_EQ(r["cells"], json::parse(R"(["p","True",7,null,"60m"])"));
  EXPECT_FALSE(r.contains("object"));
}

}  // namespace
}  // namespace gg::sim
