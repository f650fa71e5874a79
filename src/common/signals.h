// Graceful shutdown on SIGTERM/SIGINT: call InstallShutdownSignals() first thing in main()
// (before any thread starts, so every thread inherits the blocked mask); the returned
// stop_token is requested when a signal arrives. A second signal exits immediately.
#pragma once

#include <stop_token>

namespace gg {

std::stop_token InstallShutdownSignals();
// Requests the same stop as a signal would (tests, fatal errors).
void RequestShutdown();

}  // namespace gg
