// The runner's side of a simulator child process (SimChild, SimProcess): the two pipes of its
// line protocol, the URL it reported once seeded, and "quit" + wait on the way out.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace gg::bench {

class PipedChild {
 public:
  PipedChild() = default;
  PipedChild(const PipedChild&) = delete;
  PipedChild& operator=(const PipedChild&) = delete;
  ~PipedChild() { Stop(); }

  void Stop() {
    if (pid_ <= 0) return;
    std::fprintf(out_, "quit\n");
    std::fflush(out_);
    int st = 0;
    waitpid(pid_, &st, 0);
    pid_ = 0;
  }
  const std::string& url() const { return url_; }
  double populate_seconds() const { return populate_seconds_; }
  pid_t pid() const { return pid_; }

 protected:
  // The parent's ends: `to_child` is written, `to_parent` read. Then waits for the child's
  // "url URL populate_seconds" line; false when it does not come.
  bool Attach(int to_child, int to_parent) {
    out_ = fdopen(to_child, "w");
    in_ = fdopen(to_parent, "r");
    char url[256];
    if (!in_ || !out_ || std::fscanf(in_, " url %255s %lf", url, &populate_seconds_) != 2)
      return false;
    url_ = url;
    return true;
  }

  pid_t pid_ = 0;
  FILE* in_ = nullptr;
  FILE* out_ = nullptr;
  std::string url_;
  double populate_seconds_ = 0;
};

}  // namespace gg::bench
