// RestClient: request building, retries (jittered backoff, Retry-After), rate limiting,
// error mapping and request counting.
#include "k8s/rest_client.h"

#include <random>

#include "k8s/builders.h"
#include "k8s/client_metrics.h"
#include "k8s/codec.h"
#include "k8s/errors.h"
#include "k8s/json_decode.h"

namespace gg::k8s {
namespace {

void AddQuery(std::string& path, std::string_view key, std::string_view value) {
  path += path.find('?') == std::string::npos ? '?' : '&';
  path += key;
  path += '=';
  path += UrlEscape(value);
}

void AddWriteOptions(std::string& path, const WriteOptions& wo) {
  if (!wo.field_manager.empty()) AddQuery(path, "fieldManager", wo.field_manager);
  if (wo.dry_run) AddQuery(path, "dryRun", "All");
  if (wo.force) AddQuery(path, "force", "true");
}

bool Is2xx(int code) { return code >= 200 && code < 300; }

}  // namespace

std::string_view PatchContentType(PatchType type) {
  switch (type) {
    case PatchType::kMerge:
      return "application/merge-patch+json";
    case PatchType::kStrategicMerge:
      return "application/strategic-merge-patch+json";
    case PatchType::kJsonPatch:
      return "application/json-patch+json";
    case PatchType::kApply:
      return "application/apply-patch+yaml";
  }
  return "application/merge-patch+json";
}

RestClient::RestClient(std::unique_ptr<Transport> transport, ClientConfig config, Clock& clock,
                       RestClientOptions options)
    : RestClient(*transport, std::move(config), clock, std::move(options)) {
  owned_ = std::move(transport);
}

RestClient::RestClient(Transport& transport, ClientConfig config, Clock& clock,
                       RestClientOptions options)
    : transport_(&transport),
      config_(std::move(config)),
      clock_(clock),
      options_(std::move(options)) {
  if (config_.qps > 0) {
    limiter_ =
        std::make_unique<TokenBucket>(config_.qps, config_.burst > 0 ? config_.burst : 1, clock_);
  }
  jitter_state_ = options_.jitter_seed ? options_.jitter_seed : std::random_device{}();
  if (options_.max_attempts < 1) options_.max_attempts = 1;
}

StatusOr<std::unique_ptr<RestClient>> RestClient::Create(const ClientConfig& config, Clock& clock,
                                                         RestClientOptions options) {
  GG_ASSIGN_OR_RETURN(auto transport, CurlTransport::Create(config));
  return std::make_unique<RestClient>(std::move(transport), config, clock, std::move(options));
}

std::unique_ptr<RestClient> RestClient::WithOptions(RestClientOptions options) {
  return std::make_unique<RestClient>(*transport_, config_, clock_, std::move(options));
}

void RestClient::Count(std::string_view method, std::string_view code) {
  {
    std::scoped_lock lock(mu_);
    std::string key(method);
    key += ' ';
    key += code;
    ++counts_[key];
  }
  if (options_.on_request)
    options_.on_request(method, code, transport_->Host());
  else
    DefaultRequestHook()(method, code, transport_->Host());
}

std::map<std::string, std::uint64_t> RestClient::RequestCounts() const {
  std::scoped_lock lock(mu_);
  return counts_;
}

void RestClient::Throttle() {
  if (limiter_) (void)limiter_->Wait();
}

StatusOr<HttpResponse> RestClient::Call(HttpRequest req, Idempotency idem, bool is_create) {
  std::uint64_t start;
  {
    std::scoped_lock lock(mu_);
    start = NextRandom(jitter_state_);
  }
  Backoff backoff(options_.initial_backoff, options_.max_backoff, 2.0, 0.2, start | 1);
  if (req.timeout.count() == 0) req.timeout = options_.request_timeout;
  const std::stop_token& cancel = options_.cancel_retries;
  bool reauthed = false;
  Status last;
  for (int attempt = 1;; ++attempt) {
    Throttle();
    auto r = transport_->Do(req);
    bool more = attempt < options_.max_attempts && !cancel.stop_requested();
    if (!r.ok()) {
      Count(req.method, "<error>");
      last = r.status();
      bool transient =
          last.code() == StatusCode::kUnavailable || last.code() == StatusCode::kDeadlineExceeded;
      if (idem == Idempotency::kIdempotent && transient && more &&
          clock_.SleepFor(backoff.Next(), cancel)) {
        continue;
      }
      return last;
    }
    Count(req.method, std::to_string(r->status));
    if (Is2xx(r->status)) return r;
    if (r->status == 401 && !reauthed) {
      // A rotated service-account token: re-read it and try once more.
      reauthed = true;
      transport_->InvalidateCredentials();
      continue;
    }
    Status err = ErrorFromResponse(r->status, r->body, r->Header("retry-after"), is_create);
    bool retryable = r->status == 429 || r->status == 503 ||
                     (idem == Idempotency::kIdempotent && r->status >= 500 && r->status != 501);
    // Eviction 429s are PDB refusals: the drainer decides when to retry.
    if (req.path.ends_with("/eviction") && r->status == 429) retryable = false;
    if (retryable && more) {
      Duration wait = backoff.Next();
      if (err.retry_after_seconds() > 0) {
        wait = std::chrono::seconds(
            std::min(err.retry_after_seconds(), options_.max_retry_after_seconds));
      }
      if (clock_.SleepFor(wait, cancel)) continue;
    }
    return err;
  }
}

StatusOr<std::string> RestClient::Get(const ResourceType& type, std::string_view ns,
                                      std::string_view name, std::string_view subresource) {
  HttpRequest req;
  req.path = type.ObjectPath(ns, name, subresource);
  GG_ASSIGN_OR_RETURN(auto resp, Call(std::move(req), Idempotency::kIdempotent, false));
  return std::move(resp.body);
}

StatusOr<std::string> RestClient::List(const ResourceType& type, std::string_view ns,
                                       const ListOptions& o) {
  HttpRequest req;
  req.path = type.CollectionPath(ns);
  if (!o.label_selector.empty()) AddQuery(req.path, "labelSelector", o.label_selector);
  if (!o.field_selector.empty()) AddQuery(req.path, "fieldSelector", o.field_selector);
  if (o.limit > 0) AddQuery(req.path, "limit", std::to_string(o.limit));
  if (!o.continue_token.empty()) AddQuery(req.path, "continue", o.continue_token);
  if (!o.resource_version.empty()) AddQuery(req.path, "resourceVersion", o.resource_version);
  GG_ASSIGN_OR_RETURN(auto resp, Call(std::move(req), Idempotency::kIdempotent, false));
  return std::move(resp.body);
}

Status RestClient::ListPages(
    const ResourceType& type, std::string_view ns, ListOptions options,
    const std::function<StatusOr<ListPageInfo>(std::string& body)>& on_page) {
  for (int page = 0;; ++page) {
    auto body = List(type, ns, options);
    if (!body.ok()) return body.status().WithContext("listing " + type.resource);
    auto info = on_page(*body);
    if (!info.ok()) return info.status().WithContext("decoding " + type.resource + " list");
    if (info->continue_token.empty()) return OkStatus();
    options.continue_token = info->continue_token;
    // The continue token pins the snapshot; resourceVersion must not be repeated with it.
    options.resource_version.clear();
  }
}

namespace {
// Whether a watch line may be an ERROR event. Servers write "type" first, so a line that starts
// {"type":"<other>" is not one; any other shape is searched whole (scanning every 13 KB Node
// event for "ERROR" cost more than finding its end of line).
bool MaybeErrorEvent(std::string_view line) {
  constexpr std::string_view kTypeFirst = "{\"type\":\"";
  std::size_t p = line.find_first_not_of(" \t\r");
  if (p != std::string_view::npos && line.substr(p).starts_with(kTypeFirst)) {
    return line.substr(p + kTypeFirst.size()).starts_with("ERROR\"");
  }
  return line.find("\"ERROR\"") != std::string_view::npos;
}
}  // namespace

Status RestClient::Watch(const ResourceType& type, std::string_view ns, const WatchOptions& o,
                         const std::function<bool(std::string_view line)>& on_line,
                         std::stop_token stop) {
  HttpRequest req;
  req.path = type.CollectionPath(ns);
  AddQuery(req.path, "watch", "true");
  if (o.allow_bookmarks) AddQuery(req.path, "allowWatchBookmarks", "true");
  if (!o.resource_version.empty()) AddQuery(req.path, "resourceVersion", o.resource_version);
  if (o.timeout_seconds > 0) {
    AddQuery(req.path, "timeoutSeconds", std::to_string(o.timeout_seconds));
    req.timeout = std::chrono::seconds(o.timeout_seconds + 60);
  }
  if (!o.label_selector.empty()) AddQuery(req.path, "labelSelector", o.label_selector);
  if (!o.field_selector.empty()) AddQuery(req.path, "fieldSelector", o.field_selector);
  req.read_coalesce = o.read_coalesce;
  Throttle();
  LineSplitter splitter;
  Status stream_error;
  bool stopped_by_caller = false;
  auto chunk_fn = [&](std::string_view chunk) {
    return splitter.Feed(chunk, [&](std::string_view line) {
      if (line.find_first_not_of(" \t\r") == std::string_view::npos) return true;
      // The watch cache reports a too-old resourceVersion as an ERROR event in a 200 stream.
      if (MaybeErrorEvent(line)) {
        auto ev = ParseWatchEvent<PartialObject>(line, /*padded=*/true);
        if (ev.ok() && ev->type == WatchEventType::kError) stream_error = ev->error;
      }
      if (!on_line(line)) {
        stopped_by_caller = true;
        return false;
      }
      return stream_error.ok();
    });
  };
  auto r = transport_->Stream(req, chunk_fn, stop);
  if (!r.ok()) {
    Count("WATCH", "<error>");
    if (stop.stop_requested()) return CancelledError("watch cancelled");
    return r.status().WithContext("watching " + type.resource);
  }
  Count("WATCH", std::to_string(r->status));
  if (!Is2xx(r->status)) {
    if (r->status == 401) transport_->InvalidateCredentials();
    return ErrorFromResponse(r->status, r->body, r->Header("retry-after"));
  }
  if (!stream_error.ok()) return stream_error;
  (void)stopped_by_caller;
  return OkStatus();
}

StatusOr<std::string> RestClient::Create(const ResourceType& type, std::string_view ns,
                                         std::string_view body, const WriteOptions& wo) {
  HttpRequest req;
  req.method = "POST";
  req.path = type.CollectionPath(ns);
  if (type.namespaced && ns.empty()) return InvalidArgumentError("create: namespace required");
  AddWriteOptions(req.path, wo);
  req.body = std::string(body);
  GG_ASSIGN_OR_RETURN(auto resp, Call(std::move(req), Idempotency::kNonIdempotent, true));
  return std::move(resp.body);
}

StatusOr<std::string> RestClient::Update(const ResourceType& type, std::string_view ns,
                                         std::string_view name, std::string_view body,
                                         const WriteOptions& wo) {
  HttpRequest req;
  req.method = "PUT";
  req.path = type.ObjectPath(ns, name);
  AddWriteOptions(req.path, wo);
  req.body = std::string(body);
  GG_ASSIGN_OR_RETURN(auto resp, Call(std::move(req), Idempotency::kNonIdempotent, false));
  return std::move(resp.body);
}

StatusOr<std::string> RestClient::UpdateStatus(const ResourceType& type, std::string_view ns,
                                               std::string_view name, std::string_view body,
                                               const WriteOptions& wo) {
  HttpRequest req;
  req.method = "PUT";
  req.path = type.ObjectPath(ns, name, "status");
  AddWriteOptions(req.path, wo);
  req.body = std::string(body);
  GG_ASSIGN_OR_RETURN(auto resp, Call(std::move(req), Idempotency::kNonIdempotent, false));
  return std::move(resp.body);
}

StatusOr<std::string> RestClient::Patch(const ResourceType& type, std::string_view ns,
                                        std::string_view name, PatchType patch_type,
                                        std::string_view body, std::string_view subresource,
                                        const WriteOptions& wo) {
  HttpRequest req;
  req.method = "PATCH";
  req.path = type.ObjectPath(ns, name, subresource);
  WriteOptions w = wo;
  if (patch_type == PatchType::kApply && w.field_manager.empty()) w.field_manager = "gpu-guardian";
  AddWriteOptions(req.path, w);
  req.headers.emplace_back("Content-Type", std::string(PatchContentType(patch_type)));
  req.body = std::string(body);
  GG_ASSIGN_OR_RETURN(auto resp, Call(std::move(req), Idempotency::kNonIdempotent, false));
  return std::move(resp.body);
}

Status RestClient::Delete(const ResourceType& type, std::string_view ns, std::string_view name,
                          const DeleteOptions& options) {
  HttpRequest req;
  req.method = "DELETE";
  req.path = type.ObjectPath(ns, name);
  req.body = DeleteOptionsBody(options);
  auto r = Call(std::move(req), Idempotency::kNonIdempotent, false);
  return r.ok() ? OkStatus() : r.status();
}

Status RestClient::Evict(std::string_view ns, std::string_view name, const DeleteOptions& options) {
  HttpRequest req;
  req.method = "POST";
  req.path = kPods.ObjectPath(ns, name, "eviction");
  req.body = EvictionBody(ns, name, options);
  auto r = Call(std::move(req), Idempotency::kNonIdempotent, false);
  return r.ok() ? OkStatus() : r.status();
}

StatusOr<std::string> RestClient::RawGet(const std::string& path) {
  HttpRequest req;
  req.path = path;
  GG_ASSIGN_OR_RETURN(auto resp, Call(std::move(req), Idempotency::kIdempotent, false));
  return std::move(resp.body);
}

StatusOr<std::string> RestClient::PreferredVersion(std::string_view group) {
  auto body = RawGet("/apis/" + UrlEscape(group));
  if (!body.ok()) return body.status();
  json::EnsurePadding(*body);
  json::od::document doc;
  if (auto ec = json::ThreadParser().iterate(simdjson::padded_string_view(*body)).get(doc)) {
    return json::JsonError("APIGroup", ec);
  }
  std::string_view version;
  if (doc.find_field_unordered("preferredVersion")
          .find_field_unordered("version")
          .get_string()
          .get(version)) {
    return NotFoundError("API group " + std::string(group) + " has no preferred version");
  }
  return std::string(version);
}

}  // namespace gg::k8s
