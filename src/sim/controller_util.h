// Internal helpers shared by the simulated cluster's control loops (kubelet, scheduler,
// disruption and workload controllers): an in-process store watch and small JSON readers.
#pragma once

#include <chrono>
#include <deque>
#include <initializer_list>
#include <memory>
#include <string>

#include "sim/api.h"

namespace gg::sim::internal {

using SteadyTime = std::chrono::steady_clock::time_point;

inline constexpr auto kPoll = std::chrono::milliseconds(50);

// An in-process watch that restarts (with a fresh initial state) if it overflows.
class StoreWatch {
 public:
  StoreWatch(Store& store, std::string storage) : store_(store), storage_(std::move(storage)) {
    Restart();
  }
  ~StoreWatch() { store_.StopWatch(w_); }
  void Pop(std::deque<WatchEvent>& out, std::chrono::milliseconds wait) {
    if (!w_->Pop(out, wait)) {
      store_.StopWatch(w_);
      Restart();
    }
  }

 private:
  void Restart() {
    w_ = store_.StartWatch(storage_, "", LabelSelector(), FieldSelector(), std::nullopt).watcher;
  }
  Store& store_;
  std::string storage_;
  std::shared_ptr<Watcher> w_;
};

// The string at path, or "" when absent or not a string.
std::string Str(const nlohmann::json& j, std::initializer_list<const char*> path);

// What the scheduler and the DaemonSet controller need of a node.
struct NodeInfo {
  long gpus = 0;
  bool schedulable = true;
  nlohmann::json node;  // labels + spec (taints) for matching
};

bool NodeSelectorMatches(const nlohmann::json& pod_spec, const nlohmann::json& node);
NodeInfo MakeNodeInfo(const nlohmann::json& n);
bool PodActive(const nlohmann::json& p);
std::string ControllerUid(const nlohmann::json& p);

}  // namespace gg::sim::internal
