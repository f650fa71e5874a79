// Informer core: the LIST-then-WATCH loop with resume, relist on 410 and backoff.
#include "runtime/informer.h"

#include <random>

#include "k8s/backoff.h"
#include "k8s/codec.h"
#include "k8s/crd_hint.h"
#include "k8s/errors.h"

namespace gg::runtime {
namespace {

// Logs a failure that repeats on every retry once when it starts or changes, then every
// kRepeat while it lasts (with how many retries were not logged) — not a line per backoff.
class RepeatedFailureLog {
 public:
  static constexpr Duration kRepeat = std::chrono::minutes(5);
  // True when this occurrence should be logged; `*unlogged` = occurrences skipped since.
  bool ShouldLog(const std::string& error, MonoTime now, std::int64_t* unlogged) {
    if (error != last_ || now - logged_at_ >= kRepeat) {
      *unlogged = skipped_;
      last_ = error;
      logged_at_ = now;
      skipped_ = 0;
      return true;
    }
    ++skipped_;
    return false;
  }
  void Reset() {
    last_.clear();
    skipped_ = 0;
  }

 private:
  std::string last_;
  MonoTime logged_at_{};
  std::int64_t skipped_ = 0;
};

}  // namespace

InformerCore::InformerCore(k8s::RestClient& client, k8s::ResourceType type, Clock& clock,
                           InformerOptions options)
    : log_(Logger().WithName("informer").WithValues({{"resource", type.resource}})),
      client_(client),
      type_(std::move(type)),
      clock_(clock),
      options_(std::move(options)) {}

InformerCore::~InformerCore() { Stop(); }

void InformerCore::Start() {
  if (thread_.joinable()) return;
  thread_ = std::jthread([this](std::stop_token st) { Run(st); });
}

void InformerCore::Stop() {
  if (!thread_.joinable()) return;
  thread_.request_stop();
  thread_.join();
}

bool InformerCore::WaitForSync(std::stop_token stop, std::chrono::milliseconds timeout) const {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!synced_.load()) {
    if (stop.stop_requested() || std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

std::string InformerCore::LastResourceVersion() const {
  std::scoped_lock lock(rv_mu_);
  return rv_;
}

Status InformerCore::ListAll(std::stop_token stop) {
  k8s::ListOptions lo;
  lo.limit = options_.page_size;
  lo.label_selector = options_.label_selector;
  lo.field_selector = options_.field_selector;
  // resourceVersion "" = a consistent (paged) read; "0" would let a real server ignore limit.
  BeginRelist();
  std::string list_rv;
  Status s = client_.ListPages(type_, options_.namespace_, lo,
                               [&](std::string& body) -> StatusOr<k8s::ListPageInfo> {
                                 if (stop.stop_requested()) return CancelledError("stopping");
                                 stats_.list_pages.fetch_add(1, std::memory_order_relaxed);
                                 auto info = OnListPage(body);
                                 if (info.ok() && list_rv.empty()) {
                                   list_rv = info->resource_version;
                                 }
                                 return info;
                               });
  k8s::json::ReleaseLargeThreadParser();
  if (!s.ok()) return s;
  EndRelist();
  {
    std::scoped_lock lock(rv_mu_);
    rv_ = list_rv;
  }
  if (stats_.lists.fetch_add(1) > 0) stats_.relists.fetch_add(1);
  return OkStatus();
}

// A WATCH from the last resourceVersion seen, with bookmarks and this informer's selectors.
k8s::WatchOptions InformerCore::NextWatchOptions(std::uint64_t& rng) {
  k8s::WatchOptions wo;
  wo.resource_version = LastResourceVersion();
  wo.allow_bookmarks = true;
  wo.label_selector = options_.label_selector;
  wo.field_selector = options_.field_selector;
  wo.read_coalesce = options_.watch_read_coalesce;
  if (options_.watch_timeout_seconds > 0) {
    // Spread reconnects of many informers: [t, 2t) as client-go's reflector does.
    wo.timeout_seconds = options_.watch_timeout_seconds +
                         static_cast<int>(k8s::NextUnit(rng) * options_.watch_timeout_seconds);
  }
  return wo;
}

// One WATCH until it ends: each line applied to the cache and its resourceVersion kept. A
// line that cannot be applied ends the watch; its error goes to *line_status.
Status InformerCore::WatchOnce(const k8s::WatchOptions& wo, std::stop_token stop,
                               Status* line_status) {
  return client_.Watch(
      type_, options_.namespace_, wo,
      [&](std::string_view line) {
        std::string rv;
        Status s = OnWatchLine(line, &rv);
        if (!s.ok()) {
          *line_status = s;
          return false;
        }
        if (!rv.empty()) {
          std::scoped_lock lock(rv_mu_);
          rv_ = std::move(rv);
        }
        return true;
      },
      stop);
}

void InformerCore::Run(std::stop_token stop) {
  k8s::Backoff backoff(options_.backoff_initial, options_.backoff_max);
  std::uint64_t rng = std::random_device{}();
  bool need_list = true;
  RepeatedFailureLog list_failures;
  // A type the server does not serve (our CRDs not installed) fails every LIST and WATCH the
  // same way: one error naming the CRD and the command that installs it, repeated rarely.
  auto log_failure = [&](const char* what, const Status& s) {
    std::int64_t unlogged = 0;
    if (!list_failures.ShouldLog(s.ToString(), clock_.Monotonic(), &unlogged)) return;
    if (k8s::IsResourceNotServed(s)) {
      log_.Error(std::string(what) + ": " + k8s::MissingResourceHint(type_),
                 {{"error", s.ToString()}, {"retries_not_logged", unlogged}});
    } else {
      log_.Warn(std::string(what) + "; retrying",
                {{"error", s.ToString()}, {"retries_not_logged", unlogged}});
    }
  };
  while (!stop.stop_requested()) {
    if (need_list) {
      Status s = ListAll(stop);
      if (stop.stop_requested()) return;
      if (!s.ok()) {
        stats_.errors.fetch_add(1);
        log_failure("list failed", s);
        OnListError(s);
        if (!clock_.SleepFor(backoff.Next(), stop)) return;
        continue;
      }
      list_failures.Reset();
      need_list = false;
      backoff.Reset();
      synced_.store(true);
    }

    if (options_.poll_interval > Duration::zero()) {
      // Poll mode: the next full LIST after the interval; EndRelist() delivers the diff.
      if (!clock_.SleepFor(options_.poll_interval, stop)) return;
      need_list = true;
      continue;
    }

    const k8s::WatchOptions wo = NextWatchOptions(rng);
    stats_.watches.fetch_add(1);
    Status line_status;
    std::uint64_t events_before = stats_.events.load() + stats_.bookmarks.load();
    MonoTime started = clock_.Monotonic();
    Status ws = WatchOnce(wo, stop, &line_status);
    if (stop.stop_requested()) return;
    if (!line_status.ok()) ws = line_status;
    bool progressed = stats_.events.load() + stats_.bookmarks.load() > events_before;
    if (ws.ok()) {
      // Server-side timeout: resume from the last resourceVersion (no LIST). A server that
      // closes at once without sending anything gets a backoff rather than a hot loop.
      if (progressed || clock_.Monotonic() - started > std::chrono::seconds(1)) {
        backoff.Reset();
      } else if (!clock_.SleepFor(backoff.Next(), stop)) {
        return;
      }
      continue;
    }
    if (k8s::IsExpired(ws)) {
      log_.Info("watch expired (410); relisting", {{"rv", wo.resource_version}});
      need_list = true;
      continue;
    }
    stats_.errors.fetch_add(1);
    if (ws.code() == StatusCode::kInvalidArgument && !line_status.ok()) {
      // An event we could not decode is lost: only a relist restores a consistent cache.
      log_.Warn("undecodable watch event; relisting", {{"error", ws.ToString()}});
      need_list = true;
    } else {
      log_failure("watch ended with error", ws);
    }
    if (progressed) backoff.Reset();
    if (!clock_.SleepFor(backoff.Next(), stop)) return;
  }
}

}  // namespace gg::runtime
