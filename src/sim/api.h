// ApiCore: the REST semantics of the simulated API server, independent of HTTP: request
// routing by path, CRUD with resourceVersion/generation/status-subresource rules, patches,
// graceful deletion, eviction, list with selectors and paging, watch set-up, discovery.
// server.cc puts it behind cpp-httplib; the in-process SimServer API calls it directly.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "sim/api_error.h"
#include "sim/openapi_v2.h"
#include "sim/registry.h"
#include "sim/store.h"
#include "sim/table.h"

namespace gg::sim {

class SchemaSet;
class Authorizer;
class Admission;
struct AdmissionOutcome;
struct ListScan;  // one list's scan (api_read.cc)

struct ApiRequest {
  std::string method;  // GET POST PUT PATCH DELETE
  std::string path;
  std::map<std::string, std::string> query;
  std::string content_type;
  std::string accept;
  std::string body;
  std::string user_agent;
  std::string user;  // authenticated user ("" = anonymous admin when authz is off)
  std::vector<std::string> groups;
  nlohmann::json user_extra = nlohmann::json::object();  // userInfo.extra: key -> [values]
};

// What a watch request asks for; streamed by the HTTP layer.
struct WatchSpec {
  std::shared_ptr<const ResourceInfo> ri;
  std::shared_ptr<Watcher> watcher;
  bool bookmarks = false;
  bool initial_events_end = false;  // sendInitialEvents: bookmark after the initial state
  int timeout_seconds = 0;          // 0 = server default
  std::string expired_message;      // non-empty: send one ERROR 410 and close
  std::uint64_t start_rv = 0;
  std::size_t initial_count = 0;
  // Non-empty: every event object is a Table of one row (kubectl get -w).
  std::string table_version;
  IncludeObject include_object = IncludeObject::kMetadata;
};

// A LIST body as pieces: `head`, the stored objects' JSON joined by commas, `tail` (the
// objects are shared with the store, so a 1 GB list is streamed without being copied).
struct ListStream {
  std::string head, tail;
  std::vector<ObjPtr> items;
  std::size_t Size() const {
    std::size_t n = head.size() + tail.size() + (items.empty() ? 0 : items.size() - 1);
    for (const auto& o : items) n += o->json.size();
    return n;
  }
  std::string Join() const;
};

struct ApiResponse {
  int code = 200;
  std::string body;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  std::optional<WatchSpec> watch;
  std::shared_ptr<ListStream> list;  // set instead of `body` for plain LISTs
  // For metrics: verb and resource as the request resolved.
  std::string verb, resource;
};

struct ApiResult {
  std::optional<ApiError> err;
  nlohmann::json obj;
  int code = 200;
  // The committed object when this result is a write's outcome: its JSON is `obj` serialized,
  // so the response reuses it instead of serializing 15 KB again.
  std::shared_ptr<const Obj> stored;
  std::vector<std::string> warnings;  // admission warnings (Warning: 299 headers)
  bool ok() const { return !err.has_value(); }
  static ApiResult Err(ApiError e) {
    ApiResult r;
    r.err = std::move(e);
    return r;
  }
};

// An object serialized ahead of its commit: metadata.resourceVersion is a placeholder at
// rv_pos until ApiCore::FinishPending (under the store lock) writes the real one.
struct PendingObj {
  std::shared_ptr<Obj> obj;
  std::size_t rv_pos = std::string::npos;
};

// The outcome of an update computed outside the store lock: either final (`done`: an error,
// a no-op, a dry run) or an object to commit (`remove`: its finalizers are gone while it is
// being deleted, so the commit removes it).
struct PreparedUpdate {
  std::optional<ApiResult> done;
  nlohmann::json next;
  bool remove = false;
  PendingObj pending;
  std::vector<std::string> warnings;
};

// The resolved target of a resource request.
struct Target {
  std::shared_ptr<const ResourceInfo> ri;
  std::string ns, name, sub;
  std::string Key() const { return ri && ri->namespaced ? ns + "/" + name : name; }
};

struct WriteOpts {
  bool dry_run = false;
  bool seed = false;    // in-process seeding: keep status, auto-create namespaces
  bool strict = false;  // fieldValidation=Strict
  // Field ownership (metadata.managedFields): set for API requests; in-process writers
  // (controllers, seeding) leave managedFields as they are.
  std::string field_manager;
  bool force = false;  // server-side apply: take conflicting fields
  // Who writes (admission: ValidatingAdmissionPolicy's request.userInfo).
  std::string user;
  std::vector<std::string> groups;
  nlohmann::json user_extra = nlohmann::json::object();
};

struct ApiCoreOptions {
  std::string kube_version = "1.35";
  std::size_t watch_history = 20000;
  std::size_t watcher_queue_limit = 200000;
  std::size_t max_body_bytes = 3 * 1024 * 1024;
  bool graceful_pod_deletion = true;  // a kubelet will finish termination
  std::string openapi_dir;
};

class ApiCore {
 public:
  ApiCore(ApiCoreOptions opts, Clock& clock);
  ~ApiCore();

  ApiResponse Handle(const ApiRequest& req);

  // Building blocks (also used by the in-process API and the simulated controllers).
  std::optional<Target> ResolvePath(std::string_view path, std::optional<ApiError>* err);
  ApiResult Create(const Target& t, nlohmann::json body, const WriteOpts& o);
  ApiResult Get(const Target& t);
  ApiResult Update(const Target& t, nlohmann::json body, const WriteOpts& o);
  ApiResult Patch(const Target& t, std::string_view content_type, const nlohmann::json& patch,
                  const WriteOpts& o);
  // Graceful delete (finalizers, pod grace). `immediate` removes at once.
  ApiResult Delete(const Target& t, const nlohmann::json& delete_options, const WriteOpts& o,
                   bool immediate = false);
  // Removes a terminating object if its uid still matches (the simulated kubelet).
  void FinishTermination(const Target& t, const std::string& uid);
  ApiResult Evict(const Target& pod, const nlohmann::json& eviction, const WriteOpts& o);
  // authorization.k8s.io access reviews and authentication.k8s.io SelfSubjectReview: the
  // request evaluated (through the RBAC authorizer when one is set) and answered, not stored.
  ApiResult Review(const Target& t, nlohmann::json body, const ApiRequest& req);
  // <resource>/scale: read, replace or patch an autoscaling/v1 Scale of the parent's
  // spec.replicas (scale.cc). `verb` is get, update or patch.
  ApiResult ScaleRequest(const Target& t, const std::string& verb, const std::string& content_type,
                         const nlohmann::json& body, const WriteOpts& o);
  // The JSON list body (string concatenation of stored objects).
  ApiResult ListBody(const Target& t, const std::map<std::string, std::string>& q,
                     std::string* body);
  // The same list as pieces; objects stored in another version than `t`'s are rendered.
  ApiResult ListPieces(const Target& t, const std::map<std::string, std::string>& q,
                       ListStream* out);
  // Parsed objects of a collection (controllers, tests).
  std::vector<nlohmann::json> ListObjects(const std::string& storage, const std::string& ns = "");

  // The `kubernetes` Service and its Endpoints in `default`, pointing at the serving address.
  void SeedKubernetesService(const std::string& host, int port);

  Registry& registry() { return registry_; }
  Store& store() { return store_; }
  const std::string& openapi_dir() const { return opts_.openapi_dir; }
  void SetAuthorizer(std::shared_ptr<Authorizer> a) { authorizer_ = std::move(a); }
  Clock& clock() { return clock_; }
  // Renders a stored object for `view` (apiVersion / events.k8s.io conversion).
  std::string Render(const Obj& o, const ResourceInfo& view) const;
  std::string NowRfc3339() const;
  // meta.k8s.io Table of `objs` (each as served for `view`); `list_meta` becomes its metadata.
  std::string RenderTable(const ResourceInfo& view, const std::string& table_version,
                          IncludeObject inc, const std::vector<nlohmann::json>& objs,
                          const nlohmann::json& list_meta) const;

 private:
  ApiResponse HandleResource(const ApiRequest& req, const Target& t);
  // HandleResource's steps: authorization, reads, deletes and writes with a body.
  std::optional<ApiResponse> AuthorizeRequest(const ApiRequest& req, const Target& t,
                                              const std::string& verb) const;
  ApiResponse HandleRead(const ApiRequest& req, const Target& t, const std::string& verb,
                         const WriteOpts& wo);
  ApiResult DeleteRequest(const ApiRequest& req, const Target& t, const std::string& verb,
                          const nlohmann::json& body, WriteOpts wo);
  ApiResult WriteRequest(const ApiRequest& req, const Target& t, const std::string& verb,
                         nlohmann::json body, WriteOpts wo);
  ApiResponse HandleDiscovery(const ApiRequest& req, bool* handled);
  ApiResponse ApiGroupDocument(const std::string& group) const;
  ApiResponse HandleOpenApi(const std::vector<std::string>& parts) const;
  ApiResponse OpenApiIndex() const;
  ApiResponse OpenApiV2(const ApiRequest& req) const;  // GET /openapi/v2 (api_read.cc)
  std::set<std::string> ServedOpenApiPaths() const;
  // ListPieces' steps: wait for a resourceVersion not reached yet, scan the collection.
  std::optional<ApiError> WaitForResourceVersion(std::uint64_t want);
  std::optional<ApiError> ScanList(const Target& t, const LabelSelector& ls,
                                   const FieldSelector& fs, ListScan* s,
                                   std::vector<ObjPtr>* items);
  ApiResponse StartWatch(const ApiRequest& req, const Target& t);
  ApiResult CommitLocked(const Target& t, const ObjPtr& old, nlohmann::json next, bool dry_run,
                         PendingObj* pending = nullptr);
  ApiResult UpdateLocked(const Target& t, const ObjPtr& old, nlohmann::json next,
                         const WriteOpts& o, bool check_rv, bool from_patch);
  // Everything an update does short of touching the store (no lock needed). `old_parsed`:
  // old->json already parsed (moved from).
  PreparedUpdate PrepareUpdate(const Target& t, const ObjPtr& old, nlohmann::json next,
                               const WriteOpts& o, bool check_rv, bool from_patch,
                               nlohmann::json* old_parsed = nullptr);
  std::optional<ApiError> KeepServiceClusterIp(const Target& t, const nlohmann::json& old_j,
                                               nlohmann::json& next) const;
  // Patch's steps: the update a patch makes (apply separately), and apply's create.
  PreparedUpdate PatchUpdate(const Target& t, const std::string& ct, const nlohmann::json& patch,
                             const WriteOpts& o, const ObjPtr& old);
  PreparedUpdate ApplyPatchUpdate(const Target& t, const ObjPtr& old, nlohmann::json& cur,
                                  const nlohmann::json& patch, const WriteOpts& o, bool same_view);
  ApiResult CreateByApply(const Target& t, nlohmann::json body, const WriteOpts& o);
  ApiResult CommitUpdateLocked(const Target& t, const ObjPtr& old, PreparedUpdate& p);
  ApiResult OptimisticUpdate(const Target& t,
                             const std::function<PreparedUpdate(const ObjPtr&)>& compute,
                             const std::function<ApiResult()>& on_missing);
  // `size_hint`: the expected size of the serialized object (the old one's for an update), so
  // it is written into one buffer instead of growing by doubling; 0 = unknown.
  // `same_labels`: an object whose labels `obj` has too (their index is copied, not rebuilt).
  PendingObj MakePending(const Target& t, nlohmann::json& obj, std::size_t size_hint = 0,
                         const Obj* same_labels = nullptr) const;
  ObjPtr FinishPending(PendingObj& p, std::uint64_t rv, nlohmann::json* dom) const;
  std::optional<ApiError> Validate(const Target& t, const nlohmann::json& obj, bool create,
                                   const WriteOpts& o);
  void PrepareForCreate(const Target& t, nlohmann::json& obj, const WriteOpts& o);
  // The admission chain (sim/admission.h) around Validate(): mutates `obj` in place.
  AdmissionOutcome Admit(const Target& t, nlohmann::json& obj, const nlohmann::json* old,
                         const WriteOpts& o, bool create);
  std::optional<ApiError> AdmitDelete(const Target& t, const nlohmann::json& old,
                                      const WriteOpts& o);
  ObjPtr MakeObj(const Target& t, nlohmann::json& obj, std::uint64_t rv) const;
  void RemoveLocked(const Target& t, const ObjPtr& old);
  // Service defaults and allocation (services.cc); `old` on update.
  void DefaultService(nlohmann::json& svc) const;
  std::optional<ApiError> AllocateServiceLocked(nlohmann::json& svc, const nlohmann::json* old);
  ApiResult DeleteLocked(const Target& t, const nlohmann::json& delete_options, const WriteOpts& o,
                         bool immediate);
  // DeleteLocked's steps.
  ApiResult TerminateNamespaceLocked(const Target& t, const ObjPtr& old, nlohmann::json j,
                                     const WriteOpts& o);
  std::optional<ApiResult> GracefulPodDeleteLocked(const Target& t, const ObjPtr& old,
                                                   nlohmann::json& j,
                                                   const nlohmann::json& delete_options);
  void RemoveNamespaceContentLocked(const std::string& ns);
  void RemoveCrdLocked(const std::string& name, const nlohmann::json& crd);
  // Store keys of every namespaced kind.
  std::vector<std::string> NamespacedStorages() const;
  // A terminating namespace whose content is gone is finalized and removed.
  void MaybeFinishNamespaceLocked(const std::string& ns);
  std::string NewUid();
  std::string RandomSuffix();
  void LoadSchemas();
  // (group/version, OpenAPI v3 document) for every served CRD group version.
  std::vector<std::pair<std::string, std::string>> CrdOpenApiDocuments() const;

  // The schema context of a kind for field ownership (cached per group/version/kind).
  struct SsaType TypeFor(const ResourceInfo& ri) const;
  std::optional<ApiError> StrictFields(const Target& t, const nlohmann::json& obj,
                                       const WriteOpts& o) const;
  void TrackUpdate(const ResourceInfo& ri, const std::string& sub, const nlohmann::json& old,
                   nlohmann::json& next, const WriteOpts& o) const;

  ApiCoreOptions opts_;
  mutable std::mutex type_mu_;
  mutable std::map<std::string, const nlohmann::json*> type_cache_;
  Clock& clock_;
  Registry registry_;
  Store store_;
  std::mutex rng_mu_;
  std::mt19937_64 rng_;
  std::shared_ptr<SchemaSet> schemas_;
  mutable OpenApiV2Cache openapi_v2_;  // the /openapi/v2 document, rebuilt when CRDs change
  std::shared_ptr<Authorizer> authorizer_;
  std::unique_ptr<Admission> admission_;
};

// Go strconv.ParseBool.
bool ParseBoolParam(std::string_view v);
// core/v1 <-> events.k8s.io/v1 Event conversion (docs/reference/kubernetes-api.md, "Events").
nlohmann::json CoreEventToEventsV1(const nlohmann::json& ev);
nlohmann::json EventsV1ToCoreEvent(const nlohmann::json& ev);

}  // namespace gg::sim
