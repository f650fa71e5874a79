// BuildReport implementation (see report_builder.h).
#include "agent/report_builder.h"

#include <algorithm>
#include <set>

namespace gg::agent {
namespace {
constexpr std::size_t kMaxSourceMessageBytes = 1024;
}  // namespace

api::GpuNodeHealthStatus BuildReport(const ReportInputs& in, WallTime now) {
  api::GpuNodeHealthStatus r;
  r.node_name = in.node_name;
  r.agent_version = in.agent_version;
  r.observed_at = now;
  r.expected_gpus = in.expected_gpus;
  std::set<std::string> seen;
  for (const auto& snap : in.snapshots) {
    r.sources.push_back(snap.status);
    // The CRD bounds source messages (1024); an NVML or parse error must not make the
    // whole write fail validation.
    if (r.sources.back().message.size() > kMaxSourceMessageBytes)
      r.sources.back().message.resize(kMaxSourceMessageBytes);
    if (!snap.provides_gpus) continue;
    for (const auto& g : snap.gpus) {
      std::string key = g.uuid.empty() ? "#" + std::to_string(g.index) : g.uuid;
      if (!seen.insert(key).second) continue;
      r.gpus.push_back(g);
    }
  }
  std::stable_sort(
      r.gpus.begin(), r.gpus.end(),
      [](const api::GpuStatus& a, const api::GpuStatus& b) { return a.index < b.index; });
  r.xids = in.xids;
  return r;
}

}  // namespace gg::agent
