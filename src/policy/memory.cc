// EvalMemory JSON codec (nlohmann, no exceptions escape) and a bounded JSON parse helper.
#include "policy/memory.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <tuple>

#include "common/time_util.h"

namespace gg::policy {

std::string_view HealthStateName(HealthState s) {
  switch (s) {
    case HealthState::kHealthy:
      return "Healthy";
    case HealthState::kUnhealthy:
      return "Unhealthy";
    case HealthState::kUnknown:
      return "Unknown";
  }
  return "Unknown";
}

std::optional<HealthState> ParseHealthState(std::string_view s) {
  if (s == "Healthy") return HealthState::kHealthy;
  if (s == "Unhealthy") return HealthState::kUnhealthy;
  if (s == "Unknown") return HealthState::kUnknown;
  return std::nullopt;
}

Status ParseJsonBounded(std::string_view text, nlohmann::json& out) {
  if (text.size() > (1u << 20)) return InvalidArgumentError("JSON document larger than 1 MiB");
  int depth = 0;
  bool in_string = false;
  bool escape = false;
  for (char c : text) {
    if (in_string) {
      if (escape) {
        escape = false;
      } else if (c == '\\') {
        escape = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') in_string = true;
    if (c == '{' || c == '[') {
      if (++depth > 32) return InvalidArgumentError("JSON nested deeper than 32 levels");
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  out = nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (out.is_discarded()) return InvalidArgumentError("invalid JSON");
  return OkStatus();
}

void EvalMemoryToJson(const EvalMemory& m, nlohmann::json& out) {
  out = nlohmann::json::object();
  if (m.state) out["state"] = std::string(HealthStateName(*m.state));
  if (m.since) out["since"] = FormatRfc3339(*m.since);
  if (!m.matches.empty()) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& mm : m.matches) {
      nlohmann::json e = {{"rule", mm.rule}, {"key", mm.key}, {"since", FormatRfc3339(mm.since)}};
      if (mm.latched) e["latched"] = true;
      if (!mm.samples.empty()) {
        nlohmann::json samples = nlohmann::json::array();
        for (const auto& s : mm.samples) {
          samples.push_back({{"at", FormatRfc3339(s.at)}, {"v", s.value}});
        }
        e["samples"] = std::move(samples);
      }
      arr.push_back(std::move(e));
    }
    out["matches"] = std::move(arr);
  }
}

namespace {

Status GetTime(const nlohmann::json& j, const std::string& path, WallTime* out) {
  if (!j.is_string()) return InvalidArgumentError(path + ": expected RFC 3339 string");
  auto t = ParseRfc3339(j.get_ref<const std::string&>());
  if (!t.ok()) return InvalidArgumentError(path + ": invalid RFC 3339 time");
  *out = *t;
  return OkStatus();
}

// [{"at": RFC 3339, "v": count}, ...], at most kMaxCounterSamples.
Status GetSamples(const nlohmann::json& j, const std::string& path,
                  std::vector<CounterSample>* out) {
  if (!j.is_array()) return InvalidArgumentError(path + ": expected array");
  if (j.size() > kMaxCounterSamples) {
    return InvalidArgumentError(path + ": more than " + std::to_string(kMaxCounterSamples) +
                                " samples");
  }
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string p = path + "[" + std::to_string(i) + "]";
    const auto& e = j[i];
    if (!e.is_object()) return InvalidArgumentError(p + ": expected object");
    CounterSample s;
    auto at = e.find("at");
    if (at == e.end()) return InvalidArgumentError(p + ".at: required");
    GG_RETURN_IF_ERROR(GetTime(*at, p + ".at", &s.at));
    auto v = e.find("v");
    if (v == e.end() || !v->is_number_unsigned()) {
      return InvalidArgumentError(p + ".v: expected non-negative integer");
    }
    s.value = v->get<uint64_t>();
    out->push_back(s);
  }
  return OkStatus();
}

}  // namespace

StatusOr<EvalMemory> EvalMemoryFromJson(const nlohmann::json& j, const std::string& path) {
  if (!j.is_object()) return InvalidArgumentError(path + ": expected object");
  EvalMemory m;
  if (auto it = j.find("state"); it != j.end() && !it->is_null()) {
    if (!it->is_string()) return InvalidArgumentError(path + ".state: expected string");
    auto s = ParseHealthState(it->get_ref<const std::string&>());
    if (!s) return InvalidArgumentError(path + ".state: must be Healthy, Unhealthy or Unknown");
    m.state = *s;
  }
  if (auto it = j.find("since"); it != j.end() && !it->is_null()) {
    WallTime t;
    GG_RETURN_IF_ERROR(GetTime(*it, path + ".since", &t));
    m.since = t;
  }
  if (auto it = j.find("matches"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) return InvalidArgumentError(path + ".matches: expected array");
    for (size_t i = 0; i < it->size(); ++i) {
      const auto& e = (*it)[i];
      std::string p = path + ".matches[" + std::to_string(i) + "]";
      if (!e.is_object()) return InvalidArgumentError(p + ": expected object");
      MatchMemory mm;
      auto rule = e.find("rule");
      auto key = e.find("key");
      auto since = e.find("since");
      if (rule == e.end() || !rule->is_string())
        return InvalidArgumentError(p + ".rule: expected string");
      if (key == e.end() || !key->is_string())
        return InvalidArgumentError(p + ".key: expected string");
      if (since == e.end()) return InvalidArgumentError(p + ".since: required");
      mm.rule = rule->get<std::string>();
      mm.key = key->get<std::string>();
      GG_RETURN_IF_ERROR(GetTime(*since, p + ".since", &mm.since));
      if (auto l = e.find("latched"); l != e.end() && !l->is_null()) {
        if (!l->is_boolean()) return InvalidArgumentError(p + ".latched: expected boolean");
        mm.latched = l->get<bool>();
      }
      if (auto s = e.find("samples"); s != e.end() && !s->is_null()) {
        GG_RETURN_IF_ERROR(GetSamples(*s, p + ".samples", &mm.samples));
      }
      m.matches.push_back(std::move(mm));
    }
    std::sort(m.matches.begin(), m.matches.end(), [](const MatchMemory& a, const MatchMemory& b) {
      return std::tie(a.rule, a.key) < std::tie(b.rule, b.key);
    });
  }
  return m;
}

std::string EncodeEvalMemory(const EvalMemory& m) {
  nlohmann::json j;
  EvalMemoryToJson(m, j);
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

StatusOr<EvalMemory> DecodeEvalMemory(std::string_view json) {
  nlohmann::json j;
  GG_RETURN_IF_ERROR(ParseJsonBounded(json, j));
  return EvalMemoryFromJson(j, "memory");
}

}  // namespace gg::policy
