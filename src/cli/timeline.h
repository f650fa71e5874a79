// `kubectl gpu-guardian timeline`: a live, human-readable story of what happens to GPU nodes
// (report published → verdict → taint/cordon → each eviction → pods rescheduled → recovery),
// built from watches on GPUNodeHealths, Nodes, Pods and Events. At the end it prints the
// latencies it measured per node. Used by `make demo`; useful on a real cluster too.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <ostream>
#include <stop_token>
#include <string>
#include <vector>

#include "api/gpu_node_health.h"
#include "common/clock.h"
#include "k8s/objects.h"
#include "k8s/rest_client.h"

namespace gg::cli {

struct TimelineOptions {
  Duration duration = std::chrono::seconds(60);  // stop after this long
  // Stop early once every node that went bad has recovered and no drain is running
  // (only after at least one node went bad).
  bool until_recovered = false;
  bool color = false;
};

// Per-node milestones; times are when the watch delivered the change.
struct NodeMilestones {
  std::optional<WallTime> fault_observed;  // report observedAt of the first bad report
  std::optional<WallTime> report_seen;     // when that report reached us
  std::optional<WallTime> condition_false;
  std::optional<WallTime> tainted;
  std::optional<WallTime> cordoned;
  std::optional<WallTime> first_eviction;
  int evictions = 0;
  std::optional<WallTime> recovered;  // our taint removed / uncordoned / condition True again
};

class Timeline {
 public:
  Timeline(k8s::RestClient& client, Clock& clock, std::ostream& out, TimelineOptions options);
  // Runs until the duration passes, `stop` is requested, or (until_recovered) all recovered.
  Status Run(std::stop_token stop);
  // Measured milestones (after Run).
  std::map<std::string, NodeMilestones> Milestones() const;
  std::string Summary() const;

 private:
  void Print(const std::string& subject, const std::string& text, const char* color = nullptr);
  void OnReport(const std::string& node, const api::GpuNodeHealthStatus& report);
  void OnNode(const k8s::Node& node, bool deleted);
  void OnPod(const k8s::Pod& pod, bool deleted);
  void OnEvent(const k8s::Event& event);
  bool AllRecovered() const;

  k8s::RestClient& client_;
  Clock& clock_;
  std::ostream& out_;
  TimelineOptions options_;
  WallTime start_{};
  mutable std::mutex mu_;
  std::map<std::string, k8s::Node> nodes_;
  std::map<std::string, k8s::Pod> pods_;
  std::map<std::string, std::string> report_summary_;
  std::map<std::string, NodeMilestones> milestones_;
  std::map<std::string, std::string> pod_evicted_from_;  // pod key -> node
};

// One line describing what is wrong in a report ("" when nothing is).
std::string DescribeReport(const api::GpuNodeHealthStatus& report);

}  // namespace gg::cli
