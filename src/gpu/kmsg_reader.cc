// KmsgReader: /dev/kmsg follower with overrun handling and flood aggregation.
#include "gpu/kmsg_reader.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

namespace gg::gpu {
namespace {

constexpr size_t kReadBuffer = 8192;       // > the largest kmsg record (EINVAL otherwise)
constexpr size_t kMaxPartial = 64 * 1024;  // a "line" longer than this is garbage: dropped

class FdKmsgFile final : public KmsgFile {
 public:
  explicit FdKmsgFile(int fd) : fd_(fd) {}
  ~FdKmsgFile() override {
    if (fd_ >= 0) close(fd_);
  }
  ReadResult Read(std::span<char> buf) override {
    ssize_t n = read(fd_, buf.data(), buf.size());
    if (n > 0) return {ReadStatus::kData, static_cast<size_t>(n), 0};
    if (n == 0) return {ReadStatus::kEof, 0, 0};
    if (errno == EAGAIN || errno == EINTR) return {ReadStatus::kAgain, 0, 0};
    if (errno == EPIPE) return {ReadStatus::kOverrun, 0, 0};
    return {ReadStatus::kError, 0, errno};
  }
  bool WaitReadable(std::chrono::milliseconds timeout) override {
    pollfd p{fd_, POLLIN, 0};
    int r = poll(&p, 1, static_cast<int>(timeout.count()));
    return r > 0;
  }

 private:
  int fd_;
};

}  // namespace

StatusOr<std::unique_ptr<KmsgFile>> OpenKmsgFile(const std::string& path, bool from_end) {
  int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    if (e == EACCES || e == EPERM)
      return PermissionDeniedError(path + ": " + std::strerror(e) +
                                   " (needs CAP_SYSLOG when kernel.dmesg_restrict=1)");
    return UnavailableError(path + ": " + std::strerror(e));
  }
  // Only a character device (/dev/kmsg), a regular file or a FIFO is a log: a directory opens
  // fine and then fails every read, which must not pass for a quiet kernel log.
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return UnavailableError(path + ": " + std::strerror(e));
  }
  if (!S_ISCHR(st.st_mode) && !S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode)) {
    close(fd);
    const char* what = S_ISDIR(st.st_mode) ? "a directory" : "not a file or device";
    return UnavailableError(path + ": " + what +
                            ", not a kernel log (want /dev/kmsg, a regular file or a FIFO)");
  }
  if (from_end) (void)lseek(fd, 0, SEEK_END);  // pipes: ESPIPE, harmless
  return std::unique_ptr<KmsgFile>(std::make_unique<FdKmsgFile>(fd));
}

std::unique_ptr<KmsgFile> KmsgFileFromFd(int fd) {
  // The read loop relies on non-blocking reads so Stop() is prompt.
  int flags = fcntl(fd, F_GETFL, 0);
  if (flags >= 0) (void)fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  return std::make_unique<FdKmsgFile>(fd);
}

KmsgReader::KmsgReader(std::unique_ptr<KmsgFile> file, Clock& clock, Options options, Callback cb)
    : file_(std::move(file)), clock_(clock), options_(options), cb_(std::move(cb)) {
  buf_.resize(kReadBuffer);
  window_start_ = clock_.Monotonic();
}

KmsgReader::~KmsgReader() { Stop(); }

void KmsgReader::Start() {
  if (thread_.joinable() || !file_) return;
  thread_ = std::jthread([this](std::stop_token stop) { Loop(stop); });
}

void KmsgReader::Stop() {
  if (thread_.joinable()) {
    thread_.request_stop();
    sleep_cv_.notify_all();
    thread_.join();
  }
  FlushAggregates();
}

void KmsgReader::Loop(std::stop_token stop) {
  while (!stop.stop_requested()) {
    KmsgFile::ReadResult r = file_->Read(std::span<char>(buf_.data(), buf_.size()));
    switch (r.status) {
      case KmsgFile::ReadStatus::kData:
        Feed(std::string_view(buf_.data(), r.bytes));
        healthy_.store(true);
        continue;
      case KmsgFile::ReadStatus::kOverrun:
        // The kernel overwrote records we had not read; the position already moved on.
        overruns_.fetch_add(1);
        continue;
      case KmsgFile::ReadStatus::kAgain:
        if (MonoTime now = clock_.Monotonic(); now - window_start_ >= options_.window) {
          FlushAggregates();
          window_start_ = now;
          window_count_ = 0;
        }
        file_->WaitReadable(options_.poll);
        continue;
      case KmsgFile::ReadStatus::kEof: {
        FlushAggregates();
        std::unique_lock lock(sleep_mu_);
        sleep_cv_.wait_for(lock, stop, options_.poll, [] { return false; });
        continue;
      }
      case KmsgFile::ReadStatus::kError: {
        read_errors_.fetch_add(1);
        healthy_.store(false);
        {
          std::scoped_lock lock(error_mu_);
          last_error_ = std::string("read: ") + std::strerror(r.error);
        }
        std::unique_lock lock(sleep_mu_);
        sleep_cv_.wait_for(lock, stop, std::chrono::seconds(1), [] { return false; });
        continue;
      }
    }
  }
}

Status KmsgReader::ReadToEnd(std::stop_token stop) {
  if (!file_) return FailedPreconditionError("no kernel log open");
  Status result = OkStatus();
  while (!stop.stop_requested()) {
    KmsgFile::ReadResult r = file_->Read(std::span<char>(buf_.data(), buf_.size()));
    if (r.status == KmsgFile::ReadStatus::kData) {
      Feed(std::string_view(buf_.data(), r.bytes));
      continue;
    }
    if (r.status == KmsgFile::ReadStatus::kOverrun) {
      overruns_.fetch_add(1);
      continue;
    }
    if (r.status == KmsgFile::ReadStatus::kError) {
      read_errors_.fetch_add(1);
      healthy_.store(false);
      std::string msg = std::string("read: ") + std::strerror(r.error);
      {
        std::scoped_lock lock(error_mu_);
        last_error_ = msg;
      }
      result = UnavailableError(msg);
    }
    break;  // kAgain (kmsg/FIFO: nothing more now) or kEof (regular file): the current end
  }
  // A last line without its newline is still a line once the log ends here.
  if (!partial_.empty()) {
    std::string last = std::move(partial_);
    partial_.clear();
    HandleLine(last);
  }
  FlushAggregates();
  return result;
}

void KmsgReader::Feed(std::string_view bytes) {
  // Complete the pending partial line first.
  if (!partial_.empty()) {
    size_t nl = bytes.find('\n');
    if (nl == std::string_view::npos) {
      if (partial_.size() + bytes.size() <= kMaxPartial) {
        partial_.append(bytes);
      } else {
        partial_.clear();
      }
      return;
    }
    partial_.append(bytes.substr(0, nl));
    HandleLine(partial_);
    partial_.clear();
    bytes.remove_prefix(nl + 1);
  }
  while (!bytes.empty()) {
    size_t nl = bytes.find('\n');
    if (nl == std::string_view::npos) {
      if (bytes.size() <= kMaxPartial) partial_.assign(bytes);
      return;
    }
    HandleLine(bytes.substr(0, nl));
    bytes.remove_prefix(nl + 1);
  }
}

void KmsgReader::HandleLine(std::string_view line) {
  if (line.empty() || line.front() == ' ') return;  // kmsg " KEY=value" dictionary lines
  lines_.fetch_add(1, std::memory_order_relaxed);
  // Sequence gaps in kmsg records mean records we never saw.
  if (line.front() >= '0' && line.front() <= '9') {
    size_t c1 = line.find(',');
    if (c1 != std::string_view::npos && c1 < 8) {
      size_t c2 = line.find(',', c1 + 1);
      uint64_t seq = 0;
      if (c2 != std::string_view::npos) {
        auto [p, ec] = std::from_chars(line.data() + c1 + 1, line.data() + c2, seq);
        if (ec == std::errc() && p == line.data() + c2) {
          if (last_seq_ && seq > *last_seq_ + 1) missed_.fetch_add(seq - *last_seq_ - 1);
          last_seq_ = seq;
        }
      }
    }
  }
  std::optional<KmsgXid> x = ParseKmsgLine(line);
  if (!x) {
    // Plain-text logs split the multi-line "The NVIDIA GPU <pci> ... fallen off the bus"
    // printk into separate lines: remember the address and complete it on the last line.
    if (size_t at = line.find("NVRM: The NVIDIA GPU "); at != std::string_view::npos) {
      std::string_view rest = line.substr(at + 21);
      fallen_pci_.assign(rest.substr(0, std::min<size_t>(rest.find_first_of(" \\"), 32)));
    } else if (!fallen_pci_.empty() && line.find("fallen off the bus") != std::string_view::npos) {
      x = ParseKmsgLine("NVRM: GPU " + fallen_pci_ + ": GPU has fallen off the bus.");
      fallen_pci_.clear();
    }
    if (!x) return;
  }
  xids_.fetch_add(1, std::memory_order_relaxed);
  Deliver(*x);
}

void KmsgReader::Deliver(const KmsgXid& x) {
  MonoTime now = clock_.Monotonic();
  if (now - window_start_ >= options_.window) {
    FlushAggregates();
    window_start_ = now;
    window_count_ = 0;
  }
  if (window_count_ < options_.max_callbacks_per_window) {
    ++window_count_;
    if (cb_) cb_(x, 1);
    return;
  }
  // Over the limit: keep the count, drop the text.
  suppressed_.fetch_add(1, std::memory_order_relaxed);
  const int key = x.sxid ? -x.xid - 1 : x.xid;
  auto [it, inserted] = pending_.try_emplace(std::make_pair(key, x.pci_bus_id));
  if (inserted) {
    it->second.sample = x;
    it->second.sample.message.clear();
  }
  ++it->second.count;
}

void KmsgReader::FlushAggregates() {
  if (pending_.empty()) return;
  auto pending = std::move(pending_);
  pending_.clear();
  for (auto& [key, p] : pending)
    if (cb_) cb_(p.sample, p.count);
}

KmsgReader::Stats KmsgReader::stats() const {
  Stats s;
  s.lines = lines_.load();
  s.xids = xids_.load();
  s.suppressed = suppressed_.load();
  s.overruns = overruns_.load();
  s.missed_records = missed_.load();
  s.read_errors = read_errors_.load();
  return s;
}

std::string KmsgReader::last_error() const {
  std::scoped_lock lock(error_mu_);
  return last_error_;
}

}  // namespace gg::gpu
