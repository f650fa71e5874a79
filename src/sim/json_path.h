// Reading the value at a path of object keys in a JSON document.
#pragma once

#include <initializer_list>
#include <nlohmann/json.hpp>

namespace gg::sim {

// The value at `keys` below `obj`; a null value when a step is missing or not an object.
inline const nlohmann::json& JsonAt(const nlohmann::json& obj,
                                    std::initializer_list<const char*> keys) {
  static const nlohmann::json kNull;
  const nlohmann::json* cur = &obj;
  for (const char* k : keys) {
    if (!cur->is_object()) return kNull;
    auto it = cur->find(k);
    if (it == cur->end()) return kNull;
    cur = &*it;
  }
  return *cur;
}

}  // namespace gg::sim
