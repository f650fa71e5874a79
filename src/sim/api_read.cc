// ApiCore: request dispatch, reads (get/list/watch set-up), discovery, OpenAPI documents,
// Event view conversion.
#include <charconv>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "sim/api.h"
#include "sim/api_util.h"
#include "sim/openapi_gen.h"
#include "sim/protobuf.h"
#include "sim/rbac.h"
#include "sim/selector.h"

namespace gg::sim {

using nlohmann::json;

namespace {

std::optional<std::uint64_t> ParseUint(std::string_view s) {
  std::uint64_t v = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

std::string Q(const std::map<std::string, std::string>& q, const std::string& k) {
  auto it = q.find(k);
  return it == q.end() ? std::string() : it->second;
}

ApiResponse ErrorResponse(const ApiError& e) {
  ApiResponse r;
  r.code = e.code;
  r.body = e.Body();
  if (e.retry_after_seconds > 0)
    r.headers.emplace_back("Retry-After", std::to_string(e.retry_after_seconds));
  return r;
}

ApiResponse JsonResponse(int code, const json& j) {
  ApiResponse r;
  r.code = code;
  r.body = j.dump();
  return r;
}

// dryRun as the query or a DeleteOptions body gives it: only "All" is known. BadRequest
// otherwise, with the apiserver's message.
std::optional<ApiError> ParseDryRun(const json& values, bool* dry) {
  if (values.is_null()) return std::nullopt;
  if (!values.is_array()) return BadRequestErr("dryRun: Invalid value: must be a list of strings");
  std::string listed;
  bool bad = false;
  for (const auto& v : values) {
    if (!v.is_string() || v != "All") bad = true;
    listed += (listed.empty() ? "" : ", ") +
              (v.is_string() ? "\"" + v.get<std::string>() + "\"" : v.dump());
  }
  if (bad)
    return BadRequestErr("dryRun: Unsupported value: []string{" + listed +
                         "}: supported values: \"All\"");
  if (!values.empty()) *dry = true;
  return std::nullopt;
}

}  // namespace

json CoreEventToEventsV1(const json& ev) {
  json out = ev;
  out["apiVersion"] = "events.k8s.io/v1";
  out["kind"] = "Event";
  auto move = [&](const char* from, const char* to) {
    if (out.contains(from)) {
      if (!out[from].is_null()) out[to] = out[from];
      out.erase(from);
    }
  };
  move("involvedObject", "regarding");
  move("message", "note");
  move("source", "deprecatedSource");
  move("firstTimestamp", "deprecatedFirstTimestamp");
  move("lastTimestamp", "deprecatedLastTimestamp");
  move("count", "deprecatedCount");
  move("reportingComponent", "reportingController");
  if (out.contains("deprecatedSource") && out["deprecatedSource"].is_object() &&
      out["deprecatedSource"].empty())
    out.erase("deprecatedSource");
  // Python 22.6 needs eventTime on events.k8s.io objects (contract §6.2).
  if (!out.contains("eventTime") || out["eventTime"].is_null()) {
    std::string t = out.value("deprecatedFirstTimestamp", "");
    if (t.empty() && out.contains("metadata")) t = out["metadata"].value("creationTimestamp", "");
    if (t.size() == 20 && t.back() == 'Z') t = t.substr(0, 19) + ".000000Z";
    if (!t.empty()) out["eventTime"] = t;
  }
  return out;
}

json EventsV1ToCoreEvent(const json& ev) {
  json out = ev;
  out["apiVersion"] = "v1";
  out["kind"] = "Event";
  auto move = [&](const char* from, const char* to) {
    if (out.contains(from)) {
      if (!out[from].is_null()) out[to] = out[from];
      out.erase(from);
    }
  };
  move("regarding", "involvedObject");
  move("note", "message");
  move("deprecatedSource", "source");
  move("deprecatedFirstTimestamp", "firstTimestamp");
  move("deprecatedLastTimestamp", "lastTimestamp");
  move("deprecatedCount", "count");
  move("reportingController", "reportingComponent");
  if (!out.contains("involvedObject")) out["involvedObject"] = json::object();
  return out;
}

std::string ApiCore::Render(const Obj& o, const ResourceInfo& view) const {
  if (o.api_version == view.ApiVersion()) return o.json;
  json j = json::parse(o.json, nullptr, false);
  if (j.is_discarded()) return o.json;
  if (view.storage == "events" && view.group == "events.k8s.io")
    return CoreEventToEventsV1(j).dump();
  if (view.storage == "events") return EventsV1ToCoreEvent(j).dump();
  j["apiVersion"] = view.ApiVersion();
  return j.dump();
}

std::string ApiCore::RenderTable(const ResourceInfo& view, const std::string& table_version,
                                 IncludeObject inc, const std::vector<json>& objs,
                                 const json& list_meta) const {
  WallTime now = clock_.Now();
  json rows = json::array();
  const bool events_v1 = view.storage == "events" && view.group == "events.k8s.io";
  for (const auto& o : objs)
    rows.push_back(TableRow(view, events_v1 ? EventsV1ToCoreEvent(o) : o, o, now, inc));
  json t = {{"kind", "Table"},
            {"apiVersion", table_version},
            {"metadata", list_meta.is_object() ? list_meta : json::object()},
            {"columnDefinitions", TableColumns(view)},
            {"rows", std::move(rows)}};
  return t.dump();
}

std::vector<json> ApiCore::ListObjects(const std::string& storage, const std::string& ns) {
  std::vector<json> out;
  std::scoped_lock lock(store_.mu());
  store_.ForEachLocked(storage, ns, "", [&](const std::string&, const ObjPtr& o) {
    out.push_back(json::parse(o->json));
    return true;
  });
  return out;
}

std::string ListStream::Join() const {
  std::string out;
  out.reserve(Size());
  out += head;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += ',';
    out += items[i]->json;
  }
  out += tail;
  return out;
}

ApiResult ApiCore::ListBody(const Target& t, const std::map<std::string, std::string>& q,
                            std::string* body) {
  ListStream ls;
  auto r = ListPieces(t, q, &ls);
  if (r.ok()) *body = ls.Join();
  return r;
}

// One list's scan: what the query asks (exact_rv, limit, after, everything) and what the
// scan found (rv, last_key, more, remaining).
struct ListScan {
  std::optional<std::uint64_t> exact_rv;  // resourceVersionMatch=Exact: the version listed
  std::size_t limit = 0;
  std::string after;        // continue: the store key the list starts after
  bool everything = false;  // no selector: remainingItemCount can be counted
  std::uint64_t rv = 0;
  std::string last_key;
  bool more = false;
  std::size_t remaining = 0;
};

namespace {

// labelSelector and fieldSelector of a list or watch, the field selector checked against the
// fields `ri` supports.
std::optional<ApiError> ParseSelectors(const ResourceInfo& ri,
                                       const std::map<std::string, std::string>& q,
                                       std::optional<LabelSelector>* ls,
                                       std::optional<FieldSelector>* fs) {
  auto l = LabelSelector::Parse(Q(q, "labelSelector"));
  if (!l.ok()) return BadRequestErr("unable to parse requirement: " + l.status().message());
  auto f = FieldSelector::Parse(Q(q, "fieldSelector"));
  if (!f.ok()) return BadRequestErr(f.status().message());
  if (auto st = f->ValidateFor(ri.storage == "events" ? "" : ri.group, ri.resource, ri.namespaced);
      !st.ok())
    return BadRequestErr(st.message());
  *ls = std::move(*l);
  *fs = std::move(*f);
  return std::nullopt;
}

// resourceVersionMatch of a list, in the apiserver's order of checks.
std::optional<ApiError> ValidateResourceVersionMatch(const std::map<std::string, std::string>& q) {
  const std::string rvm = Q(q, "resourceVersionMatch"), rvs = Q(q, "resourceVersion");
  if (rvm.empty()) return std::nullopt;
  auto forbidden = [](const std::string& msg) {
    return InvalidErr("ListOptions", "meta.k8s.io", "",
                      {{"FieldValueForbidden", "Forbidden: " + msg, "resourceVersionMatch"}});
  };
  if (rvm != "Exact" && rvm != "NotOlderThan")
    return InvalidErr(
        "ListOptions", "meta.k8s.io", "",
        {{"FieldValueNotSupported",
          "Unsupported value: \"" + rvm + "\": supported values: \"Exact\", \"NotOlderThan\"",
          "resourceVersionMatch"}});
  if (rvs.empty())
    return forbidden("resourceVersionMatch is forbidden unless resourceVersion is provided");
  if (!Q(q, "continue").empty())
    return forbidden("resourceVersionMatch is forbidden when continue is provided");
  if (rvm == "Exact" && rvs == "0")
    return forbidden("resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"");
  return std::nullopt;
}

ApiError InvalidResourceVersion(const std::string& rvs) {
  return BadRequestErr("resourceVersion: Invalid value: \"" + rvs +
                       "\": strconv.ParseUint: parsing \"" + rvs + "\": invalid syntax");
}

// The store key a continue token starts after.
std::optional<ApiError> ParseContinue(const std::string& cont, std::string* after) {
  if (cont.empty()) return std::nullopt;
  auto dec = B64Decode(cont);
  json cj = dec.ok() ? json::parse(*dec, nullptr, false) : json();
  if (!cj.is_object() || !cj.contains("start"))
    return BadRequestErr(
        "continue key is not valid: incorrect encoded start resourceVersion (version "
        "meta.k8s.io/v1)");
  *after = cj.value("start", "");
  return std::nullopt;
}

// The list's metadata and closing brackets: its resourceVersion, and where the limit cut it
// short the continue token (and, unfiltered, remainingItemCount).
std::string ListTail(const ListScan& s) {
  std::string tail = "],\"metadata\":{\"resourceVersion\":\"";
  tail += std::to_string(s.rv);
  tail += '"';
  if (s.more) {
    tail += ",\"continue\":\"";
    tail += B64Encode(json{{"rv", s.rv}, {"start", s.last_key}}.dump());
    tail += '"';
    if (s.everything) {
      tail += ",\"remainingItemCount\":";
      tail += std::to_string(s.remaining);
    }
  }
  tail += "}}";
  return tail;
}

}  // namespace

// A resourceVersion the store has not reached: the apiserver waits up to 3 s for it.
std::optional<ApiError> ApiCore::WaitForResourceVersion(std::uint64_t want) {
  for (int i = 0; i < 60 && store_.rv() < want; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::uint64_t cur = store_.rv();
  if (cur >= want) return std::nullopt;
  ApiError e;
  e.code = 504;
  e.reason = "Timeout";
  e.message =
      "Too large resource version: " + std::to_string(want) + ", current: " + std::to_string(cur);
  e.causes.push_back({"ResourceVersionTooLarge", "Too large resource version", ""});
  e.retry_after_seconds = 1;
  return e;
}

// The matching objects of `t`'s collection after s->after, up to s->limit, rendered for its
// version; s->rv is the list's resourceVersion.
std::optional<ApiError> ApiCore::ScanList(const Target& t, const LabelSelector& ls,
                                          const FieldSelector& fs, ListScan* s,
                                          std::vector<ObjPtr>* items) {
  const auto& ri = *t.ri;
  std::scoped_lock lock(store_.mu());
  s->rv = store_.RvLocked();
  if (s->exact_rv) {
    // The simulator keeps no snapshots: an exact list is the current state when the
    // collection has not changed since; otherwise that version is gone.
    if (store_.ChangedSinceLocked(ri.storage, *s->exact_rv))
      return ExpiredErr("The resourceVersion for the provided list is too old.");
    s->rv = *s->exact_rv;
  }
  std::size_t n = 0;
  // Plain scan: selectors are precomputed per object.
  store_.ForEachLocked(ri.storage, t.ns, s->after, [&](const std::string& key, const ObjPtr& o) {
    if (!MatchesLabels(ls, o->labels) || !fs.Matches(o->fields)) return true;
    if (s->limit && n == s->limit) {
      s->more = true;
      // remainingItemCount is only known (and sent) for an unfiltered list.
      if (!s->everything) return false;
      ++s->remaining;
      return true;
    }
    ++n;
    if (o->api_version == ri.ApiVersion()) {
      items->push_back(o);
    } else {
      auto view = std::make_shared<Obj>();
      view->json = Render(*o, ri);
      items->push_back(std::move(view));
    }
    s->last_key = key;
    return true;
  });
  return std::nullopt;
}

ApiResult ApiCore::ListPieces(const Target& t, const std::map<std::string, std::string>& q,
                              ListStream* stream) {
  const auto& ri = *t.ri;
  std::optional<LabelSelector> ls;
  std::optional<FieldSelector> fs;
  if (auto e = ParseSelectors(ri, q, &ls, &fs)) return ApiResult::Err(*e);
  if (auto e = ValidateResourceVersionMatch(q)) return ApiResult::Err(*e);
  const std::string rvs = Q(q, "resourceVersion");
  ListScan scan;
  if (!rvs.empty() && rvs != "0") {
    auto want_rv = ParseUint(rvs);
    if (!want_rv) return ApiResult::Err(InvalidResourceVersion(rvs));
    if (auto e = WaitForResourceVersion(*want_rv)) return ApiResult::Err(*e);
    if (Q(q, "resourceVersionMatch") == "Exact") scan.exact_rv = want_rv;
  }
  if (auto l = ParseUint(Q(q, "limit"))) scan.limit = *l;
  if (auto e = ParseContinue(Q(q, "continue"), &scan.after)) return ApiResult::Err(*e);
  scan.everything = ls->Empty() && fs->Empty();
  std::string& out = stream->head;
  out.clear();
  stream->items.clear();
  out += "{\"kind\":\"";
  out += ri.list_kind;
  out += "\",\"apiVersion\":\"";
  out += ri.ApiVersion();
  out += "\",\"items\":[";
  if (auto e = ScanList(t, *ls, *fs, &scan, &stream->items)) return ApiResult::Err(*e);
  stream->tail = ListTail(scan);
  return ApiResult{};
}

ApiResponse ApiCore::StartWatch(const ApiRequest& req, const Target& t) {
  const auto& ri = *t.ri;
  const auto& q = req.query;
  std::optional<LabelSelector> ls;
  std::optional<FieldSelector> fs;
  if (auto e = ParseSelectors(ri, q, &ls, &fs)) return ErrorResponse(*e);
  // A watch on one object: metadata.name field selector, as client-go does it.
  if (!t.name.empty()) {
    auto name_sel = FieldSelector::Parse("metadata.name=" + t.name);
    if (name_sel.ok()) fs = std::move(*name_sel);
  }
  bool send_initial = ParseBoolParam(Q(q, "sendInitialEvents"));
  std::string rvm = Q(q, "resourceVersionMatch");
  if (send_initial && rvm != "NotOlderThan")
    return ErrorResponse(InvalidErr("ListOptions", "meta.k8s.io", "",
                                    {{"FieldValueForbidden",
                                      "Forbidden: sendInitialEvents is forbidden for watch unless "
                                      "resourceVersionMatch is set to NotOlderThan",
                                      "sendInitialEvents"}}));
  if (!send_initial && !rvm.empty())
    return ErrorResponse(InvalidErr("ListOptions", "meta.k8s.io", "",
                                    {{"FieldValueForbidden",
                                      "Forbidden: resourceVersionMatch is forbidden for watch "
                                      "unless sendInitialEvents is provided",
                                      "resourceVersionMatch"}}));
  std::string rvs = Q(q, "resourceVersion");
  std::optional<std::uint64_t> from;
  if (!send_initial && !rvs.empty() && rvs != "0") {
    from = ParseUint(rvs);
    if (!from)
      return ErrorResponse(BadRequestErr("resourceVersion: Invalid value: \"" + rvs +
                                         "\": strconv.ParseUint: parsing \"" + rvs +
                                         "\": invalid syntax"));
  }
  ApiResponse r;
  WatchSpec w;
  w.ri = t.ri;
  w.bookmarks = ParseBoolParam(Q(q, "allowWatchBookmarks"));
  w.initial_events_end = send_initial;
  if (auto ts = ParseUint(Q(q, "timeoutSeconds"))) w.timeout_seconds = static_cast<int>(*ts);
  if (auto tv = TableVersionFromAccept(req.accept)) {
    auto inc = ParseIncludeObject(Q(q, "includeObject"));
    if (!inc.ok()) return ErrorResponse(BadRequestErr(inc.status().message()));
    w.table_version = *tv;
    w.include_object = *inc;
  }
  auto ws = store_.StartWatch(ri.storage, t.ns, std::move(*ls), std::move(*fs), from);
  if (ws.too_old_rv) {
    w.expired_message = "too old resource version: " + std::to_string(ws.too_old_rv) + " (" +
                        std::to_string(ws.oldest_rv) + ")";
  } else {
    w.watcher = ws.watcher;
    w.start_rv = ws.start_rv;
    w.initial_count = ws.initial_count;
  }
  r.watch = std::move(w);
  return r;
}

namespace {

// The index's hash of a document: changes when the document does.
std::string DocumentHash(std::size_t h) {
  char hash[32];
  std::snprintf(hash, sizeof hash, "%016llX", static_cast<unsigned long long>(h));
  return hash;
}

// The group version an OpenAPI file on disk documents ("apis__apps__v1_openapi.json" is
// "apis/apps/v1"); empty for another file.
std::string OpenApiFileKey(const std::string& f) {
  const std::string suffix = "_openapi.json";
  if (f.size() <= suffix.size() || f.compare(f.size() - suffix.size(), suffix.size(), suffix) != 0)
    return "";
  std::string key = f.substr(0, f.size() - suffix.size());
  for (std::size_t p; (p = key.find("__")) != std::string::npos;) key.replace(p, 2, "/");
  return key;
}

}  // namespace

// /openapi/v3 paths ("api/v1", "apis/GROUP/VERSION") of the group versions this release
// serves: a document on disk for another one (release-1.32 holds 1.33's resource.k8s.io
// v1beta2) is not listed or served.
std::set<std::string> ApiCore::ServedOpenApiPaths() const {
  std::set<std::string> served;
  for (const auto& [g, versions] : registry_.Groups())
    for (const auto& v : versions) served.insert(g.empty() ? "api/" + v : "apis/" + g + "/" + v);
  return served;
}

// GET /openapi/v3: the served documents on disk and one generated per custom resource
// group version, each with its hash.
ApiResponse ApiCore::OpenApiIndex() const {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::set<std::string> served = ServedOpenApiPaths();
  json paths = json::object();
  for (const auto& e : fs::directory_iterator(opts_.openapi_dir, ec)) {
    std::string f = e.path().filename().string();
    std::string key = OpenApiFileKey(f);
    if (key.empty() || !served.count(key)) continue;
    std::string hash =
        DocumentHash(std::hash<std::string>{}(f) ^ static_cast<std::size_t>(e.file_size(ec)));
    paths[key] = {{"serverRelativeURL", "/openapi/v3/" + key + "?hash=" + hash}};
  }
  for (const auto& [gv, doc] : CrdOpenApiDocuments()) {
    std::string hash = DocumentHash(std::hash<std::string>{}(doc));
    paths["apis/" + gv] = {{"serverRelativeURL", "/openapi/v3/apis/" + gv + "?hash=" + hash}};
  }
  return JsonResponse(200, {{"paths", paths}});
}

// /openapi/v3[/...]: the index, a custom resource group version's generated document, or a
// served built-in document from disk.
ApiResponse ApiCore::HandleOpenApi(const std::vector<std::string>& parts) const {
  if (parts[1] != "v3") return ErrorResponse(PathNotFoundErr());
  std::error_code ec;
  if (opts_.openapi_dir.empty() || !std::filesystem::is_directory(opts_.openapi_dir, ec))
    return ErrorResponse(PathNotFoundErr());
  if (parts.size() == 2) return OpenApiIndex();
  ApiResponse r;
  if (parts.size() == 5 && parts[2] == "apis") {
    std::string want = parts[3] + "/" + parts[4];
    for (auto& [gv, doc] : CrdOpenApiDocuments()) {
      if (gv != want) continue;
      r.body = std::move(doc);
      return r;
    }
  }
  std::string key, gv;
  for (std::size_t i = 2; i < parts.size(); ++i) {
    key += (i > 2 ? "__" : "") + parts[i];
    gv += (i > 2 ? "/" : "") + parts[i];
  }
  if (!ServedOpenApiPaths().count(gv)) return ErrorResponse(PathNotFoundErr());
  std::ifstream in(opts_.openapi_dir + "/" + key + "_openapi.json", std::ios::binary);
  if (!in) return ErrorResponse(PathNotFoundErr());
  std::ostringstream ss;
  ss << in.rdbuf();
  r.body = ss.str();
  return r;
}

// GET /openapi/v2: one Swagger 2.0 document of every served built-in group version (the
// documents /openapi/v3 serves, converted) and of the custom resources, as JSON or as
// gnostic protobuf by Accept; ETag and Vary: Accept as the real handler sets them.
ApiResponse ApiCore::OpenApiV2(const ApiRequest& req) const {
  std::error_code ec;
  if (opts_.openapi_dir.empty() || !std::filesystem::is_directory(opts_.openapi_dir, ec))
    return ErrorResponse(PathNotFoundErr());
  std::string format = OpenApiV2Format(req.accept);
  if (format.empty()) {
    ApiResponse r;
    r.code = 406;
    r.headers.emplace_back("Vary", "Accept");
    return r;
  }
  auto builtin = [this] {
    std::set<std::string> files;
    const std::set<std::string> served = ServedOpenApiPaths();
    std::error_code dir_ec;
    for (const auto& e : std::filesystem::directory_iterator(opts_.openapi_dir, dir_ec)) {
      std::string f = e.path().filename().string();
      if (std::string key = OpenApiFileKey(f); !key.empty() && served.count(key)) files.insert(f);
    }
    json doc = NewV2Document(opts_.kube_version);
    for (const auto& f : files) {
      std::ifstream in(opts_.openapi_dir + "/" + f, std::ios::binary);
      json v3 = json::parse(in, nullptr, false);
      if (v3.is_object()) AddV3DocumentToV2(v3, doc);
    }
    return doc;
  };
  std::vector<std::shared_ptr<const ResourceInfo>> custom;
  for (const auto& r : registry_.All())
    if (r->custom) custom.push_back(r);
  auto served = openapi_v2_.Get(builtin, CrdOpenApiV2Part(custom, schemas_.get()));
  if (!served.ok()) return ErrorResponse(InternalErr(served.status().message()));
  ApiResponse r;
  r.headers = {{"Vary", "Accept"}, {"Etag", (*served)->etag}};
  if (format == "protobuf") {
    r.body = (*served)->protobuf;
    r.content_type = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
  } else {
    r.body = (*served)->json;
  }
  return r;
}

// /apis/GROUP: the APIGroup with its versions, the first preferred.
ApiResponse ApiCore::ApiGroupDocument(const std::string& group) const {
  for (const auto& [g, versions] : registry_.Groups()) {
    if (g != group) continue;
    json vs = json::array();
    for (const auto& v : versions) vs.push_back({{"groupVersion", g + "/" + v}, {"version", v}});
    return JsonResponse(200, {{"kind", "APIGroup"},
                              {"apiVersion", "v1"},
                              {"name", g},
                              {"versions", vs},
                              {"preferredVersion", vs[0]}});
  }
  return ErrorResponse(PathNotFoundErr());
}

ApiResponse ApiCore::HandleDiscovery(const ApiRequest& req, bool* handled) {
  *handled = true;
  auto parts = SplitPath(req.path);
  if (req.method != "GET") {
    *handled = false;
    return {};
  }
  if (parts.size() == 1 && (parts[0] == "api" || parts[0] == "apis")) {
    bool core = parts[0] == "api";
    // Aggregated discovery (apidiscovery.k8s.io/v2) when asked for first; clients tell the
    // format from the Content-Type parameters.
    if (ConversionFromAccept(req.accept, "APIGroupDiscoveryList", "apidiscovery.k8s.io", {"v2"})) {
      ApiResponse r = JsonResponse(200, registry_.AggregatedDiscovery(core));
      r.content_type = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
      return r;
    }
    return JsonResponse(200, core ? registry_.ApiVersions() : registry_.ApiGroupList());
  }
  std::optional<json> resources;
  if (parts.size() == 2 && parts[0] == "api") {
    resources = registry_.ApiResourceList("", parts[1]);
  } else if (parts.size() == 3 && parts[0] == "apis") {
    resources = registry_.ApiResourceList(parts[1], parts[2]);
  } else if (parts.size() == 2 && parts[0] == "apis") {
    return ApiGroupDocument(parts[1]);
  } else if (parts.size() == 2 && parts[0] == "openapi" && parts[1] == "v2") {
    return OpenApiV2(req);
  } else if (parts.size() >= 2 && parts[0] == "openapi") {
    return HandleOpenApi(parts);
  } else {
    *handled = false;
    return {};
  }
  if (resources) return JsonResponse(200, *resources);
  return ErrorResponse(PathNotFoundErr());
}

std::vector<std::pair<std::string, std::string>> ApiCore::CrdOpenApiDocuments() const {
  std::map<std::string, std::vector<std::shared_ptr<const ResourceInfo>>> by_gv;
  for (const auto& r : registry_.All())
    if (r->custom) by_gv[r->group + "/" + r->version].push_back(r);
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [gv, rs] : by_gv)
    out.emplace_back(gv, CrdOpenApiDocument(rs, schemas_.get()).dump());
  return out;
}

ApiResponse ApiCore::Handle(const ApiRequest& req) {
  bool handled = false;
  ApiResponse d = HandleDiscovery(req, &handled);
  if (handled) {
    d.verb = "get";
    d.resource = "discovery";
    return d;
  }
  std::optional<ApiError> err;
  auto t = ResolvePath(req.path, &err);
  if (!t) {
    auto r = ErrorResponse(err ? *err : PathNotFoundErr());
    r.verb = "unknown";
    return r;
  }
  ApiResponse r = HandleResource(req, *t);
  r.resource = t->ri->resource + (t->sub.empty() ? "" : "/" + t->sub);
  return r;
}

namespace {

constexpr const char* kMethodNotAllowed =
    "the server does not allow this method on the requested resource";

ApiResponse WithVerb(ApiResponse r, const std::string& verb) {
  r.verb = verb;
  return r;
}

// The verb a request is authorized and counted as: its method, and for GET and DELETE whether
// it names one object. Empty for a method the server does not serve.
std::string RequestVerb(const ApiRequest& req, const Target& t) {
  const std::string& m = req.method;
  if (m == "GET")
    return t.name.empty() ? (ParseBoolParam(Q(req.query, "watch")) ? "watch" : "list") : "get";
  if (m == "POST") return "create";
  if (m == "PUT") return "update";
  if (m == "PATCH") return "patch";
  if (m == "DELETE") return t.name.empty() ? "deletecollection" : "delete";
  return "";
}

// A known method on a path that cannot take it: POST to a named object (but evictions), PUT or
// PATCH to a collection, evictions by anything but POST, POST to a collection's subresource.
bool MethodRefusedOnPath(const std::string& m, const Target& t) {
  return (m == "POST" && !t.name.empty() && t.sub != "eviction") ||
         ((m == "PUT" || m == "PATCH") && t.name.empty()) || (m != "POST" && t.sub == "eviction") ||
         (m == "POST" && t.name.empty() && !t.sub.empty());
}

// Write options from the query: dryRun, fieldValidation, and for create, update and patch the
// field manager and force (apply only). A refused option is the response to send.
std::optional<ApiResponse> ParseWriteOpts(const ApiRequest& req, const std::string& verb,
                                          WriteOpts* wo) {
  if (auto it = req.query.find("dryRun");
      it != req.query.end() && verb != "get" && verb != "list" && verb != "watch") {
    if (auto e = ParseDryRun(json::array({it->second}), &wo->dry_run)) return ErrorResponse(*e);
  }
  wo->strict = Q(req.query, "fieldValidation") == "Strict";
  wo->user = req.user;
  wo->groups = req.groups;
  wo->user_extra = req.user_extra;
  if (verb != "create" && verb != "update" && verb != "patch") return std::nullopt;
  const bool apply = MediaType(req.content_type) == "application/apply-patch+yaml";
  auto invalid = [&](const std::string& field, const std::string& msg) {
    return ErrorResponse(InvalidErr(verb == "patch"    ? "PatchOptions"
                                    : verb == "create" ? "CreateOptions"
                                                       : "UpdateOptions",
                                    "meta.k8s.io", "", {{"FieldValueInvalid", msg, field}}));
  };
  wo->field_manager = Q(req.query, "fieldManager");
  auto force = req.query.find("force");
  if (force != req.query.end()) {
    if (!apply) return invalid("force", "Forbidden: may not be specified for non-apply patch");
    wo->force = ParseBoolParam(force->second);
  }
  if (apply && wo->field_manager.empty())
    return invalid("fieldManager", "Required value: is required for apply patch");
  if (wo->field_manager.size() > 128)
    return invalid("fieldManager", "Too long: may not be more than 128 bytes");
  // Without fieldManager the manager is the User-Agent up to its first '/'.
  if (wo->field_manager.empty()) {
    wo->field_manager = req.user_agent.substr(0, req.user_agent.find('/'));
    if (wo->field_manager.empty()) wo->field_manager = "unknown";
  }
  return std::nullopt;
}

// The response to an ApiResult for a request on `ri`: its error status, or the object with
// admission warnings as Warning headers.
ApiResponse ResultResponse(const ResourceInfo& ri, const std::string& verb, ApiResult res) {
  ApiResponse r;
  r.verb = verb;
  if (!res.ok()) {
    r = res.obj.is_object() && res.obj.contains("code") ? JsonResponse(res.err->code, res.obj)
                                                        : ErrorResponse(*res.err);
    if (res.err->retry_after_seconds > 0 && r.headers.empty())
      r.headers.emplace_back("Retry-After", std::to_string(res.err->retry_after_seconds));
    r.verb = verb;
    return r;
  }
  r.code = res.code;
  for (const auto& w : res.warnings)
    r.headers.emplace_back("Warning", "299 - " + nlohmann::json(w).dump());
  // A write's result is the object just stored: send its stored JSON when it is that very
  // state (same kind, version and resourceVersion) rather than serializing it again.
  if (res.stored && ri.storage != "events" && res.stored->api_version == ri.ApiVersion() &&
      res.obj.is_object() && res.obj.value("kind", "") == ri.kind && res.obj.contains("metadata") &&
      res.obj["metadata"].is_object() &&
      res.obj["metadata"].value("resourceVersion", "") == std::to_string(res.stored->rv)) {
    r.body = res.stored->json;
    return r;
  }
  if (ri.storage == "events" && ri.group == "events.k8s.io" &&
      res.obj.value("apiVersion", "") == "v1")
    res.obj = CoreEventToEventsV1(res.obj);
  else if (res.obj.is_object() && res.obj.value("kind", "") == ri.kind)
    res.obj["apiVersion"] = ri.ApiVersion();
  r.body = res.obj.dump();
  return r;
}

// The request body as JSON, from JSON, YAML or protobuf; an empty body is null.
std::optional<ApiError> DecodeRequestBody(const ApiRequest& req, std::size_t max_bytes,
                                          json* body) {
  if (req.body.size() > max_bytes) {
    ApiError e;
    e.code = 413;
    e.reason = "RequestEntityTooLarge";
    e.message = "Request entity too large: limit is " + std::to_string(max_bytes);
    return e;
  }
  if (req.body.empty()) return std::nullopt;
  std::string ct = MediaType(req.content_type);
  if (ct == "application/vnd.kubernetes.protobuf") {
    // kubectl's generators and typed clients send built-in objects as protobuf; answered in
    // JSON (the Accept header lists it).
    auto decoded = DecodeK8sProtobuf(req.body);
    if (!decoded.ok()) {
      if (decoded.status().code() == StatusCode::kUnimplemented) return UnsupportedMediaTypeErr(ct);
      return BadRequestErr(decoded.status().message());
    }
    *body = std::move(*decoded);
  } else if (ct == "application/yaml" || ct == "application/apply-patch+yaml") {
    auto y = YamlToJson(req.body);
    if (!y.ok()) return BadRequestErr(y.status().message());
    *body = std::move(*y);
  } else {
    *body = json::parse(req.body, nullptr, false);
    if (body->is_discarded())
      return BadRequestErr(
          "couldn't get version/kind; json parse error: invalid character in request body");
  }
  return std::nullopt;
}

// The storage layer refuses a create that carries a resourceVersion (a positive number: "0" and
// unparseable values pass), with a bare 500 status.
std::optional<ApiError> CreateWithResourceVersion(const json& body) {
  if (!body.is_object() || !body.contains("metadata") || !body["metadata"].is_object())
    return std::nullopt;
  const auto& rv = body["metadata"].value("resourceVersion", json());
  if (!rv.is_string()) return std::nullopt;
  auto n = ParseUint(rv.get<std::string>());
  if (!n || *n == 0) return std::nullopt;
  ApiError e;
  e.code = 500;
  e.message = "resourceVersion should not be set on objects to be created";
  return e;
}

}  // namespace

// The authorizer's answer to a request, a 403 response when it is denied. Every authenticated
// user may ask about itself (the bootstrap ClusterRole system:basic-user, bound to
// system:authenticated).
std::optional<ApiResponse> ApiCore::AuthorizeRequest(const ApiRequest& req, const Target& t,
                                                     const std::string& verb) const {
  const auto& ri = *t.ri;
  const bool self_review =
      ri.review && ri.resource.rfind("selfsubject", 0) == 0 && req.user != "system:anonymous";
  if (!authorizer_ || self_review) return std::nullopt;
  Attributes a;
  a.user = req.user;
  a.groups = req.groups;
  a.verb = verb;
  a.api_group = ri.group;
  a.resource = ri.resource;
  a.subresource = t.sub;
  a.namespace_ = t.ns;
  a.name = t.name;
  a.path = req.path;
  if (authorizer_->Authorize(a).allowed) return std::nullopt;
  return WithVerb(JsonResponse(403, ForbiddenStatus(a)), verb);
}

// get and list, as objects or (kubectl get) as a server-side printed meta.k8s.io Table.
ApiResponse ApiCore::HandleRead(const ApiRequest& req, const Target& t, const std::string& verb,
                                const WriteOpts& wo) {
  const auto& ri = *t.ri;
  auto finish = [&](ApiResult res) { return ResultResponse(ri, verb, std::move(res)); };
  std::optional<std::string> table_version = TableVersionFromAccept(req.accept);
  IncludeObject include = IncludeObject::kMetadata;
  if (table_version) {
    auto inc = ParseIncludeObject(Q(req.query, "includeObject"));
    if (!inc.ok()) return finish(ApiResult::Err(BadRequestErr(inc.status().message())));
    include = *inc;
  }
  ApiResponse r;
  r.verb = verb;
  if (verb == "list") {
    if (!table_version) {
      auto pieces = std::make_shared<ListStream>();
      auto res = ListPieces(t, req.query, pieces.get());
      if (!res.ok()) return finish(res);
      r.list = std::move(pieces);
      return r;
    }
    auto res = ListBody(t, req.query, &r.body);
    if (!res.ok()) return finish(res);
    json list = json::parse(r.body);
    std::vector<json> items;
    for (auto& it : list["items"]) items.push_back(std::move(it));
    r.body = RenderTable(ri, *table_version, include, items, list["metadata"]);
    return r;
  }
  if (t.sub == "scale") return finish(ScaleRequest(t, verb, "", json(), wo));
  auto res = Get(t);
  if (!table_version || !res.ok()) return finish(std::move(res));
  json md = {{"resourceVersion", res.obj["metadata"].value("resourceVersion", "")}};
  if (res.obj.value("kind", "") == ri.kind) res.obj["apiVersion"] = ri.ApiVersion();
  r.body = RenderTable(ri, *table_version, include, {res.obj}, md);
  return r;
}

// delete and deletecollection: DeleteOptions from the body, gracePeriodSeconds from the query;
// a collection is deleted object by object and answered with the list of those deleted.
ApiResult ApiCore::DeleteRequest(const ApiRequest& req, const Target& t, const std::string& verb,
                                 const json& body, WriteOpts wo) {
  json opts = body.is_object() ? body : json::object();
  if (auto e = ParseDryRun(opts.value("dryRun", json()), &wo.dry_run)) return ApiResult::Err(*e);
  if (auto g = ParseUint(Q(req.query, "gracePeriodSeconds"))) opts["gracePeriodSeconds"] = *g;
  if (verb == "delete") return Delete(t, opts, wo);
  std::string list_body;
  auto lr = ListBody(t, req.query, &list_body);
  if (!lr.ok()) return lr;
  json list = json::parse(list_body);
  json deleted = json::array();
  for (auto& item : list["items"]) {
    Target it = t;
    it.name = item["metadata"].value("name", "");
    it.ns = item["metadata"].value("namespace", "");
    auto dr = Delete(it, opts, wo);
    if (dr.ok()) deleted.push_back(std::move(dr.obj));
  }
  list["items"] = deleted;
  return ApiResult{std::nullopt, list, 200};
}

// Requests with a body: create (eviction, review, scale), update and patch.
ApiResult ApiCore::WriteRequest(const ApiRequest& req, const Target& t, const std::string& verb,
                                json body, WriteOpts wo) {
  if (verb == "create" && t.sub == "eviction") {
    if (body.is_object() && body.contains("deleteOptions") && body["deleteOptions"].is_object())
      if (auto e = ParseDryRun(body["deleteOptions"].value("dryRun", json()), &wo.dry_run))
        return ApiResult::Err(*e);
    return Evict(t, body, wo);
  }
  if (t.ri->review) return Review(t, std::move(body), req);
  if (t.sub == "scale") return ScaleRequest(t, verb, req.content_type, body, wo);
  if (verb == "create") {
    if (auto e = CreateWithResourceVersion(body)) return ApiResult::Err(*e);
    return Create(t, std::move(body), wo);
  }
  if (verb == "update") return Update(t, std::move(body), wo);
  return Patch(t, req.content_type, body, wo);
}

ApiResponse ApiCore::HandleResource(const ApiRequest& req, const Target& t) {
  const auto& ri = *t.ri;
  const std::string verb = RequestVerb(req, t);
  if (verb.empty())
    return WithVerb(ErrorResponse(MethodNotAllowedErr(kMethodNotAllowed)), req.method);
  if (MethodRefusedOnPath(req.method, t))
    return WithVerb(ErrorResponse(MethodNotAllowedErr(kMethodNotAllowed)), verb);
  if (auto denied = AuthorizeRequest(req, t, verb)) return *denied;
  WriteOpts wo;
  if (auto refused = ParseWriteOpts(req, verb, &wo)) return WithVerb(*refused, verb);
  auto finish = [&](ApiResult res) { return ResultResponse(ri, verb, std::move(res)); };
  if (ri.review && verb != "create")
    return finish(ApiResult::Err(MethodNotAllowedErr(kMethodNotAllowed)));
  if (verb == "watch") return WithVerb(StartWatch(req, t), verb);
  if (verb == "list" || verb == "get") return HandleRead(req, t, verb, wo);
  json body;
  if (auto e = DecodeRequestBody(req, opts_.max_body_bytes, &body))
    return finish(ApiResult::Err(*e));
  if (verb == "delete" || verb == "deletecollection")
    return finish(DeleteRequest(req, t, verb, body, wo));
  return finish(WriteRequest(req, t, verb, std::move(body), wo));
}

}  // namespace gg::sim
