// ApiCore's entry into the admission chain (sim/admission.h): one call per write path.
#include "sim/admission.h"
#include "sim/api.h"

namespace gg::sim {

AdmissionOutcome ApiCore::Admit(const Target& t, nlohmann::json& obj, const nlohmann::json* old,
                                const WriteOpts& o, bool create) {
  AdmissionRequest r;
  r.operation = create ? "CREATE" : "UPDATE";
  r.ri = t.ri;
  r.sub = t.sub;
  const nlohmann::json* md =
      obj.is_object() && obj.contains("metadata") && obj["metadata"].is_object() ? &obj["metadata"]
                                                                                 : nullptr;
  r.name = create && md ? md->value("name", "") : t.name;
  r.ns = t.ri->namespaced ? (create && md ? md->value("namespace", t.ns) : t.ns) : "";
  r.user = o.user;
  r.groups = o.groups;
  r.user_extra = o.user_extra;
  r.dry_run = o.dry_run;
  r.seed = o.seed;
  return admission_->Run(r, obj, old,
                         [&](const nlohmann::json& v) { return Validate(t, v, create, o); });
}

std::optional<ApiError> ApiCore::AdmitDelete(const Target& t, const nlohmann::json& old,
                                             const WriteOpts& o) {
  AdmissionRequest r;
  r.operation = "DELETE";
  r.ri = t.ri;
  r.sub = t.sub;
  r.name = t.name;
  r.ns = t.ri->namespaced ? t.ns : "";
  r.user = o.user;
  r.groups = o.groups;
  r.user_extra = o.user_extra;
  r.dry_run = o.dry_run;
  r.seed = o.seed;
  return admission_->AdmitDelete(r, old);
}

}  // namespace gg::sim
