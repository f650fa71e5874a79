// KmsgReader: pipe following, partial lines, overruns, sequence gaps, flood aggregation.
#include "gpu/kmsg_reader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <deque>
#include <mutex>
#include <thread>

namespace gg::gpu {
namespace {

using std::chrono::milliseconds;

template <typename Pred>
bool WaitFor(Pred p, milliseconds limit = milliseconds(10000)) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (p()) return true;
    std::this_thread::sleep_for(milliseconds(2));
  }
  return p();
}

struct Seen {
  std::mutex mu;
  std::vector<std::pair<KmsgXid, int64_t>> items;
  KmsgReader::Callback Callback() {
    return [this](const KmsgXid& x, int64_t n) {
      std::scoped_lock lock(mu);
      items.emplace_back(x, n);
    };
  }
  int64_t Total() {
    std::scoped_lock lock(mu);
    int64_t t = 0;
    for (auto& [x, n] : items) t += n;
    return t;
  }
  size_t size() {
    std::scoped_lock lock(mu);
    return items.size();
  }
};

// A scripted KmsgFile: returns queued results one per Read.
class ScriptedFile : public KmsgFile {
 public:
  void Push(ReadStatus s, std::string data = {}) {
    std::scoped_lock lock(mu_);
    q_.push_back({s, std::move(data)});
  }
  ReadResult Read(std::span<char> buf) override {
    std::scoped_lock lock(mu_);
    if (q_.empty()) return {ReadStatus::kAgain, 0, 0};
    auto [s, data] = std::move(q_.front());
    q_.pop_front();
    size_t n = std::min(buf.size(), data.size());
    std::copy_n(data.data(), n, buf.data());
    return {s, n, s == ReadStatus::kError ? 5 : 0};
  }
  bool WaitReadable(std::chrono::milliseconds) override {
    std::this_thread::sleep_for(milliseconds(1));
    return true;
  }

 private:
  std::mutex mu_;
  std::deque<std::pair<ReadStatus, std::string>> q_;
};

TEST(KmsgReaderTest, FollowsAPipeWithPartialLines) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  FakeClock clock;
  Seen seen;
  KmsgReader reader(KmsgFileFromFd(fds[0]), clock, {}, seen.Callback());
  reader.Start();
  std::string a = "6,1,100,-;usb 1-1: new device\n4,2,200,-;NVRM: Xid (PCI:0000:3b:00): 7";
  std::string b = "9, pid=1, name=x, GPU has fallen off the bus.\n SUBSYSTEM=pci\n";
  ASSERT_EQ(write(fds[1], a.data(), a.size()), static_cast<ssize_t>(a.size()));
  std::this_thread::sleep_for(milliseconds(20));
  ASSERT_EQ(write(fds[1], b.data(), b.size()), static_cast<ssize_t>(b.size()));
  ASSERT_TRUE(WaitFor([&] { return seen.size() == 1; }));
  {
    std::scoped_lock lock(seen.mu);
    EXPECT_EQ(seen.items[0].first.xid, 79);
    EXPECT_EQ(seen.items[0].first.pid, 1);
    EXPECT_EQ(seen.items[0].second, 1);
  }
  reader.Stop();
  close(fds[1]);
  EXPECT_EQ(reader.stats().lines, 2u);
  EXPECT_EQ(reader.stats().xids, 1u);
}

TEST(KmsgReaderTest, OverrunsAndSequenceGapsAreCounted) {
  auto file = std::make_unique<ScriptedFile>();
  ScriptedFile* f = file.get();
  f->Push(KmsgFile::ReadStatus::kData, "4,10,1,-;hello\n");
  f->Push(KmsgFile::ReadStatus::kOverrun);
  f->Push(KmsgFile::ReadStatus::kData, "4,15,2,-;NVRM: Xid (PCI:0000:3b:00): 48, DBE\n");
  FakeClock clock;
  Seen seen;
  KmsgReader reader(std::move(file), clock, {}, seen.Callback());
  reader.Start();
  ASSERT_TRUE(WaitFor([&] { return seen.size() == 1; }));
  reader.Stop();
  EXPECT_EQ(reader.stats().overruns, 1u);
  EXPECT_EQ(reader.stats().missed_records, 4u);
}

TEST(KmsgReaderTest, ReadErrorsMarkUnhealthy) {
  auto file = std::make_unique<ScriptedFile>();
  file->Push(KmsgFile::ReadStatus::kError);
  FakeClock clock;
  KmsgReader reader(std::move(file), clock, {}, nullptr);
  reader.Start();
  ASSERT_TRUE(WaitFor([&] { return reader.stats().read_errors == 1; }));
  EXPECT_FALSE(reader.healthy());
  EXPECT_FALSE(reader.last_error().empty());
  reader.Stop();
}

TEST(KmsgReaderTest, FloodIsAggregatedWithoutLosingCounts) {
  FakeClock clock;
  Seen seen;
  KmsgReader::Options o;
  o.max_callbacks_per_window = 10;
  o.window = std::chrono::seconds(1);
  KmsgReader reader(nullptr, clock, o, seen.Callback());
  std::string flood;
  for (int i = 0; i < 5000; ++i) {
    flood += "3," + std::to_string(i) +
             ",1,-;NVRM: Xid (PCI:0000:3b:00): 13, pid=1, name=a, Graphics exception\n";
    if (i % 2 == 0) flood += "3,x,1,-;NVRM: Xid (PCI:0000:3c:00): 31, pid=2, name=b, MMU fault\n";
    flood += "6,y,1,-;some other driver chatter\n";
  }
  reader.Feed(flood);
  EXPECT_EQ(seen.size(), 10u);  // detailed callbacks only
  clock.Advance(std::chrono::seconds(2));
  reader.Feed("4,1,1,-;NVRM: Xid (PCI:0000:3b:00): 79, next window\n");  // rolls the window
  EXPECT_EQ(seen.Total(), 5000 + 2500 + 1);
  EXPECT_EQ(reader.stats().suppressed, 7500u - 10u);
  {
    std::scoped_lock lock(seen.mu);
    // Aggregates carry the count and no text.
    bool found = false;
    for (auto& [x, n] : seen.items) {
      if (n > 1 && x.xid == 31) {
        found = true;
        EXPECT_TRUE(x.message.empty());
        EXPECT_EQ(x.pci_bus_id, "0000:3c:00.0");
      }
    }
    EXPECT_TRUE(found);
  }
}

TEST(KmsgReaderTest, SplitFallenOffTheBusLines) {
  FakeClock clock;
  Seen seen;
  KmsgReader reader(nullptr, clock, {}, seen.Callback());
  reader.Feed(
      "[ 10.0] NVRM: The NVIDIA GPU 0000:b3:00.0\n"
      "[ 10.0] NVRM: (PCI ID: 10de:26b5) installed in this system has\n"
      "[ 10.0] NVRM: fallen off the bus and is not responding to commands.\n");
  ASSERT_EQ(seen.size(), 1u);
  std::scoped_lock lock(seen.mu);
  EXPECT_EQ(seen.items[0].first.xid, 79);
  EXPECT_TRUE(seen.items[0].first.fallen_off_bus);
  EXPECT_EQ(seen.items[0].first.pci_bus_id, "0000:b3:00.0");
}

TEST(KmsgReaderTest, OpenMissingFileIsAnError) {
  auto f = OpenKmsgFile("/nonexistent/kmsg", true);
  EXPECT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kUnavailable);
}

// One-shot reads (agent --once): everything up to the current end, floods aggregated with
// their counts, a last line without a newline included; a pipe's writer still open is "the
// end for now", not a hang.
TEST(KmsgReader, ReadToEndDeliversEveryXidOnce) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  std::string log;
  for (int i = 0; i < 250; ++i)
    log += "4," + std::to_string(i) + ",1,-;NVRM: Xid (PCI:0000:3b:00): 13, pid=1, Graphics\n";
  log += "4,250,1,-;NVRM: Xid (PCI:0000:55:00): 79, pid=1, GPU has fallen off the bus.";
  ASSERT_EQ(write(fds[1], log.data(), log.size()), static_cast<ssize_t>(log.size()));
  Seen seen;
  KmsgReader reader(KmsgFileFromFd(fds[0]), RealClock::Default(), {}, seen.Callback());
  ASSERT_TRUE(reader.ReadToEnd().ok());
  EXPECT_EQ(seen.Total(), 251);
  bool saw79 = false;
  {
    std::scoped_lock lock(seen.mu);
    for (auto& [x, n] : seen.items) saw79 |= x.xid == 79;
    EXPECT_LT(seen.items.size(), 251u);  // the flood came in aggregates
  }
  EXPECT_TRUE(saw79);
  close(fds[1]);
}

TEST(KmsgReader, ADirectoryIsNotAKernelLog) {
  auto f = OpenKmsgFile("/tmp", false);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(f.status().message().find("a directory"), std::string::npos) << f.status();
}

}  // namespace
}  // namespace gg::gpu
