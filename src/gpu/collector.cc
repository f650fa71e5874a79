// Collector: NVML sweeps through one deadline-guarded worker job, plus the event thread.
#include "gpu/collector.h"

#include <algorithm>

namespace gg::gpu {

// Which calls a GPU answered; a NOT_SUPPORTED answer turns the call off for later sweeps.
struct DeviceSupport {
  bool temperature = true;
  bool clocks = true;
  bool power = true;
  bool power_limit = true;
  bool ecc_mode = true;
  bool ecc_totals = true;
  bool remap = true;
  bool retired = true;
  bool pcie = true;
  bool recovery_field = true;
  bool violation = true;
  int nvlink_links = -1;  // -1: not probed yet
};

// One GPU's values from one job. Trivially copyable: copied into last_ without allocating.
struct Collector::Reading {
  bool valid = false;  // at least one sweep completed
  bool lost = false;
  std::optional<int> temperature_c;
  uint64_t clock_mask = 0;
  std::optional<unsigned> power_mw;
  std::optional<unsigned> power_limit_mw;
  bool ecc_enabled = false;
  std::optional<uint64_t> ecc[4];  // corr vol, unc vol, corr agg, unc agg
  std::optional<RemappedRows> remap;
  std::optional<unsigned> retired_sbe;
  std::optional<unsigned> retired_dbe;
  bool retired_pending = false;
  std::optional<unsigned> pcie_replay;
  std::optional<int> links_total;
  std::optional<int> links_down;
  std::optional<uint64_t> nvlink_errors;
  std::optional<int> recovery_action;
  std::array<std::optional<uint64_t>, 6> violation_ns{};
};

struct Collector::Device {
  GpuIdentity id;
  DeviceHandle handle;
  std::optional<int> slowdown_c;
  std::optional<int> shutdown_c;
  bool mig_enabled = false;
  std::optional<bool> mig_pending;
  std::vector<api::MigDevice> mig_devices;  // read at identification (MIG layout)
  DeviceSupport support;
};

struct Collector::SweepJob final : NvmlJob {
  std::vector<DeviceHandle> handles;
  std::vector<DeviceSupport> support;
  std::vector<Reading> readings;
  bool slow = false;
  unsigned count = 0;
  NvmlReturn count_result = NvmlReturn::kSuccess;
  std::atomic<int> current{-1};

  void Run(NvmlApi& api) override {
    count_result = api.DeviceGetCount(&count);
    for (size_t i = 0; i < handles.size(); ++i) {
      current.store(static_cast<int>(i), std::memory_order_relaxed);
      ReadOne(api, handles[i], support[i], readings[i]);
    }
    current.store(-1, std::memory_order_relaxed);
  }

  // Returns false when the GPU is lost (stop reading it).
  static bool Check(NvmlReturn r, bool* supported, Reading& out) {
    if (r == NvmlReturn::kGpuIsLost) {
      out.lost = true;
      return false;
    }
    if (r == NvmlReturn::kNotSupported || r == NvmlReturn::kFunctionNotFound) *supported = false;
    return true;
  }

  // One GPU, one sweep: the cheap counters every sweep, the expensive or slowly-changing ones
  // on the slow cadence. A call that says the GPU is lost stops the reading (out.lost).
  void ReadOne(NvmlApi& api, DeviceHandle h, DeviceSupport& s, Reading& out) const {
    out.valid = true;
    out.lost = false;
    if (!ReadFast(api, h, s, out) || !ReadEcc(api, h, s, out) ||
        !ReadRemapAndRecovery(api, h, s, out)) {
      return;
    }
    if (!slow) return;
    // --- slow cadence: expensive or slowly-changing counters ---
    if (!ReadSlowCounters(api, h, s, out) || !ReadNvLink(api, h, s, out)) return;
    ReadViolations(api, h, s, out);
  }

  // Temperature, clock-event reasons, power. False when the GPU is lost.
  bool ReadFast(NvmlApi& api, DeviceHandle h, DeviceSupport& s, Reading& out) const {
    NvmlReturn r;
    if (s.temperature) {
      int t = 0;
      r = api.DeviceGetTemperature(h, &t);
      if (!Check(r, &s.temperature, out)) return false;
      out.temperature_c = r == NvmlReturn::kSuccess ? std::optional<int>(t) : std::nullopt;
    }
    if (s.clocks) {
      uint64_t m = 0;
      r = api.DeviceGetCurrentClocksEventReasons(h, &m);
      if (!Check(r, &s.clocks, out)) return false;
      if (r == NvmlReturn::kSuccess) out.clock_mask = m;
    }
    if (s.power) {
      unsigned mw = 0;
      r = api.DeviceGetPowerUsage(h, &mw);
      if (!Check(r, &s.power, out)) return false;
      out.power_mw = r == NvmlReturn::kSuccess ? std::optional<unsigned>(mw) : std::nullopt;
    }
    return true;
  }

  // ECC mode (slow cadence, or until enabled) and the four ECC totals. False when the GPU is lost.
  bool ReadEcc(NvmlApi& api, DeviceHandle h, DeviceSupport& s, Reading& out) const {
    NvmlReturn r;
    if (s.ecc_mode && (slow || !out.ecc_enabled)) {
      // The ECC mode changes only across a reboot; re-read it on the slow cadence.
      bool cur = false, pending = false;
      r = api.DeviceGetEccMode(h, &cur, &pending);
      if (!Check(r, &s.ecc_mode, out)) return false;
      out.ecc_enabled = r == NvmlReturn::kSuccess && cur;
    }
    if (s.ecc_totals && out.ecc_enabled) {
      static constexpr EccErrorType kTypes[4] = {
          EccErrorType::kCorrected, EccErrorType::kUncorrected, EccErrorType::kCorrected,
          EccErrorType::kUncorrected};
      static constexpr EccCounterType kCounters[4] = {
          EccCounterType::kVolatile, EccCounterType::kVolatile, EccCounterType::kAggregate,
          EccCounterType::kAggregate};
      for (int k = 0; k < 4; ++k) {
        uint64_t v = 0;
        r = api.DeviceGetTotalEccErrors(h, kTypes[k], kCounters[k], &v);
        if (!Check(r, &s.ecc_totals, out)) return false;
        out.ecc[k] = r == NvmlReturn::kSuccess ? std::optional<uint64_t>(v) : std::nullopt;
      }
    }
    return true;
  }

  // Remapped rows and the driver's recovery action (field 230). False when the GPU is lost.
  bool ReadRemapAndRecovery(NvmlApi& api, DeviceHandle h, DeviceSupport& s, Reading& out) const {
    NvmlReturn r;
    if (s.remap) {
      RemappedRows rows;
      r = api.DeviceGetRemappedRows(h, &rows);
      if (!Check(r, &s.remap, out)) return false;
      // NOT_SUPPORTED under MIG with active instances: keep the last value.
      if (r == NvmlReturn::kSuccess) out.remap = rows;
    }
    if (s.recovery_field) {
      FieldValue f;
      f.field_id = kFieldGpuRecoveryAction;
      r = api.DeviceGetFieldValues(h, std::span<FieldValue>(&f, 1));
      if (!Check(r, &s.recovery_field, out)) return false;
      if (r == NvmlReturn::kSuccess && f.result == NvmlReturn::kSuccess) {
        out.recovery_action = static_cast<int>(f.u64);
      } else if (r == NvmlReturn::kSuccess) {
        if (f.result == NvmlReturn::kGpuIsLost) {
          out.lost = true;
          return false;
        }
        s.recovery_field = false;  // field unknown to this driver
      }
    }
    return true;
  }

  // Power limit, PCIe replays (~172 µs on an H200), retired pages. False when the GPU is lost.
  bool ReadSlowCounters(NvmlApi& api, DeviceHandle h, DeviceSupport& s, Reading& out) const {
    NvmlReturn r;
    if (s.power_limit) {
      unsigned mw = 0;
      r = api.DeviceGetEnforcedPowerLimit(h, &mw);
      if (!Check(r, &s.power_limit, out)) return false;
      out.power_limit_mw = r == NvmlReturn::kSuccess ? std::optional<unsigned>(mw) : std::nullopt;
    }
    if (s.pcie) {
      unsigned v = 0;
      r = api.DeviceGetPcieReplayCounter(h, &v);  // ~172 µs on an H200: slow cadence only
      if (!Check(r, &s.pcie, out)) return false;
      if (r == NvmlReturn::kSuccess) out.pcie_replay = v;
    }
    if (s.retired) {
      unsigned sbe = 0, dbe = 0;
      bool pending = false;
      r = api.DeviceGetRetiredPagesCount(h, RetirementCause::kMultipleSingleBit, &sbe);
      if (!Check(r, &s.retired, out)) return false;
      if (r == NvmlReturn::kSuccess) {
        out.retired_sbe = sbe;
        if (api.DeviceGetRetiredPagesCount(h, RetirementCause::kDoubleBit, &dbe) ==
            NvmlReturn::kSuccess)
          out.retired_dbe = dbe;
        if (api.DeviceGetRetiredPagesPendingStatus(h, &pending) == NvmlReturn::kSuccess)
          out.retired_pending = pending;
      }
    }
    return true;
  }

  // NVLink state and error counters (stops at the first missing link). False when the GPU is lost.
  bool ReadNvLink(NvmlApi& api, DeviceHandle h, DeviceSupport& s, Reading& out) const {
    NvmlReturn r;
    if (s.nvlink_links != 0) {
      constexpr unsigned kMaxLinks = 36;  // NVML_NVLINK_MAX_LINKS (13.1+); stop at first gap
      const unsigned limit = s.nvlink_links < 0 ? kMaxLinks : static_cast<unsigned>(s.nvlink_links);
      int total = 0, down = 0;
      uint64_t errors = 0;
      for (unsigned link = 0; link < limit; ++link) {
        bool active = false;
        r = api.DeviceGetNvLinkState(h, link, &active);
        if (r == NvmlReturn::kGpuIsLost) {
          out.lost = true;
          return false;
        }
        if (r != NvmlReturn::kSuccess) break;
        ++total;
        if (!active) ++down;
        static constexpr NvLinkErrorCounter kCounters[3] = {NvLinkErrorCounter::kDlCrcFlit,
                                                            NvLinkErrorCounter::kDlReplay,
                                                            NvLinkErrorCounter::kDlRecovery};
        for (NvLinkErrorCounter c : kCounters) {
          uint64_t v = 0;
          if (api.DeviceGetNvLinkErrorCounter(h, link, c, &v) == NvmlReturn::kSuccess) errors += v;
        }
      }
      s.nvlink_links = total;
      if (total > 0) {
        out.links_total = total;
        out.links_down = down;
        out.nvlink_errors = errors;
      }
    }
    return true;
  }

  // Throttle violation times per perf policy. False when the GPU is lost.
  bool ReadViolations(NvmlApi& api, DeviceHandle h, DeviceSupport& s, Reading& out) const {
    NvmlReturn r;
    if (s.violation) {
      for (int p = 0; p < 6; ++p) {
        ViolationTime vt;
        r = api.DeviceGetViolationStatus(h, static_cast<PerfPolicy>(p), &vt);
        if (r == NvmlReturn::kGpuIsLost) {
          out.lost = true;
          return false;
        }
        if (r == NvmlReturn::kFunctionNotFound || (p == 0 && r == NvmlReturn::kNotSupported)) {
          s.violation = false;
          break;
        }
        out.violation_ns[static_cast<size_t>(p)] =
            r == NvmlReturn::kSuccess ? std::optional<uint64_t>(vt.violation_time_ns)
                                      : std::nullopt;
      }
    }
    return true;
  }
};

std::string_view GpuEventKindName(GpuEvent::Kind k) {
  switch (k) {
    case GpuEvent::Kind::kXid:
      return "Xid";
    case GpuEvent::Kind::kSingleBitEcc:
      return "SingleBitEcc";
    case GpuEvent::Kind::kDoubleBitEcc:
      return "DoubleBitEcc";
    case GpuEvent::Kind::kEccStorm:
      return "SingleBitEccStorm";
    case GpuEvent::Kind::kDramRetirement:
      return "DramRetirement";
    case GpuEvent::Kind::kDramRetirementFailure:
      return "DramRetirementFailure";
    case GpuEvent::Kind::kPoison:
      return "Poison";
    case GpuEvent::Kind::kGpuUnavailable:
      return "GpuUnavailable";
    case GpuEvent::Kind::kRecoveryAction:
      return "GpuRecoveryAction";
    case GpuEvent::Kind::kGpuLost:
      return "GpuLost";
    case GpuEvent::Kind::kOther:
      return "Other";
  }
  return "Other";
}

namespace {

constexpr size_t kMaxReportMessage = 256;

std::string NormalizePci(std::string_view nvml_form) {
  uint32_t d = 0, b = 0, dev = 0, f = 0;
  if (!ParsePciBusId(nvml_form, &d, &b, &dev, &f)) return std::string(nvml_form);
  return FormatPciBusId(d, b, dev, f);
}

void SetThrottleNames(uint64_t mask, std::vector<std::string>& names) {
  names.clear();
  for (uint64_t bit = 1; bit != 0 && bit <= mask; bit <<= 1) {
    if ((mask & bit) == 0) continue;
    std::string_view n = ClockEventReasonName(bit);
    if (!n.empty()) names.emplace_back(n);
  }
}

template <typename T>
void AssignIfChanged(std::string& dst, const T& src) {
  if (dst != src) dst = src;
}

}  // namespace

std::optional<api::XidEvent> ToXidEvent(const GpuEvent& e, const XidClassifier& classifier) {
  if (e.kind != GpuEvent::Kind::kXid) return std::nullopt;
  XidClassification c = classifier.Classify(e.xid, e.recovery_action);
  api::XidEvent x;
  x.xid = e.xid;
  x.gpu_uuid = e.gpu_uuid;
  x.pci_bus_id = NormalizePci(e.pci_bus_id);
  x.count = 1;
  x.first_seen = e.at;
  x.last_seen = e.at;
  x.category = std::string(c.category);
  x.recommended_action = std::string(c.action_name);
  x.message = "NVML XidCriticalError event";
  if (e.gpu_instance_id != kNoInstanceId) x.gpu_instance = e.gpu_instance_id;
  if (e.compute_instance_id != kNoInstanceId) x.compute_instance = e.compute_instance_id;
  if (e.recovery_action)
    x.message += "; recovery action " + RecoveryActionName(static_cast<int>(*e.recovery_action));
  return x;
}

api::XidEvent ToXidEvent(const KmsgXid& k, std::string_view gpu_uuid, WallTime at, int64_t count,
                         const XidClassifier& classifier) {
  XidClassification c;
  if (k.sxid) {
    c = classifier.ClassifySxid(k.xid, k.fatal);
  } else {
    std::optional<RecoveryAction> rec;
    if (k.xid == 154) rec = ParseRecoveryActionChange(k.message);
    c = classifier.Classify(k.xid, rec);
  }
  api::XidEvent x;
  x.xid = k.xid;
  x.sxid = k.sxid;
  x.gpu_uuid = std::string(gpu_uuid);
  x.pci_bus_id = k.pci_bus_id;
  x.count = count;
  x.first_seen = at;
  x.last_seen = at;
  x.category = std::string(c.category);
  x.recommended_action = std::string(c.action_name);
  x.message = k.message.substr(0, kMaxReportMessage);
  x.gpu_instance = k.gpu_instance;
  x.compute_instance = k.compute_instance;
  return x;
}

Collector::Collector(NvmlApi& api, Clock& clock, CollectorOptions options)
    : api_(api),
      clock_(clock),
      options_(std::move(options)),
      worker_(std::make_unique<NvmlWorker>(api, NvmlWorker::Options{options_.call_deadline})) {
  source_.name = options_.source_name;
  source_.state = api::SourceState::kUnavailable;
  source_.message = "not initialized";
  if (options_.slow_every_sweeps < 1) options_.slow_every_sweeps = 1;
}

Collector::~Collector() {
  StopEvents();
  if (initialized_.load() && !worker_->hung())
    (void)worker_->Call<int>([](NvmlApi& a, int*) { return a.Shutdown(); }, nullptr);
}

void Collector::SetSource(api::SourceState state, std::string message) {
  std::scoped_lock lock(mu_);
  source_.state = state;
  source_.message = std::move(message);
}

// The MIG devices of a MIG-enabled GPU, by slot: UUID, GPU-/compute-instance ids (the ids
// kernel and NVML Xids carry), the profile from the MIG device's name ("<product> MIG 1g.18gb")
// and its memory. Unprivileged calls only; a slot that fails to answer is skipped.
static std::vector<api::MigDevice> ReadMigDevices(NvmlApi& a, DeviceHandle gpu,
                                                  const std::string& gpu_name) {
  std::vector<api::MigDevice> out;
  unsigned slots = 0;
  if (a.DeviceGetMaxMigDeviceCount(gpu, &slots) != NvmlReturn::kSuccess) return out;
  slots = std::min(slots, 64u);
  for (unsigned i = 0; i < slots; ++i) {
    DeviceHandle h;
    if (a.DeviceGetMigDeviceHandleByIndex(gpu, i, &h) != NvmlReturn::kSuccess) continue;
    api::MigDevice m;
    m.index = i;
    unsigned gi = 0, ci = 0;
    if (a.DeviceGetGpuInstanceId(h, &gi) != NvmlReturn::kSuccess) continue;
    if (a.DeviceGetComputeInstanceId(h, &ci) != NvmlReturn::kSuccess) continue;
    m.gpu_instance = gi;
    m.compute_instance = ci;
    (void)a.DeviceGetUuid(h, &m.uuid);
    std::string name;
    if (a.DeviceGetName(h, &name) == NvmlReturn::kSuccess) {
      // The profile is what follows " MIG " in the name (absent on drivers that name MIG
      // devices like their parent).
      const auto pos = name.rfind(" MIG ");
      if (pos != std::string::npos && name != gpu_name) m.profile = name.substr(pos + 5);
    }
    uint64_t bytes = 0;
    if (a.DeviceGetMemoryTotal(h, &bytes) == NvmlReturn::kSuccess) m.memory_mib = bytes >> 20;
    out.push_back(std::move(m));
  }
  return out;
}

// GPU `i`'s identity, thresholds and supported events (Init, on the NVML worker thread).
Collector::Device Collector::IdentifyDevice(NvmlApi& a, unsigned i) {
  Device d;
  d.id.index = static_cast<int>(i);
  if (NvmlReturn e = a.DeviceGetHandleByIndex(i, &d.handle); e != NvmlReturn::kSuccess) {
    // A GPU we cannot even open is reported (lost) rather than skipped.
    d.handle = DeviceHandle{};
    return d;
  }
  (void)a.DeviceGetUuid(d.handle, &d.id.uuid);
  (void)a.DeviceGetName(d.handle, &d.id.name);
  (void)a.DeviceGetSerial(d.handle, &d.id.serial);
  PciInfo pci;
  if (a.DeviceGetPciInfo(d.handle, &pci) == NvmlReturn::kSuccess) {
    d.id.pci_bus_id = pci.bus_id;
    d.id.pci_domain = pci.domain;
    d.id.pci_bus = pci.bus;
    d.id.pci_device = pci.device;
  }
  bool mig = false, pending = false;
  if (a.DeviceGetMigMode(d.handle, &mig, &pending) == NvmlReturn::kSuccess) {
    d.mig_enabled = mig;
    d.mig_pending = pending;
  }
  if (d.mig_enabled) d.mig_devices = ReadMigDevices(a, d.handle, d.id.name);
  int t = 0;
  if (a.DeviceGetTemperatureThreshold(d.handle, TemperatureThreshold::kSlowdown, &t) ==
      NvmlReturn::kSuccess)
    d.slowdown_c = t;
  if (a.DeviceGetTemperatureThreshold(d.handle, TemperatureThreshold::kShutdown, &t) ==
      NvmlReturn::kSuccess)
    d.shutdown_c = t;
  uint64_t ev = 0;
  if (a.DeviceGetSupportedEventTypes(d.handle, &ev) == NvmlReturn::kSuccess)
    d.id.supported_events = ev;
  return d;
}

Status Collector::Init() {
  init_attempted_ = true;
  last_init_attempt_ = clock_.Monotonic();
  struct InitOut {
    NvmlReturn init = NvmlReturn::kUnknown;
    std::string load_error;
    std::string driver;
    std::vector<Device> devices;
    NvmlReturn enum_error = NvmlReturn::kSuccess;
    std::string enum_call;
  };
  InitOut result;
  NvmlReturn r = worker_->Call<InitOut>(
      [](NvmlApi& a, InitOut* o) {
        o->init = a.Init();
        if (o->init != NvmlReturn::kSuccess) {
          o->load_error = a.LoadError();
          return NvmlReturn::kSuccess;
        }
        std::string driver;
        if (a.SystemGetDriverVersion(&driver) == NvmlReturn::kSuccess) o->driver = driver;
        unsigned n = 0;
        if (NvmlReturn e = a.DeviceGetCount(&n); e != NvmlReturn::kSuccess) {
          o->enum_error = e;
          o->enum_call = "nvmlDeviceGetCount_v2";
          return NvmlReturn::kSuccess;
        }
        for (unsigned i = 0; i < n && i < 64; ++i) o->devices.push_back(IdentifyDevice(a, i));
        return NvmlReturn::kSuccess;
      },
      &result);
  if (r != NvmlReturn::kSuccess) {
    std::string msg = r == NvmlReturn::kDeadlineExceeded
                          ? worker_->hung_message()
                          : "NVML init: " + std::string(NvmlReturnName(r));
    if (msg.empty()) msg = "NVML init did not finish within the deadline";
    SetSource(api::SourceState::kDegraded, msg);
    return DeadlineExceededError(msg);
  }
  if (result.init != NvmlReturn::kSuccess) {
    std::string msg = !result.load_error.empty()
                          ? result.load_error
                          : "nvmlInit_v2: " + std::string(NvmlReturnName(result.init));
    SetSource(api::SourceState::kUnavailable, msg);
    return UnavailableError(msg);
  }
  if (result.enum_error != NvmlReturn::kSuccess) {
    std::string msg = result.enum_call + ": " + std::string(NvmlReturnName(result.enum_error));
    SetSource(api::SourceState::kUnavailable, msg);
    return UnavailableError(msg);
  }
  {
    std::scoped_lock lock(mu_);
    devices_ = std::move(result.devices);
    driver_version_ = result.driver;
    source_.state = api::SourceState::kOk;
    source_.message.clear();
  }
  last_.assign(devices_.size(), Reading{});
  job_.reset();
  sweeps_since_init_ = 0;
  initialized_.store(true);
  return OkStatus();
}

SweepResult Collector::Sweep() {
  SweepResult out;
  Sweep(out);
  return out;
}

// One GPU's last reading into its report entry (`hung`: its read hung; `stale`: this sweep did
// not complete, the values are the last ones read).
void Collector::ToReport(const Device& d, const Reading& rd, bool hung, bool stale,
                         api::GpuStatus& g, GpuExtras& x) {
  g.index = d.id.index;
  AssignIfChanged(g.uuid, d.id.uuid);
  AssignIfChanged(g.name, d.id.name);
  AssignIfChanged(g.serial, d.id.serial);
  AssignIfChanged(g.pci_bus_id, d.id.pci_bus_id);
  g.mig_enabled = d.mig_enabled;
  g.mig_pending_enabled = d.mig_pending;
  if (g.mig_devices.size() != d.mig_devices.size() ||
      !std::equal(g.mig_devices.begin(), g.mig_devices.end(), d.mig_devices.begin(),
                  [](const api::MigDevice& a, const api::MigDevice& b) {
                    return a.index == b.index && a.uuid == b.uuid &&
                           a.gpu_instance == b.gpu_instance &&
                           a.compute_instance == b.compute_instance && a.profile == b.profile &&
                           a.memory_mib == b.memory_mib;
                  }))
    g.mig_devices = d.mig_devices;
  g.lost = rd.lost || d.handle.value == 0 || hung;
  g.temperature_c = rd.temperature_c;
  g.slowdown_temperature_c = d.slowdown_c;
  g.shutdown_temperature_c = d.shutdown_c;
  if (x.clock_event_mask != rd.clock_mask || (g.throttle_reasons.empty() && rd.clock_mask != 0))
    SetThrottleNames(rd.clock_mask, g.throttle_reasons);
  x.clock_event_mask = rd.clock_mask;
  g.power_watts = rd.power_mw ? std::optional<double>(*rd.power_mw / 1000.0) : std::nullopt;
  g.power_limit_watts =
      rd.power_limit_mw ? std::optional<double>(*rd.power_limit_mw / 1000.0) : std::nullopt;
  g.ecc_enabled = rd.ecc_enabled;
  g.ecc_corrected_volatile = rd.ecc[0];
  g.ecc_uncorrected_volatile = rd.ecc[1];
  g.ecc_corrected_aggregate = rd.ecc[2];
  g.ecc_uncorrected_aggregate = rd.ecc[3];
  if (rd.remap) {
    g.remapped_rows_correctable = rd.remap->correctable;
    g.remapped_rows_uncorrectable = rd.remap->uncorrectable;
    g.remap_pending = rd.remap->pending;
    g.remap_failure = rd.remap->failure;
  } else {
    g.remapped_rows_correctable.reset();
    g.remapped_rows_uncorrectable.reset();
    g.remap_pending = false;
    g.remap_failure = false;
  }
  g.retired_pages_sbe = rd.retired_sbe;
  g.retired_pages_dbe = rd.retired_dbe;
  g.retired_pages_pending = rd.retired_pending;
  g.pcie_replay_count = rd.pcie_replay ? std::optional<uint64_t>(*rd.pcie_replay) : std::nullopt;
  g.nvlink_links_total = rd.links_total;
  g.nvlink_links_down = rd.links_down;
  g.nvlink_error_count = rd.nvlink_errors;
  if (rd.recovery_action) {
    AssignIfChanged(g.recovery_action, RecoveryActionName(*rd.recovery_action));
  } else {
    g.recovery_action.clear();
  }
  x.violation_ns = rd.violation_ns;
  x.stale = stale;
}

// The source's own health after a sweep: GPUs missing or lost, a hung event wait, the event
// loop's problem; Degraded with all of them named, else OK.
void Collector::SetSweepSource(SweepResult& out, std::string problems) {
  const size_t n = out.gpus.size();
  int lost = 0;  // the GPU whose call hung is already named by the hang message
  for (size_t i = 0; i < n; ++i)
    lost += out.gpus[i].lost && static_cast<int>(i) != hung_gpu_ ? 1 : 0;
  auto add = [&problems](const std::string& m) {
    if (m.empty()) return;
    if (!problems.empty()) problems += "; ";
    problems += m;
  };
  if (options_.expected_gpus > 0 && out.found_gpus < options_.expected_gpus)
    add("found " + std::to_string(out.found_gpus) + " of " +
        std::to_string(options_.expected_gpus) + " expected GPUs");
  if (lost > 0) add(std::to_string(lost) + " GPU(s) lost");
  const int64_t wait_started = event_wait_started_ns_.load();
  if (wait_started != 0) {
    const auto waited = std::chrono::steady_clock::now().time_since_epoch() -
                        std::chrono::nanoseconds(wait_started);
    if (waited > options_.event_wait + options_.call_deadline)
      add("NVML call nvmlEventSetWait_v2 hung > " +
          std::to_string(std::chrono::duration_cast<std::chrono::seconds>(options_.event_wait +
                                                                          options_.call_deadline)
                             .count()) +
          "s");
  }
  {
    std::scoped_lock lock(mu_);
    add(event_problem_);
    source_.state = problems.empty() ? api::SourceState::kOk : api::SourceState::kDegraded;
    source_.message = problems;
    out.source = source_;
    AssignIfChanged(out.driver_version, driver_version_);
  }
}

void Collector::Sweep(SweepResult& out) {
  const auto t0 = std::chrono::steady_clock::now();
  ++sweeps_;
  out.sweep = sweeps_;
  out.at = clock_.Now();
  out.expected_gpus = options_.expected_gpus;
  if (!initialized_.load()) {
    if (!init_attempted_ || clock_.Monotonic() - last_init_attempt_ >= options_.init_retry)
      Init().IgnoreError();
    if (!initialized_.load()) {
      out.gpus.clear();
      out.extras.clear();
      out.found_gpus = 0;
      out.source = source_status();
      out.took = std::chrono::steady_clock::now() - t0;
      return;
    }
  }
  const size_t n = devices_.size();  // fixed after Init; only this thread re-inits
  const bool slow = (sweeps_since_init_ % static_cast<uint64_t>(options_.slow_every_sweeps)) == 0;
  ++sweeps_since_init_;

  // Prepare the job: reuse it unless a hung call still holds it.
  if (!job_ || job_.use_count() > 1) {
    job_ = std::make_shared<SweepJob>();
    job_->handles.resize(n);
    job_->support.resize(n);
    job_->readings.assign(last_.begin(), last_.end());
    for (size_t i = 0; i < n; ++i) {
      job_->handles[i] = devices_[i].handle;
      job_->support[i] = devices_[i].support;
    }
  }
  job_->slow = slow;

  std::string problems;
  const NvmlReturn r = worker_->Run(job_);
  int hung_gpu = -1;
  bool completed = r == NvmlReturn::kSuccess;
  if (completed) {
    {
      std::scoped_lock lock(mu_);  // ReadRecoveryAction reads support from the event thread
      for (size_t i = 0; i < n; ++i) devices_[i].support = job_->support[i];
    }
    std::copy(job_->readings.begin(), job_->readings.end(), last_.begin());
    hung_gpu_ = -1;
    out.found_gpus = job_->count_result == NvmlReturn::kSuccess ? static_cast<int>(job_->count)
                                                                : static_cast<int>(n);
  } else {
    hung_gpu = job_->current.load();
    if (worker_->hung() && hung_gpu >= 0) hung_gpu_ = hung_gpu;
    job_.reset();  // the worker may still write into it; start a fresh one next time
    std::string msg = worker_->hung_message();
    problems = msg.empty() ? "NVML sweep exceeded its deadline" : msg;
    out.found_gpus = static_cast<int>(n);
  }
  if (!worker_->hung()) hung_gpu_ = -1;

  // Convert to the report types, reusing out's buffers.
  out.gpus.resize(n);
  out.extras.resize(n);
  for (size_t i = 0; i < n; ++i) {
    ToReport(devices_[i], last_[i], static_cast<int>(i) == hung_gpu_, !completed, out.gpus[i],
             out.extras[i]);
  }

  SetSweepSource(out, std::move(problems));
  out.took = std::chrono::steady_clock::now() - t0;
}

Status Collector::StartEvents(EventCallback on_event) {
  if (!initialized_.load()) return FailedPreconditionError("collector not initialized");
  if (event_thread_.joinable()) return OkStatus();
  EventSetHandle set;
  NvmlReturn r = worker_->Call<EventSetHandle>(
      [](NvmlApi& a, EventSetHandle* s) { return a.EventSetCreate(s); }, &set);
  if (r != NvmlReturn::kSuccess) {
    std::string msg = "nvmlEventSetCreate: " + std::string(NvmlReturnName(r));
    std::scoped_lock lock(mu_);
    event_problem_ = msg;
    return UnavailableError(msg);
  }
  std::string unsupported;
  {
    std::scoped_lock lock(mu_);
    for (Device& d : devices_) {
      const uint64_t mask = options_.event_mask & d.id.supported_events;
      if (mask == 0 || d.handle.value == 0) {
        unsupported += (unsupported.empty() ? "" : ",") + std::to_string(d.id.index);
        continue;
      }
      const DeviceHandle h = d.handle;
      int dummy = 0;
      NvmlReturn rr = worker_->Call<int>(
          [h, mask, set](NvmlApi& a, int*) { return a.DeviceRegisterEvents(h, mask, set); },
          &dummy);
      if (rr == NvmlReturn::kSuccess) {
        d.id.registered_events = mask;
      } else {
        unsupported += (unsupported.empty() ? "" : ",") + std::to_string(d.id.index);
      }
    }
    if (!unsupported.empty()) event_problem_ = "no NVML health events for GPU(s) " + unsupported;
  }
  event_set_ = set;
  event_set_created_ = true;
  on_event_ = std::move(on_event);
  event_thread_ = std::jthread([this](std::stop_token stop) { EventLoop(stop); });
  return OkStatus();
}

void Collector::StopEvents() {
  if (event_thread_.joinable()) {
    event_thread_.request_stop();
    event_cv_.notify_all();
    event_thread_.join();
  }
  if (event_set_created_) {
    event_set_created_ = false;
    if (!worker_->hung()) {
      const EventSetHandle set = event_set_;
      int dummy = 0;
      (void)worker_->Call<int>([set](NvmlApi& a, int*) { return a.EventSetFree(set); }, &dummy);
    }
  }
}

std::optional<RecoveryAction> Collector::ReadRecoveryAction(int index) {
  DeviceHandle h;
  {
    std::scoped_lock lock(mu_);
    if (index < 0 || index >= static_cast<int>(devices_.size())) return std::nullopt;
    if (!devices_[static_cast<size_t>(index)].support.recovery_field) return std::nullopt;
    h = devices_[static_cast<size_t>(index)].handle;
  }
  if (worker_->hung()) return std::nullopt;
  FieldValue f;
  NvmlReturn r = worker_->Call<FieldValue>(
      [h](NvmlApi& a, FieldValue* out) {
        out->field_id = kFieldGpuRecoveryAction;
        return a.DeviceGetFieldValues(h, std::span<FieldValue>(out, 1));
      },
      &f);
  if (r != NvmlReturn::kSuccess || f.result != NvmlReturn::kSuccess) return std::nullopt;
  return static_cast<RecoveryAction>(f.u64);
}

GpuEvent Collector::MakeEvent(const EventData& d) {
  GpuEvent e;
  e.event_type = d.event_type;
  e.event_data = d.event_data;
  e.gpu_instance_id = d.gpu_instance_id;
  e.compute_instance_id = d.compute_instance_id;
  e.at = clock_.Now();
  {
    std::scoped_lock lock(mu_);
    for (const Device& dev : devices_) {
      if (dev.handle == d.device && dev.handle.value != 0) {
        e.gpu_index = dev.id.index;
        e.gpu_uuid = dev.id.uuid;
        e.pci_bus_id = dev.id.pci_bus_id;
        break;
      }
    }
  }
  const uint64_t t = d.event_type;
  if (t & kEventXidCritical) {
    e.kind = GpuEvent::Kind::kXid;
    e.xid = static_cast<int>(std::min<uint64_t>(d.event_data, 1'000'000));
  } else if (t & kEventDoubleBitEcc) {
    e.kind = GpuEvent::Kind::kDoubleBitEcc;
  } else if (t & kEventSingleBitEcc) {
    e.kind = GpuEvent::Kind::kSingleBitEcc;
  } else if (t & kEventSingleBitEccStorm) {
    e.kind = GpuEvent::Kind::kEccStorm;
  } else if (t & kEventDramRetirement) {
    e.kind = GpuEvent::Kind::kDramRetirement;
  } else if (t & kEventDramRetirementFailure) {
    e.kind = GpuEvent::Kind::kDramRetirementFailure;
  } else if (t & (kEventNonFatalPoison | kEventFatalPoison)) {
    e.kind = GpuEvent::Kind::kPoison;
  } else if (t & kEventGpuUnavailable) {
    e.kind = GpuEvent::Kind::kGpuUnavailable;
  } else if (t & kEventGpuRecoveryAction) {
    e.kind = GpuEvent::Kind::kRecoveryAction;
  }
  return e;
}

void Collector::EventLoop(std::stop_token stop) {
  int consecutive_errors = 0;
  bool lost_reported = false;
  auto backoff = [&](std::chrono::milliseconds d) {
    std::unique_lock lock(event_mu_);
    event_cv_.wait_for(lock, stop, d, [] { return false; });
  };
  const unsigned timeout_ms =
      static_cast<unsigned>(std::max<int64_t>(1, options_.event_wait.count()));
  while (!stop.stop_requested()) {
    EventData d;
    event_wait_started_ns_.store(std::chrono::steady_clock::now().time_since_epoch().count());
    // Directly on this thread, not the worker: blocking here is the point of the call.
    const NvmlReturn r = api_.EventSetWait(event_set_, timeout_ms, &d);
    event_wait_started_ns_.store(0);
    if (stop.stop_requested()) break;
    if (r == NvmlReturn::kTimeout) {
      consecutive_errors = 0;
      lost_reported = false;
      std::scoped_lock lock(mu_);
      if (event_problem_.rfind("nvmlEventSetWait_v2", 0) == 0) event_problem_.clear();
      continue;
    }
    if (r == NvmlReturn::kSuccess) {
      consecutive_errors = 0;
      GpuEvent e = MakeEvent(d);
      if (e.kind == GpuEvent::Kind::kXid || e.kind == GpuEvent::Kind::kRecoveryAction)
        e.recovery_action = ReadRecoveryAction(e.gpu_index);
      events_seen_.fetch_add(1);
      if (on_event_) on_event_(e);
      continue;
    }
    if (r == NvmlReturn::kGpuIsLost) {
      if (!lost_reported) {
        lost_reported = true;
        GpuEvent e;
        e.kind = GpuEvent::Kind::kGpuLost;
        e.at = clock_.Now();
        events_seen_.fetch_add(1);
        if (on_event_) on_event_(e);
      }
      backoff(std::chrono::milliseconds(200));
      continue;
    }
    if (++consecutive_errors >= 3) {
      std::scoped_lock lock(mu_);
      event_problem_ = "nvmlEventSetWait_v2: " + std::string(NvmlReturnName(r));
    }
    backoff(std::chrono::milliseconds(std::min(1000, 50 * consecutive_errors)));
  }
}

api::SourceStatus Collector::source_status() const {
  std::scoped_lock lock(mu_);
  return source_;
}

std::vector<GpuIdentity> Collector::identities() const {
  std::scoped_lock lock(mu_);
  std::vector<GpuIdentity> out;
  out.reserve(devices_.size());
  for (const Device& d : devices_) out.push_back(d.id);
  return out;
}

std::optional<GpuIdentity> Collector::GpuForPci(uint32_t domain, uint32_t bus,
                                                uint32_t device) const {
  std::scoped_lock lock(mu_);
  for (const Device& d : devices_)
    if (d.id.pci_domain == domain && d.id.pci_bus == bus && d.id.pci_device == device &&
        !d.id.pci_bus_id.empty())
      return d.id;
  return std::nullopt;
}

std::string Collector::UuidForPci(uint32_t domain, uint32_t bus, uint32_t device) const {
  auto id = GpuForPci(domain, bus, device);
  return id ? id->uuid : std::string();
}

}  // namespace gg::gpu
