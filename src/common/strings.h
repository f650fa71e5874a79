// Small string helpers shared by every layer (one definition each).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gg {

// ASCII lower case (header names, metric labels, catalog keys); other bytes unchanged.
std::string Lower(std::string_view s);

// `s` without leading and trailing ASCII whitespace (space, \t, \n, \v, \f, \r).
std::string_view TrimSpace(std::string_view s);

// "a<sep>b<sep>c"; "" for no parts.
std::string Join(const std::vector<std::string>& parts, std::string_view sep);

}  // namespace gg
