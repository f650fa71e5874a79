// JSON codecs for the GPUNodeHealth report: strict simdjson decoding (wrong type ->
// InvalidArgument naming the field path, unknown fields ignored, bounded sizes) and
// nlohmann encoding (camelCase, absent optionals omitted). Shape documented in docs/api.md.
#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "api/gpu_node_health.h"
#include "common/time_util.h"

namespace gg::api {
namespace {

using Elem = simdjson::dom::element;
using Obj = simdjson::dom::object;
using Arr = simdjson::dom::array;
using Json = nlohmann::ordered_json;

// Bounds: a report is tiny in practice; these stop a hostile or broken writer from making
// the operator allocate without limit.
constexpr size_t kMaxDocumentBytes = 4u << 20;
constexpr size_t kMaxGpus = 256;
constexpr size_t kMaxXids = 1024;
constexpr size_t kMaxSources = 32;
constexpr size_t kMaxThrottleReasons = 64;
constexpr size_t kMaxMigDevices = 64;

Status TypeError(const std::string& path, std::string_view expected) {
  return InvalidArgumentError(path + ": expected " + std::string(expected));
}

// Absent and JSON null both mean "not set" (as Go's encoding/json treats null).
bool Lookup(Obj obj, std::string_view key, Elem* out) {
  auto r = obj.at_key(key);
  if (r.error() != simdjson::SUCCESS) return false;
  Elem e = r.value_unsafe();
  if (e.is_null()) return false;
  *out = e;
  return true;
}

std::string Join(const std::string& path, std::string_view key) {
  std::string p = path;
  p += '.';
  p += key;
  return p;
}

Status ReadString(Obj obj, std::string_view key, const std::string& path, std::string* out) {
  Elem e;
  if (!Lookup(obj, key, &e)) return OkStatus();
  std::string_view sv;
  if (e.get_string().get(sv) != simdjson::SUCCESS) return TypeError(Join(path, key), "string");
  out->assign(sv);
  return OkStatus();
}

Status ReadBool(Obj obj, std::string_view key, const std::string& path, bool* out) {
  Elem e;
  if (!Lookup(obj, key, &e)) return OkStatus();
  bool b = false;
  if (e.get_bool().get(b) != simdjson::SUCCESS) return TypeError(Join(path, key), "boolean");
  *out = b;
  return OkStatus();
}

// Integers must be JSON integers (1.0 is rejected) within the range of T.
template <typename T>
Status ElemToInt(Elem e, const std::string& path, T* out) {
  if (!e.is_int64() && !e.is_uint64()) return TypeError(path, "integer");
  if constexpr (std::is_signed_v<T>) {
    int64_t v = 0;
    if (e.get_int64().get(v) != simdjson::SUCCESS || v < std::numeric_limits<T>::min() ||
        v > std::numeric_limits<T>::max())
      return InvalidArgumentError(path + ": integer out of range");
    *out = static_cast<T>(v);
  } else {
    uint64_t v = 0;
    if (e.get_uint64().get(v) != simdjson::SUCCESS || v > std::numeric_limits<T>::max())
      return InvalidArgumentError(path + ": expected unsigned integer in range");
    *out = static_cast<T>(v);
  }
  return OkStatus();
}

template <typename T>
Status ReadInt(Obj obj, std::string_view key, const std::string& path, T* out) {
  Elem e;
  if (!Lookup(obj, key, &e)) return OkStatus();
  return ElemToInt(e, Join(path, key), out);
}

template <typename T>
Status ReadOptInt(Obj obj, std::string_view key, const std::string& path, std::optional<T>* out) {
  Elem e;
  if (!Lookup(obj, key, &e)) return OkStatus();
  T v{};
  GG_RETURN_IF_ERROR(ElemToInt(e, Join(path, key), &v));
  *out = v;
  return OkStatus();
}

Status ReadOptDouble(Obj obj, std::string_view key, const std::string& path,
                     std::optional<double>* out) {
  Elem e;
  if (!Lookup(obj, key, &e)) return OkStatus();
  double d = 0;
  // get_double() also accepts JSON integers, which is what we want for watts.
  if (e.get_double().get(d) != simdjson::SUCCESS) return TypeError(Join(path, key), "number");
  *out = d;
  return OkStatus();
}

Status ReadTime(Obj obj, std::string_view key, const std::string& path, WallTime* out) {
  std::string s;
  GG_RETURN_IF_ERROR(ReadString(obj, key, path, &s));
  if (s.empty()) return OkStatus();
  // WallTime counts nanoseconds in 64 bits (years 1678..2261); outside that the conversion
  // would overflow, so such years are rejected before parsing.
  if (s.size() >= 4 &&
      std::all_of(s.begin(), s.begin() + 4, [](char c) { return c >= '0' && c <= '9'; })) {
    const int year = std::stoi(s.substr(0, 4));
    if (year < 1678 || year > 2261)
      return InvalidArgumentError(Join(path, key) + ": time out of range");
  }
  auto t = ParseRfc3339(s);
  if (!t.ok()) return InvalidArgumentError(Join(path, key) + ": invalid RFC 3339 time");
  *out = *t;
  return OkStatus();
}

// Looks up an optional nested object; *found=false when absent or null.
Status ReadObject(Obj obj, std::string_view key, const std::string& path, Obj* out, bool* found) {
  *found = false;
  Elem e;
  if (!Lookup(obj, key, &e)) return OkStatus();
  if (e.get_object().get(*out) != simdjson::SUCCESS) return TypeError(Join(path, key), "object");
  *found = true;
  return OkStatus();
}

Status ReadArray(Obj obj, std::string_view key, const std::string& path, size_t max, Arr* out,
                 bool* found) {
  *found = false;
  Elem e;
  if (!Lookup(obj, key, &e)) return OkStatus();
  if (e.get_array().get(*out) != simdjson::SUCCESS) return TypeError(Join(path, key), "array");
  if (out->size() > max)
    return InvalidArgumentError(Join(path, key) + ": too many entries (" +
                                std::to_string(out->size()) + " > " + std::to_string(max) + ")");
  *found = true;
  return OkStatus();
}

Status ParseSourceState(std::string_view s, const std::string& path, SourceState* out) {
  if (s == "OK") {
    *out = SourceState::kOk;
  } else if (s == "Degraded") {
    *out = SourceState::kDegraded;
  } else if (s == "Unavailable") {
    *out = SourceState::kUnavailable;
  } else {
    return InvalidArgumentError(path + ": expected one of OK, Degraded, Unavailable");
  }
  return OkStatus();
}

Status DecodeMigDevices(Obj o, const std::string& path, GpuStatus* g) {
  Arr migs;
  bool found = false;
  GG_RETURN_IF_ERROR(ReadArray(o, "migDevices", path, kMaxMigDevices, &migs, &found));
  if (!found) return OkStatus();
  size_t i = 0;
  for (Elem m : migs) {
    const std::string p = path + ".migDevices[" + std::to_string(i) + "]";
    Obj mo;
    if (m.get_object().get(mo) != simdjson::SUCCESS) return TypeError(p, "object");
    MigDevice md;
    GG_RETURN_IF_ERROR(ReadInt(mo, "index", p, &md.index));
    GG_RETURN_IF_ERROR(ReadString(mo, "uuid", p, &md.uuid));
    GG_RETURN_IF_ERROR(ReadInt(mo, "gpuInstance", p, &md.gpu_instance));
    GG_RETURN_IF_ERROR(ReadInt(mo, "computeInstance", p, &md.compute_instance));
    GG_RETURN_IF_ERROR(ReadString(mo, "profile", p, &md.profile));
    GG_RETURN_IF_ERROR(ReadOptInt(mo, "memoryMiB", p, &md.memory_mib));
    g->mig_devices.push_back(std::move(md));
    ++i;
  }
  return OkStatus();
}

Status DecodeThrottleReasons(Obj o, const std::string& path, GpuStatus* g) {
  Arr reasons;
  bool found = false;
  GG_RETURN_IF_ERROR(ReadArray(o, "throttleReasons", path, kMaxThrottleReasons, &reasons, &found));
  if (!found) return OkStatus();
  size_t i = 0;
  for (Elem r : reasons) {
    std::string_view sv;
    if (r.get_string().get(sv) != simdjson::SUCCESS)
      return TypeError(path + ".throttleReasons[" + std::to_string(i) + "]", "string");
    g->throttle_reasons.emplace_back(sv);
    ++i;
  }
  return OkStatus();
}

// The error counters: ecc, remappedRows, retiredPages, pcieReplayCount and nvlink.
Status DecodeGpuCounters(Obj o, const std::string& path, GpuStatus* g) {
  Obj sub;
  bool found = false;
  GG_RETURN_IF_ERROR(ReadObject(o, "ecc", path, &sub, &found));
  if (found) {
    const std::string p = path + ".ecc";
    GG_RETURN_IF_ERROR(ReadOptInt(sub, "correctedVolatile", p, &g->ecc_corrected_volatile));
    GG_RETURN_IF_ERROR(ReadOptInt(sub, "uncorrectedVolatile", p, &g->ecc_uncorrected_volatile));
    GG_RETURN_IF_ERROR(ReadOptInt(sub, "correctedAggregate", p, &g->ecc_corrected_aggregate));
    GG_RETURN_IF_ERROR(ReadOptInt(sub, "uncorrectedAggregate", p, &g->ecc_uncorrected_aggregate));
  }
  GG_RETURN_IF_ERROR(ReadObject(o, "remappedRows", path, &sub, &found));
  if (found) {
    const std::string p = path + ".remappedRows";
    GG_RETURN_IF_ERROR(ReadOptInt(sub, "correctable", p, &g->remapped_rows_correctable));
    GG_RETURN_IF_ERROR(ReadOptInt(sub, "uncorrectable", p, &g->remapped_rows_uncorrectable));
    GG_RETURN_IF_ERROR(ReadBool(sub, "pending", p, &g->remap_pending));
    GG_RETURN_IF_ERROR(ReadBool(sub, "failure", p, &g->remap_failure));
  }
  GG_RETURN_IF_ERROR(ReadObject(o, "retiredPages", path, &sub, &found));
  if (found) {
    const std::string p = path + ".retiredPages";
    GG_RETURN_IF_ERROR(ReadOptInt(sub, "sbe", p, &g->retired_pages_sbe));
    GG_RETURN_IF_ERROR(ReadOptInt(sub, "dbe", p, &g->retired_pages_dbe));
    GG_RETURN_IF_ERROR(ReadBool(sub, "pending", p, &g->retired_pages_pending));
  }
  GG_RETURN_IF_ERROR(ReadOptInt(o, "pcieReplayCount", path, &g->pcie_replay_count));
  GG_RETURN_IF_ERROR(ReadObject(o, "nvlink", path, &sub, &found));
  if (found) {
    const std::string p = path + ".nvlink";
    GG_RETURN_IF_ERROR(ReadOptInt(sub, "linksTotal", p, &g->nvlink_links_total));
    GG_RETURN_IF_ERROR(ReadOptInt(sub, "linksDown", p, &g->nvlink_links_down));
    GG_RETURN_IF_ERROR(ReadOptInt(sub, "errorCount", p, &g->nvlink_error_count));
  }
  return OkStatus();
}

Status DecodeGpu(Elem elem, const std::string& path, GpuStatus* g) {
  Obj o;
  if (elem.get_object().get(o) != simdjson::SUCCESS) return TypeError(path, "object");
  GG_RETURN_IF_ERROR(ReadInt(o, "index", path, &g->index));
  GG_RETURN_IF_ERROR(ReadString(o, "uuid", path, &g->uuid));
  GG_RETURN_IF_ERROR(ReadString(o, "name", path, &g->name));
  GG_RETURN_IF_ERROR(ReadString(o, "serial", path, &g->serial));
  GG_RETURN_IF_ERROR(ReadString(o, "pciBusId", path, &g->pci_bus_id));
  GG_RETURN_IF_ERROR(ReadBool(o, "lost", path, &g->lost));
  GG_RETURN_IF_ERROR(ReadBool(o, "migEnabled", path, &g->mig_enabled));
  Elem e;
  if (Lookup(o, "migPendingEnabled", &e)) {
    bool b = false;
    if (e.get_bool().get(b) != simdjson::SUCCESS)
      return TypeError(Join(path, "migPendingEnabled"), "boolean");
    g->mig_pending_enabled = b;
  }
  GG_RETURN_IF_ERROR(DecodeMigDevices(o, path, g));
  GG_RETURN_IF_ERROR(ReadOptInt(o, "temperatureC", path, &g->temperature_c));
  GG_RETURN_IF_ERROR(ReadOptInt(o, "slowdownTemperatureC", path, &g->slowdown_temperature_c));
  GG_RETURN_IF_ERROR(ReadOptInt(o, "shutdownTemperatureC", path, &g->shutdown_temperature_c));
  GG_RETURN_IF_ERROR(DecodeThrottleReasons(o, path, g));
  GG_RETURN_IF_ERROR(ReadOptDouble(o, "powerWatts", path, &g->power_watts));
  GG_RETURN_IF_ERROR(ReadOptDouble(o, "powerLimitWatts", path, &g->power_limit_watts));
  GG_RETURN_IF_ERROR(ReadBool(o, "eccEnabled", path, &g->ecc_enabled));
  GG_RETURN_IF_ERROR(DecodeGpuCounters(o, path, g));
  GG_RETURN_IF_ERROR(ReadString(o, "recoveryAction", path, &g->recovery_action));
  return OkStatus();
}

Status DecodeXid(Elem elem, const std::string& path, XidEvent* x) {
  Obj o;
  if (elem.get_object().get(o) != simdjson::SUCCESS) return TypeError(path, "object");
  GG_RETURN_IF_ERROR(ReadInt(o, "xid", path, &x->xid));
  GG_RETURN_IF_ERROR(ReadBool(o, "sxid", path, &x->sxid));
  GG_RETURN_IF_ERROR(ReadString(o, "gpuUUID", path, &x->gpu_uuid));
  GG_RETURN_IF_ERROR(ReadString(o, "pciBusId", path, &x->pci_bus_id));
  GG_RETURN_IF_ERROR(ReadInt(o, "count", path, &x->count));
  GG_RETURN_IF_ERROR(ReadTime(o, "firstSeen", path, &x->first_seen));
  GG_RETURN_IF_ERROR(ReadTime(o, "lastSeen", path, &x->last_seen));
  GG_RETURN_IF_ERROR(ReadString(o, "category", path, &x->category));
  GG_RETURN_IF_ERROR(ReadString(o, "recommendedAction", path, &x->recommended_action));
  GG_RETURN_IF_ERROR(ReadString(o, "message", path, &x->message));
  GG_RETURN_IF_ERROR(ReadOptInt(o, "gpuInstance", path, &x->gpu_instance));
  GG_RETURN_IF_ERROR(ReadOptInt(o, "computeInstance", path, &x->compute_instance));
  return OkStatus();
}

Status DecodeSource(Elem elem, const std::string& path, SourceStatus* s) {
  Obj o;
  if (elem.get_object().get(o) != simdjson::SUCCESS) return TypeError(path, "object");
  GG_RETURN_IF_ERROR(ReadString(o, "name", path, &s->name));
  std::string state;
  GG_RETURN_IF_ERROR(ReadString(o, "state", path, &state));
  if (!state.empty()) GG_RETURN_IF_ERROR(ParseSourceState(state, path + ".state", &s->state));
  GG_RETURN_IF_ERROR(ReadString(o, "message", path, &s->message));
  return OkStatus();
}

Status DecodeStatusObject(Obj o, const std::string& path, GpuNodeHealthStatus* out) {
  GG_RETURN_IF_ERROR(ReadString(o, "nodeName", path, &out->node_name));
  GG_RETURN_IF_ERROR(ReadString(o, "agentVersion", path, &out->agent_version));
  GG_RETURN_IF_ERROR(ReadTime(o, "observedAt", path, &out->observed_at));
  GG_RETURN_IF_ERROR(ReadTime(o, "heartbeatTime", path, &out->heartbeat_time));
  GG_RETURN_IF_ERROR(ReadInt(o, "expectedGPUs", path, &out->expected_gpus));
  if (out->expected_gpus < 0)
    return InvalidArgumentError(path + ".expectedGPUs: must not be negative");

  Arr arr;
  bool found = false;
  GG_RETURN_IF_ERROR(ReadArray(o, "gpus", path, kMaxGpus, &arr, &found));
  if (found) {
    out->gpus.reserve(arr.size());
    size_t i = 0;
    for (Elem e : arr) {
      GpuStatus g;
      GG_RETURN_IF_ERROR(DecodeGpu(e, path + ".gpus[" + std::to_string(i) + "]", &g));
      out->gpus.push_back(std::move(g));
      ++i;
    }
  }
  GG_RETURN_IF_ERROR(ReadArray(o, "xids", path, kMaxXids, &arr, &found));
  if (found) {
    out->xids.reserve(arr.size());
    size_t i = 0;
    for (Elem e : arr) {
      XidEvent x;
      GG_RETURN_IF_ERROR(DecodeXid(e, path + ".xids[" + std::to_string(i) + "]", &x));
      out->xids.push_back(std::move(x));
      ++i;
    }
  }
  GG_RETURN_IF_ERROR(ReadArray(o, "sources", path, kMaxSources, &arr, &found));
  if (found) {
    size_t i = 0;
    for (Elem e : arr) {
      SourceStatus s;
      GG_RETURN_IF_ERROR(DecodeSource(e, path + ".sources[" + std::to_string(i) + "]", &s));
      out->sources.push_back(std::move(s));
      ++i;
    }
  }
  return OkStatus();
}

// Parses `text` and hands the top-level object to `fn`. The parser is per thread: decoding
// is called from informer threads in the operator.
template <typename Fn>
Status ParseTopObject(std::string_view text, const std::string& what, Fn&& fn) {
  if (text.size() > kMaxDocumentBytes)
    return InvalidArgumentError(what + ": document too large (" + std::to_string(text.size()) +
                                " bytes)");
  thread_local simdjson::dom::parser parser;
  simdjson::padded_string padded(text);
  Elem root;
  auto err = parser.parse(padded).get(root);
  if (err != simdjson::SUCCESS)
    return InvalidArgumentError(what + ": invalid JSON: " + simdjson::error_message(err));
  Obj o;
  if (root.get_object().get(o) != simdjson::SUCCESS) return TypeError(what, "object");
  return fn(o);
}

void PutOpt(Json& j, const char* key, const std::optional<int>& v) {
  if (v) j[key] = *v;
}
void PutOpt(Json& j, const char* key, const std::optional<uint32_t>& v) {
  if (v) j[key] = *v;
}
void PutOpt(Json& j, const char* key, const std::optional<uint64_t>& v) {
  if (v) j[key] = *v;
}
void PutOpt(Json& j, const char* key, const std::optional<double>& v) {
  if (v && std::isfinite(*v)) j[key] = *v;  // NaN/Inf have no JSON form
}
void PutStr(Json& j, const char* key, const std::string& v) {
  if (!v.empty()) j[key] = v;
}
void PutTime(Json& j, const char* key, WallTime t) {
  if (t != WallTime{}) j[key] = FormatRfc3339Micro(t);
}

Json EncodeGpu(const GpuStatus& g) {
  Json j = Json::object();
  j["index"] = g.index;
  PutStr(j, "uuid", g.uuid);
  PutStr(j, "name", g.name);
  PutStr(j, "serial", g.serial);
  PutStr(j, "pciBusId", g.pci_bus_id);
  if (g.lost) j["lost"] = true;
  if (g.mig_enabled) j["migEnabled"] = true;
  if (g.mig_pending_enabled) j["migPendingEnabled"] = *g.mig_pending_enabled;
  if (!g.mig_devices.empty()) {
    Json migs = Json::array();
    for (const auto& m : g.mig_devices) {
      Json mj = Json::object();
      mj["index"] = m.index;
      PutStr(mj, "uuid", m.uuid);
      mj["gpuInstance"] = m.gpu_instance;
      mj["computeInstance"] = m.compute_instance;
      PutStr(mj, "profile", m.profile);
      PutOpt(mj, "memoryMiB", m.memory_mib);
      migs.push_back(std::move(mj));
    }
    j["migDevices"] = std::move(migs);
  }
  PutOpt(j, "temperatureC", g.temperature_c);
  PutOpt(j, "slowdownTemperatureC", g.slowdown_temperature_c);
  PutOpt(j, "shutdownTemperatureC", g.shutdown_temperature_c);
  if (!g.throttle_reasons.empty()) j["throttleReasons"] = g.throttle_reasons;
  PutOpt(j, "powerWatts", g.power_watts);
  PutOpt(j, "powerLimitWatts", g.power_limit_watts);
  j["eccEnabled"] = g.ecc_enabled;
  Json ecc = Json::object();
  PutOpt(ecc, "correctedVolatile", g.ecc_corrected_volatile);
  PutOpt(ecc, "uncorrectedVolatile", g.ecc_uncorrected_volatile);
  PutOpt(ecc, "correctedAggregate", g.ecc_corrected_aggregate);
  PutOpt(ecc, "uncorrectedAggregate", g.ecc_uncorrected_aggregate);
  if (!ecc.empty()) j["ecc"] = std::move(ecc);
  if (g.remapped_rows_correctable || g.remapped_rows_uncorrectable || g.remap_pending ||
      g.remap_failure) {
    Json rr = Json::object();
    PutOpt(rr, "correctable", g.remapped_rows_correctable);
    PutOpt(rr, "uncorrectable", g.remapped_rows_uncorrectable);
    rr["pending"] = g.remap_pending;
    rr["failure"] = g.remap_failure;
    j["remappedRows"] = std::move(rr);
  }
  if (g.retired_pages_sbe || g.retired_pages_dbe || g.retired_pages_pending) {
    Json rp = Json::object();
    PutOpt(rp, "sbe", g.retired_pages_sbe);
    PutOpt(rp, "dbe", g.retired_pages_dbe);
    rp["pending"] = g.retired_pages_pending;
    j["retiredPages"] = std::move(rp);
  }
  PutOpt(j, "pcieReplayCount", g.pcie_replay_count);
  Json nv = Json::object();
  PutOpt(nv, "linksTotal", g.nvlink_links_total);
  PutOpt(nv, "linksDown", g.nvlink_links_down);
  PutOpt(nv, "errorCount", g.nvlink_error_count);
  if (!nv.empty()) j["nvlink"] = std::move(nv);
  PutStr(j, "recoveryAction", g.recovery_action);
  return j;
}

Json EncodeXid(const XidEvent& x) {
  Json j = Json::object();
  j["xid"] = x.xid;
  if (x.sxid) j["sxid"] = true;
  PutStr(j, "gpuUUID", x.gpu_uuid);
  PutStr(j, "pciBusId", x.pci_bus_id);
  j["count"] = x.count;
  PutTime(j, "firstSeen", x.first_seen);
  PutTime(j, "lastSeen", x.last_seen);
  PutStr(j, "category", x.category);
  PutStr(j, "recommendedAction", x.recommended_action);
  PutStr(j, "message", x.message);
  PutOpt(j, "gpuInstance", x.gpu_instance);
  PutOpt(j, "computeInstance", x.compute_instance);
  return j;
}

void EncodeStatusInto(const GpuNodeHealthStatus& s, Json& j) {
  PutStr(j, "nodeName", s.node_name);
  PutStr(j, "agentVersion", s.agent_version);
  PutTime(j, "observedAt", s.observed_at);
  PutTime(j, "heartbeatTime", s.heartbeat_time);
  j["expectedGPUs"] = s.expected_gpus;
  Json gpus = Json::array();
  for (const auto& g : s.gpus) gpus.push_back(EncodeGpu(g));
  j["gpus"] = std::move(gpus);
  Json xids = Json::array();
  for (const auto& x : s.xids) xids.push_back(EncodeXid(x));
  j["xids"] = std::move(xids);
  Json sources = Json::array();
  for (const auto& src : s.sources) {
    Json o = Json::object();
    o["name"] = src.name;
    o["state"] = std::string(SourceStateName(src.state));
    PutStr(o, "message", src.message);
    sources.push_back(std::move(o));
  }
  j["sources"] = std::move(sources);
}

// Strings come from NVML and the kernel log; invalid UTF-8 is replaced rather than thrown.
std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

}  // namespace

StatusOr<GpuNodeHealthStatus> DecodeGpuNodeHealthStatus(std::string_view status_json) {
  GpuNodeHealthStatus out;
  GG_RETURN_IF_ERROR(ParseTopObject(status_json, "status",
                                    [&](Obj o) { return DecodeStatusObject(o, "status", &out); }));
  return out;
}

std::string EncodeGpuNodeHealthStatus(const GpuNodeHealthStatus& status) {
  Json j = Json::object();
  EncodeStatusInto(status, j);
  return Dump(j);
}

StatusOr<GpuNodeHealthStatus> DecodeHealthAnnotation(std::string_view annotation) {
  GpuNodeHealthStatus out;
  GG_RETURN_IF_ERROR(ParseTopObject(annotation, "annotation", [&](Obj o) -> Status {
    // Absent "v" is read as version 1 (the first versioned payload had the same fields).
    int v = 1;
    GG_RETURN_IF_ERROR(ReadInt(o, "v", "annotation", &v));
    if (v != 1)
      return InvalidArgumentError("annotation.v: unsupported version " + std::to_string(v));
    return DecodeStatusObject(o, "annotation", &out);
  }));
  return out;
}

std::string EncodeHealthAnnotation(const GpuNodeHealthStatus& status) {
  Json j = Json::object();
  j["v"] = 1;
  EncodeStatusInto(status, j);
  return Dump(j);
}

}  // namespace gg::api
