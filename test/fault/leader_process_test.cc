// Fault suite, real operator processes: two gpu-guardian-operator replicas, each behind its own
// ApiProxy in front of the in-process simulator, so every request is attributed to a replica.
// The leader is killed with SIGKILL or stopped with SIGTERM in the middle of a PDB-paced drain;
// the other replica must take over within the bounds of the issue, and over both replicas
// every pod of the drained node accepts exactly one eviction and only one replica writes at a
// time. The SIGTERM test runs with the default lease timings (15 s / 10 s / 2 s): the follower
// watches the Lease, so the handover does not wait for its next retry poll. And an operator
// whose informers sit in Retry-After sleeps still stops promptly on SIGTERM.
#include <gtest/gtest.h>

#include <csignal>
#include <optional>
#include <set>

#include "e2e/process.h"
#include "fault/fault_world.h"

namespace gg::fault {
namespace {

using Clk = std::chrono::steady_clock;
const std::string kBin = GG_BIN_DIR;

constexpr auto kLeaseDuration = 3s;
constexpr auto kRetryPeriod = 300ms;

class LeaderProcessTest : public DrainWorld {
 protected:
  void TearDown() override {
    procs_.clear();
    proxies_.clear();
    DrainWorld::TearDown();
  }

  struct Replica {
    std::string id;
    ApiProxy* proxy;
    e2e::Process* proc;
  };

  // `short_lease`: lease 3 s, renew deadline 2 s, retry period 300 ms (CI time); otherwise the
  // operator's defaults (15 s, 10 s, 2 s).
  Replica Start(const std::string& id, bool short_lease = true) {
    proxies_.push_back(ApiProxy::Start(sim_->Port()));
    ApiProxy* p = proxies_.back().get();
    EXPECT_NE(p, nullptr);
    std::vector<std::string> args{kBin + "/gpu-guardian-operator",
                                  "--server",
                                  p->Url(),
                                  "--metrics-addr",
                                  "127.0.0.1:0",
                                  "--leader-elect",
                                  "--leader-election-namespace",
                                  "gpu-guardian-system",
                                  "--leader-election-identity",
                                  id,
                                  "--drain-poll-interval",
                                  "200ms"};
    if (short_lease) {
      for (const char* a :
           {"--lease-duration", "3s", "--renew-deadline", "2s", "--retry-period", "300ms"})
        args.push_back(a);
    }
    procs_.push_back(
        std::make_unique<e2e::Process>(args, dir_.path() + "/operator-" + id + ".log"));
    EXPECT_TRUE(procs_.back()->Started());
    return {id, p, procs_.back().get()};
  }

  std::string Holder() {
    auto l = sim_->Get(
        "/apis/coordination.k8s.io/v1/namespaces/gpu-guardian-system/leases/"
        "gpu-guardian-operator");
    if (!l.ok()) return "";
    return (*l)["spec"].value("holderIdentity", "");
  }

  // A replica is ready to take over once its three informers are watching.
  static bool Watching(const Replica& r) {
    int kinds = 0;
    bool nodes = false, reports = false, policies = false;
    for (const auto& q : r.proxy->Requests()) {
      if (q.path.find("watch=") == std::string::npos || q.status != 200) continue;
      nodes |= q.path.rfind("/api/v1/nodes", 0) == 0;
      reports |= q.path.find("gpunodehealths") != std::string::npos;
      policies |= q.path.find("gpuhealthpolicies") != std::string::npos;
    }
    kinds = nodes + reports + policies;
    return kinds == 3;
  }

  static std::optional<Clk::time_point> FirstWrite(const Replica& r) {
    std::optional<Clk::time_point> t;
    for (const auto& q : r.proxy->Requests())
      if (IsWrite(q) && (!t || q.sent < *t)) t = q.sent;
    return t;
  }
  static std::optional<Clk::time_point> LastWrite(const Replica& r) {
    std::optional<Clk::time_point> t;
    for (const auto& q : r.proxy->Requests())
      if (IsWrite(q) && q.status > 0 && (!t || q.sent > *t)) t = q.sent;
    return t;
  }
  // When the replica's lease write first succeeded (its acquisition).
  static std::optional<Clk::time_point> Acquired(const Replica& r) {
    for (const auto& q : r.proxy->Requests())
      if (IsLeaseWrite(q) && q.status >= 200 && q.status < 300) return q.sent;
    return std::nullopt;
  }

  std::string Logs() {
    std::string out;
    for (auto& p : procs_) {
      std::string l = p->Log();
      out += "---\n" + l.substr(l.size() > 4000 ? l.size() - 4000 : 0);
    }
    return out;
  }

  // A leads (and drains), B follows and is synced; the drain of gpu-0 has begun.
  void LeaderMidDrain(Replica& a, Replica& b, bool short_lease = true) {
    Seed();
    a = Start("a", short_lease);
    ASSERT_TRUE(WaitFor([&] { return Holder() == "a"; })) << Logs();
    b = Start("b", short_lease);
    ASSERT_TRUE(WaitFor([&] { return Watching(b); })) << Logs();
    ASSERT_TRUE(WaitFor([&] { return PolicyStatus("default").value("healthyNodes", 0) == 4; }));
    WriteReport("gpu-0", XidReport("gpu-0"));
    ASSERT_TRUE(WaitFor([&] { return LivePodsOn("gpu-0") < 4; }))
        << PodsOn("gpu-0").dump() << Logs();
  }

  void ExpectOneWriterAtATime(const Replica& old_leader, const Replica& new_leader,
                              Clk::time_point stopped) {
    auto a_last = LastWrite(old_leader);
    auto b_first = FirstWrite(new_leader);
    ASSERT_TRUE(b_first.has_value());
    EXPECT_GE(*b_first, stopped) << "the follower wrote while the leader was alive";
    if (a_last) {
      EXPECT_LT(*a_last, *b_first);
    }
    ExpectEachPodEvictedOnce({old_leader.proxy->Requests(), new_leader.proxy->Requests()});
  }

  e2e::TempDir dir_;
  std::vector<std::unique_ptr<ApiProxy>> proxies_;
  std::vector<std::unique_ptr<e2e::Process>> procs_;
};

TEST_F(LeaderProcessTest, SigkillMidDrainFollowerFinishesEachPodEvictedOnce) {
  Replica a{}, b{};
  ASSERT_NO_FATAL_FAILURE(LeaderMidDrain(a, b));
  const auto killed = Clk::now();
  ASSERT_EQ(::kill(a.proc->pid(), SIGKILL), 0);
  a.proc->Stop(SIGKILL, 5s);
  ASSERT_TRUE(WaitFor([&] { return Holder() == "b"; }, 30s)) << Logs();
  ASSERT_TRUE(WaitFor([&] { return DrainDone(); }, 90s)) << PodsOn("gpu-0").dump() << Logs();
  auto acquired = Acquired(b);
  ASSERT_TRUE(acquired.has_value());
  const double handover = Seconds(*acquired - killed);
  const double acting = Seconds(*FirstWrite(b) - killed);
  std::printf("SIGKILL: lease taken %.2f s after the kill, first write %.2f s after\n", handover,
              acting);
  RecordProperty("sigkill_handover_ms", static_cast<int>(handover * 1000));
  // client-go bound: lease duration + retry period (with its 1.2 jitter factor); 1 s of slack
  // for a loaded CI machine.
  EXPECT_LE(handover, Seconds(kLeaseDuration) + 2.2 * Seconds(kRetryPeriod) + 1.0);
  ExpectOneWriterAtATime(a, b, killed);
  EXPECT_TRUE(Cordoned(Node("gpu-0")));
}

// Default timings: without the Lease watch the follower would notice the release only at its
// next poll, 2-4.4 s later.
TEST_F(LeaderProcessTest, SigtermHandsOverWithinOneSecondAtDefaultTimings) {
  Replica a{}, b{};
  ASSERT_NO_FATAL_FAILURE(LeaderMidDrain(a, b, /*short_lease=*/false));
  // B campaigns and watches the Lease (it is held by A).
  ASSERT_TRUE(WaitFor([&] {
    for (const auto& q : b.proxy->Requests())
      if (q.path.find("/leases?") != std::string::npos &&
          q.path.find("watch=") != std::string::npos)
        return true;
    return false;
  })) << Logs();
  const auto termed = Clk::now();
  ASSERT_EQ(::kill(a.proc->pid(), SIGTERM), 0);
  ASSERT_TRUE(WaitFor([&] { return Acquired(b).has_value(); }, 30s)) << Logs();
  EXPECT_EQ(a.proc->Stop(SIGTERM, 10s), 0) << "a clean exit after SIGTERM";
  ASSERT_TRUE(WaitFor([&] { return DrainDone(); }, 90s)) << PodsOn("gpu-0").dump() << Logs();
  const double handover = Seconds(*Acquired(b) - termed);
  const double acting = Seconds(*FirstWrite(b) - termed);
  std::printf("SIGTERM: lease taken %.2f s after the signal, first write %.2f s after\n", handover,
              acting);
  RecordProperty("sigterm_handover_ms", static_cast<int>(handover * 1000));
  RecordProperty("sigterm_first_write_ms", static_cast<int>(acting * 1000));
  EXPECT_LE(handover, 1.0) << "SIGTERM handover (<= 1 s)";
  ExpectOneWriterAtATime(a, b, termed);
  // The leader's Events were flushed before its release: none reached the server after B's
  // first write.
  auto b_first = FirstWrite(b);
  for (const auto& q : a.proxy->Requests()) {
    if (IsEventWrite(q) && q.status > 0) {
      EXPECT_LT(q.sent, *b_first) << q.method << " " << q.path;
    }
  }
}

// Every LIST answers 503 with Retry-After 30 s, so the informers sit in the client's retry
// sleeps (the watch-mode operator once exited with "runnables did not stop in time" this way):
// SIGTERM still ends the process cleanly and well within the 5 s graceful shutdown.
TEST_F(LeaderProcessTest, SigtermWhileClientsWaitOutRetryAfterStopsPromptly) {
  sim::FaultConfig f;
  f.rules.push_back({"list", "", 1.0, 503, 30, 0ms, -1});
  sim_->SetFaults(f);
  Replica a = Start("a");
  // Each of the three informers has been refused at least once: they are in their sleeps.
  ASSERT_TRUE(WaitFor([&] {
    std::set<std::string> refused;
    for (const auto& q : a.proxy->Requests())
      if (q.status == 503 && q.path.find("watch=") == std::string::npos)
        refused.insert(q.path.substr(0, q.path.find('?')));
    return refused.size() >= 3;
  })) << Logs();
  std::this_thread::sleep_for(500ms);
  const auto termed = Clk::now();
  const int rc = a.proc->Stop(SIGTERM, 30s);
  const double took = Seconds(Clk::now() - termed);
  std::printf("SIGTERM during Retry-After sleeps: exit %d after %.2f s\n", rc, took);
  RecordProperty("sigterm_retry_after_exit_ms", static_cast<int>(took * 1000));
  EXPECT_EQ(rc, 0) << Logs();
  EXPECT_LT(took, 4.0) << "graceful shutdown is 5 s; a retry sleep held it";
  EXPECT_EQ(a.proc->Log().find("did not stop in time"), std::string::npos) << Logs();
}

}  // namespace
}  // namespace gg::fault
