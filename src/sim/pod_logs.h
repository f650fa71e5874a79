// Container logs as the pods/log subresource serves them, read from the CRI-format files the
// pod runner writes ("<RFC 3339 nano> stdout|stderr F|P <text>" per record; P records are
// parts of one longer line).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gg::sim {

struct LogLine {
  std::string timestamp;  // of the line's first record
  std::string text;       // without the newline
  bool complete = true;   // false: the file ends inside a partial line
};

// Parses whole records of `cri`; `*consumed` (optional) is the number of bytes used
// (a trailing record without its newline is left for later).
std::vector<LogLine> ParseCriLog(std::string_view cri, size_t* consumed = nullptr);

struct LogQuery {
  std::optional<long> tail_lines;       // tailLines
  bool timestamps = false;              // timestamps
  std::optional<long> limit_bytes;      // limitBytes
  std::optional<long> since_seconds;    // sinceSeconds (against the record timestamps)
  std::optional<long long> since_time;  // sinceTime, as seconds since the epoch
};

// Seconds since the epoch of an RFC 3339 time ("2026-12-01T10:00:00Z", fractions allowed);
// nullopt when malformed.
std::optional<long long> ParseRfc3339Seconds(const std::string& ts);

// The response body for `lines` under `q` (tailLines, sinceSeconds, timestamps, limitBytes).
std::string RenderLog(const std::vector<LogLine>& lines, const LogQuery& q);

class ApiCore;
class Authorizer;
class PodRunner;
struct ApiRequest;
struct ApiError;

// GET /api/v1/namespaces/NS/pods/NAME/log (the kubelet's part of it included).
bool IsPodLogPath(std::string_view path);

struct PodLogResult {
  std::shared_ptr<ApiError> error;  // set: answer this instead
  std::string body;                 // what there is now, rendered
  bool follow = false;              // keep streaming with NextPodLogChunk
  // follow state
  PodRunner* runner = nullptr;
  std::string ns, name, container, path;
  size_t offset = 0;
  bool timestamps = false;
};

// Authorizes (get pods/log), validates the options and the container as the real server
// does, and reads the log (`runner` may be null: simulated pods have empty logs).
PodLogResult PodLog(ApiCore& core, PodRunner* runner, Authorizer* authz, const ApiRequest& req);
// The next part of a followed log into *chunk (empty: nothing new yet); false once the
// container instance has ended and everything was read.
bool NextPodLogChunk(PodLogResult& f, std::string* chunk);

}  // namespace gg::sim
