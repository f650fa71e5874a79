// sigwait-based shutdown: no async-signal-safety concerns, the handler is a normal thread.
#include "common/signals.h"

#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace gg {
namespace {
std::stop_source& Source() {
  static std::stop_source* s = new std::stop_source();
  return *s;
}
}  // namespace

std::stop_token InstallShutdownSignals() {
  static bool installed = false;
  if (installed) return Source().get_token();
  installed = true;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  std::thread([set] {
    int count = 0;
    for (;;) {
      int sig = 0;
      if (sigwait(&set, &sig) != 0) continue;
      if (++count > 1) std::_Exit(128 + sig);
      Source().request_stop();
    }
  }).detach();
  return Source().get_token();
}

void RequestShutdown() { Source().request_stop(); }

}  // namespace gg
