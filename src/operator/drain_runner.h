// DrainRunner: runs at most one drain per node on a worker thread, at most `max_running` at
// once, and tells the reconciler (by enqueuing the node) when one finishes. The reconciler
// stays level-based: it asks Ensure() on every pass while its record says "draining", reads
// the outcome with Result() (kept until Forget(), so a pass over a stale cache that still says
// "draining" does not start the drain again), and calls Forget() once its cache shows the
// recorded outcome. A restarted operator simply calls Ensure() again; the Drainer resumes
// from the world state.
// PdbBudgets: the drainer's view of the PodDisruptionBudgets (a watch on policy/v1
// poddisruptionbudgets), so a refused eviction is retried when its budget allows again.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/log.h"
#include "k8s/rest_client.h"
#include "remediation/drainer.h"
#include "runtime/informer.h"

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
    std::string node;
    remediation::DrainJob spec;
    WallTime deadline;
    std::stop_source stop;
    bool started = false;
    bool done = false;
    std::optional<remediation::DrainResult> result;
  };
  // Drains run on worker threads that take queued jobs and end after kIdle without one: a
  // burst of fences starts a thread per drain running at once, not one per node ever fenced
  // (each new thread maps and faults in a stack and its TLS; 6 % of the operator's CPU in a
  // 1,000-fence burst).
  void Work(std::uint64_t id);
  void RunJob(Job& job);
  void ReapLocked();  // joins workers that ended

  remediation::Drainer& drainer_;
  std::function<void(const std::string&)> on_finished_;
  int max_running_;
  Logger log_;
  mutable std::mutex mu_;
  std::condition_variable cv_;  // a job queued or done, a worker ended, stopping
  std::map<std::string, std::unique_ptr<Job>> jobs_;
  std::deque<Job*> queue_;  // not started yet
  int running_ = 0;         // jobs not done (queued or draining)
  int idle_ = 0;            // workers waiting for a job
  int stopping_ = 0;        // StopAll calls in progress (they may overlap)
  std::uint64_t next_worker_ = 0;
  std::map<std::uint64_t, std::jthread> workers_;
  std::vector<std::uint64_t> ended_;  // workers that returned, to be joined
};

// Every budget in the cluster, projected to what the drainer reads (selector, allowed), kept
// by an informer. Until it has synced (or when RBAC forbids listing budgets) it cannot tell,
// and the drainer falls back to its retry timer.
class PdbBudgets final : public remediation::BudgetWatch {
 public:
  PdbBudgets(k8s::RestClient& client, Clock& clock, runtime::InformerOptions options = {});
  ~PdbBudgets() override;
  void Start() { informer_.Start(); }
  void Stop() { informer_.Stop(); }
  bool HasSynced() const { return informer_.HasSynced(); }

  std::optional<std::vector<remediation::BudgetState>> Covering(const k8s::Pod& pod) const override;
  std::uint64_t Subscribe(std::function<void(std::string_view ns)> fn) override;
  void Unsubscribe(std::uint64_t id) override;

 private:
  struct Budget {
    std::optional<k8s::LabelSelector> selector;  // null selects no pod (policy/v1)
    std::int32_t allowed = 0;
    std::uint64_t version = 0;
  };
  void OnChange(const k8s::PodDisruptionBudget& pdb);
  void OnDelete(const k8s::PodDisruptionBudget& pdb);

  runtime::Informer<k8s::PodDisruptionBudget> informer_;
  mutable std::mutex mu_;
  std::map<std::string, std::map<std::string, Budget>> by_ns_;  // namespace -> name -> budget
  std::uint64_t version_ = 0;
  std::mutex subs_mu_;  // held while subscribers run: Unsubscribe waits for them
  std::map<std::uint64_t, std::function<void(std::string_view)>> subs_;
  std::uint64_t next_sub_ = 0;
};

}  // namespace gg::op
