// A child process for end-to-end tests: spawned with posix_spawn, output to a log file,
// SIGTERM (then SIGKILL) on destruction.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace gg::e2e {

class Process {
 public:
  Process(std::vector<std::string> argv, std::string log_path);
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  bool Started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  // Waits until the log contains `needle`; returns the matching line or "" on timeout.
  std::string WaitForLog(const std::string& needle, std::chrono::milliseconds timeout) const;
  std::string Log() const;
  // Sends `sig` and waits up to `timeout` for exit; returns the exit status (-1: still running).
  int Stop(int sig, std::chrono::milliseconds timeout);
  bool Running();

 private:
  pid_t pid_ = -1;
  std::string log_path_;
  int exit_status_ = -1;
};

// A fresh temporary directory, removed on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace gg::e2e
