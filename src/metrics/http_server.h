// HealthServer: the small HTTP server every binary runs (cpp-httplib): /metrics in the
// Prometheus text format, /healthz (+ /livez) liveness and /readyz readiness with named
// checks, answered like Kubernetes' healthz ("ok"; "[+]name ok" lines with ?verbose;
// 500 listing failed checks), and extra GET pages for debugging.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/log.h"
#include "common/status.h"
#include "metrics/registry.h"

namespace gg::metrics {

// A named check; OK means healthy. Must be quick and thread-safe (runs on server threads).
using CheckFn = std::function<Status()>;

struct HttpResponse {
  int status = 200;
  std::string body;
  std::string content_type = "text/plain; charset=utf-8";
};

class HealthServer {
 public:
  explicit HealthServer(Registry& registry, Logger log = Logger());
  ~HealthServer();  // Stop()
  HealthServer(const HealthServer&) = delete;
  HealthServer& operator=(const HealthServer&) = delete;

  // Checks may be added before or after Start(). Re-adding a name replaces the check.
  // /healthz/<name> and /readyz/<name> run one check; ?exclude=<name> skips one.
  void AddHealthCheck(std::string name, CheckFn check);
  void AddReadyCheck(std::string name, CheckFn check);

  // Extra GET page (e.g. "/debug/queues"); `fn` gets the raw query string ("" when none).
  void AddHandler(std::string path, std::function<HttpResponse(std::string_view query)> fn);

  // Binds `listen` ("127.0.0.1:0", "0.0.0.0:8080", ":8080" = all interfaces) and serves on
  // a background thread. Returns the bound port (useful with port 0).
  StatusOr<int> Start(std::string_view listen);
  // Stops serving and joins the thread. Idempotent.
  void Stop();
  bool Running() const;
  int port() const { return port_; }

  // What a GET would answer, without HTTP (used by the server itself and by tests).
  HttpResponse Handle(std::string_view path, std::string_view query) const;

 private:
  struct Check {
    std::string name;
    CheckFn fn;
  };
  HttpResponse RunChecks(std::string_view kind, const std::vector<Check>& checks,
                         std::string_view only, std::string_view query) const;

  Registry& registry_;
  Logger log_;
  mutable std::mutex mu_;
  std::vector<Check> health_checks_;
  std::vector<Check> ready_checks_;
  std::map<std::string, std::function<HttpResponse(std::string_view)>, std::less<>> handlers_;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace gg::metrics
