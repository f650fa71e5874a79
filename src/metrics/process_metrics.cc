// process_* metrics from procfs (resident memory, CPU time, start time, open fds).
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "metrics/registry.h"

namespace gg::metrics {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

// Fields of /proc/<pid>/stat after the ")" that closes the command name (which may hold
// spaces and parentheses itself). Index 0 is field 3 ("state").
std::vector<std::string> StatFields(const std::string& stat) {
  std::vector<std::string> fields;
  auto close = stat.rfind(')');
  if (close == std::string::npos) return fields;
  std::istringstream in(stat.substr(close + 1));
  std::string f;
  while (in >> f) fields.push_back(f);
  return fields;
}

double ToDouble(const std::string& s) {
  if (s.empty()) return kNaN;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  return (end && *end == '\0') ? v : kNaN;
}

}  // namespace

ProcessStats ReadProcessStats(const std::string& proc_root) {
  ProcessStats st{kNaN, kNaN, kNaN, kNaN, kNaN};
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  std::string stat;
  if (ReadFile(proc_root + "/self/stat", &stat)) {
    auto f = StatFields(stat);
    // Field n (1-based, man proc) is f[n - 3].
    if (f.size() >= 22 && ticks > 0) {
      st.cpu_seconds = (ToDouble(f[14 - 3]) + ToDouble(f[15 - 3])) / ticks;
      st.virtual_bytes = ToDouble(f[23 - 3]);
      st.resident_bytes = ToDouble(f[24 - 3]) * page;
      std::string sys;
      if (ReadFile(proc_root + "/stat", &sys)) {
        std::istringstream in(sys);
        std::string line;
        while (std::getline(in, line)) {
          if (line.rfind("btime ", 0) == 0) {
            st.start_time_seconds = ToDouble(line.substr(6)) + ToDouble(f[22 - 3]) / ticks;
            break;
          }
        }
      }
    }
  }
  std::error_code ec;
  std::filesystem::directory_iterator it(proc_root + "/self/fd", ec);
  if (!ec) {
    double n = 0;
    for (; it != std::filesystem::directory_iterator(); it.increment(ec)) {
      if (ec) break;
      ++n;
    }
    if (!ec) st.open_fds = n;
  }
  return st;
}

void RegisterProcessMetrics(Registry& registry, std::string proc_root) {
  if (registry.Contains("process_cpu_seconds_total")) return;  // already there
  registry.AddCallback("process_cpu_seconds_total",
                       "Total user and system CPU time spent in seconds.", MetricType::kCounter,
                       [proc_root] { return ReadProcessStats(proc_root).cpu_seconds; });
  registry.AddCallback("process_resident_memory_bytes", "Resident memory size in bytes.",
                       MetricType::kGauge,
                       [proc_root] { return ReadProcessStats(proc_root).resident_bytes; });
  registry.AddCallback("process_virtual_memory_bytes", "Virtual memory size in bytes.",
                       MetricType::kGauge,
                       [proc_root] { return ReadProcessStats(proc_root).virtual_bytes; });
  registry.AddCallback("process_start_time_seconds",
                       "Start time of the process since unix epoch in seconds.", MetricType::kGauge,
                       [proc_root] { return ReadProcessStats(proc_root).start_time_seconds; });
  registry.AddCallback("process_open_fds", "Number of open file descriptors.", MetricType::kGauge,
                       [proc_root] { return ReadProcessStats(proc_root).open_fds; });
}

}  // namespace gg::metrics
