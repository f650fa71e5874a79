// SimServer: cpp-httplib front of ApiCore — health/version/metrics, fault injection,
// authentication, chunked watch streams — and the in-process store API.
#include "sim/server.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <thread>
#include <tuple>

#include "common/log.h"
#include "sim/api.h"
#include "sim/api_util.h"
#include "sim/controllers.h"
#include "sim/faults.h"
#include "sim/pod_logs.h"
#include "sim/pod_runner.h"
#include "sim/rbac.h"
#include "sim/schema.h"
#include "sim/tls.h"

namespace gg::sim {

using nlohmann::json;

struct SimServer::Impl {
  SimOptions opts;
  Clock* clock = nullptr;
  std::unique_ptr<ApiCore> core;
  std::unique_ptr<httplib::Server> http;
  std::thread thread;
  std::string host;
  int port = 0;
  std::string ca_pem;
  std::atomic<bool> stopping{false};
  std::atomic<bool> listener_exited{false};
  FaultInjector faults;
  std::unique_ptr<Controllers> controllers;
  std::shared_ptr<Authorizer> authz;      // with --authz rbac: for GET /_sim/rbac
  std::unique_ptr<PodRunner> pod_runner;  // --exec-images
  // Service-account tokens of running pods (token -> user), added by the pod runner.
  mutable std::mutex pod_tokens_mu;
  std::map<std::string, std::string> pod_tokens;
  Logger log = Logger().WithName("sim");

  std::mutex metrics_mu;
  std::map<std::tuple<std::string, std::string, int>, std::uint64_t> requests;
  std::atomic<std::uint64_t> watch_events_sent{0};

  void Serve(const httplib::Request& req, httplib::Response& res);
  // Serve's steps, in order.
  bool ServeOwnEndpoint(const httplib::Request& hreq, httplib::Response& res);
  void ServeFaults(const httplib::Request& hreq, httplib::Response& res);
  bool Authenticate(const httplib::Request& hreq, ApiRequest* req, httplib::Response& res);
  bool InjectFault(const ApiRequest& req, httplib::Response& res);
  void StartWatchStream(const httplib::Request& hreq, WatchSpec& spec, httplib::Response& res);
  void WriteResponse(ApiResponse& r, httplib::Response& res);
  // GET .../pods/NAME/log; false when `path` is not a pods/log request.
  bool ServePodLog(const httplib::Request& hreq, const ApiRequest& req, httplib::Response& res);
  void ServeWatch(const WatchSpec& spec, httplib::Response& res);
  struct WatchStream;
  bool WriteWatchChunk(WatchStream& st, httplib::DataSink& sink);
  std::size_t FillWatchBatch(WatchStream& st, bool* cut);
  void AppendWatchEvent(const WatchSpec& spec, const WatchEvent& e, std::string& buf);
  // Start's steps.
  Status MakeHttpServer();
  void RouteRequests();
  Status Listen(int want_port);
  Status StartPodRunner();
  std::string Metrics();
  nlohmann::json RbacUsage();
  void Count(const std::string& verb, const std::string& resource, int code) {
    std::scoped_lock lock(metrics_mu);
    ++requests[{verb, resource, code}];
  }
};

namespace {

// Upper bound of one watch write (one HTTP chunk): large enough that a busy stream costs one
// send per ~20 node events, small enough that 256 watchers catching up stay within memory.
constexpr std::size_t kWatchBatchBytes = std::size_t{256} << 10;

std::string WatchLine(const char* type, const std::string& object_json) {
  std::string s;
  s.reserve(object_json.size() + 32);
  s += "{\"type\":\"";
  s += type;
  s += "\",\"object\":";
  s += object_json;
  s += "}\n";
  return s;
}

std::string UrlDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() + 0 &&
               std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
               std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

void SetError(httplib::Response& res, const ApiError& e) {
  res.status = e.code;
  if (e.retry_after_seconds > 0)
    res.set_header("Retry-After", std::to_string(e.retry_after_seconds));
  res.set_content(e.Body(), "application/json");
}

}  // namespace

// One watch stream's state between the calls of its chunk provider.
struct SimServer::Impl::WatchStream {
  WatchSpec spec;
  std::chrono::steady_clock::time_point deadline, last_write;
  std::size_t sent = 0;
  int cut_after = 0;
  bool initial_end_sent = false;
  bool finished = false;
  bool alive = true;               // the watcher is open (false: closed and drained)
  std::deque<WatchEvent> pending;  // popped, not yet written
  std::string buf;                 // reused for every batch
};

namespace {

// The BOOKMARK that ends a sendInitialEvents watch's initial state.
std::string InitialEventsEndLine(const WatchSpec& spec) {
  json bm = {{"kind", spec.ri->kind},
             {"apiVersion", spec.ri->ApiVersion()},
             {"metadata",
              {{"resourceVersion", std::to_string(spec.start_rv)},
               {"annotations", {{"k8s.io/initial-events-end", "true"}}}}}};
  return WatchLine("BOOKMARK", bm.dump());
}

// A progress BOOKMARK at `rv`: an empty object of the watched kind, or an empty Table.
std::string ProgressBookmarkLine(const WatchSpec& spec, std::uint64_t rv) {
  json bm = {{"kind", spec.ri->kind},
             {"apiVersion", spec.ri->ApiVersion()},
             {"metadata", {{"resourceVersion", std::to_string(rv)}}}};
  if (!spec.table_version.empty())
    bm = {{"kind", "Table"},
          {"apiVersion", spec.table_version},
          {"metadata", {{"resourceVersion", std::to_string(rv)}}},
          {"columnDefinitions", json::array()},
          {"rows", json::array()}};
  return WatchLine("BOOKMARK", bm.dump());
}

}  // namespace

void SimServer::Impl::AppendWatchEvent(const WatchSpec& spec, const WatchEvent& e,
                                       std::string& buf) {
  if (spec.table_version.empty()) {
    // The stored JSON is appended as is when the watch is in its version.
    buf += "{\"type\":\"";
    buf += EventTypeName(e.type);
    buf += "\",\"object\":";
    if (e.obj->api_version == spec.ri->ApiVersion())
      buf += e.obj->json;
    else
      buf += core->Render(*e.obj, *spec.ri);
    buf += "}\n";
    return;
  }
  // kubectl get -w: the event object is a Table of one row, like the list was.
  json obj = json::parse(core->Render(*e.obj, *spec.ri));
  json md = {{"resourceVersion", std::to_string(e.rv)}};
  buf += WatchLine(EventTypeName(e.type),
                   core->RenderTable(*spec.ri, spec.table_version, spec.include_object, {obj}, md));
}

// Moves pending events into st.buf up to one batch; `cut` when the injected cut is reached.
std::size_t SimServer::Impl::FillWatchBatch(WatchStream& st, bool* cut) {
  std::size_t batch = 0;
  while (!st.pending.empty() && st.buf.size() < kWatchBatchBytes) {
    WatchEvent e = std::move(st.pending.front());
    st.pending.pop_front();
    ++batch;
    AppendWatchEvent(st.spec, e, st.buf);
    ++st.sent;
    if (st.cut_after > 0 && static_cast<int>(st.sent) >= st.cut_after) {
      *cut = true;
      break;
    }
    if (st.spec.initial_events_end && !st.initial_end_sent && st.sent >= st.spec.initial_count) {
      st.initial_end_sent = true;
      st.buf += InitialEventsEndLine(st.spec);
    }
  }
  if (st.spec.initial_events_end && !st.initial_end_sent && st.spec.initial_count == 0) {
    st.initial_end_sent = true;
    st.buf += InitialEventsEndLine(st.spec);
  }
  return batch;
}

// One call of a watch stream's chunk provider: false when the client is gone.
bool SimServer::Impl::WriteWatchChunk(WatchStream& st, httplib::DataSink& sink) {
  auto finish = [&] {
    st.finished = true;
    sink.done();
    return true;
  };
  if (st.finished) {
    sink.done();
    return true;
  }
  if (!st.spec.expired_message.empty()) {
    std::string line = WatchLine("ERROR", ExpiredErr(st.spec.expired_message).Body());
    sink.write(line.data(), line.size());
    return finish();
  }
  if (stopping.load()) return finish();
  auto now = std::chrono::steady_clock::now();
  if (now >= st.deadline) return finish();
  // Events already popped but not yet written wait in st.pending: a resume from an old
  // resourceVersion can queue the whole history at once, and one write of it all would
  // need hundreds of MB per watcher. Each call writes one bounded batch (one chunk, one
  // send) into a buffer the stream keeps.
  if (st.pending.empty() && st.alive)
    st.alive = st.spec.watcher->Pop(st.pending, std::chrono::milliseconds(200));
  st.buf.clear();
  bool cut = false;
  std::size_t batch = FillWatchBatch(st, &cut);
  if (!st.buf.empty()) {
    watch_events_sent += batch;
    if (!sink.write(st.buf.data(), st.buf.size())) return false;
    st.last_write = now;
  }
  if (cut || (!st.alive && st.pending.empty())) return finish();
  if (st.spec.bookmarks && st.pending.empty() && now - st.last_write >= opts.bookmark_interval) {
    Store& store = core->store();
    std::uint64_t rv = 0;
    {
      std::scoped_lock lock(store.mu());
      if (st.spec.watcher->QueueEmpty()) rv = store.RvLocked();
    }
    if (rv) {
      std::string line = ProgressBookmarkLine(st.spec, rv);
      if (!sink.write(line.data(), line.size())) return false;
      st.last_write = now;
    }
  }
  return true;
}

void SimServer::Impl::ServeWatch(const WatchSpec& spec, httplib::Response& res) {
  auto st = std::make_shared<WatchStream>();
  st->spec = spec;
  auto now = std::chrono::steady_clock::now();
  // Without timeoutSeconds the real server picks 30-60 min; keep it bounded as well.
  int timeout = spec.timeout_seconds > 0 ? spec.timeout_seconds : 1800 + std::rand() % 1800;
  st->deadline = now + std::chrono::seconds(timeout);
  st->last_write = now;
  st->cut_after = faults.WatchCutAfter();
  res.status = 200;
  Store& store = core->store();
  res.set_chunked_content_provider(
      "application/json",
      [this, st](std::size_t, httplib::DataSink& sink) { return WriteWatchChunk(*st, sink); },
      [st, &store](bool) {
        if (st->spec.watcher) store.StopWatch(st->spec.watcher);
      });
}

std::string SimServer::Impl::Metrics() {
  std::string out;
  out +=
      "# HELP apiserver_request_total Requests served by the simulator, by verb, resource and "
      "code.\n";
  out += "# TYPE apiserver_request_total counter\n";
  {
    std::scoped_lock lock(metrics_mu);
    for (const auto& [k, v] : requests) {
      const auto& [verb, resource, code] = k;
      out += "apiserver_request_total{verb=\"" + verb + "\",resource=\"" + resource + "\",code=\"" +
             std::to_string(code) + "\"} " + std::to_string(v) + "\n";
    }
  }
  out += "# HELP apiserver_registered_watchers Open watch streams.\n";
  out += "# TYPE apiserver_registered_watchers gauge\n";
  out += "apiserver_registered_watchers " + std::to_string(core->store().WatchCount()) + "\n";
  out += "# HELP apiserver_watch_events_total Watch events sent.\n";
  out += "# TYPE apiserver_watch_events_total counter\n";
  out += "apiserver_watch_events_total " + std::to_string(watch_events_sent.load()) + "\n";
  out += "# HELP apiserver_storage_objects Objects stored, by resource.\n";
  out += "# TYPE apiserver_storage_objects gauge\n";
  for (const auto& [k, v] : core->store().Counts())
    out += "apiserver_storage_objects{resource=\"" + k + "\"} " + std::to_string(v) + "\n";
  out += "# HELP gg_sim_resource_version The current global resourceVersion.\n";
  out += "# TYPE gg_sim_resource_version gauge\n";
  out += "gg_sim_resource_version " + std::to_string(core->store().rv()) + "\n";
  return out;
}

// Per token user: the permissions it used and those granted (in its service account's
// namespace and cluster-wide) that it never used, so tests can prove the RBAC is minimal.
nlohmann::json SimServer::Impl::RbacUsage() {
  json users = json::array();
  if (!authz) return {{"users", users}};
  auto used = authz->UsedPermissions();
  auto to_json = [](const UsedPermission& p) {
    return json{{"verb", p.verb},
                {"apiGroup", p.api_group},
                {"resource", p.resource},
                {"subresource", p.subresource}};
  };
  for (const auto& [token, user] : opts.token_users) {
    (void)token;
    std::string ns;
    std::vector<std::string> groups = {"system:authenticated"};
    const std::string sa = "system:serviceaccount:";
    if (user.rfind(sa, 0) == 0) {
      std::string rest = user.substr(sa.size());
      ns = rest.substr(0, rest.find(':'));
      groups = ServiceAccountGroups(ns);
    }
    json u = {{"user", user}, {"used", json::array()}, {"grantedButUnused", json::array()}};
    if (auto it = used.find(user); it != used.end())
      for (const auto& p : it->second) u["used"].push_back(to_json(p));
    for (const auto& p : authz->GrantedButUnused(user, groups, ns))
      u["grantedButUnused"].push_back(to_json(p));
    users.push_back(std::move(u));
  }
  return {{"users", users}};
}

namespace {

// GET /version as the configured Kubernetes release reports it.
json VersionInfo(const std::string& kube_version) {
  std::string minor = kube_version.substr(kube_version.find('.') + 1);
  return {{"major", "1"},
          {"minor", minor},
          {"gitVersion", "v" + kube_version + ".0"},
          {"gitCommit", "0000000000000000000000000000000000000000"},
          {"gitTreeState", "clean"},
          {"buildDate", "2026-01-01T00:00:00Z"},
          {"goVersion", "go1.24.0"},
          {"compiler", "gc"},
          {"platform", "linux/amd64"}};
}

// The query string as written. Our own parsing: httplib keeps only the text after the last '='
// of a value ("labelSelector=a!=b" would lose "a!").
std::map<std::string, std::string> ParseQuery(const httplib::Request& hreq) {
  std::map<std::string, std::string> query;
  auto q = hreq.target.find('?');
  if (q == std::string::npos) {
    for (const auto& [k, v] : hreq.params) query.emplace(k, v);
    return query;
  }
  std::string_view qs(hreq.target);
  qs.remove_prefix(q + 1);
  while (!qs.empty()) {
    auto amp = qs.find('&');
    std::string_view part = qs.substr(0, amp);
    qs = amp == std::string_view::npos ? std::string_view() : qs.substr(amp + 1);
    if (part.empty()) continue;
    auto eq = part.find('=');
    std::string k = UrlDecode(part.substr(0, eq));
    std::string v = eq == std::string_view::npos ? "" : UrlDecode(part.substr(eq + 1));
    query.emplace(std::move(k), std::move(v));
  }
  return query;
}

// The user a token maps to: "USER,node=NODE" is a pod-bound token whose user info names the
// pod's node; a service account gets its groups.
void SetTokenUser(const std::string& user, ApiRequest* req) {
  req->user = user;
  if (auto c = user.find(",node="); c != std::string::npos) {
    req->user = user.substr(0, c);
    req->user_extra = {{"authentication.kubernetes.io/node-name", {user.substr(c + 6)}}};
  }
  req->groups = {"system:authenticated"};
  const std::string sa = "system:serviceaccount:";
  if (user.rfind(sa, 0) == 0) {
    std::string rest = user.substr(sa.size());
    std::string ns = rest.substr(0, rest.find(':'));
    req->groups = {"system:serviceaccounts", "system:serviceaccounts:" + ns,
                   "system:authenticated"};
  }
}

// Streams a LIST's stored objects: no copy of a (possibly 1 GB) list body is ever built.
void StreamList(std::shared_ptr<ListStream> list, const std::string& content_type,
                httplib::Response& res) {
  struct Cursor {
    std::shared_ptr<ListStream> list;
    std::size_t piece = 0;  // 0 = head, 1..n = items, n+1 = tail
    std::size_t done = 0;   // bytes of the current piece already written
  };
  auto cur = std::make_shared<Cursor>();
  cur->list = std::move(list);
  std::size_t total = cur->list->Size();
  res.set_content_provider(
      total, content_type, [cur](std::size_t, std::size_t, httplib::DataSink& sink) {
        const ListStream& l = *cur->list;
        // Gather up to ~256 KB per write: one syscall per object would dominate.
        std::string buf;
        while (buf.size() < (std::size_t{256} << 10) && cur->piece <= l.items.size() + 1) {
          std::string_view piece;
          if (cur->piece == 0) {
            piece = l.head;
          } else if (cur->piece <= l.items.size()) {
            piece = l.items[cur->piece - 1]->json;
            if (cur->piece > 1 && cur->done == 0) buf += ',';
          } else {
            piece = l.tail;
          }
          std::size_t n = std::min<std::size_t>(piece.size() - cur->done, std::size_t{256} << 10);
          buf.append(piece.substr(cur->done, n));
          cur->done += n;
          if (cur->done == piece.size()) {
            ++cur->piece;
            cur->done = 0;
          }
        }
        return sink.write(buf.data(), buf.size());
      });
}

}  // namespace

// The simulator's own endpoints (health, version, metrics, /_sim/...); false for API paths.
bool SimServer::Impl::ServeOwnEndpoint(const httplib::Request& hreq, httplib::Response& res) {
  const std::string& path = hreq.path;
  if (path == "/healthz" || path == "/readyz" || path == "/livez") {
    res.set_content("ok", "text/plain");
  } else if (path == "/version") {
    res.set_content(VersionInfo(opts.kube_version).dump(), "application/json");
  } else if (path == "/metrics") {
    res.set_content(Metrics(), "text/plain; version=0.0.4");
  } else if (path == "/_sim/faults") {
    ServeFaults(hreq, res);
  } else if (path == "/_sim/rbac" && hreq.method == "GET") {
    res.set_content(RbacUsage().dump(), "application/json");
  } else if (path == "/_sim/compact" && hreq.method == "POST") {
    core->store().Compact();
    res.set_content("{}", "application/json");
  } else {
    return false;
  }
  return true;
}

// /_sim/faults: GET shows the injected faults, DELETE clears them, anything else sets them.
void SimServer::Impl::ServeFaults(const httplib::Request& hreq, httplib::Response& res) {
  if (hreq.method == "DELETE") {
    faults.Clear();
    res.set_content("{}", "application/json");
    return;
  }
  if (hreq.method != "GET") {
    auto st = faults.SetFromJson(json::parse(hreq.body, nullptr, false));
    if (!st.ok()) {
      SetError(res, BadRequestErr(st.message()));
      return;
    }
  }
  res.set_content(faults.ToJson().dump(), "application/json");
}

// Authentication: bearer tokens map to users (authz on); otherwise everyone is admin. False
// (and a 401 written) for a token nobody holds.
bool SimServer::Impl::Authenticate(const httplib::Request& hreq, ApiRequest* req,
                                   httplib::Response& res) {
  if (opts.authz.empty()) return true;
  std::string auth = hreq.get_header_value("Authorization");
  std::string token = auth.rfind("Bearer ", 0) == 0 ? auth.substr(7) : std::string();
  req->user = "system:anonymous";
  req->groups = {"system:unauthenticated"};
  if (token == "admin") {
    req->user = "admin";
    req->groups = {"system:masters", "system:authenticated"};
  }
  std::vector<std::pair<std::string, std::string>> users = opts.token_users;
  if (!token.empty()) {
    std::scoped_lock lock(pod_tokens_mu);
    if (auto it = pod_tokens.find(token); it != pod_tokens.end()) users.emplace_back(*it);
  }
  for (const auto& [tok, user] : users)
    if (tok == token) SetTokenUser(user, req);
  if (token.empty() || req->user != "system:anonymous") return true;
  ApiError e;
  e.code = 401;
  e.reason = "Unauthorized";
  e.message = "Unauthorized";
  SetError(res, e);
  Count("unknown", "", 401);
  return false;
}

// An injected fault for the request's verb and resource: its latency is waited out, and true
// (its error written) when it fails the request.
bool SimServer::Impl::InjectFault(const ApiRequest& req, httplib::Response& res) {
  std::string verb, resource;
  std::optional<ApiError> err;
  if (auto t = core->ResolvePath(req.path, &err)) {
    resource = t->ri->resource + (t->sub.empty() ? "" : "/" + t->sub);
    const auto& m = req.method;
    auto w = req.query.find("watch");
    bool watch = w != req.query.end() && ParseBoolParam(w->second);
    verb = m == "GET"     ? (t->name.empty() ? (watch ? "watch" : "list") : "get")
           : m == "POST"  ? "create"
           : m == "PUT"   ? "update"
           : m == "PATCH" ? "patch"
                          : (t->name.empty() ? "deletecollection" : "delete");
  }
  FaultDecision fd = faults.Decide(verb, resource);
  if (fd.latency.count() > 0) std::this_thread::sleep_for(fd.latency);
  if (!fd.error) return false;
  SetError(res, *fd.error);
  Count(verb, resource, fd.error->code);
  return true;
}

// A watch response: an injected 410 replaces the stream with its ERROR event.
void SimServer::Impl::StartWatchStream(const httplib::Request& hreq, WatchSpec& spec,
                                       httplib::Response& res) {
  if (faults.TakeForced410() && spec.watcher) {
    core->store().StopWatch(spec.watcher);
    spec.watcher = nullptr;
    spec.expired_message = "too old resource version: " + hreq.get_param_value("resourceVersion") +
                           " (" + std::to_string(core->store().rv()) + ")";
  }
  // httplib gzips application/json for clients that accept it (Go always does), and its
  // compressor holds back a stream's small events until it ends. The real server does not
  // compress watch streams; neither do we.
  const_cast<httplib::Request&>(hreq).headers.erase("Accept-Encoding");
  ServeWatch(spec, res);
}

// Writes a non-watch response: a streamed list, a body trickled at the injected slow-body
// rate, or the body at once.
void SimServer::Impl::WriteResponse(ApiResponse& r, httplib::Response& res) {
  res.status = r.code;
  for (const auto& [k, v] : r.headers) res.set_header(k, v);
  std::size_t rate = faults.SlowBodyRate();
  if (r.list && rate > 0) r.body = r.list->Join();
  if (r.list && rate == 0) {
    StreamList(std::move(r.list), r.content_type, res);
    return;
  }
  if (rate > 0 && !r.body.empty()) {
    auto body = std::make_shared<std::string>(std::move(r.body));
    res.set_content_provider(
        body->size(), r.content_type,
        [body, rate](std::size_t offset, std::size_t length, httplib::DataSink& sink) {
          std::size_t chunk = std::max<std::size_t>(1, std::min(length, rate / 10));
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
          return sink.write(body->data() + offset, chunk);
        });
    return;
  }
  res.body = std::move(r.body);
  res.set_header("Content-Type", r.content_type);
}

void SimServer::Impl::Serve(const httplib::Request& hreq, httplib::Response& res) {
  if (ServeOwnEndpoint(hreq, res)) return;
  ApiRequest req;
  req.method = hreq.method;
  req.path = hreq.path;
  while (req.path.size() > 1 && req.path.back() == '/') req.path.pop_back();
  req.query = ParseQuery(hreq);
  req.content_type = hreq.get_header_value("Content-Type");
  req.accept = hreq.get_header_value("Accept");
  req.user_agent = hreq.get_header_value("User-Agent");
  req.body = hreq.body;
  if (!Authenticate(hreq, &req, res)) return;
  if (ServePodLog(hreq, req, res)) return;
  if (InjectFault(req, res)) return;
  ApiResponse r = core->Handle(req);
  Count(r.verb, r.resource, r.watch ? 200 : r.code);
  if (r.watch) {
    StartWatchStream(hreq, *r.watch, res);
    return;
  }
  WriteResponse(r, res);
}

namespace {

// Why HOST:PORT cannot be bound ("address already in use"), or "" when it can: cpp-httplib
// only says false. Binds and closes a socket with the listener's options (SO_REUSEADDR).
std::string BindProbe(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  std::string ps = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), ps.c_str(), &hints, &res); rc != 0)
    return std::string("lookup ") + host + ": " + ::gai_strerror(rc);
  std::string why;
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    int s = ::socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    if (s < 0) continue;
    int yes = 1;
    ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (::bind(s, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(s, 1) != 0) {
      why = std::strerror(errno);  // Go spells it in lower case: "address already in use"
      if (!why.empty())
        why[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(why[0])));
    } else {
      why.clear();
      ::close(s);
      break;
    }
    ::close(s);
  }
  ::freeaddrinfo(res);
  return why;
}

// Shuts down every connected socket of this process whose local port is `port`: the
// server side of the simulator's client connections (clients in the same process have it
// as their peer port, so they are left alone).
void ShutdownAcceptedConnections(int port) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    int fd = -1;
    const std::string name = e.path().filename().string();
    auto r = std::from_chars(name.data(), name.data() + name.size(), fd);
    if (r.ec != std::errc() || fd < 0) continue;
    sockaddr_storage local{}, peer{};
    socklen_t ll = sizeof local, pl = sizeof peer;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &ll) != 0) continue;
    int lport = -1;
    if (local.ss_family == AF_INET)
      lport = ntohs(reinterpret_cast<sockaddr_in*>(&local)->sin_port);
    else if (local.ss_family == AF_INET6)
      lport = ntohs(reinterpret_cast<sockaddr_in6*>(&local)->sin6_port);
    if (lport != port) continue;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0) continue;  // listener
    ::shutdown(fd, SHUT_RDWR);
  }
}

}  // namespace

bool SimServer::Impl::ServePodLog(const httplib::Request&, const ApiRequest& req,
                                  httplib::Response& res) {
  if (req.method != "GET" || !IsPodLogPath(req.path)) return false;
  PodLogResult r = PodLog(*core, pod_runner.get(), authz.get(), req);
  if (r.error) {
    SetError(res, *r.error);
    Count("get", "pods/log", r.error->code);
    return true;
  }
  Count("get", "pods/log", 200);
  if (!r.follow) {
    res.set_content(r.body, "text/plain");
    return true;
  }
  // follow: what is there now, then new records until the container instance ends.
  auto st = std::make_shared<PodLogResult>(std::move(r));
  std::atomic<bool>* stop_flag = &stopping;
  res.set_chunked_content_provider("text/plain", [st, stop_flag](size_t, httplib::DataSink& sink) {
    std::string chunk;
    bool more = true;
    for (int i = 0; i < 50 && chunk.empty() && more && !*stop_flag; ++i) {
      more = NextPodLogChunk(*st, &chunk);
      if (chunk.empty() && more) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (!chunk.empty()) return sink.write(chunk.data(), chunk.size());
    if (!more || *stop_flag) {
      sink.done();
      return true;
    }
    return sink.is_writable();
  });
  return true;
}

SimServer::SimServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

SimServer::~SimServer() { Stop(); }

namespace {

// --listen HOST:PORT: a port is 0-65535 and nothing else ("99999" or "80x" must not bind
// something else); "[::1]" loses its brackets.
Status ParseListen(const std::string& listen, std::string* host, int* port) {
  auto colon = listen.rfind(':');
  if (colon == std::string::npos) return InvalidArgumentError("--listen must be HOST:PORT");
  *host = listen.substr(0, colon);
  std::string ps = listen.substr(colon + 1);
  auto r = std::from_chars(ps.data(), ps.data() + ps.size(), *port);
  if (ps.empty() || r.ec != std::errc() || r.ptr != ps.data() + ps.size() || *port < 0 ||
      *port > 65535)
    return InvalidArgumentError("--listen must be HOST:PORT with a port in 0-65535, got " + listen);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']')
    *host = host->substr(1, host->size() - 2);
  return OkStatus();
}

ApiCoreOptions CoreOptionsFor(const SimOptions& opts) {
  ApiCoreOptions co;
  co.kube_version = opts.kube_version;
  co.watch_history = opts.watch_history;
  co.watcher_queue_limit = opts.watcher_queue_limit;
  co.max_body_bytes = opts.max_body_bytes;
  co.graceful_pod_deletion = true;
  co.openapi_dir = opts.openapi_dir;
  if (co.openapi_dir.empty()) {
#ifdef GG_SIM_DATA_DIR
    co.openapi_dir = OpenApiDirFor(GG_SIM_DATA_DIR, opts.kube_version);
#endif
  }
  return co;
}

// --authz rbac: an authorizer with the roles and bindings of the RBAC files; none without.
StatusOr<std::shared_ptr<Authorizer>> MakeAuthorizer(const SimOptions& opts) {
  if (opts.authz.empty()) return std::shared_ptr<Authorizer>();
  if (opts.authz != "rbac")
    return InvalidArgumentError("--authz must be empty or \"rbac\", got " + opts.authz);
  auto authz = std::make_shared<Authorizer>();
  for (const auto& f : opts.rbac_files) {
    std::ifstream in(f);
    if (!in) return NotFoundError("cannot read RBAC file " + f);
    std::stringstream ss;
    ss << in.rdbuf();
    GG_RETURN_IF_ERROR(authz->AddYaml(ss.str()));
  }
  return authz;
}

// Connection settings as kube-apiserver's: thread pool, body limit, keep-alive, timeouts.
void ConfigureConnections(const SimOptions& opts, httplib::Server& http) {
  int threads = std::max(8, opts.http_threads);
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http.set_payload_max_length(opts.max_body_bytes * 4 + 1024);
  http.set_keep_alive_max_count(100000);
  // kube-apiserver keeps an idle connection 90 s (http.Server IdleTimeout, the same as Go's
  // DefaultTransport): a client that retries a POST on a pooled connection must not find it
  // closed after cpp-httplib's 5 s default.
  http.set_keep_alive_timeout(90);
  // SO_REUSEADDR only, as Go's listeners: cpp-httplib's default SO_REUSEPORT let two
  // simulators share a port (and one kubeconfig reach two clusters).
  http.set_socket_options([](int sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  // Small responses (PATCH results, watch lines) must not wait for Nagle + delayed ACK (~40 ms).
  http.set_tcp_nodelay(true);
  http.set_read_timeout(60, 0);
  http.set_write_timeout(60, 0);
}

}  // namespace

// The HTTP or HTTPS server (with --tls and no certificate given, one made for a new CA).
Status SimServer::Impl::MakeHttpServer() {
  if (!opts.tls) {
    http = std::make_unique<httplib::Server>();
  } else {
    std::string cert = opts.tls_cert_file, key = opts.tls_key_file;
    if (cert.empty() || key.empty()) {
      auto m = GenerateTlsMaterial();
      if (!m.ok()) return m.status();
      std::string dir = opts.tls_dir;
      if (dir.empty()) {
        dir = (std::filesystem::temp_directory_path() /
               ("gg-sim-tls-" + std::to_string(::getpid()) + "-" +
                std::to_string(reinterpret_cast<std::uintptr_t>(this) & 0xffffff)))
                  .string();
      }
      GG_RETURN_IF_ERROR(WriteTlsFiles(*m, dir));
      cert = m->server_cert_path;
      key = m->server_key_path;
      ca_pem = m->ca_cert_pem;
    }
    http = std::make_unique<httplib::SSLServer>(cert.c_str(), key.c_str());
  }
  if (!http->is_valid()) return InternalError("could not set up the HTTP(S) server");
  return OkStatus();
}

// Every method on every path goes to Serve; an exception becomes a 500 status.
void SimServer::Impl::RouteRequests() {
  auto handler = [this](const httplib::Request& req, httplib::Response& res) { Serve(req, res); };
  http->Get(".*", handler);
  http->Post(".*", handler);
  http->Put(".*", handler);
  http->Patch(".*", handler);
  http->Delete(".*", handler);
  http->set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown";
        try {
          if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        SetError(res, InternalErr(what));
      });
  if (opts.log_requests) {
    http->set_logger([this](const httplib::Request& req, const httplib::Response& res) {
      log.Info("request", {{"method", req.method}, {"path", req.path}, {"code", res.status}});
    });
  }
}

// Binds HOST:PORT (any free port for 0) and runs the accept loop on its own thread.
Status SimServer::Impl::Listen(int want_port) {
  if (want_port == 0) {
    port = http->bind_to_any_port(host);
    if (port <= 0) return UnavailableError("cannot bind " + opts.listen);
  } else {
    if (std::string why = BindProbe(host, want_port); !why.empty())
      return UnavailableError("failed to listen on " + opts.listen + ": listen tcp " + opts.listen +
                              ": bind: " + why);
    if (!http->bind_to_port(host, want_port))
      return UnavailableError("failed to listen on " + opts.listen);
    port = want_port;
  }
  core->SeedKubernetesService(host, port);
  thread = std::thread([this] {
    http->listen_after_bind();
    listener_exited = true;
  });
  // cpp-httplib 0.11's stop() does nothing until the accept loop has set is_running(), and
  // the loop then never ends: a Stop() right after Start() (a test restarting the sim, a
  // SIGTERM on a loaded machine) hung join() forever. Return only once the loop runs.
  while (!http->is_running() && !listener_exited)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (listener_exited) {
    thread.join();
    return UnavailableError("the HTTP server on " + opts.listen + " stopped at once");
  }
  return OkStatus();
}

// --exec-images: the runner that starts pods' images as processes, reaching this server over
// TLS with their service-account tokens.
Status SimServer::Impl::StartPodRunner() {
  PodRunnerOptions po;
  po.exec_images = opts.exec_images;
  po.node_root = opts.node_root;
  po.init_exe = opts.pod_init_exe;
  if (po.init_exe.empty()) {
    std::error_code ec;
    po.init_exe = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  }
  po.fake_nvml_dir = opts.fake_nvml_dir;
  // The build puts the fake libnvidia-ml.so.1 in lib/fake-nvml beside bin/: next to the
  // images' directory (build/bin) or to this simulator's binary.
  for (const auto& base : {std::filesystem::absolute(opts.exec_images).parent_path(),
                           std::filesystem::path(po.init_exe).parent_path().parent_path()}) {
    auto guess = base / "lib" / "fake-nvml";
    if (po.fake_nvml_dir.empty() && std::filesystem::exists(guess / "libnvidia-ml.so.1"))
      po.fake_nvml_dir = guess.string();
  }
  po.api_host = host;
  po.api_port = port;
  po.ca_pem = ca_pem;
  po.time_scale = opts.time_scale;
  po.add_token = [this](const std::string& t, const std::string& u) {
    std::scoped_lock lock(pod_tokens_mu);
    pod_tokens[t] = u;
  };
  po.remove_token = [this](const std::string& t) {
    std::scoped_lock lock(pod_tokens_mu);
    pod_tokens.erase(t);
  };
  auto runner = PodRunner::Create(*core, po);
  if (!runner.ok()) return runner.status();
  pod_runner = std::move(*runner);
  return OkStatus();
}

StatusOr<std::unique_ptr<SimServer>> SimServer::Start(SimOptions opts) {
  if (!opts.exec_images.empty() && !opts.tls)
    return FailedPreconditionError(
        "--exec-images needs --tls: in-cluster clients reach the API server over HTTPS");
  auto impl = std::make_unique<Impl>();
  impl->opts = opts;
  impl->clock = opts.clock ? opts.clock : &RealClock::Default();
  int want_port = 0;
  GG_RETURN_IF_ERROR(ParseListen(opts.listen, &impl->host, &want_port));
  impl->core = std::make_unique<ApiCore>(CoreOptionsFor(opts), *impl->clock);
  auto authz = MakeAuthorizer(opts);
  if (!authz.ok()) return authz.status();
  if (*authz) {
    impl->core->SetAuthorizer(*authz);
    impl->authz = *authz;
  }
  GG_RETURN_IF_ERROR(impl->MakeHttpServer());
  ConfigureConnections(opts, *impl->http);
  impl->RouteRequests();
  GG_RETURN_IF_ERROR(impl->Listen(want_port));
  ControllerOptions cto;
  cto.kubelet = opts.kubelet;
  cto.scheduler = opts.scheduler;
  cto.controllers = opts.controllers;
  cto.time_scale = opts.time_scale;
  if (!opts.exec_images.empty()) {
    if (Status st = impl->StartPodRunner(); !st.ok()) {
      impl->http->stop();
      impl->thread.join();
      return st;
    }
    cto.pod_runner = impl->pod_runner.get();
  }
  impl->controllers = std::make_unique<Controllers>(*impl->core, cto);
  if (!opts.defer_controllers) impl->controllers->Start();
  return std::unique_ptr<SimServer>(new SimServer(std::move(impl)));
}

void SimServer::Stop() {
  if (!impl_ || impl_->stopping.exchange(true)) return;
  if (impl_->controllers) impl_->controllers->Stop();
  impl_->pod_runner.reset();  // ends every pod process
  impl_->core->store().CloseAllWatches();
  impl_->http->stop();
  // cpp-httplib's workers wait out the keep-alive timeout (90 s) on idle connections before
  // the pool can be joined: end those connections instead of waiting.
  std::atomic<bool> joined{false};
  std::thread reaper([this, &joined] {
    while (!joined) {
      ShutdownAcceptedConnections(impl_->port);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  if (impl_->thread.joinable()) impl_->thread.join();
  joined = true;
  reaper.join();
}

void SimServer::StartControllers() {
  if (impl_->controllers && !impl_->stopping) impl_->controllers->Start();
}

std::string SimServer::Url() const {
  std::string host = impl_->host;
  if (host == "0.0.0.0" || host.empty()) host = "127.0.0.1";
  return (impl_->opts.tls ? "https://" : "http://") + host + ":" + std::to_string(impl_->port);
}
int SimServer::Port() const { return impl_->port; }
const SimOptions& SimServer::options() const { return impl_->opts; }
std::string SimServer::CaCertPem() const { return impl_->ca_pem; }

namespace {

Status ToStatus(const ApiError& e) {
  StatusCode code = StatusCode::kUnknown;
  switch (e.code) {
    case 400:
    case 422:
      code = StatusCode::kInvalidArgument;
      break;
    case 404:
      code = StatusCode::kNotFound;
      break;
    case 409:
      code = e.reason == "AlreadyExists" ? StatusCode::kAlreadyExists : StatusCode::kAborted;
      break;
    case 403:
      code = StatusCode::kPermissionDenied;
      break;
    case 410:
      code = StatusCode::kOutOfRange;
      break;
    case 429:
      code = StatusCode::kResourceExhausted;
      break;
    default:
      code = StatusCode::kInternal;
  }
  Status s(code, e.message);
  s.set_http_status(e.code).set_reason(e.reason);
  return s;
}

}  // namespace

StatusOr<json> SimServer::CreateAndGet(std::string_view path, const json& obj) {
  std::optional<ApiError> err;
  auto t = impl_->core->ResolvePath(path, &err);
  if (!t || !t->name.empty()) return NotFoundError("no collection at " + std::string(path));
  WriteOpts o;
  o.seed = true;
  auto r = impl_->core->Create(*t, obj, o);
  if (!r.ok()) return ToStatus(*r.err);
  return r.obj;
}

Status SimServer::Create(std::string_view path, const json& obj) {
  auto r = CreateAndGet(path, obj);
  return r.ok() ? OkStatus() : r.status();
}

StatusOr<json> SimServer::Get(std::string_view path) {
  std::optional<ApiError> err;
  auto t = impl_->core->ResolvePath(path, &err);
  if (!t || t->name.empty()) return NotFoundError("no object at " + std::string(path));
  auto r = impl_->core->Get(*t);
  if (!r.ok()) return ToStatus(*r.err);
  return r.obj;
}

StatusOr<json> SimServer::Update(std::string_view path, const json& obj) {
  std::optional<ApiError> err;
  auto t = impl_->core->ResolvePath(path, &err);
  if (!t || t->name.empty()) return NotFoundError("no object at " + std::string(path));
  // In-process updates write status too: first the main resource, then /status.
  auto r = impl_->core->Update(*t, obj, WriteOpts{});
  if (!r.ok()) return ToStatus(*r.err);
  if (t->ri->status_subresource && obj.contains("status") && t->sub.empty()) {
    Target st = *t;
    st.sub = "status";
    json b2 = r.obj;
    b2["status"] = obj["status"];
    auto r2 = impl_->core->Update(st, b2, WriteOpts{});
    if (!r2.ok()) return ToStatus(*r2.err);
    return r2.obj;
  }
  return r.obj;
}

StatusOr<json> SimServer::MergePatch(std::string_view path, const json& patch) {
  std::optional<ApiError> err;
  auto t = impl_->core->ResolvePath(path, &err);
  if (!t || t->name.empty()) return NotFoundError("no object at " + std::string(path));
  auto r = impl_->core->Patch(*t, "application/merge-patch+json", patch, WriteOpts{});
  if (!r.ok()) return ToStatus(*r.err);
  if (t->ri->status_subresource && patch.contains("status") && t->sub.empty()) {
    Target st = *t;
    st.sub = "status";
    json p2 = {{"status", patch["status"]}};
    auto r2 = impl_->core->Patch(st, "application/merge-patch+json", p2, WriteOpts{});
    if (!r2.ok()) return ToStatus(*r2.err);
    return r2.obj;
  }
  return r.obj;
}

Status SimServer::Delete(std::string_view path) {
  std::optional<ApiError> err;
  auto t = impl_->core->ResolvePath(path, &err);
  if (!t || t->name.empty()) return NotFoundError("no object at " + std::string(path));
  auto r = impl_->core->Delete(*t, json::object(), WriteOpts{}, /*immediate=*/true);
  return r.ok() ? OkStatus() : ToStatus(*r.err);
}

StatusOr<json> SimServer::List(std::string_view path) {
  std::optional<ApiError> err;
  auto t = impl_->core->ResolvePath(path, &err);
  if (!t || !t->name.empty()) return NotFoundError("no collection at " + std::string(path));
  std::string body;
  auto r = impl_->core->ListBody(*t, {}, &body);
  if (!r.ok()) return ToStatus(*r.err);
  return json::parse(body);
}

Status SimServer::Insert(const json& obj) {
  if (!obj.is_object()) return InvalidArgumentError("object must be a JSON object");
  std::string api_version = obj.value("apiVersion", "");
  std::string kind = obj.value("kind", "");
  auto slash = api_version.find('/');
  std::string group = slash == std::string::npos ? "" : api_version.substr(0, slash);
  std::string version = slash == std::string::npos ? api_version : api_version.substr(slash + 1);
  auto ri = impl_->core->registry().FindKind(group, version, kind);
  if (!ri) return NotFoundError("no resource serves " + api_version + " " + kind);
  std::string ns;
  if (obj.contains("metadata") && obj["metadata"].is_object())
    ns = obj["metadata"].value("namespace", "");
  if (ri->namespaced && ns.empty()) ns = "default";
  Target t{ri, ri->namespaced ? ns : "", "", ""};
  WriteOpts o;
  o.seed = true;
  auto r = impl_->core->Create(t, obj, o);
  return r.ok() ? OkStatus() : ToStatus(*r.err);
}

std::uint64_t SimServer::ResourceVersion() const { return impl_->core->store().rv(); }
std::size_t SimServer::ObjectCount() const { return impl_->core->store().TotalObjects(); }
void SimServer::SetFaults(FaultConfig f) { impl_->faults.Set(std::move(f)); }
void SimServer::ClearFaults() { impl_->faults.Clear(); }
void SimServer::CompactHistory() { impl_->core->store().Compact(); }
std::size_t SimServer::ActiveWatches() const { return impl_->core->store().WatchCount(); }

}  // namespace gg::sim
