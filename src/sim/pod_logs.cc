#include "sim/pod_logs.h"

#include <chrono>
#include <ctime>

namespace gg::sim {

std::vector<LogLine> ParseCriLog(std::string_view cri, size_t* consumed) {
  std::vector<LogLine> out;
  size_t pos = 0;
  bool open = false;  // the last line still takes P continuations
  while (pos < cri.size()) {
    size_t nl = cri.find('\n', pos);
    if (nl == std::string_view::npos) break;
    std::string_view rec = cri.substr(pos, nl - pos);
    pos = nl + 1;
    size_t s1 = rec.find(' ');
    size_t s2 = s1 == std::string_view::npos ? s1 : rec.find(' ', s1 + 1);
    size_t s3 = s2 == std::string_view::npos ? s2 : rec.find(' ', s2 + 1);
    if (s3 == std::string_view::npos) continue;  // not a record
    std::string_view ts = rec.substr(0, s1);
    std::string_view tag = rec.substr(s2 + 1, s3 - s2 - 1);
    std::string_view text = rec.substr(s3 + 1);
    if (!open) {
      out.push_back({std::string(ts), std::string(), false});
    }
    out.back().text.append(text);
    open = tag == "P";
    out.back().complete = !open;
  }
  if (consumed) *consumed = pos;
  return out;
}

std::optional<long long> ParseRfc3339Seconds(const std::string& ts) {
  std::tm t{};
  if (ts.size() < 20 || !strptime(ts.c_str(), "%Y-%m-%dT%H:%M:%S", &t)) return std::nullopt;
  return static_cast<long long>(timegm(&t));
}

namespace {
long long EpochSeconds(const std::string& ts) { return ParseRfc3339Seconds(ts).value_or(-1); }
}  // namespace

std::string RenderLog(const std::vector<LogLine>& lines, const LogQuery& q) {
  size_t first = 0;
  if (q.since_seconds) {
    long long cut = std::chrono::duration_cast<std::chrono::seconds>(
                        std::chrono::system_clock::now().time_since_epoch()).count() - *q.since_seconds;
    while (first < lines.size() && EpochSeconds(lines[first].timestamp) < cut) ++first;
  }
  if (q.since_time)
    while (first < lines.size() && EpochSeconds(lines[first].timestamp) < *q.since_time) ++first;
  if (q.tail_lines && *q.tail_lines >= 0 && lines.size() - first > static_cast<size_t>(*q.tail_lines))
    first = lines.size() - static_cast<size_t>(*q.tail_lines);
  std::string body;
  for (size_t i = first; i < lines.size(); ++i) {
    if (q.timestamps) body += lines[i].timestamp + " ";
    body += lines[i].text;
    if (lines[i].complete) body += '\n';
  }
  if (q.limit_bytes && *q.limit_bytes >= 0 && body.size() > static_cast<size_t>(*q.limit_bytes))
    body.resize(static_cast<size_t>(*q.limit_bytes));
  return body;
}

}  // namespace gg::sim
