// Unit tests for HealthServer over real loopback HTTP.
#include "metrics/http_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>

namespace gg::metrics {
namespace {

class HealthServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_.AddCounter("gg_test_total", "A test counter.", {"k"}).WithLabels({"v"}).Inc(3);
    auto port = server_.Start("127.0.0.1:0");
    ASSERT_TRUE(port.ok()) << port.status();
    ASSERT_GT(*port, 0);
    client_ = std::make_unique<httplib::Client>("127.0.0.1", *port);
    client_->set_connection_timeout(std::chrono::seconds(10));
    client_->set_read_timeout(std::chrono::seconds(10));
  }

  Registry registry_;
  HealthServer server_{registry_};
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(HealthServerTest, ServesMetrics) {
  auto res = client_->Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(res->body.find("gg_test_total{k=\"v\"} 3\n"), std::string::npos) << res->body;
}

TEST_F(HealthServerTest, HealthyAndVerbose) {
  server_.AddHealthCheck("ping", [] { return OkStatus(); });
  auto res = client_->Get("/healthz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "ok");
  res = client_->Get("/healthz?verbose");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->body, "[+]ping ok\nhealthz check passed\n");
  res = client_->Get("/livez");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

TEST_F(HealthServerTest, FailingReadyCheck) {
  std::atomic<bool> synced{false};
  server_.AddReadyCheck("ping", [] { return OkStatus(); });
  server_.AddReadyCheck("informers-synced", [&] {
    return synced ? OkStatus() : UnavailableError("nodes informer not synced");
  });
  auto res = client_->Get("/readyz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 500);
  EXPECT_EQ(res->body,
            "[+]ping ok\n[-]informers-synced failed: reason withheld\nreadyz check failed\n");
  res = client_->Get("/readyz?verbose");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 500);
  EXPECT_NE(res->body.find("[-]informers-synced failed: nodes informer not synced\n"),
            std::string::npos)
      << res->body;
  res = client_->Get("/readyz?exclude=informers-synced");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  res = client_->Get("/readyz/informers-synced");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 500);
  res = client_->Get("/readyz/nope");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);

  synced = true;
  res = client_->Get("/readyz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "ok");
  // Liveness is independent of readiness.
  res = client_->Get("/healthz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

TEST_F(HealthServerTest, ExtraHandlersAndNotFound) {
  server_.AddHandler("/debug/queues", [](std::string_view query) {
    HttpResponse r;
    r.body = "queues " + std::string(query);
    return r;
  });
  auto res = client_->Get("/debug/queues?x=1");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "queues x=1");
  res = client_->Get("/nothing-here");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
}

TEST(HealthServer, BadListenAddressesAreErrors) {
  Registry r;
  HealthServer s(r);
  EXPECT_EQ(s.Start("nonsense").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Start("127.0.0.1:99999").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Start("127.0.0.1:x").status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(s.Running());
}

TEST(HealthServer, StopAndRestart) {
  Registry r;
  HealthServer s(r);
  auto p1 = s.Start("127.0.0.1:0");
  ASSERT_TRUE(p1.ok());
  EXPECT_EQ(s.Start("127.0.0.1:0").status().code(), StatusCode::kFailedPrecondition);
  s.Stop();
  s.Stop();
  EXPECT_FALSE(s.Running());
  auto p2 = s.Start("127.0.0.1:0");
  ASSERT_TRUE(p2.ok());
  httplib::Client c("127.0.0.1", *p2);
  auto res = c.Get("/healthz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

// A second server on a port in use must fail, naming the port, and must not steal scrapes
// from the first (cpp-httplib's default SO_REUSEPORT would let both bind).
TEST(HealthServer, RefusesAPortInUse) {
  Registry r1, r2;
  r1.AddGauge("gg_first", "first", {}).WithLabels({}).Set(1);
  HealthServer first(r1), second(r2);
  auto port = first.Start("127.0.0.1:0");
  ASSERT_TRUE(port.ok()) << port.status();
  const std::string addr = "127.0.0.1:" + std::to_string(*port);
  auto again = second.Start(addr);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("address already in use"), std::string::npos)
      << again.status();
  EXPECT_NE(again.status().message().find("port " + std::to_string(*port)), std::string::npos)
      << again.status();
  EXPECT_FALSE(second.Running());
  // Every scrape still reaches the first server.
  for (int i = 0; i < 5; ++i) {
    httplib::Client c("127.0.0.1", *port);
    auto res = c.Get("/metrics");
    ASSERT_TRUE(res);
    EXPECT_NE(res->body.find("gg_first"), std::string::npos);
  }
  // Once the port is free again it binds (SO_REUSEADDR: TIME_WAIT does not block a restart).
  first.Stop();
  auto later = second.Start(addr);
  EXPECT_TRUE(later.ok()) << later.status();
}

}  // namespace
}  // namespace gg::metrics
