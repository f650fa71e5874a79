// KmsgSource implementation (see kmsg_source.h).
#include "agent/kmsg_source.h"

#include "gpu/collector.h"

namespace gg::agent {

KmsgSource::KmsgSource(Clock& clock, const gpu::XidClassifier& classifier,
                       KmsgSourceOptions options, PciResolver resolver)
    : clock_(clock),
      classifier_(classifier),
      options_(std::move(options)),
      resolver_(std::move(resolver)) {
  status_ = {"kmsg", api::SourceState::kUnavailable, "not started"};
}

KmsgSource::KmsgSource(Clock& clock, const gpu::XidClassifier& classifier,
                       std::unique_ptr<gpu::KmsgFile> file, PciResolver resolver)
    : KmsgSource(clock, classifier, KmsgSourceOptions{}, std::move(resolver)) {
  file_ = std::move(file);
}

KmsgSource::~KmsgSource() { Stop(); }

void KmsgSource::OnXid(const gpu::KmsgXid& x, int64_t count) {
  std::string uuid;
  if (resolver_) uuid = resolver_(x.pci_domain, x.pci_bus, x.pci_device);
  api::XidEvent e = gpu::ToXidEvent(x, uuid, clock_.Now(), count, classifier_);
  if (ctx_.on_xid) ctx_.on_xid(e, "kmsg");
  if (ctx_.on_change) ctx_.on_change();
}

void KmsgSource::Start(const SourceContext& ctx, std::stop_token stop) {
  (void)stop;  // the reader has its own thread; Stop() ends it
  if (reader_) return;
  ctx_ = ctx;
  if (!file_) {
    auto f = gpu::OpenKmsgFile(options_.path, !options_.from_boot);
    if (!f.ok()) {
      std::scoped_lock lock(mu_);
      status_ = {"kmsg", api::SourceState::kUnavailable, f.status().message()};
      return;
    }
    file_ = std::move(f).value();
  }
  reader_ = std::make_unique<gpu::KmsgReader>(
      std::move(file_), clock_, options_.reader,
      [this](const gpu::KmsgXid& x, int64_t count) { OnXid(x, count); });
  reader_->Start();
  std::scoped_lock lock(mu_);
  status_ = {"kmsg", api::SourceState::kOk, ""};
}

void KmsgSource::Stop() {
  if (reader_) reader_->Stop();
}

void KmsgSource::PollOnce(const SourceContext& ctx) {
  // One-shot mode (--once): read the log to its current end now, so the report holds every
  // Xid it contains (from boot with --kmsg-from-boot; otherwise there is nothing behind the
  // end yet and the read only proves the log is readable).
  if (reader_) return;  // the follower thread owns the log
  ctx_ = ctx;
  std::unique_ptr<gpu::KmsgFile> file = std::move(file_);
  if (!file) {
    auto f = gpu::OpenKmsgFile(options_.path, !options_.from_boot);
    if (!f.ok()) {
      std::scoped_lock lock(mu_);
      status_ = {"kmsg", api::SourceState::kUnavailable, f.status().message()};
      return;
    }
    file = std::move(f).value();
  }
  gpu::KmsgReader reader(std::move(file), clock_, options_.reader,
                         [this](const gpu::KmsgXid& x, int64_t count) { OnXid(x, count); });
  Status st = reader.ReadToEnd();
  const auto stats = reader.stats();
  std::scoped_lock lock(mu_);
  if (!st.ok()) {
    status_ = {"kmsg", api::SourceState::kUnavailable, options_.path + ": " + st.message()};
  } else if (stats.overruns > 0) {
    status_ = {"kmsg", api::SourceState::kOk,
               "kernel log overruns: " + std::to_string(stats.overruns) +
                   " (records lost: " + std::to_string(stats.missed_records) + ")"};
  } else {
    status_ = {"kmsg", api::SourceState::kOk, ""};
  }
}

SourceSnapshot KmsgSource::Snapshot() const {
  SourceSnapshot s;
  s.provides_gpus = false;
  std::scoped_lock lock(mu_);
  s.status = status_;
  if (reader_ && s.status.state == api::SourceState::kOk) {
    if (!reader_->healthy()) {
      s.status.state = api::SourceState::kDegraded;
      s.status.message = reader_->last_error();
    } else {
      auto st = reader_->stats();
      if (st.overruns > 0)
        s.status.message = "kernel log overruns: " + std::to_string(st.overruns) +
                           " (records lost: " + std::to_string(st.missed_records) + ")";
    }
  }
  return s;
}

}  // namespace gg::agent
