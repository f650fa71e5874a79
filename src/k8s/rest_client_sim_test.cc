// RestClient against the in-process API simulator over loopback HTTP(S): CRUD, patches,
// optimistic concurrency, paging, watch with resume and 410, TLS verification.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "k8s/builders.h"
#include "k8s/codec.h"
#include "k8s/errors.h"
#include "k8s/rest_client.h"
#include "sim/server.h"

namespace gg::k8s {
namespace {

nlohmann::json NodeJson(const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}, {"labels", {{"nvidia.com/gpu.product", "H100"}}}}},
          {"status",
           {{"capacity", {{"nvidia.com/gpu", "8"}}}, {"allocatable", {{"nvidia.com/gpu", "8"}}}}}};
}

class SimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    gg::sim::SimOptions o;
    o.kubelet = false;
    o.scheduler = false;
    o.controllers = false;
    o.bookmark_interval = std::chrono::milliseconds(200);
    auto s = gg::sim::SimServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    sim_ = std::move(*s);
    ClientConfig cfg;
    cfg.server = sim_->Url();
    auto c = RestClient::Create(cfg, RealClock::Default());
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = std::move(*c);
  }
  std::unique_ptr<gg::sim::SimServer> sim_;
  std::unique_ptr<RestClient> client_;
};

TEST_F(SimTest, GetPatchUpdateConflict) {
  ASSERT_TRUE(sim_->Create("/api/v1/nodes", NodeJson("n1")).ok());
  auto body = client_->Get(kNodes, "", "n1");
  ASSERT_TRUE(body.ok()) << body.status();
  auto node = ParseObject<Node>(*body);
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(node->gpu_capacity, 8);
  std::string rv = node->meta.resource_version;

  // Taint with a strategic-merge patch, as kubectl does (whole list).
  auto patched =
      client_->Patch(kNodes, "", "n1", PatchType::kStrategicMerge,
                     TaintsPatch({{"gpuguardian.io/unhealthy", "", "NoSchedule", std::nullopt}}));
  ASSERT_TRUE(patched.ok()) << patched.status();
  auto after = ParseObject<Node>(*patched);
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->taints.size(), 1u);
  EXPECT_NE(after->meta.resource_version, rv);

  // A patch carrying the stale resourceVersion is refused with 409.
  auto stale = client_->Patch(kNodes, "", "n1", PatchType::kMerge, UnschedulablePatch(true, rv));
  EXPECT_TRUE(IsConflict(stale.status())) << stale.status();

  // Merge-patch cordon with the current RV works.
  auto cordon = client_->Patch(kNodes, "", "n1", PatchType::kMerge,
                               UnschedulablePatch(true, after->meta.resource_version));
  ASSERT_TRUE(cordon.ok()) << cordon.status();
  EXPECT_TRUE(ParseObject<Node>(*cordon)->unschedulable);

  // Status subresource: condition via SMP on nodes/status.
  NodeCondition cond{"GPUHealthy", "False", "XidError", "Xid 79", std::nullopt, std::nullopt};
  auto st = client_->Patch(kNodes, "", "n1", PatchType::kStrategicMerge, NodeConditionPatch(cond),
                           "status");
  ASSERT_TRUE(st.ok()) << st.status();
  auto with_cond = ParseObject<Node>(*st);
  ASSERT_TRUE(with_cond.ok());
  ASSERT_NE(with_cond->FindCondition("GPUHealthy"), nullptr);
  EXPECT_EQ(with_cond->FindCondition("GPUHealthy")->reason, "XidError");

  EXPECT_TRUE(IsNotFound(client_->Get(kNodes, "", "nope").status()));
}

TEST_F(SimTest, LeaseCreateUpdateConflict) {
  Lease l;
  l.meta.name = "op";
  l.meta.namespace_ = "default";
  l.holder_identity = "a";
  l.lease_duration_seconds = 15;
  l.renew_time = RealClock::Default().Now();
  auto created = client_->Create(kLeases, "default", LeaseBody(l));
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(client_->Create(kLeases, "default", LeaseBody(l)).status().code(),
            StatusCode::kAlreadyExists);
  auto got = ParseObject<Lease>(*created);
  ASSERT_TRUE(got.ok());
  Lease upd = *got;
  upd.holder_identity = "b";
  auto ok = client_->Update(kLeases, "default", "op", LeaseBody(upd));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ParseObject<Lease>(*ok)->holder_identity, "b");
  // Same (now stale) resourceVersion again → Conflict.
  upd.holder_identity = "c";
  auto conflict = client_->Update(kLeases, "default", "op", LeaseBody(upd));
  EXPECT_TRUE(IsConflict(conflict.status())) << conflict.status();
  ASSERT_TRUE(client_->Delete(kLeases, "default", "op").ok());
  EXPECT_TRUE(IsNotFound(client_->Get(kLeases, "default", "op").status()));
}

TEST_F(SimTest, PagedListAndWatchResume) {
  for (int i = 0; i < 7; ++i)
    ASSERT_TRUE(sim_->Create("/api/v1/nodes", NodeJson("n" + std::to_string(i))).ok());
  ListOptions lo;
  lo.limit = 3;
  int pages = 0;
  std::vector<std::string> names;
  std::string list_rv;
  Status st = client_->ListPages(kNodes, "", lo, [&](std::string& body) -> StatusOr<ListPageInfo> {
    ++pages;
    auto l = ParseList<Node>(body);
    if (!l.ok()) return l.status();
    for (auto& n : l->items) names.push_back(n.meta.name);
    if (list_rv.empty()) list_rv = l->resource_version;
    return ListPageInfo{l->resource_version, l->continue_token};
  });
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(names.size(), 7u);

  // Watch from the list RV sees only later changes.
  std::atomic<int> modified{0};
  std::stop_source stop;
  std::thread writer([&] {
    (void)sim_->MergePatch("/api/v1/nodes/n3", {{"spec", {{"unschedulable", true}}}});
  });
  WatchOptions wo;
  wo.resource_version = list_rv;
  wo.timeout_seconds = 30;
  Status w = client_->Watch(
      kNodes, "", wo,
      [&](std::string_view line) {
        auto ev = ParseWatchEvent<Node>(line, true);
        EXPECT_TRUE(ev.ok()) << ev.status();
        if (ev.ok() && ev->type == WatchEventType::kModified) {
          EXPECT_EQ(ev->object.meta.name, "n3");
          EXPECT_TRUE(ev->object.unschedulable);
          ++modified;
          return false;  // done
        }
        EXPECT_NE(ev->type, WatchEventType::kAdded);
        return true;
      },
      stop.get_token());
  writer.join();
  EXPECT_TRUE(w.ok()) << w;
  EXPECT_EQ(modified.load(), 1);

  // After compaction, resuming from the old RV is 410 Expired.
  sim_->CompactHistory();
  Status expired = client_->Watch(kNodes, "", wo, [](std::string_view) { return true; }, {});
  EXPECT_TRUE(IsExpired(expired)) << expired;
}

// A coalesced watch (read_coalesce) still hands over every event, in order; a stop cuts the
// window short (a 10 s window here: waiting it out would show as a 10 s Watch).
TEST_F(SimTest, CoalescedWatchDeliversEveryEventInOrderAndStopsInsideTheWindow) {
  ASSERT_TRUE(sim_->Create("/api/v1/nodes", NodeJson("n0")).ok());
  auto listed = client_->List(kNodes, "");
  ASSERT_TRUE(listed.ok()) << listed.status();
  auto l = ParseList<Node>(*listed);
  ASSERT_TRUE(l.ok()) << l.status();
  constexpr int kPatches = 200;
  auto patch = [&](int gen) {
    return sim_->MergePatch("/api/v1/nodes/n0",
                            {{"metadata", {{"labels", {{"gen", std::to_string(gen)}}}}}});
  };
  for (const auto window : {std::chrono::milliseconds(20), std::chrono::milliseconds(10000)}) {
    SCOPED_TRACE(window.count());
    std::vector<int> seen;
    std::stop_source stop;
    std::thread stopper;
    std::thread writer([&] {
      for (int i = 0; i < kPatches; ++i) ASSERT_TRUE(patch(i).ok());
    });
    WatchOptions wo;
    wo.resource_version = l->resource_version;
    wo.timeout_seconds = 60;
    wo.read_coalesce = window;
    const auto t0 = std::chrono::steady_clock::now();
    if (window.count() > 1000) {
      // The patches' events came in reads close together, so by now the stream is waiting
      // out its window: the stop has to cut it short.
      stopper = std::thread([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        stop.request_stop();
      });
    }
    Status w = client_->Watch(
        kNodes, "", wo,
        [&](std::string_view line) {
          auto ev = ParseWatchEvent<Node>(line, true);
          EXPECT_TRUE(ev.ok()) << ev.status();
          if (!ev.ok() || ev->type != WatchEventType::kModified) return true;
          seen.push_back(std::stoi(std::string(ev->object.meta.labels.Get("gen").value_or("-1"))));
          return window.count() > 1000 || seen.size() < kPatches;
        },
        stop.get_token());
    const auto took = std::chrono::steady_clock::now() - t0;
    writer.join();
    if (stopper.joinable()) stopper.join();
    if (window.count() > 1000) {
      EXPECT_EQ(w.code(), StatusCode::kCancelled) << w;
      EXPECT_LT(took, std::chrono::seconds(5)) << "the stop waited out the window";
    } else {
      EXPECT_TRUE(w.ok()) << w;
      ASSERT_EQ(seen.size(), static_cast<std::size_t>(kPatches));
      for (int i = 0; i < kPatches; ++i) EXPECT_EQ(seen[i], i);
    }
    auto now = client_->List(kNodes, "");
    ASSERT_TRUE(now.ok());
    l = ParseList<Node>(*now);
    ASSERT_TRUE(l.ok());
  }
}

// A simulator serving HTTPS with node n1 (no kubelet, scheduler or controllers).
StatusOr<std::unique_ptr<gg::sim::SimServer>> StartTlsSim() {
  gg::sim::SimOptions o;
  o.tls = true;
  o.kubelet = o.scheduler = o.controllers = false;
  auto s = gg::sim::SimServer::Start(o);
  if (s.ok()) {
    EXPECT_TRUE((*s)->Create("/api/v1/nodes", NodeJson("n1")).ok());
  }
  return s;
}

TEST(SimTlsTest, VerifiesTheServerCertificate) {
  auto s = StartTlsSim();
  if (!s.ok()) GTEST_SKIP() << "simulator TLS unavailable: " << s.status();
  ClientConfig cfg;
  cfg.server = (*s)->Url();
  ASSERT_EQ(cfg.server.rfind("https://", 0), 0u);
  RestClientOptions ro;
  ro.max_attempts = 1;
  // Default trust store: the simulator's throwaway CA is not trusted → refused.
  auto untrusted = RestClient::Create(cfg, RealClock::Default(), ro);
  ASSERT_TRUE(untrusted.ok());
  auto r = (*untrusted)->Get(kNodes, "", "n1");
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status();
  // With its CA: works.
  cfg.ca_pem = (*s)->CaCertPem();
  auto trusted = RestClient::Create(cfg, RealClock::Default(), ro);
  ASSERT_TRUE(trusted.ok());
  auto ok = (*trusted)->Get(kNodes, "", "n1");
  EXPECT_TRUE(ok.ok()) << ok.status();
  // insecure-skip-tls-verify only when asked.
  ClientConfig insecure;
  insecure.server = (*s)->Url();
  insecure.insecure_skip_tls_verify = true;
  auto skip = RestClient::Create(insecure, RealClock::Default(), ro);
  ASSERT_TRUE(skip.ok());
  EXPECT_TRUE((*skip)->Get(kNodes, "", "n1").ok());
}

// A watch over TLS streams events as they happen (the stream loop reads through OpenSSL).
TEST(SimTlsTest, WatchStreamsEventsOverTls) {
  auto s = StartTlsSim();
  if (!s.ok()) GTEST_SKIP() << "simulator TLS unavailable: " << s.status();
  ClientConfig cfg;
  cfg.server = (*s)->Url();
  cfg.ca_pem = (*s)->CaCertPem();
  auto c = RestClient::Create(cfg, RealClock::Default());
  ASSERT_TRUE(c.ok()) << c.status();
  auto body = (*c)->Get(kNodes, "", "n1");
  ASSERT_TRUE(body.ok()) << body.status();
  auto node = ParseObject<Node>(*body);
  ASSERT_TRUE(node.ok()) << node.status();
  std::thread writer([&] {
    for (int i = 0; i < 3; ++i) {
      nlohmann::json patch = {{"metadata", {{"labels", {{"step", std::to_string(i)}}}}}};
      EXPECT_TRUE((*s)->MergePatch("/api/v1/nodes/n1", patch).ok());
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
    }
  });
  WatchOptions wo;
  wo.resource_version = node->meta.resource_version;
  std::vector<std::string> steps;
  Status w =
      (*c)->Watch(kNodes, "", wo,
                  [&](std::string_view line) {
                    auto ev = ParseWatchEvent<Node>(line, true);
                    EXPECT_TRUE(ev.ok()) << ev.status();
                    if (ev.ok() && ev->type == WatchEventType::kModified) {
                      steps.push_back(std::string(ev->object.meta.labels.Get("step").value_or("")));
                    }
                    return steps.size() < 3;
                  },
                  {});
  writer.join();
  EXPECT_TRUE(w.ok()) << w;
  EXPECT_EQ(steps, (std::vector<std::string>{"0", "1", "2"}));
}

}  // namespace
}  // namespace gg::k8s
