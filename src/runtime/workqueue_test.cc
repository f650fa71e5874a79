// Unit tests for WorkQueue: client-go semantics (de-dup, processing set, AddAfter on a
// FakeClock, rate limiting, shutdown) and its metrics.
#include "runtime/workqueue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "common/wake_batch.h"

namespace gg::runtime {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Waits for a condition on a loaded machine without fixed sleeps.
template <typename F>
bool Eventually(F f, std::chrono::seconds limit = std::chrono::seconds(20)) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (f()) return true;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return f();
}

class WorkQueueTest : public ::testing::Test {
 protected:
  FakeClock clock_;
  metrics::Registry registry_;
  WorkQueue q_{"test", clock_, &registry_};
};

TEST_F(WorkQueueTest, DeduplicatesWhileQueued) {
  q_.Add("a");
  q_.Add("b");
  q_.Add("a");
  EXPECT_EQ(q_.Len(), 2u);
  EXPECT_EQ(q_.TryGet(), "a");  // FIFO
  EXPECT_EQ(q_.TryGet(), "b");
  EXPECT_EQ(q_.TryGet(), std::nullopt);
  EXPECT_EQ(registry_.Value("workqueue_adds_total", {"test"}), 2);
}

TEST_F(WorkQueueTest, ReAddWhileProcessingIsQueuedAfterDone) {
  q_.Add("a");
  auto k = q_.TryGet();
  ASSERT_EQ(k, "a");
  q_.Add("a");              // changed while being processed
  q_.Add("a");              // still once
  EXPECT_EQ(q_.Len(), 0u);  // not handed to a second worker
  EXPECT_EQ(q_.TryGet(), std::nullopt);
  EXPECT_EQ(q_.Processing(), 1u);
  q_.Done("a");
  EXPECT_EQ(q_.Len(), 1u);
  EXPECT_EQ(q_.TryGet(), "a");
  q_.Done("a");
  EXPECT_EQ(q_.Len(), 0u);
  EXPECT_EQ(q_.Processing(), 0u);
  q_.Done("a");      // extra Done is ignored
  q_.Done("never");  // unknown key ignored
  EXPECT_EQ(q_.Len(), 0u);
}

TEST_F(WorkQueueTest, AddAfterFiresOnFakeClock) {
  q_.AddAfter("a", seconds(10));
  q_.AddAfter("b", seconds(5));
  EXPECT_EQ(q_.Len(), 0u);
  EXPECT_EQ(q_.Waiting(), 2u);
  clock_.Advance(seconds(5));
  EXPECT_EQ(q_.TryGet(), "b");
  EXPECT_EQ(q_.Len(), 0u);
  clock_.Advance(seconds(4));
  EXPECT_EQ(q_.Len(), 0u);
  clock_.Advance(seconds(1));
  EXPECT_EQ(q_.TryGet(), "a");
  EXPECT_EQ(q_.Waiting(), 0u);
}

TEST_F(WorkQueueTest, AddAfterKeepsEarliestTime) {
  q_.AddAfter("a", seconds(10));
  q_.AddAfter("a", seconds(20));  // later: ignored
  q_.AddAfter("a", seconds(3));   // sooner: replaces
  EXPECT_EQ(q_.Waiting(), 1u);
  EXPECT_EQ(clock_.PendingTimers(), 1u);  // the superseded timer is cancelled
  clock_.Advance(seconds(3));
  EXPECT_EQ(q_.Len(), 1u);
  clock_.Advance(seconds(30));
  EXPECT_EQ(q_.Len(), 1u);        // no second copy from the old timers
  q_.AddAfter("b", Duration(0));  // zero delay: immediate
  EXPECT_EQ(q_.Len(), 2u);
}

TEST_F(WorkQueueTest, WaitingKeysShareOneTimerAndFireInDeadlineOrder) {
  for (int i = 0; i < 100; ++i) q_.AddAfter("k" + std::to_string(i), seconds(100 - i));
  q_.AddAfter("tie-b", seconds(3));
  q_.AddAfter("tie-a", seconds(3));
  EXPECT_EQ(q_.Waiting(), 102u);
  EXPECT_EQ(clock_.PendingTimers(), 1u);  // one timer for the fleet, not one per key
  clock_.Advance(seconds(1));
  EXPECT_EQ(q_.TryGet(), "k99");
  EXPECT_EQ(q_.TryGet(), std::nullopt);
  clock_.Advance(seconds(2));  // t=3: k98 (due 2), then k97 and the ties (due 3) in AddAfter order
  EXPECT_EQ(q_.TryGet(), "k98");
  EXPECT_EQ(q_.TryGet(), "k97");
  EXPECT_EQ(q_.TryGet(), "tie-b");
  EXPECT_EQ(q_.TryGet(), "tie-a");
  EXPECT_EQ(q_.TryGet(), std::nullopt);
  q_.AddAfter("k0", milliseconds(500));  // sooner than its 100 s: moves up, still one timer
  EXPECT_EQ(clock_.PendingTimers(), 1u);
  clock_.Advance(seconds(1));
  EXPECT_EQ(q_.TryGet(), "k0");
  clock_.Advance(seconds(200));
  EXPECT_EQ(q_.Len(), 96u);  // k1..k96, each once
  EXPECT_EQ(q_.Waiting(), 0u);
  EXPECT_EQ(clock_.PendingTimers(), 0u);
}

// Thousands of keys with random delays, each re-added a few times (later: kept; sooner:
// moved up): the keys fire in the order of their kept time, ties in AddAfter order, each once.
TEST_F(WorkQueueTest, ManyWaitingKeysFireInTheOrderOfTheirKeptTimes) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> delay_ms(1000, 60000), key(0, 1999);
  struct Kept {
    int ms;
    std::uint64_t seq;
  };
  std::map<std::string, Kept> model;
  std::uint64_t seq = 0;
  for (int op = 0; op < 8000; ++op) {
    const std::string k = "node-" + std::to_string(key(rng));
    // Whole seconds now and then, so that equal times (ties) occur.
    const int ms = op % 3 == 0 ? delay_ms(rng) / 1000 * 1000 : delay_ms(rng);
    q_.AddAfter(k, milliseconds(ms));
    auto it = model.find(k);
    if (it != model.end() && it->second.ms <= ms + 1) continue;  // kept: as soon or sooner
    model[k] = {ms, ++seq};
  }
  EXPECT_EQ(q_.Waiting(), model.size());
  EXPECT_EQ(clock_.PendingTimers(), 1u);
  std::vector<std::pair<std::pair<int, std::uint64_t>, std::string>> want;
  for (const auto& [k, kept] : model) want.push_back({{kept.ms, kept.seq}, k});
  std::sort(want.begin(), want.end());
  clock_.Advance(seconds(61));
  ASSERT_EQ(q_.Len(), want.size());
  for (const auto& w : want) {
    auto got = q_.TryGet();
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(*got, w.second);
    q_.Done(*got);
  }
  EXPECT_EQ(q_.TryGet(), std::nullopt);
  EXPECT_EQ(q_.Waiting(), 0u);
  EXPECT_EQ(clock_.PendingTimers(), 0u);
}

TEST_F(WorkQueueTest, AddAfterOfQueuedKeyDeduplicates) {
  q_.Add("a");
  q_.AddAfter("a", seconds(1));
  clock_.Advance(seconds(1));
  EXPECT_EQ(q_.Len(), 1u);
}

TEST_F(WorkQueueTest, RateLimitedBackoffAndForget) {
  q_.AddRateLimited("a");  // 5 ms
  EXPECT_EQ(q_.NumRequeues("a"), 1);
  clock_.Advance(milliseconds(4));
  EXPECT_EQ(q_.Len(), 0u);
  clock_.Advance(milliseconds(1));
  ASSERT_EQ(q_.TryGet(), "a");
  q_.Done("a");
  q_.AddRateLimited("a");  // 10 ms
  clock_.Advance(milliseconds(9));
  EXPECT_EQ(q_.Len(), 0u);
  clock_.Advance(milliseconds(1));
  ASSERT_EQ(q_.TryGet(), "a");
  q_.Done("a");
  EXPECT_EQ(q_.NumRequeues("a"), 2);
  q_.Forget("a");
  EXPECT_EQ(q_.NumRequeues("a"), 0);
  q_.AddRateLimited("a");  // back to 5 ms
  clock_.Advance(milliseconds(5));
  EXPECT_EQ(q_.Len(), 1u);
  EXPECT_EQ(registry_.Value("workqueue_retries_total", {"test"}), 3);
}

TEST_F(WorkQueueTest, ShutDownHandsOutRestThenStops) {
  q_.Add("a");
  q_.AddAfter("later", seconds(1));
  q_.ShutDown();
  EXPECT_TRUE(q_.ShuttingDown());
  q_.Add("b");                            // ignored
  q_.AddRateLimited("c");                 // ignored
  EXPECT_EQ(clock_.PendingTimers(), 0u);  // waiting keys dropped
  EXPECT_EQ(q_.Get(), "a");
  EXPECT_EQ(q_.Get(), std::nullopt);  // does not block once shut down and empty
  clock_.Advance(seconds(5));
  EXPECT_EQ(q_.Len(), 0u);
}

TEST_F(WorkQueueTest, GetBlocksUntilAddOrStop) {
  std::optional<std::string> got;
  std::thread t([&] { got = q_.Get(); });
  q_.Add("x");
  t.join();
  EXPECT_EQ(got, "x");

  std::stop_source stop;
  std::atomic<bool> returned{false};
  std::thread t2([&] {
    auto r = q_.Get(stop.get_token());
    EXPECT_EQ(r, std::nullopt);
    returned = true;
  });
  std::this_thread::sleep_for(milliseconds(5));
  EXPECT_FALSE(returned);
  stop.request_stop();
  t2.join();
  EXPECT_TRUE(returned);
}

// Adds made while several getters sleep wake as many of them as there are keys: none is left
// asleep with a key ready (Adds notify after the unlock, only getters not already woken).
TEST_F(WorkQueueTest, EachAddWakesAnotherSleepingGetter) {
  constexpr int kGetters = 3;
  for (int round = 0; round < 20; ++round) {
    std::atomic<int> holding{0};
    std::vector<std::jthread> ts;
    for (int i = 0; i < kGetters; ++i) {
      ts.emplace_back([&](std::stop_token st) {
        auto k = q_.Get(st);
        if (!k) return;
        ++holding;  // keeps its key until every getter holds one
        while (holding.load() < kGetters && !st.stop_requested()) std::this_thread::yield();
        q_.Done(*k);
      });
    }
    ASSERT_TRUE(Eventually([&] { return q_.Len() == 0; }));
    std::this_thread::sleep_for(milliseconds(2));  // let the getters fall asleep
    for (int i = 0; i < kGetters; ++i)
      q_.Add("r" + std::to_string(round) + "k" + std::to_string(i));
    ASSERT_TRUE(Eventually([&] { return holding.load() == kGetters; }, std::chrono::seconds(10)))
        << "round " << round << ": " << holding.load() << " getters woke for " << kGetters
        << " keys";
  }
}

// A getter woken for a key that TryGet took first sleeps again — and the next Add wakes it.
TEST_F(WorkQueueTest, GetterWokenForAStolenKeyIsWokenByTheNextAdd) {
  for (int i = 0; i < 200; ++i) {
    std::atomic<bool> got{false};
    std::jthread getter([&](std::stop_token st) {
      if (auto k = q_.Get(st)) {
        got = true;
        q_.Done(*k);
      }
    });
    std::this_thread::sleep_for(std::chrono::microseconds(200));  // let it fall asleep
    const std::string a = "a" + std::to_string(i), b = "b" + std::to_string(i);
    q_.Add(a);
    if (auto k = q_.TryGet()) q_.Done(*k);         // usually before the getter runs
    if (got) continue;                             // the getter was first this time
    std::this_thread::sleep_for(milliseconds(1));  // the woken getter finds nothing, sleeps again
    q_.Add(b);
    ASSERT_TRUE(Eventually([&] { return got.load(); }, std::chrono::seconds(5)))
        << "iteration " << i << ": the getter slept through " << b;
  }
}

// Adds inside a WakeBatch (a watch read's events) wake a sleeping getter once, when the batch
// closes, and it finds every key; before that it sleeps on.
TEST_F(WorkQueueTest, AddsInAWakeBatchWakeTheGetterWhenTheBatchCloses) {
  std::atomic<int> got{0};
  std::jthread getter([&](std::stop_token st) {
    while (auto k = q_.Get(st)) {
      ++got;
      q_.Done(*k);
    }
  });
  for (int round = 0; round < 3; ++round) {
    std::this_thread::sleep_for(milliseconds(2));  // let the getter fall asleep
    {
      WakeBatch batch;
      for (int i = 0; i < 4; ++i) {
        q_.Add("r" + std::to_string(round) + "k" + std::to_string(i));
        std::this_thread::sleep_for(milliseconds(5));  // time enough for a woken getter
        EXPECT_EQ(got.load(), 4 * round) << "woken inside the batch, round " << round;
      }
      EXPECT_EQ(q_.Len(), 4U);
    }
    ASSERT_TRUE(Eventually([&] { return got.load() == 4 * (round + 1); }));
  }
}

// A queue destroyed while a batch still owes its getter a wake: the batch keeps the queue's
// state alive and the late wake finds nobody to wake (ASan checks the memory).
TEST(WorkQueue, DestroyedInsideAWakeBatchIsSafe) {
  FakeClock clock;
  WakeBatch batch;
  auto q = std::make_unique<WorkQueue>("gone", clock);
  std::optional<std::string> got;
  std::thread getter([&] { got = q->Get(); });
  std::this_thread::sleep_for(milliseconds(2));
  q->Add("a");    // the wake is deferred
  q->ShutDown();  // wakes the getter, which still gets "a"
  getter.join();
  EXPECT_EQ(got, "a");
  q.reset();  // the wake the batch owes now goes to a queue that is gone
}

TEST_F(WorkQueueTest, ShutDownWakesBlockedGetters) {
  std::vector<std::thread> ts;
  std::atomic<int> woke{0};
  for (int i = 0; i < 3; ++i)
    ts.emplace_back([&] {
      if (!q_.Get()) ++woke;
    });
  q_.ShutDown();
  for (auto& t : ts) t.join();
  EXPECT_EQ(woke, 3);
}

TEST_F(WorkQueueTest, ShutDownWithDrainWaitsForDone) {
  q_.Add("a");
  ASSERT_EQ(q_.TryGet(), "a");
  std::atomic<bool> drained{false};
  std::thread t([&] {
    q_.ShutDownWithDrain();
    drained = true;
  });
  ASSERT_TRUE(Eventually([&] { return q_.ShuttingDown(); }));
  std::this_thread::sleep_for(milliseconds(5));
  EXPECT_FALSE(drained);
  q_.Done("a");
  t.join();
  EXPECT_TRUE(drained);
}

TEST_F(WorkQueueTest, Metrics) {
  q_.Add("a");
  q_.Add("b");
  EXPECT_EQ(registry_.Value("workqueue_depth", {"test"}), 2);
  clock_.Advance(seconds(2));
  ASSERT_EQ(q_.TryGet(), "a");
  EXPECT_EQ(registry_.Value("workqueue_depth", {"test"}), 1);
  clock_.Advance(seconds(3));
  EXPECT_DOUBLE_EQ(registry_.Value("workqueue_unfinished_work_seconds", {"test"}), 3);
  EXPECT_DOUBLE_EQ(registry_.Value("workqueue_longest_running_processor_seconds", {"test"}), 3);
  q_.Done("a");
  EXPECT_DOUBLE_EQ(registry_.Value("workqueue_unfinished_work_seconds", {"test"}), 0);
  const std::string text = registry_.ExposeText();
  EXPECT_NE(text.find("workqueue_queue_duration_seconds_sum{name=\"test\"} 2\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("workqueue_work_duration_seconds_sum{name=\"test\"} 3\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("workqueue_adds_total{name=\"test\"} 2\n"), std::string::npos);
}

TEST(WorkQueue, DestroyedWithPendingTimersIsSafe) {
  FakeClock clock;
  {
    WorkQueue q("gone", clock);
    q.AddAfter("a", seconds(1));
  }
  EXPECT_EQ(clock.PendingTimers(), 0u);
  clock.Advance(seconds(2));  // nothing fires into a dead queue
}

TEST(WorkQueue, RealClockAddAfter) {
  WorkQueue q("real", RealClock::Default());
  q.AddAfter("a", milliseconds(5));
  std::stop_source stop;
  auto got = q.Get(stop.get_token());
  EXPECT_EQ(got, "a");
}

TEST(WorkQueue, ConcurrentWorkersNeverShareAKey) {
  FakeClock clock;
  WorkQueue q("conc", clock);
  constexpr int kKeys = 20;
  constexpr int kAdds = 4000;
  std::mutex mu;
  std::set<std::string> in_flight;
  std::atomic<bool> overlap{false};
  std::atomic<int> processed{0};
  std::vector<std::jthread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&](std::stop_token st) {
      while (auto key = q.Get(st)) {
        {
          std::scoped_lock lock(mu);
          if (!in_flight.insert(*key).second) overlap = true;
        }
        std::this_thread::yield();
        {
          std::scoped_lock lock(mu);
          in_flight.erase(*key);
        }
        ++processed;
        q.Done(*key);
      }
    });
  }
  for (int i = 0; i < kAdds; ++i) q.Add("k" + std::to_string(i % kKeys));
  ASSERT_TRUE(Eventually([&] { return q.Len() == 0 && q.Processing() == 0; }));
  q.ShutDown();
  workers.clear();
  EXPECT_FALSE(overlap);
  EXPECT_GE(processed, kKeys);  // every key at least once
  EXPECT_LE(processed, kAdds);  // de-duplicated
}

TEST_F(WorkQueueTest, UrgentKeysAreHandedOutBeforeNormalOnes) {
  for (const char* k : {"n1", "n2", "n3"}) q_.Add(k);
  q_.Add("u1", Priority::kUrgent);
  q_.Add("n2", Priority::kUrgent);  // queued as normal: moves to the urgent lane
  q_.Add("u1");                     // a normal Add never demotes
  EXPECT_EQ(q_.Len(), 4u);
  EXPECT_EQ(q_.UrgentLen(), 2u);
  EXPECT_EQ(q_.TryGet(), "u1");
  EXPECT_EQ(q_.TryGet(), "n2");
  EXPECT_EQ(q_.UrgentLen(), 0u);
  EXPECT_EQ(q_.TryGet(), "n1");
  EXPECT_EQ(q_.TryGet(), "n3");  // n2's old normal entry is not handed out again
  EXPECT_EQ(q_.TryGet(), std::nullopt);
  EXPECT_EQ(q_.Len(), 0u);
  for (const char* k : {"u1", "n2", "n1", "n3"}) q_.Done(k);
  EXPECT_EQ(q_.Processing(), 0u);
  EXPECT_EQ(registry_.Value("workqueue_depth", {"test"}), 0);
}

TEST_F(WorkQueueTest, PromotedKeyReaddedAfterDoneIsHandedOutOnce) {
  q_.Add("a");
  q_.Add("b");
  q_.Add("a", Priority::kUrgent);  // leaves a stale normal entry for "a"
  ASSERT_EQ(q_.TryGet(), "a");
  q_.Done("a");
  q_.Add("a");  // queued again as normal, behind b: the stale entry must not count
  EXPECT_EQ(q_.Len(), 2u);
  EXPECT_EQ(q_.TryGet(), "b");
  EXPECT_EQ(q_.TryGet(), "a");
  EXPECT_EQ(q_.TryGet(), std::nullopt);
}

TEST_F(WorkQueueTest, UrgentAddWhileProcessingRequeuesUrgent) {
  q_.Add("a");
  q_.Add("b");
  ASSERT_EQ(q_.TryGet(), "a");
  q_.Add("a", Priority::kUrgent);
  q_.Done("a");
  EXPECT_EQ(q_.UrgentLen(), 1u);
  EXPECT_EQ(q_.TryGet(), "a");
  EXPECT_EQ(q_.TryGet(), "b");
}

TEST_F(WorkQueueTest, RequeueKeepsTheLaneTheKeyCameFrom) {
  q_.Add("u", Priority::kUrgent);
  q_.Add("n");
  ASSERT_EQ(q_.TryGet(), "u");
  q_.AddAfter("u", seconds(1));  // a requeue while processing: stays urgent
  q_.Done("u");
  ASSERT_EQ(q_.TryGet(), "n");
  q_.AddAfter("n", seconds(1));  // stays normal
  q_.Done("n");
  q_.AddAfter("x", seconds(1));  // not processing: normal
  q_.Add("m");
  clock_.Advance(seconds(1));
  EXPECT_EQ(q_.UrgentLen(), 1u);
  EXPECT_EQ(q_.TryGet(), "u");
  EXPECT_EQ(q_.Len(), 3u);
}

TEST_F(WorkQueueTest, WaitingKeyKeepsTheHigherPriority) {
  q_.AddAfter("a", seconds(1), Priority::kUrgent);
  q_.AddAfter("a", seconds(5), Priority::kNormal);  // later and lower: ignored
  q_.AddAfter("b", seconds(5), Priority::kNormal);
  q_.AddAfter("b", seconds(9), Priority::kUrgent);  // later, but raises the priority
  clock_.Advance(seconds(5));
  EXPECT_EQ(q_.UrgentLen(), 2u);
  q_.AddAfter("c", Duration(0), Priority::kUrgent);  // no delay: added now
  EXPECT_EQ(q_.UrgentLen(), 3u);
}

TEST_F(WorkQueueTest, ConcurrentUrgentAndNormalAddsLoseNothing) {
  constexpr int kKeys = 2000;
  std::set<std::string> seen;
  std::mutex seen_mu;
  std::vector<std::jthread> workers;
  // Destroyed before the workers are joined, also when an assertion returns early.
  struct ShutDownOnExit {
    WorkQueue& q;
    ~ShutDownOnExit() { q.ShutDown(); }
  } shut_down{q_};
  for (int w = 0; w < 3; ++w) {
    workers.emplace_back([&] {
      while (auto k = q_.Get()) {
        {
          std::scoped_lock l(seen_mu);
          seen.insert(*k);
        }
        q_.Done(*k);
      }
    });
  }
  std::jthread producer([&] {
    for (int i = 0; i < kKeys; ++i) {
      std::string k = "k" + std::to_string(i % 500) + "-" + std::to_string(i);
      q_.Add(k);
      if (i % 3 == 0) q_.Add(k, Priority::kUrgent);
    }
  });
  producer.join();
  ASSERT_TRUE(Eventually([&] {
    std::scoped_lock l(seen_mu);
    return seen.size() == static_cast<std::size_t>(kKeys);
  }));
  ASSERT_TRUE(Eventually([&] { return q_.Len() == 0 && q_.Processing() == 0; }));
}

}  // namespace
}  // namespace gg::runtime
