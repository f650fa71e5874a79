// NvmlWorker: one thread for NVML calls, a deadline per job, and hang detection.
#include "gpu/nvml_worker.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace gg::gpu {
namespace {

// Forwards every call to the wrapped api after noting the NVML function name in flight.
class TracedNvml final : public NvmlApi {
 public:
  TracedNvml(NvmlApi& api, std::atomic<const char*>& current) : api_(api), current_(current) {}

#define GG_TRACE(name, call)                       \
  current_.store(name, std::memory_order_relaxed); \
  return api_.call;

  NvmlReturn Init() override { GG_TRACE("nvmlInit_v2", Init()); }
  NvmlReturn Shutdown() override { GG_TRACE("nvmlShutdown", Shutdown()); }
  std::string LoadError() const override { return api_.LoadError(); }
  std::string ErrorString(NvmlReturn r) override { return api_.ErrorString(r); }
  NvmlReturn SystemGetDriverVersion(std::string* v) override {
    GG_TRACE("nvmlSystemGetDriverVersion", SystemGetDriverVersion(v));
  }
  NvmlReturn DeviceGetCount(unsigned* c) override {
    GG_TRACE("nvmlDeviceGetCount_v2", DeviceGetCount(c));
  }
  NvmlReturn DeviceGetHandleByIndex(unsigned i, DeviceHandle* d) override {
    GG_TRACE("nvmlDeviceGetHandleByIndex_v2", DeviceGetHandleByIndex(i, d));
  }
  NvmlReturn DeviceGetName(DeviceHandle d, std::string* s) override {
    GG_TRACE("nvmlDeviceGetName", DeviceGetName(d, s));
  }
  NvmlReturn DeviceGetUuid(DeviceHandle d, std::string* s) override {
    GG_TRACE("nvmlDeviceGetUUID", DeviceGetUuid(d, s));
  }
  NvmlReturn DeviceGetSerial(DeviceHandle d, std::string* s) override {
    GG_TRACE("nvmlDeviceGetSerial", DeviceGetSerial(d, s));
  }
  NvmlReturn DeviceGetPciInfo(DeviceHandle d, PciInfo* p) override {
    GG_TRACE("nvmlDeviceGetPciInfo_v3", DeviceGetPciInfo(d, p));
  }
  NvmlReturn DeviceGetMigMode(DeviceHandle d, bool* c, bool* p) override {
    GG_TRACE("nvmlDeviceGetMigMode", DeviceGetMigMode(d, c, p));
  }
  NvmlReturn DeviceGetMaxMigDeviceCount(DeviceHandle d, unsigned* c) override {
    GG_TRACE("nvmlDeviceGetMaxMigDeviceCount", DeviceGetMaxMigDeviceCount(d, c));
  }
  NvmlReturn DeviceGetMigDeviceHandleByIndex(DeviceHandle d, unsigned i, DeviceHandle* m) override {
    GG_TRACE("nvmlDeviceGetMigDeviceHandleByIndex", DeviceGetMigDeviceHandleByIndex(d, i, m));
  }
  NvmlReturn DeviceGetGpuInstanceId(DeviceHandle m, unsigned* id) override {
    GG_TRACE("nvmlDeviceGetGpuInstanceId", DeviceGetGpuInstanceId(m, id));
  }
  NvmlReturn DeviceGetComputeInstanceId(DeviceHandle m, unsigned* id) override {
    GG_TRACE("nvmlDeviceGetComputeInstanceId", DeviceGetComputeInstanceId(m, id));
  }
  NvmlReturn DeviceGetMemoryTotal(DeviceHandle d, uint64_t* b) override {
    GG_TRACE("nvmlDeviceGetMemoryInfo", DeviceGetMemoryTotal(d, b));
  }
  NvmlReturn DeviceGetTemperature(DeviceHandle d, int* c) override {
    GG_TRACE("nvmlDeviceGetTemperature", DeviceGetTemperature(d, c));
  }
  NvmlReturn DeviceGetTemperatureThreshold(DeviceHandle d, TemperatureThreshold w,
                                           int* c) override {
    GG_TRACE("nvmlDeviceGetTemperatureThreshold", DeviceGetTemperatureThreshold(d, w, c));
  }
  NvmlReturn DeviceGetCurrentClocksEventReasons(DeviceHandle d, uint64_t* r) override {
    GG_TRACE("nvmlDeviceGetCurrentClocksEventReasons", DeviceGetCurrentClocksEventReasons(d, r));
  }
  NvmlReturn DeviceGetSupportedClocksEventReasons(DeviceHandle d, uint64_t* r) override {
    GG_TRACE("nvmlDeviceGetSupportedClocksEventReasons",
             DeviceGetSupportedClocksEventReasons(d, r));
  }
  NvmlReturn DeviceGetViolationStatus(DeviceHandle d, PerfPolicy p, ViolationTime* o) override {
    GG_TRACE("nvmlDeviceGetViolationStatus", DeviceGetViolationStatus(d, p, o));
  }
  NvmlReturn DeviceGetPowerUsage(DeviceHandle d, unsigned* m) override {
    GG_TRACE("nvmlDeviceGetPowerUsage", DeviceGetPowerUsage(d, m));
  }
  NvmlReturn DeviceGetEnforcedPowerLimit(DeviceHandle d, unsigned* m) override {
    GG_TRACE("nvmlDeviceGetEnforcedPowerLimit", DeviceGetEnforcedPowerLimit(d, m));
  }
  NvmlReturn DeviceGetEccMode(DeviceHandle d, bool* c, bool* p) override {
    GG_TRACE("nvmlDeviceGetEccMode", DeviceGetEccMode(d, c, p));
  }
  NvmlReturn DeviceGetTotalEccErrors(DeviceHandle d, EccErrorType t, EccCounterType c,
                                     uint64_t* n) override {
    GG_TRACE("nvmlDeviceGetTotalEccErrors", DeviceGetTotalEccErrors(d, t, c, n));
  }
  NvmlReturn DeviceGetRemappedRows(DeviceHandle d, RemappedRows* r) override {
    GG_TRACE("nvmlDeviceGetRemappedRows", DeviceGetRemappedRows(d, r));
  }
  NvmlReturn DeviceGetRetiredPagesCount(DeviceHandle d, RetirementCause c, unsigned* n) override {
    GG_TRACE("nvmlDeviceGetRetiredPages", DeviceGetRetiredPagesCount(d, c, n));
  }
  NvmlReturn DeviceGetRetiredPagesPendingStatus(DeviceHandle d, bool* p) override {
    GG_TRACE("nvmlDeviceGetRetiredPagesPendingStatus", DeviceGetRetiredPagesPendingStatus(d, p));
  }
  NvmlReturn DeviceGetPcieReplayCounter(DeviceHandle d, unsigned* v) override {
    GG_TRACE("nvmlDeviceGetPcieReplayCounter", DeviceGetPcieReplayCounter(d, v));
  }
  NvmlReturn DeviceGetNvLinkState(DeviceHandle d, unsigned l, bool* a) override {
    GG_TRACE("nvmlDeviceGetNvLinkState", DeviceGetNvLinkState(d, l, a));
  }
  NvmlReturn DeviceGetNvLinkErrorCounter(DeviceHandle d, unsigned l, NvLinkErrorCounter c,
                                         uint64_t* v) override {
    GG_TRACE("nvmlDeviceGetNvLinkErrorCounter", DeviceGetNvLinkErrorCounter(d, l, c, v));
  }
  NvmlReturn DeviceGetFieldValues(DeviceHandle d, std::span<FieldValue> v) override {
    GG_TRACE("nvmlDeviceGetFieldValues", DeviceGetFieldValues(d, v));
  }
  NvmlReturn EventSetCreate(EventSetHandle* s) override {
    GG_TRACE("nvmlEventSetCreate", EventSetCreate(s));
  }
  NvmlReturn DeviceGetSupportedEventTypes(DeviceHandle d, uint64_t* m) override {
    GG_TRACE("nvmlDeviceGetSupportedEventTypes", DeviceGetSupportedEventTypes(d, m));
  }
  NvmlReturn DeviceRegisterEvents(DeviceHandle d, uint64_t m, EventSetHandle s) override {
    GG_TRACE("nvmlDeviceRegisterEvents", DeviceRegisterEvents(d, m, s));
  }
  NvmlReturn EventSetWait(EventSetHandle s, unsigned t, EventData* d) override {
    GG_TRACE("nvmlEventSetWait_v2", EventSetWait(s, t, d));
  }
  NvmlReturn EventSetFree(EventSetHandle s) override {
    GG_TRACE("nvmlEventSetFree", EventSetFree(s));
  }
#undef GG_TRACE

 private:
  NvmlApi& api_;
  std::atomic<const char*>& current_;
};

std::string FormatDeadline(std::chrono::milliseconds d) {
  if (d.count() % 1000 == 0) return std::to_string(d.count() / 1000) + "s";
  return std::to_string(d.count()) + "ms";
}

// Worker threads alive in this process (see WaitForAllThreadsToExit).
std::mutex g_threads_mu;
std::condition_variable g_threads_cv;
int g_threads = 0;

}  // namespace

struct NvmlWorker::State {
  State(NvmlApi& api, Options o) : options(o), traced(api, current_call) {}
  Options options;
  std::atomic<const char*> current_call{nullptr};
  TracedNvml traced;
  std::atomic<bool> hung{false};
  std::atomic<uint64_t> deadline_exceeded{0};

  struct Slot {
    std::shared_ptr<NvmlJob> job;
    bool started = false;
    bool done = false;
  };
  std::mutex mu;
  std::condition_variable_any cv;
  std::deque<std::shared_ptr<Slot>> queue;
  std::shared_ptr<Slot> running;
  std::string hung_call;  // name of the call that hung (under mu)
  bool stopping = false;

  void Loop(std::stop_token stop) {
    std::unique_lock lock(mu);
    while (true) {
      cv.wait(lock, stop, [&] { return !queue.empty(); });
      if (stop.stop_requested()) return;
      std::shared_ptr<Slot> slot = std::move(queue.front());
      queue.pop_front();
      slot->started = true;
      running = slot;
      lock.unlock();
      slot->job->Run(traced);
      lock.lock();
      current_call.store(nullptr, std::memory_order_relaxed);
      slot->done = true;
      running.reset();
      // The call came back: no longer hung (the next call starts with a clean slate).
      hung.store(false, std::memory_order_release);
      hung_call.clear();
      cv.notify_all();
    }
  }
};

NvmlWorker::NvmlWorker(NvmlApi& api, Options options)
    : state_(std::make_shared<State>(api, options)) {
  // The thread owns a reference to the state so a hung call can finish after we are gone.
  {
    std::scoped_lock lock(g_threads_mu);
    ++g_threads;
  }
  std::thread([state = state_, stop = stop_source_.get_token()] {
    state->Loop(stop);
    std::scoped_lock lock(g_threads_mu);
    --g_threads;
    g_threads_cv.notify_all();
  }).detach();
}

NvmlWorker::~NvmlWorker() {
  {
    std::scoped_lock lock(state_->mu);
    state_->stopping = true;
  }
  stop_source_.request_stop();
  state_->cv.notify_all();
  // Detached thread: exits at once when idle, or when a hung call finally returns.
}

bool NvmlWorker::WaitForAllThreadsToExit(std::chrono::milliseconds timeout) {
  std::unique_lock lock(g_threads_mu);
  return g_threads_cv.wait_for(lock, timeout, [] { return g_threads == 0; });
}

NvmlReturn NvmlWorker::Run(std::shared_ptr<NvmlJob> job) {
  State& s = *state_;
  auto slot = std::make_shared<State::Slot>();
  slot->job = std::move(job);
  std::unique_lock lock(s.mu);
  if (s.hung.load(std::memory_order_acquire)) {
    s.deadline_exceeded.fetch_add(1);
    return NvmlReturn::kDeadlineExceeded;  // don't queue behind a stuck call
  }
  s.queue.push_back(slot);
  s.cv.notify_all();
  const auto deadline = std::chrono::steady_clock::now() + s.options.deadline;
  while (!slot->done) {
    if (s.cv.wait_until(lock, deadline) == std::cv_status::timeout && !slot->done) break;
  }
  if (slot->done) return NvmlReturn::kSuccess;
  s.deadline_exceeded.fetch_add(1);
  if (!slot->started) {
    // Another caller's job is holding the worker; drop ours.
    for (auto it = s.queue.begin(); it != s.queue.end(); ++it) {
      if (*it == slot) {
        s.queue.erase(it);
        break;
      }
    }
    return NvmlReturn::kDeadlineExceeded;
  }
  const char* call = s.current_call.load(std::memory_order_relaxed);
  s.hung_call = call ? call : "(unknown)";
  s.hung.store(true, std::memory_order_release);
  return NvmlReturn::kDeadlineExceeded;
}

bool NvmlWorker::hung() const { return state_->hung.load(std::memory_order_acquire); }

std::string NvmlWorker::hung_message() const {
  std::scoped_lock lock(state_->mu);
  if (!state_->hung.load()) return {};
  return "NVML call " + state_->hung_call + " hung > " + FormatDeadline(state_->options.deadline);
}

uint64_t NvmlWorker::deadline_exceeded_total() const { return state_->deadline_exceeded.load(); }

std::chrono::milliseconds NvmlWorker::deadline() const { return state_->options.deadline; }

NvmlApi& NvmlWorker::traced_api() { return state_->traced; }

}  // namespace gg::gpu
