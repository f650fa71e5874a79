// DrainRunner: runs at most one drain per node on its own thread, at most `max_running` at
// once, and tells the reconciler (by enqueuing the node) when one finishes. The reconciler
// stays level-based: it asks Ensure() on every pass while its record says "draining", reads
// the outcome with Result() (kept until Forget(), so a pass over a stale cache that still says
// "draining" does not start the drain again), and calls Forget() once its cache shows the
// recorded outcome. A restarted operator simply calls Ensure() again; the Drainer resumes
// from the world state.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/clock.h"
#include "common/log.h"
#include "remediation/drainer.h"

namespace gg::op {

// What the node reconciler needs from the drain runner (a fake in fakes.h for tests).
class DrainStarter {
 public:
  enum class Start { kStarted, kRunning, kFinished, kNoCapacity };
  virtual ~DrainStarter() = default;
  // Starts a drain for `node` unless one is running or a finished one was not forgotten.
  virtual Start Ensure(const std::string& node, const remediation::DrainJob& spec,
                       WallTime deadline) = 0;
  // The finished drain's result; nullopt while running or when none ran.
  virtual std::optional<remediation::DrainResult> Result(const std::string& node) const = 0;
  // Drops a finished drain (its outcome is recorded); a running one is left alone.
  virtual void Forget(const std::string& node) = 0;
  virtual bool Running(const std::string& node) const = 0;
  // Cancels a running drain (recovered, admin intervention, node gone); drops its result.
  virtual void Cancel(const std::string& node) = 0;
};

class DrainRunner final : public DrainStarter {
 public:
  DrainRunner(remediation::Drainer& drainer,
              std::function<void(const std::string& node)> on_finished, int max_running = 32,
              Logger log = Logger().WithName("drains"));
  ~DrainRunner();  // cancels and joins everything

  Start Ensure(const std::string& node, const remediation::DrainJob& spec,
               WallTime deadline) override;
  std::optional<remediation::DrainResult> Result(const std::string& node) const override;
  void Forget(const std::string& node) override;
  bool Running(const std::string& node) const override;
  void Cancel(const std::string& node) override;
  int RunningCount() const;
  void StopAll();

 private:
  struct Job {
    bool done = false;
    std::optional<remediation::DrainResult> result;
    std::jthread thread;  // last: joined before the fields it writes are destroyed
  };

  remediation::Drainer& drainer_;
  std::function<void(const std::string&)> on_finished_;
  int max_running_;
  Logger log_;
  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<Job>> jobs_;
};

}  // namespace gg::op
