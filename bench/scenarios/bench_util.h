// Shared plumbing of the scenario runners: --mode/--out flags, machine description, process
// memory/CPU readings from /proc, a result table printed to stdout and written as JSON.
#pragma once

#include <malloc.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace gg::bench {

struct Args {
  std::string mode = "quick";  // quick | scale
  std::string out;             // JSON result file ("" = none)
  long nodes = 0;              // 0 = the mode's default
  long events = 0;             // 0 = the mode's default
  std::string command;         // argv joined, for the report
  bool ok = true;
  std::map<std::string, std::string> extra;  // runner-specific "--key value" flags

  double Num(const std::string& key, double def) const {
    auto it = extra.find(key);
    return it == extra.end() ? def : std::atof(it->second.c_str());
  }
  std::string Str(const std::string& key, const std::string& def) const {
    auto it = extra.find(key);
    return it == extra.end() ? def : it->second;
  }
};

// `extra_keys`: the runner's own flags (without "--"), each taking a value.
inline Args ParseArgs(int argc, char** argv, const std::vector<std::string>& extra_keys = {}) {
  Args a;
  for (int i = 0; i < argc; ++i) {
    if (i) a.command += ' ';
    a.command += argv[i];
  }
  for (int i = 1; i < argc; ++i) {
    std::string f = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (f == "--mode")
      a.mode = next();
    else if (f == "--out")
      a.out = next();
    else if (f == "--nodes")
      a.nodes = std::atol(next().c_str());
    else if (f == "--events")
      a.events = std::atol(next().c_str());
    else if (f.size() > 2 &&
             std::find(extra_keys.begin(), extra_keys.end(), f.substr(2)) != extra_keys.end()) {
      a.extra[f.substr(2)] = next();
    } else {
      std::string more;
      for (const auto& k : extra_keys) more += " [--" + k + " V]";
      std::fprintf(stderr,
                   "usage: %s [--mode quick|scale] [--out FILE.json] [--nodes N] "
                   "[--events M]%s\n",
                   argv[0], more.c_str());
      a.ok = false;
    }
  }
  if (a.mode != "quick" && a.mode != "scale") a.ok = false;
  return a;
}

inline std::string ReadFile(const char* path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A "Key:  123 kB" field of /proc/self/status, in bytes (0 when absent).
inline long ProcStatusBytes(const char* key) {
  std::string s = ReadFile("/proc/self/status");
  std::string k = std::string(key) + ":";
  auto p = s.find(k);
  if (p == std::string::npos) return 0;
  return std::atol(s.c_str() + p + k.size()) * 1024L;
}
inline long RssBytes() { return ProcStatusBytes("VmRSS"); }
inline long HwmBytes() { return ProcStatusBytes("VmHWM"); }
// Resets VmHWM to the current RSS (Linux >= 4.0), so a phase's peak can be measured alone.
inline bool ResetHwm() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
  return static_cast<bool>(f);
}
// Settled RSS: returns freed heap to the kernel first, as a long-running process eventually does.
inline long SettledRssBytes() {
  malloc_trim(0);
  return RssBytes();
}

// CPU seconds of this process (RUSAGE_SELF) or thread (RUSAGE_THREAD). Read with
// clock_gettime, which counts a running thread's time up to the call whatever the kernel's
// accounting mode (getrusage may lag it by up to a scheduler tick on kernels without precise
// accounting; on the dev machine the two agree within 1 ms over 143 ms).
inline double CpuSeconds(int who = RUSAGE_SELF) {
  if (who == RUSAGE_SELF || who == RUSAGE_THREAD) {
    timespec ts{};
    clock_gettime(who == RUSAGE_THREAD ? CLOCK_THREAD_CPUTIME_ID : CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
  }
  rusage ru{};
  getrusage(who, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

inline double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline nlohmann::json Machine() {
  nlohmann::json m;
  m["nproc"] = sysconf(_SC_NPROCESSORS_ONLN);
  std::string cpu = ReadFile("/proc/cpuinfo");
  auto p = cpu.find("model name");
  if (p != std::string::npos) {
    auto c = cpu.find(':', p);
    auto e = cpu.find('\n', c);
    m["cpu"] = cpu.substr(c + 2, e - c - 2);
  }
  std::string mem = ReadFile("/proc/meminfo");
  m["mem_total_kb"] = std::atol(mem.c_str() + mem.find(':') + 1);
  std::string load = ReadFile("/proc/loadavg");
  m["loadavg"] = load.substr(0, load.find('\n'));
  return m;
}

struct Figure {
  std::string name, unit, target;
  double value = 0;
  std::string verdict;  // pass | miss | info
  std::string note;
};

class Report {
 public:
  Report(std::string scenario, const Args& args) : scenario_(std::move(scenario)), args_(args) {
    machine_ = Machine();
    std::printf("# %s  mode=%s\n# machine: %ld cores, %s, load %s\n# command: %s\n",
                scenario_.c_str(), args_.mode.c_str(), machine_["nproc"].get<long>(),
                machine_.value("cpu", std::string("?")).c_str(),
                machine_["loadavg"].get<std::string>().c_str(), args_.command.c_str());
    std::fflush(stdout);
  }
  // `higher_better`: pass when value >= goal; else pass when value <= goal. goal < 0: info only.
  void Add(std::string name, double value, std::string unit, double goal, bool higher_better,
           std::string note = "") {
    Figure f;
    f.name = std::move(name);
    f.value = value;
    f.unit = std::move(unit);
    f.note = std::move(note);
    if (goal < 0) {
      f.verdict = "info";
    } else {
      f.target = std::string(higher_better ? ">= " : "<= ") + Fmt(goal);
      f.verdict = (higher_better ? value >= goal : value <= goal) ? "pass" : "miss";
    }
    std::printf("  %-44s %14s %-10s %-12s %s%s%s\n", f.name.c_str(), Fmt(f.value).c_str(),
                f.unit.c_str(), f.target.c_str(), f.verdict.c_str(), f.note.empty() ? "" : "  ",
                f.note.c_str());
    std::fflush(stdout);
    figures_.push_back(std::move(f));
  }
  void Param(const std::string& k, nlohmann::json v) { params_[k] = std::move(v); }
  void Note(const std::string& line) {
    std::printf("  note: %s\n", line.c_str());
    std::fflush(stdout);
    notes_.push_back(line);
  }
  bool Write() const {
    if (args_.out.empty()) return true;
    nlohmann::json j;
    j["scenario"] = scenario_;
    j["mode"] = args_.mode;
    j["command"] = args_.command;
    j["machine"] = machine_;
    j["machine"]["loadavg_end"] = ReadFile("/proc/loadavg").substr(0, 14);
    j["params"] = params_;
    j["notes"] = notes_;
    for (const auto& f : figures_) {
      j["figures"].push_back({{"name", f.name},
                              {"value", f.value},
                              {"unit", f.unit},
                              {"target", f.target},
                              {"verdict", f.verdict},
                              {"note", f.note}});
    }
    std::ofstream o(args_.out);
    o << j.dump(2) << "\n";
    return static_cast<bool>(o);
  }

  static std::string Fmt(double v) {
    char b[64];
    if (v != 0 && (v >= 1e6 || v < 0.01))
      std::snprintf(b, sizeof b, "%.4g", v);
    else
      std::snprintf(b, sizeof b, "%.2f", v);
    return b;
  }

 private:
  std::string scenario_;
  Args args_;
  nlohmann::json machine_, params_ = nlohmann::json::object();
  std::vector<std::string> notes_;
  std::vector<Figure> figures_;
};

}  // namespace gg::bench
