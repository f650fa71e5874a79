// Helpers for the simulator's API layer.
#include "sim/api_util.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>

namespace gg::sim {

std::vector<std::string> SplitPath(std::string_view path) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < path.size()) {
    std::size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    if (j > i) out.emplace_back(path.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

std::string MediaType(std::string_view ct) {
  auto semi = ct.find(';');
  std::string s(ct.substr(0, semi));
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.erase(s.begin());
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

namespace {

nlohmann::json NodeToJson(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Sequence: {
      nlohmann::json a = nlohmann::json::array();
      for (const auto& e : n) a.push_back(NodeToJson(e));
      return a;
    }
    case YAML::NodeType::Map: {
      nlohmann::json o = nlohmann::json::object();
      for (const auto& kv : n) o[kv.first.as<std::string>()] = NodeToJson(kv.second);
      return o;
    }
    case YAML::NodeType::Scalar: {
      const std::string& s = n.Scalar();
      if (n.Tag() == "!") return s;  // quoted
      if (s == "true" || s == "True" || s == "TRUE") return true;
      if (s == "false" || s == "False" || s == "FALSE") return false;
      if (s == "null" || s == "~" || s == "Null" || s == "NULL") return nullptr;
      if (!s.empty() &&
          (std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '-' || s[0] == '+')) {
        try {
          std::size_t pos = 0;
          long long v = std::stoll(s, &pos);
          if (pos == s.size()) return v;
          double d = std::stod(s, &pos);
          if (pos == s.size()) return d;
        } catch (...) {
        }
      }
      return s;
    }
  }
  return nullptr;
}

}  // namespace

StatusOr<nlohmann::json> YamlToJson(std::string_view text) {
  try {
    // JSON is YAML; parse it as JSON first to keep numbers and strings exact.
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (!j.is_discarded()) return j;
    YAML::Node n = YAML::Load(std::string(text));
    return NodeToJson(n);
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string("yaml: ") + e.what());
  }
}

namespace {
constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
}

std::string B64Encode(std::string_view s) {
  std::string out;
  unsigned val = 0;
  int bits = -6;
  for (unsigned char c : s) {
    val = (val << 8) + c;
    bits += 8;
    while (bits >= 0) {
      out.push_back(kB64[(val >> bits) & 0x3F]);
      bits -= 6;
    }
  }
  if (bits > -6) out.push_back(kB64[((val << 8) >> (bits + 8)) & 0x3F]);
  return out;
}

StatusOr<std::string> B64Decode(std::string_view s) {
  std::string out;
  unsigned val = 0;
  int bits = -8;
  for (char c : s) {
    const char* p = std::find(kB64, kB64 + 64, c);
    if (p == kB64 + 64) {
      if (c == '=') break;
      return InvalidArgumentError("invalid base64");
    }
    val = (val << 6) + static_cast<unsigned>(p - kB64);
    bits += 6;
    if (bits >= 0) {
      out.push_back(static_cast<char>((val >> bits) & 0xFF));
      bits -= 8;
    }
  }
  return out;
}

std::string DoubleQuote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

}  // namespace gg::sim
