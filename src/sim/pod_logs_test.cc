// CRI log parsing/rendering for pods/log, and the pod runner's pure helpers.
#include "sim/pod_logs.h"

#include <gtest/gtest.h>

#include "sim/pod_runner.h"

namespace gg::sim {
namespace {

constexpr char kLog[] =
    "2026-12-01T10:00:00.000000001Z stdout F first line\n"
    "2026-12-01T10:00:01.000000000Z stderr P part one, \n"
    "2026-12-01T10:00:01.500000000Z stderr F part two\n"
    "2026-12-01T10:00:02.000000000Z stdout F last\n"
    "2026-12-01T10:00:03.000000000Z stdout F incomple";  // no newline yet

TEST(PodLogs, ParsesRecordsJoiningPartials) {
  size_t used = 0;
  auto lines = ParseCriLog(kLog, &used);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].text, "first line");
  EXPECT_EQ(lines[1].text, "part one, part two");
  EXPECT_EQ(lines[1].timestamp, "2026-12-01T10:00:01.000000000Z");
  EXPECT_EQ(lines[2].text, "last");
  EXPECT_EQ(std::string(kLog).substr(used), "2026-12-01T10:00:03.000000000Z stdout F incomple");
}

TEST(PodLogs, RendersTailTimestampsAndLimit) {
  auto lines = ParseCriLog(kLog);
  EXPECT_EQ(RenderLog(lines, {}), "first line\npart one, part two\nlast\n");
  LogQuery q;
  q.tail_lines = 2;
  q.timestamps = true;
  EXPECT_EQ(
      RenderLog(lines, q),
      "2026-12-01T10:00:01.000000000Z part one, part two\n2026-12-01T10:00:02.000000000Z last\n");
  LogQuery lim;
  lim.limit_bytes = 5;
  EXPECT_EQ(RenderLog(lines, lim), "first");
  LogQuery zero;
  zero.tail_lines = 0;
  EXPECT_EQ(RenderLog(lines, zero), "");
  LogQuery since;
  since.since_seconds = 60;  // the records are from long ago
  EXPECT_EQ(RenderLog(lines, since), "");
  LogQuery at;
  at.since_time = ParseRfc3339Seconds("2026-12-01T10:00:01Z");
  EXPECT_EQ(RenderLog(lines, at), "part one, part two\nlast\n");
  EXPECT_FALSE(ParseRfc3339Seconds("yesterday").has_value());
}

TEST(PodRunnerHelpers, ImageBaseNames) {
  EXPECT_EQ(ImageBaseName("ghcr.io/gpu-guardian/gpu-guardian-operator:0.1.0"),
            "gpu-guardian-operator");
  EXPECT_EQ(ImageBaseName("localhost:5000/sh"), "sh");
  EXPECT_EQ(ImageBaseName("busybox"), "busybox");
  EXPECT_EQ(ImageBaseName("repo/agent@sha256:abcd"), "agent");
}

TEST(PodRunnerHelpers, ExpandsVariablesAsTheKubeletDoes) {
  std::map<std::string, std::string> vars = {{"A", "1"}, {"NODE", "dgx-3"}};
  EXPECT_EQ(ExpandVars("$(A)-$(NODE)", vars), "1-dgx-3");
  EXPECT_EQ(ExpandVars("$$(A) $(MISSING) $", vars), "$(A) $(MISSING) $");
  EXPECT_EQ(ExpandVars("no refs", vars), "no refs");
}

}  // namespace
}  // namespace gg::sim
