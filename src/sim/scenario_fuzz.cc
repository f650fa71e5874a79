// libFuzzer target for scenario files (yaml-cpp → validated JSON → objects): any text gives a
// Scenario or a Status with the YAML line, never a crash. Scenarios that validate are also
// emitted when small, so the expansion (node counts, pod placement, PDBs) runs on fuzzed input.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "sim/scenario.h"

namespace {

// Rough size of what EmitScenario would create; large (valid) scenarios only cost time.
long long Size(const nlohmann::json& doc) {
  long long n = 0;
  auto num = [](const nlohmann::json& o, const char* k, long long def) -> long long {
    auto it = o.find(k);
    return it != o.end() && it->is_number_integer() ? it->get<long long>() : def;
  };
  if (auto p = doc.find("population"); p != doc.end() && p->is_object())
    n += num(*p, "nodes", 0) * (1 + num(*p, "podsPerNode", 0));
  if (auto ns = doc.find("nodes"); ns != doc.end() && ns->is_array())
    for (const auto& node : *ns) n += node.is_object() ? num(node, "count", 1) : 1;
  if (auto ws = doc.find("workloads"); ws != doc.end() && ws->is_array())
    for (const auto& w : *ws) n += w.is_object() ? num(w, "replicas", 1) : 1;
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;
  auto s = gg::sim::ParseScenario(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!s.ok() || Size(s->doc) > 500) return 0;
  std::size_t objects = 0;
  (void)gg::sim::EmitScenario(*s, [&](nlohmann::json&& obj) {
    ++objects;
    return obj.is_object() ? gg::OkStatus() : gg::InvalidArgumentError("not an object");
  });
  return 0;
}
