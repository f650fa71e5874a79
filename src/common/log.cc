// Logger implementation.
#include "common/log.h"

#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>

#include "common/time_util.h"

namespace gg {
namespace {

class StderrSink final : public LogSink {
 public:
  void Write(std::string_view line) override {
    std::scoped_lock lock(mu_);
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fputc('\n', stderr);
    std::fflush(stderr);
  }

 private:
  std::mutex mu_;
};

struct Globals {
  std::atomic<int> level{static_cast<int>(LogLevel::kInfo)};
  std::atomic<int> format{static_cast<int>(LogFormat::kText)};
  std::mutex mu;
  std::shared_ptr<LogSink> sink = std::make_shared<StderrSink>();
};

Globals& G() {
  static Globals* g = new Globals();
  return *g;
}

std::string JsonEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
  return out;
}

std::string_view LevelName(LogLevel l) {
  switch (l) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

bool NeedsQuote(std::string_view s) {
  if (s.empty()) return true;
  for (char c : s)
    if (c == ' ' || c == '"' || c == '=' || static_cast<unsigned char>(c) < 0x20) return true;
  return false;
}

}  // namespace

std::string LogValue::Text() const {
  switch (kind_) {
    case Kind::kString:
      return str_;
    case Kind::kInt:
      return std::to_string(int_);
    case Kind::kBool:
      return int_ ? "true" : "false";
    case Kind::kDouble: {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%g", dbl_);
      return buf;
    }
  }
  return {};
}

std::string LogValue::Json() const {
  if (kind_ == Kind::kString) return JsonEscape(str_);
  if (kind_ == Kind::kDouble && (dbl_ != dbl_ || dbl_ > 1e308 || dbl_ < -1e308)) return "null";
  return Text();
}

bool IsSecretKey(std::string_view key) {
  std::string k;
  for (char c : key) k += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (std::string_view needle : {"token", "authorization", "password", "secret", "key-data",
                                  "keydata", "bearer", "cookie"}) {
    if (k.find(needle) != std::string::npos) return true;
  }
  return false;
}

Logger::Logger() = default;
Logger::Logger(std::shared_ptr<LogSink> sink) : sink_(std::move(sink)) {}

Logger Logger::WithValues(LogFields fields) const {
  Logger l = *this;
  for (const auto& [k, v] : fields) l.fields_.emplace_back(std::string(k), v);
  return l;
}

Logger Logger::WithName(std::string_view name) const {
  Logger l = *this;
  l.name_ = l.name_.empty() ? std::string(name) : l.name_ + "." + std::string(name);
  return l;
}

bool Logger::Enabled(LogLevel level) const {
  return static_cast<int>(level) >= G().level.load(std::memory_order_relaxed);
}

void Logger::Log(LogLevel level, std::string_view msg, LogFields fields) const {
  if (!Enabled(level)) return;
  const bool json =
      G().format.load(std::memory_order_relaxed) == static_cast<int>(LogFormat::kJson);
  std::string ts = FormatRfc3339Micro(std::chrono::system_clock::now());
  std::string line;
  auto add = [&](std::string_view k, const LogValue& v) {
    std::string rendered = IsSecretKey(k) ? std::string("[REDACTED]") : std::string();
    if (json) {
      line += ',';
      line += JsonEscape(k);
      line += ':';
      line += rendered.empty() ? v.Json() : JsonEscape(rendered);
    } else {
      line += ' ';
      line += k;
      line += '=';
      std::string t = rendered.empty() ? v.Text() : rendered;
      line += NeedsQuote(t) ? JsonEscape(t) : t;
    }
  };
  if (json) {
    line = "{\"ts\":" + JsonEscape(ts) + ",\"level\":" + JsonEscape(LevelName(level));
    if (!name_.empty()) line += ",\"logger\":" + JsonEscape(name_);
    line += ",\"msg\":" + JsonEscape(msg);
  } else {
    line = ts + " " + std::string(LevelName(level));
    if (!name_.empty()) line += " [" + name_ + "]";
    line += " " + std::string(msg);
  }
  for (const auto& [k, v] : fields_) add(k, v);
  for (const auto& [k, v] : fields) add(k, v);
  if (json) line += '}';
  std::shared_ptr<LogSink> sink = sink_;
  if (!sink) {
    std::scoped_lock lock(G().mu);
    sink = G().sink;
  }
  sink->Write(line);
}

void Logger::SetGlobalLevel(LogLevel level) { G().level = static_cast<int>(level); }
void Logger::SetGlobalFormat(LogFormat format) { G().format = static_cast<int>(format); }
void Logger::SetGlobalSink(std::shared_ptr<LogSink> sink) {
  std::scoped_lock lock(G().mu);
  G().sink = std::move(sink);
}

bool Logger::ParseLevel(std::string_view s, LogLevel* out) {
  if (s == "debug")
    *out = LogLevel::kDebug;
  else if (s == "info")
    *out = LogLevel::kInfo;
  else if (s == "warn" || s == "warning")
    *out = LogLevel::kWarn;
  else if (s == "error")
    *out = LogLevel::kError;
  else
    return false;
  return true;
}

}  // namespace gg
