// RestClient + CurlTransport over real loopback HTTP against small cpp-httplib servers that
// play the hard cases: 429 + Retry-After, 5xx, garbage, a hung server, cut and 410 watches,
// token rotation, conflicts, paging and keep-alive.
#include "k8s/rest_client.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "k8s/client_metrics.h"
#include "k8s/codec.h"
#include "k8s/errors.h"

namespace gg::k8s {
namespace {

class TestServer {
 public:
  TestServer() {
    port_ = svr_.bind_to_any_port("127.0.0.1");
    svr_.new_task_queue = [] { return new httplib::ThreadPool(8); };
  }
  ~TestServer() { Stop(); }
  void Start() {
    thread_ = std::thread([this] { svr_.listen_after_bind(); });
    while (!svr_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  void Stop() {
    {
      std::scoped_lock lock(mu_);
      release_ = true;
    }
    cv_.notify_all();
    svr_.stop();
    if (thread_.joinable()) thread_.join();
  }
  // Blocks a handler until the server stops.
  void Hang() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return release_; });
  }
  bool Released() {
    std::scoped_lock lock(mu_);
    return release_;
  }
  std::string Url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  httplib::Server& svr() { return svr_; }

 private:
  httplib::Server svr_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool release_ = false;
};

std::unique_ptr<RestClient> MakeClient(const std::string& url, ClientConfig cfg = {},
                                       RestClientOptions opts = {}) {
  cfg.server = url;
  if (cfg.timeout == std::chrono::milliseconds(30000)) cfg.timeout = std::chrono::seconds(10);
  auto t = CurlTransport::Create(cfg);
  EXPECT_TRUE(t.ok()) << t.status();
  opts.initial_backoff = std::chrono::milliseconds(10);
  return std::make_unique<RestClient>(std::move(*t), cfg, RealClock::Default(), opts);
}

constexpr char kStatus429[] =
    R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"slow down","reason":"TooManyRequests","code":429})";

TEST(RestClientTest, RetriesTooManyRequestsHonoringRetryAfter) {
  TestServer s;
  std::atomic<int> calls{0};
  s.svr().Get("/api/v1/nodes/n1", [&](const httplib::Request&, httplib::Response& res) {
    if (calls++ == 0) {
      res.status = 429;
      res.set_header("Retry-After", "1");
      res.set_content(kStatus429, "application/json");
      return;
    }
    res.set_content(R"({"metadata":{"name":"n1"}})", "application/json");
  });
  s.Start();
  auto c = MakeClient(s.Url());
  auto t0 = std::chrono::steady_clock::now();
  auto body = c->Get(kNodes, "", "n1");
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(900));
  EXPECT_EQ(ParseObject<Node>(*body)->meta.name, "n1");
  auto counts = c->RequestCounts();
  EXPECT_EQ(counts["GET 429"], 1u);
  EXPECT_EQ(counts["GET 200"], 1u);
}

TEST(RestClientTest, EvictionRefusalIsNotRetried) {
  TestServer s;
  std::atomic<int> calls{0};
  std::string seen_body;
  s.svr().Post("/api/v1/namespaces/d/pods/p/eviction",
               [&](const httplib::Request& req, httplib::Response& res) {
                 ++calls;
                 seen_body = req.body;
                 res.status = 429;
                 res.set_content(kStatus429, "application/json");
               });
  s.Start();
  auto c = MakeClient(s.Url());
  Status st = c->Evict("d", "p");
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(st.reason(), "TooManyRequests");
  EXPECT_EQ(calls.load(), 1);
  EXPECT_NE(seen_body.find("\"kind\":\"Eviction\""), std::string::npos);
}

TEST(RestClientTest, IdempotentCallsRetry5xxWritesDoNot) {
  TestServer s;
  std::atomic<int> gets{0}, posts{0};
  s.svr().Get("/api/v1/nodes/n", [&](const httplib::Request&, httplib::Response& res) {
    if (gets++ < 2) {
      res.status = 500;
      res.set_content("oops", "text/plain");
      return;
    }
    res.set_content(R"({"metadata":{"name":"n"}})", "application/json");
  });
  s.svr().Post("/api/v1/namespaces/d/events", [&](const httplib::Request&, httplib::Response& res) {
    ++posts;
    res.status = 500;
    res.set_content(R"({"status":"Failure","code":500,"reason":"InternalError","message":"boom"})",
                    "application/json");
  });
  s.Start();
  auto c = MakeClient(s.Url());
  EXPECT_TRUE(c->Get(kNodes, "", "n").ok());
  EXPECT_EQ(gets.load(), 3);
  auto r = c->Create(kEvents, "d", "{}");
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(r.status().message(), "boom");
  EXPECT_EQ(posts.load(), 1);
}

TEST(RestClientTest, ConflictAndAlreadyExists) {
  TestServer s;
  s.svr().Put("/apis/coordination.k8s.io/v1/namespaces/ns/leases/l", [&](const httplib::Request&
                                                                             req,
                                                                         httplib::Response& res) {
    EXPECT_NE(req.body.find("resourceVersion"), std::string::npos);
    res.status = 409;
    res.set_content(
        R"({"kind":"Status","status":"Failure","message":"the object has been modified","reason":"Conflict","code":409})",
        "application/json");
  });
  s.svr().Post("/apis/coordination.k8s.io/v1/namespaces/ns/leases", [&](const httplib::Request&,
                                                                        httplib::Response& res) {
    res.status = 409;
    res.set_content(
        R"({"kind":"Status","status":"Failure","message":"exists","reason":"AlreadyExists","code":409})",
        "application/json");
  });
  s.Start();
  auto c = MakeClient(s.Url());
  auto u = c->Update(kLeases, "ns", "l", R"({"metadata":{"resourceVersion":"1"}})");
  EXPECT_TRUE(IsConflict(u.status())) << u.status();
  auto cr = c->Create(kLeases, "ns", "{}");
  EXPECT_EQ(cr.status().code(), StatusCode::kAlreadyExists);
}

TEST(RestClientTest, PatchContentTypesAndQuery) {
  TestServer s;
  std::vector<std::string> types;
  std::string query;
  s.svr().Patch("/api/v1/nodes/n1(/status)?",
                [&](const httplib::Request& req, httplib::Response& res) {
                  types.push_back(req.get_header_value("Content-Type"));
                  if (req.has_param("fieldManager")) query = req.get_param_value("fieldManager");
                  res.set_content(req.body, "application/json");
                });
  s.Start();
  auto c = MakeClient(s.Url());
  ASSERT_TRUE(c->Patch(kNodes, "", "n1", PatchType::kMerge, "{}").ok());
  ASSERT_TRUE(c->Patch(kNodes, "", "n1", PatchType::kStrategicMerge, "{}", "status").ok());
  WriteOptions wo;
  wo.field_manager = "gpu-guardian";
  ASSERT_TRUE(c->Patch(kNodes, "", "n1", PatchType::kJsonPatch, "[]", "", wo).ok());
  EXPECT_EQ(types, (std::vector<std::string>{"application/merge-patch+json",
                                             "application/strategic-merge-patch+json",
                                             "application/json-patch+json"}));
  EXPECT_EQ(query, "gpu-guardian");
}

TEST(RestClientTest, PagesAndKeepAlive) {
  TestServer s;
  std::set<int> client_ports;
  std::mutex mu;
  s.svr().Get("/api/v1/pods", [&](const httplib::Request& req, httplib::Response& res) {
    {
      std::scoped_lock lock(mu);
      client_ports.insert(req.remote_port);
    }
    EXPECT_EQ(req.get_param_value("limit"), "2");
    EXPECT_EQ(req.get_param_value("fieldSelector"), "spec.nodeName=n1");
    std::string cont = req.get_param_value("continue");
    if (cont.empty()) {
      res.set_content(
          R"({"metadata":{"resourceVersion":"10","continue":"page2"},"items":[{"metadata":{"name":"a","namespace":"d"}},{"metadata":{"name":"b","namespace":"d"}}]})",
          "application/json");
    } else {
      EXPECT_EQ(cont, "page2");
      res.set_content(
          R"({"metadata":{"resourceVersion":"10"},"items":[{"metadata":{"name":"c","namespace":"d"}}]})",
          "application/json");
    }
  });
  s.Start();
  auto c = MakeClient(s.Url());
  ListOptions lo;
  lo.limit = 2;
  lo.field_selector = "spec.nodeName=n1";
  std::vector<std::string> names;
  Status st = c->ListPages(kPods, "", lo, [&](std::string& body) -> StatusOr<ListPageInfo> {
    auto l = ParseList<Pod>(body);
    if (!l.ok()) return l.status();
    for (auto& p : l->items) names.push_back(p.meta.Key());
    return ListPageInfo{l->resource_version, l->continue_token};
  });
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(names, (std::vector<std::string>{"d/a", "d/b", "d/c"}));
  EXPECT_EQ(client_ports.size(), 1u) << "connection was not reused";
}

TEST(RestClientTest, HungServerTimesOut) {
  TestServer s;
  s.svr().Get("/api/v1/nodes/n", [&](const httplib::Request&, httplib::Response& res) {
    s.Hang();
    res.set_content("{}", "application/json");
  });
  s.Start();
  ClientConfig cfg;
  cfg.timeout = std::chrono::milliseconds(300);
  RestClientOptions opts;
  opts.max_attempts = 2;
  auto c = MakeClient(s.Url(), cfg, opts);
  auto t0 = std::chrono::steady_clock::now();
  auto r = c->Get(kNodes, "", "n");
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_EQ(c->RequestCounts()["GET <error>"], 2u);
  s.Stop();
}

// A TCP server that answers every connection with bytes that are not HTTP.
class GarbageServer {
 public:
  GarbageServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    socklen_t len = sizeof(a);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    ::listen(fd_, 8);
    thread_ = std::thread([this] {
      while (true) {
        int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        char buf[1024];
        (void)::recv(c, buf, sizeof(buf), 0);
        const char junk[] = "\x16\x03garbage\r\n\r\n{{{{not http at all";
        (void)::send(c, junk, sizeof(junk) - 1, MSG_NOSIGNAL);
        ::close(c);
      }
    });
  }
  ~GarbageServer() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  std::string Url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
};

TEST(RestClientTest, GarbageIsAnErrorNotACrash) {
  GarbageServer g;
  RestClientOptions opts;
  opts.max_attempts = 2;
  auto c = MakeClient(g.Url(), {}, opts);
  auto r = c->Get(kNodes, "", "n");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status();

  TestServer s;
  s.svr().Get("/api/v1/nodes", [&](const httplib::Request& req, httplib::Response& res) {
    if (req.has_param("watch")) {
      res.set_content(
          "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n\x01\x02garbage\n",
          "application/json");
      return;
    }
    res.set_content("<html>proxy error</html>", "application/json");
  });
  s.Start();
  auto c2 = MakeClient(s.Url());
  auto body = c2->List(kNodes, "");
  ASSERT_TRUE(body.ok());
  EXPECT_EQ(ParseList<Node>(*body).status().code(), StatusCode::kInvalidArgument);
  std::vector<std::string> lines;
  Status w = c2->Watch(kNodes, "", {},
                       [&](std::string_view l) {
                         lines.emplace_back(l);
                         return true;
                       },
                       {});
  EXPECT_TRUE(w.ok()) << w;
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_TRUE(ParseWatchEvent<Node>(lines[0]).ok());
  EXPECT_FALSE(ParseWatchEvent<Node>(lines[1]).ok());
}

TEST(RestClientTest, WatchStreamsLinesEndsOnCutAndReports410) {
  TestServer s;
  std::atomic<int> mode{0};
  std::string seen_query;
  s.svr().Get("/api/v1/nodes", [&](const httplib::Request& req, httplib::Response& res) {
    seen_query = req.get_param_value("allowWatchBookmarks") + "|" +
                 req.get_param_value("resourceVersion") + "|" +
                 req.get_param_value("timeoutSeconds");
    if (mode.load() == 0) {
      // Two events split across chunks at odd places, then the server closes.
      res.set_chunked_content_provider("application/json", [](size_t, httplib::DataSink& sink) {
        std::string a =
            R"({"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"5"}}})";
        std::string b = R"({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"6"}}})";
        std::string all = a + "\n" + b + "\n";
        sink.write(all.data(), 10);
        sink.write(all.data() + 10, all.size() - 10);
        sink.done();
        return true;
      });
    } else {
      res.set_content(
          R"j({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (100)","reason":"Expired","code":410}})j"
          "\n",
          "application/json");
    }
  });
  s.Start();
  auto c = MakeClient(s.Url());
  WatchOptions wo;
  wo.resource_version = "4";
  wo.timeout_seconds = 30;
  std::vector<std::string> lines;
  Status w = c->Watch(kNodes, "", wo,
                      [&](std::string_view l) {
                        lines.emplace_back(l);
                        return true;
                      },
                      {});
  EXPECT_TRUE(w.ok()) << w;
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(ParseWatchEvent<Node>(lines[0])->object.meta.name, "a");
  EXPECT_EQ(ParseWatchEvent<Node>(lines[1])->type, WatchEventType::kBookmark);
  EXPECT_EQ(seen_query, "true|4|30");
  mode = 1;
  Status expired = c->Watch(kNodes, "", wo, [](std::string_view) { return true; }, {});
  EXPECT_TRUE(IsExpired(expired)) << expired;
}

// Serves `path` as a watch that sends one BOOKMARK and then stays silent (a quiet cluster)
// until the server shuts down.
void ServeBookmarkThenSilence(TestServer& s, const std::string& path) {
  s.svr().Get(path, [&s](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("application/json", [&s](size_t, httplib::DataSink& sink) {
      std::string e = R"({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"1"}}})"
                      "\n";
      sink.write(e.data(), e.size());
      while (!s.Released() && sink.is_writable()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      sink.done();
      return true;
    });
  });
}

TEST(RestClientTest, WatchStopsPromptly) {
  TestServer s;
  ServeBookmarkThenSilence(s, "/api/v1/pods");
  s.Start();
  auto c = MakeClient(s.Url());
  std::stop_source stop;
  std::atomic<int> lines{0};
  std::chrono::steady_clock::time_point stopped_at;
  std::thread stopper([&] {
    while (lines.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    stopped_at = std::chrono::steady_clock::now();
    stop.request_stop();
  });
  Status w = c->Watch(
      kPods, "", {},
      [&](std::string_view) {
        ++lines;
        return true;
      },
      stop.get_token());
  auto took = std::chrono::steady_clock::now() - stopped_at;
  stopper.join();
  EXPECT_EQ(w.code(), StatusCode::kCancelled) << w;
  EXPECT_LT(took, std::chrono::milliseconds(500));
  s.Stop();
}

// A stream whose server goes silent ends when the request's timeout passes (curl's timer in
// the stream loop), with the bytes that came before delivered.
TEST(RestClientTest, StalledStreamEndsAtItsTimeout) {
  TestServer s;
  ServeBookmarkThenSilence(s, "/api/v1/nodes");
  s.Start();
  ClientConfig cfg;
  cfg.server = s.Url();
  auto t = CurlTransport::Create(cfg);
  ASSERT_TRUE(t.ok()) << t.status();
  HttpRequest req;
  req.path = "/api/v1/nodes?watch=true";
  req.timeout = std::chrono::milliseconds(400);
  std::string got;
  auto t0 = std::chrono::steady_clock::now();
  auto r = (*t)->Stream(req,
                        [&](std::string_view chunk) {
                          got.append(chunk);
                          return true;
                        },
                        {});
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_NE(got.find("BOOKMARK"), std::string::npos) << got;
  EXPECT_GE(took, std::chrono::milliseconds(350));
  EXPECT_LT(took, std::chrono::seconds(5));
  s.Stop();
}

TEST(RestClientTest, RotatedTokenIsPickedUpAfter401) {
  auto dir = std::filesystem::temp_directory_path() /
             ("gg-rc-" + std::to_string(::getpid()) + "-" +
              std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
  std::filesystem::create_directories(dir);
  auto token_path = (dir / "token").string();
  { std::ofstream(token_path) << "old"; }
  TestServer s;
  std::vector<std::string> auths;
  std::mutex mu;
  s.svr().Get("/api/v1/nodes/n", [&](const httplib::Request& req, httplib::Response& res) {
    std::string auth = req.get_header_value("Authorization");
    {
      std::scoped_lock lock(mu);
      auths.push_back(auth);
    }
    if (auth != "Bearer new") {
      res.status = 401;
      res.set_content(
          R"({"kind":"Status","status":"Failure","reason":"Unauthorized","code":401,"message":"Unauthorized"})",
          "application/json");
      return;
    }
    res.set_content(R"({"metadata":{"name":"n"}})", "application/json");
  });
  s.Start();
  ClientConfig cfg;
  cfg.token_file = token_path;
  auto c = MakeClient(s.Url(), cfg);
  EXPECT_EQ(c->Get(kNodes, "", "n").status().code(), StatusCode::kUnauthenticated);
  // The kubelet rotates the projected token (same size, same second: only a re-read helps).
  { std::ofstream(token_path) << "new"; }
  auto r = c->Get(kNodes, "", "n");
  EXPECT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(auths.back(), "Bearer new");
  std::filesystem::remove_all(dir);
}

TEST(RestClientTest, DeleteSendsPreconditionsAndGrace) {
  TestServer s;
  std::string body;
  s.svr().Delete("/api/v1/namespaces/d/pods/p",
                 [&](const httplib::Request& req, httplib::Response& res) {
                   body = req.body;
                   res.set_content(R"({"metadata":{"name":"p"}})", "application/json");
                 });
  s.Start();
  auto c = MakeClient(s.Url());
  DeleteOptions o;
  o.grace_period_seconds = 5;
  o.precondition_uid = "u1";
  ASSERT_TRUE(c->Delete(kPods, "d", "p", o).ok());
  EXPECT_NE(body.find(R"("gracePeriodSeconds":5)"), std::string::npos) << body;
  EXPECT_NE(body.find(R"("uid":"u1")"), std::string::npos) << body;
  EXPECT_EQ(c->Delete(kPods, "d", "missing").code(), StatusCode::kNotFound);
}

TEST(RestClientTest, CountsRequestsIntoTheRegistry) {
  TestServer s;
  s.svr().Get("/api/v1/nodes/n", [&](const httplib::Request&, httplib::Response& res) {
    res.status = 404;
    res.set_content(
        R"({"status":"Failure","reason":"NotFound","code":404,"message":"nodes \"n\" not found"})",
        "application/json");
  });
  s.Start();
  metrics::Registry registry;
  RestClientOptions opts;
  opts.on_request = RestClientMetrics(registry);
  auto c = MakeClient(s.Url(), {}, opts);
  auto r = c->Get(kNodes, "", "n");
  EXPECT_TRUE(IsNotFound(r.status()));
  EXPECT_EQ(r.status().message(), "nodes \"n\" not found");
  std::string host = s.Url().substr(std::string("http://").size());
  EXPECT_EQ(registry.Value("rest_client_requests_total", {"404", "GET", host}), 1.0);
}

}  // namespace
}  // namespace gg::k8s
