// AggregatingRecorder: correlation (spam filter, aggregation, dedup) under one lock in the
// caller's thread; the network writes on one background thread.
#include "events/aggregating.h"

#include <algorithm>
#include <cstdio>

#include "common/log.h"

namespace gg::events {
namespace {

constexpr std::size_t kMaxMessage = 1024;  // core/v1 validation limit when eventTime is set
constexpr std::size_t kMaxReason = 128;

std::string ObjectKey(const ObjectRef& o) {
  return o.kind + '\x1f' + o.api_version + '\x1f' + o.namespace_ + '\x1f' + o.name + '\x1f' + o.uid;
}

std::string Truncate(std::string_view s, std::size_t n) {
  return std::string(s.substr(0, std::min(s.size(), n)));
}

}  // namespace

AggregatingRecorder::AggregatingRecorder(EventSink& sink, Clock& clock, RecorderOptions options)
    : sink_(sink), clock_(clock), opts_(std::move(options)) {
  worker_ = std::jthread([this](std::stop_token st) { Run(st); });
}

AggregatingRecorder::~AggregatingRecorder() {
  worker_.request_stop();
  cv_.notify_all();
}

bool AggregatingRecorder::AllowSpam(const std::string& key, MonoTime now) {
  auto [it, inserted] = buckets_.try_emplace(key);
  Bucket& b = it->second;
  if (inserted) {
    b.tokens = opts_.spam_burst;
    b.last = now;
  } else if (opts_.spam_refill.count() > 0) {
    double refill = std::chrono::duration<double>(now - b.last).count() /
                    std::chrono::duration<double>(opts_.spam_refill).count();
    b.tokens = std::min<double>(opts_.spam_burst, b.tokens + refill);
    b.last = now;
  }
  if (b.tokens < 1.0) return false;
  b.tokens -= 1.0;
  return true;
}

std::string AggregatingRecorder::NewName(const ObjectRef& o, WallTime now) {
  int64_t nanos =
      std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  if (nanos <= last_nanos_) nanos = last_nanos_ + 1;  // unique even within one clock tick
  last_nanos_ = nanos;
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%llx", static_cast<unsigned long long>(nanos));
  return o.name + "." + buf;
}

void AggregatingRecorder::Touch(Entry& e, const std::string& key) {
  lru_.erase(e.lru);
  lru_.push_front(key);
  e.lru = lru_.begin();
}

void AggregatingRecorder::Evict() {
  while (cache_.size() > opts_.cache_size && !lru_.empty()) {
    cache_.erase(lru_.back());
    lru_.pop_back();
  }
}

namespace {
thread_local bool admitted_by_write = false;
}  // namespace

AdmittedByWrite::AdmittedByWrite(bool active) : outer_(admitted_by_write) {
  admitted_by_write = outer_ || active;
}
AdmittedByWrite::~AdmittedByWrite() { admitted_by_write = outer_; }
bool AdmittedByWrite::Active() { return admitted_by_write; }

void AggregatingRecorder::Event(const ObjectRef& object, EventType type, std::string_view reason,
                                std::string_view message) {
  const MonoTime mono = clock_.Monotonic();
  const WallTime wall = clock_.Now();
  if (!AdmittedByWrite::Active() && !sink_.Admit()) {
    std::scoped_lock lock(mu_);
    ++stats_.not_admitted;
    return;
  }
  std::string obj = ObjectKey(object);
  std::string type_name(EventTypeName(type));
  std::string msg = Truncate(message, kMaxMessage);
  std::string rsn = Truncate(reason, kMaxReason);

  std::unique_lock lock(mu_);
  if (!AllowSpam(obj + '\x1e' + type_name, mono)) {
    ++stats_.spam_dropped;
    return;
  }

  // Aggregation: many distinct messages for one reason collapse into a combined Event.
  std::string agg_key = obj + '\x1e' + type_name + '\x1e' + rsn;
  Aggregate& agg = aggregates_[agg_key];
  if (mono - agg.window_start > opts_.aggregate_window) {
    agg.window_start = mono;
    agg.messages.clear();
  }
  if (std::find(agg.messages.begin(), agg.messages.end(), msg) == agg.messages.end()) {
    agg.messages.push_back(msg);
  }
  std::string dedup_key;
  if (static_cast<int>(agg.messages.size()) >= opts_.aggregate_max_distinct) {
    msg = Truncate("(combined from similar events): " + msg, kMaxMessage);
    dedup_key = agg_key + '\x1e' + "(combined)";
  } else {
    dedup_key = agg_key + '\x1e' + msg;
  }

  Pending p;
  auto it = cache_.find(dedup_key);
  if (it != cache_.end() && mono - it->second.last_seen <= opts_.dedup_window) {
    Entry& e = it->second;
    e.event.count += 1;
    e.event.last_timestamp = wall;
    e.event.message = msg;
    e.last_seen = mono;
    Touch(e, dedup_key);
    p = {Op::kPatch, e.event};
  } else {
    CoreEvent ev;
    ev.name = NewName(object, wall);
    ev.namespace_ = object.namespace_.empty() ? "default" : object.namespace_;
    ev.involved = object;
    ev.type = type;
    ev.reason = rsn;
    ev.message = msg;
    ev.count = 1;
    ev.first_timestamp = ev.last_timestamp = wall;
    ev.component = opts_.component;
    ev.host = opts_.host;
    if (it != cache_.end()) {
      lru_.erase(it->second.lru);
      cache_.erase(it);
    }
    lru_.push_front(dedup_key);
    cache_[dedup_key] = Entry{ev, mono, lru_.begin()};
    Evict();
    p = {Op::kCreate, std::move(ev)};
  }
  if (queue_.size() >= opts_.queue_size) {
    ++stats_.queue_dropped;
    return;
  }
  queue_.push_back(std::move(p));
  lock.unlock();
  cv_.notify_all();
}

void AggregatingRecorder::Run(std::stop_token stop) {
  while (!stop.stop_requested()) {
    Pending p;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, stop, [this] { return !queue_.empty(); });
      if (stop.stop_requested()) return;
      p = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    Write(std::move(p), stop);
    {
      std::scoped_lock lock(mu_);
      busy_ = false;
    }
    cv_.notify_all();
  }
}

void AggregatingRecorder::Write(Pending p, std::stop_token stop) {
  static const Logger log = Logger().WithName("events");
  const int tries = std::max(1, opts_.max_tries);
  for (int attempt = 1;; ++attempt) {
    Status s = p.op == Op::kPatch ? sink_.Patch(p.event) : sink_.Create(p.event);
    if (p.op == Op::kPatch && IsNotFound(s)) {
      // The Event expired or was deleted: recreate it under the same name, keeping the count.
      p.op = Op::kCreate;
      s = sink_.Create(p.event);
    }
    if (s.ok()) {
      std::scoped_lock lock(mu_);
      ++(p.op == Op::kPatch ? stats_.patched : stats_.created);
      return;
    }
    // client-go does not retry API errors (AlreadyExists, Invalid, ...), only transport ones.
    if (!IsTransient(s) || attempt >= tries || stop.stop_requested()) {
      {
        std::scoped_lock lock(mu_);
        ++stats_.failed;
      }
      log.Warn(
          "dropping event",
          {{"reason", p.event.reason}, {"object", p.event.involved.name}, {"error", s.ToString()}});
      return;
    }
    if (!clock_.SleepFor(opts_.retry_sleep, stop)) return;
  }
}

void AggregatingRecorder::Flush() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [this] { return queue_.empty() && !busy_; });
}

bool AggregatingRecorder::Flush(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [this] { return queue_.empty() && !busy_; });
}

RecorderStats AggregatingRecorder::Stats() const {
  std::scoped_lock lock(mu_);
  return stats_;
}

}  // namespace gg::events
