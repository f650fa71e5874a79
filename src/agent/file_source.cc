// FileSource implementation (see file_source.h).
#include "agent/file_source.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>
#include <vector>

#include "api/gpu_node_health.h"

namespace gg::agent {
namespace {
constexpr std::size_t kMaxFileBytes = 4u << 20;

using Keys = std::vector<std::string_view>;
const Keys kTopKeys = {"nodeName",     "agentVersion", "observedAt", "heartbeatTime",
                       "expectedGPUs", "gpus",         "xids",       "sources"};
const Keys kGpuKeys = {"index",
                       "uuid",
                       "name",
                       "serial",
                       "pciBusId",
                       "lost",
                       "migEnabled",
                       "migPendingEnabled",
                       "migDevices",
                       "temperatureC",
                       "slowdownTemperatureC",
                       "shutdownTemperatureC",
                       "throttleReasons",
                       "powerWatts",
                       "powerLimitWatts",
                       "eccEnabled",
                       "ecc",
                       "remappedRows",
                       "retiredPages",
                       "pcieReplayCount",
                       "nvlink",
                       "recoveryAction"};
const Keys kEccKeys = {"correctedVolatile", "uncorrectedVolatile", "correctedAggregate",
                       "uncorrectedAggregate"};
const Keys kRemapKeys = {"correctable", "uncorrectable", "pending", "failure"};
const Keys kRetiredKeys = {"sbe", "dbe", "pending"};
const Keys kNvlinkKeys = {"linksTotal", "linksDown", "errorCount"};
const Keys kXidKeys = {"xid",         "sxid",           "gpuUUID",  "pciBusId",          "count",
                       "firstSeen",   "lastSeen",       "category", "recommendedAction", "message",
                       "gpuInstance", "computeInstance"};
const Keys kMigKeys = {"index", "uuid", "gpuInstance", "computeInstance", "profile", "memoryMiB"};
const Keys kSourceKeys = {"name", "state", "message"};

// Levenshtein distance, for "did you mean" (keys are short).
std::size_t Distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// The file is hand-edited: a misspelled key must not silently mean "no GPUs". The report
// decoder ignores unknown fields (other agents' reports may be newer); here they are errors.
std::string UnknownField(const nlohmann::json& obj, const Keys& known, const std::string& path) {
  if (!obj.is_object()) return {};
  for (const auto& [key, value] : obj.items()) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    std::string msg = "unknown field \"" + key + "\"";
    if (!path.empty()) msg += " in " + path;
    std::string_view best;
    std::size_t best_d = 3;
    for (std::string_view k : known)
      if (std::size_t d = Distance(key, k); d < best_d) best = k, best_d = d;
    if (!best.empty()) msg += " (did you mean \"" + std::string(best) + "\"?)";
    return msg;
  }
  return {};
}

std::string CheckFields(const nlohmann::json& doc) {
  if (auto e = UnknownField(doc, kTopKeys, ""); !e.empty()) return e;
  auto each =
      [](const nlohmann::json& doc, const char* list, const Keys& keys,
         const std::function<std::string(const nlohmann::json&, const std::string&)>& nested)
      -> std::string {
    if (!doc.contains(list) || !doc[list].is_array()) return {};
    std::size_t i = 0;
    for (const auto& item : doc[list]) {
      const std::string path = std::string(list) + "[" + std::to_string(i++) + "]";
      if (auto e = UnknownField(item, keys, path); !e.empty()) return e;
      if (nested) {
        if (auto e = nested(item, path); !e.empty()) return e;
      }
    }
    return {};
  };
  auto gpu_nested = [](const nlohmann::json& g, const std::string& path) -> std::string {
    const std::pair<const char*, const Keys*> subs[] = {{"ecc", &kEccKeys},
                                                        {"remappedRows", &kRemapKeys},
                                                        {"retiredPages", &kRetiredKeys},
                                                        {"nvlink", &kNvlinkKeys}};
    for (const auto& [name, keys] : subs)
      if (g.contains(name))
        if (auto e = UnknownField(g[name], *keys, path + "." + name); !e.empty()) return e;
    if (g.contains("migDevices") && g["migDevices"].is_array()) {
      std::size_t m = 0;
      for (const auto& md : g["migDevices"]) {
        const std::string p = path + ".migDevices[" + std::to_string(m++) + "]";
        if (auto e = UnknownField(md, kMigKeys, p); !e.empty()) return e;
      }
    }
    return {};
  };
  if (auto e = each(doc, "gpus", kGpuKeys, gpu_nested); !e.empty()) return e;
  if (auto e = each(doc, "xids", kXidKeys, nullptr); !e.empty()) return e;
  return each(doc, "sources", kSourceKeys, nullptr);
}

}  // namespace

FileSource::FileSource(Clock& clock, FileSourceOptions options)
    : clock_(clock), options_(std::move(options)), waker_(clock) {
  snapshot_.provides_gpus = true;
  snapshot_.status = {"file", api::SourceState::kUnavailable, "not read yet"};
}

FileSource::~FileSource() { Stop(); }

bool FileSource::Check(const SourceContext& ctx, bool force) {
  std::scoped_lock check_lock(check_mu_);
  struct stat st {};
  auto set_status = [&](api::SourceState state, std::string msg) {
    std::scoped_lock lock(mu_);
    if (snapshot_.status.state == state && snapshot_.status.message == msg) return false;
    snapshot_.status.state = state;
    snapshot_.status.message = std::move(msg);
    return true;
  };
  if (::stat(options_.path.c_str(), &st) != 0) {
    have_id_ = false;
    return set_status(api::SourceState::kUnavailable,
                      "stat " + options_.path + ": " + std::strerror(errno));
  }
  FileId id{static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec,
            static_cast<int64_t>(st.st_size), static_cast<uint64_t>(st.st_ino)};
  if (!force && have_id_ && id == last_id_) return false;
  last_id_ = id;
  have_id_ = true;
  if (st.st_size > static_cast<off_t>(kMaxFileBytes))
    return set_status(api::SourceState::kDegraded,
                      "read " + options_.path + ": file larger than 4 MiB");
  std::ifstream in(options_.path, std::ios::binary);
  if (!in)
    return set_status(api::SourceState::kUnavailable,
                      "open " + options_.path + ": " + std::strerror(errno));
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  auto parsed = api::DecodeGpuNodeHealthStatus(text);
  if (parsed.ok()) {
    // Decoded: now hold it to the exact field names.
    std::string unknown = CheckFields(nlohmann::json::parse(text, nullptr, false));
    if (!unknown.empty())
      return set_status(api::SourceState::kDegraded, "parse " + options_.path + ": " + unknown);
  }
  if (!parsed.ok()) {
    // Keep the last good GPUs: a half-saved edit must not make GPUs vanish.
    return set_status(api::SourceState::kDegraded,
                      "parse " + options_.path + ": " + parsed.status().message());
  }
  const WallTime now = clock_.Now();
  for (auto x : parsed->xids) {
    if (x.count <= 0) x.count = 1;
    auto key = std::make_tuple(x.xid, x.sxid, x.gpu_uuid, x.pci_bus_id);
    int64_t& seen = xid_counts_[key];
    if (x.count <= seen) continue;
    api::XidEvent delta = x;
    delta.count = x.count - seen;
    seen = x.count;
    if (delta.last_seen == WallTime{}) delta.last_seen = now;
    if (delta.first_seen == WallTime{}) delta.first_seen = delta.last_seen;
    if (ctx.on_xid) ctx.on_xid(delta, "file");
  }
  std::scoped_lock lock(mu_);
  snapshot_.gpus = std::move(parsed->gpus);
  snapshot_.clock_event_masks.assign(snapshot_.gpus.size(), 0);
  snapshot_.status.state = api::SourceState::kOk;
  snapshot_.status.message.clear();
  ++reloads_;
  return true;
}

void FileSource::Start(const SourceContext& ctx, std::stop_token stop) {
  if (thread_.joinable()) return;
  thread_ = std::jthread([this, ctx](std::stop_token own) {
    while (!own.stop_requested()) {
      if (Check(ctx, false) && ctx.on_change) ctx.on_change();
      waker_.Wait(options_.poll_interval, own);
    }
  });
  forward_stop_ = std::make_unique<StopForward>(stop, [this] {
    thread_.request_stop();
    waker_.Notify();
  });
}

void FileSource::Stop() {
  forward_stop_.reset();
  if (thread_.joinable()) {
    thread_.request_stop();
    waker_.Notify();
    thread_.join();
  }
}

void FileSource::PollOnce(const SourceContext& ctx) { Check(ctx, false); }

SourceSnapshot FileSource::Snapshot() const {
  std::scoped_lock lock(mu_);
  return snapshot_;
}

uint64_t FileSource::reloads() const {
  std::scoped_lock lock(mu_);
  return reloads_;
}

}  // namespace gg::agent
