// Informer over a scripted in-memory Transport: initial paged LIST, watch events into the
// cache and handlers, resume after a clean stream end (no LIST), relist on 410 and on an
// undecodable event (deletes discovered), prompt stop.
#include "runtime/informer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

namespace gg::runtime {
namespace {

using k8s::HttpRequest;
using k8s::HttpResponse;

// Serves LIST pages keyed by continue token and a queue of scripted watch streams.
class ScriptedTransport : public k8s::Transport {
 public:
  struct WatchScript {
    std::vector<std::string> lines;
    bool hang = false;  // after the lines, block until stopped
  };

  void SetList(std::map<std::string, std::string> pages_by_continue) {
    std::scoped_lock lock(mu_);
    pages_ = std::move(pages_by_continue);
  }
  // Complete LISTs (requests without continue) take the next queued version, if any.
  void QueueList(std::map<std::string, std::string> pages_by_continue) {
    std::scoped_lock lock(mu_);
    queued_.push_back(std::move(pages_by_continue));
  }
  void PushWatch(WatchScript w) {
    std::scoped_lock lock(mu_);
    watches_.push_back(std::move(w));
  }
  std::vector<std::string> Paths() {
    std::scoped_lock lock(mu_);
    return paths_;
  }

  StatusOr<HttpResponse> Do(const HttpRequest& req) override {
    std::scoped_lock lock(mu_);
    paths_.push_back(req.path);
    std::string cont;
    if (auto p = req.path.find("continue="); p != std::string::npos) {
      cont = req.path.substr(p + 9);
      cont = cont.substr(0, cont.find('&'));
    }
    if (cont.empty() && !queued_.empty()) {
      pages_ = std::move(queued_.front());
      queued_.pop_front();
    }
    HttpResponse r;
    auto it = pages_.find(cont);
    if (it == pages_.end()) {
      r.status = 500;
      return r;
    }
    r.status = 200;
    r.body = it->second;
    return r;
  }
  StatusOr<HttpResponse> Stream(const HttpRequest& req, const ChunkFn& on_chunk,
                                std::stop_token stop) override {
    WatchScript w;
    {
      std::scoped_lock lock(mu_);
      paths_.push_back(req.path);
      if (watches_.empty()) {
        w.hang = true;
      } else {
        w = std::move(watches_.front());
        watches_.pop_front();
      }
    }
    HttpResponse r;
    r.status = 200;
    for (const auto& l : w.lines) {
      std::string chunk = l + "\n";
      if (!on_chunk(chunk)) return r;
    }
    if (w.hang) {
      while (!stop.stop_requested()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      return CancelledError("stopped");
    }
    return r;
  }
  std::string Host() const override { return "fake:443"; }

 private:
  std::mutex mu_;
  std::map<std::string, std::string> pages_;
  std::deque<WatchScript> watches_;
  std::deque<std::map<std::string, std::string>> queued_;
  std::vector<std::string> paths_;
};

std::string NodeJson(const std::string& name, int rv, bool unschedulable = false) {
  return R"({"metadata":{"name":")" + name + R"(","resourceVersion":")" + std::to_string(rv) +
         R"("},"spec":{"unschedulable":)" + (unschedulable ? "true" : "false") + "}}";
}
std::string Event(const std::string& type, const std::string& obj) {
  return R"({"type":")" + type + R"(","object":)" + obj + "}";
}

template <typename Pred>
bool WaitFor(Pred p) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!p()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

struct Recorder {
  std::mutex mu;
  std::vector<std::string> log;
  void Add(std::string s) {
    std::scoped_lock lock(mu);
    log.push_back(std::move(s));
  }
  std::vector<std::string> Get() {
    std::scoped_lock lock(mu);
    return log;
  }
};

EventHandlers<k8s::Node> Handlers(Recorder& r) {
  EventHandlers<k8s::Node> h;
  h.on_add = [&r](const k8s::Node& n) { r.Add("add " + n.meta.name); };
  h.on_update = [&r](const k8s::Node& o, const k8s::Node& n) {
    r.Add("update " + n.meta.name + " " + o.meta.resource_version + "->" + n.meta.resource_version);
  };
  h.on_delete = [&r](const k8s::Node& n) { r.Add("delete " + n.meta.name); };
  return h;
}

InformerOptions FastOptions() {
  InformerOptions o;
  o.page_size = 2;
  o.backoff_initial = std::chrono::milliseconds(1);
  o.backoff_max = std::chrono::milliseconds(5);
  return o;
}

TEST(InformerTest, ListThenWatchResumeWithoutRelist) {
  ScriptedTransport t;
  t.SetList(
      {{"", R"({"metadata":{"resourceVersion":"10","continue":"p2"},"items":[)" + NodeJson("a", 1) +
                "," + NodeJson("b", 2) + "]}"},
       {"p2", R"({"metadata":{"resourceVersion":"10"},"items":[)" + NodeJson("c", 3) + "]}"}});
  t.PushWatch({{Event("MODIFIED", NodeJson("a", 11, true)), Event("ADDED", NodeJson("d", 12)),
                Event("DELETED", NodeJson("b", 13)),
                R"({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"20"}}})"},
               false});  // then the server ends the stream (timeoutSeconds)
  t.PushWatch({{Event("MODIFIED", NodeJson("c", 21, true))}, true});
  k8s::ClientConfig cfg;
  k8s::RestClient client(t, cfg, RealClock::Default());
  Informer<k8s::Node> inf(client, k8s::kNodes, RealClock::Default(), FastOptions());
  Recorder rec;
  inf.AddEventHandler(Handlers(rec));
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync({}, std::chrono::seconds(20)));
  ASSERT_TRUE(WaitFor([&] { return inf.stats().events.load() >= 4; }));
  EXPECT_EQ(inf.Size(), 3u);
  ASSERT_NE(inf.Get("", "a"), nullptr);
  EXPECT_TRUE(inf.Get("", "a")->unschedulable);
  EXPECT_EQ(inf.Get("", "b"), nullptr);
  EXPECT_TRUE(inf.Get("", "c")->unschedulable);
  EXPECT_EQ(inf.stats().lists.load(), 1u);
  EXPECT_EQ(inf.stats().relists.load(), 0u);
  EXPECT_EQ(inf.stats().list_pages.load(), 2u);
  EXPECT_EQ(inf.stats().bookmarks.load(), 1u);
  EXPECT_EQ(inf.LastResourceVersion(), "21");
  // The second watch resumed from the bookmark's resourceVersion.
  auto paths = t.Paths();
  ASSERT_GE(paths.size(), 4u);
  EXPECT_NE(paths[2].find("resourceVersion=10"), std::string::npos) << paths[2];
  EXPECT_NE(paths[2].find("allowWatchBookmarks=true"), std::string::npos);
  EXPECT_NE(paths[3].find("resourceVersion=20"), std::string::npos) << paths[3];
  EXPECT_EQ(rec.Get(), (std::vector<std::string>{"add a", "add b", "add c", "update a 1->11",
                                                 "add d", "delete b", "update c 3->21"}));
  inf.Stop();
}

TEST(InformerTest, RelistOn410DeliversDeletesAndUpdates) {
  ScriptedTransport t;
  t.QueueList({{"", R"({"metadata":{"resourceVersion":"10"},"items":[)" + NodeJson("a", 1) + "," +
                        NodeJson("b", 2) + "]}"}});
  // What the relist sees: b is gone, a was modified while we were not watching.
  t.QueueList(
      {{"", R"({"metadata":{"resourceVersion":"30"},"items":[)" + NodeJson("a", 25) + "]}"}});
  t.PushWatch(
      {{R"j({"type":"ERROR","object":{"kind":"Status","status":"Failure","message":"too old resource version: 1 (100)","reason":"Expired","code":410}})j"},
       false});
  k8s::ClientConfig cfg;
  k8s::RestClient client(t, cfg, RealClock::Default());
  Informer<k8s::Node> inf(client, k8s::kNodes, RealClock::Default(), FastOptions());
  Recorder rec;
  inf.AddEventHandler(Handlers(rec));
  inf.Start();
  ASSERT_TRUE(WaitFor([&] { return inf.stats().relists.load() >= 1 && rec.Get().size() >= 4; }));
  EXPECT_EQ(inf.Size(), 1u);
  EXPECT_EQ(inf.Get("", "b"), nullptr);
  EXPECT_EQ(inf.LastResourceVersion(), "30");
  EXPECT_EQ(rec.Get(), (std::vector<std::string>{"add a", "add b", "update a 1->25", "delete b"}));
  EXPECT_EQ(inf.stats().relists.load(), 1u);
  inf.Stop();
}

// A server that sorts keys sends labels before name (and "object" before "type"): labels in
// the cache and in the handlers' old and new objects are the JSON's at every step, and an
// ERROR event whose type is not first still ends the watch for a relist.
TEST(InformerTest, LabelsFollowEachVersionWhateverTheKeyOrder) {
  auto node = [](int rv, const std::string& labels) {
    return R"({"metadata":{"labels":{)" + labels + R"(},"name":"a","resourceVersion":")" +
           std::to_string(rv) + R"("}})";
  };
  ScriptedTransport t;
  t.QueueList({{"", R"({"metadata":{"resourceVersion":"10"},"items":[)" +
                        node(1, R"("k1":"x","k2":"y","k3":"z")") + "]}"}});
  t.QueueList(
      {{"", R"({"metadata":{"resourceVersion":"40"},"items":[)" + node(4, R"("k2":"y2")") + "]}"}});
  t.PushWatch(
      {{R"({"object":)" + node(2, R"("k0":"w","k1":"x","k2":"y2","k3":"z")") +
            R"(,"type":"MODIFIED"})",
        R"({"object":)" + node(3, R"("k1":"x","k2":"y2")") + R"(,"type":"MODIFIED"})",
        R"j({"object":{"kind":"Status","status":"Failure","reason":"Expired","code":410},"type":"ERROR"})j"},
       true});
  k8s::ClientConfig cfg;
  k8s::RestClient client(t, cfg, RealClock::Default());
  Informer<k8s::Node> inf(client, k8s::kNodes, RealClock::Default(), FastOptions());
  Recorder rec;
  EventHandlers<k8s::Node> h;
  auto show = [](const k8s::Node& n) {
    std::string out;
    for (const auto& [k, v] : n.meta.labels.ToMap()) out += k + "=" + v + ";";
    return out;
  };
  h.on_add = [&](const k8s::Node& n) { rec.Add("add " + show(n)); };
  h.on_update = [&](const k8s::Node& o, const k8s::Node& n) {
    rec.Add("update " + show(o) + " -> " + show(n));
  };
  inf.AddEventHandler(std::move(h));
  inf.Start();
  ASSERT_TRUE(WaitFor([&] { return inf.stats().relists.load() == 1 && rec.Get().size() >= 4; }));
  EXPECT_EQ(rec.Get(),
            (std::vector<std::string>{
                "add k1=x;k2=y;k3=z;", "update k1=x;k2=y;k3=z; -> k0=w;k1=x;k2=y2;k3=z;",
                "update k0=w;k1=x;k2=y2;k3=z; -> k1=x;k2=y2;", "update k1=x;k2=y2; -> k2=y2;"}));
  ASSERT_NE(inf.Get("", "a"), nullptr);
  EXPECT_EQ(show(*inf.Get("", "a")), "k2=y2;");
  inf.Stop();
}

TEST(InformerTest, UndecodableEventTriggersRelistAndStopIsPrompt) {
  ScriptedTransport t;
  t.SetList({{"", R"({"metadata":{"resourceVersion":"5"},"items":[)" + NodeJson("a", 1) + "]}"}});
  t.PushWatch({{R"({"type":"MODIFIED","object":{"metadata":{"name":["bad"]}}})"}, false});
  k8s::ClientConfig cfg;
  k8s::RestClient client(t, cfg, RealClock::Default());
  Informer<k8s::Node> inf(client, k8s::kNodes, RealClock::Default(), FastOptions());
  inf.Start();
  ASSERT_TRUE(WaitFor([&] { return inf.stats().relists.load() == 1; }));
  // Now the watch hangs (quiet cluster); Stop must return promptly.
  ASSERT_TRUE(WaitFor([&] { return inf.stats().watches.load() >= 2; }));
  auto t0 = std::chrono::steady_clock::now();
  inf.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  EXPECT_EQ(inf.Size(), 1u);
}

TEST(InformerTest, ListFailureRetriesWithBackoff) {
  ScriptedTransport t;  // no pages: LIST answers 500
  k8s::ClientConfig cfg;
  k8s::RestClientOptions ro;
  ro.max_attempts = 1;
  k8s::RestClient client(t, cfg, RealClock::Default(), ro);
  Informer<k8s::Node> inf(client, k8s::kNodes, RealClock::Default(), FastOptions());
  inf.Start();
  ASSERT_TRUE(WaitFor([&] { return inf.stats().errors.load() >= 3; }));
  EXPECT_FALSE(inf.HasSynced());
  t.SetList({{"", R"({"metadata":{"resourceVersion":"5"},"items":[]})"}});
  EXPECT_TRUE(inf.WaitForSync({}, std::chrono::seconds(20)));
  inf.Stop();
}

TEST(InformerTest, PollModeListsEveryIntervalDiffsAndNeverWatches) {
  ScriptedTransport t;
  t.QueueList({{"", R"({"metadata":{"resourceVersion":"10"},"items":[)" + NodeJson("a", 1) + "," +
                        NodeJson("b", 2) + "," + NodeJson("c", 3) + "]}"}});
  // Poll 1: a modified, b gone, d new, c unchanged (same resourceVersion: no update).
  t.QueueList({{"", R"({"metadata":{"resourceVersion":"20"},"items":[)" + NodeJson("a", 15, true) +
                        "," + NodeJson("c", 3) + "," + NodeJson("d", 16) + "]}"}});
  // Poll 2: nothing changed.
  t.QueueList({{"", R"({"metadata":{"resourceVersion":"20"},"items":[)" + NodeJson("a", 15, true) +
                        "," + NodeJson("c", 3) + "," + NodeJson("d", 16) + "]}"}});
  k8s::ClientConfig cfg;
  k8s::RestClient client(t, cfg, RealClock::Default());
  FakeClock clock;
  InformerOptions o;
  o.page_size = 0;
  o.poll_interval = std::chrono::seconds(30);
  Informer<k8s::Node> inf(client, k8s::kNodes, clock, o);
  Recorder rec;
  inf.AddEventHandler(Handlers(rec));
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync({}, std::chrono::seconds(20)));
  ASSERT_TRUE(WaitFor([&] { return clock.Sleepers() == 1; }));
  EXPECT_EQ(inf.stats().lists.load(), 1u);
  // Not yet due: no second LIST.
  clock.Advance(std::chrono::seconds(29));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(inf.stats().lists.load(), 1u);
  clock.Advance(std::chrono::seconds(1));
  ASSERT_TRUE(WaitFor([&] { return inf.stats().lists.load() == 2 && clock.Sleepers() == 1; }));
  EXPECT_EQ(inf.Size(), 3u);
  EXPECT_EQ(inf.Get("", "b"), nullptr);
  ASSERT_NE(inf.Get("", "a"), nullptr);
  EXPECT_TRUE(inf.Get("", "a")->unschedulable);
  EXPECT_EQ(inf.LastResourceVersion(), "20");
  clock.Advance(std::chrono::seconds(30));
  ASSERT_TRUE(WaitFor([&] { return inf.stats().lists.load() == 3 && clock.Sleepers() == 1; }));
  EXPECT_EQ(rec.Get(), (std::vector<std::string>{"add a", "add b", "add c", "update a 1->15",
                                                 "add d", "delete b"}));
  EXPECT_EQ(inf.stats().relists.load(), 2u);
  EXPECT_EQ(inf.stats().watches.load(), 0u);
  for (const auto& p : t.Paths()) EXPECT_EQ(p.find("watch="), std::string::npos) << p;
  inf.Stop();
}

}  // namespace
}  // namespace gg::runtime
