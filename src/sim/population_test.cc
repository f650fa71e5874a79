// Tests for the synthetic population generator (sim/population.h).
#include "sim/population.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "sim/pdb.h"
#include "sim/schema.h"

namespace gg::sim {
namespace {

using nlohmann::json;

std::vector<json> Generate(const PopulationSpec& spec) {
  std::vector<json> out;
  Status st = GeneratePopulation(spec, [&](json&& o) {
    out.push_back(std::move(o));
    return OkStatus();
  });
  EXPECT_TRUE(st.ok()) << st;
  return out;
}

TEST(PopulationTest, FakeGpuUuidIsPinned) {
  // Pinned: the agent's fake NVML must produce these exact strings (algorithm in the header).
  EXPECT_EQ(FakeGpuUuid("gpu-node-00000", 0), FakeGpuUuid("gpu-node-00000", 0));
  EXPECT_NE(FakeGpuUuid("gpu-node-00000", 0), FakeGpuUuid("gpu-node-00000", 1));
  EXPECT_NE(FakeGpuUuid("gpu-node-00000", 0), FakeGpuUuid("gpu-node-00001", 0));
  std::string u = FakeGpuUuid("gpu-node-00000", 0);
  ASSERT_EQ(u.size(), 40u);
  EXPECT_EQ(u.substr(0, 4), "GPU-");
  EXPECT_EQ(
      FakeGpuUuid("n", 3), "GPU-" + [] {
        // FNV-1a-64 of "n/3" and "n/3~", spelled out independently.
        auto fnv = [](const std::string& s) {
          uint64_t h = 0xcbf29ce484222325ULL;
          for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
          return h;
        };
        char buf[40];
        std::snprintf(buf, sizeof buf, "%016llx%016llx", (unsigned long long)fnv("n/3"),
                      (unsigned long long)fnv("n/3~"));
        std::string h = buf;
        return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" +
               h.substr(16, 4) + "-" + h.substr(20, 12);
      }());
}

TEST(PopulationTest, DeterministicAndCountsMatch) {
  PopulationSpec spec;
  spec.nodes = 6;
  spec.gpus_per_node = 8;
  spec.pods_per_node = 2;
  spec.dra = true;
  auto a = Generate(spec);
  auto b = Generate(spec);
  ASSERT_EQ(a, b);
  std::map<std::string, int> kinds;
  for (const auto& o : a) kinds[o["kind"].get<std::string>()]++;
  PopulationCounts c = CountPopulation(spec);
  EXPECT_EQ(kinds["Node"], c.nodes);
  EXPECT_EQ(kinds["Pod"], c.pods);
  EXPECT_EQ(kinds["ResourceSlice"], c.resourceslices);
  EXPECT_EQ(kinds["Deployment"], c.deployments);
  EXPECT_EQ(kinds["ReplicaSet"], c.replicasets);
  EXPECT_EQ(kinds["Job"], c.jobs);
  EXPECT_EQ(kinds["PodDisruptionBudget"], c.pdbs);
  EXPECT_EQ(kinds["DaemonSet"], c.daemonsets);
  EXPECT_EQ(kinds["Namespace"], 2);
  spec.seed = 2;
  EXPECT_NE(Generate(spec), a);
}

TEST(PopulationTest, NodesAreRealisticAndValid) {
  PopulationSpec spec;
  spec.nodes = 2;
  auto objs = Generate(spec);
  std::set<std::string> uids, names;
  for (const auto& o : objs) {
    EXPECT_TRUE(uids.insert(o["metadata"]["uid"].get<std::string>()).second);
    EXPECT_TRUE(names
                    .insert(o["kind"].get<std::string>() + "/" +
                            o["metadata"].value("namespace", "") + "/" +
                            o["metadata"]["name"].get<std::string>())
                    .second);
    std::string kind = o["kind"];
    std::string api = o["apiVersion"];
    std::string group = api.find('/') == std::string::npos ? "" : api.substr(0, api.find('/'));
    bool namespaced = o["metadata"].contains("namespace");
    if (kind == "PriorityClass" || kind == "Job") continue;  // not in ValidateBuiltin's list
    auto causes = ValidateBuiltin(o, group, api.substr(api.find('/') + 1), kind, namespaced);
    EXPECT_TRUE(causes.empty()) << kind << " " << causes[0].field << ": " << causes[0].message;
  }
  json node;
  for (const auto& o : objs)
    if (o["kind"] == "Node" && node.is_null()) node = o;
  EXPECT_EQ(node["metadata"]["name"], "gpu-node-00000");
  EXPECT_EQ(node["metadata"]["labels"]["nvidia.com/gpu.product"], "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ(node["metadata"]["labels"]["nvidia.com/gpu.count"], "8");
  EXPECT_EQ(node["metadata"]["labels"]["nvidia.com/gpu.memory"], "81559");
  EXPECT_EQ(node["status"]["capacity"]["nvidia.com/gpu"], "8");
  EXPECT_EQ(node["status"]["allocatable"]["nvidia.com/gpu"], "8");
  EXPECT_EQ(node["status"]["nodeInfo"].size(), 10u);
  EXPECT_EQ(node["status"]["conditions"].back()["type"], "Ready");
  size_t size = node.dump().size();
  EXPECT_GT(size, 10000u);
  EXPECT_LT(size, 20000u);
  // Unknown-field check against the real Node schema: nothing unknown.
  auto set = LoadBuiltinSchemas(OpenApiDirFor(std::string(GG_SOURCE_DIR) + "/src/sim/data", "1.35"),
                                "1.35");
  ASSERT_TRUE(set.ok());
  auto unknown = set->UnknownFields(node, *set->Find("io.k8s.api.core.v1.Node"));
  EXPECT_TRUE(unknown.empty()) << unknown[0];
}

TEST(PopulationTest, PodsPdbsAndOwnership) {
  PopulationSpec spec;
  spec.nodes = 8;
  spec.pods_per_node = 4;
  auto objs = Generate(spec);
  std::map<std::string, std::string> uid_kind;
  std::vector<json> pods, pdbs;
  for (const auto& o : objs) {
    uid_kind[o["metadata"]["uid"]] = o["kind"];
    if (o["kind"] == "Pod") pods.push_back(o);
    if (o["kind"] == "PodDisruptionBudget") pdbs.push_back(o);
    // Owners are emitted before dependants.
    for (const auto& r : o["metadata"].value("ownerReferences", json::array()))
      EXPECT_EQ(uid_kind.count(r["uid"]), 1u) << o["metadata"]["name"];
  }
  ASSERT_FALSE(pdbs.empty());
  for (const auto& pdb : pdbs) {
    auto st = ComputePdbStatus(pdb, pods);
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(st->current_healthy, pdb["status"]["currentHealthy"]);
    EXPECT_EQ(st->desired_healthy, pdb["status"]["desiredHealthy"]);
    EXPECT_EQ(st->disruptions_allowed, pdb["status"]["disruptionsAllowed"]);
  }
  int gpu_pods = 0;
  for (const auto& p : pods)
    if (p["spec"]["containers"][0]["resources"]["requests"].contains("nvidia.com/gpu")) {
      ++gpu_pods;
      EXPECT_EQ(p["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"], "2");
      EXPECT_TRUE(p["spec"].contains("priorityClassName"));
    }
  EXPECT_EQ(gpu_pods, 8 * 4);
}

TEST(PopulationTest, ResourceSliceShapes) {
  json v1 = MakeResourceSlice("n1", 2, "NVIDIA-H100-80GB-HBM3", "1.35");
  EXPECT_EQ(v1["apiVersion"], "resource.k8s.io/v1");
  EXPECT_EQ(v1["spec"]["driver"], "gpu.nvidia.com");
  EXPECT_EQ(v1["spec"]["pool"]["name"], "n1");
  EXPECT_EQ(v1["spec"]["devices"][1]["attributes"]["uuid"]["string"], FakeGpuUuid("n1", 1));
  json b1 = MakeResourceSlice("n1", 2, "NVIDIA-H100-80GB-HBM3", "1.33");
  EXPECT_EQ(b1["apiVersion"], "resource.k8s.io/v1beta1");
  EXPECT_EQ(b1["spec"]["devices"][0]["basic"]["attributes"]["uuid"]["string"],
            FakeGpuUuid("n1", 0));
  auto set = LoadBuiltinSchemas(OpenApiDirFor(std::string(GG_SOURCE_DIR) + "/src/sim/data", "1.35"),
                                "1.35");
  ASSERT_TRUE(set.ok());
  auto name = set->NameForGvk("resource.k8s.io", "v1", "ResourceSlice");
  ASSERT_TRUE(name.has_value());
  EXPECT_TRUE(set->UnknownFields(v1, *set->Find(*name)).empty());
  EXPECT_TRUE(set->ValidateNamed(v1, *name).ok());
}

// A MIG-partitioned node publishes its MIG devices, not its GPUs, in NVIDIA's DRA driver's
// shape (name gpu-<i>-mig-<profile id>-<start>-<size>, type mig, uuid, parentUUID, profile),
// valid against the release's schema in both the v1beta1 and the v1 shape.
TEST(PopulationTest, MigResourceSliceShapes) {
  for (const std::string kube : {"1.33", "1.35"}) {
    SCOPED_TRACE(kube);
    json s = MakeResourceSlice("n1", 2, "NVIDIA-H100-80GB-HBM3", kube, 1, 3);
    const bool beta1 = kube == "1.33";
    ASSERT_EQ(s["spec"]["devices"].size(), 6u);
    const json& d = s["spec"]["devices"][4];  // GPU 1, second MIG device
    EXPECT_EQ(d["name"], "gpu-1-mig-19-1-1");
    const json& attrs = beta1 ? d["basic"]["attributes"] : d["attributes"];
    EXPECT_EQ(attrs["type"]["string"], "mig");
    EXPECT_EQ(attrs["parentUUID"]["string"], FakeGpuUuid("n1", 1));
    EXPECT_EQ(attrs["uuid"]["string"], FakeMigUuid(FakeGpuUuid("n1", 1), 2, 0));
    EXPECT_EQ(attrs["profile"]["string"], "1g.10gb");
    EXPECT_FALSE(attrs.contains("index"));
    const std::string version = beta1 ? "v1beta1" : "v1";
    auto set =
        LoadBuiltinSchemas(OpenApiDirFor(std::string(GG_SOURCE_DIR) + "/src/sim/data", kube), kube);
    ASSERT_TRUE(set.ok());
    auto name = set->NameForGvk("resource.k8s.io", version, "ResourceSlice");
    ASSERT_TRUE(name.has_value());
    EXPECT_TRUE(set->UnknownFields(s, *set->Find(*name)).empty());
    EXPECT_TRUE(set->ValidateNamed(s, *name).ok());
  }
  // The MIG UUID is the one the agent's fake NVML derives (pinned).
  EXPECT_EQ(FakeMigUuid("GPU-0123abcd-0000-1111-2222-333344445555", 3, 0),
            "MIG-0123abcd-0000-1111-2222-333344440300");
  EXPECT_EQ(MigLayout("NVIDIA-H200", 7).size(), 7u);
  EXPECT_EQ(MigLayout("NVIDIA-H200", 7)[6].profile, "1g.18gb");
  PopulationSpec bad;
  bad.mig_devices_per_gpu = 8;
  EXPECT_FALSE(GeneratePopulation(bad, [](json&&) { return OkStatus(); }).ok());
}

TEST(PopulationTest, BadSpecsAndSinkErrors) {
  PopulationSpec spec;
  spec.nodes = -1;
  EXPECT_FALSE(GeneratePopulation(spec, [](json&&) { return OkStatus(); }).ok());
  spec.nodes = 1;
  spec.gpus_per_node = 1000;
  EXPECT_FALSE(GeneratePopulation(spec, [](json&&) { return OkStatus(); }).ok());
  spec.gpus_per_node = 8;
  int n = 0;
  Status st = GeneratePopulation(
      spec, [&](json&&) { return ++n == 3 ? UnavailableError("full") : OkStatus(); });
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_EQ(n, 3);
  spec.pods_per_node = 0;
  spec.nodes = 0;
  EXPECT_TRUE(GeneratePopulation(spec, [](json&&) { return OkStatus(); }).ok());
  EXPECT_EQ(GpuMemoryMiB("NVIDIA-H200"), 143771);
  EXPECT_EQ(GpuMemoryMiB("mystery"), 0);
}

}  // namespace
}  // namespace gg::sim
