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
  // One-shot mode: only say whether the log can be opened (a snapshot of Xids since boot
  // would need --kmsg-from-boot and a full read, which the reader thread does).
  (void)ctx;
  if (reader_ || file_) return;
  auto f = gpu::OpenKmsgFile(options_.path, !options_.from_boot);
  std::scoped_lock lock(mu_);
  if (!f.ok()) {
    status_ = {"kmsg", api::SourceState::kUnavailable, f.status().message()};
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
