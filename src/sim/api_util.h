// Small helpers of the simulator's HTTP/API layer: path splitting, media types, YAML to
// JSON, base64 continue tokens.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace gg::sim {

std::vector<std::string> SplitPath(std::string_view path);
// "application/json; charset=utf-8" -> "application/json" (lower-cased).
std::string MediaType(std::string_view content_type);
// First YAML document as JSON (yaml-cpp); InvalidArgument with the parser's message.
StatusOr<nlohmann::json> YamlToJson(std::string_view text);
std::string B64Encode(std::string_view s);
// s in double quotes with `"` and `\` escaped and newlines as \n: Go's %q for the messages
// we copy, and a double-quoted YAML scalar for the kubeconfig.
std::string DoubleQuote(std::string_view s);
StatusOr<std::string> B64Decode(std::string_view s);

}  // namespace gg::sim
