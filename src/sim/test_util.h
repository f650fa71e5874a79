// Helpers the simulator's tests share: run a shell command (kubectl, the Python client) and
// wait for a condition with a deadline.
#pragma once

#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

namespace gg::sim {

struct CmdResult {
  int rc = -1;
  std::string out;  // stdout and stderr together
};

inline CmdResult RunCmd(const std::string& cmd) {
  CmdResult r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int st = pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// Polls `f` until it is true or `limit` has passed; returns its last value.
template <typename F>
bool WaitFor(F f, std::chrono::milliseconds limit = std::chrono::seconds(20)) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (f()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return f();
}

}  // namespace gg::sim
