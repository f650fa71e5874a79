// HealthServer on cpp-httplib: routing, Kubernetes-style health check answers.
#include "metrics/http_server.h"

#include <httplib.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>

namespace gg::metrics {
namespace {

constexpr std::string_view kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";

// Values of `key` in a raw query string ("verbose&exclude=a&exclude=b"); a bare key has
// value "". No percent-decoding is needed for check names ([a-z0-9-]).
std::vector<std::string_view> QueryValues(std::string_view query, std::string_view key,
                                          bool* present) {
  std::vector<std::string_view> out;
  *present = false;
  while (!query.empty()) {
    auto amp = query.find('&');
    std::string_view part = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    auto eq = part.find('=');
    std::string_view k = part.substr(0, eq);
    if (k != key) continue;
    *present = true;
    out.push_back(eq == std::string_view::npos ? std::string_view() : part.substr(eq + 1));
  }
  return out;
}

// Listening sockets take SO_REUSEADDR only (a restart may bind while old connections sit in
// TIME_WAIT). cpp-httplib's default adds SO_REUSEPORT, which lets a second process bind the
// same port and splits the connections between them: two agents on one node would answer
// scrapes alternately.
void ListenSocketOptions(int sock) {
  int yes = 1;
  (void)::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
}

// cpp-httplib reports a failed bind as `false` only; find out why by binding a probe socket
// the same way (host:port, SO_REUSEADDR). Returns "" when the probe binds after all.
std::string BindError(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res); rc != 0)
    return std::string("cannot resolve ") + host + ": " + ::gai_strerror(rc);
  std::string err;
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      err = std::strerror(errno);
      continue;
    }
    ListenSocketOptions(fd);
    int rc = ::bind(fd, ai->ai_addr, ai->ai_addrlen);
    int e = errno;
    ::close(fd);
    if (rc == 0) {
      err.clear();
      break;
    }
    err = e == EADDRINUSE ? "address already in use" : std::strerror(e);
  }
  ::freeaddrinfo(res);
  return err;
}

}  // namespace

struct HealthServer::Impl {
  httplib::Server server;
  std::thread thread;
  std::atomic<bool> exited{false};
};

HealthServer::HealthServer(Registry& registry, Logger log)
    : registry_(registry), log_(log.WithName("health-server")) {}

HealthServer::~HealthServer() { Stop(); }

void HealthServer::AddHealthCheck(std::string name, CheckFn check) {
  std::scoped_lock lock(mu_);
  for (auto& c : health_checks_) {
    if (c.name == name) {
      c.fn = std::move(check);
      return;
    }
  }
  health_checks_.push_back({std::move(name), std::move(check)});
}

void HealthServer::AddReadyCheck(std::string name, CheckFn check) {
  std::scoped_lock lock(mu_);
  for (auto& c : ready_checks_) {
    if (c.name == name) {
      c.fn = std::move(check);
      return;
    }
  }
  ready_checks_.push_back({std::move(name), std::move(check)});
}

void HealthServer::AddHandler(std::string path,
                              std::function<HttpResponse(std::string_view query)> fn) {
  std::scoped_lock lock(mu_);
  handlers_[std::move(path)] = std::move(fn);
}

HttpResponse HealthServer::RunChecks(std::string_view kind, const std::vector<Check>& checks,
                                     std::string_view only, std::string_view query) const {
  HttpResponse r;
  if (!only.empty()) {
    for (const auto& c : checks) {
      if (c.name != only) continue;
      Status s = c.fn ? c.fn() : OkStatus();
      if (s.ok()) {
        r.body = "ok";
      } else {
        r.status = 500;
        r.body = "internal server error: " + s.message() + "\n";
      }
      return r;
    }
    r.status = 404;
    r.body = "no such check: " + std::string(only) + "\n";
    return r;
  }
  bool verbose = false;
  QueryValues(query, "verbose", &verbose);
  bool has_exclude = false;
  auto excluded = QueryValues(query, "exclude", &has_exclude);
  std::string lines;
  bool failed = false;
  for (const auto& c : checks) {
    if (std::find(excluded.begin(), excluded.end(), c.name) != excluded.end()) {
      lines += "[+]" + c.name + " excluded: ok\n";
      continue;
    }
    Status s = c.fn ? c.fn() : OkStatus();
    if (s.ok()) {
      lines += "[+]" + c.name + " ok\n";
    } else {
      failed = true;
      // Like Kubernetes, the reason is only shown to a caller who asked for detail.
      lines += "[-]" + c.name + " failed: " + (verbose ? s.message() : "reason withheld") + "\n";
      log_.Debug("check failed", {{"kind", kind}, {"check", c.name}, {"error", s.message()}});
    }
  }
  if (failed) {
    r.status = 500;
    r.body = lines + std::string(kind) + " check failed\n";
  } else if (verbose) {
    r.body = lines + std::string(kind) + " check passed\n";
  } else {
    r.body = "ok";
  }
  return r;
}

HttpResponse HealthServer::Handle(std::string_view path, std::string_view query) const {
  if (path == "/metrics") {
    HttpResponse r;
    r.body = registry_.ExposeText();
    r.content_type = std::string(kMetricsContentType);
    return r;
  }
  auto check_route = [&](std::string_view prefix, std::string_view* only) {
    if (path == prefix) {
      *only = {};
      return true;
    }
    if (path.size() > prefix.size() + 1 && path.substr(0, prefix.size()) == prefix &&
        path[prefix.size()] == '/') {
      *only = path.substr(prefix.size() + 1);
      return true;
    }
    return false;
  };
  std::string_view only;
  if (check_route("/healthz", &only) || check_route("/livez", &only)) {
    std::vector<Check> checks;
    {
      std::scoped_lock lock(mu_);
      checks = health_checks_;
    }
    return RunChecks(path.substr(1, path.find('/', 1) - 1), checks, only, query);
  }
  if (check_route("/readyz", &only)) {
    std::vector<Check> checks;
    {
      std::scoped_lock lock(mu_);
      checks = ready_checks_;
    }
    return RunChecks("readyz", checks, only, query);
  }
  std::function<HttpResponse(std::string_view)> fn;
  {
    std::scoped_lock lock(mu_);
    auto it = handlers_.find(path);
    if (it != handlers_.end()) fn = it->second;
  }
  if (fn) return fn(query);
  HttpResponse r;
  r.status = 404;
  r.body = "404 page not found\n";
  return r;
}

StatusOr<int> HealthServer::Start(std::string_view listen) {
  if (impl_) return FailedPreconditionError("health server already started");
  auto colon = listen.rfind(':');
  if (colon == std::string_view::npos)
    return InvalidArgumentError("listen address must be host:port, got \"" + std::string(listen) +
                                "\"");
  std::string host(listen.substr(0, colon));
  if (host.empty()) host = "0.0.0.0";
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  std::string_view port_str = listen.substr(colon + 1);
  int port = -1;
  auto [p, ec] = std::from_chars(port_str.data(), port_str.data() + port_str.size(), port);
  if (ec != std::errc() || p != port_str.data() + port_str.size() || port < 0 || port > 65535)
    return InvalidArgumentError("invalid port in listen address \"" + std::string(listen) + "\"");

  auto impl = std::make_unique<Impl>();
  // A few threads suffice for probes and scrapes; keep the footprint small.
  impl->server.new_task_queue = [] { return new httplib::ThreadPool(4); };
  impl->server.set_keep_alive_timeout(5);
  // Small responses (PATCH results, watch lines) must not wait for Nagle + delayed ACK (~40 ms).
  impl->server.set_tcp_nodelay(true);
  impl->server.set_read_timeout(std::chrono::seconds(5));
  impl->server.set_write_timeout(std::chrono::seconds(10));
  impl->server.set_socket_options(ListenSocketOptions);
  impl->server.Get(R"(/.*)", [this](const httplib::Request& req, httplib::Response& res) {
    std::string_view target = req.target;
    auto q = target.find('?');
    std::string_view query =
        q == std::string_view::npos ? std::string_view() : target.substr(q + 1);
    HttpResponse r = Handle(req.path, query);
    res.status = r.status;
    res.set_content(r.body, r.content_type.c_str());
  });
  int bound = 0;
  if (port == 0) {
    bound = impl->server.bind_to_any_port(host);
    if (bound <= 0) bound = -1;
  } else {
    bound = impl->server.bind_to_port(host, port) ? port : -1;
  }
  if (bound < 0) {
    std::string why = port == 0 ? std::string() : BindError(host, port);
    if (why.empty()) why = "bind failed";
    return UnavailableError("cannot listen on \"" + std::string(listen) + "\": " + why + " (port " +
                            std::to_string(port) + ")");
  }
  impl->thread = std::thread([i = impl.get()] {
    i->server.listen_after_bind();
    i->exited = true;
  });
  // stop() is a no-op until the accept loop runs; wait for it so Stop() never hangs.
  while (!impl->server.is_running() && !impl->exited)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  impl_ = std::move(impl);
  port_ = bound;
  log_.Info("serving metrics and health", {{"address", host}, {"port", bound}});
  return bound;
}

void HealthServer::Stop() {
  if (!impl_) return;
  impl_->server.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
  impl_.reset();
  port_ = 0;
}

bool HealthServer::Running() const { return impl_ != nullptr; }

}  // namespace gg::metrics
