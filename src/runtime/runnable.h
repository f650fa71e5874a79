// Lifecycle interfaces the Manager runs: Runnable (blocks until stopped), the leader
// election it campaigns with, and a function adapter.
#pragma once

#include <functional>
#include <stop_token>
#include <string>
#include <utility>

#include "common/status.h"

namespace gg::runtime {

class Runnable {
 public:
  virtual ~Runnable() = default;
  virtual std::string Name() const = 0;
  // Blocks until `stop` is requested (then returns OK promptly, < 5 s) or it fails (error).
  // Returning an error before stop ends the whole Manager with that error.
  virtual Status Run(std::stop_token stop) = 0;
  // True: started only once this process holds the lease. Defaults to true (safe side).
  virtual bool NeedsLeaderElection() const { return true; }
};

// Runnable from a function (informers, agents, anything with a Run loop).
class FuncRunnable final : public Runnable {
 public:
  FuncRunnable(std::string name, std::function<Status(std::stop_token)> fn,
               bool needs_leader_election)
      : name_(std::move(name)), fn_(std::move(fn)), needs_le_(needs_leader_election) {}
  std::string Name() const override { return name_; }
  Status Run(std::stop_token stop) override { return fn_(stop); }
  bool NeedsLeaderElection() const override { return needs_le_; }

 private:
  std::string name_;
  std::function<Status(std::stop_token)> fn_;
  bool needs_le_;
};

// Runnable for components with their own thread and Start()/Stop() (e.g. informers):
// Run() calls start, blocks until stop is requested, then calls stop.
class StartStopRunnable final : public Runnable {
 public:
  StartStopRunnable(std::string name, std::function<void()> start, std::function<void()> stop,
                    bool needs_leader_election)
      : name_(std::move(name)),
        start_(std::move(start)),
        stop_(std::move(stop)),
        needs_le_(needs_leader_election) {}
  std::string Name() const override { return name_; }
  Status Run(std::stop_token stop) override;
  bool NeedsLeaderElection() const override { return needs_le_; }

 private:
  std::string name_;
  std::function<void()> start_;
  std::function<void()> stop_;
  bool needs_le_;
};

// Campaigns for and holds a lease, as the Manager needs it. The Lease-based
// runtime::LeaderElector (runtime/leader_election.h) is adapted to it by
// NewLeaseLeaderElection() (runtime/manager.h); tests use fakes.
class LeaderElection {
 public:
  virtual ~LeaderElection() = default;
  // Blocks: campaigns until leader, then calls `on_started_leading(leading)` once (it must
  // return promptly; `leading` is stopped when leadership ends for any reason), then renews
  // until `stop` is requested or the lease is lost.
  // Returns OK after a clean stop (the lease released when held), or an error when the
  // lease was lost (or could never be campaigned for, e.g. a terminal API error).
  virtual Status Run(std::stop_token stop,
                     std::function<void(std::stop_token leading)> on_started_leading) = 0;
  virtual bool IsLeader() const = 0;
};

}  // namespace gg::runtime
