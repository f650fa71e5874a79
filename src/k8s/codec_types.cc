// Decoders for each built-in projection, and the ParseObject/ParseList/ParseWatchEvent
// instantiations.
#include <unordered_set>

#include "common/time_util.h"
#include "k8s/codec.h"
#include "k8s/json_decode.h"

namespace gg::k8s {
namespace {

namespace od = json::od;
using namespace json;  // NOLINT(google-build-using-namespace): readers used throughout

template <typename Fn>
Status ObjFields(od::value& v, std::string_view where, Fn&& fn) {
  if (IsNull(v)) return OkStatus();
  od::object o;
  if (v.get_object().get(o)) return TypeError(where, "object");
  return ForFields(o, where, fn);
}

template <typename Fn>
Status ArrayObjects(od::value& v, std::string_view where, Fn&& fn) {
  if (IsNull(v)) return OkStatus();
  od::array arr;
  if (v.get_array().get(arr)) return TypeError(where, "array");
  std::size_t i = 0;
  for (auto elem : arr) {
    od::object o;
    std::string here = std::string(where) + "[" + std::to_string(i) + "]";
    if (elem.get_object().get(o)) return TypeError(here, "object");
    Status s = fn(o);
    if (!s.ok()) return s.WithContext(here);
    ++i;
  }
  return OkStatus();
}

bool KeepProjectAnnotation(std::string_view key) {
  return key.starts_with("gpuguardian.io/") || key == kMirrorPodAnnotation;
}

// Conditions kept in the projection: our GPUHealthy whole; any other (another detector's, for
// nodeCondition rules) without message and heartbeat, except the kubelet's Ready and pressure
// conditions in their healthy state (Ready=True, the others False), which every node carries.
// A condition's fields as views into the parser's buffer: what is dropped is never copied, and
// its times (mktime per time) never parsed.
struct RawCondition {
  std::string_view type, status, reason, message;
  std::optional<std::string_view> transition, heartbeat;
};

// Null leaves `out` unchanged; not a string is InvalidArgument(field).
Status ReadView(od::value& v, std::string_view field, std::string_view* out) {
  if (IsNull(v)) return OkStatus();
  if (v.get_string().get(*out)) return TypeError(field, "string");
  return OkStatus();
}
Status ReadOptView(od::value& v, std::string_view field, std::optional<std::string_view>* out) {
  if (IsNull(v)) return OkStatus();
  std::string_view s;
  if (v.get_string().get(s)) return TypeError(field, "RFC 3339 time string");
  *out = s;
  return OkStatus();
}

Status ParseTimeView(const std::optional<std::string_view>& s, std::string_view field,
                     std::optional<WallTime>* out) {
  if (!s) return OkStatus();
  auto t = ParseRfc3339(*s);
  if (!t.ok()) return TypeError(field, "RFC 3339 time");
  *out = *t;
  return OkStatus();
}

bool KubeletConditionHealthy(std::string_view type, std::string_view status) {
  if (type == "Ready") return status == "True";
  return status == "False" && (type == "MemoryPressure" || type == "DiskPressure" ||
                               type == "PIDPressure" || type == "NetworkUnavailable");
}

// Appends the condition when the projection keeps it (times of dropped ones are not checked).
Status KeepNodeCondition(const RawCondition& r, std::vector<NodeCondition>* out) {
  const bool ours = r.type == "GPUHealthy";
  if (!ours && KubeletConditionHealthy(r.type, r.status)) return OkStatus();
  NodeCondition c;
  c.type = r.type;
  c.status = r.status;
  c.reason = r.reason;
  GG_RETURN_IF_ERROR(ParseTimeView(r.transition, "lastTransitionTime", &c.last_transition_time));
  if (ours) {
    c.message = r.message;
    GG_RETURN_IF_ERROR(ParseTimeView(r.heartbeat, "lastHeartbeatTime", &c.last_heartbeat_time));
  }
  out->push_back(std::move(c));
  return OkStatus();
}

Status DecodeNodeCondition(od::object& o, std::vector<NodeCondition>* out) {
  RawCondition r;
  GG_RETURN_IF_ERROR(
      ForFields(o, "condition", [&](od::raw_json_string ck, od::value& cv) -> Status {
        if (ck == "type") return ReadView(cv, "type", &r.type);
        if (ck == "status") return ReadView(cv, "status", &r.status);
        if (ck == "reason") return ReadView(cv, "reason", &r.reason);
        if (ck == "message") return ReadView(cv, "message", &r.message);
        if (ck == "lastTransitionTime") return ReadOptView(cv, "lastTransitionTime", &r.transition);
        if (ck == "lastHeartbeatTime") return ReadOptView(cv, "lastHeartbeatTime", &r.heartbeat);
        return OkStatus();
      }));
  return KeepNodeCondition(r, out);
}

// Node taints and DRA device taints share a shape (key, value, effect, timeAdded).
Status DecodeTaints(od::value& v, const char* path, std::vector<Taint>* out) {
  return ArrayObjects(v, path, [&](od::object& o) {
    Taint t;
    GG_RETURN_IF_ERROR(ForFields(o, "taint", [&](od::raw_json_string tk, od::value& tv) -> Status {
      if (tk == "key") return ReadString(tv, "key", &t.key);
      if (tk == "value") return ReadString(tv, "value", &t.value);
      if (tk == "effect") return ReadString(tv, "effect", &t.effect);
      if (tk == "timeAdded") return ReadTime(tv, "timeAdded", &t.time_added);
      return OkStatus();
    }));
    out->push_back(std::move(t));
    return OkStatus();
  });
}

Status DecodeNode(od::object& obj, Node* n) {
  return ForFields(obj, "Node", [&](od::raw_json_string k, od::value& v) -> Status {
    if (k == "metadata") return DecodeObjectMeta(v, &n->meta, &KeepProjectAnnotation);
    if (k == "spec") {
      return ObjFields(v, "spec", [&](od::raw_json_string sk, od::value& sv) -> Status {
        if (sk == "unschedulable") return ReadBool(sv, "spec.unschedulable", &n->unschedulable);
        if (sk == "taints") {
          return DecodeTaints(sv, "spec.taints", &n->taints);
        }
        return OkStatus();
      });
    }
    if (k == "status") {
      return ObjFields(v, "status", [&](od::raw_json_string sk, od::value& sv) -> Status {
        if (sk == "conditions") {
          // Collected first, then interned once (ConditionList shares equal lists fleet-wide).
          std::vector<NodeCondition> kept;
          GG_RETURN_IF_ERROR(ArrayObjects(sv, "status.conditions", [&](od::object& o) {
            return DecodeNodeCondition(o, &kept);
          }));
          n->conditions.Assign(std::move(kept));
          return OkStatus();
        }
        if (sk == "capacity" || sk == "allocatable") {
          std::int64_t* dst = sk == "capacity" ? &n->gpu_capacity : &n->gpu_allocatable;
          return ObjFields(sv, "status.capacity",
                           [&](od::raw_json_string rk, od::value& rv) -> Status {
                             if (rk == kGpuResource)
                               return ReadQuantityCount(rv, "status.capacity[gpu]", dst);
                             return OkStatus();
                           });
        }
        return OkStatus();
      });
    }
    return OkStatus();
  });
}

Status ReadGpuResources(od::value& v, std::int64_t* out) {
  return ObjFields(v, "resources", [&](od::raw_json_string k, od::value& rv) -> Status {
    if (k == "requests" || k == "limits") {
      return ObjFields(rv, "resources.requests",
                       [&](od::raw_json_string q, od::value& qv) -> Status {
                         if (q != kGpuResource) return OkStatus();
                         std::int64_t n = 0;
                         GG_RETURN_IF_ERROR(ReadQuantityCount(qv, "resources[nvidia.com/gpu]", &n));
                         *out = std::max(*out, n);
                         return OkStatus();
                       });
    }
    return OkStatus();
  });
}

void AddClaim(Pod* p, std::string name) {
  if (name.empty()) return;
  for (const auto& c : p->resource_claims) {
    if (c == name) return;
  }
  p->resource_claims.push_back(std::move(name));
}

Status DecodePod(od::object& obj, Pod* p) {
  return ForFields(obj, "Pod", [&](od::raw_json_string k, od::value& v) -> Status {
    if (k == "metadata") return DecodeObjectMeta(v, &p->meta, &KeepProjectAnnotation);
    if (k == "spec") {
      return ObjFields(v, "spec", [&](od::raw_json_string sk, od::value& sv) -> Status {
        if (sk == "nodeName") return ReadString(sv, "spec.nodeName", &p->node_name);
        if (sk == "priority") return ReadOptInt32(sv, "spec.priority", &p->priority);
        if (sk == "priorityClassName") {
          return ReadString(sv, "spec.priorityClassName", &p->priority_class_name);
        }
        if (sk == "terminationGracePeriodSeconds") {
          return ReadOptInt64(sv, "spec.terminationGracePeriodSeconds",
                              &p->termination_grace_period_seconds);
        }
        if (sk == "containers") {
          return ArrayObjects(sv, "spec.containers", [&](od::object& o) {
            std::int64_t gpus = 0;
            GG_RETURN_IF_ERROR(
                ForFields(o, "container", [&](od::raw_json_string ck, od::value& cv) -> Status {
                  if (ck == "resources") return ReadGpuResources(cv, &gpus);
                  return OkStatus();
                }));
            p->gpu_requests += gpus;
            return OkStatus();
          });
        }
        if (sk == "volumes") {
          return ArrayObjects(sv, "spec.volumes", [&](od::object& o) {
            return ForFields(o, "volume", [&](od::raw_json_string vk, od::value& vv) -> Status {
              if (vk == "emptyDir" && !IsNull(vv)) p->has_empty_dir = true;
              return OkStatus();
            });
          });
        }
        if (sk == "resourceClaims") {
          return ArrayObjects(sv, "spec.resourceClaims", [&](od::object& o) {
            std::string name, claim;
            GG_RETURN_IF_ERROR(
                ForFields(o, "resourceClaim", [&](od::raw_json_string rk, od::value& rv) -> Status {
                  if (rk == "name") return ReadString(rv, "name", &name);
                  if (rk == "resourceClaimName") return ReadString(rv, "resourceClaimName", &claim);
                  return OkStatus();
                }));
            AddClaim(p, claim);
            return OkStatus();
          });
        }
        return OkStatus();
      });
    }
    if (k == "status") {
      return ObjFields(v, "status", [&](od::raw_json_string sk, od::value& sv) -> Status {
        if (sk == "phase") return ReadString(sv, "status.phase", &p->phase);
        if (sk == "resourceClaimStatuses") {
          return ArrayObjects(sv, "status.resourceClaimStatuses", [&](od::object& o) {
            std::string claim;
            GG_RETURN_IF_ERROR(ForFields(o, "resourceClaimStatus",
                                         [&](od::raw_json_string rk, od::value& rv) -> Status {
                                           if (rk == "resourceClaimName")
                                             return ReadString(rv, "resourceClaimName", &claim);
                                           return OkStatus();
                                         }));
            AddClaim(p, claim);
            return OkStatus();
          });
        }
        return OkStatus();
      });
    }
    return OkStatus();
  });
}

Status DecodePdb(od::object& obj, PodDisruptionBudget* p) {
  return ForFields(obj, "PodDisruptionBudget", [&](od::raw_json_string k, od::value& v) -> Status {
    if (k == "metadata") return DecodeObjectMeta(v, &p->meta);
    if (k == "spec") {
      return ObjFields(v, "spec", [&](od::raw_json_string sk, od::value& sv) -> Status {
        if (sk == "selector" && !IsNull(sv)) {
          LabelSelector sel;
          GG_RETURN_IF_ERROR(DecodeLabelSelector(sv, "spec.selector", &sel));
          p->selector = std::move(sel);
        }
        return OkStatus();
      });
    }
    if (k == "status") {
      return ObjFields(v, "status", [&](od::raw_json_string sk, od::value& sv) -> Status {
        if (sk == "disruptionsAllowed") {
          return ReadInt32(sv, "status.disruptionsAllowed", &p->disruptions_allowed);
        }
        if (sk == "currentHealthy")
          return ReadInt32(sv, "status.currentHealthy", &p->current_healthy);
        if (sk == "desiredHealthy")
          return ReadInt32(sv, "status.desiredHealthy", &p->desired_healthy);
        if (sk == "expectedPods") return ReadInt32(sv, "status.expectedPods", &p->expected_pods);
        if (sk == "observedGeneration") {
          return ReadInt(sv, "status.observedGeneration", &p->observed_generation);
        }
        return OkStatus();
      });
    }
    return OkStatus();
  });
}

template <typename T>
Status DecodeMetaOnly(od::object& obj, T* out) {
  return ForFields(obj, "object", [&](od::raw_json_string k, od::value& v) -> Status {
    if (k == "metadata") return DecodeObjectMeta(v, &out->meta);
    return OkStatus();
  });
}

Status DecodeNamespace(od::object& obj, Namespace* ns) {
  return ForFields(obj, "Namespace", [&](od::raw_json_string k, od::value& v) -> Status {
    if (k == "metadata") return DecodeObjectMeta(v, &ns->meta);
    if (k == "status") {
      return ObjFields(v, "status", [&](od::raw_json_string sk, od::value& sv) -> Status {
        if (sk == "phase") return ReadString(sv, "status.phase", &ns->phase);
        return OkStatus();
      });
    }
    return OkStatus();
  });
}

Status DecodeLease(od::object& obj, Lease* l) {
  return ForFields(obj, "Lease", [&](od::raw_json_string k, od::value& v) -> Status {
    if (k == "metadata") return DecodeObjectMeta(v, &l->meta);
    if (k == "spec") {
      return ObjFields(v, "spec", [&](od::raw_json_string sk, od::value& sv) -> Status {
        if (sk == "holderIdentity")
          return ReadString(sv, "spec.holderIdentity", &l->holder_identity);
        if (sk == "leaseDurationSeconds") {
          return ReadOptInt32(sv, "spec.leaseDurationSeconds", &l->lease_duration_seconds);
        }
        if (sk == "acquireTime") return ReadTime(sv, "spec.acquireTime", &l->acquire_time);
        if (sk == "renewTime") return ReadTime(sv, "spec.renewTime", &l->renew_time);
        if (sk == "leaseTransitions") {
          return ReadInt32(sv, "spec.leaseTransitions", &l->lease_transitions);
        }
        return OkStatus();
      });
    }
    return OkStatus();
  });
}

Status DecodeObjectRef(od::value& v, std::string_view where, ObjectReference* r) {
  return ObjFields(v, where, [&](od::raw_json_string k, od::value& rv) -> Status {
    if (k == "apiVersion") return ReadString(rv, "apiVersion", &r->api_version);
    if (k == "kind") return ReadString(rv, "kind", &r->kind);
    if (k == "namespace") return ReadString(rv, "namespace", &r->namespace_);
    if (k == "name") return ReadString(rv, "name", &r->name);
    if (k == "uid") return ReadString(rv, "uid", &r->uid);
    return OkStatus();
  });
}

Status DecodeEvent(od::object& obj, Event* e) {
  return ForFields(obj, "Event", [&](od::raw_json_string k, od::value& v) -> Status {
    if (k == "metadata") return DecodeObjectMeta(v, &e->meta);
    if (k == "involvedObject") return DecodeObjectRef(v, "involvedObject", &e->involved_object);
    if (k == "reason") return ReadString(v, "reason", &e->reason);
    if (k == "message") return ReadString(v, "message", &e->message);
    if (k == "type") return ReadString(v, "type", &e->type);
    if (k == "count") return ReadInt32(v, "count", &e->count);
    if (k == "firstTimestamp") return ReadTime(v, "firstTimestamp", &e->first_timestamp);
    if (k == "lastTimestamp") return ReadTime(v, "lastTimestamp", &e->last_timestamp);
    if (k == "eventTime") return ReadTime(v, "eventTime", &e->event_time);
    if (k == "reportingComponent") {
      return ReadString(v, "reportingComponent", &e->reporting_component);
    }
    if (k == "reportingInstance") return ReadString(v, "reportingInstance", &e->reporting_instance);
    if (k == "source") {
      return ObjFields(v, "source", [&](od::raw_json_string sk, od::value& sv) -> Status {
        if (sk == "component") return ReadString(sv, "source.component", &e->source_component);
        return OkStatus();
      });
    }
    return OkStatus();
  });
}

// DRA attribute value {"string": "..."} | {"int": 3} | {"bool": true} | {"version": "1.2.3"}.
Status DecodeAttributes(od::value& v, Device* d) {
  if (IsNull(v)) return OkStatus();
  od::object o;
  if (v.get_object().get(o)) return TypeError("attributes", "object");
  for (auto f : o) {
    std::string_view name;
    if (auto ec = f.unescaped_key().get(name)) return JsonError("attributes", ec);
    std::string key(name);
    od::value av;
    if (auto ec = f.value().get(av)) return JsonError("attributes", ec);
    std::string text;
    GG_RETURN_IF_ERROR(
        ObjFields(av, "attributes." + key, [&](od::raw_json_string tk, od::value& tv) -> Status {
          od::json_type t;
          if (tv.type().get(t)) return TypeError("attributes." + key, "value");
          if (t == od::json_type::string) return ReadString(tv, "attributes." + key, &text);
          if (t == od::json_type::boolean) {
            bool b = false;
            GG_RETURN_IF_ERROR(ReadBool(tv, "attributes." + key, &b));
            text = b ? "true" : "false";
            return OkStatus();
          }
          if (t == od::json_type::number) {
            std::int64_t n = 0;
            GG_RETURN_IF_ERROR(ReadInt(tv, "attributes." + key, &n));
            text = std::to_string(n);
            return OkStatus();
          }
          (void)tk;
          return OkStatus();
        }));
    d->attributes[key] = std::move(text);
  }
  return OkStatus();
}

Status DecodeResourceSlice(od::object& obj, ResourceSlice* s) {
  return ForFields(obj, "ResourceSlice", [&](od::raw_json_string k, od::value& v) -> Status {
    if (k == "metadata") return DecodeObjectMeta(v, &s->meta);
    if (k != "spec") return OkStatus();
    return ObjFields(v, "spec", [&](od::raw_json_string sk, od::value& sv) -> Status {
      if (sk == "driver") return ReadString(sv, "spec.driver", &s->driver);
      if (sk == "nodeName") return ReadString(sv, "spec.nodeName", &s->node_name);
      if (sk == "pool") {
        return ObjFields(sv, "spec.pool", [&](od::raw_json_string pk, od::value& pv) -> Status {
          if (pk == "name") return ReadString(pv, "spec.pool.name", &s->pool_name);
          return OkStatus();
        });
      }
      if (sk == "devices") {
        return ArrayObjects(sv, "spec.devices", [&](od::object& o) {
          Device d;
          GG_RETURN_IF_ERROR(
              ForFields(o, "device", [&](od::raw_json_string dk, od::value& dv) -> Status {
                if (dk == "name") return ReadString(dv, "name", &d.name);
                if (dk == "attributes") return DecodeAttributes(dv, &d);
                if (dk == "taints") return DecodeTaints(dv, "taints", &d.taints);
                if (dk == "basic") {  // v1beta1
                  return ObjFields(dv, "basic",
                                   [&](od::raw_json_string bk, od::value& bv) -> Status {
                                     if (bk == "attributes") return DecodeAttributes(bv, &d);
                                     if (bk == "taints")
                                       return DecodeTaints(bv, "basic.taints", &d.taints);
                                     return OkStatus();
                                   });
                }
                return OkStatus();
              }));
          s->devices.push_back(std::move(d));
          return OkStatus();
        });
      }
      return OkStatus();
    });
  });
}

Status DecodeResourceClaim(od::object& obj, ResourceClaim* c) {
  return ForFields(obj, "ResourceClaim", [&](od::raw_json_string k, od::value& v) -> Status {
    if (k == "metadata") return DecodeObjectMeta(v, &c->meta);
    if (k != "status") return OkStatus();
    return ObjFields(v, "status", [&](od::raw_json_string sk, od::value& sv) -> Status {
      if (sk == "reservedFor") {
        return ArrayObjects(sv, "status.reservedFor", [&](od::object& o) {
          ObjectReference r;
          GG_RETURN_IF_ERROR(
              ForFields(o, "reservedFor", [&](od::raw_json_string rk, od::value& rv) -> Status {
                if (rk == "resource") return ReadString(rv, "resource", &r.kind);
                if (rk == "name") return ReadString(rv, "name", &r.name);
                if (rk == "uid") return ReadString(rv, "uid", &r.uid);
                return OkStatus();
              }));
          c->reserved_for.push_back(std::move(r));
          return OkStatus();
        });
      }
      if (sk == "allocation") {
        return ObjFields(
            sv, "status.allocation", [&](od::raw_json_string ak, od::value& av) -> Status {
              if (ak != "devices") return OkStatus();
              return ObjFields(
                  av, "allocation.devices", [&](od::raw_json_string dk, od::value& dv) -> Status {
                    if (dk != "results") return OkStatus();
                    return ArrayObjects(dv, "allocation.devices.results", [&](od::object& o) {
                      DeviceAllocation a;
                      GG_RETURN_IF_ERROR(ForFields(
                          o, "result", [&](od::raw_json_string rk, od::value& rv) -> Status {
                            if (rk == "request") return ReadString(rv, "request", &a.request);
                            if (rk == "driver") return ReadString(rv, "driver", &a.driver);
                            if (rk == "pool") return ReadString(rv, "pool", &a.pool);
                            if (rk == "device") return ReadString(rv, "device", &a.device);
                            return OkStatus();
                          }));
                      c->allocations.push_back(std::move(a));
                      return OkStatus();
                    });
                  });
            });
      }
      return OkStatus();
    });
  });
}

template <typename T>
struct DecoderFor;
#define GG_DECODER(T, fn)                        \
  template <>                                    \
  struct DecoderFor<T> {                         \
    static constexpr json::DecodeFn<T> kFn = fn; \
  };
GG_DECODER(Node, &DecodeNode)
GG_DECODER(Pod, &DecodePod)
GG_DECODER(PodDisruptionBudget, &DecodePdb)
GG_DECODER(DaemonSet, &DecodeMetaOnly<DaemonSet>)
GG_DECODER(ReplicaSet, &DecodeMetaOnly<ReplicaSet>)
GG_DECODER(PartialObject, &DecodeMetaOnly<PartialObject>)
GG_DECODER(Namespace, &DecodeNamespace)
GG_DECODER(Lease, &DecodeLease)
GG_DECODER(Event, &DecodeEvent)
GG_DECODER(ResourceSlice, &DecodeResourceSlice)
GG_DECODER(ResourceClaim, &DecodeResourceClaim)
#undef GG_DECODER

}  // namespace

template <typename T>
StatusOr<T> ParseObject(std::string_view json) {
  return json::ParseObjectWith<T>(json, DecoderFor<T>::kFn);
}
template <typename T>
StatusOr<ObjectList<T>> ParseList(std::string_view json) {
  return json::ParseListWith<T>(json, DecoderFor<T>::kFn);
}
template <typename T>
StatusOr<ObjectList<T>> ParseList(std::string& json) {
  return json::ParseListWith<T>(json, DecoderFor<T>::kFn);
}
template <typename T>
StatusOr<ObjectList<T>> ParseListInto(std::string& json, const std::function<void(T&&)>& sink) {
  json::EnsurePadding(json);
  return json::ParseListPadded<T>(json, DecoderFor<T>::kFn, &sink);
}
template <typename T>
StatusOr<WatchEvent<T>> ParseWatchEvent(std::string_view line, bool padded) {
  return json::ParseWatchEventWith<T>(line, DecoderFor<T>::kFn, padded);
}

#define GG_INSTANTIATE(T)                                                              \
  template StatusOr<T> ParseObject<T>(std::string_view);                               \
  template StatusOr<ObjectList<T>> ParseList<T>(std::string_view);                     \
  template StatusOr<ObjectList<T>> ParseList<T>(std::string&);                         \
  template StatusOr<ObjectList<T>> ParseListInto<T>(std::string&,                      \
                                                    const std::function<void(T &&)>&); \
  template StatusOr<WatchEvent<T>> ParseWatchEvent<T>(std::string_view, bool);
GG_INSTANTIATE(Node)
GG_INSTANTIATE(Pod)
GG_INSTANTIATE(PodDisruptionBudget)
GG_INSTANTIATE(DaemonSet)
GG_INSTANTIATE(ReplicaSet)
GG_INSTANTIATE(PartialObject)
GG_INSTANTIATE(Namespace)
GG_INSTANTIATE(Lease)
GG_INSTANTIATE(Event)
GG_INSTANTIATE(ResourceSlice)
GG_INSTANTIATE(ResourceClaim)
#undef GG_INSTANTIATE

}  // namespace gg::k8s
