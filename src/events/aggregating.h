// AggregatingRecorder: a core/v1 Event recorder that behaves like client-go's tools/record:
//  * spam filter: token bucket per (source, object, type), burst 25, one token per 5 min;
//  * aggregation: >= 10 distinct messages for one (object, type, reason) within 10 min are
//    folded into one "(combined from similar events): <msg>" Event;
//  * dedup: the same (object, type, reason, message) seen again within 10 min PATCHes count and
//    lastTimestamp of the existing Event instead of creating a new one (LRU of 4096 keys).
// Writes happen on one background thread (ordered, bounded queue of 1000, drops when full);
// transient sink errors are retried (12 tries, 10 s apart by default). Event() never blocks
// on the network.
// Leadership is checked when an Event is recorded (EventSink::Admit), not when it is written: an
// Event records a decision this replica made while it led, so it is still delivered after the lease
// is lost (a successor re-derives state from the world and would not repeat it). A replica
// that does not lead records nothing, except the Events of a write it made (AdmittedByWrite).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "events/recorder.h"
#include "events/sink.h"

namespace gg::events {

struct RecorderOptions {
  std::string component = "gpu-guardian-operator";
  std::string host;  // reportingInstance (pod name / node name); may be empty
  int spam_burst = 25;
  Duration spam_refill = std::chrono::minutes(5);
  int aggregate_max_distinct = 10;
  Duration aggregate_window = std::chrono::minutes(10);
  Duration dedup_window = std::chrono::minutes(10);
  std::size_t cache_size = 4096;
  std::size_t queue_size = 1000;
  int max_tries = 12;
  Duration retry_sleep = std::chrono::seconds(10);
};

struct RecorderStats {
  uint64_t created = 0;       // POSTs that succeeded
  uint64_t patched = 0;       // PATCHes that succeeded
  uint64_t spam_dropped = 0;  // dropped by the spam filter
  uint64_t queue_dropped = 0;
  uint64_t failed = 0;        // gave up after errors
  uint64_t not_admitted = 0;  // recorded while the sink did not admit them (not leading)
};

// While one lives on a thread, the Events that thread records are admitted without asking the
// sink: they announce a write the API server accepted from this replica, and that write passed
// its own leadership check. A lease whose renew deadline runs out between the write and the
// Event (the write's round trip) must not lose the Event of a change already made.
class AdmittedByWrite {
 public:
  // `active` false: a scope that changes nothing (the caller made no write).
  explicit AdmittedByWrite(bool active = true);
  ~AdmittedByWrite();
  AdmittedByWrite(const AdmittedByWrite&) = delete;
  AdmittedByWrite& operator=(const AdmittedByWrite&) = delete;
  static bool Active();

 private:
  bool outer_;
};

class AggregatingRecorder final : public EventRecorder {
 public:
  AggregatingRecorder(EventSink& sink, Clock& clock, RecorderOptions options = {});
  ~AggregatingRecorder() override;  // stops the writer; pending events are dropped
  AggregatingRecorder(const AggregatingRecorder&) = delete;
  AggregatingRecorder& operator=(const AggregatingRecorder&) = delete;

  using EventRecorder::Event;
  void Event(const ObjectRef& object, EventType type, std::string_view reason,
             std::string_view message) override;

  // Blocks until everything queued so far was written (or given up). Tests and shutdown.
  void Flush();
  // Same, at most `timeout` (real time); false when events were still pending then.
  bool Flush(std::chrono::milliseconds timeout);
  RecorderStats Stats() const;

 private:
  struct Bucket {
    double tokens = 0;
    MonoTime last{};
  };
  struct Aggregate {
    MonoTime window_start{};
    std::vector<std::string> messages;  // distinct messages in the window
  };
  struct Entry {
    CoreEvent event;
    MonoTime last_seen{};
    std::list<std::string>::iterator lru;
  };
  enum class Op { kCreate, kPatch };
  struct Pending {
    Op op;
    CoreEvent event;
  };

  bool AllowSpam(const std::string& key, MonoTime now);
  void Touch(Entry& e, const std::string& key);
  void Evict();
  std::string NewName(const ObjectRef& o, WallTime now);
  void Run(std::stop_token stop);
  void Write(Pending p, std::stop_token stop);

  EventSink& sink_;
  Clock& clock_;
  RecorderOptions opts_;

  mutable std::mutex mu_;
  std::condition_variable_any cv_;
  std::unordered_map<std::string, Bucket> buckets_;
  std::unordered_map<std::string, Aggregate> aggregates_;
  std::unordered_map<std::string, Entry> cache_;
  std::list<std::string> lru_;  // front = most recent
  std::deque<Pending> queue_;
  bool busy_ = false;
  int64_t last_nanos_ = 0;
  RecorderStats stats_;
  std::jthread worker_;
};

}  // namespace gg::events
