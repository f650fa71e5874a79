// The simulator as its own process, the way kube-apiserver is one: the runner forks and execs
// itself in "sim child" mode, so the operator under test (in the runner's process) gets glibc's
// defaults and only what the operator sets itself, while the child alone may be started with
// allocator tunables (a property of the yardstick, not of the operator). The child seeds the
// gpu-guardian fleet by direct store writes (CRDs, N nodes, a healthy report each, the Xid 79
// policy) and then answers line commands over a pipe.
//
// Protocol: child → parent "url URL populate_s" once seeded; parent → child "rv" (answer
// "rv N": the store's resourceVersion), "quit". Everything else goes over HTTP to URL. The
// parent reads the child's CPU and RSS from /proc/PID (proc.h).
#pragma once

#include <sys/prctl.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/scenarios/bench_util.h"
#include "bench/scenarios/fleet.h"
#include "bench/scenarios/piped_child.h"
#include "bench/scenarios/populate.h"
#include "sim/population.h"
#include "sim/server.h"

extern char** environ;

namespace gg::bench {

inline constexpr char kSimChildFlag[] = "--sim-child";

struct SimProcessOptions {
  long nodes = 1000;
  std::size_t watch_history = 102400;  // per resource, kube-apiserver's watch cache bound
  int http_threads = 64;
  std::string drain_timeout = "2m";  // the policy's spec.remediation.drain.timeout
  // GLIBC_TUNABLES for the child alone ("" = glibc's defaults).
  std::string glibc_tunables;
};

class SimProcess : public PipedChild {
 public:
  // Call first in main(): runs the child and returns its exit code when argv asks for it,
  // -1 otherwise.
  static int MaybeRunChild(int argc, char** argv) {
    if (argc < 2 || std::strcmp(argv[1], kSimChildFlag) != 0) return -1;
    if (argc != 8) return 2;
    SimProcessOptions o;
    o.nodes = std::atol(argv[4]);
    o.watch_history = static_cast<std::size_t>(std::atol(argv[5]));
    o.http_threads = std::atoi(argv[6]);
    o.drain_timeout = argv[7];
    FILE* in = fdopen(std::atoi(argv[2]), "r");
    FILE* out = fdopen(std::atoi(argv[3]), "w");
    return in && out ? ChildMain(o, in, out) : 2;
  }

  // Forks and execs this binary as the child; false (message on stderr) on failure. Call before
  // the runner starts any thread.
  bool Start(const SimProcessOptions& o) {
    int to_child[2], to_parent[2];
    if (pipe(to_child) != 0 || pipe(to_parent) != 0) return false;
    std::vector<std::string> args = {"/proc/self/exe",
                                     kSimChildFlag,
                                     std::to_string(to_child[0]),
                                     std::to_string(to_parent[1]),
                                     std::to_string(o.nodes),
                                     std::to_string(o.watch_history),
                                     std::to_string(o.http_threads),
                                     o.drain_timeout};
    std::vector<std::string> env;  // ours, GLIBC_TUNABLES replaced (or dropped)
    for (char** e = environ; *e; ++e)
      if (std::strncmp(*e, "GLIBC_TUNABLES=", 15) != 0) env.emplace_back(*e);
    if (!o.glibc_tunables.empty()) env.push_back("GLIBC_TUNABLES=" + o.glibc_tunables);
    std::vector<char*> argp, envp;
    for (auto& s : args) argp.push_back(s.data());
    for (auto& s : env) envp.push_back(s.data());
    argp.push_back(nullptr);
    envp.push_back(nullptr);
    const pid_t parent = getpid();
    pid_ = fork();
    if (pid_ < 0) return false;
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a runner that crashed
      if (getppid() != parent) _exit(1);
      close(to_child[1]);
      close(to_parent[0]);
      execve(argp[0], argp.data(), envp.data());
      _exit(127);
    }
    close(to_child[0]);
    close(to_parent[1]);
    if (!Attach(to_child[1], to_parent[0])) {
      std::fprintf(stderr, "sim child did not start\n");
      return false;
    }
    return true;
  }
  // The child store's current resourceVersion (0 on failure).
  unsigned long ResourceVersion() {
    std::fprintf(out_, "rv\n");
    std::fflush(out_);
    unsigned long rv = 0;
    if (std::fscanf(in_, " rv %lu", &rv) != 1) return 0;
    return rv;
  }

 private:
  static bool Seed(sim::SimServer& srv, const SimProcessOptions& o) {
    sim::PopulationSpec spec;
    if (!CreateCrds(srv) || !PopulateNodes(srv, spec, o.nodes) ||
        !CreateReports(srv, spec, o.nodes)) {
      return false;
    }
    nlohmann::json policy = XidPolicy();
    policy["spec"]["remediation"]["drain"]["timeout"] = o.drain_timeout;
    Status s = srv.Create(kPoliciesPath, policy);
    if (!s.ok()) std::fprintf(stderr, "policy: %s\n", s.ToString().c_str());
    return s.ok();
  }

  static int ChildMain(const SimProcessOptions& o, FILE* in, FILE* out) {
    sim::SimOptions so;
    so.kubelet = so.scheduler = so.controllers = false;
    so.http_threads = o.http_threads;
    so.watch_history = o.watch_history;
    auto srv = sim::SimServer::Start(so);
    if (!srv.ok()) {
      std::fprintf(stderr, "sim: %s\n", srv.status().ToString().c_str());
      return 1;
    }
    const double t0 = Now();
    if (!Seed(**srv, o)) return 1;
    // The pre-created fleet stands for objects that were in etcd before this API server's watch
    // caches started (they start empty, at a LIST), not for 200k creations in the last
    // seconds: their events are not kept, so the first rewrite of a node frees its first
    // version. Nobody watches yet; later watches start from a LIST.
    (*srv)->CompactHistory();
    std::fprintf(out, "url %s %f\n", (*srv)->Url().c_str(), Now() - t0);
    std::fflush(out);
    char cmd[64];
    while (std::fscanf(in, "%63s", cmd) == 1) {
      if (std::strcmp(cmd, "quit") == 0) break;
      if (std::strcmp(cmd, "rv") == 0) {
        std::fprintf(out, "rv %lu\n", static_cast<unsigned long>((*srv)->ResourceVersion()));
        std::fflush(out);
      }
    }
    (*srv)->Stop();
    return 0;
  }
};

}  // namespace gg::bench
