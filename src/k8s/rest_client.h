// RestClient: the typed-path, raw-body Kubernetes REST client. Bodies go in and come out as
// JSON strings so callers parse straight into projections (k8s/codec.h). Errors are the
// server's Status objects mapped to codes (k8s/errors.h). GET/LIST are retried with jittered
// exponential backoff, and every call is retried on 429/503 honoring Retry-After (bounded).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/status.h"
#include "k8s/backoff.h"
#include "k8s/config.h"
#include "k8s/resource.h"
#include "k8s/transport.h"

namespace gg::k8s {

struct ListOptions {
  std::string label_selector;
  std::string field_selector;
  std::int64_t limit = 0;  // 0: no paging
  std::string continue_token;
  std::string resource_version;  // "" latest, "0" any
};

struct WatchOptions {
  std::string resource_version;
  bool allow_bookmarks = true;
  int timeout_seconds = 0;  // server-side; 0: none (the transport still bounds it by +60 s)
  std::string label_selector;
  std::string field_selector;
  // HttpRequest::read_coalesce for the stream.
  std::chrono::milliseconds read_coalesce{0};
};

enum class PatchType { kMerge, kStrategicMerge, kJsonPatch, kApply };
std::string_view PatchContentType(PatchType type);

struct DeleteOptions {
  std::optional<std::int64_t> grace_period_seconds;
  std::string precondition_uid;
  std::string precondition_resource_version;
  std::string propagation_policy;  // "", "Background", "Foreground", "Orphan"
};

struct WriteOptions {
  std::string field_manager;  // fieldManager query
  bool dry_run = false;       // dryRun=All
  bool force = false;         // force=true (server-side apply only)
};

// Page metadata returned by a ListPages callback (it parsed the body).
struct ListPageInfo {
  std::string resource_version;
  std::string continue_token;
};

struct RestClientOptions {
  // Retries for idempotent calls (GET/LIST) on transport errors and 5xx, and for any call on
  // 429/503. 1 = no retries.
  int max_attempts = 5;
  Duration initial_backoff = std::chrono::milliseconds(200);
  Duration max_backoff = std::chrono::seconds(10);
  int max_retry_after_seconds = 30;  // Retry-After is honored up to this
  std::uint64_t jitter_seed = 0;     // 0: random
  // > 0: bounds each HTTP request (not watches) instead of ClientConfig::timeout. Leader
  // election uses it so one hung request cannot outlast the renew deadline.
  std::chrono::milliseconds request_timeout{0};
  // Once stopped (e.g. on SIGTERM), retry sleeps end at once and no further attempt is made:
  // the error of the last attempt is returned, so a shutdown never waits out a Retry-After.
  std::stop_token cancel_retries;
  // Observes each HTTP attempt: method ("GET"...), HTTP code (or "<error>"), host.
  std::function<void(std::string_view method, std::string_view code, std::string_view host)>
      on_request;
};

class RestClient {
 public:
  RestClient(std::unique_ptr<Transport> transport, ClientConfig config, Clock& clock,
             RestClientOptions options = {});
  RestClient(Transport& transport, ClientConfig config, Clock& clock,
             RestClientOptions options = {});
  // Builds a CurlTransport from `config`.
  static StatusOr<std::unique_ptr<RestClient>> Create(const ClientConfig& config, Clock& clock,
                                                      RestClientOptions options = {});
  // A client on the same transport (and clock) with other options, e.g. no retries and a
  // short per-request deadline. It has its own counters and rate limiter; this client must
  // outlive it.
  std::unique_ptr<RestClient> WithOptions(RestClientOptions options);
  const RestClientOptions& options() const { return options_; }

  // Bodies: raw JSON of the object (or list). ns is ignored for cluster-scoped types.
  StatusOr<std::string> Get(const ResourceType& type, std::string_view ns, std::string_view name,
                            std::string_view subresource = "");
  // One page (or the whole list when limit == 0).
  StatusOr<std::string> List(const ResourceType& type, std::string_view ns,
                             const ListOptions& options = {});
  // Pages through with limit/continue; `on_page` parses the body (it may modify/steal it) and
  // returns the page's continue token. An expired continue (410) is returned as OutOfRange.
  Status ListPages(const ResourceType& type, std::string_view ns, ListOptions options,
                   const std::function<StatusOr<ListPageInfo>(std::string& body)>& on_page);
  // Streams watch events, one JSON line per call (followed by >= kBodyPadding readable bytes).
  // Returns OK when the server ended the stream (timeoutSeconds), Cancelled on stop,
  // OutOfRange (reason "Expired"/"Gone", http 410) when the RV is too old — whether as an HTTP
  // status or, as the watch cache does, an ERROR event inside the stream (also still passed to
  // on_line) — and Unavailable/DeadlineExceeded when the stream broke. on_line returning false
  // ends the watch with OK.
  Status Watch(const ResourceType& type, std::string_view ns, const WatchOptions& options,
               const std::function<bool(std::string_view line)>& on_line, std::stop_token stop);

  StatusOr<std::string> Create(const ResourceType& type, std::string_view ns, std::string_view body,
                               const WriteOptions& wo = {});
  // PUT; the body's metadata.resourceVersion gives optimistic concurrency (409 → Aborted,
  // reason "Conflict").
  StatusOr<std::string> Update(const ResourceType& type, std::string_view ns, std::string_view name,
                               std::string_view body, const WriteOptions& wo = {});
  StatusOr<std::string> UpdateStatus(const ResourceType& type, std::string_view ns,
                                     std::string_view name, std::string_view body,
                                     const WriteOptions& wo = {});
  StatusOr<std::string> Patch(const ResourceType& type, std::string_view ns, std::string_view name,
                              PatchType patch_type, std::string_view body,
                              std::string_view subresource = "", const WriteOptions& wo = {});
  Status Delete(const ResourceType& type, std::string_view ns, std::string_view name,
                const DeleteOptions& options = {});
  // POST pods/<name>/eviction (policy/v1). PDB refusal: ResourceExhausted, reason
  // "TooManyRequests" (not retried here: the drainer owns that loop). 404: NotFound.
  Status Evict(std::string_view ns, std::string_view name, const DeleteOptions& options = {});

  // Discovery: the preferred version of an API group ("v1", "v1beta1"); NotFound when absent.
  StatusOr<std::string> PreferredVersion(std::string_view group);
  // Any path (discovery, /version, /healthz). Non-2xx → error Status.
  StatusOr<std::string> RawGet(const std::string& path);

  const ClientConfig& config() const { return config_; }
  Clock& clock() { return clock_; }
  std::string Host() const { return transport_->Host(); }

  // Request counters by "METHOD code" (e.g. "GET 200", "PUT 409", "GET <error>").
  std::map<std::string, std::uint64_t> RequestCounts() const;

 private:
  enum class Idempotency { kIdempotent, kNonIdempotent };
  StatusOr<HttpResponse> Call(HttpRequest req, Idempotency idem, bool is_create);
  void Count(std::string_view method, std::string_view code);
  void Throttle();

  std::unique_ptr<Transport> owned_;
  Transport* transport_;
  ClientConfig config_;
  Clock& clock_;
  RestClientOptions options_;
  std::unique_ptr<TokenBucket> limiter_;  // null: off
  mutable std::mutex mu_;
  std::map<std::string, std::uint64_t> counts_;
  std::uint64_t jitter_state_;
};

}  // namespace gg::k8s
