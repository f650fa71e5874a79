// Shared by the docs-vs-binaries tests: run a shell command and capture its output, and a
// simulator process with a kubeconfig.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "e2e/process.h"

namespace gg::docs_test {

inline const std::string kBin = GG_BIN_DIR;
inline const std::string kSrc = GG_SOURCE_DIR;

struct Ran {
  int rc = -1;
  std::string out, err;
};

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `cmd` with /bin/sh; PATH gets the build's bin/ first so kubectl finds the plugin there.
inline Ran Sh(const std::string& cmd, const std::string& dir) {
  static int n = 0;
  const std::string base = dir + "/cmd" + std::to_string(++n);
  const std::string full =
      "PATH='" + kBin + "':\"$PATH\" " + cmd + " >" + base + ".out 2>" + base + ".err";
  Ran r;
  int st = std::system(full.c_str());
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.out = ReadAll(base + ".out");
  r.err = ReadAll(base + ".err");
  return r;
}

inline bool HaveKubectl() { return std::system("command -v kubectl >/dev/null 2>&1") == 0; }

// A simulator on a free port with `extra` arguments; kubeconfig at dir/kubeconfig.
class Sim {
 public:
  Sim(const std::string& dir, std::vector<std::string> extra = {}) : dir_(dir) {
    std::vector<std::string> args{kBin + "/gpu-guardian-sim", "--listen", "127.0.0.1:0",
                                  "--write-kubeconfig", kubeconfig()};
    for (auto& a : extra) args.push_back(std::move(a));
    proc_ = std::make_unique<e2e::Process>(args, dir + "/sim.log");
    ready_ = proc_->WaitForLog("listening on", std::chrono::seconds(30)) != "";
    for (int i = 0; i < 200 && !std::filesystem::exists(kubeconfig()); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  bool ready() const { return ready_ && std::filesystem::exists(kubeconfig()); }
  std::string kubeconfig() const { return dir_ + "/kubeconfig"; }
  std::string Log() const { return proc_->Log(); }

 private:
  std::string dir_;
  std::unique_ptr<e2e::Process> proc_;
  bool ready_ = false;
};

}  // namespace gg::docs_test
