// Fault suite, operator in-process: API outage, 5xx bursts, 429 storms, watch streams cut at
// random points and forced 410s, a network-partitioned leader, and the brake under a broken
// agent rollout. Every test asserts the world (cordons, taints, conditions, Events, policy
// status, accepted evictions per pod, requests the simulator served), not call sequences.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "fault/fault_world.h"

namespace gg::fault {
namespace {

using Clk = std::chrono::steady_clock;

// Informer LISTs (a GET of a whole informed collection without watch) sent at or after `from`.
int InformerLists(const std::vector<ProxiedRequest>& log, Clk::time_point from) {
  int n = 0;
  for (const auto& r : log) {
    if (r.sent < from || r.method != "GET" || r.path.find("watch=") != std::string::npos) continue;
    const std::string base = r.path.substr(0, r.path.find('?'));
    auto ends = [&](const std::string& s) {
      return base.size() >= s.size() && base.compare(base.size() - s.size(), s.size(), s) == 0;
    };
    if (base == "/api/v1/nodes" || ends("/gpunodehealths") || ends("/gpuhealthpolicies")) ++n;
  }
  return n;
}

// Requests in the log sent within [from, to).
int CountIn(const std::vector<ProxiedRequest>& log, Clk::time_point from, Clk::time_point to) {
  int n = 0;
  for (const auto& r : log)
    if (r.sent >= from && r.sent < to) ++n;
  return n;
}

// A 60 s outage of the whole API (every request 503, open watches reset):
// long enough for the informers' backoff to reach its 30 s cap.
constexpr auto kOutage = 60s;

TEST_F(DrainWorld, ApiOutageMidDrainNoHotLoopResumesNoRepeatedEvictionNoBlindUncordon) {
  Seed();
  CordonRecorder cordons(*sim_, {"gpu-0", "gpu-1", "gpu-2", "gpu-3"});
  auto& op = StartOperator(FastConfig("op-a", /*leader_elect=*/false));
  ASSERT_TRUE(WaitFor([&] { return PolicyStatus("default").value("healthyNodes", 0) == 4; }))
      << PolicyStatus("default").dump();

  WriteReport("gpu-0", XidReport("gpu-0"));
  // The drain has started: one pod accepted its eviction (the PDB holds the rest back).
  ASSERT_TRUE(WaitFor([&] { return LivePodsOn("gpu-0") < 4; })) << PodsOn("gpu-0").dump();

  const double served_before = SimRequests({});
  sim::FaultConfig f;
  f.outage_until = Clk::now() + kOutage;
  const auto out_start = Clk::now();
  sim_->SetFaults(f);
  op.transport->CutStreams();
  const auto out_end = out_start + kOutage;
  ASSERT_TRUE(WaitFor([&] { return Clk::now() >= out_end; }, kOutage + 5s));
  sim_->ClearFaults();

  // Back: the drain finishes, the node stays fenced (its report is still bad).
  ASSERT_TRUE(WaitFor([&] { return DrainDone(); }, 90s)) << PodsOn("gpu-0").dump();
  const auto drained_at = Clk::now();
  const double served_during = SimRequests({"code=\"503\""});
  // The informers come back on their own backoff (capped at 30 s, +20 % jitter): wait until
  // each of the three watches again.
  auto rewatched = [&](Clk::time_point from) {
    std::set<std::string> kinds;
    for (const auto& r : op.transport->Requests()) {
      // status 0: the stream is still open (the transport learns the status when it ends).
      if (r.sent < from || (r.status != 0 && r.status != 200) ||
          r.path.find("watch=") == std::string::npos)
        continue;
      kinds.insert(r.path.substr(0, r.path.find('?')));
    }
    return kinds.size() >= 3;
  };
  ASSERT_TRUE(WaitFor([&] { return rewatched(out_end); }, 60s));
  const auto watching_at = Clk::now();
  auto log = op.transport->Requests();

  // No hot loop: requests per second while blind, counted by the simulator and by the client.
  const double secs = Seconds(kOutage);
  const int client_during = CountIn(log, out_start, out_end);
  const double rate = client_during / secs;
  RecordProperty("outage_requests", client_during);
  RecordProperty("outage_req_per_s_x100", static_cast<int>(rate * 100));
  std::printf("outage %.0f s: %d requests (%.2f/s), simulator answered %.0f with 503\n", secs,
              client_during, rate, served_during);
  EXPECT_LE(rate, 10.0) << "a hot loop while the API is down";
  EXPECT_GE(served_during, 0.8 * client_during - 5) << "the simulator saw the same requests";
  EXPECT_GT(served_before, 0);
  // Capped, not given up: the clients still try in the last 15 s of the outage.
  EXPECT_GT(CountIn(log, out_end - 15s, out_end), 0);
  // Backoff grows: the last third of the outage sees fewer tries than the first third.
  const int first = CountIn(log, out_start, out_start + kOutage / 3);
  const int last = CountIn(log, out_end - kOutage / 3, out_end);
  std::printf("first third %d requests, last third %d\n", first, last);
  EXPECT_LT(last, first);

  // Resumed from the last resourceVersion: no informer re-LIST after the outage.
  int relists = 0, resumes = 0;
  std::optional<Clk::time_point> first_ok;
  for (const auto& r : log) {
    if (r.sent < out_end) continue;
    if (!first_ok && r.status >= 200 && r.status < 300) first_ok = r.sent;
    // Collection paths of the three informers (a LIST or a WATCH, never one object).
    const std::string base = r.path.substr(0, r.path.find('?'));
    auto ends = [&](const std::string& s) {
      return base.size() >= s.size() && base.compare(base.size() - s.size(), s.size(), s) == 0;
    };
    bool informer =
        base == "/api/v1/nodes" || ends("/gpunodehealths") || ends("/gpuhealthpolicies");
    if (!informer || r.method != "GET") continue;
    if (r.path.find("watch=") != std::string::npos)
      resumes += r.path.find("resourceVersion=") != std::string::npos ? 1 : 0;
    else
      ++relists;
  }
  ASSERT_TRUE(first_ok.has_value());
  std::printf(
      "first answered request %.1f s after the outage; drain done %.1f s after; "
      "all informers watching %.1f s after\n",
      Seconds(*first_ok - out_end), Seconds(drained_at - out_end), Seconds(watching_at - out_end));
  RecordProperty("informers_resumed_ms", static_cast<int>(Seconds(watching_at - out_end) * 1000));
  EXPECT_GT(resumes, 0);
  EXPECT_EQ(relists, 0) << "resuming after an outage must not re-LIST";

  ExpectEachPodEvictedOnce({log});
  // Never uncordoned while blind (or at all, the GPU is still bad); no other node touched.
  for (const auto& c : cordons.Changes()) {
    if (c.node != "gpu-0") {
      EXPECT_FALSE(c.cordoned) << c.node;
    }
    if (c.node == "gpu-0") {
      EXPECT_TRUE(c.cordoned) << "gpu-0 uncordoned while unhealthy";
    }
  }
  EXPECT_TRUE(Cordoned(Node("gpu-0")));
  EXPECT_EQ(Condition(Node("gpu-0")), "False");
  EXPECT_TRUE(op.op->IsLeader());
  EXPECT_FALSE(op.done.load()) << op.result;

  // And it still acts on new facts: the GPU is replaced → recovered.
  WriteReport("gpu-0", HealthyReport("gpu-0"));
  EXPECT_TRUE(WaitFor([&] {
    return !Cordoned(Node("gpu-0")) && Condition(Node("gpu-0")) == "True";
  })) << Node("gpu-0").dump();
}

TEST_F(DrainWorld, ErrorBurstsAnd429StormsConvergeWithoutRepeats) {
  Seed();
  CordonRecorder cordons(*sim_, {"gpu-0", "gpu-1", "gpu-2", "gpu-3"});
  // A leader whose renewals are throttled past its renew deadline loses the lease and Run ends
  // with an error (client-go semantics); in a cluster the kubelet restarts the container with
  // a fresh identity. The test does the same, so the story must survive restarts too.
  int incarnation = 0;
  RunningOperator* op = &StartOperator(FastConfig("op-a-0", true));
  std::vector<RunningOperator*> all{op};
  auto supervise = [&] {
    if (!op->done.load()) return;
    op = &StartOperator(FastConfig("op-a-" + std::to_string(++incarnation), true));
    all.push_back(op);
  };
  auto wait = [&](const std::function<bool()>& f, std::chrono::milliseconds t) {
    return WaitFor(
        [&] {
          supervise();
          return f();
        },
        t);
  };
  ASSERT_TRUE(wait([&] { return PolicyStatus("default").value("healthyNodes", 0) == 4; }, 60s));

  // Bursts: 25 % of every request 500, 25 % of the rest 503 with Retry-After 1.
  sim::FaultConfig bursts;
  bursts.rules.push_back({"", "", 0.25, 500, 0, 0ms, -1});
  bursts.rules.push_back({"", "", 0.25, 503, 1, 0ms, -1});
  sim_->SetFaults(bursts);
  WriteReport("gpu-0", XidReport("gpu-0"));
  ASSERT_TRUE(wait([&] { return LivePodsOn("gpu-0") < 4; }, 60s)) << PodsOn("gpu-0").dump();

  // Storm: every request 429 with Retry-After 2 s for 8 s.
  sim::FaultConfig storm;
  storm.rules.push_back({"", "", 1.0, 429, 2, 0ms, -1});
  const double before429 = SimRequests({"code=\"429\""});
  const auto storm_start = Clk::now();
  sim_->SetFaults(storm);
  wait([] { return false; }, 8s);
  const auto storm_end = Clk::now();
  sim_->SetFaults(bursts);
  const double storm_429 = SimRequests({"code=\"429\""}) - before429;
  const double rate = storm_429 / Seconds(storm_end - storm_start);
  std::printf("429 storm: %.0f answered 429 in %.1f s (%.2f/s)\n", storm_429,
              Seconds(storm_end - storm_start), rate);
  RecordProperty("storm_429_per_s_x100", static_cast<int>(rate * 100));
  // Retry-After 2 s honored by each loop (informers, lease, drain, events): a few per second.
  EXPECT_LE(rate, 10.0) << "Retry-After ignored";

  ASSERT_TRUE(wait([&] { return DrainDone(/*event=*/false); }, 90s)) << PodsOn("gpu-0").dump();
  WriteReport("gpu-0", HealthyReport("gpu-0"));
  ASSERT_TRUE(
      wait([&] { return !Cordoned(Node("gpu-0")) && Condition(Node("gpu-0")) == "True"; }, 60s))
      << Node("gpu-0").dump();
  sim_->ClearFaults();
  std::printf("operator restarts after a lost lease: %d\n", incarnation);
  RecordProperty("restarts", incarnation);
  EXPECT_TRUE(wait([&] { return op->op->IsLeader(); }, 30s));

  std::vector<std::vector<ProxiedRequest>> logs;
  for (auto* o : all) logs.push_back(o->transport->Requests());
  ExpectEachPodEvictedOnce(logs);
  // The recorder samples the node every few ms, so it may lag the GET that saw the uncordon.
  auto uncordons = [&] {
    int n = 0;
    for (const auto& c : cordons.Changes()) n += c.node == "gpu-0" && !c.cordoned;
    return n;
  };
  wait([&] { return uncordons() >= 1; }, 15s);
  int cordon = 0, uncordon = 0;
  for (const auto& c : cordons.Changes()) {
    if (c.node != "gpu-0") {
      EXPECT_FALSE(c.cordoned) << c.node;
      continue;
    }
    (c.cordoned ? cordon : uncordon)++;
  }
  EXPECT_EQ(cordon, 1);
  EXPECT_EQ(uncordon, 1) << "gpu-0 flapped";
  // The fence and the recovery were reported: an Event recorded by a leader is delivered even
  // when that leader loses its lease before the write gets through (events/aggregating.h).
  EXPECT_TRUE(wait([&] { return !Events("GPUUnhealthy", "gpu-0").empty(); }, 30s));
  EXPECT_TRUE(wait([&] { return !Events("GPURecovered", "gpu-0").empty(); }, 30s));
}

// Watch streams cut after 1-3 events (changing every few ms) plus forced 410s with compacted
// history, while reports flip; the end state must equal what the final reports say.
TEST_F(FaultWorld, WatchCutsAndForced410sMissNoTransition) {
  constexpr int kNodes = 6;
  std::vector<std::string> names;
  for (int i = 0; i < kNodes; ++i) {
    names.push_back("gpu-" + std::to_string(i));
    AddNode(names.back());
    WriteReport(names.back(), HealthyReport(names.back()));
  }
  auto spec = DefaultSpec();
  spec["rules"][0]["action"] = "Cordon";
  spec["recovery"]["healthyFor"] = "1s";
  // The flips fence the same nodes over and over: no quarantine, convergence is the point.
  spec["recovery"]["quarantine"]["after"] = 0;
  CreatePolicy("default", spec);
  auto& op = StartOperator(FastConfig("op-a", /*leader_elect=*/false));
  ASSERT_TRUE(WaitFor([&] { return PolicyStatus("default").value("healthyNodes", 0) == kNodes; }));

  const double watches_before = SimRequests({"verb=\"watch\""});
  const auto chaos_start = Clk::now();
  std::atomic<bool> chaos{true};
  std::jthread cutter([&] {
    std::mt19937 rng(7);
    int n = 0;
    while (chaos.load()) {
      sim::FaultConfig f;
      f.watch_cut_after_events = 1 + static_cast<int>(rng() % 3);
      if (++n % 40 == 0) {
        f.force_watch_410 = 1;
        sim_->CompactHistory();
      }
      sim_->SetFaults(f);
      std::this_thread::sleep_for(std::chrono::milliseconds(5 + rng() % 20));
    }
    sim_->ClearFaults();
  });
  // Streams opened before the chaos carry no cut point: reset them once so every stream from
  // now on is opened under the fault configuration.
  std::this_thread::sleep_for(100ms);
  op.transport->CutStreams();

  // Flip reports at random until the informers have been cut >= 1000 times (or 60 s).
  std::mt19937 rng(11);
  std::vector<bool> bad(kNodes, false);
  const auto until = Clk::now() + 60s;
  int flips = 0;
  while (Clk::now() < until && SimRequests({"verb=\"watch\""}) - watches_before < 1000) {
    for (int k = 0; k < 10; ++k) {
      int i = static_cast<int>(rng() % kNodes);
      bad[i] = !bad[i];
      WriteReport(names[i], bad[i] ? XidReport(names[i]) : HealthyReport(names[i]));
      ++flips;
      std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 15));
    }
  }
  // A final, known state, written while the cuts go on.
  for (int i = 0; i < kNodes; ++i) {
    bad[i] = i % 2 == 0;
    WriteReport(names[i], bad[i] ? XidReport(names[i]) : HealthyReport(names[i]));
  }
  const double cuts = SimRequests({"verb=\"watch\""}) - watches_before;
  const int relists = InformerLists(op.transport->Requests(), chaos_start);
  std::printf("%d report flips, %.0f watch (re)starts, %d relists after forced 410s\n", flips, cuts,
              relists);
  EXPECT_GE(relists, 1) << "the forced 410s never reached an informer";
  RecordProperty("watch_restarts", static_cast<int>(cuts));
  EXPECT_GE(cuts, 500) << "too few cuts to mean anything";

  auto converged = [&] {
    for (int i = 0; i < kNodes; ++i) {
      json n = Node(names[i]);
      if (bad[i] != (Cordoned(n) && HasOurTaint(n) && Condition(n) == "False")) return false;
      if (!bad[i] && (Cordoned(n) || HasOurTaint(n) || Condition(n) != "True")) return false;
    }
    return true;
  };
  // Converges while the streams are still being cut.
  EXPECT_TRUE(WaitFor(converged, 60s));
  chaos.store(false);
  cutter.join();
  // And stays there.
  std::this_thread::sleep_for(2s);
  for (int i = 0; i < kNodes; ++i) {
    json n = Node(names[i]);
    EXPECT_EQ(Cordoned(n), bad[i]) << n.dump();
    EXPECT_EQ(HasOurTaint(n), bad[i]) << n.dump();
    EXPECT_EQ(Condition(n), bad[i] ? "False" : "True") << n.dump();
    EXPECT_EQ(op.Metric("gpu_guardian_node_healthy", {names[i]}), bad[i] ? 0 : 1) << names[i];
    if (bad[i]) {
      EXPECT_FALSE(Events("GPUUnhealthy", names[i]).empty());
    }
  }
  json st = PolicyStatus("default");
  EXPECT_EQ(st.value("unhealthyNodes", -1), kNodes / 2) << st.dump();
  EXPECT_EQ(st.value("healthyNodes", -1), kNodes / 2) << st.dump();
}

// A leader whose network is cut (every request fails) must stop writing before the new leader
// starts, and must not write again once the network is back; the drain finishes once.
TEST_F(DrainWorld, PartitionedLeaderStopsBeforeTheNewLeaderWrites) {
  Seed();
  auto& a = StartOperator(FastConfig("op-a", true));
  ASSERT_TRUE(WaitFor([&] { return a.op->IsLeader(); }));
  auto& b = StartOperator(FastConfig("op-b", true));
  ASSERT_TRUE(WaitFor([&] { return b.op->Synced(); }));
  ASSERT_TRUE(WaitFor([&] { return PolicyStatus("default").value("healthyNodes", 0) == 4; }));

  WriteReport("gpu-0", XidReport("gpu-0"));
  ASSERT_TRUE(WaitFor([&] { return LivePodsOn("gpu-0") < 4; })) << PodsOn("gpu-0").dump();
  const auto cut = Clk::now();
  a.transport->Partition(true);
  ASSERT_TRUE(WaitFor([&] { return b.op->IsLeader(); }, 30s));
  const auto b_leads = Clk::now();
  ASSERT_TRUE(WaitFor([&] { return DrainDone(); }, 90s)) << PodsOn("gpu-0").dump();
  // Heal the partition: A lost its lease; it must not act on its stale view.
  a.transport->Partition(false);
  std::this_thread::sleep_for(2s);

  auto la = a.transport->Requests();
  auto lb = b.transport->Requests();
  std::optional<Clk::time_point> a_last, b_first;
  for (const auto& r : la)
    if (IsWrite(r) && r.status > 0) a_last = r.sent;  // writes that reached the server
  for (const auto& r : lb)
    if (IsWrite(r) && (!b_first || r.sent < *b_first)) b_first = r.sent;
  ASSERT_TRUE(b_first.has_value());
  std::printf("takeover %.2f s after the partition; A's last write %.2f s before B's first\n",
              Seconds(b_leads - cut), a_last ? Seconds(*b_first - *a_last) : -1.0);
  if (a_last) {
    EXPECT_LT(*a_last, *b_first) << "two replicas wrote at the same time";
  }
  // A attempted nothing after it knew its lease was gone (after the renew deadline).
  for (const auto& r : la)
    if (IsWrite(r)) {
      EXPECT_LT(r.sent, cut + 2s + 500ms) << r.method << " " << r.path;
    }
  EXPECT_FALSE(a.op->IsLeader());
  EXPECT_TRUE(WaitFor([&] { return a.done.load(); }, 10s)) << "A should end (lost lease)";
  EXPECT_FALSE(a.result.ok()) << "losing the lease is an error exit";
  ExpectEachPodEvictedOnce({la, lb});
  EXPECT_LE(Seconds(b_leads - cut), 3.0 + 0.3 * 2.2 + 2.0)
      << "lease duration + retry period (+ slack)";
}

// Lease renewals under 429s whose Retry-After (10 s) is longer than the renew deadline (4 s).
// A renewal does not sleep through the client's retries: it fails fast and the election tries
// again every retry period. A short burst (4 refused lease requests) is ridden out with the
// lease kept; a storm that outlasts the renew deadline makes the leader give the lease up
// cleanly at the deadline, not after the Retry-After sleeps; never two leaders at once.
TEST_F(FaultWorld, LeaseRenewalUnder429StormFailsFastKeepsOrCleanlyLosesTheLease) {
  AddNode("gpu-0");
  WriteReport("gpu-0", HealthyReport("gpu-0"));
  CreatePolicy("default", DefaultSpec());
  auto config = [](const std::string& id) {
    auto c = FastConfig(id, true);
    c.lease_duration = 6s;
    c.renew_deadline = 4s;
    c.retry_period = 300ms;
    return c;
  };
  auto& a = StartOperator(config("op-a"));
  ASSERT_TRUE(WaitFor([&] { return a.op->IsLeader(); }));
  auto& b = StartOperator(config("op-b"));
  ASSERT_TRUE(WaitFor([&] { return b.op->Synced(); }));
  // Sampled every 2 ms from here on: at most one replica believes it leads.
  std::atomic<int> both{0};
  std::atomic<bool> sampling{true};
  std::jthread sampler([&] {
    while (sampling.load()) {
      if (a.op->IsLeader() && b.op->IsLeader()) both.fetch_add(1);
      std::this_thread::sleep_for(2ms);
    }
  });

  // A burst: the next 4 lease requests (either replica's) get 429 + Retry-After 10 s.
  const double before = SimRequests({"code=\"429\"", "resource=\"leases\""});
  sim::FaultConfig burst;
  burst.rules.push_back({"", "leases", 1.0, 429, 10, 0ms, 4});
  sim_->SetFaults(burst);
  ASSERT_TRUE(WaitFor(
      [&] {
        return SimRequests({"code=\"429\"", "resource=\"leases\""}) - before >= 4;
      },
      30s));
  // Kept: A renews right after the burst, well inside its 4 s renew deadline.
  const auto burst_over = Clk::now();
  while (Clk::now() < burst_over + 1500ms) {
    EXPECT_TRUE(a.op->IsLeader()) << "the burst cost A its lease";
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_FALSE(a.done.load()) << a.result;

  // A storm on every lease request until cleared: A gives up at its renew deadline.
  sim::FaultConfig storm;
  storm.rules.push_back({"", "leases", 1.0, 429, 10, 0ms, -1});
  const auto storm_start = Clk::now();
  sim_->SetFaults(storm);
  ASSERT_TRUE(WaitFor([&] { return a.done.load(); }, 40s));
  const double gave_up = Seconds(Clk::now() - storm_start);
  std::printf(
      "lease 429 storm (Retry-After 10 s, renew deadline 4 s): the leader gave up after "
      "%.2f s\n",
      gave_up);
  RecordProperty("storm_leader_gave_up_ms", static_cast<int>(gave_up * 1000));
  EXPECT_FALSE(a.result.ok()) << "a lost lease is an error exit";
  // Renew deadline + one retry period + one bounded request (renew deadline / 2) + slack; with
  // the client's retries it would have slept 4 x 10 s.
  EXPECT_LT(gave_up, 4.0 + 0.3 + 2.0 + 2.0);
  sim_->ClearFaults();
  ASSERT_TRUE(WaitFor([&] { return b.op->IsLeader(); }, 30s));
  sampling.store(false);
  sampler.join();
  EXPECT_EQ(both.load(), 0) << "two replicas led at once";
}

// The leader cordons a node and loses its lease before the Event could be written (Event
// POSTs answer 503, lease renewals fail). The Event records a decision already carried out: the
// ex-leader still delivers it once the API takes Events again, so the fence is never silent.
// (A successor finds the node fenced and has no fence to report.)
TEST_F(FaultWorld, EventsDueWhenTheLeaseIsLostAreStillDelivered) {
  for (const char* n : {"gpu-0", "gpu-1"}) {
    AddNode(n);
    WriteReport(n, HealthyReport(n));
  }
  auto spec = DefaultSpec();
  spec["rules"][0]["action"] = "Cordon";
  CreatePolicy("default", spec);
  auto& a = StartOperator(FastConfig("op-a", true));
  ASSERT_TRUE(WaitFor(
      [&] { return a.op->IsLeader() && PolicyStatus("default").value("healthyNodes", 0) == 2; }));

  sim::FaultConfig f;
  f.rules.push_back({"create", "events", 1.0, 503, 1, 0ms, -1});
  sim_->SetFaults(f);
  WriteReport("gpu-0", XidReport("gpu-0"));
  ASSERT_TRUE(WaitFor([&] { return Cordoned(Node("gpu-0")); })) << Node("gpu-0").dump();
  f.rules.push_back({"update", "leases", 1.0, 503, 1, 0ms, -1});
  sim_->SetFaults(f);
  ASSERT_TRUE(WaitFor([&] { return !a.op->IsLeader(); }, 30s));
  EXPECT_TRUE(Events("GPUUnhealthy", "gpu-0").empty()) << "the fault did not hold the Event back";
  sim_->ClearFaults();

  ASSERT_TRUE(WaitFor([&] { return !Events("GPUUnhealthy", "gpu-0").empty(); }, 30s))
      << "the Event of a fence made while leading was dropped with the lease";
  auto ev = Events("GPUUnhealthy", "gpu-0");
  EXPECT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].value("reportingInstance", ""), "op-a");
  EXPECT_TRUE(WaitFor([&] { return !Events("NodeCordoned", "gpu-0").empty(); }, 30s));
  EXPECT_TRUE(WaitFor([&] { return a.done.load(); }, 30s));
  EXPECT_FALSE(a.result.ok()) << "a lost lease is an error exit";
  // Nothing else was written by the ex-leader after it lost the lease.
  EXPECT_TRUE(Events("GPUUnhealthy", "gpu-1").empty());
  EXPECT_FALSE(Cordoned(Node("gpu-1")));
}

// A broken agent rollout marks 60 % of the nodes unhealthy at once: only the budget is fenced,
// BrakeEngaged shows as an Event, in policy status and as a metric, nothing else is touched,
// and the brake lets go by itself once the reports are healthy again.
TEST_F(FaultWorld, BrokenAgentRolloutHitsTheBrakeWithinBudgetAndReleases) {
  constexpr int kNodes = 10;
  std::vector<std::string> names;
  for (int i = 0; i < kNodes; ++i) {
    names.push_back("gpu-" + std::to_string(i));
    AddNode(names.back());
    AddPod("job-" + std::to_string(i), names.back(), "job-" + std::to_string(i));
    WriteReport(names.back(), HealthyReport(names.back()));
  }
  auto spec = DefaultSpec();
  spec["safety"]["maxUnhealthy"] = "20%";  // budget: 2 of 10
  CreatePolicy("default", spec);
  CordonRecorder cordons(*sim_, names);
  auto& op = StartOperator(FastConfig("op-a", true));
  ASSERT_TRUE(WaitFor([&] { return PolicyStatus("default").value("healthyNodes", 0) == kNodes; }));

  for (int i = 0; i < 6; ++i) WriteReport(names[i], XidReport(names[i]));
  ASSERT_TRUE(WaitFor([&] {
    return PolicyCondition(PolicyStatus("default"), "BrakeEngaged") == "True";
  })) << PolicyStatus("default").dump();
  EXPECT_TRUE(WaitFor([&] { return !Events("BrakeEngaged", "default").empty(); }));
  EXPECT_TRUE(WaitFor([&] { return op.Metric("gpu_guardian_brake_engaged", {"default"}) == 1; }));
  // Let every worker run its course: the fenced count must stay at the budget.
  std::this_thread::sleep_for(3s);
  std::set<std::string> fenced;
  for (const auto& n : names) {
    json node = Node(n);
    if (Cordoned(node) || HasOurTaint(node)) fenced.insert(n);
  }
  EXPECT_EQ(fenced.size(), 2u);
  for (const auto& n : fenced) {
    EXPECT_LT(std::stoi(n.substr(4)), 6) << "a healthy node was fenced";
  }
  // Nothing else: no eviction outside the fenced nodes.
  for (const auto& [pod, count] : AcceptedEvictions({op.transport->Requests()})) {
    std::string node = "gpu-" + pod.substr(pod.find('-') + 1);
    EXPECT_TRUE(fenced.count(node)) << pod << " evicted on an unfenced node";
    EXPECT_EQ(count, 1) << pod;
  }
  json st = PolicyStatus("default");
  EXPECT_EQ(st.value("unhealthyNodes", 0), 6) << st.dump();
  EXPECT_EQ(st.value("remediatingNodes", 0), 2) << st.dump();

  // The rollout is rolled back: every report healthy again (unfenced ones first).
  for (int i = 5; i >= 0; --i) WriteReport(names[i], HealthyReport(names[i]));
  ASSERT_TRUE(WaitFor([&] {
    return PolicyCondition(PolicyStatus("default"), "BrakeEngaged") == "False";
  })) << PolicyStatus("default").dump();
  EXPECT_TRUE(WaitFor([&] { return op.Metric("gpu_guardian_brake_engaged", {"default"}) == 0; }));
  EXPECT_TRUE(WaitFor([&] { return !Events("BrakeReleased", "default").empty(); }));
  EXPECT_TRUE(WaitFor([&] {
    for (const auto& n : names)
      if (Cordoned(Node(n)) || HasOurTaint(Node(n))) return false;
    return true;
  })) << "fenced nodes recover";
  // Over the whole story, only the two budgeted nodes were ever cordoned.
  std::set<std::string> ever;
  for (const auto& c : cordons.Changes())
    if (c.cordoned) ever.insert(c.node);
  EXPECT_EQ(ever, fenced);
}

}  // namespace
}  // namespace gg::fault
