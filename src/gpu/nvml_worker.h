// NvmlWorker: runs NVML calls on ONE worker thread with a per-job deadline. A call that hangs
// in the driver makes the caller return kDeadlineExceeded ("NVML call X hung > 5s") and marks
// the worker degraded until the call comes back — a health signal, never a hung agent.
#pragma once

#include <chrono>
#include <memory>
#include <stop_token>
#include <string>
#include <utility>

#include "common/clock.h"
#include "gpu/nvml_api.h"

namespace gg::gpu {

// A unit of work for the worker. The worker keeps a shared_ptr to the job while it runs, so
// a job whose caller gave up (deadline) can still finish safely: results must live in the
// job object, never on the caller's stack.
class NvmlJob {
 public:
  virtual ~NvmlJob() = default;
  virtual void Run(NvmlApi& api) = 0;
};

class NvmlWorker {
 public:
  struct Options {
    // Wall time a job may take before the caller stops waiting. Real time on purpose: it
    // bounds a driver hang, which FakeClock cannot advance.
    std::chrono::milliseconds deadline{5000};
  };
  explicit NvmlWorker(NvmlApi& api) : NvmlWorker(api, Options{}) {}
  NvmlWorker(NvmlApi& api, Options options);
  ~NvmlWorker();  // stops the thread; a still-hung call is detached, not joined
  NvmlWorker(const NvmlWorker&) = delete;
  NvmlWorker& operator=(const NvmlWorker&) = delete;

  // Runs `job` on the worker and waits for it up to the deadline. kDeadlineExceeded when it
  // did not finish in time or when an earlier call is still hung (the job is then not run).
  NvmlReturn Run(std::shared_ptr<NvmlJob> job);

  // Convenience for one call: `fn(NvmlApi&, T*)` returning NvmlReturn; `fn` must capture by
  // value (it may outlive the caller when the call hangs). *out is written only on success.
  template <typename T, typename Fn>
  NvmlReturn Call(Fn fn, T* out);

  // True while a call is stuck past its deadline; hung_message() then says which
  // ("NVML call nvmlDeviceGetPcieReplayCounter hung > 5s").
  bool hung() const;
  std::string hung_message() const;
  // Calls that have exceeded the deadline since start (a counter for metrics).
  uint64_t deadline_exceeded_total() const;
  std::chrono::milliseconds deadline() const;

  // The NvmlApi the worker calls through: records the name of the NVML function in flight
  // (so hang messages name it) and forwards to the wrapped api. Jobs receive this one.
  NvmlApi& traced_api();

  // Waits until every worker thread of this process has exited (a destroyed worker's thread
  // lives on while its call hangs). The NvmlApi a worker calls must outlive that thread: a
  // test that releases a hung fake call waits here before the fake goes away.
  static bool WaitForAllThreadsToExit(std::chrono::milliseconds timeout);

 private:
  struct State;  // shared with the worker thread, which may outlive us while a call hangs
  std::shared_ptr<State> state_;
  std::stop_source stop_source_;
};

namespace internal {
template <typename T, typename Fn>
class CallJob final : public NvmlJob {
 public:
  explicit CallJob(Fn fn) : fn_(std::move(fn)) {}
  void Run(NvmlApi& api) override { result = fn_(api, &value); }
  NvmlReturn result = NvmlReturn::kUnknown;
  T value{};

 private:
  Fn fn_;
};
}  // namespace internal

template <typename T, typename Fn>
NvmlReturn NvmlWorker::Call(Fn fn, T* out) {
  auto job = std::make_shared<internal::CallJob<T, Fn>>(std::move(fn));
  NvmlReturn r = Run(job);
  if (r != NvmlReturn::kSuccess) return r;
  if (job->result == NvmlReturn::kSuccess && out != nullptr) *out = std::move(job->value);
  return job->result;
}

}  // namespace gg::gpu
