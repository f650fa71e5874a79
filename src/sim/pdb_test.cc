// Tests for PDB status arithmetic and eviction decisions (sim/pdb.h).
#include "sim/pdb.h"

#include <gtest/gtest.h>

namespace gg::sim {
namespace {

using nlohmann::json;
constexpr const char* kNow = "2026-01-01T00:10:00Z";

json Pod(const std::string& name, bool ready, const std::string& owner_uid = "rs1",
         const std::string& phase = "Running") {
  json p = {{"metadata", {{"name", name}, {"namespace", "ml"}, {"labels", {{"app", "infer"}}}}},
            {"status",
             {{"phase", phase},
              {"conditions", {{{"type", "Ready"}, {"status", ready ? "True" : "False"}}}}}}};
  if (!owner_uid.empty())
    p["metadata"]["ownerReferences"] = {{{"apiVersion", "apps/v1"},
                                         {"kind", "ReplicaSet"},
                                         {"name", "rs"},
                                         {"uid", owner_uid},
                                         {"controller", true}}};
  return p;
}

json Pdb(json spec_extra, int generation = 1) {
  json p = {{"metadata", {{"name", "infer-pdb"}, {"namespace", "ml"}, {"generation", generation}}},
            {"spec", {{"selector", {{"matchLabels", {{"app", "infer"}}}}}}}};
  p["spec"].update(spec_extra);
  return p;
}

std::vector<json> Pods(int ready, int unready) {
  std::vector<json> v;
  for (int i = 0; i < ready; ++i) v.push_back(Pod("r" + std::to_string(i), true));
  for (int i = 0; i < unready; ++i) v.push_back(Pod("u" + std::to_string(i), false));
  return v;
}

TEST(PdbTest, MinAvailableInt) {
  auto st = ComputePdbStatus(Pdb({{"minAvailable", 2}}), Pods(3, 1), kNow);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->expected_pods, 4);
  EXPECT_EQ(st->current_healthy, 3);
  EXPECT_EQ(st->desired_healthy, 2);
  EXPECT_EQ(st->disruptions_allowed, 1);
}

TEST(PdbTest, PercentagesRoundUp) {
  // 5 replicas: minAvailable 50% -> ceil(2.5)=3; maxUnavailable 30% -> ceil(1.5)=2 -> desired 3.
  auto scale = [](const json&, std::string_view) -> std::optional<int> { return 5; };
  auto a = ComputePdbStatus(Pdb({{"minAvailable", "50%"}}), Pods(5, 0), kNow, scale);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->expected_pods, 5);
  EXPECT_EQ(a->desired_healthy, 3);
  EXPECT_EQ(a->disruptions_allowed, 2);
  auto b = ComputePdbStatus(Pdb({{"maxUnavailable", "30%"}}), Pods(5, 0), kNow, scale);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->desired_healthy, 3);
  EXPECT_EQ(b->disruptions_allowed, 2);
  auto c = ComputePdbStatus(Pdb({{"maxUnavailable", 1}}), Pods(4, 0), kNow);  // scale = pods
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->expected_pods, 4);
  EXPECT_EQ(c->desired_healthy, 3);
  EXPECT_EQ(c->disruptions_allowed, 1);
}

TEST(PdbTest, UnmanagedPodsAndUnknownScale) {
  std::vector<json> pods = Pods(2, 0);
  pods.push_back(Pod("bare", true, ""));
  auto st = ComputePdbStatus(Pdb({{"maxUnavailable", 1}}), pods, kNow);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->expected_pods, 2);
  EXPECT_EQ(st->current_healthy, 3);
  EXPECT_EQ(st->unmanaged_pods, std::vector<std::string>{"bare"});
  auto none = [](const json&, std::string_view) -> std::optional<int> { return std::nullopt; };
  auto f = ComputePdbStatus(Pdb({{"maxUnavailable", 1}}), pods, kNow, none);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->disruptions_allowed, 0);
  EXPECT_NE(f->sync_failure.find("found no controllers for pod"), std::string::npos);
  json with = ApplyPdbStatus(Pdb({{"maxUnavailable", 1}}), *f, kNow);
  EXPECT_EQ(with["status"]["conditions"][0]["reason"], "SyncFailed");
}

TEST(PdbTest, SelectorsAndNamespaces) {
  json other = Pod("x", true);
  other["metadata"]["namespace"] = "other";
  EXPECT_FALSE(PdbSelectsPod(Pdb(json::object()), other));
  json all = Pdb(json::object());
  all["spec"]["selector"] = json::object();
  EXPECT_TRUE(PdbSelectsPod(all, Pod("a", true)));
  all["spec"].erase("selector");
  EXPECT_FALSE(PdbSelectsPod(all, Pod("a", true)));
  auto st = ComputePdbStatus(Pdb({{"minAvailable", 1}}), {other}, kNow);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->expected_pods, 0);
  EXPECT_EQ(st->disruptions_allowed, 0);
}

TEST(PdbTest, DisruptedPodsAgeOutAndDontCount) {
  json pdb = Pdb({{"minAvailable", 1}});
  pdb["status"]["disruptedPods"] = {{"r0", "2026-01-01T00:09:30Z"},
                                    {"r1", "2026-01-01T00:01:00Z"},
                                    {"gone", "2026-01-01T00:09:59Z"}};
  auto st = ComputePdbStatus(pdb, Pods(3, 0), kNow);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->disrupted_pods.size(), 1u);
  EXPECT_EQ(st->current_healthy, 2);
  json out = ApplyPdbStatus(pdb, *st, kNow);
  EXPECT_EQ(out["status"]["disruptedPods"], json::parse(R"({"r0":"2026-01-01T00:09:30Z"})"));
  EXPECT_EQ(out["status"]["observedGeneration"], 1);
  EXPECT_EQ(out["status"]["disruptionsAllowed"], 1);
  EXPECT_EQ(out["status"]["conditions"][0]["reason"], "SufficientPods");
  // Transition time sticks while status is unchanged.
  json again = ApplyPdbStatus(out, *st, "2026-01-01T01:00:00Z");
  EXPECT_EQ(again["status"]["conditions"][0]["lastTransitionTime"], kNow);
}

TEST(PdbTest, BadValuesAreErrors) {
  EXPECT_FALSE(ComputePdbStatus(Pdb({{"minAvailable", "abc"}}), Pods(1, 0), kNow).ok());
  EXPECT_FALSE(ComputePdbStatus(Pdb({{"maxUnavailable", "x%"}}), Pods(1, 0), kNow).ok());
  EXPECT_FALSE(ComputePdbStatus(Pdb({{"maxUnavailable", -1}}), Pods(1, 0), kNow).ok());
  EXPECT_FALSE(ComputePdbStatus(json::array(), Pods(1, 0), kNow).ok());
  EXPECT_FALSE(ComputePdbStatus(Pdb({{"minAvailable", 1}}), Pods(1, 0), "not a time").ok());
}

json WithStatus(json pdb, int allowed, int current, int desired, int observed = 1) {
  pdb["status"] = {{"disruptionsAllowed", allowed},
                   {"currentHealthy", current},
                   {"desiredHealthy", desired},
                   {"expectedPods", current},
                   {"observedGeneration", observed}};
  return pdb;
}

TEST(EvictionTest, BlockedWithTheRealBody) {
  auto d =
      DecideEviction(Pod("infer-1", true), {WithStatus(Pdb({{"minAvailable", 1}}), 0, 1, 1)}, kNow);
  EXPECT_EQ(d.outcome, EvictionDecision::Outcome::kTooManyRequests);
  EXPECT_EQ(d.code, 429);
  EXPECT_EQ(d.status,
            json::parse(R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
    "message":"Cannot evict pod as it would violate the pod's disruption budget.","reason":"TooManyRequests","code":429,
    "details":{"causes":[{"reason":"DisruptionBudget","message":"The disruption budget infer-pdb needs 1 healthy pods and has 1 currently"}]}})"));
  EXPECT_FALSE(d.updated_pdb.has_value());
}

TEST(EvictionTest, AllowedDecrementsBudget) {
  auto d = DecideEviction(Pod("r0", true), {WithStatus(Pdb({{"minAvailable", 1}}), 2, 3, 1)}, kNow);
  EXPECT_EQ(d.outcome, EvictionDecision::Outcome::kAllow);
  EXPECT_EQ(d.code, 201);
  EXPECT_EQ(d.status, EvictionSuccessStatus());
  ASSERT_TRUE(d.updated_pdb.has_value());
  EXPECT_EQ((*d.updated_pdb)["status"]["disruptionsAllowed"], 1);
  EXPECT_EQ((*d.updated_pdb)["status"]["disruptedPods"]["r0"], kNow);
}

TEST(EvictionTest, SpecialCases) {
  json pdb0 = WithStatus(Pdb({{"minAvailable", 1}}), 0, 1, 1);
  // No PDB, terminal, pending, deleting pods: allowed without a budget.
  EXPECT_EQ(DecideEviction(Pod("a", true), {}, kNow).outcome, EvictionDecision::Outcome::kAllow);
  EXPECT_FALSE(DecideEviction(Pod("a", true, "rs1", "Succeeded"), {pdb0}, kNow).updated_pdb);
  EXPECT_EQ(DecideEviction(Pod("a", true, "rs1", "Pending"), {pdb0}, kNow).code, 201);
  json deleting = Pod("a", true);
  deleting["metadata"]["deletionTimestamp"] = kNow;
  EXPECT_EQ(DecideEviction(deleting, {pdb0}, kNow).code, 201);
  // Unready pod passes when the budget is met.
  EXPECT_EQ(DecideEviction(Pod("u", false), {pdb0}, kNow).code, 201);
  json always = pdb0;
  always["status"]["currentHealthy"] = 0;
  EXPECT_EQ(DecideEviction(Pod("u", false), {always}, kNow).code, 429);
  always["spec"]["unhealthyPodEvictionPolicy"] = "AlwaysAllow";
  EXPECT_EQ(DecideEviction(Pod("u", false), {always}, kNow).code, 201);
  // Not yet observed generation: 429 with retryAfterSeconds 10.
  auto stale =
      DecideEviction(Pod("a", true), {WithStatus(Pdb({{"minAvailable", 1}}, 2), 5, 5, 1, 1)}, kNow);
  EXPECT_EQ(stale.code, 429);
  EXPECT_EQ(stale.status["details"]["retryAfterSeconds"], 10);
  EXPECT_EQ(stale.status["details"]["causes"][0]["message"],
            "The disruption budget infer-pdb is still being processed by the server.");
  // Two PDBs: 500.
  EXPECT_EQ(DecideEviction(Pod("a", true), {pdb0, pdb0}, kNow).code, 500);
  // Negative: 403.
  EXPECT_EQ(
      DecideEviction(Pod("a", true), {WithStatus(Pdb({{"minAvailable", 1}}), -1, 1, 1)}, kNow).code,
      403);
  // Garbage does not crash.
  EXPECT_EQ(DecideEviction(json("x"), {json(1), json::array()}, kNow).code, 201);
}

}  // namespace
}  // namespace gg::sim
