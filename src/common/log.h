// Structured logging: one API, text or JSON lines on stderr.
//   logger.Info("tainted node", {{"node", name}, {"policy", policy}});
// Loggers are cheap values; WithValues() adds fields carried by every line (controller,
// node, reconcile id). Tokens and other secrets must never be passed as values; the
// logger additionally redacts any key named like a credential.
#pragma once

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gg {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };
enum class LogFormat { kText, kJson };

// A value of a log field: strings, integers, floats and booleans.
class LogValue {
 public:
  LogValue(std::string_view v) : kind_(Kind::kString), str_(v) {}                         // NOLINT
  LogValue(const std::string& v) : kind_(Kind::kString), str_(v) {}                       // NOLINT
  LogValue(const char* v) : kind_(Kind::kString), str_(v ? v : "") {}                     // NOLINT
  LogValue(bool v) : kind_(Kind::kBool), int_(v) {}                                       // NOLINT
  LogValue(int v) : kind_(Kind::kInt), int_(v) {}                                         // NOLINT
  LogValue(long v) : kind_(Kind::kInt), int_(v) {}                                        // NOLINT
  LogValue(long long v) : kind_(Kind::kInt), int_(v) {}                                   // NOLINT
  LogValue(unsigned v) : kind_(Kind::kInt), int_(v) {}                                    // NOLINT
  LogValue(unsigned long v) : kind_(Kind::kInt), int_(static_cast<long long>(v)) {}       // NOLINT
  LogValue(unsigned long long v) : kind_(Kind::kInt), int_(static_cast<long long>(v)) {}  // NOLINT
  LogValue(double v) : kind_(Kind::kDouble), dbl_(v) {}                                   // NOLINT

  std::string Text() const;  // plain rendering
  std::string Json() const;  // JSON literal

 private:
  enum class Kind { kString, kInt, kDouble, kBool } kind_;
  std::string str_;
  long long int_ = 0;
  double dbl_ = 0;
};

using LogField = std::pair<std::string, LogValue>;
using LogFields = std::initializer_list<std::pair<std::string_view, LogValue>>;

// Where lines go. The default sink writes to stderr; tests may capture.
class LogSink {
 public:
  virtual ~LogSink() = default;
  virtual void Write(std::string_view line) = 0;
};

class Logger {
 public:
  Logger();  // uses the process-wide sink and settings
  explicit Logger(std::shared_ptr<LogSink> sink);

  Logger WithValues(LogFields fields) const;
  Logger WithName(std::string_view name) const;

  void Debug(std::string_view msg, LogFields fields = {}) const {
    Log(LogLevel::kDebug, msg, fields);
  }
  void Info(std::string_view msg, LogFields fields = {}) const {
    Log(LogLevel::kInfo, msg, fields);
  }
  void Warn(std::string_view msg, LogFields fields = {}) const {
    Log(LogLevel::kWarn, msg, fields);
  }
  void Error(std::string_view msg, LogFields fields = {}) const {
    Log(LogLevel::kError, msg, fields);
  }
  void Log(LogLevel level, std::string_view msg, LogFields fields) const;
  bool Enabled(LogLevel level) const;

  // Process-wide settings (set once from flags in main()).
  static void SetGlobalLevel(LogLevel level);
  static void SetGlobalFormat(LogFormat format);
  static void SetGlobalSink(std::shared_ptr<LogSink> sink);
  static bool ParseLevel(std::string_view s, LogLevel* out);

 private:
  std::shared_ptr<LogSink> sink_;  // null: global sink
  std::string name_;
  std::vector<LogField> fields_;
};

// Redaction rule shared with other components (e.g. HTTP tracing): true for keys such as
// "token", "authorization", "password", "client-key-data".
bool IsSecretKey(std::string_view key);

}  // namespace gg
