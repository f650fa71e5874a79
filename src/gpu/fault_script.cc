// Fault-script parsing (yaml-cpp, line-numbered errors) and playback on a Clock.
#include "gpu/fault_script.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "common/time_util.h"

namespace gg::gpu {
namespace {

int LineOf(const YAML::Node& n) { return n.Mark().line + 1; }

Status Err(const YAML::Node& n, const std::string& msg) {
  return InvalidArgumentError("line " + std::to_string(LineOf(n)) + ": " + msg);
}

Status ParseInt(const YAML::Node& n, const std::string& key, int64_t lo, int64_t hi, int64_t* out) {
  if (!n.IsScalar()) return Err(n, key + " must be a number");
  const std::string& s = n.Scalar();
  try {
    size_t pos = 0;
    long long v = std::stoll(s, &pos, 10);
    if (pos != s.size()) return Err(n, key + " must be an integer, got '" + s + "'");
    if (v < lo || v > hi)
      return Err(
          n, key + " out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]: " + s);
    *out = v;
    return OkStatus();
  } catch (const std::exception&) {
    return Err(n, key + " must be an integer, got '" + s + "'");
  }
}

Status ParseBool(const YAML::Node& n, const std::string& key, bool* out) {
  if (!n.IsScalar()) return Err(n, key + " must be true or false");
  const std::string& s = n.Scalar();
  if (s == "true" || s == "True" || s == "yes") {
    *out = true;
  } else if (s == "false" || s == "False" || s == "no") {
    *out = false;
  } else {
    return Err(n, key + " must be true or false, got '" + s + "'");
  }
  return OkStatus();
}

Status ParseDur(const YAML::Node& n, const std::string& key, Duration* out) {
  if (!n.IsScalar()) return Err(n, key + " must be a duration like 30s");
  const std::string& s = n.Scalar();
  if (!s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    int64_t v = 0;
    GG_RETURN_IF_ERROR(ParseInt(n, key, 0, 10'000'000, &v));
    *out = std::chrono::seconds(v);
    return OkStatus();
  }
  auto d = ParseDuration(s);
  if (!d.ok()) return Err(n, key + ": " + d.status().message());
  if (d->count() < 0) return Err(n, key + " must not be negative");
  *out = *d;
  return OkStatus();
}

std::optional<uint64_t> ThrottleBit(std::string_view name) {
  for (uint64_t bit = 1; bit <= 0x100; bit <<= 1)
    if (ClockEventReasonName(bit) == name) return bit;
  return std::nullopt;
}

std::optional<int> RecoveryActionValue(std::string_view name) {
  for (int v = 0; v <= 5; ++v)
    if (RecoveryActionName(v) == name) return v;
  return std::nullopt;
}

Status ParsePower(const YAML::Node& v, FaultEvent* e) {
  if (!v.IsScalar()) return Err(v, "power must be a number of watts");
  try {
    e->power_watts = std::stod(v.Scalar());
  } catch (const std::exception&) {
    return Err(v, "power must be a number of watts, got '" + v.Scalar() + "'");
  }
  if (*e->power_watts < 0 || *e->power_watts > 100000) return Err(v, "power out of range");
  return OkStatus();
}

Status ParseThrottle(const YAML::Node& v, FaultEvent* e) {
  if (!v.IsSequence()) return Err(v, "throttle must be a list of reason names");
  std::vector<std::string> names;
  for (const auto& t : v) {
    if (!t.IsScalar() || !ThrottleBit(t.Scalar()))
      return Err(t, "unknown throttle reason '" + (t.IsScalar() ? t.Scalar() : "?") +
                        "' (e.g. HwThermalSlowdown, SwPowerCap)");
    names.push_back(t.Scalar());
  }
  e->throttle = std::move(names);
  return OkStatus();
}

Status ParseEcc(const YAML::Node& v, FaultEvent* e) {
  int64_t i = 0;
  if (!v.IsMap()) return Err(v, "ecc must be a map like {uncorrectable_volatile: 1}");
  static const std::set<std::string> kKeys = {"corrected_volatile",      "uncorrectable_volatile",
                                              "uncorrected_volatile",    "corrected_aggregate",
                                              "uncorrectable_aggregate", "uncorrected_aggregate"};
  for (const auto& c : v) {
    std::string k = c.first.as<std::string>();
    if (!kKeys.count(k)) return Err(c.first, "unknown ecc counter '" + k + "'");
    GG_RETURN_IF_ERROR(ParseInt(c.second, k, 0, 1'000'000'000, &i));
    if (k == "uncorrected_volatile") k = "uncorrectable_volatile";
    if (k == "uncorrected_aggregate") k = "uncorrectable_aggregate";
    e->ecc[k] += static_cast<uint64_t>(i);
  }
  return OkStatus();
}

Status ParseRemap(const YAML::Node& v, FaultEvent* e) {
  int64_t i = 0;
  bool b = false;
  if (!v.IsMap()) return Err(v, "remap must be a map like {failure: true}");
  RemappedRows r;
  for (const auto& c : v) {
    const std::string k = c.first.as<std::string>();
    if (k == "correctable" || k == "uncorrectable") {
      GG_RETURN_IF_ERROR(ParseInt(c.second, k, 0, 1'000'000, &i));
      (k == "correctable" ? r.correctable : r.uncorrectable) = static_cast<uint32_t>(i);
    } else if (k == "pending" || k == "failure") {
      GG_RETURN_IF_ERROR(ParseBool(c.second, k, &b));
      (k == "pending" ? r.pending : r.failure) = b;
    } else {
      return Err(c.first,
                 "unknown remap key '" + k + "' (correctable, uncorrectable, pending, failure)");
    }
  }
  e->remap = r;
  return OkStatus();
}

Status ParseHang(const YAML::Node& v, FaultEvent* e) {
  int64_t i = 0;
  if (!v.IsMap())
    return Err(v, "hang must be a map like {ms: 8000, call: nvmlDeviceGetPcieReplayCounter}");
  for (const auto& c : v) {
    const std::string k = c.first.as<std::string>();
    if (k == "ms") {
      GG_RETURN_IF_ERROR(ParseInt(c.second, "hang.ms", 1, 3'600'000, &i));
      e->hang_ms = static_cast<int>(i);
    } else if (k == "call") {
      if (!c.second.IsScalar()) return Err(c.second, "hang.call must be a string");
      e->hang_call = c.second.Scalar();
    } else {
      return Err(c.first, "unknown hang key '" + k + "' (ms, call)");
    }
  }
  if (!e->hang_ms) return Err(v, "hang needs ms");
  return OkStatus();
}

// A flag key of a timeline entry ("lost: true"); `out` is a bool or an optional<bool>.
template <typename Flag>
Status ParseFlag(const YAML::Node& v, const std::string& key, Flag* out) {
  bool b = false;
  GG_RETURN_IF_ERROR(ParseBool(v, key, &b));
  *out = b;
  return OkStatus();
}

// A key of a timeline entry that says what happens (all but at/gpu/for and the MIG ids).
// *known is false for any other key.
Status ParseActionKey(const std::string& key, const YAML::Node& v, FaultEvent* e, bool* known) {
  int64_t i = 0;
  *known = true;
  if (key == "xid") {
    GG_RETURN_IF_ERROR(ParseInt(v, "xid", 1, 100000, &i));
    e->xid = static_cast<int>(i);
  } else if (key == "temperature") {
    GG_RETURN_IF_ERROR(ParseInt(v, "temperature", -50, 200, &i));
    e->temperature_c = static_cast<int>(i);
  } else if (key == "power") {
    return ParsePower(v, e);
  } else if (key == "throttle") {
    return ParseThrottle(v, e);
  } else if (key == "ecc") {
    return ParseEcc(v, e);
  } else if (key == "remap") {
    return ParseRemap(v, e);
  } else if (key == "pcie_replay") {
    GG_RETURN_IF_ERROR(ParseInt(v, "pcie_replay", 0, 4'000'000'000LL, &i));
    e->pcie_replay = static_cast<unsigned>(i);
  } else if (key == "nvlink_down") {
    GG_RETURN_IF_ERROR(ParseInt(v, "nvlink_down", 0, 36, &i));
    e->nvlink_down = static_cast<int>(i);
  } else if (key == "recovery_action") {
    if (!v.IsScalar() || !RecoveryActionValue(v.Scalar()))
      return Err(v,
                 "recovery_action must be one of None, GpuReset, NodeReboot, DrainP2P, "
                 "DrainAndReset, RecoverImexDomain");
    e->recovery_action = v.Scalar();
  } else if (key == "lost") {
    return ParseFlag(v, key, &e->lost);
  } else if (key == "clear") {
    return ParseFlag(v, key, &e->clear);
  } else if (key == "library_missing") {
    return ParseFlag(v, key, &e->library_missing);
  } else if (key == "hang") {
    return ParseHang(v, e);
  } else {
    *known = false;
  }
  return OkStatus();
}

// Checks of a whole timeline entry once every key is read.
Status CheckEvent(const YAML::Node& n, const FaultEvent& e, bool have_at, bool have_gpu,
                  bool have_action) {
  if (!have_at) return Err(n, "timeline entry needs 'at'");
  if (!have_gpu && !e.library_missing && !e.hang_ms) return Err(n, "timeline entry needs 'gpu'");
  if (!have_action) return Err(n, "timeline entry has nothing to do (xid, temperature, ecc, ...)");
  if ((e.gpu_instance || e.compute_instance) && !e.xid)
    return Err(n, "gpu_instance/compute_instance attribute an xid; this entry has none");
  if (e.compute_instance && !e.gpu_instance) return Err(n, "compute_instance needs gpu_instance");
  return OkStatus();
}

Status ParseEvent(const YAML::Node& n, int gpus, FaultEvent* e) {
  if (!n.IsMap()) return Err(n, "timeline entry must be a map like {at: 30s, gpu: 3, xid: 79}");
  e->line = LineOf(n);
  bool have_at = false, have_gpu = false, have_action = false;
  for (const auto& kv : n) {
    const std::string key = kv.first.as<std::string>();
    const YAML::Node& v = kv.second;
    int64_t i = 0;
    bool known = false;
    if (key == "at") {
      GG_RETURN_IF_ERROR(ParseDur(v, "at", &e->at));
      have_at = true;
    } else if (key == "gpu") {
      if (v.IsScalar() && v.Scalar() == "all") {
        e->gpu = -1;
      } else {
        GG_RETURN_IF_ERROR(ParseInt(v, "gpu", 0, gpus - 1, &i));
        e->gpu = static_cast<int>(i);
      }
      have_gpu = true;
    } else if (key == "for") {
      Duration d{0};
      GG_RETURN_IF_ERROR(ParseDur(v, "for", &d));
      e->duration = d;
    } else if (key == "gpu_instance" || key == "compute_instance") {
      GG_RETURN_IF_ERROR(ParseInt(v, key, 0, 4'294'967'294LL, &i));
      (key == "gpu_instance" ? e->gpu_instance : e->compute_instance) = static_cast<uint32_t>(i);
    } else {
      GG_RETURN_IF_ERROR(ParseActionKey(key, v, e, &known));
      if (!known) return Err(kv.first, "unknown key '" + key + "'");
      have_action = true;
    }
  }
  return CheckEvent(n, *e, have_at, have_gpu, have_action);
}

Status ParseMig(const YAML::Node& n, int gpus, FaultMig* m) {
  if (!n.IsMap())
    return Err(n, "mig entry must be a map like {gpu: 0, gpu_instance: 3, compute_instance: 0}");
  m->line = LineOf(n);
  bool have_gpu = false, have_gi = false;
  for (const auto& kv : n) {
    const std::string key = kv.first.as<std::string>();
    const YAML::Node& v = kv.second;
    int64_t i = 0;
    if (key == "gpu") {
      GG_RETURN_IF_ERROR(ParseInt(v, "gpu", 0, gpus - 1, &i));
      m->gpu = static_cast<int>(i);
      have_gpu = true;
    } else if (key == "gpu_instance") {
      GG_RETURN_IF_ERROR(ParseInt(v, key, 0, 4'294'967'294LL, &i));
      m->device.gpu_instance = static_cast<uint32_t>(i);
      have_gi = true;
    } else if (key == "compute_instance") {
      GG_RETURN_IF_ERROR(ParseInt(v, key, 0, 4'294'967'294LL, &i));
      m->device.compute_instance = static_cast<uint32_t>(i);
    } else if (key == "profile") {
      if (!v.IsScalar()) return Err(v, "profile must be a string like 1g.18gb");
      m->device.profile = v.Scalar();
    } else if (key == "memory_mib") {
      GG_RETURN_IF_ERROR(ParseInt(v, key, 0, 1'000'000'000LL, &i));
      m->device.memory_mib = static_cast<uint64_t>(i);
    } else if (key == "uuid") {
      if (!v.IsScalar() || v.Scalar().rfind("MIG-", 0) != 0)
        return Err(v, "mig uuid must be a string starting with MIG-");
      m->device.uuid = v.Scalar();
    } else {
      return Err(kv.first,
                 "unknown mig key '" + key +
                     "' (gpu, gpu_instance, compute_instance, profile, memory_mib, uuid)");
    }
  }
  if (!have_gpu) return Err(n, "mig entry needs 'gpu'");
  if (!have_gi) return Err(n, "mig entry needs 'gpu_instance'");
  return OkStatus();
}

}  // namespace

StatusOr<FaultScript> ParseFaultScript(std::string_view yaml) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError("line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  if (!root.IsMap())
    return InvalidArgumentError("line 1: fault script must be a map (gpus, timeline)");
  FaultScript script;
  try {
    // Header first: the GPU count bounds the timeline's gpu indices.
    if (const YAML::Node g = root["gpus"]) {
      int64_t v = 0;
      GG_RETURN_IF_ERROR(ParseInt(g, "gpus", 0, 64, &v));
      script.gpus = static_cast<int>(v);
    }
    for (const auto& kv : root) {
      const std::string key = kv.first.as<std::string>();
      const YAML::Node& v = kv.second;
      if (key == "gpus") {
        continue;
      } else if (key == "product") {
        if (!v.IsScalar()) return Err(v, "product must be a string");
        script.product = v.Scalar();
      } else if (key == "uuids") {
        if (!v.IsSequence()) return Err(v, "uuids must be a list");
        for (const auto& u : v) {
          if (!u.IsScalar()) return Err(u, "uuid must be a string");
          script.uuids.push_back(u.Scalar());
        }
        if (static_cast<int>(script.uuids.size()) > script.gpus)
          return Err(v, "more uuids than gpus");
      } else if (key == "mig") {
        if (!v.IsSequence()) return Err(v, "mig must be a list of MIG devices");
        for (const auto& mv : v) {
          FaultMig m;
          GG_RETURN_IF_ERROR(ParseMig(mv, script.gpus, &m));
          for (const auto& other : script.mig) {
            if (other.gpu == m.gpu && other.device.gpu_instance == m.device.gpu_instance &&
                other.device.compute_instance == m.device.compute_instance)
              return Err(mv, "duplicate MIG device (gpu " + std::to_string(m.gpu) +
                                 ", gpu_instance " + std::to_string(m.device.gpu_instance) +
                                 ", compute_instance " + std::to_string(m.device.compute_instance) +
                                 ")");
          }
          script.mig.push_back(std::move(m));
        }
      } else if (key == "timeline") {
        if (v.IsNull()) continue;  // "timeline:" with no events yet (a file to append to)
        if (!v.IsSequence()) return Err(v, "timeline must be a list");
        for (const auto& ev : v) {
          FaultEvent e;
          GG_RETURN_IF_ERROR(ParseEvent(ev, script.gpus, &e));
          script.timeline.push_back(std::move(e));
        }
      } else {
        return Err(kv.first, "unknown key '" + key + "' (gpus, product, uuids, mig, timeline)");
      }
    }
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError("line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  std::stable_sort(script.timeline.begin(), script.timeline.end(),
                   [](const FaultEvent& a, const FaultEvent& b) { return a.at < b.at; });
  return script;
}

StatusOr<FaultScript> LoadFaultScript(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFoundError("fault script " + path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  auto s = ParseFaultScript(ss.str());
  if (!s.ok()) return s.status().WithContext(path);
  return s;
}

std::string FakeMigUuid(const std::string& gpu_uuid, uint32_t gpu_instance,
                        uint32_t compute_instance) {
  std::string body = gpu_uuid.rfind("GPU-", 0) == 0 ? gpu_uuid.substr(4) : gpu_uuid;
  char tail[8];
  std::snprintf(tail, sizeof(tail), "%02x%02x", gpu_instance & 0xFF, compute_instance & 0xFF);
  if (body.size() >= 4) {
    body.replace(body.size() - 4, 4, tail);
  } else {
    body += tail;
  }
  return "MIG-" + body;
}

void ApplyFaultScriptSetup(const FaultScript& script, FakeNvml& nvml) {
  nvml.SetGpuCount(script.gpus);
  if (!script.product.empty()) nvml.SetProductName(script.product);
  if (!script.uuids.empty()) nvml.SetUuids(script.uuids);
  if (script.mig.empty()) return;
  for (int gpu = 0; gpu < script.gpus; ++gpu) {
    nvml.Mutate(gpu, [&](FakeGpuState& g) {
      std::vector<FakeMigDevice> devices;
      for (const auto& m : script.mig) {
        if (m.gpu != gpu) continue;
        FakeMigDevice d = m.device;
        if (d.uuid.empty()) d.uuid = FakeMigUuid(g.uuid, d.gpu_instance, d.compute_instance);
        devices.push_back(std::move(d));
      }
      if (devices.empty()) return;
      g.mig_enabled = true;
      g.mig_devices = std::move(devices);
      if (g.max_mig_devices < g.mig_devices.size())
        g.max_mig_devices = static_cast<unsigned>(g.mig_devices.size());
    });
  }
}

namespace {

void ApplyToGpu(const FaultEvent& e, int gpu, FakeNvml& nvml) {
  if (e.clear) {
    nvml.Clear(gpu);
  }
  nvml.Mutate(gpu, [&e](FakeGpuState& g) {
    if (e.temperature_c) g.temperature_c = *e.temperature_c;
    if (e.power_watts) g.power_mw = static_cast<unsigned>(*e.power_watts * 1000.0);
    if (e.throttle) {
      uint64_t mask = 0;
      for (const auto& n : *e.throttle) mask |= ThrottleBit(n).value_or(0);
      g.clock_event_reasons = mask;
    }
    for (const auto& [k, v] : e.ecc) {
      if (k == "corrected_volatile") {
        g.ecc_corrected_volatile += v;
        g.ecc_corrected_aggregate += v;
      } else if (k == "uncorrectable_volatile") {
        g.ecc_uncorrected_volatile += v;
        g.ecc_uncorrected_aggregate += v;
      } else if (k == "corrected_aggregate") {
        g.ecc_corrected_aggregate += v;
      } else if (k == "uncorrectable_aggregate") {
        g.ecc_uncorrected_aggregate += v;
      }
    }
    if (e.remap) g.remapped_rows = *e.remap;
    if (e.pcie_replay) g.pcie_replay = *e.pcie_replay;
    if (e.nvlink_down) {
      if (g.nvlink_links < *e.nvlink_down) g.nvlink_links = std::max(18, *e.nvlink_down);
      g.nvlink_down.assign(static_cast<size_t>(g.nvlink_links), false);
      for (int i = 0; i < *e.nvlink_down; ++i) g.nvlink_down[static_cast<size_t>(i)] = true;
    }
    if (e.recovery_action) g.recovery_action = RecoveryActionValue(*e.recovery_action);
  });
  if (e.lost) nvml.SetLost(gpu, *e.lost);
  auto unc = e.ecc.find("uncorrectable_volatile");
  if (unc != e.ecc.end() && unc->second > 0) nvml.InjectEvent(gpu, kEventDoubleBitEcc, 0);
  auto cor = e.ecc.find("corrected_volatile");
  if (cor != e.ecc.end() && cor->second > 0) nvml.InjectEvent(gpu, kEventSingleBitEcc, 0);
  if (e.recovery_action && *e.recovery_action != "None")
    nvml.InjectEvent(gpu, kEventGpuRecoveryAction, 0);
  if (e.xid)
    nvml.InjectEvent(gpu, kEventXidCritical, static_cast<uint64_t>(*e.xid),
                     e.gpu_instance.value_or(kNoInstanceId),
                     e.compute_instance.value_or(kNoInstanceId));
}

}  // namespace

void ApplyFaultEvent(const FaultEvent& e, FakeNvml& nvml) {
  if (e.library_missing) nvml.SetLibraryMissing(*e.library_missing);
  if (e.hang_ms) nvml.SetCallDelay(e.hang_call, std::chrono::milliseconds(*e.hang_ms));
  if (e.clear) nvml.SetLibraryMissing(false);
  const bool per_gpu = e.xid || e.temperature_c || e.power_watts || e.throttle || !e.ecc.empty() ||
                       e.remap || e.pcie_replay || e.nvlink_down || e.recovery_action || e.lost ||
                       e.clear;
  if (!per_gpu) return;
  if (e.gpu >= 0) {
    ApplyToGpu(e, e.gpu, nvml);
  } else {
    for (int g = 0; g < nvml.gpu_count(); ++g) ApplyToGpu(e, g, nvml);
  }
}

FaultPlayer::FaultPlayer(FaultScript script, FakeNvml& nvml, Clock& clock, double time_scale)
    : script_(std::move(script)),
      nvml_(nvml),
      clock_(clock),
      time_scale_(time_scale > 0 ? time_scale : 1.0) {}

FaultPlayer::~FaultPlayer() { Stop(); }

void FaultPlayer::Schedule(Duration at, std::function<void()> fn) {
  const auto scaled = Duration(static_cast<int64_t>(static_cast<double>(at.count()) / time_scale_));
  TimerId id = clock_.ScheduleAfter(scaled, [this, fn = std::move(fn)] {
    fn();
    applied_.fetch_add(1);
  });
  std::scoped_lock lock(mu_);
  timers_.push_back(id);
}

void FaultPlayer::Start() {
  ApplyFaultScriptSetup(script_, nvml_);
  total_ = 0;
  for (const FaultEvent& e : script_.timeline) total_ += e.duration ? 2 : 1;
  for (const FaultEvent& e : script_.timeline) {
    if (!e.duration) {
      Schedule(e.at, [this, &e] { ApplyFaultEvent(e, nvml_); });
      continue;
    }
    // Snapshot what the event changes when it fires; restore it when `for` runs out.
    auto before = std::make_shared<std::vector<FakeGpuState>>();
    Schedule(e.at, [this, &e, before] {
      before->clear();
      for (int g = 0; g < nvml_.gpu_count(); ++g) before->push_back(nvml_.Get(g));
      ApplyFaultEvent(e, nvml_);
    });
    Schedule(e.at + *e.duration, [this, &e, before] {
      if (e.hang_ms) nvml_.SetCallDelay(e.hang_call, std::chrono::milliseconds(0));
      if (e.library_missing) nvml_.SetLibraryMissing(!*e.library_missing);
      for (int g = 0; g < static_cast<int>(before->size()); ++g) {
        if (e.gpu >= 0 && g != e.gpu) continue;
        const FakeGpuState& old = (*before)[static_cast<size_t>(g)];
        nvml_.Mutate(g, [&e, &old](FakeGpuState& s) {
          if (e.temperature_c) s.temperature_c = old.temperature_c;
          if (e.power_watts) s.power_mw = old.power_mw;
          if (e.throttle) s.clock_event_reasons = old.clock_event_reasons;
          if (e.pcie_replay) s.pcie_replay = old.pcie_replay;
          if (e.nvlink_down) s.nvlink_down = old.nvlink_down;
          if (e.recovery_action) s.recovery_action = old.recovery_action;
          if (e.remap) s.remapped_rows = old.remapped_rows;
        });
        if (e.lost) nvml_.SetLost(g, old.lost);
      }
    });
  }
}

void FaultPlayer::Stop() {
  std::vector<TimerId> timers;
  {
    std::scoped_lock lock(mu_);
    timers.swap(timers_);
  }
  for (TimerId id : timers) clock_.Cancel(id);
}

}  // namespace gg::gpu
