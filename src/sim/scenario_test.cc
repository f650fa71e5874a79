// Tests for scenario files (sim/scenario.h).
#include "sim/scenario.h"

#include <gtest/gtest.h>

#include <map>

namespace gg::sim {
namespace {

using nlohmann::json;

constexpr const char* kScenario = R"(
kubeVersion: "1.35"
dra: true
seed: 7
nodes:
  - name: gpu-a
    count: 2
    gpus: 8
    product: NVIDIA-H200
    labels: {zone: a}
  - name: gpu-b
    gpus: 4
    taints: [{key: maintenance, value: "true", effect: NoSchedule}]
workloads:
  - name: infer
    replicas: 3
    gpus: 4
    priorityClassName: high
    priority: 100000
    pdb: {minAvailable: 2}
  - name: train
    kind: Job
    replicas: 4
    gpus: 8
    nodes: [gpu-b]
  - name: agent
    kind: DaemonSet
    namespace: gpu-system
objects:
  - apiVersion: v1
    kind: ConfigMap
    metadata: {name: extra, namespace: ml}
)";

std::vector<json> Emit(const Scenario& s) {
  std::vector<json> out;
  Status st = EmitScenario(s, [&](json&& o) {
    out.push_back(std::move(o));
    return OkStatus();
  });
  EXPECT_TRUE(st.ok()) << st;
  return out;
}

TEST(ScenarioTest, ParsesAndEmitsInOrder) {
  auto s = ParseScenario(kScenario);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->kube_version, "1.35");
  EXPECT_TRUE(s->dra);
  EXPECT_EQ(s->seed, 7u);
  auto objs = Emit(*s);
  ASSERT_EQ(objs, Emit(*s));  // deterministic
  std::map<std::string, int> kinds;
  std::map<std::string, int> first;
  for (size_t i = 0; i < objs.size(); ++i) {
    std::string k = objs[i]["kind"];
    if (!kinds[k]++) first[k] = static_cast<int>(i);
  }
  EXPECT_EQ(kinds["Node"], 3);
  EXPECT_EQ(kinds["ResourceSlice"], 3);
  EXPECT_EQ(kinds["Deployment"], 1);
  EXPECT_EQ(kinds["ReplicaSet"], 1);
  EXPECT_EQ(kinds["Job"], 1);
  EXPECT_EQ(kinds["DaemonSet"], 1);
  EXPECT_EQ(kinds["PodDisruptionBudget"], 1);
  EXPECT_EQ(kinds["PriorityClass"], 1);
  EXPECT_EQ(kinds["ConfigMap"], 1);
  EXPECT_EQ(kinds["Pod"], 3 + 4 + 3);
  EXPECT_LT(first["Node"], first["Pod"]);
  EXPECT_LT(first["ReplicaSet"], first["Pod"]);
  // Placement: infer (4 GPUs) fits twice on each 8-GPU node; train (8 GPUs) only on gpu-b (4) ->
  // Pending.
  int pending = 0, on_b = 0;
  for (const auto& o : objs) {
    if (o["kind"] != "Pod") continue;
    if (o["status"]["phase"] == "Pending") {
      ++pending;
      EXPECT_FALSE(o["spec"].contains("nodeName"));
    } else if (o["spec"]["nodeName"] == "gpu-b") {
      ++on_b;
    }
  }
  EXPECT_EQ(pending, 4);
  EXPECT_EQ(on_b, 1);  // only the DaemonSet pod: gpu-b is tainted, train does not fit
  for (const auto& o : objs) {
    if (o["kind"] == "PodDisruptionBudget") {
      EXPECT_EQ(o["status"]["expectedPods"], 3);
      EXPECT_EQ(o["status"]["disruptionsAllowed"], 1);
    }
    if (o["kind"] == "Node" && o["metadata"]["name"] == "gpu-b") {
      EXPECT_EQ(o["spec"]["taints"][0]["key"], "maintenance");
      EXPECT_EQ(o["status"]["capacity"]["nvidia.com/gpu"], "4");
    }
    if (o["kind"] == "Node" && o["metadata"]["name"] == "gpu-a-1") {
      EXPECT_EQ(o["metadata"]["labels"]["zone"], "a");
      EXPECT_EQ(o["metadata"]["labels"]["nvidia.com/gpu.product"], "NVIDIA-H200");
    }
  }
}

TEST(ScenarioTest, PopulationBlock) {
  auto s = ParseScenario(
      "population: {nodes: 3, gpusPerNode: 4, podsPerNode: 1}\nkubeVersion: \"1.33\"\ndra: true\n");
  ASSERT_TRUE(s.ok()) << s.status();
  auto objs = Emit(*s);
  int nodes = 0, slices = 0;
  for (const auto& o : objs) {
    nodes += o["kind"] == "Node";
    if (o["kind"] == "ResourceSlice") {
      ++slices;
      EXPECT_EQ(o["apiVersion"], "resource.k8s.io/v1beta1");
    }
  }
  EXPECT_EQ(nodes, 3);
  EXPECT_EQ(slices, 3);
}

TEST(ScenarioTest, ErrorsCarryLineNumbers) {
  auto bad_yaml = ParseScenario("nodes:\n  - name: a\n    gpus: [1,\n");
  ASSERT_FALSE(bad_yaml.ok());
  EXPECT_NE(bad_yaml.status().message().find("scenario: yaml: line"), std::string::npos);
  auto unknown = ParseScenario("nodes:\n  - name: a\n    gpuz: 1\n");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(), "scenario line 3: unknown field \"gpuz\" in node");
  auto type = ParseScenario("nodes:\n  - name: a\n    gpus: many\n");
  ASSERT_FALSE(type.ok());
  EXPECT_EQ(type.status().message(), "scenario line 3: node.gpus must be an integer");
  EXPECT_FALSE(ParseScenario("nodes:\n  - gpus: 1\n").ok());
  EXPECT_FALSE(ParseScenario("nodes:\n  - name: Bad_Name\n").ok());
  EXPECT_FALSE(ParseScenario("kubeVersion: \"1.20\"\n").ok());
  EXPECT_FALSE(ParseScenario("workloads:\n  - name: w\n    nodes: [missing]\n").ok());
  EXPECT_FALSE(ParseScenario("workloads:\n  - name: w\n    kind: StatefulSet\n").ok());
  EXPECT_FALSE(
      ParseScenario("workloads:\n  - name: w\n    pdb: {minAvailable: 1, maxUnavailable: 1}\n")
          .ok());
  EXPECT_FALSE(
      ParseScenario("nodes:\n  - name: a\n    taints: [{key: k, effect: Sometimes}]\n").ok());
  EXPECT_FALSE(ParseScenario("nodes:\n  - name: a\n  - name: a\n").ok());
  EXPECT_FALSE(ParseScenario("").ok());
  EXPECT_FALSE(ParseScenario("- a\n- b\n").ok());
  EXPECT_FALSE(ParseScenario("objects:\n  - {kind: X}\n").ok());
  EXPECT_FALSE(LoadScenarioFile("/nonexistent/scenario.yaml").ok());
  auto dup = ParseScenario("seed: 1\nnodes:\n  - name: a\n    gpus: 1\n    gpus: 2\n");
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(std::string(dup.status().message()).find("line 5: duplicate key \"gpus\""),
            std::string::npos)
      << dup.status();
}

// Found by scenario_fuzz: with a repeated `nodes:` key the checks and the emitter could read
// different entries, and labels that are not a mapping threw. The parser refuses the repeated
// key; the emitter still refuses such labels (a Scenario can be built without the parser).
TEST(ScenarioTest, LabelsThatAreNotAMappingAreAnError) {
  for (const char* text : {"nodes:\n  - name: a\nnodes:\n  - name: b\n    labels: training}\n",
                           "workloads:\n  - name: w\nworkloads:\n  - name: v\n    labels: x\n"}) {
    auto s = ParseScenario(text);
    if (!s.ok()) {
      EXPECT_NE(std::string(s.status().message()).find("duplicate key"), std::string::npos)
          << s.status();
      continue;
    }
    Status st = EmitScenario(*s, [](json&&) { return OkStatus(); });
    EXPECT_FALSE(st.ok()) << text;
    EXPECT_NE(st.message().find("labels is not a mapping"), std::string::npos) << st;
  }
  for (const char* doc : {R"({"nodes":[{"name":"b","labels":"training}"}]})",
                          R"({"workloads":[{"name":"v","labels":"x"}]})"}) {
    Scenario built;
    built.doc = json::parse(doc);
    Status st = EmitScenario(built, [](json&&) { return OkStatus(); });
    EXPECT_NE(st.message().find("labels is not a mapping"), std::string::npos) << doc << ": " << st;
  }
}

}  // namespace
}  // namespace gg::sim
