// libFuzzer target for watch streams: the bytes are cut into chunks at fuzzer-chosen points
// (the first byte chooses the cuts), split into lines like RestClient::Watch does, and every
// line is decoded as a Node, Pod and generic event. Truncated, merged or binary lines must be
// an error, never a crash; the splitter must hand out exactly the '\n'-terminated lines.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "k8s/codec.h"
#include "k8s/transport.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const unsigned step = 1u + data[0] % 61u;  // chunk size pattern
  std::string_view stream(reinterpret_cast<const char*>(data) + 1, size - 1);
  gg::k8s::LineSplitter splitter;
  std::size_t lines = 0, bytes = 0;
  auto on_line = [&](std::string_view line) {
    ++lines;
    bytes += line.size() + 1;
    (void)gg::k8s::ParseWatchEvent<gg::k8s::Node>(line, /*padded=*/true).ok();
    (void)gg::k8s::ParseWatchEvent<gg::k8s::Pod>(line, /*padded=*/true).ok();
    (void)gg::k8s::ParseWatchEvent<gg::k8s::PartialObject>(line).ok();
    return true;
  };
  for (std::size_t at = 0, n = 0; at < stream.size(); at += n) {
    n = std::min<std::size_t>(stream.size() - at, step + (at % 7));
    if (!splitter.Feed(stream.substr(at, n), on_line)) std::abort();
  }
  // Everything up to the last newline was delivered; the rest is the pending partial line.
  std::size_t last_nl = stream.rfind('\n');
  std::size_t want_bytes = last_nl == std::string_view::npos ? 0 : last_nl + 1;
  if (splitter.pending() != stream.size() - want_bytes) std::abort();
  (void)lines;
  (void)bytes;
  return 0;
}
