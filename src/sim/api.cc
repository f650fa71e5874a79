// ApiCore: routing and write semantics (create, update, patch, delete) of the simulator.
#include "sim/api.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <mutex>
#include <set>

#include "common/log.h"
#include "common/time_util.h"
#include "sim/admission.h"
#include "sim/api_util.h"
#include "sim/claim_status.h"
#include "sim/controllers.h"
#include "sim/patch.h"
#include "sim/pdb.h"
#include "sim/rbac.h"
#include "sim/schema.h"
#include "sim/selector.h"
#include "sim/slice_taints.h"
#include "sim/ssa.h"

namespace gg::sim {

using nlohmann::json;

bool ParseBoolParam(std::string_view v) {
  return v == "1" || v == "t" || v == "T" || v == "true" || v == "TRUE" || v == "True";
}

ApiCore::ApiCore(ApiCoreOptions opts, Clock& clock)
    : opts_(std::move(opts)),
      clock_(clock),
      registry_(opts_.kube_version),
      store_(opts_.watch_history, opts_.watcher_queue_limit),
      rng_(std::random_device{}()),
      admission_(std::make_unique<Admission>(opts_.kube_version)) {
  LoadSchemas();
  // The namespaces every cluster has.
  for (const char* ns : {"default", "kube-system", "kube-public", "kube-node-lease"}) {
    Target t{registry_.Find("", "v1", "namespaces"), "", ns, ""};
    WriteOpts o;
    o.seed = true;
    Create(t, json{{"metadata", {{"name", ns}}}}, o);
  }
  // The PriorityClasses kube-apiserver bootstraps.
  for (json pc : Admission::BootstrapPriorityClasses()) {
    WriteOpts o;
    o.seed = true;
    Create(Target{registry_.Find("scheduling.k8s.io", "v1", "priorityclasses"), "", "", ""},
           std::move(pc), o);
  }
}

ApiCore::~ApiCore() = default;

void ApiCore::LoadSchemas() {
  if (opts_.openapi_dir.empty()) return;
  auto s = LoadBuiltinSchemas(opts_.openapi_dir, opts_.kube_version);
  if (s.ok()) schemas_ = std::make_shared<SchemaSet>(std::move(*s));
}

std::string ApiCore::NowRfc3339() const { return FormatRfc3339(clock_.Now()); }

SsaType ApiCore::TypeFor(const ResourceInfo& ri) const {
  SsaType t;
  t.set = schemas_.get();
  t.status_subresource = ri.status_subresource;
  if (ri.custom) {
    t.root = ri.schema.is_object() ? &ri.schema : nullptr;
    return t;
  }
  if (!schemas_) return t;
  std::string key = ri.group + "/" + ri.version + "/" + ri.kind;
  std::scoped_lock lock(type_mu_);
  auto it = type_cache_.find(key);
  if (it == type_cache_.end()) {
    auto name = schemas_->NameForGvk(ri.group, ri.version, ri.kind);
    it = type_cache_.emplace(key, name ? schemas_->Find(*name) : nullptr).first;
  }
  t.root = it->second;
  return t;
}

void ApiCore::TrackUpdate(const ResourceInfo& ri, const std::string& sub, const json& old,
                          json& next, const WriteOpts& o) const {
  if (!next.is_object() || !next.contains("metadata") || !next["metadata"].is_object()) return;
  json& md = next["metadata"];
  // A write that leaves managedFields out keeps them.
  if (!md.contains("managedFields") && old.is_object() && old.contains("metadata") &&
      old["metadata"].contains("managedFields"))
    md["managedFields"] = old["metadata"]["managedFields"];
  if (o.field_manager.empty() || ri.storage == "events") return;
  ManagerInfo who{o.field_manager, ri.ApiVersion(), sub == "status" ? "status" : "", NowRfc3339()};
  json mf = UpdateManagedFields(old, next, TypeFor(ri), who);
  if (mf.empty())
    md.erase("managedFields");
  else
    md["managedFields"] = std::move(mf);
}

std::string ApiCore::NewUid() {
  std::scoped_lock lock(rng_mu_);
  std::uint64_t a = rng_(), b = rng_();
  a = (a & 0xffffffffffff0fffULL) | 0x0000000000004000ULL;
  b = (b & 0x3fffffffffffffffULL) | 0x8000000000000000ULL;
  char buf[40];
  std::snprintf(buf, sizeof buf, "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(a >> 32),
                static_cast<unsigned>((a >> 16) & 0xffff), static_cast<unsigned>(a & 0xffff),
                static_cast<unsigned>(b >> 48),
                static_cast<unsigned long long>(b & 0xffffffffffffULL));
  return buf;
}

std::string ApiCore::RandomSuffix() {
  static constexpr char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";
  std::scoped_lock lock(rng_mu_);
  std::string s;
  for (int i = 0; i < 5; ++i) s += kAlphabet[rng_() % (sizeof(kAlphabet) - 1)];
  return s;
}

std::optional<Target> ApiCore::ResolvePath(std::string_view path, std::optional<ApiError>* err) {
  auto parts = SplitPath(path);
  *err = PathNotFoundErr();
  std::string group, version;
  std::size_t i = 0;
  if (parts.size() >= 2 && parts[0] == "api") {
    version = parts[1];
    i = 2;
  } else if (parts.size() >= 3 && parts[0] == "apis") {
    group = parts[1];
    version = parts[2];
    i = 3;
  } else {
    return std::nullopt;
  }
  std::vector<std::string> rest(parts.begin() + static_cast<long>(i), parts.end());
  if (rest.empty()) return std::nullopt;
  Target t;
  std::string resource;
  if (rest[0] == "namespaces" && rest.size() >= 3 &&
      !(rest.size() == 3 && (rest[2] == "status" || rest[2] == "finalize"))) {
    t.ns = rest[1];
    resource = rest[2];
    if (rest.size() > 3) t.name = rest[3];
    if (rest.size() > 4) t.sub = rest[4];
    if (rest.size() > 5) return std::nullopt;
  } else {
    resource = rest[0];
    if (rest.size() > 1) t.name = rest[1];
    if (rest.size() > 2) t.sub = rest[2];
    if (rest.size() > 3) return std::nullopt;
  }
  t.ri = registry_.Find(group, version, resource);
  if (!t.ri) return std::nullopt;
  if (!t.ri->namespaced && !t.ns.empty()) return std::nullopt;
  if (t.ri->namespaced && t.ns.empty() && !t.name.empty()) return std::nullopt;
  if (!t.sub.empty()) {
    if (t.name.empty()) return std::nullopt;
    bool ok = (t.sub == "status" && t.ri->status_subresource) ||
              (t.sub == "eviction" && t.ri->eviction) || (t.sub == "scale" && t.ri->scale) ||
              (t.sub == "finalize" && t.ri->resource == "namespaces");
    if (!ok) return std::nullopt;
  }
  err->reset();
  return t;
}

namespace {

// metadata.resourceVersion is only known at commit, under the store lock, but serializing a
// 15 KB object is the expensive part of a write: objects are serialized beforehand with this
// placeholder (a control character no client sends; dumped as \u0001) spliced over later.
constexpr std::string_view kRvPlaceholder = "\x01rv\x01";
constexpr std::string_view kRvDumped = "\"resourceVersion\":\"\\u0001rv\\u0001\"";
constexpr std::size_t kRvValueOffset = sizeof("\"resourceVersion\":") - 1;
// An update's object is serialized into the old one's size plus this; a stored string keeps at
// most this much spare capacity (more, and it is copied to its exact size).
constexpr std::size_t kTightSlack = 256;

// Whether two objects carry the same metadata.labels (neither having any counts as the same).
bool SameLabels(const json& a, const json& b) {
  auto labels = [](const json& o) -> const json* {
    if (!o.is_object()) return nullptr;
    auto md = o.find("metadata");
    if (md == o.end() || !md->is_object()) return nullptr;
    auto l = md->find("labels");
    return l == md->end() ? nullptr : &*l;
  };
  const json *x = labels(a), *y = labels(b);
  return (!x && !y) || (x && y && *x == *y);
}

}  // namespace

PendingObj ApiCore::MakePending(const Target& t, json& obj, std::size_t size_hint,
                                const Obj* same_labels) const {
  obj["metadata"]["resourceVersion"] = std::string(kRvPlaceholder);
  auto o = std::make_shared<Obj>();
  const auto& md = obj["metadata"];
  o->name = md.value("name", "");
  o->ns = md.value("namespace", "");
  o->uid = md.value("uid", "");
  o->api_version = obj.value("apiVersion", "");
  // Most writes leave the labels alone: their interned index is the old object's.
  o->labels = same_labels ? same_labels->labels : Labels(LabelsOf(obj));
  std::string_view group = t.ri->storage == "events" ? std::string_view() : t.ri->group;
  o->fields = IndexFields(group, t.ri->resource, t.ri->namespaced, obj);
  if (size_hint == 0) {
    o->json = obj.dump();
  } else {
    // dump()'s doubling growth made five allocations over 1 KB per 15 KB node write, and on
    // a 100k-node heap each of those searches bins of scattered free chunks.
    o->json.reserve(size_hint);
    nlohmann::detail::serializer<json> out(nlohmann::detail::output_adapter<char>(o->json), ' ',
                                           nlohmann::detail::error_handler_t::strict);
    out.dump(obj, false, false, 0);
  }
  PendingObj p;
  p.rv_pos = o->json.find(kRvDumped);
  p.obj = std::move(o);
  return p;
}

ObjPtr ApiCore::FinishPending(PendingObj& p, std::uint64_t rv, json* dom) const {
  std::string digits = std::to_string(rv);
  std::string& j = p.obj->json;
  if (p.rv_pos != std::string::npos) {
    const std::size_t value_at = p.rv_pos + kRvValueOffset;
    const std::size_t rest_at = p.rv_pos + kRvDumped.size();
    const std::size_t size = value_at + digits.size() + 2 + (j.size() - rest_at);
    if (j.capacity() <= size + kTightSlack) {
      // Serialized into a sized buffer: the value shrinks in place.
      j.replace(value_at, rest_at - value_at, "\"" + digits + "\"");
    } else {
      // One exact-size copy: dump() leaves up to 2x capacity (100k nodes feel it), and
      // replace-then-shrink moved the 15 KB twice.
      std::string out;
      out.reserve(size);
      out.append(j, 0, value_at);
      out += '"';
      out += digits;
      out += '"';
      out.append(j, rest_at, std::string::npos);
      j = std::move(out);
    }
  } else {
    j.shrink_to_fit();
  }
  p.obj->rv = rv;
  if (dom) (*dom)["metadata"]["resourceVersion"] = digits;
  ObjPtr out = std::move(p.obj);
  p.obj = nullptr;
  return out;
}

ObjPtr ApiCore::MakeObj(const Target& t, json& obj, std::uint64_t rv) const {
  PendingObj p = MakePending(t, obj);
  return FinishPending(p, rv, &obj);
}

void ApiCore::PrepareForCreate(const Target& t, json& obj, const WriteOpts& o) {
  const auto& ri = *t.ri;
  ApplyWorkloadDefaults(ri.group, ri.resource, obj);
  PrepareSliceTaints(ri, opts_.kube_version, NowRfc3339(), obj);
  json& md = obj["metadata"];
  // Seeded objects (population, scenarios) keep their uid and creationTimestamp so that
  // ownerReferences between them hold.
  if (!o.seed || !md.contains("uid") || !md["uid"].is_string() ||
      md["uid"].get<std::string>().empty())
    md["uid"] = NewUid();
  if (!o.seed || !md.contains("creationTimestamp") || !md["creationTimestamp"].is_string())
    md["creationTimestamp"] = NowRfc3339();
  md.erase("resourceVersion");
  md.erase("deletionTimestamp");
  md.erase("deletionGracePeriodSeconds");
  if (ri.has_generation)
    md["generation"] = 1;
  else
    md.erase("generation");
  if (ri.resource == "namespaces") {
    if (!obj.contains("spec") || !obj["spec"].is_object()) obj["spec"] = json::object();
    obj["spec"]["finalizers"] = json::array({"kubernetes"});
    obj["status"] = {{"phase", "Active"}};
    if (!md.contains("labels") || !md["labels"].is_object()) md["labels"] = json::object();
    md["labels"]["kubernetes.io/metadata.name"] = md["name"];
  }
  if (ri.group.empty() && ri.resource == "secrets" && !obj.contains("type")) obj["type"] = "Opaque";
  if (o.seed) {
    if (ri.group.empty() && ri.resource == "services") DefaultService(obj);
    return;
  }
  if (ri.resource == "pods" && ri.group.empty()) {
    obj["status"] = {{"phase", "Pending"}, {"qosClass", "BestEffort"}};
  } else if (ri.resource == "poddisruptionbudgets") {
    obj["status"] = {{"currentHealthy", 0},
                     {"desiredHealthy", 0},
                     {"disruptionsAllowed", 0},
                     {"expectedPods", 0}};
  } else if (ri.resource == "customresourcedefinitions") {
    const auto& spec = obj.value("spec", json::object());
    json names = spec.value("names", json::object());
    json stored = json::array();
    for (const auto& v : spec.value("versions", json::array()))
      if (v.is_object() && v.value("storage", false)) stored.push_back(v.value("name", ""));
    std::string now = NowRfc3339();
    obj["status"] = {{"acceptedNames", names},
                     {"storedVersions", stored},
                     {"conditions",
                      {{{"type", "NamesAccepted"},
                        {"status", "True"},
                        {"reason", "NoConflicts"},
                        {"message", "no conflicts found"},
                        {"lastTransitionTime", now}},
                       {{"type", "Established"},
                        {"status", "True"},
                        {"reason", "InitialNamesAccepted"},
                        {"message", "the initial names have been accepted"},
                        {"lastTransitionTime", now}}}}};
  } else if (ri.status_subresource && ri.resource != "nodes" && ri.resource != "namespaces") {
    obj.erase("status");
  }
  if (ri.group.empty() && ri.resource == "services") DefaultService(obj);
}

std::optional<ApiError> ApiCore::Validate(const Target& t, const json& obj, bool create,
                                          const WriteOpts& /*o*/) {
  const auto& ri = *t.ri;
  std::string name = obj["metadata"].value("name", "");
  std::vector<StatusCause> causes;
  if (ri.custom) {
    causes = ValidateObjectMeta(obj["metadata"], ri.namespaced);
    if (schemas_ && ri.schema.is_object()) {
      auto v = schemas_->Validate(obj, ri.schema);
      causes.insert(causes.end(), v.causes.begin(), v.causes.end());
    }
  } else {
    // Events are validated in the version the body is in (both views share one store).
    bool core_event = ri.storage == "events" && obj.value("apiVersion", "") == "v1";
    causes = ValidateBuiltin(obj, core_event ? "" : ri.group, core_event ? "v1" : ri.version,
                             ri.kind, ri.namespaced, create, opts_.kube_version);
  }
  if (!causes.empty()) return InvalidErr(ri.kind, ri.group, name, std::move(causes));
  return std::nullopt;
}

std::optional<ApiError> ApiCore::StrictFields(const Target& t, const json& obj,
                                              const WriteOpts& o) const {
  // fieldValidation=Strict is a decoding check: it sees the request's object before
  // admission prunes what the schema does not declare.
  const auto& ri = *t.ri;
  if (!o.strict || !schemas_) return std::nullopt;
  SsaType type = TypeFor(ri);
  if (!type.root) return std::nullopt;
  auto unknown = schemas_->UnknownFields(obj, *type.root);
  if (unknown.empty()) return std::nullopt;
  return BadRequestErr(ri.kind + " in version \"" + ri.version + "\" cannot be handled as a " +
                       ri.kind + ": " + StrictDecodingMessage(unknown));
}

ApiResult ApiCore::CommitLocked(const Target& t, const ObjPtr& old, json next, bool dry_run,
                                PendingObj* pending) {
  (void)old;
  if (dry_run) return ApiResult{std::nullopt, std::move(next), 200};
  std::uint64_t rv = store_.NextRvLocked();
  ObjPtr o = pending && pending->obj ? FinishPending(*pending, rv, &next) : MakeObj(t, next, rv);
  store_.PutLocked(t.ri->storage, t.Key(), o);
  admission_->Observe(*t.ri, t.name, &next);
  if (t.ri->resource == "customresourcedefinitions" && t.ri->group == "apiextensions.k8s.io")
    registry_.ApplyCrd(next).IgnoreError();
  if (authorizer_ && t.ri->group == "rbac.authorization.k8s.io")
    authorizer_->Add(next).IgnoreError();
  ApiResult r{std::nullopt, std::move(next), 200};
  r.stored = std::move(o);
  return r;
}

void ApiCore::RemoveLocked(const Target& t, const ObjPtr& old) {
  json last = json::parse(old->json);
  std::uint64_t rv = store_.NextRvLocked();
  ObjPtr o = MakeObj(t, last, rv);
  store_.RemoveLocked(t.ri->storage, t.Key(), o);
  admission_->Observe(*t.ri, t.name, nullptr);
  if (authorizer_ && t.ri->group == "rbac.authorization.k8s.io")
    authorizer_->Remove(t.ri->kind, t.ri->namespaced ? t.ns : "", t.name);
  if (t.ri->namespaced) MaybeFinishNamespaceLocked(t.ns);
}

ApiResult ApiCore::Create(const Target& t, json body, const WriteOpts& o) {
  const auto& ri = *t.ri;
  if (!body.is_object())
    return ApiResult::Err(BadRequestErr("the body of the request must be a JSON object"));
  if (ri.storage == "events" && ri.group == "events.k8s.io") {
    // Validated in its own version first, stored in core/v1 form.
    body["apiVersion"] = ri.ApiVersion();
    body["kind"] = ri.kind;
  }
  if (body.contains("kind") && body["kind"].is_string() && body["kind"] != ri.kind)
    return ApiResult::Err(BadRequestErr("the object kind \"" + body["kind"].get<std::string>() +
                                        "\" does not match the expected kind \"" + ri.kind + "\""));
  if (body.contains("apiVersion") && body["apiVersion"].is_string() &&
      body["apiVersion"] != ri.ApiVersion())
    return ApiResult::Err(
        BadRequestErr("the API version in the data (" + body["apiVersion"].get<std::string>() +
                      ") does not match the expected API version (" + ri.ApiVersion() + ")"));
  body["apiVersion"] = ri.ApiVersion();
  body["kind"] = ri.kind;
  if (!body.contains("metadata") || !body["metadata"].is_object())
    body["metadata"] = json::object();
  json& md = body["metadata"];
  if (ri.namespaced) {
    std::string ns = md.value("namespace", "");
    if (!ns.empty() && !t.ns.empty() && ns != t.ns)
      return ApiResult::Err(BadRequestErr(
          "the namespace of the provided object does not match the namespace sent on the request"));
    if (ns.empty()) md["namespace"] = t.ns;
  } else {
    md.erase("namespace");
  }
  std::string name = md.value("name", "");
  if (name.empty() && md.contains("generateName") && md["generateName"].is_string() &&
      !md["generateName"].get<std::string>().empty()) {
    name = md["generateName"].get<std::string>() + RandomSuffix();
    md["name"] = name;
  }
  PrepareForCreate(t, body, o);
  if (auto e = StrictFields(t, body, o)) return ApiResult::Err(*e);
  if (!o.seed) TrackUpdate(ri, "", json(), body, o);
  AdmissionOutcome admitted = Admit(t, body, nullptr, o, true);
  if (admitted.err) return ApiResult::Err(*admitted.err);
  Target tt = t;
  tt.name = name;
  tt.ns = md.value("namespace", "");
  if (ri.storage == "events" && ri.group == "events.k8s.io") body = EventsV1ToCoreEvent(body);
  const bool service = ri.group.empty() && ri.resource == "services";
  PendingObj pending;
  if (!o.dry_run && !service) pending = MakePending(tt, body);
  std::scoped_lock lock(store_.mu());
  if (service)
    if (auto e = AllocateServiceLocked(body, nullptr)) return ApiResult::Err(*e);
  if (ri.namespaced) {
    Target nst{registry_.Find("", "v1", "namespaces"), "", tt.ns, ""};
    auto ns_obj = store_.GetLocked(nst.ri->storage, tt.ns);
    if (!ns_obj) {
      if (!o.seed) return ApiResult::Err(NotFoundErr("namespaces", "", tt.ns));
      json nsj = {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", tt.ns}}}};
      PrepareForCreate(nst, nsj, o);
      CommitLocked(nst, nullptr, std::move(nsj), false);
    } else if (ns_obj->json.find("\"deletionTimestamp\"") != std::string::npos && !o.seed) {
      ApiError e = ForbiddenErr(QualifiedResource(ri.resource, ri.group) + " \"" + name +
                                "\" is forbidden: unable to create new content in namespace " +
                                tt.ns + " because it is being terminated");
      e.causes.push_back({"NamespaceTerminating", "namespace " + tt.ns + " is being terminated",
                          "metadata.namespace"});
      return ApiResult::Err(e);
    }
  }
  if (store_.GetLocked(ri.storage, tt.Key()))
    return ApiResult::Err(AlreadyExistsErr(ri.resource, ri.group, name));
  auto r = CommitLocked(tt, nullptr, std::move(body), o.dry_run, &pending);
  r.code = 201;
  r.warnings = std::move(admitted.warnings);
  return r;
}

ApiResult ApiCore::Get(const Target& t) {
  std::scoped_lock lock(store_.mu());
  auto o = store_.GetLocked(t.ri->storage, t.Key());
  if (!o) return ApiResult::Err(NotFoundErr(t.ri->resource, t.ri->group, t.name));
  return ApiResult{std::nullopt, json::parse(Render(*o, *t.ri)), 200};
}

namespace {

// Everything an update may change that counts for metadata.generation.
json GenerationView(const json& obj, bool drop_status) {
  json v = obj;
  v.erase("metadata");
  if (drop_status) v.erase("status");
  v.erase("apiVersion");
  v.erase("kind");
  return v;
}

bool HasFinalizers(const json& obj) {
  const auto& md = obj["metadata"];
  return md.contains("finalizers") && md["finalizers"].is_array() && !md["finalizers"].empty();
}

}  // namespace

ApiResult ApiCore::UpdateLocked(const Target& t, const ObjPtr& old, json next, const WriteOpts& o,
                                bool check_rv, bool from_patch) {
  PreparedUpdate p = PrepareUpdate(t, old, std::move(next), o, check_rv, from_patch);
  if (p.done) return std::move(*p.done);
  return CommitUpdateLocked(t, old, p);
}

ApiResult ApiCore::CommitUpdateLocked(const Target& t, const ObjPtr& old, PreparedUpdate& p) {
  if (p.remove) {
    std::uint64_t rv = store_.NextRvLocked();
    ObjPtr last = FinishPending(p.pending, rv, &p.next);
    store_.RemoveLocked(t.ri->storage, t.Key(), last);
    admission_->Observe(*t.ri, t.name, nullptr);
    if (t.ri->namespaced) MaybeFinishNamespaceLocked(t.ns);
    ApiResult r{std::nullopt, std::move(p.next), 200};
    r.warnings = std::move(p.warnings);
    return r;
  }
  ApiResult r = CommitLocked(t, old, std::move(p.next), false, &p.pending);
  r.warnings = std::move(p.warnings);
  return r;
}

ApiResult ApiCore::OptimisticUpdate(const Target& t,
                                    const std::function<PreparedUpdate(const ObjPtr&)>& compute,
                                    const std::function<ApiResult()>& on_missing) {
  // Parse, patch, validate and serialize outside the store lock; commit only if the object
  // is still the one we started from (the resourceVersion check the real server's
  // GuaranteedUpdate does), else start over. After a few lost races hold the lock instead.
  for (int attempt = 0;; ++attempt) {
    ObjPtr old;
    {
      std::unique_lock lock(store_.mu());
      old = store_.GetLocked(t.ri->storage, t.Key());
      if (!old) {
        lock.unlock();
        return on_missing();
      }
      if (attempt >= 3) {
        PreparedUpdate p = compute(old);
        if (p.done) return std::move(*p.done);
        return CommitUpdateLocked(t, old, p);
      }
    }
    PreparedUpdate p = compute(old);
    std::scoped_lock lock(store_.mu());
    if (store_.GetLocked(t.ri->storage, t.Key()) != old) continue;
    if (p.done) return std::move(*p.done);
    return CommitUpdateLocked(t, old, p);
  }
}

namespace {

// The update's resourceVersion against the stored one: a mismatch is a conflict, and a custom
// resource's PUT must carry one.
std::optional<ApiError> CheckUpdateResourceVersion(const Target& t, const Obj& old,
                                                   const json& next, bool from_patch) {
  const auto& ri = *t.ri;
  std::string want_rv = next["metadata"].value("resourceVersion", "");
  if (!want_rv.empty() && want_rv != std::to_string(old.rv))
    return ConflictErr(ri.resource, ri.group, t.name);
  if (want_rv.empty() && ri.custom && !from_patch)
    return InvalidErr(ri.kind, ri.group, t.name,
                      {{"FieldValueInvalid", "Invalid value: 0: must be specified for an update",
                        "metadata.resourceVersion"}});
  return std::nullopt;
}

// The status subresource writes only status; the main resource keeps the stored status when
// status is a subresource.
void KeepStatusSplit(const Target& t, const json& old_j, json& next) {
  if (t.sub == "status") {
    json merged = old_j;
    if (next.contains("status"))
      merged["status"] = next["status"];
    else
      merged.erase("status");
    next = std::move(merged);
  } else if (t.ri->status_subresource) {
    if (old_j.contains("status"))
      next["status"] = old_j["status"];
    else
      next.erase("status");
  }
}

// Metadata only the server sets keeps its stored values; apiVersion and kind are the stored ones.
void KeepServerMetadata(const ResourceInfo& ri, json& old_j, json& next) {
  json& md = next["metadata"];
  const json& omd = old_j["metadata"];
  for (const char* k : {"uid", "creationTimestamp", "deletionTimestamp",
                        "deletionGracePeriodSeconds", "generation", "name", "namespace"}) {
    if (omd.contains(k))
      md[k] = omd[k];
    else
      md.erase(k);
  }
  next["apiVersion"] = old_j.value("apiVersion", ri.ApiVersion());
  next["kind"] = ri.kind;
}

}  // namespace

// The allocated ClusterIP survives a PUT that leaves it out, and may not change.
std::optional<ApiError> ApiCore::KeepServiceClusterIp(const Target& t, const json& old_j,
                                                      json& next) const {
  const auto& ri = *t.ri;
  if (!ri.group.empty() || ri.resource != "services" || t.sub == "status" ||
      !next.contains("spec") || !next["spec"].is_object() || !old_j.contains("spec"))
    return std::nullopt;
  json& spec = next["spec"];
  const json& ospec = old_j["spec"];
  for (const char* k : {"clusterIP", "clusterIPs"})
    if (!spec.contains(k) && ospec.contains(k)) spec[k] = ospec[k];
  if (ospec.value("clusterIP", "") != "" &&
      spec.value("clusterIP", "") != ospec.value("clusterIP", "") &&
      spec.value("type", "ClusterIP") != "ExternalName")
    return InvalidErr("Service", "", t.name,
                      {{"FieldValueInvalid",
                        "Invalid value: []string{\"" + spec.value("clusterIP", "") +
                            "\"}: may not change once set",
                        "spec.clusterIPs[0]"}});
  DefaultService(next);
  return std::nullopt;
}

PreparedUpdate ApiCore::PrepareUpdate(const Target& t, const ObjPtr& old, json next,
                                      const WriteOpts& o, bool check_rv, bool from_patch,
                                      json* old_parsed) {
  const auto& ri = *t.ri;
  PreparedUpdate out;
  auto finish = [&](ApiResult r) {
    if (r.ok() && r.warnings.empty()) r.warnings = out.warnings;
    out.done = std::move(r);
    return std::move(out);
  };
  json old_j = old_parsed ? std::move(*old_parsed) : json::parse(old->json);
  if (ri.storage == "events" && ri.group == "events.k8s.io" && next.value("apiVersion", "") != "v1")
    next = EventsV1ToCoreEvent(next);
  if (!next.is_object())
    return finish(ApiResult::Err(BadRequestErr("the body of the request must be a JSON object")));
  if (!next.contains("metadata") || !next["metadata"].is_object())
    next["metadata"] = json::object();
  if (check_rv)
    if (auto e = CheckUpdateResourceVersion(t, *old, next, from_patch))
      return finish(ApiResult::Err(*e));
  KeepStatusSplit(t, old_j, next);
  if (auto e =
          AdmitClaimStatus(t, opts_.kube_version, authorizer_.get(), from_patch, old_j, next, o))
    return finish(ApiResult::Err(*e));
  PrepareSliceTaints(ri, opts_.kube_version, NowRfc3339(), next);
  ApplyWorkloadDefaults(ri.group, ri.resource, next);
  if (auto e = KeepServiceClusterIp(t, old_j, next)) return finish(ApiResult::Err(*e));
  KeepServerMetadata(ri, old_j, next);
  // Admission (defaults, plugins, validation) before the generation and no-op checks, as
  // the real server decodes and admits before storage compares the bytes.
  if (auto e = StrictFields(t, next, o)) return finish(ApiResult::Err(*e));
  AdmissionOutcome admitted = Admit(t, next, &old_j, o, false);
  if (admitted.err) return finish(ApiResult::Err(*admitted.err));
  out.warnings = std::move(admitted.warnings);
  json& md = next["metadata"];
  if (ri.has_generation && t.sub != "status") {
    bool drop_status = ri.status_subresource || !ri.custom;
    if (GenerationView(next, drop_status) != GenerationView(old_j, drop_status))
      md["generation"] = old_j["metadata"].value("generation", 0) + 1;
  }
  md["resourceVersion"] = std::to_string(old->rv);
  TrackUpdate(ri, t.sub, old_j, next, o);
  if (next == old_j) return finish(ApiResult{std::nullopt, std::move(old_j), 200});
  if (o.dry_run) return finish(ApiResult{std::nullopt, std::move(next), 200});
  // Finalizers gone on an object being deleted: now it goes.
  out.remove = md.contains("deletionTimestamp") && !HasFinalizers(next) &&
               (ri.resource != "pods" || md.value("deletionGracePeriodSeconds", 0) == 0);
  out.pending = MakePending(t, next, old->json.size() + kTightSlack,
                            SameLabels(next, old_j) ? old.get() : nullptr);
  out.next = std::move(next);
  return out;
}

ApiResult ApiCore::Update(const Target& t, json body, const WriteOpts& o) {
  const auto& ri = *t.ri;
  if (!body.is_object())
    return ApiResult::Err(BadRequestErr("the body of the request must be a JSON object"));
  if (body.contains("metadata") && body["metadata"].is_object()) {
    std::string n = body["metadata"].value("name", "");
    if (!n.empty() && n != t.name)
      return ApiResult::Err(BadRequestErr("the name of the object (" + n +
                                          ") does not match the name on the URL (" + t.name + ")"));
    std::string ns = body["metadata"].value("namespace", "");
    if (ri.namespaced && !ns.empty() && ns != t.ns)
      return ApiResult::Err(BadRequestErr(
          "the namespace of the provided object does not match the namespace sent on the request"));
  }
  return OptimisticUpdate(
      t, [&](const ObjPtr& old) { return PrepareUpdate(t, old, body, o, true, false); },
      [&] { return ApiResult::Err(NotFoundErr(ri.resource, ri.group, t.name)); });
}

namespace {

// The patch types served for `ri`; an unknown one is 415, a non-object body (but JSON patch) 400.
std::optional<ApiError> CheckPatchType(const ResourceInfo& ri, const std::string& ct,
                                       const json& patch) {
  if (ct == "application/strategic-merge-patch+json" && ri.custom)
    return UnsupportedMediaTypeErr(ct);
  if (ct != "application/json-patch+json" && ct != "application/merge-patch+json" &&
      ct != "application/apply-patch+yaml" && ct != "application/strategic-merge-patch+json")
    return UnsupportedMediaTypeErr(ct);
  if (ct != "application/json-patch+json" && !patch.is_object())
    return BadRequestErr("the body of the request must be a JSON object");
  return std::nullopt;
}

// A patch that names a different object is a 400 in the real server.
std::optional<ApiError> CheckPatchedName(const json& next, const std::string& name) {
  const json& nmd = next.contains("metadata") ? next["metadata"] : json::object();
  if (!nmd.is_object() || nmd.value("name", name) == name) return std::nullopt;
  return BadRequestErr("the name of the object (" + nmd.value("name", "") +
                       ") does not match the name on the URL (" + name + ")");
}

PreparedUpdate Done(ApiError e) {
  PreparedUpdate out;
  out.done = ApiResult::Err(std::move(e));
  return out;
}

}  // namespace

// Server-side apply onto the stored object `cur`: the apply records its own managedFields entry.
PreparedUpdate ApiCore::ApplyPatchUpdate(const Target& t, const ObjPtr& old, json& cur,
                                         const json& patch, const WriteOpts& o, bool same_view) {
  const auto& ri = *t.ri;
  std::string want_rv = patch.contains("metadata") && patch["metadata"].is_object()
                            ? patch["metadata"].value("resourceVersion", "")
                            : "";
  if (!want_rv.empty() && want_rv != std::to_string(old->rv))
    return Done(ConflictErr(ri.resource, ri.group, t.name));
  ManagerInfo who{o.field_manager, ri.ApiVersion(), t.sub == "status" ? "status" : "",
                  NowRfc3339()};
  auto applied = ServerSideApply(cur, patch, TypeFor(ri), who, o.force, ri.kind, ri.group);
  if (applied.err) return Done(*applied.err);
  WriteOpts untracked = o;
  untracked.field_manager.clear();  // the apply recorded its own entry
  return PrepareUpdate(t, old, std::move(applied.object), untracked, true, true,
                       same_view ? &cur : nullptr);
}

// The update a patch of content type `ct` makes of the stored object `old`.
PreparedUpdate ApiCore::PatchUpdate(const Target& t, const std::string& ct, const json& patch,
                                    const WriteOpts& o, const ObjPtr& old) {
  const auto& ri = *t.ri;
  const bool same_view = old->api_version == ri.ApiVersion();
  json cur = json::parse(same_view ? old->json : Render(*old, ri));
  if (ct == "application/apply-patch+yaml")
    return ApplyPatchUpdate(t, old, cur, patch, o, same_view);
  StatusOr<json> next = InvalidArgumentError("unsupported patch type");
  if (ct == "application/json-patch+json") {
    next = ApplyJsonPatch(cur, patch);
    if (!next.ok() && IsJsonPatchTestFailure(next.status()))
      return Done(InvalidErr(ri.kind, ri.group, t.name,
                             {{"FieldValueInvalid", next.status().message(), ""}}));
  } else if (ct == "application/strategic-merge-patch+json") {
    next = ApplyStrategicMergePatch(cur, patch, ri.kind);
  } else {
    next = ApplyMergePatch(cur, patch);
  }
  if (!next.ok()) return Done(BadRequestErr(next.status().message()));
  if (auto e = CheckPatchedName(*next, t.name)) return Done(*e);
  return PrepareUpdate(t, old, std::move(*next), o, true, true, same_view ? &cur : nullptr);
}

// Server-side apply of an object that does not exist creates it (a resourceVersion other than
// "0" is refused with the storage layer's bare 500).
ApiResult ApiCore::CreateByApply(const Target& t, json body, const WriteOpts& o) {
  const auto& ri = *t.ri;
  if (body.is_object()) {
    body["metadata"]["name"] = t.name;
    if (ri.namespaced) body["metadata"]["namespace"] = t.ns;
    const std::string rv = body["metadata"].value("resourceVersion", "");
    if (!rv.empty() && rv != "0" && rv.find_first_not_of("0123456789") == std::string::npos) {
      ApiError e;
      e.code = 500;
      e.message = "resourceVersion should not be set on objects to be created";
      return ApiResult::Err(e);
    }
    ManagerInfo who{o.field_manager, ri.ApiVersion(), "", NowRfc3339()};
    body = ServerSideApply(json(), body, TypeFor(ri), who, o.force, ri.kind, ri.group).object;
  }
  WriteOpts untracked = o;
  untracked.field_manager.clear();
  return Create(t, std::move(body), untracked);
}

ApiResult ApiCore::Patch(const Target& t, std::string_view content_type, const json& patch,
                         const WriteOpts& o) {
  const auto& ri = *t.ri;
  const std::string ct = MediaType(content_type);
  if (auto e = CheckPatchType(ri, ct, patch)) return ApiResult::Err(*e);
  auto compute = [&](const ObjPtr& old) { return PatchUpdate(t, ct, patch, o, old); };
  auto on_missing = [&]() -> ApiResult {
    if (ct == "application/apply-patch+yaml") return CreateByApply(t, patch, o);
    return ApiResult::Err(NotFoundErr(ri.resource, ri.group, t.name));
  };
  return OptimisticUpdate(t, compute, on_missing);
}

ApiResult ApiCore::Delete(const Target& t, const json& delete_options, const WriteOpts& o,
                          bool immediate) {
  std::scoped_lock lock(store_.mu());
  return DeleteLocked(t, delete_options, o, immediate);
}

namespace {

bool IsTerminatingNamespace(const ObjPtr& ns) {
  return ns && ns->json.find("\"deletionTimestamp\"") != std::string::npos;
}

}  // namespace

std::vector<std::string> ApiCore::NamespacedStorages() const {
  std::vector<std::string> storages;
  for (const auto& r : registry_.All())
    if (r->namespaced && !r->review &&
        std::find(storages.begin(), storages.end(), r->storage) == storages.end())
      storages.push_back(r->storage);
  return storages;
}

void ApiCore::MaybeFinishNamespaceLocked(const std::string& ns) {
  if (ns.empty()) return;
  auto ns_ri = registry_.Find("", "v1", "namespaces");
  auto ns_obj = store_.GetLocked(ns_ri->storage, ns);
  if (!IsTerminatingNamespace(ns_obj)) return;
  for (const auto& s : NamespacedStorages()) {
    bool any = false;
    store_.ForEachLocked(s, ns, "", [&](const std::string&, const ObjPtr&) {
      any = true;
      return false;
    });
    if (any) return;
  }
  // Empty: the namespace controller removes the `kubernetes` finalizer (PUT .../finalize);
  // the namespace goes once no finalizer of any kind is left.
  json j = json::parse(ns_obj->json);
  if (j.contains("spec") && j["spec"].is_object()) j["spec"].erase("finalizers");
  Target t{ns_ri, "", ns, ""};
  if (!HasFinalizers(j)) {
    RemoveLocked(t, ns_obj);
    return;
  }
  if (ns_obj->json.find("\"finalizers\"") != std::string::npos)
    CommitLocked(t, ns_obj, std::move(j), false);
}

namespace {

// DeleteOptions.preconditions: the uid and resourceVersion the caller expects.
std::optional<ApiError> CheckDeletePreconditions(const Target& t, const Obj& old,
                                                 const json& delete_options) {
  const auto& ri = *t.ri;
  if (!delete_options.is_object() || !delete_options.contains("preconditions") ||
      !delete_options["preconditions"].is_object())
    return std::nullopt;
  const auto& pre = delete_options["preconditions"];
  if (pre.contains("uid") && pre["uid"].is_string() && pre["uid"] != old.uid)
    return ConflictErrMsg(ri.resource, ri.group, t.name,
                          "Precondition failed: UID in precondition: " +
                              pre["uid"].get<std::string>() + ", UID in object meta: " + old.uid);
  if (pre.contains("resourceVersion") && pre["resourceVersion"].is_string() &&
      pre["resourceVersion"] != std::to_string(old.rv))
    return ConflictErrMsg(ri.resource, ri.group, t.name,
                          "Precondition failed: ResourceVersion in precondition: " +
                              pre["resourceVersion"].get<std::string>() +
                              ", ResourceVersion in object meta: " + std::to_string(old.rv));
  return std::nullopt;
}

// A pod's grace period: the delete's gracePeriodSeconds, else its spec's
// terminationGracePeriodSeconds, else 30 s.
long PodGraceSeconds(const json& pod, const json& delete_options) {
  long grace = 30;
  if (pod.contains("spec") && pod["spec"].contains("terminationGracePeriodSeconds") &&
      pod["spec"]["terminationGracePeriodSeconds"].is_number_integer())
    grace = pod["spec"]["terminationGracePeriodSeconds"].get<long>();
  if (delete_options.is_object() && delete_options.contains("gracePeriodSeconds") &&
      delete_options["gracePeriodSeconds"].is_number_integer())
    grace = delete_options["gracePeriodSeconds"].get<long>();
  return grace;
}

bool IsCoreResource(const ResourceInfo& ri, const char* resource) {
  return ri.group.empty() && ri.resource == resource;
}

}  // namespace

// Namespace deletion is two-phase: Terminating now; the namespace controller deletes the
// content, then removes the `kubernetes` finalizer and the namespace goes.
ApiResult ApiCore::TerminateNamespaceLocked(const Target& t, const ObjPtr& old, json j,
                                            const WriteOpts& o) {
  const auto& ri = *t.ri;
  json& md = j["metadata"];
  if (md.contains("deletionTimestamp"))
    return ApiResult::Err(ConflictErrMsg(
        ri.resource, ri.group, t.name,
        "The system is ensuring all content is removed from this namespace.  Upon completion, "
        "this namespace will automatically be purged by the system."));
  md["deletionTimestamp"] = NowRfc3339();
  md["deletionGracePeriodSeconds"] = 0;
  j["status"]["phase"] = "Terminating";
  if (o.dry_run) return ApiResult{std::nullopt, std::move(j), 200};
  auto r = CommitLocked(t, old, j, false);
  for (const auto& s : NamespacedStorages()) {
    auto ri2 = registry_.FindByStorage(s);
    std::vector<ObjPtr> content;
    store_.ForEachLocked(s, t.name, "", [&](const std::string&, const ObjPtr& p) {
      content.push_back(p);
      return true;
    });
    for (const auto& p : content)
      DeleteLocked(Target{ri2, t.name, p->name, ""}, json::object(), WriteOpts{}, false);
  }
  MaybeFinishNamespaceLocked(t.name);
  if (auto now = store_.GetLocked(ri.storage, t.Key()))
    return ApiResult{std::nullopt, json::parse(now->json), 200};
  return r;
}

// A running pod's graceful deletion: deletionTimestamp at the end of its grace period (a
// shorter one than already set wins); the kubelet finishes it. nullopt when the pod goes now.
std::optional<ApiResult> ApiCore::GracefulPodDeleteLocked(const Target& t, const ObjPtr& old,
                                                          json& j, const json& delete_options) {
  long grace = PodGraceSeconds(j, delete_options);
  std::string phase = j.contains("status") ? j["status"].value("phase", "") : "";
  std::string node = j.contains("spec") ? j["spec"].value("nodeName", "") : "";
  bool running = !node.empty() && phase != "Succeeded" && phase != "Failed";
  if (!running || grace <= 0) return std::nullopt;
  json& md = j["metadata"];
  long cur = md.value("deletionGracePeriodSeconds", -1L);
  if (md.contains("deletionTimestamp") && cur >= 0 && cur <= grace)
    return ApiResult{std::nullopt, std::move(j), 200};
  md["deletionTimestamp"] = FormatRfc3339(clock_.Now() + std::chrono::seconds(grace));
  md["deletionGracePeriodSeconds"] = grace;
  return CommitLocked(t, old, std::move(j), false);
}

// Cascade of an immediate namespace removal: everything in it goes.
void ApiCore::RemoveNamespaceContentLocked(const std::string& ns) {
  for (const auto& s : NamespacedStorages()) {
    auto ri2 = registry_.FindByStorage(s);
    std::vector<std::pair<std::string, ObjPtr>> doomed;
    store_.ForEachLocked(s, ns, "", [&](const std::string& k, const ObjPtr& p) {
      doomed.emplace_back(k, p);
      return true;
    });
    for (auto& [k, p] : doomed) RemoveLocked(Target{ri2, ns, p->name, ""}, p);
  }
}

// A CustomResourceDefinition's removal: its custom resources go and the kind is no longer served.
void ApiCore::RemoveCrdLocked(const std::string& name, const json& crd) {
  std::string group = crd["spec"].value("group", "");
  std::string plural =
      crd["spec"].contains("names") ? crd["spec"]["names"].value("plural", "") : "";
  std::string storage = group + "/" + plural;
  if (auto ri2 = registry_.FindByStorage(storage)) {
    std::vector<ObjPtr> doomed;
    store_.ForEachLocked(storage, "", "", [&](const std::string&, const ObjPtr& p) {
      doomed.push_back(p);
      return true;
    });
    for (auto& p : doomed) RemoveLocked(Target{ri2, p->ns, p->name, ""}, p);
  }
  registry_.RemoveCrd(name);
}

ApiResult ApiCore::DeleteLocked(const Target& t, const json& delete_options, const WriteOpts& o,
                                bool immediate) {
  const auto& ri = *t.ri;
  auto old = store_.GetLocked(ri.storage, t.Key());
  if (!old) return ApiResult::Err(NotFoundErr(ri.resource, ri.group, t.name));
  json j = json::parse(Render(*old, ri));
  if (auto e = AdmitDelete(t, j, o)) return ApiResult::Err(*e);
  if (auto e = CheckDeletePreconditions(t, *old, delete_options)) return ApiResult::Err(*e);
  if (!immediate && IsCoreResource(ri, "namespaces"))
    return TerminateNamespaceLocked(t, old, std::move(j), o);
  if (o.dry_run) return ApiResult{std::nullopt, std::move(j), 200};
  json& md = j["metadata"];
  // Foreground / Orphan propagation: the garbage collector finishes the deletion.
  if (std::string fin = PropagationFinalizer(delete_options);
      !immediate && !fin.empty() && ri.resource != "pods") {
    if (!md.contains("finalizers") || !md["finalizers"].is_array())
      md["finalizers"] = json::array();
    if (std::find(md["finalizers"].begin(), md["finalizers"].end(), fin) == md["finalizers"].end())
      md["finalizers"].push_back(fin);
  }
  if (!immediate && HasFinalizers(j)) {
    if (!md.contains("deletionTimestamp")) {
      md["deletionTimestamp"] = NowRfc3339();
      md["deletionGracePeriodSeconds"] = 0;
      return CommitLocked(t, old, std::move(j), false);
    }
    return ApiResult{std::nullopt, std::move(j), 200};
  }
  if (!immediate && IsCoreResource(ri, "pods") && opts_.graceful_pod_deletion)
    if (auto r = GracefulPodDeleteLocked(t, old, j, delete_options)) return std::move(*r);
  if (IsCoreResource(ri, "namespaces")) RemoveNamespaceContentLocked(t.name);
  if (ri.resource == "customresourcedefinitions" && ri.group == "apiextensions.k8s.io")
    RemoveCrdLocked(t.name, j);
  // Removing a terminating namespace's last object may have finished the namespace already.
  if (store_.GetLocked(ri.storage, t.Key()) != old)
    return ApiResult{std::nullopt, std::move(j), 200};
  RemoveLocked(t, old);
  return ApiResult{std::nullopt, std::move(j), 200};
}

void ApiCore::FinishTermination(const Target& t, const std::string& uid) {
  std::scoped_lock lock(store_.mu());
  auto old = store_.GetLocked(t.ri->storage, t.Key());
  if (!old || old->uid != uid) return;
  json j = json::parse(old->json);
  if (!j["metadata"].contains("deletionTimestamp")) return;
  if (HasFinalizers(j)) {
    if (j["metadata"].value("deletionGracePeriodSeconds", 0) != 0) {
      j["metadata"]["deletionGracePeriodSeconds"] = 0;
      CommitLocked(t, old, std::move(j), false);
    }
    return;
  }
  RemoveLocked(t, old);
}

ApiResult ApiCore::Evict(const Target& pod_t, const json& eviction, const WriteOpts& o) {
  Target pt = pod_t;
  pt.sub.clear();
  json delete_options =
      eviction.is_object() ? eviction.value("deleteOptions", json::object()) : json::object();
  if (eviction.is_object() && eviction.contains("metadata") && eviction["metadata"].is_object()) {
    std::string n = eviction["metadata"].value("name", "");
    if (!n.empty() && n != pt.name)
      return ApiResult::Err(BadRequestErr("name in URL does not match name in Eviction object"));
  }
  auto pdb_ri = registry_.Find("policy", "v1", "poddisruptionbudgets");
  {
    std::unique_lock lock(store_.mu());
    auto pod = store_.GetLocked(pt.ri->storage, pt.Key());
    if (!pod) return ApiResult::Err(NotFoundErr("pods", "", pt.name));
    json pod_j = json::parse(pod->json);
    std::vector<json> pdbs;
    store_.ForEachLocked(pdb_ri->storage, pt.ns, "", [&](const std::string&, const ObjPtr& p) {
      pdbs.push_back(json::parse(p->json));
      return true;
    });
    EvictionDecision d = DecideEviction(pod_j, pdbs, NowRfc3339());
    if (d.outcome != EvictionDecision::Outcome::kAllow) {
      ApiError e;
      e.code = d.code;
      e.reason = d.status.value("reason", "");
      e.message = d.status.value("message", "");
      if (d.status.contains("details") && d.status["details"].is_object()) {
        const auto& det = d.status["details"];
        e.retry_after_seconds = det.value("retryAfterSeconds", 0);
        for (const auto& c : det.value("causes", json::array()))
          e.causes.push_back({c.value("reason", ""), c.value("message", ""), c.value("field", "")});
      }
      ApiResult r = ApiResult::Err(e);
      r.obj = d.status;
      return r;
    }
    if (o.dry_run) return ApiResult{std::nullopt, EvictionSuccessStatus(), 201};
    if (d.updated_pdb) {
      json upd = *d.updated_pdb;
      std::string key = pt.ns + "/" + upd["metadata"].value("name", "");
      auto old_pdb = store_.GetLocked(pdb_ri->storage, key);
      if (old_pdb) {
        Target pdbt{pdb_ri, pt.ns, upd["metadata"].value("name", ""), "status"};
        upd["metadata"]["resourceVersion"] = std::to_string(old_pdb->rv);
        auto r = UpdateLocked(pdbt, old_pdb, std::move(upd), WriteOpts{}, true, true);
        if (!r.ok()) return r;
      }
    }
  }
  auto r = Delete(pt, delete_options, o);
  if (!r.ok()) return r;
  return ApiResult{std::nullopt, EvictionSuccessStatus(), 201};
}

}  // namespace gg::sim
