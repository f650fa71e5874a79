#include "sim/pod_logs.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <fstream>
#include <optional>
#include <sstream>

#include "sim/api.h"
#include "sim/api_error.h"
#include "sim/pod_runner.h"
#include "sim/rbac.h"

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
                        std::chrono::system_clock::now().time_since_epoch())
                        .count() -
                    *q.since_seconds;
    while (first < lines.size() && EpochSeconds(lines[first].timestamp) < cut) ++first;
  }
  if (q.since_time)
    while (first < lines.size() && EpochSeconds(lines[first].timestamp) < *q.since_time) ++first;
  if (q.tail_lines && *q.tail_lines >= 0 &&
      lines.size() - first > static_cast<size_t>(*q.tail_lines))
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

bool IsPodLogPath(std::string_view path) {
  static constexpr std::string_view kPre = "/api/v1/namespaces/";
  if (path.substr(0, kPre.size()) != kPre) return false;
  path.remove_prefix(kPre.size());
  int parts = 0;
  std::string_view second, fourth;
  while (!path.empty()) {
    auto slash = path.find('/');
    std::string_view part = path.substr(0, slash);
    ++parts;
    if (parts == 2) second = part;
    if (parts == 4) fourth = part;
    path = slash == std::string_view::npos ? std::string_view() : path.substr(slash + 1);
  }
  return parts == 4 && second == "pods" && fourth == "log";
}

namespace {

std::optional<std::string> QueryParam(const ApiRequest& req, const char* k) {
  auto it = req.query.find(k);
  if (it == req.query.end()) return std::nullopt;
  return it->second;
}

// The 403 when the requester may not get pods/log of ns/name.
std::optional<ApiError> AuthorizeLogRead(Authorizer& authz, const ApiRequest& req,
                                         const std::string& ns, const std::string& name) {
  Attributes a;
  a.user = req.user;
  a.groups = req.groups;
  a.verb = "get";
  a.resource = "pods";
  a.subresource = "log";
  a.namespace_ = ns;
  a.name = name;
  a.path = req.path;
  if (authz.Authorize(a).allowed) return std::nullopt;
  ApiError e;
  e.code = 403;
  e.reason = "Forbidden";
  e.kind = "pods";
  e.name = name;
  e.message = "pods \"" + name + "\" is forbidden: User \"" + req.user +
              "\" cannot get resource \"pods/log\" in API group \"\" in the namespace \"" + ns +
              "\"";
  return e;
}

// tailLines, limitBytes, sinceSeconds, sinceTime and timestamps; a 400 when one is malformed.
std::optional<ApiError> ParseLogQuery(const ApiRequest& req, LogQuery* q) {
  auto num = [&](const char* k, std::optional<long>* v) -> bool {
    auto s = QueryParam(req, k);
    if (!s) return true;
    try {
      *v = std::stol(*s);
    } catch (...) {
      return false;
    }
    return true;
  };
  if (!num("tailLines", &q->tail_lines) || !num("limitBytes", &q->limit_bytes) ||
      !num("sinceSeconds", &q->since_seconds))
    return BadRequestErr("invalid log options");
  if (auto st = QueryParam(req, "sinceTime")) {
    q->since_time = ParseRfc3339Seconds(*st);
    if (!q->since_time) return BadRequestErr("invalid sinceTime: " + *st);
  }
  q->timestamps = QueryParam(req, "timestamps") && ParseBoolParam(*QueryParam(req, "timestamps"));
  return std::nullopt;
}

// The container must be one of the pod's (init containers count); the default is the
// only app container. A 400 when `*container` names none or the choice is ambiguous.
std::optional<ApiError> ChooseContainer(const nlohmann::json& pod, const std::string& name,
                                        std::string* container) {
  std::vector<std::string> names, mains;
  for (const char* k : {"initContainers", "containers"})
    for (const auto& c : pod["spec"].value(k, nlohmann::json::array())) {
      names.push_back(c.value("name", ""));
      if (std::string(k) == "containers") mains.push_back(names.back());
    }
  if (container->empty()) {
    if (mains.size() != 1) {
      std::string all;
      for (const auto& n : mains) all += (all.empty() ? "" : " ") + n;
      return BadRequestErr("a container name must be specified for pod " + name +
                           ", choose one of: [" + all + "]");
    }
    *container = mains[0];
  } else if (std::find(names.begin(), names.end(), *container) == names.end()) {
    return BadRequestErr("container " + *container + " is not valid for pod " + name);
  }
  return std::nullopt;
}

// The log file of a container the runner runs (none for a simulated pod); a 400 when it is
// bound to run but not started yet, or the previous instance asked for does not exist.
std::optional<ApiError> FindLogFile(PodRunner* runner, const nlohmann::json& pod,
                                    const std::string& ns, const std::string& name,
                                    const std::string& container, bool previous, PodLogFile* file) {
  if (runner) {
    auto f = runner->LogFile(ns, name, container, previous);
    if (f.ok()) {
      *file = *f;
    } else if (f.status().code() != StatusCode::kNotFound) {
      return BadRequestErr(std::string(f.status().message()));
    } else if (runner->Handles(pod)) {  // bound to run, not started yet
      return BadRequestErr("container \"" + container + "\" in pod \"" + name +
                           "\" is waiting to start: ContainerCreating");
    }
  }
  if (file->path.empty() && previous)
    return BadRequestErr("previous terminated container \"" + container + "\" in pod \"" + name +
                         "\" not found");
  return std::nullopt;
}

}  // namespace

PodLogResult PodLog(ApiCore& core, PodRunner* runner, Authorizer* authz, const ApiRequest& req) {
  PodLogResult out;
  auto fail = [&](ApiError e) {
    out.error = std::make_shared<ApiError>(std::move(e));
    return out;
  };
  std::vector<std::string> parts;
  std::string_view rest(req.path);
  rest.remove_prefix(std::string_view("/api/v1/namespaces/").size());
  while (!rest.empty()) {
    auto slash = rest.find('/');
    parts.emplace_back(rest.substr(0, slash));
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  }
  const std::string ns = parts[0], name = parts[2];
  if (authz) {
    if (auto e = AuthorizeLogRead(*authz, req, ns, name)) return fail(*e);
  }
  auto pods_ri = core.registry().Find("", "v1", "pods");
  auto pod = core.Get(Target{pods_ri, ns, name, ""});
  if (!pod.ok()) return fail(NotFoundErr("pods", "", name));
  LogQuery q;
  if (auto e = ParseLogQuery(req, &q)) return fail(*e);
  const bool previous = QueryParam(req, "previous") && ParseBoolParam(*QueryParam(req, "previous"));
  const bool follow = QueryParam(req, "follow") && ParseBoolParam(*QueryParam(req, "follow"));
  std::string container = QueryParam(req, "container").value_or("");
  if (auto e = ChooseContainer(pod.obj, name, &container)) return fail(*e);
  PodLogFile file;
  if (auto e = FindLogFile(runner, pod.obj, ns, name, container, previous, &file)) return fail(*e);
  std::string content;
  if (!file.path.empty()) {
    std::ifstream in(file.path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    content = ss.str();
  }
  size_t consumed = 0;
  out.body = RenderLog(ParseCriLog(content, &consumed), q);
  out.follow = follow && file.running && runner != nullptr;
  out.runner = runner;
  out.ns = ns;
  out.name = name;
  out.container = container;
  out.path = file.path;
  out.offset = consumed;
  out.timestamps = q.timestamps;
  return out;
}

bool NextPodLogChunk(PodLogResult& f, std::string* chunk) {
  chunk->clear();
  if (!f.body.empty()) {  // what was there when the request came
    chunk->swap(f.body);
    return true;
  }
  // Whether the instance still runs is asked before reading, so that what it wrote last
  // is read before the stream ends.
  auto now = f.runner->LogFile(f.ns, f.name, f.container, false);
  const bool alive = now.ok() && now->running && now->path == f.path;
  std::ifstream in(f.path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(f.offset));
  std::string more((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!more.empty()) {
    size_t used = 0;
    auto lines = ParseCriLog(more, &used);
    f.offset += used;
    LogQuery q;
    q.timestamps = f.timestamps;
    *chunk = RenderLog(lines, q);
    if (!chunk->empty()) return true;
  }
  return alive;
}

}  // namespace gg::sim
