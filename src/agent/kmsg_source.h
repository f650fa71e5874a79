// KmsgSource: Xids from the kernel log (/dev/kmsg) via gpu::KmsgReader. Maps each line's PCI
// address to a GPU UUID through an injected resolver (the NVML source's table when NVML
// runs), classifies with the XidClassifier and pushes into the report's Xid ring. It has no
// per-GPU facts of its own; it still catches Xids when NVML is unavailable or the GPU is
// gone ("fallen off the bus" lines).
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "agent/source.h"
#include "common/clock.h"
#include "gpu/kmsg_reader.h"
#include "gpu/xid_catalog.h"

namespace gg::agent {

struct KmsgSourceOptions {
  std::string path = "/dev/kmsg";
  bool from_boot = false;  // replay the ring buffer since boot instead of following the end
  gpu::KmsgReader::Options reader;
};

using PciResolver = std::function<std::string(uint32_t domain, uint32_t bus, uint32_t device)>;

class KmsgSource final : public Source {
 public:
  // `classifier` must outlive the source. `resolver` may be empty (no UUIDs, PCI only).
  KmsgSource(Clock& clock, const gpu::XidClassifier& classifier, KmsgSourceOptions options,
             PciResolver resolver = {});
  // Tests: an already-open file (e.g. a pipe) instead of options.path.
  KmsgSource(Clock& clock, const gpu::XidClassifier& classifier,
             std::unique_ptr<gpu::KmsgFile> file, PciResolver resolver = {});
  ~KmsgSource() override;

  std::string_view Name() const override { return "kmsg"; }
  void Start(const SourceContext& ctx, std::stop_token stop) override;
  void Stop() override;
  void PollOnce(const SourceContext& ctx) override;
  SourceSnapshot Snapshot() const override;

 private:
  void OnXid(const gpu::KmsgXid& x, int64_t count);

  Clock& clock_;
  const gpu::XidClassifier& classifier_;
  KmsgSourceOptions options_;
  PciResolver resolver_;
  std::unique_ptr<gpu::KmsgFile> file_;  // until Start() hands it to the reader
  std::unique_ptr<gpu::KmsgReader> reader_;
  SourceContext ctx_;
  mutable std::mutex mu_;
  api::SourceStatus status_;
};

}  // namespace gg::agent
