// KmsgReader: follows /dev/kmsg (from the end by default, or from boot) on a jthread, parses
// NVIDIA lines with ParseKmsgLine and hands Xids to a callback. Handles EPIPE (records
// overwritten: counted, reading resumes) and rate-limits floods without losing counts: over
// the limit, occurrences are aggregated per (xid, pci) and delivered as one callback with a
// count and no message text at the end of the window.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>

#include "common/clock.h"
#include "common/status.h"
#include "gpu/kmsg_parser.h"

namespace gg::gpu {

// The file being followed. /dev/kmsg returns one record per read(); a pipe or regular file
// returns arbitrary chunks — the reader splits on '\n' either way.
class KmsgFile {
 public:
  enum class ReadStatus { kData, kAgain, kOverrun, kEof, kError };
  struct ReadResult {
    ReadStatus status = ReadStatus::kAgain;
    size_t bytes = 0;
    int error = 0;  // errno for kError
  };
  virtual ~KmsgFile() = default;
  virtual ReadResult Read(std::span<char> buf) = 0;
  // Waits until readable or `timeout`; false on timeout.
  virtual bool WaitReadable(std::chrono::milliseconds timeout) = 0;
};

// Opens a path non-blocking ("/dev/kmsg", a FIFO, a regular file). `from_end`: lseek SEEK_END
// first (kmsg: skip history). kEof from a regular file is treated as "no more yet" (tail -f).
// Anything else (a directory, a socket, a block device) is Unavailable, naming what it is.
StatusOr<std::unique_ptr<KmsgFile>> OpenKmsgFile(const std::string& path, bool from_end);
// Wraps an already-open fd (tests: the read end of a pipe); sets O_NONBLOCK. Takes ownership.
std::unique_ptr<KmsgFile> KmsgFileFromFd(int fd);

class KmsgReader {
 public:
  struct Options {
    int max_callbacks_per_window = 100;  // detailed callbacks per window; the rest aggregate
    std::chrono::milliseconds window{1000};
    std::chrono::milliseconds poll{100};  // stop-token latency while idle
  };
  struct Stats {
    uint64_t lines = 0;           // log lines seen
    uint64_t xids = 0;            // Xid/SXid lines parsed
    uint64_t suppressed = 0;      // Xids folded into aggregate callbacks (text dropped)
    uint64_t overruns = 0;        // EPIPE: kernel overwrote unread records
    uint64_t missed_records = 0;  // gaps in kmsg sequence numbers
    uint64_t read_errors = 0;
  };
  // `count` is 1 for a detailed callback, N for an aggregate (then x.message is empty).
  using Callback = std::function<void(const KmsgXid& x, int64_t count)>;

  KmsgReader(std::unique_ptr<KmsgFile> file, Clock& clock, Options options, Callback cb);
  ~KmsgReader();  // Stop()
  KmsgReader(const KmsgReader&) = delete;
  KmsgReader& operator=(const KmsgReader&) = delete;

  void Start();  // reading thread
  void Stop();   // flushes pending aggregates

  // One-shot: reads synchronously until the log has nothing more to give now (kmsg/FIFO:
  // EAGAIN; regular file: EOF), delivering every Xid (floods aggregated, counts kept) before
  // returning. Not with a running reader. A read error ends it: Unavailable with the errno.
  Status ReadToEnd(std::stop_token stop = {});

  // Processes bytes as if read from the file (the read loop uses it; benchmarks/tests may
  // call it directly without Start()). Not thread-safe with a running reader.
  void Feed(std::string_view bytes);
  void FlushAggregates();  // delivers pending aggregate counts now

  Stats stats() const;
  bool healthy() const { return healthy_.load(); }
  std::string last_error() const;

 private:
  void Loop(std::stop_token stop);
  void HandleLine(std::string_view line);
  void Deliver(const KmsgXid& x);

  std::unique_ptr<KmsgFile> file_;
  Clock& clock_;
  Options options_;
  Callback cb_;
  std::string partial_;
  std::string buf_;
  MonoTime window_start_{};
  int window_count_ = 0;
  std::optional<uint64_t> last_seq_;
  std::string fallen_pci_;  // from a split "NVRM: The NVIDIA GPU <pci>" line
  struct Pending {
    KmsgXid sample;
    int64_t count = 0;
  };
  std::map<std::pair<int, std::string>, Pending> pending_;  // (xid|sxid<<31, pci) -> agg
  std::atomic<uint64_t> lines_{0}, xids_{0}, suppressed_{0}, overruns_{0}, missed_{0},
      read_errors_{0};
  mutable std::mutex error_mu_;
  std::string last_error_;
  std::mutex sleep_mu_;
  std::condition_variable_any sleep_cv_;
  std::atomic<bool> healthy_{true};
  std::jthread thread_;
};

}  // namespace gg::gpu
