// Truncated watch events: a stream that breaks in the middle of an event (proxy reset, API
// server restart) must never apply half an event. The partial line is dropped, the informer
// resumes from the last complete event's resourceVersion without a re-LIST, and the event
// arrives whole on the next stream. A complete line that is garbage is an error: relist.
#include <gtest/gtest.h>

#include <chrono>
#include <deque>
#include <mutex>
#include <thread>

#include "runtime/informer.h"

namespace gg::runtime {
namespace {

// LIST answers one fixed body; each WATCH plays the next queue entry as raw byte chunks, then
// ends the stream (or blocks until stopped when the queue is empty).
class ChunkedTransport : public k8s::Transport {
 public:
  std::string list_body;
  void QueueWatch(std::vector<std::string> chunks) {
    std::scoped_lock lock(mu_);
    watches_.push_back(std::move(chunks));
  }
  std::vector<std::string> WatchPaths() {
    std::scoped_lock lock(mu_);
    return watch_paths_;
  }
  StatusOr<k8s::HttpResponse> Do(const k8s::HttpRequest&) override {
    k8s::HttpResponse r;
    r.status = 200;
    std::scoped_lock lock(mu_);
    r.body = list_body;
    r.body.reserve(r.body.size() + k8s::kBodyPadding);
    return r;
  }
  StatusOr<k8s::HttpResponse> Stream(const k8s::HttpRequest& req, const ChunkFn& on_chunk,
                                     std::stop_token stop) override {
    std::vector<std::string> chunks;
    bool hang = false;
    {
      std::scoped_lock lock(mu_);
      watch_paths_.push_back(req.path);
      if (watches_.empty()) {
        hang = true;
      } else {
        chunks = std::move(watches_.front());
        watches_.pop_front();
      }
    }
    k8s::HttpResponse r;
    r.status = 200;
    for (const auto& c : chunks)
      if (!on_chunk(c)) return r;
    if (hang) {
      while (!stop.stop_requested()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      return CancelledError("stopped");
    }
    return r;  // the server closed the stream (possibly mid-line)
  }
  std::string Host() const override { return "fake:443"; }

 private:
  std::mutex mu_;
  std::deque<std::vector<std::string>> watches_;
  std::vector<std::string> watch_paths_;
};

std::string NodeEvent(const std::string& type, int rv, bool unschedulable) {
  return R"({"type":")" + type + R"(","object":{"metadata":{"name":"a","resourceVersion":")" +
         std::to_string(rv) + R"("},"spec":{"unschedulable":)" +
         (unschedulable ? "true" : "false") + "}}}\n";
}

InformerOptions Fast() {
  InformerOptions o;
  o.backoff_initial = std::chrono::milliseconds(1);
  o.backoff_max = std::chrono::milliseconds(5);
  return o;
}

bool Within(const std::function<bool()>& f) {
  for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       std::chrono::steady_clock::now() < end;) {
    if (f()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return f();
}

TEST(InformerTruncation, HalfAnEventIsNeverAppliedAndArrivesWholeAfterResume) {
  ChunkedTransport t;
  t.list_body = R"({"metadata":{"resourceVersion":"4"},"items":[]})";
  const std::string added = NodeEvent("ADDED", 5, false);
  const std::string cordon = NodeEvent("MODIFIED", 6, true);
  // Stream 1: one whole event, then the cordon cut after its first 40 bytes, split across
  // chunks at odd places. Stream 2 (resumed from RV 5): the cordon, whole.
  t.QueueWatch({added.substr(0, 7), added.substr(7), cordon.substr(0, 23), cordon.substr(23, 17)});
  t.QueueWatch({cordon});
  k8s::ClientConfig cfg;
  k8s::RestClient client(t, cfg, RealClock::Default());
  Informer<k8s::Node> inf(client, k8s::kNodes, RealClock::Default(), Fast());
  inf.Start();
  ASSERT_TRUE(Within([&] {
    auto n = inf.Get("", "a");
    return n && n->unschedulable;
  }));
  EXPECT_EQ(inf.LastResourceVersion(), "6");
  EXPECT_EQ(inf.stats().relists.load(), 0u) << "a cut stream resumes; it does not re-LIST";
  EXPECT_EQ(inf.stats().errors.load(), 0u) << "the partial line was never decoded";
  auto paths = t.WatchPaths();
  ASSERT_GE(paths.size(), 2u);
  EXPECT_NE(paths[0].find("resourceVersion=4"), std::string::npos) << paths[0];
  EXPECT_NE(paths[1].find("resourceVersion=5"), std::string::npos)
      << "resumed from the last complete event: " << paths[1];
  inf.Stop();
}

TEST(InformerTruncation, ACompleteButGarbledLineIsAnErrorThatRelists) {
  ChunkedTransport t;
  t.list_body =
      R"({"metadata":{"resourceVersion":"4"},"items":[{"metadata":{"name":"a","resourceVersion":"4"}}]})";
  // A proxy that mangled the stream: the line ends, but the JSON does not.
  t.QueueWatch({R"({"type":"MODIFIED","object":{"metadata":{"name":"a","resourceVe)"
                "\n"});
  k8s::ClientConfig cfg;
  k8s::RestClient client(t, cfg, RealClock::Default());
  Informer<k8s::Node> inf(client, k8s::kNodes, RealClock::Default(), Fast());
  inf.Start();
  ASSERT_TRUE(Within([&] { return inf.stats().relists.load() >= 1; }));
  EXPECT_GE(inf.stats().errors.load(), 1u);
  auto n = inf.Get("", "a");
  ASSERT_NE(n, nullptr) << "the cache keeps the last good state";
  EXPECT_EQ(n->meta.resource_version, "4");
  inf.Stop();
}

}  // namespace
}  // namespace gg::runtime
