// Unit tests for the registry: exposition golden text, escaping, histograms, concurrency,
// process metrics from a fake procfs.
#include "metrics/registry.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <thread>
#include <vector>

namespace gg::metrics {
namespace {

TEST(FormatValue, Floats) {
  EXPECT_EQ(FormatValue(0), "0");
  EXPECT_EQ(FormatValue(1), "1");
  EXPECT_EQ(FormatValue(-3), "-3");
  EXPECT_EQ(FormatValue(0.005), "0.005");
  EXPECT_EQ(FormatValue(2.5), "2.5");
  EXPECT_EQ(FormatValue(1e-9), "1e-09");
  EXPECT_EQ(FormatValue(123456789), "123456789");
  EXPECT_EQ(FormatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatValue(std::numeric_limits<double>::quiet_NaN()), "NaN");
  EXPECT_EQ(std::stod(FormatValue(0.1 + 0.2)), 0.1 + 0.2);  // round-trips
}

TEST(Escaping, LabelValuesAndHelp) {
  EXPECT_EQ(EscapeLabelValue(R"(a\b"c)"
                             "\n"
                             "d"),
            R"(a\\b\"c\nd)");
  EXPECT_EQ(EscapeHelp("say \"hi\"\\\nnext"), "say \"hi\"\\\\\\nnext");
}

TEST(Names, Validation) {
  EXPECT_TRUE(IsValidMetricName("workqueue_depth"));
  EXPECT_TRUE(IsValidMetricName("a:b_c1"));
  EXPECT_FALSE(IsValidMetricName("1abc"));
  EXPECT_FALSE(IsValidMetricName("a-b"));
  EXPECT_FALSE(IsValidMetricName(""));
  EXPECT_TRUE(IsValidLabelName("node"));
  EXPECT_FALSE(IsValidLabelName("__name"));
  EXPECT_FALSE(IsValidLabelName("a:b"));
}

TEST(Registry, GoldenExposition) {
  Registry r;
  auto& c = r.AddCounter("gg_requests_total", "Requests by code.\nSecond line \\ here.",
                         {"code", "path"});
  c.WithLabels({"200", "/a"}).Inc();
  c.WithLabels({"200", "/a"}).Inc(2);
  c.WithLabels({"500", "quote\"back\\slash\nnl"}).Inc(0);  // created at zero
  auto& g = r.AddGauge("gg_temperature", "A gauge.");
  g.WithLabels({}).Set(-1.5);
  auto& h = r.AddHistogram("gg_latency_seconds", "Latency.", {"op"}, {0.1, 1});
  auto& get = h.WithLabels({"get"});
  get.Observe(0.05);
  get.Observe(0.1);  // le is inclusive
  get.Observe(0.5);
  get.Observe(7);
  const std::string want =
      "# HELP gg_latency_seconds Latency.\n"
      "# TYPE gg_latency_seconds histogram\n"
      "gg_latency_seconds_bucket{op=\"get\",le=\"0.1\"} 2\n"
      "gg_latency_seconds_bucket{op=\"get\",le=\"1\"} 3\n"
      "gg_latency_seconds_bucket{op=\"get\",le=\"+Inf\"} 4\n"
      "gg_latency_seconds_sum{op=\"get\"} 7.65\n"
      "gg_latency_seconds_count{op=\"get\"} 4\n"
      "# HELP gg_requests_total Requests by code.\\nSecond line \\\\ here.\n"
      "# TYPE gg_requests_total counter\n"
      "gg_requests_total{code=\"200\",path=\"/a\"} 3\n"
      "gg_requests_total{code=\"500\",path=\"quote\\\"back\\\\slash\\nnl\"} 0\n"
      "# HELP gg_temperature A gauge.\n"
      "# TYPE gg_temperature gauge\n"
      "gg_temperature -1.5\n";
  EXPECT_EQ(r.ExposeText(), want);
}

TEST(Registry, HistogramWithoutLabelsAndInfinities) {
  Registry r;
  auto& h = r.AddHistogram("h", "H.", {}, {1, 0.5, 1, std::numeric_limits<double>::infinity()});
  EXPECT_EQ(h.buckets(), (std::vector<double>{0.5, 1}));  // sorted, de-duplicated, finite
  auto& s = h.WithLabels({});
  s.Observe(std::numeric_limits<double>::infinity());
  s.Observe(std::numeric_limits<double>::quiet_NaN());  // ignored
  const std::string text = r.ExposeText();
  EXPECT_NE(text.find("h_bucket{le=\"0.5\"} 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("h_bucket{le=\"+Inf\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("h_sum +Inf\n"), std::string::npos) << text;
  EXPECT_NE(text.find("h_count 1\n"), std::string::npos) << text;
}

TEST(Registry, GaugeOpsAndCallbacks) {
  Registry r;
  auto& g = r.AddGauge("g", "G.", {"k"}).WithLabels({"x"});
  g.Inc();
  g.Inc(2);
  g.Dec(0.5);
  EXPECT_DOUBLE_EQ(g.Value(), 2.5);
  double backing = 42;
  g.SetCallback([&] { return backing; });
  EXPECT_DOUBLE_EQ(r.Value("g", {"x"}), 42);
  backing = 43;
  EXPECT_NE(r.ExposeText().find("g{k=\"x\"} 43\n"), std::string::npos);
  g.SetCallback(nullptr);
  EXPECT_DOUBLE_EQ(g.Value(), 2.5);
  r.AddCallback("cb_total", "Callback counter.", MetricType::kCounter, [] { return 7.0; });
  EXPECT_NE(r.ExposeText().find("# TYPE cb_total counter\ncb_total 7\n"), std::string::npos);
}

TEST(Registry, CounterIgnoresNegativeAndNaN) {
  Registry r;
  auto& c = r.AddCounter("c_total", "C.").WithLabels({});
  c.Inc(-1);
  c.Inc(std::numeric_limits<double>::quiet_NaN());
  c.Inc(0.5);
  EXPECT_DOUBLE_EQ(c.Value(), 0.5);
}

TEST(Registry, RedeclareReturnsSameFamilyAndConflictsAreDetached) {
  Registry r;
  auto& a = r.AddCounter("x_total", "X.", {"name"});
  auto& b = r.AddCounter("x_total", "X.", {"name"});
  EXPECT_EQ(&a, &b);
  auto& clash = r.AddGauge("x_total", "X as a gauge.", {"name"});
  clash.WithLabels({"q"}).Set(5);
  auto& bad = r.AddCounter("bad-name", "Bad.");
  bad.WithLabels({}).Inc();
  auto& wrong_arity = a.WithLabels({"a", "b"});  // detached, not exposed
  wrong_arity.Inc();
  const std::string text = r.ExposeText();
  EXPECT_EQ(text.find("gauge"), std::string::npos) << text;
  EXPECT_EQ(text.find("bad-name"), std::string::npos) << text;
  EXPECT_EQ(text.find("x_total{"), std::string::npos) << text;
  EXPECT_EQ(text, "# HELP x_total X.\n# TYPE x_total counter\n");
}

TEST(Registry, RemoveSeries) {
  Registry r;
  auto& f = r.AddGauge("node_healthy", "Node health.", {"node"});
  f.WithLabels({"a"}).Set(1);
  f.WithLabels({"b"}).Set(0);
  EXPECT_TRUE(f.Remove({"a"}));
  EXPECT_FALSE(f.Remove({"a"}));
  EXPECT_EQ(f.Series().size(), 1u);
  EXPECT_TRUE(std::isnan(r.Value("node_healthy", {"a"})));
}

TEST(Registry, KeyedGaugeKeepsOneSortedSeriesPerKey) {
  Registry r;
  auto& f = r.AddKeyedGauge("node_healthy", "Node health.", "node");
  EXPECT_EQ(&r.AddKeyedGauge("node_healthy", "Node health.", "node"), &f) << "redeclared: same";
  f.Set("node-b", 1);
  f.Set("node-c", 0);
  f.Set("node-a", -1);  // sorts first: inserted before the others
  f.Set("node-c", 1);   // an update, not a second series
  EXPECT_EQ(f.Size(), 3u);
  EXPECT_EQ(r.Value("node_healthy", {"node-a"}), -1);
  EXPECT_EQ(r.Value("node_healthy", {"node-c"}), 1);
  EXPECT_TRUE(std::isnan(r.Value("node_healthy", {"node-d"})));
  EXPECT_EQ(r.ExposeText(),
            "# HELP node_healthy Node health.\n# TYPE node_healthy gauge\n"
            "node_healthy{node=\"node-a\"} -1\nnode_healthy{node=\"node-b\"} 1\n"
            "node_healthy{node=\"node-c\"} 1\n");
  EXPECT_TRUE(f.Remove("node-b"));
  EXPECT_FALSE(f.Remove("node-b"));
  EXPECT_FALSE(f.Get("node-b").has_value());
  EXPECT_EQ(f.Get("node-c"), 1);
  // The name is taken: a plain gauge family of it is detached, not exposed twice.
  r.AddGauge("node_healthy", "Node health.", {"node"}).WithLabels({"x"}).Set(5);
  EXPECT_EQ(r.ExposeText().find("node=\"x\""), std::string::npos);
}

TEST(Buckets, Helpers) {
  EXPECT_EQ(DefaultBuckets().size(), 11u);
  EXPECT_EQ(ExponentialBuckets(0.001, 10, 4), (std::vector<double>{0.001, 0.01, 0.1, 1}));
  EXPECT_EQ(LinearBuckets(1, 2, 3), (std::vector<double>{1, 3, 5}));
  EXPECT_EQ(ExponentialBuckets(0, 2, 3), DefaultBuckets());  // invalid → default
}

TEST(Registry, ConcurrentIncrementsAreNotLost) {
  Registry r;
  auto& fam = r.AddCounter("hits_total", "Hits.", {"worker"});
  auto& h = r.AddHistogram("obs", "Obs.", {}, {0.5}).WithLabels({});
  constexpr int kThreads = 4;
  constexpr int kPerThread = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto& mine = fam.WithLabels({std::to_string(t % 2)});
      for (int i = 0; i < kPerThread; ++i) {
        mine.Inc();
        h.Observe(i % 2 ? 1.0 : 0.0);
        if (i % 1000 == 0) (void)r.ExposeText();  // scrapes during updates
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_DOUBLE_EQ(r.Value("hits_total", {"0"}) + r.Value("hits_total", {"1"}),
                   kThreads * kPerThread);
  auto snap = h.Snap();
  EXPECT_EQ(snap.count, static_cast<std::uint64_t>(kThreads * kPerThread));
  EXPECT_EQ(snap.cumulative[0], static_cast<std::uint64_t>(kThreads * kPerThread / 2));
  EXPECT_DOUBLE_EQ(snap.sum, kThreads * kPerThread / 2);
}

class FakeProc : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::path(::testing::TempDir()) /
            ("fakeproc-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(root_ / "self" / "fd");
    for (int i = 0; i < 3; ++i) std::ofstream(root_ / "self" / "fd" / std::to_string(i)) << "";
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  void Write(const std::string& rel, const std::string& content) {
    std::ofstream(root_ / rel) << content;
  }
  std::filesystem::path root_;
};

TEST_F(FakeProc, ParsesStat) {
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  // The command name contains ") (" to check the parser splits at the last ')'.
  Write("self/stat",
        "77 (we ) ird) S 1 77 77 0 -1 4194304 99 0 0 0 250 150 0 0 20 0 1 0 500 "
        "3133440 360 18446744073709551615 0 0 0\n");
  Write("stat", "cpu 1 2 3\nbtime 1700000000\n");
  ProcessStats st = ReadProcessStats(root_.string());
  EXPECT_DOUBLE_EQ(st.cpu_seconds, 400 / ticks);
  EXPECT_DOUBLE_EQ(st.resident_bytes, 360 * page);
  EXPECT_DOUBLE_EQ(st.virtual_bytes, 3133440);
  EXPECT_DOUBLE_EQ(st.start_time_seconds, 1700000000 + 500 / ticks);
  EXPECT_DOUBLE_EQ(st.open_fds, 3);
}

TEST_F(FakeProc, GarbageIsNaNNotACrash) {
  Write("self/stat", "garbage without parens");
  ProcessStats st = ReadProcessStats(root_.string());
  EXPECT_TRUE(std::isnan(st.cpu_seconds));
  EXPECT_TRUE(std::isnan(st.resident_bytes));
  Write("self/stat", "1 (x) S 1 2 3 x y z");
  st = ReadProcessStats(root_.string());
  EXPECT_TRUE(std::isnan(st.start_time_seconds));
  st = ReadProcessStats((root_ / "missing").string());
  EXPECT_TRUE(std::isnan(st.open_fds));
}

TEST(ProcessMetrics, RealProcIsExposed) {
  Registry r;
  RegisterProcessMetrics(r);
  RegisterProcessMetrics(r);  // harmless twice
  EXPECT_GT(r.Value("process_resident_memory_bytes"), 0);
  EXPECT_GT(r.Value("process_start_time_seconds"), 1e9);
  EXPECT_GE(r.Value("process_cpu_seconds_total"), 0);
  EXPECT_NE(r.ExposeText().find("# TYPE process_cpu_seconds_total counter\n"), std::string::npos);
}

}  // namespace
}  // namespace gg::metrics
