// FileSource implementation (see file_source.h).
#include "agent/file_source.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "api/gpu_node_health.h"

namespace gg::agent {
namespace {
constexpr std::size_t kMaxFileBytes = 4u << 20;
}

FileSource::FileSource(Clock& clock, FileSourceOptions options)
    : clock_(clock), options_(std::move(options)), waker_(clock) {
  snapshot_.provides_gpus = true;
  snapshot_.status = {"file", api::SourceState::kUnavailable, "not read yet"};
}

FileSource::~FileSource() { Stop(); }

bool FileSource::Check(const SourceContext& ctx, bool force) {
  std::scoped_lock check_lock(check_mu_);
  struct stat st {};
  auto set_status = [&](api::SourceState state, std::string msg) {
    std::scoped_lock lock(mu_);
    if (snapshot_.status.state == state && snapshot_.status.message == msg) return false;
    snapshot_.status.state = state;
    snapshot_.status.message = std::move(msg);
    return true;
  };
  if (::stat(options_.path.c_str(), &st) != 0) {
    have_id_ = false;
    return set_status(api::SourceState::kUnavailable,
                      "stat " + options_.path + ": " + std::strerror(errno));
  }
  FileId id{static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec,
            static_cast<int64_t>(st.st_size), static_cast<uint64_t>(st.st_ino)};
  if (!force && have_id_ && id == last_id_) return false;
  last_id_ = id;
  have_id_ = true;
  if (st.st_size > static_cast<off_t>(kMaxFileBytes))
    return set_status(api::SourceState::kDegraded,
                      "read " + options_.path + ": file larger than 4 MiB");
  std::ifstream in(options_.path, std::ios::binary);
  if (!in)
    return set_status(api::SourceState::kUnavailable,
                      "open " + options_.path + ": " + std::strerror(errno));
  std::stringstream buf;
  buf << in.rdbuf();
  auto parsed = api::DecodeGpuNodeHealthStatus(buf.str());
  if (!parsed.ok()) {
    // Keep the last good GPUs: a half-saved edit must not make GPUs vanish.
    return set_status(api::SourceState::kDegraded,
                      "parse " + options_.path + ": " + parsed.status().message());
  }
  const WallTime now = clock_.Now();
  for (auto x : parsed->xids) {
    if (x.count <= 0) x.count = 1;
    auto key = std::make_tuple(x.xid, x.sxid, x.gpu_uuid, x.pci_bus_id);
    int64_t& seen = xid_counts_[key];
    if (x.count <= seen) continue;
    api::XidEvent delta = x;
    delta.count = x.count - seen;
    seen = x.count;
    if (delta.last_seen == WallTime{}) delta.last_seen = now;
    if (delta.first_seen == WallTime{}) delta.first_seen = delta.last_seen;
    if (ctx.on_xid) ctx.on_xid(delta, "file");
  }
  std::scoped_lock lock(mu_);
  snapshot_.gpus = std::move(parsed->gpus);
  snapshot_.clock_event_masks.assign(snapshot_.gpus.size(), 0);
  snapshot_.status.state = api::SourceState::kOk;
  snapshot_.status.message.clear();
  ++reloads_;
  return true;
}

void FileSource::Start(const SourceContext& ctx, std::stop_token stop) {
  if (thread_.joinable()) return;
  thread_ = std::jthread([this, ctx](std::stop_token own) {
    while (!own.stop_requested()) {
      if (Check(ctx, false) && ctx.on_change) ctx.on_change();
      waker_.Wait(options_.poll_interval, own);
    }
  });
  forward_stop_ = std::make_unique<StopForward>(stop, [this] {
    thread_.request_stop();
    waker_.Notify();
  });
}

void FileSource::Stop() {
  forward_stop_.reset();
  if (thread_.joinable()) {
    thread_.request_stop();
    waker_.Notify();
    thread_.join();
  }
}

void FileSource::PollOnce(const SourceContext& ctx) { Check(ctx, false); }

SourceSnapshot FileSource::Snapshot() const {
  std::scoped_lock lock(mu_);
  return snapshot_;
}

uint64_t FileSource::reloads() const {
  std::scoped_lock lock(mu_);
  return reloads_;
}

}  // namespace gg::agent
