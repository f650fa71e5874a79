// Fence units for device-level remediation (see fence_units.h).
#include "remediation/fence_units.h"

#include <algorithm>

namespace gg::remediation {
namespace {

bool InInstances(const api::MigDevice& d, const std::vector<policy::MigInstance>& instances) {
  for (const auto& i : instances) {
    if (i.gpu_instance != d.gpu_instance) continue;
    if (!i.compute_instance || *i.compute_instance == d.compute_instance) return true;
  }
  return false;
}

// The MIG instances every fired match on `gpu` is confined to; nullopt when one concerns the
// whole GPU.
std::optional<std::vector<policy::MigInstance>> ConfinedInstances(const policy::Verdict& v,
                                                                  const std::string& gpu) {
  std::vector<policy::MigInstance> out;
  for (const auto& e : v.evidence) {
    if (e.action == api::Action::kNone || e.gpu_uuid != gpu) continue;
    if (e.mig_instances.empty()) return std::nullopt;
    out.insert(out.end(), e.mig_instances.begin(), e.mig_instances.end());
  }
  return out;
}

void AddGpuUnits(const std::string& uuid, const api::GpuStatus* g,
                 const std::vector<policy::MigInstance>* instances, std::vector<FenceUnit>& out) {
  if (!g || !g->mig_enabled || g->mig_devices.empty()) {
    out.push_back({uuid, uuid, false});
    return;
  }
  std::vector<FenceUnit> mig;
  for (const auto& d : g->mig_devices) {
    if (d.uuid.empty()) continue;
    if (instances && !InInstances(d, *instances)) continue;
    mig.push_back({d.uuid, uuid, false});
  }
  if (instances && mig.empty()) {  // an instance the report does not list: the whole GPU
    AddGpuUnits(uuid, g, nullptr, out);
    return;
  }
  if (!instances) out.push_back({uuid, uuid, true});
  out.insert(out.end(), mig.begin(), mig.end());
}

}  // namespace

std::vector<FenceUnit> FenceUnitsFor(const policy::Verdict& v,
                                     const api::GpuNodeHealthStatus& report) {
  std::vector<FenceUnit> out;
  if (v.state != policy::HealthState::kUnhealthy || v.node_wide) return out;
  for (const auto& uuid : v.bad_gpus) {
    const api::GpuStatus* gpu = nullptr;
    for (const auto& g : report.gpus) {
      if (g.uuid == uuid) gpu = &g;
    }
    auto instances = ConfinedInstances(v, uuid);
    AddGpuUnits(uuid, gpu, instances ? &*instances : nullptr, out);
  }
  return out;
}

std::vector<FenceUnit> PublishedFenceUnits(const std::vector<FenceUnit>& units,
                                           const std::set<std::string>& published,
                                           std::vector<std::string>* missing) {
  std::vector<FenceUnit> out;
  for (const auto& u : units) {
    if (published.contains(u.uuid)) {
      out.push_back(u);
    } else if (!u.optional && missing) {
      missing->push_back(u.uuid);
    }
  }
  return out;
}

}  // namespace gg::remediation
