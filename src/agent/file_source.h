// FileSource: a simulated reporter, as in the original gpu-guardian-operator design. A hand-edited
// JSON file of per-GPU signals (the report's own `gpus`/`xids` shape, see docs/agent.md) is re-read
// whenever its mtime, size or inode changes (polled; cheap and works on every filesystem, unlike
// inotify on bind mounts). Bad JSON -> Degraded with the parse error, last good state kept; missing
// -> Unavailable.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>

#include "agent/source.h"
#include "agent/waker.h"
#include "common/clock.h"

namespace gg::agent {

struct FileSourceOptions {
  std::string path;
  Duration poll_interval = std::chrono::seconds(1);
};

class FileSource final : public Source {
 public:
  FileSource(Clock& clock, FileSourceOptions options);
  ~FileSource() override;

  std::string_view Name() const override { return "file"; }
  void Start(const SourceContext& ctx, std::stop_token stop) override;
  void Stop() override;
  void PollOnce(const SourceContext& ctx) override;
  SourceSnapshot Snapshot() const override;

  uint64_t reloads() const;  // successful parses

 private:
  // Re-reads when the file changed (or always with force). Returns true when the snapshot
  // changed.
  bool Check(const SourceContext& ctx, bool force);

  Clock& clock_;
  FileSourceOptions options_;
  Waker waker_;
  std::mutex check_mu_;
  struct FileId {
    int64_t mtime_ns = -1, size = -1;
    uint64_t inode = 0;
    bool operator==(const FileId&) const = default;
  };
  FileId last_id_;
  bool have_id_ = false;
  // Last count seen per (xid, sxid, uuid, pci) so re-reads feed only increments to the ring.
  std::map<std::tuple<int, bool, std::string, std::string>, int64_t> xid_counts_;
  mutable std::mutex mu_;
  SourceSnapshot snapshot_;
  uint64_t reloads_ = 0;
  std::jthread thread_;
  std::unique_ptr<StopForward> forward_stop_;
};

}  // namespace gg::agent
