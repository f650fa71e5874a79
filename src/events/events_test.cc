// Unit tests for the reasons catalog, FakeRecorder and AggregatingRecorder (in-memory sink).
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/clock.h"
#include "events/aggregating.h"
#include "events/fake.h"
#include "events/reasons.h"

namespace gg::events {
namespace {

// Keeps Events by name as the API server would; can fail the next N writes.
class MemorySink final : public EventSink {
 public:
  Status Create(const CoreEvent& e) override {
    std::scoped_lock lock(mu_);
    if (fail_next_ > 0) {
      --fail_next_;
      return UnavailableError("connection refused");
    }
    if (events_.count(e.name)) return AlreadyExistsError(e.name);
    events_[e.name] = e;
    ++creates_;
    return OkStatus();
  }
  Status Patch(const CoreEvent& e) override {
    std::scoped_lock lock(mu_);
    auto it = events_.find(e.name);
    if (it == events_.end()) return NotFoundError(e.name);
    it->second.count = e.count;
    it->second.last_timestamp = e.last_timestamp;
    it->second.message = e.message;
    return OkStatus();
  }
  std::map<std::string, CoreEvent> Events() {
    std::scoped_lock lock(mu_);
    return events_;
  }
  void Delete(const std::string& name) {
    std::scoped_lock lock(mu_);
    events_.erase(name);
  }
  void FailNext(int n) {
    std::scoped_lock lock(mu_);
    fail_next_ = n;
  }
  bool Admit() const override { return admit_.load(); }
  std::atomic<bool> admit_{true};

 private:
  std::mutex mu_;
  std::map<std::string, CoreEvent> events_;
  int fail_next_ = 0;
  int creates_ = 0;
};

TEST(ReasonsTest, CatalogHasArchitectureNames) {
  EXPECT_EQ(std::size(kReasons), 17u);
  EXPECT_EQ(TypeOfReason(kDeviceTaintedByDriver), EventType::kWarning);
  EXPECT_EQ(TypeOfReason(kDrainBlocked), EventType::kWarning);
  EXPECT_EQ(TypeOfReason(kGPURecovered), EventType::kNormal);
  EXPECT_EQ(TypeOfReason("SomethingElse"), EventType::kNormal);
}

TEST(FakeRecorderTest, KeepsEverything) {
  FakeRecorder r;
  r.Event(ObjectRef::Node("n1"), kNodeTainted, "tainted");
  r.Event(ObjectRef::Node("n1"), kNodeTainted, "tainted");
  r.Event(ObjectRef::Node("n2"), kGPUUnhealthy, "xid 79");
  EXPECT_EQ(r.Count(kNodeTainted), 2);
  EXPECT_EQ(r.Count(kGPUUnhealthy, "n2"), 1);
  EXPECT_EQ(r.Events()[2].type, EventType::kWarning);
}

TEST(AggregatingRecorderTest, RepeatWithinWindowPatchesCount) {
  MemorySink sink;
  FakeClock clock;
  AggregatingRecorder rec(sink, clock, {.host = "op-0"});
  auto node = ObjectRef::Node("gpu-node-1", "uid-1");
  rec.Event(node, kGPUUnhealthy, "Xid 79 on GPU-1");
  clock.Advance(std::chrono::seconds(30));
  rec.Event(node, kGPUUnhealthy, "Xid 79 on GPU-1");
  rec.Event(node, kGPUUnhealthy, "Xid 79 on GPU-1");
  rec.Flush();
  auto events = sink.Events();
  ASSERT_EQ(events.size(), 1u);
  const CoreEvent& e = events.begin()->second;
  EXPECT_EQ(e.count, 3);
  EXPECT_EQ(e.namespace_, "default");
  EXPECT_EQ(e.type, EventType::kWarning);
  EXPECT_EQ(e.last_timestamp - e.first_timestamp, std::chrono::seconds(30));
  EXPECT_EQ(e.name.rfind("gpu-node-1.", 0), 0u);
  EXPECT_EQ(rec.Stats().patched, 2u);
}

TEST(AggregatingRecorderTest, DifferentMessageOrObjectIsNewEvent) {
  MemorySink sink;
  FakeClock clock;
  AggregatingRecorder rec(sink, clock);
  rec.Event(ObjectRef::Node("a"), kNodeTainted, "one");
  rec.Event(ObjectRef::Node("a"), kNodeTainted, "two");
  rec.Event(ObjectRef::Node("b"), kNodeTainted, "one");
  rec.Event(ObjectRef::Node("a"), kNodeCordoned, "one");
  rec.Flush();
  EXPECT_EQ(sink.Events().size(), 4u);
}

TEST(AggregatingRecorderTest, RepeatAfterWindowCreatesNewEvent) {
  MemorySink sink;
  FakeClock clock;
  AggregatingRecorder rec(sink, clock);
  rec.Event(ObjectRef::Node("a"), kNodeTainted, "same");
  clock.Advance(std::chrono::minutes(11));
  rec.Event(ObjectRef::Node("a"), kNodeTainted, "same");
  rec.Flush();
  EXPECT_EQ(sink.Events().size(), 2u);
}

TEST(AggregatingRecorderTest, ManyDistinctMessagesAreCombined) {
  MemorySink sink;
  FakeClock clock;
  AggregatingRecorder rec(sink, clock);
  for (int i = 0; i < 15; ++i) {
    rec.Event(ObjectRef::Node("a"), kDrainBlocked, "pod p" + std::to_string(i));
  }
  rec.Flush();
  auto events = sink.Events();
  // 9 distinct events, then one combined event patched for the remaining 6.
  ASSERT_EQ(events.size(), 10u);
  int combined = 0;
  for (const auto& [name, e] : events) {
    if (e.message.rfind("(combined from similar events): ", 0) == 0) {
      ++combined;
      EXPECT_EQ(e.count, 6);
      EXPECT_EQ(e.message, "(combined from similar events): pod p14");
    }
  }
  EXPECT_EQ(combined, 1);
}

TEST(AggregatingRecorderTest, SpamFilterDropsBurstAndRefills) {
  MemorySink sink;
  FakeClock clock;
  AggregatingRecorder rec(sink, clock);
  for (int i = 0; i < 30; ++i) rec.Event(ObjectRef::Node("a"), kNodeTainted, "same");
  rec.Flush();
  EXPECT_EQ(rec.Stats().spam_dropped, 5u);
  EXPECT_EQ(sink.Events().begin()->second.count, 25);
  clock.Advance(std::chrono::minutes(5));
  rec.Event(ObjectRef::Node("a"), kNodeTainted, "same");
  rec.Event(ObjectRef::Node("a"), kNodeTainted, "same");
  rec.Flush();
  EXPECT_EQ(rec.Stats().spam_dropped, 6u);
  // Another object has its own bucket.
  rec.Event(ObjectRef::Node("b"), kNodeTainted, "same");
  rec.Flush();
  EXPECT_EQ(sink.Events().size(), 2u);
}

TEST(AggregatingRecorderTest, PatchOfDeletedEventRecreatesIt) {
  MemorySink sink;
  FakeClock clock;
  AggregatingRecorder rec(sink, clock);
  rec.Event(ObjectRef::Node("a"), kNodeTainted, "same");
  rec.Flush();
  sink.Delete(sink.Events().begin()->first);
  rec.Event(ObjectRef::Node("a"), kNodeTainted, "same");
  rec.Flush();
  auto events = sink.Events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events.begin()->second.count, 2);
}

TEST(AggregatingRecorderTest, TransientErrorsAreRetried) {
  MemorySink sink;
  FakeClock clock;
  AggregatingRecorder rec(sink, clock, {.retry_sleep = std::chrono::milliseconds(0)});
  sink.FailNext(3);
  rec.Event(ObjectRef::Node("a"), kNodeTainted, "x");
  rec.Flush();
  EXPECT_EQ(sink.Events().size(), 1u);
  EXPECT_EQ(rec.Stats().failed, 0u);
}

// Leadership is judged when an Event is recorded: one recorded while leading is delivered
// after the lease is gone (the write had failed meanwhile); one recorded afterwards is not.
TEST(AggregatingRecorderTest, AdmittedEventsSurviveLeadershipLossLaterOnesAreDropped) {
  MemorySink sink;
  FakeClock clock;
  AggregatingRecorder rec(sink, clock, {.retry_sleep = std::chrono::milliseconds(0)});
  sink.FailNext(2);
  rec.Event(ObjectRef::Node("a"), kNodeCordoned, "cordoned");
  sink.admit_ = false;  // the lease is lost while the write is still failing
  rec.Event(ObjectRef::Node("b"), kNodeCordoned, "cordoned");
  EXPECT_TRUE(rec.Flush(std::chrono::seconds(30)));
  auto events = sink.Events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events.begin()->second.involved.name, "a");
  EXPECT_EQ(rec.Stats().not_admitted, 1u);
}

// Events that announce a write the server accepted are delivered even when the lease ran out
// between that write and the Event; without such a write, the sink still decides.
TEST(AggregatingRecorderTest, EventsOfAnAcceptedWriteAreAdmittedAfterTheLeaseRanOut) {
  MemorySink sink;
  FakeClock clock;
  AggregatingRecorder rec(sink, clock, {.retry_sleep = std::chrono::milliseconds(0)});
  sink.admit_ = false;
  {
    AdmittedByWrite admitted;
    rec.Event(ObjectRef::Node("a"), kNodeUncordoned, "uncordoned");
    { AdmittedByWrite nested; }
    rec.Event(ObjectRef::Node("a"), kGPURecovered, "recovered");
  }
  rec.Event(ObjectRef::Node("b"), kNodeCordoned, "cordoned");
  EXPECT_TRUE(rec.Flush(std::chrono::seconds(30)));
  auto events = sink.Events();
  ASSERT_EQ(events.size(), 2u);
  for (const auto& [name, e] : events) EXPECT_EQ(e.involved.name, "a") << name;
  EXPECT_EQ(rec.Stats().not_admitted, 1u);
  EXPECT_FALSE(AdmittedByWrite::Active());
  {
    AdmittedByWrite no_write(false);  // the caller made no write: the sink decides
    rec.Event(ObjectRef::Node("c"), kNodeCordoned, "cordoned");
  }
  EXPECT_TRUE(rec.Flush(std::chrono::seconds(30)));
  EXPECT_EQ(rec.Stats().not_admitted, 2u);
  EXPECT_EQ(sink.Events().size(), 2u);
}

// A bounded Flush returns when its time is up even if a write is still being retried.
TEST(AggregatingRecorderTest, BoundedFlushGivesUpInTime) {
  MemorySink sink;
  FakeClock clock;  // never advanced: the retry sleep does not end
  AggregatingRecorder rec(sink, clock, {.retry_sleep = std::chrono::seconds(10)});
  sink.FailNext(1);
  rec.Event(ObjectRef::Node("a"), kNodeCordoned, "cordoned");
  EXPECT_FALSE(rec.Flush(std::chrono::milliseconds(50)));
  while (clock.Sleepers() == 0) std::this_thread::yield();
  clock.Advance(std::chrono::seconds(10));
  EXPECT_TRUE(rec.Flush(std::chrono::seconds(30)));
  EXPECT_EQ(sink.Events().size(), 1u);
}

TEST(AggregatingRecorderTest, MessageIsTruncatedForValidation) {
  MemorySink sink;
  FakeClock clock;
  AggregatingRecorder rec(sink, clock);
  rec.Event(ObjectRef::Node("a"), kDrainBlocked, std::string(5000, 'x'));
  rec.Flush();
  EXPECT_EQ(sink.Events().begin()->second.message.size(), 1024u);
}

TEST(CoreEventCodecTest, WireShape) {
  CoreEvent e;
  e.name = "n1.abc";
  e.namespace_ = "default";
  e.involved = ObjectRef::Node("n1", "u1");
  e.type = EventType::kWarning;
  e.reason = kGPUUnhealthy;
  e.message = "Xid 79";
  e.component = "gpu-guardian-operator";
  auto j = nlohmann::json::parse(EncodeCoreEvent(e));
  EXPECT_EQ(j["involvedObject"]["kind"], "Node");
  EXPECT_EQ(j["involvedObject"]["uid"], "u1");
  EXPECT_FALSE(j["involvedObject"].contains("namespace"));
  EXPECT_EQ(j["type"], "Warning");
  EXPECT_EQ(j["count"], 1);
  EXPECT_EQ(j["source"]["component"], "gpu-guardian-operator");
  EXPECT_EQ(j["metadata"]["namespace"], "default");
  auto p = nlohmann::json::parse(EncodeCoreEventRepeatPatch(e));
  EXPECT_EQ(p.size(), 3u);
}

}  // namespace
}  // namespace gg::events
