// Process and TempDir for end-to-end tests.
#include "e2e/process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace gg::e2e {

Process::Process(std::vector<std::string> argv, std::string log_path)
    : log_path_(std::move(log_path)) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  // Children must not inherit a blocked SIGTERM mask from the test runner.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  if (posix_spawn(&pid_, args[0], &fa, &attr, args.data(), environ) != 0) pid_ = -1;
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
}

Process::~Process() {
  if (pid_ > 0 && exit_status_ < 0) {
    if (Stop(SIGTERM, std::chrono::seconds(5)) < 0) Stop(SIGKILL, std::chrono::seconds(5));
  }
}

std::string Process::Log() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Process::WaitForLog(const std::string& needle,
                                std::chrono::milliseconds timeout) const {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    std::string log = Log();
    auto pos = log.find(needle);
    if (pos != std::string::npos) {
      auto start = log.rfind('\n', pos);
      auto end = log.find('\n', pos);
      start = start == std::string::npos ? 0 : start + 1;
      return log.substr(start, end == std::string::npos ? std::string::npos : end - start);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return "";
}

bool Process::Running() {
  if (pid_ <= 0 || exit_status_ >= 0) return false;
  int st = 0;
  pid_t r = waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    exit_status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return false;
  }
  return true;
}

int Process::Stop(int sig, std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return -1;
  if (exit_status_ >= 0) return exit_status_;
  kill(pid_, sig);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!Running()) return exit_status_;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -1;
}

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "gg-e2e-XXXXXX").string();
  char* p = mkdtemp(tmpl.data());
  path_ = p ? p : "/tmp";
}

TempDir::~TempDir() {
  std::error_code ec;
  if (path_ != "/tmp") std::filesystem::remove_all(path_, ec);
}

}  // namespace gg::e2e
