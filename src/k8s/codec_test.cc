// Codec tests: real GPU node fixtures → projections; garbage and wrong types → errors.
#include "k8s/codec.h"

#include <gtest/gtest.h>

#include <array>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>
#include <vector>

#include "k8s/builders.h"
#include "k8s/errors.h"

namespace gg::k8s {
namespace {

std::string ReadTestdata(const std::string& name) {
  std::ifstream in(std::string(GG_SOURCE_DIR) + "/src/k8s/testdata/" + name);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(CodecTest, ParsesRealGceNode) {
  auto node = ParseObject<Node>(ReadTestdata("gpu-node-gce-tesla-t4x2.node.json"));
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(node->meta.name, "qa-mig-worker-gpu-1");
  EXPECT_EQ(node->meta.resource_version, "3084398");
  EXPECT_EQ(node->gpu_capacity, 2);
  EXPECT_EQ(node->gpu_allocatable, 2);
  EXPECT_EQ(node->meta.labels.Get("nvidia.com/gpu.product").value_or(""), "Tesla-T4");
  EXPECT_GT(node->meta.labels.size(), 40u);
  // Only annotations the operator reads are kept.
  EXPECT_TRUE(node->meta.annotations.empty());
  // Only GPUHealthy is kept: Ready and the pressure conditions are not read by any decision
  // (and Ready's heartbeat would make every kubelet status update a change).
  EXPECT_TRUE(node->conditions.empty());
  const std::string with_ours = R"({"metadata":{"name":"n"},"status":{"conditions":[
      {"type":"Ready","status":"True","reason":"KubeletReady"},
      {"type":"GPUHealthy","status":"False","reason":"XidError","message":"GPU 0: Xid 79"}]}})";
  auto ours = ParseObject<Node>(with_ours);
  ASSERT_TRUE(ours.ok()) << ours.status();
  ASSERT_EQ(ours->conditions.size(), 1u);
  EXPECT_EQ(ours->conditions[0].type, "GPUHealthy");
  EXPECT_EQ(ours->conditions[0].message, "GPU 0: Xid 79");
  EXPECT_EQ(ours->FindCondition("Ready"), nullptr);
  EXPECT_TRUE(node->meta.creation_timestamp.has_value());
  EXPECT_FALSE(node->unschedulable);
}

// A write's answer: only metadata.resourceVersion is read, wherever it sits, and the labels
// are not interned; anything else is an error, not "".
TEST(CodecTest, ParseResourceVersionReadsOnlyThatField) {
  std::string node = ReadTestdata("gpu-node-gce-tesla-t4x2.node.json");
  const std::size_t interned = LabelMap::InternedEntries();
  auto rv = ParseResourceVersion(node);
  ASSERT_TRUE(rv.ok()) << rv.status();
  EXPECT_EQ(*rv, "3084398");
  EXPECT_EQ(LabelMap::InternedEntries(), interned);
  // Keys in any order (a server that sorts them sends labels and managedFields first).
  std::string sorted = R"({"apiVersion":"v1","kind":"Node","metadata":{"labels":{"a":"b"},)"
                       R"("managedFields":[{"manager":"m"}],"name":"n","resourceVersion":"42"},)"
                       R"("status":{}})";
  rv = ParseResourceVersion(sorted);
  ASSERT_TRUE(rv.ok()) << rv.status();
  EXPECT_EQ(*rv, "42");
  for (std::string bad : {std::string("not json"), std::string(R"({"kind":"Node"})"),
                          std::string(R"({"metadata":{"name":"n"}})"),
                          std::string(R"({"metadata":{"resourceVersion":42}})"),
                          std::string(R"([1,2])"), std::string()}) {
    auto r = ParseResourceVersion(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_TRUE(IsInvalidArgument(r.status())) << r.status();
    }
  }
}

TEST(CodecTest, MetaKeepsUidsAndTimesCompactlyAndReadsThemBackUnchanged) {
  auto node = ParseObject<Node>(ReadTestdata("gpu-node-gce-tesla-t4x2.node.json"));
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(node->meta.uid, "018b97a5-7073-4701-8576-646aef94752d");
  EXPECT_EQ(node->meta.uid.MemoryBytes(), 0u) << "a UUID is kept as its 16 bytes";
  EXPECT_EQ(*node->meta.creation_timestamp, WallTime(std::chrono::seconds(1672063983)));
  EXPECT_FALSE(node->meta.deletion_timestamp.has_value());
  EXPECT_TRUE(node->meta.owner_references.empty());
  // The server's uid is opaque: any other text is kept whole and read back as sent.
  for (std::string uid :
       {"uid-node-7", "018B97A5-7073-4701-8576-646AEF94752D",
        "018b97a5-7073-4701-0576-646aef94752d", "018b97a5707347018576646aef94752d"}) {
    auto n = ParseObject<Node>(R"({"metadata":{"name":"n","uid":")" + uid +
                               R"(","deletionTimestamp":"1970-01-01T00:00:00Z"}})");
    ASSERT_TRUE(n.ok()) << n.status();
    EXPECT_EQ(n->meta.uid.str(), uid);
    EXPECT_GT(n->meta.uid.MemoryBytes(), 0u) << uid;
    ASSERT_TRUE(n->meta.deletion_timestamp);
    EXPECT_EQ(*n->meta.deletion_timestamp, WallTime()) << "the epoch is a time, not none";
    ObjectMeta copy = n->meta;
    EXPECT_EQ(copy.uid, n->meta.uid);
    EXPECT_EQ(copy.uid, uid);
  }
  Uid a("9d2c7b0e-1f7d-4c1a-9e55-0b3a7d1c2e4f"), b;
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b.str(), "");
  b = a;
  EXPECT_EQ(b, a);
  EXPECT_EQ(std::string(b), "9d2c7b0e-1f7d-4c1a-9e55-0b3a7d1c2e4f");
  Uid moved(std::move(b));
  EXPECT_EQ(moved, a);
  EXPECT_FALSE(moved == Uid("9d2c7b0e-1f7d-4c1a-9e55-0b3a7d1c2e40"));
  EXPECT_FALSE(moved == Uid("other"));
  OwnerReferences refs;
  refs.push_back({"apps/v1", "DaemonSet", "ds", "d1", true});
  OwnerReferences refs_copy = refs;
  ASSERT_EQ(refs_copy.size(), 1u);
  EXPECT_EQ(refs_copy[0].kind, "DaemonSet");
  EXPECT_EQ(refs_copy, refs);
  EXPECT_LE(sizeof(ObjectMeta), 160u);
}

TEST(CodecTest, NodeKeepsOtherDetectorsConditionsCompactly) {
  // Ready=False is not the healthy state: kept (compactly) for a nodeCondition rule.
  auto not_ready = ParseObject<Node>(R"({"metadata":{"name":"n"},"status":{"conditions":[
      {"type":"Ready","status":"False","reason":"KubeletNotReady","message":"PLEG is not healthy"}]}})");
  ASSERT_TRUE(not_ready.ok()) << not_ready.status();
  ASSERT_EQ(not_ready->conditions.size(), 1u);
  EXPECT_EQ(not_ready->conditions[0].reason, "KubeletNotReady");
  EXPECT_TRUE(not_ready->conditions[0].message.empty());
  auto node = ParseObject<Node>(R"({"metadata":{"name":"n"},"status":{"conditions":[
      {"type":"Ready","status":"True","reason":"KubeletReady","message":"kubelet is posting ready status"},
      {"type":"MemoryPressure","status":"False"},
      {"type":"DiskPressure","status":"True","reason":"KubeletHasDiskPressure"},
      {"type":"GPUXidError","status":"True","reason":"Xid79","message":"long text",
       "lastHeartbeatTime":"2026-12-01T10:00:00Z","lastTransitionTime":"2026-12-01T09:00:00Z"}]}})");
  ASSERT_TRUE(node.ok()) << node.status();
  ASSERT_EQ(node->conditions.size(), 2u);  // Ready=True and MemoryPressure=False (healthy) dropped
  EXPECT_EQ(node->conditions[0].type, "DiskPressure");
  const NodeCondition* xid = node->FindCondition("GPUXidError");
  ASSERT_NE(xid, nullptr);
  EXPECT_EQ(xid->reason, "Xid79");
  EXPECT_TRUE(xid->last_transition_time.has_value());
  EXPECT_TRUE(xid->message.empty());                   // not needed by any decision
  EXPECT_FALSE(xid->last_heartbeat_time.has_value());  // would change the projection every beat
}

TEST(CodecTest, ParsesRealNodeList) {
  std::string body = ReadTestdata("gpu-node-rke2-nvidia-a16-vgpu.nodelist.json");
  auto list = ParseList<Node>(body);
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->items.size(), 1u);
  EXPECT_EQ(list->items[0].meta.name, "nori");
  EXPECT_EQ(list->items[0].gpu_allocatable, 1);
  EXPECT_EQ(list->items[0].meta.labels.Get("nvidia.com/gpu.product").value_or(""), "NVIDIA-A16-4Q");
  EXPECT_EQ(list->resource_version, "");
  EXPECT_EQ(list->continue_token, "");
}

TEST(CodecTest, ParseListInPlaceAndSink) {
  std::string body =
      R"({"kind":"NodeList","metadata":{"resourceVersion":"42","continue":"abc"},"items":[)"
      R"({"metadata":{"name":"a"},"spec":{"unschedulable":true,"taints":[{"key":"k","effect":"NoSchedule"}]}},)"
      R"({"metadata":{"name":"b"}}]})";
  std::vector<std::string> names;
  auto list = ParseListInto<Node>(body, [&](Node&& n) { names.push_back(n.meta.name); });
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(list->items.empty());
  EXPECT_EQ(list->resource_version, "42");
  EXPECT_EQ(list->continue_token, "abc");
  auto full = ParseList<Node>(std::string_view(body));
  ASSERT_TRUE(full.ok());
  ASSERT_EQ(full->items.size(), 2u);
  EXPECT_TRUE(full->items[0].unschedulable);
  ASSERT_EQ(full->items[0].taints.size(), 1u);
  EXPECT_EQ(full->items[0].taints[0].effect, "NoSchedule");
  EXPECT_EQ(full->items[0].FindTaint("k"), &full->items[0].taints[0]);
}

TEST(CodecTest, EmptyAndNullItems) {
  auto a = ParseList<Pod>(std::string_view(R"({"metadata":{"resourceVersion":"1"},"items":[]})"));
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->items.empty());
  auto b = ParseList<Pod>(std::string_view(R"({"metadata":{},"items":null})"));
  ASSERT_TRUE(b.ok()) << b.status();
}

TEST(CodecTest, WrongTypesNameTheField) {
  auto n = ParseObject<Node>(R"({"metadata":{"name":5}})");
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(n.status().message().find("metadata.name"), std::string::npos) << n.status();

  auto t = ParseObject<Node>(R"({"spec":{"taints":[{"key":"a"},{"key":[1]}]}})");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("spec.taints[1]"), std::string::npos) << t.status();

  auto l = ParseList<Node>(std::string_view(R"({"items":[{"metadata":{"labels":{"a":1}}}]})"));
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("items[0]"), std::string::npos) << l.status();
  EXPECT_NE(l.status().message().find("metadata.labels.a"), std::string::npos) << l.status();

  auto q = ParseObject<Node>(R"({"status":{"capacity":{"nvidia.com/gpu":"1.5"}}})");
  EXPECT_FALSE(q.ok());
  auto time = ParseObject<Node>(R"({"metadata":{"creationTimestamp":"yesterday"}})");
  EXPECT_FALSE(time.ok());
}

// Escaped label and annotation keys and values (legal JSON, though Kubernetes never needs them)
// read back unescaped, alone and as list items decoded like their sibling; null values are
// dropped and other types are errors that name the key.
TEST(CodecTest, EscapedLabelTextReadsBackUnescaped) {
  const std::string node = R"({"metadata":{"name":"n","labels":{"a\/b":"x\u0041","plain":"v",)"
                           R"("q":"say \"hi\"","gone":null,"z\\":"\\"},"annotations":{)"
                           R"("gpuguardian.io/k\u0065y":"va\/lue","gpuguardian.io/plain":"p",)"
                           R"("other":"{\"x\":1}"}}})";
  for (bool in_list : {false, true}) {
    Node n;
    if (in_list) {
      std::string list = R"({"items":[)" + node + "," + node + "]}";
      auto l = ParseList<Node>(list);
      ASSERT_TRUE(l.ok()) << l.status();
      ASSERT_EQ(l->items.size(), 2u);
      n = l->items[1];
    } else {
      auto o = ParseObject<Node>(node);
      ASSERT_TRUE(o.ok()) << o.status();
      n = *o;
    }
    std::map<std::string, std::string> want = {
        {"a/b", "xA"}, {"plain", "v"}, {"q", "say \"hi\""}, {"z\\", "\\"}};
    EXPECT_EQ(n.meta.labels.ToMap(), want) << in_list;
    std::map<std::string, std::string> kept = {{"gpuguardian.io/key", "va/lue"},
                                               {"gpuguardian.io/plain", "p"}};
    EXPECT_EQ(n.meta.annotations.ToMap(), kept) << in_list;
  }
  auto bad = ParseObject<Node>(R"({"metadata":{"labels":{"k\/1":true}}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("metadata.labels.k/1"), std::string::npos) << bad.status();
}

TEST(CodecTest, GarbageNeverCrashes) {
  const char* inputs[] = {"",
                          "{",
                          "[]",
                          "null",
                          "{\"items\":5}",
                          "\x01\x02",
                          "{\"a\":}",
                          "{\"items\":[1,2]}",
                          "{\"metadata\":[]}",
                          "{\"items\":[{\"metadata\":{\"name\":\"x\"}}",
                          "}}}}",
                          "\"str\"",
                          "{\"type\":\"ADDED\"}",
                          "{\"type\":\"NOPE\",\"object\":{}}"};
  for (const char* in : inputs) {
    if (std::string_view(in).find("type") == std::string_view::npos) {
      EXPECT_FALSE(ParseList<Node>(std::string_view(in)).ok()) << in;
    }
    EXPECT_FALSE(ParseWatchEvent<Node>(in).ok()) << in;
    (void)ParseObject<Pod>(in);
  }
  // Truncations of a real document at every 97th byte.
  std::string doc = ReadTestdata("gpu-node-gce-tesla-t4x2.node.json");
  for (std::size_t cut = 0; cut < doc.size(); cut += 97) {
    auto r = ParseObject<Node>(std::string_view(doc).substr(0, cut));
    EXPECT_FALSE(r.ok()) << cut;
  }
}

TEST(CodecTest, WatchEvents) {
  auto added = ParseWatchEvent<Node>(
      R"({"type":"ADDED","object":{"kind":"Node","metadata":{"name":"n1","resourceVersion":"7"}}})");
  ASSERT_TRUE(added.ok()) << added.status();
  EXPECT_EQ(added->type, WatchEventType::kAdded);
  EXPECT_EQ(added->object.meta.name, "n1");

  // Object before type still works.
  auto mod = ParseWatchEvent<Node>(R"({"object":{"metadata":{"name":"n2"}},"type":"MODIFIED"})");
  ASSERT_TRUE(mod.ok()) << mod.status();
  EXPECT_EQ(mod->type, WatchEventType::kModified);
  EXPECT_EQ(mod->object.meta.name, "n2");

  auto bm = ParseWatchEvent<Node>(
      R"({"type":"BOOKMARK","object":{"kind":"Node","apiVersion":"v1","metadata":{"resourceVersion":"123"}}})");
  ASSERT_TRUE(bm.ok());
  EXPECT_EQ(bm->type, WatchEventType::kBookmark);
  EXPECT_EQ(bm->object.meta.resource_version, "123");

  auto err = ParseWatchEvent<Node>(
      R"j({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (100)","reason":"Expired","code":410}})j");
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_EQ(err->type, WatchEventType::kError);
  EXPECT_TRUE(IsExpired(err->error)) << err->error;
  EXPECT_EQ(err->error.http_status(), 410);
}

TEST(CodecTest, PodProjection) {
  auto pod = ParseObject<Pod>(R"({
    "metadata":{"name":"p","namespace":"ns","uid":"u1",
      "annotations":{"kubernetes.io/config.mirror":"x","other":"drop"},
      "ownerReferences":[{"apiVersion":"apps/v1","kind":"DaemonSet","name":"ds","uid":"d1","controller":true}]},
    "spec":{"nodeName":"n1","priority":1000,"priorityClassName":"high","terminationGracePeriodSeconds":30,
      "containers":[{"name":"a","resources":{"requests":{"nvidia.com/gpu":"2"},"limits":{"nvidia.com/gpu":"2"}}},
                    {"name":"b","resources":{"limits":{"nvidia.com/gpu":1}}}],
      "volumes":[{"name":"v","emptyDir":{}},{"name":"w","configMap":{"name":"c"}}],
      "resourceClaims":[{"name":"gpu","resourceClaimName":"claim-1"}]},
    "status":{"phase":"Running","resourceClaimStatuses":[{"name":"gpu2","resourceClaimName":"claim-2"}]}})");
  ASSERT_TRUE(pod.ok()) << pod.status();
  EXPECT_EQ(pod->meta.Key(), "ns/p");
  EXPECT_EQ(pod->node_name, "n1");
  EXPECT_EQ(pod->phase, "Running");
  EXPECT_EQ(pod->priority.value_or(0), 1000);
  EXPECT_EQ(pod->gpu_requests, 3);
  EXPECT_TRUE(pod->has_empty_dir);
  EXPECT_TRUE(pod->IsMirror());
  EXPECT_FALSE(pod->meta.annotations.Has("other"));
  EXPECT_EQ(pod->ControllerKind(), "DaemonSet");
  EXPECT_EQ(pod->termination_grace_period_seconds.value_or(0), 30);
  EXPECT_EQ(pod->resource_claims, (std::vector<std::string>{"claim-1", "claim-2"}));
}

TEST(CodecTest, PdbLeaseEventSliceClaim) {
  auto pdb =
      ParseObject<PodDisruptionBudget>(R"({"metadata":{"name":"pdb","namespace":"d","generation":2},
    "spec":{"minAvailable":1,"selector":{"matchLabels":{"app":"x"},"matchExpressions":[{"key":"tier","operator":"In","values":["a","b"]}]}},
    "status":{"disruptionsAllowed":0,"currentHealthy":1,"desiredHealthy":1,"expectedPods":1,"observedGeneration":2}})");
  ASSERT_TRUE(pdb.ok()) << pdb.status();
  ASSERT_TRUE(pdb->selector.has_value());
  EXPECT_TRUE(pdb->selector->Matches(LabelMap{{"app", "x"}, {"tier", "b"}}));
  EXPECT_FALSE(pdb->selector->Matches(LabelMap{{"app", "x"}}));
  EXPECT_EQ(pdb->disruptions_allowed, 0);
  EXPECT_EQ(pdb->observed_generation, 2);

  auto lease = ParseObject<Lease>(
      R"({"metadata":{"name":"l","namespace":"gpu-system","resourceVersion":"4711"},
    "spec":{"holderIdentity":"op-0","leaseDurationSeconds":15,"acquireTime":"2026-01-02T03:04:05.000000Z",
    "renewTime":"2026-01-02T03:04:15.123456+00:00","leaseTransitions":3}})");
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(lease->holder_identity, "op-0");
  EXPECT_EQ(lease->lease_duration_seconds.value_or(0), 15);
  EXPECT_EQ(lease->lease_transitions, 3);
  ASSERT_TRUE(lease->renew_time.has_value());

  auto ev = ParseObject<Event>(R"({"metadata":{"name":"n.1","namespace":"default"},
    "involvedObject":{"kind":"Node","name":"n"},"reason":"GPUUnhealthy","message":"XID 79","type":"Warning",
    "count":2,"source":{"component":"gpu-guardian"}})");
  ASSERT_TRUE(ev.ok()) << ev.status();
  EXPECT_EQ(ev->involved_object.kind, "Node");
  EXPECT_EQ(ev->count, 2);
  EXPECT_EQ(ev->source_component, "gpu-guardian");

  auto slice =
      ParseObject<ResourceSlice>(R"({"metadata":{"name":"s"},"spec":{"driver":"gpu.nvidia.com",
    "nodeName":"n1","pool":{"name":"n1","generation":1,"resourceSliceCount":1},
    "devices":[{"name":"gpu-0","attributes":{"uuid":{"string":"GPU-abc"},"index":{"int":0},"mig":{"bool":false}}},
               {"name":"gpu-1","basic":{"attributes":{"uuid":{"string":"GPU-def"}}}}]}})");
  ASSERT_TRUE(slice.ok()) << slice.status();
  ASSERT_EQ(slice->devices.size(), 2u);
  EXPECT_EQ(slice->devices[0].attributes["uuid"], "GPU-abc");
  EXPECT_EQ(slice->devices[0].attributes["index"], "0");
  EXPECT_EQ(slice->devices[0].attributes["mig"], "false");
  EXPECT_EQ(slice->devices[1].attributes["uuid"], "GPU-def");
  EXPECT_EQ(slice->pool_name, "n1");

  auto claim = ParseObject<ResourceClaim>(R"({"metadata":{"name":"c","namespace":"d"},"status":{
    "allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.nvidia.com","pool":"n1","device":"gpu-0"}]}},
    "reservedFor":[{"resource":"pods","name":"p","uid":"u"}]}})");
  ASSERT_TRUE(claim.ok()) << claim.status();
  ASSERT_EQ(claim->allocations.size(), 1u);
  EXPECT_EQ(claim->allocations[0].device, "gpu-0");
  ASSERT_EQ(claim->reserved_for.size(), 1u);
  EXPECT_EQ(claim->reserved_for[0].name, "p");
}

TEST(CodecTest, StatusBodies) {
  Status c = ErrorFromResponse(
      409,
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Operation cannot be fulfilled on leases.coordination.k8s.io \"op-lock\": the object has been modified","reason":"Conflict","details":{"name":"op-lock"},"code":409})",
      "");
  EXPECT_EQ(c.code(), StatusCode::kAborted);
  EXPECT_TRUE(IsConflict(c));
  Status a = ErrorFromResponse(
      409, R"({"status":"Failure","reason":"AlreadyExists","code":409,"message":"x exists"})", "");
  EXPECT_EQ(a.code(), StatusCode::kAlreadyExists);
  Status t = ErrorFromResponse(
      429,
      R"({"status":"Failure","reason":"TooManyRequests","code":429,"message":"Cannot evict pod","details":{"causes":[{"reason":"DisruptionBudget"}]}})",
      "7");
  EXPECT_EQ(t.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(t.retry_after_seconds(), 7);
  EXPECT_EQ(t.reason(), "TooManyRequests");
  Status g = ErrorFromResponse(502, "<html>bad gateway</html>", "");
  EXPECT_EQ(g.code(), StatusCode::kUnavailable);
  EXPECT_EQ(g.http_status(), 502);
  EXPECT_EQ(ErrorFromResponse(404, "", "").code(), StatusCode::kNotFound);
  EXPECT_EQ(ErrorFromResponse(422, "{}", "").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorFromResponse(403, "{}", "").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(ErrorFromResponse(401, "{}", "").code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(ErrorFromResponse(410, R"({"reason":"Expired","code":410})", "").code(),
            StatusCode::kOutOfRange);
}

TEST(BuildersTest, RoundTripThroughCodec) {
  Lease l;
  l.meta.name = "op";
  l.meta.namespace_ = "gpu-system";
  l.meta.resource_version = "9";
  l.holder_identity = "me";
  l.lease_duration_seconds = 15;
  l.renew_time = WallTime(std::chrono::microseconds(1'700'000'000'123'456LL));
  l.lease_transitions = 2;
  std::string body = LeaseBody(l);
  EXPECT_NE(body.find("\"renewTime\":\"2023-11-14T22:13:20.123456Z\""), std::string::npos) << body;
  auto back = ParseObject<Lease>(body);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->holder_identity, "me");
  EXPECT_EQ(back->meta.resource_version, "9");
  EXPECT_EQ(*back->renew_time, *l.renew_time);

  EXPECT_EQ(TaintsPatch({}), R"({"spec":{"taints":null}})");
  EXPECT_EQ(
      TaintsPatch({{"gpuguardian.io/unhealthy", "", "NoSchedule", std::nullopt}}, "5"),
      R"({"metadata":{"resourceVersion":"5"},"spec":{"taints":[{"effect":"NoSchedule","key":"gpuguardian.io/unhealthy"}]}})");
  EXPECT_EQ(UnschedulablePatch(false), R"({"spec":{"unschedulable":null}})");
  EXPECT_EQ(AnnotationsPatch({{"a", "1"}, {"b", std::nullopt}}),
            R"({"metadata":{"annotations":{"a":"1","b":null}}})");
  EXPECT_EQ(DeleteOptionsBody({}), "");
  DeleteOptions d;
  d.grace_period_seconds = 0;
  d.precondition_uid = "u";
  EXPECT_NE(EvictionBody("ns", "p", d)
                .find(R"("deleteOptions":{"gracePeriodSeconds":0,"preconditions":{"uid":"u"}})"),
            std::string::npos);
  EventSpec e;
  e.involved_object = {"v1", "Node", "", "n1", "uid"};
  e.reason = "GPUUnhealthy";
  e.type = "Warning";
  e.reporting_component = "gpu-guardian-operator";
  auto ev = ParseObject<Event>(EventBody(e));
  ASSERT_TRUE(ev.ok());
  EXPECT_EQ(ev->meta.namespace_, "default");
  EXPECT_EQ(ev->involved_object.name, "n1");
  EXPECT_EQ(ev->reporting_component, "gpu-guardian-operator");
}

TEST(LabelTest, MapAndSelectors) {
  LabelMap m;
  EXPECT_TRUE(m.Set("a", "1"));
  EXPECT_TRUE(m.Set("b", ""));
  EXPECT_TRUE(m.Set("a", "2"));
  EXPECT_FALSE(m.Set(std::string_view("x\0y", 3), "v"));
  EXPECT_EQ(m.size(), 2u);
  EXPECT_EQ(m.Get("a").value_or(""), "2");
  EXPECT_TRUE(m.Has("b"));
  EXPECT_TRUE(m.Erase("a"));
  EXPECT_FALSE(m.Has("a"));
  EXPECT_EQ(m.size(), 1u);

  LabelSelector s;
  EXPECT_TRUE(s.Matches(m));  // empty selects all
  s.match_expressions = {{"b", "Exists", {}}, {"gone", "DoesNotExist", {}}, {"c", "NotIn", {"x"}}};
  EXPECT_TRUE(s.Matches(m));
  EXPECT_TRUE(s.Validate().ok());
  EXPECT_EQ(s.ToQuery(), "b,!gone,c notin (x)");
  s.match_expressions.push_back({"b", "Bogus", {}});
  EXPECT_FALSE(s.Matches(m));
  EXPECT_FALSE(s.Validate().ok());
}

// The decoders' bulk fill: a repeated key keeps its last value (as Set would), shared pairs
// are released, and a JSON labels object with a repeated key decodes the same way.
TEST(LabelTest, AppendKeepsTheLastOfARepeatedKey) {
  const std::size_t before = LabelMap::InternedEntries();
  {
    LabelMap m{{"zz.app/a", "0"}};
    LabelMap copy = m;  // Append must not change the copy
    EXPECT_TRUE(m.Append("zz.app/b", "1"));
    EXPECT_TRUE(m.Append("zz.app/a", "2"));
    EXPECT_TRUE(m.Append("zz.app/b", "3"));
    EXPECT_FALSE(m.Append(std::string_view("x\0y", 3), "v"));
    m.FinishAppend();
    EXPECT_EQ(m.ToMap(),
              (std::map<std::string, std::string>{{"zz.app/a", "2"}, {"zz.app/b", "3"}}));
    EXPECT_EQ(copy.ToMap(), (std::map<std::string, std::string>{{"zz.app/a", "0"}}));
    LabelMap empty;
    empty.FinishAppend();
    EXPECT_TRUE(empty.empty());
  }
  EXPECT_EQ(LabelMap::InternedEntries(), before);

  auto node =
      ParseObject<Node>(R"({"metadata":{"name":"n","labels":{"zz.k":"1","zz.j":"x","zz.k":"2"}}})");
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  EXPECT_EQ(node->meta.labels.size(), 2u);
  EXPECT_EQ(node->meta.labels.Get("zz.k").value_or(""), "2");
  EXPECT_EQ(node->meta.labels.Get("zz.j").value_or(""), "x");
  auto bad = ParseObject<Node>(R"({"metadata":{"name":"n","labels":{"zz.k":"1","zz.j":7}}})");
  EXPECT_FALSE(bad.ok());
}

// With a PreviousLabels lookup installed, a decoded Node's labels equal what the JSON says
// whatever the cached version held: repeated pairs, changed values, new and dropped keys.
TEST(LabelTest, DecodingLikeThePreviousVersionKeepsTheNewLabels) {
  LabelMap cached{{"zz.a", "1"}, {"zz.b", "2"}, {"zz.c", "3"}};
  static const LabelMap* current = nullptr;
  current = &cached;
  auto lookup = [](const void*, std::string_view ns, std::string_view name) -> const LabelMap* {
    return ns.empty() && name == "n" ? current : nullptr;
  };
  PreviousLabels hint(lookup, nullptr);
  auto node = ParseObject<Node>(
      R"({"metadata":{"name":"n","labels":{"zz.a":"1","zz.b":"9","zz.d":"4","zz.a":"5"}}})");
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  EXPECT_EQ(node->meta.labels.ToMap(),
            (std::map<std::string, std::string>{{"zz.a", "5"}, {"zz.b", "9"}, {"zz.d", "4"}}));
  auto same =
      ParseObject<Node>(R"({"metadata":{"name":"n","labels":{"zz.a":"1","zz.b":"2","zz.c":"3"}}})");
  ASSERT_TRUE(same.ok());
  EXPECT_TRUE(same->meta.labels == cached);
  auto shifted = ParseObject<Node>(
      R"({"metadata":{"name":"n","labels":{"zz.0":"0","zz.a":"1","zz.c":"3","zz.b":"2"}}})");
  ASSERT_TRUE(shifted.ok());
  EXPECT_EQ(shifted->meta.labels.ToMap(),
            (std::map<std::string, std::string>{
                {"zz.0", "0"}, {"zz.a", "1"}, {"zz.b", "2"}, {"zz.c", "3"}}));
  auto other = ParseObject<Node>(R"({"metadata":{"name":"m","labels":{"zz.a":"1"}}})");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->meta.labels.ToMap(), (std::map<std::string, std::string>{{"zz.a", "1"}}));
  EXPECT_EQ(cached.ToMap(),
            (std::map<std::string, std::string>{{"zz.a", "1"}, {"zz.b", "2"}, {"zz.c", "3"}}));
}

// A server that sorts keys sends metadata.labels before name and namespace (the real API server
// sends name first): the cached version is still looked up under the object's own name, and the
// labels decoded are the JSON's.
TEST(LabelTest, PreviousVersionIsFoundWhenLabelsComeBeforeTheName) {
  LabelMap cached{{"zz.a", "1"}, {"zz.b", "2"}};
  static const LabelMap* current = nullptr;
  static std::vector<std::string> asked;
  current = &cached;
  asked.clear();
  auto lookup = [](const void*, std::string_view ns, std::string_view name) -> const LabelMap* {
    asked.push_back(std::string(ns) + "/" + std::string(name));
    return current;
  };
  PreviousLabels hint(lookup, nullptr);
  auto node = ParseObject<Node>(
      R"({"metadata":{"labels":{"zz.a":"1","zz.b":"3"},"name":"n","resourceVersion":"7"}})");
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  EXPECT_EQ(node->meta.labels.ToMap(),
            (std::map<std::string, std::string>{{"zz.a", "1"}, {"zz.b", "3"}}));
  auto pod =
      ParseObject<Pod>(R"({"metadata":{"labels":{"zz.a":"1"},"name":"p","namespace":"ns1"}})");
  ASSERT_TRUE(pod.ok()) << pod.status().ToString();
  EXPECT_EQ(pod->meta.labels.ToMap(), (std::map<std::string, std::string>{{"zz.a", "1"}}));
  EXPECT_EQ(asked, (std::vector<std::string>{"/n", "ns1/p"}));
  // A bad label value is still an error naming the label.
  auto bad = ParseObject<Node>(R"({"metadata":{"labels":{"zz.a":1},"name":"n"}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("metadata.labels.zz.a"), std::string::npos)
      << bad.status().ToString();
}

// Items of one list share the pairs they have in common with the item before them: each keeps
// its own labels, and nothing outlives the list (the shared pairs are freed with the items).
TEST(LabelTest, ListItemsKeepTheirOwnLabelsAndReleaseThemAfterTheList) {
  const std::size_t before = LabelMap::InternedEntries();
  {
    auto list = ParseList<Node>(
        R"({"items":[{"metadata":{"name":"a","labels":{"zz.s/k1":"x","zz.s/k2":"y","zz.s/h":"a"}}},)"
        R"({"metadata":{"name":"b","labels":{"zz.s/k1":"x","zz.s/k2":"z","zz.s/h":"b"}}},)"
        R"({"metadata":{"name":"c","labels":{"zz.s/k0":"w","zz.s/k1":"x","zz.s/k2":"y"}}}]})");
    ASSERT_TRUE(list.ok()) << list.status().ToString();
    ASSERT_EQ(list->items.size(), 3u);
    using M = std::map<std::string, std::string>;
    EXPECT_EQ(list->items[0].meta.labels.ToMap(),
              (M{{"zz.s/k1", "x"}, {"zz.s/k2", "y"}, {"zz.s/h", "a"}}));
    EXPECT_EQ(list->items[1].meta.labels.ToMap(),
              (M{{"zz.s/k1", "x"}, {"zz.s/k2", "z"}, {"zz.s/h", "b"}}));
    EXPECT_EQ(list->items[2].meta.labels.ToMap(),
              (M{{"zz.s/k0", "w"}, {"zz.s/k1", "x"}, {"zz.s/k2", "y"}}));
    EXPECT_EQ(LabelMap::InternedEntries(), before + 6);  // k2=y appears twice
  }
  EXPECT_EQ(LabelMap::InternedEntries(), before);
}

// Pairs are interned: copies share them, equal maps compare equal in any order, and a pair
// is freed with the last map holding it (also when maps are built and dropped concurrently).
TEST(LabelTest, InternedPairsAreSharedAndFreed) {
  const std::size_t before = LabelMap::InternedEntries();
  {
    LabelMap a{{"zz.test/k1", "v1"}, {"zz.test/k2", "v2"}};
    LabelMap b{{"zz.test/k2", "v2"}, {"zz.test/k1", "v1"}};
    EXPECT_EQ(LabelMap::InternedEntries(), before + 2);  // b reuses a's pairs
    EXPECT_TRUE(a == b);
    LabelMap c = a;
    c.Set("zz.test/k1", "other");
    EXPECT_FALSE(a == c);
    EXPECT_EQ(a.Get("zz.test/k1").value_or(""), "v1");  // copies do not share mutations
    EXPECT_EQ(c.Get("zz.test/k1").value_or(""), "other");
    LabelMap d = std::move(c);
    EXPECT_TRUE(c.empty());  // NOLINT(bugprone-use-after-move): a moved-from map is empty
    c = d;
    EXPECT_TRUE(c == d);
    const LabelMap& alias = a;
    a = alias;  // self-assignment keeps the pairs
    EXPECT_EQ(a.size(), 2u);
    EXPECT_EQ(a.ToMap(),
              (std::map<std::string, std::string>{{"zz.test/k1", "v1"}, {"zz.test/k2", "v2"}}));
    std::string big(2000, 'x');  // past the stack buffer
    d.Set("zz.test/big", big);
    EXPECT_EQ(d.Get("zz.test/big").value_or(""), big);
    EXPECT_FALSE(d.Set(std::string(70000, 'k'), "v"));  // a key past 64 KiB is refused
    EXPECT_EQ(d.size(), 3u);
  }
  EXPECT_EQ(LabelMap::InternedEntries(), before);

  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([] {
      for (int i = 0; i < 2000; ++i) {
        LabelMap m{{"zz.test/shared", "v"}, {"zz.test/n", std::to_string(i % 7)}};
        LabelMap copy = m;
        copy.Erase("zz.test/shared");
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(LabelMap::InternedEntries(), before);
}

// A fleet's maps: the pairs most maps hold go into one shared set, each map keeps its own few
// (the hostname); reads, equality and writes see one map whatever the split, and every pair
// and set is freed with the last map.
// A node's 20 fleet-wide labels and its own "zz.fleet/k19h" = `own`, decoded like `prev`; the
// pairs in key order, as the API server sends them (the node's own sorts in the middle).
// `finish` false leaves the map mid-build.
LabelMap FleetLabels(const std::string& own, const LabelMap* prev, bool finish = true) {
  LabelMap m;
  for (int k = 0; k < 20; ++k) {
    std::string key = "zz.fleet/k" + std::to_string(10 + k);
    EXPECT_TRUE(m.AppendLike(prev, key, "v"));
    if (k == 9) {
      EXPECT_TRUE(m.AppendLike(prev, "zz.fleet/k19h", own));
    }
  }
  if (finish) m.FinishAppend();
  return m;
}

TEST(LabelTest, FleetWidePairsAreSharedAsOneSet) {
  const std::size_t before = LabelMap::InternedEntries();
  const std::size_t bytes_before = LabelMap::InternedBytes();
  {
    auto build = [](int i, const LabelMap* prev) {
      return FleetLabels("node-" + std::to_string(i), prev);
    };
    std::vector<LabelMap> fleet;
    for (int i = 0; i < 10; ++i) fleet.push_back(build(i, nullptr));
    const LabelMap& last = fleet.back();
    EXPECT_EQ(last.size(), 21u);
    EXPECT_EQ(last.SharedSize(), 20u);     // all but the hostname
    EXPECT_EQ(fleet[0].SharedSize(), 0u);  // built before any pair was seen often
    EXPECT_LT(last.MemoryBytes(), fleet[0].MemoryBytes() / 2);
    EXPECT_EQ(last.Get("zz.fleet/k19h").value_or(""), "node-9");
    EXPECT_EQ(last.Get("zz.fleet/k29").value_or(""), "v");
    EXPECT_FALSE(last.Has("zz.fleet/k30"));
    std::map<std::string, std::string> want;
    for (int k = 0; k < 20; ++k) want["zz.fleet/k" + std::to_string(10 + k)] = "v";
    want["zz.fleet/k19h"] = "node-0";
    EXPECT_EQ(fleet[0].ToMap(), want);
    // The same pairs split differently (fleet[0] holds all its own) still compare equal.
    LabelMap again = build(0, nullptr);
    EXPECT_EQ(again.SharedSize(), 20u);
    EXPECT_TRUE(again == fleet[0]);
    EXPECT_FALSE(again == fleet[1]);
    // Decoding the next version like the cached one shares every pair and the set.
    const std::size_t pairs = LabelMap::InternedEntries();
    LabelMap next = build(9, &last);
    EXPECT_EQ(LabelMap::InternedEntries(), pairs);
    EXPECT_TRUE(next == last);
    // Writes to a map with a shared set leave the set and the other maps alone.
    LabelMap w = last;
    EXPECT_TRUE(w.Set("zz.fleet/k15", "changed"));
    EXPECT_TRUE(w.Erase("zz.fleet/k19h"));
    EXPECT_TRUE(w.Set("zz.fleet/a", "new"));
    EXPECT_EQ(w.size(), 21u);
    EXPECT_EQ(w.Get("zz.fleet/k15").value_or(""), "changed");
    EXPECT_EQ(w.Get("zz.fleet/a").value_or(""), "new");
    EXPECT_FALSE(w.Has("zz.fleet/k19h"));
    EXPECT_EQ(last.Get("zz.fleet/k15").value_or(""), "v");
    EXPECT_EQ(fleet[5].Get("zz.fleet/k15").value_or(""), "v");
    std::size_t seen = 0;
    std::string prev_key;
    w.ForEach([&](std::string_view k, std::string_view) {
      EXPECT_LT(prev_key, k);  // in key order across both parts
      prev_key = std::string(k);
      ++seen;
    });
    EXPECT_EQ(seen, 21u);
  }
  EXPECT_EQ(LabelMap::InternedEntries(), before);
  EXPECT_EQ(LabelMap::InternedBytes(), bytes_before);
}

// A watch event that changes only a node's own label takes the cached version's shared set as
// it is (AppendLike lends its pairs, no count is touched); the counts stay exact whether the
// new map is finished, dropped mid-build, or outlives the version it was decoded like.
TEST(LabelTest, AnUnchangedSharedSetIsTakenOverFromThePreviousVersion) {
  const std::size_t before = LabelMap::InternedEntries();
  {
    std::vector<LabelMap> fleet;
    for (int i = 0; i < 10; ++i) fleet.push_back(FleetLabels("node-" + std::to_string(i), nullptr));
    LabelMap cached = FleetLabels("node-9", nullptr);
    ASSERT_EQ(cached.SharedSize(), 20u);
    const std::size_t pairs = LabelMap::InternedEntries();
    {
      LabelMap dropped = FleetLabels("node-9-gen2", &cached, /*finish=*/false);
      EXPECT_EQ(LabelMap::InternedEntries(), pairs + 1);
    }
    EXPECT_EQ(LabelMap::InternedEntries(), pairs);  // the lent pairs were not released
    EXPECT_EQ(cached.Get("zz.fleet/k10").value_or(""), "v");

    LabelMap next = FleetLabels("node-9-gen2", &cached);
    EXPECT_EQ(next.SharedSize(), 20u);
    EXPECT_EQ(LabelMap::InternedEntries(), pairs + 1);
    cached = LabelMap();
    fleet.clear();  // the set's last holders before `next`: it must stay whole for `next`
    EXPECT_EQ(next.size(), 21u);
    EXPECT_EQ(next.Get("zz.fleet/k19h").value_or(""), "node-9-gen2");
    EXPECT_EQ(next.Get("zz.fleet/k29").value_or(""), "v");
    LabelMap after = FleetLabels("node-9-gen3", &next);
    EXPECT_EQ(after.SharedSize(), 20u);
    EXPECT_FALSE(after == next);

    // Decoded like a map whose shared set differs in one pair (a list's item before, from
    // another node group): lending stops there and the new map gets its own set, exactly.
    std::vector<LabelMap> other_group;
    for (int i = 0; i < 5; ++i) {
      LabelMap m = FleetLabels("other-" + std::to_string(i), nullptr);
      ASSERT_TRUE(m.Set("zz.fleet/k15", "w"));
      other_group.push_back(std::move(m));
    }
    LabelMap sibling = FleetLabels("other-5", &other_group.back());
    EXPECT_EQ(sibling.Get("zz.fleet/k15").value_or(""), "v");
    EXPECT_EQ(sibling.Get("zz.fleet/k19h").value_or(""), "other-5");
    EXPECT_TRUE(sibling == FleetLabels("other-5", nullptr));
    other_group.clear();
    EXPECT_EQ(sibling.size(), 21u);
    EXPECT_EQ(sibling.Get("zz.fleet/k29").value_or(""), "v");
  }
  EXPECT_EQ(LabelMap::InternedEntries(), before);
}

// A list's item decoded like the item before it, from another node group: its fleet-wide pairs
// are the set of a map decoded earlier (passed as `others`), which it takes over without a
// look-up in the set table; the counts stay exact whether it is finished or dropped mid-build.
TEST(LabelTest, AMapTakesOverTheSetOfAnEarlierSibling) {
  const std::size_t before = LabelMap::InternedEntries();
  {
    std::vector<LabelMap> group_a, group_b;
    for (int i = 0; i < 5; ++i) {
      group_a.push_back(FleetLabels("a-" + std::to_string(i), nullptr));
      LabelMap m = FleetLabels("b-" + std::to_string(i), nullptr);
      ASSERT_TRUE(m.Set("zz.fleet/k15", "w"));
      group_b.push_back(std::move(m));
    }
    ASSERT_EQ(group_a.back().SharedSize(), 20u);
    ASSERT_EQ(group_b.back().SharedSize(), 20u);
    ASSERT_FALSE(group_a.back().SameSharedSet(group_b.back()));
    const std::size_t pairs = LabelMap::InternedEntries();
    {
      LabelMap dropped = FleetLabels("a-5", &group_b.back(), /*finish=*/false);
      EXPECT_EQ(LabelMap::InternedEntries(), pairs + 1);  // its own pair
    }
    EXPECT_EQ(LabelMap::InternedEntries(), pairs);

    const std::array<LabelMap, 2> others = {group_b.back(), group_a.back()};
    const std::size_t lookups = LabelMap::SharedSetLookups();
    LabelMap m = FleetLabels("a-5", &group_b.back(), /*finish=*/false);
    m.FinishAppend(others);
    EXPECT_EQ(LabelMap::SharedSetLookups(), lookups);
    EXPECT_TRUE(m.SameSharedSet(group_a.back()));
    EXPECT_EQ(m.SharedSize(), 20u);
    EXPECT_TRUE(m == FleetLabels("a-5", nullptr));
    // Without a sibling of its group it looks its set up, and finds the same one.
    const std::size_t lookups_alone = LabelMap::SharedSetLookups();
    LabelMap alone = FleetLabels("a-6", &group_b.back(), /*finish=*/false);
    alone.FinishAppend(std::span<const LabelMap>(others).first(1));
    EXPECT_EQ(LabelMap::SharedSetLookups(), lookups_alone + 1);
    EXPECT_TRUE(alone.SameSharedSet(group_a.back()));
    group_a.clear();
    group_b.clear();  // `m` outlives every map it was decoded like or took its set from
    EXPECT_EQ(m.size(), 21u);
    EXPECT_EQ(m.Get("zz.fleet/k15").value_or(""), "v");
    EXPECT_EQ(m.Get("zz.fleet/k19h").value_or(""), "a-5");
    EXPECT_EQ(m.Get("zz.fleet/k29").value_or(""), "v");
  }
  EXPECT_EQ(LabelMap::InternedEntries(), before);
}

// The items of a list alternate between two zones: from the fifth on, each takes over the set
// of the item two back (no look-up), and every item reads back as sent.
TEST(CodecTest, ListItemsAlternatingBetweenGroupsShareEachGroupsSet) {
  const std::size_t before = LabelMap::InternedEntries();
  {
    std::string body = R"({"kind":"NodeList","items":[)";
    constexpr int kItems = 16;
    for (int i = 0; i < kItems; ++i) {
      if (i) body += ',';
      std::string labels = R"("zz.alt/host":"n-)" + std::to_string(i) + '"';
      for (int k = 10; k < 30; ++k) labels += R"(,"zz.alt/k)" + std::to_string(k) + R"(":"v")";
      labels += R"(,"zz.alt/zone":")" + std::string(i % 2 ? "b" : "a") + '"';
      body += R"({"metadata":{"name":"n-)" + std::to_string(i) + R"(","labels":{)" + labels + "}}}";
    }
    body += "]}";
    std::vector<Node> nodes;
    std::size_t lookups_at_8 = 0;
    auto meta = ParseListInto<Node>(body, [&](Node&& n) {
      nodes.push_back(std::move(n));
      if (nodes.size() == 8) lookups_at_8 = LabelMap::SharedSetLookups();
    });
    ASSERT_TRUE(meta.ok()) << meta.status();
    ASSERT_EQ(nodes.size(), std::size_t{kItems});
    EXPECT_EQ(LabelMap::SharedSetLookups(), lookups_at_8);
    for (int i = 0; i < kItems; ++i) {
      const LabelMap& l = nodes[i].meta.labels;
      EXPECT_EQ(l.size(), 22u) << i;
      EXPECT_EQ(l.Get("zz.alt/host").value_or(""), "n-" + std::to_string(i));
      EXPECT_EQ(l.Get("zz.alt/zone").value_or(""), i % 2 ? "b" : "a");
      EXPECT_EQ(l.Get("zz.alt/k29").value_or(""), "v");
    }
    EXPECT_EQ(nodes[kItems - 1].meta.labels.SharedSize(), 21u);
    EXPECT_TRUE(nodes[kItems - 1].meta.labels.SameSharedSet(nodes[kItems - 3].meta.labels));
    EXPECT_FALSE(nodes[kItems - 1].meta.labels.SameSharedSet(nodes[kItems - 2].meta.labels));
  }
  EXPECT_EQ(LabelMap::InternedEntries(), before);
}

// Nodes with equal conditions share one list; a write makes the node's own (interned) list.
TEST(ConditionListTest, EqualListsAreOneList) {
  const std::size_t before = ConditionList::InternedLists();
  {
    const WallTime t = std::chrono::system_clock::from_time_t(1767225600);
    NodeCondition ok{"GPUHealthy", "True", "AllGpusHealthy", "8 GPUs healthy", t, t};
    std::vector<Node> fleet(5);
    for (auto& n : fleet) n.conditions.push_back(ok);
    EXPECT_EQ(ConditionList::InternedLists(), before + 1);
    EXPECT_TRUE(fleet[0].conditions == fleet[4].conditions);
    EXPECT_EQ(fleet[0].conditions.begin(), fleet[4].conditions.begin());  // one copy
    EXPECT_LT(fleet[0].conditions.MemoryBytes(), sizeof(NodeCondition));  // a fifth of it each

    NodeCondition other{"Other", "True", "R", "", t, std::nullopt};
    fleet[1].conditions.push_back(other);
    ASSERT_EQ(fleet[1].conditions.size(), 2u);
    EXPECT_EQ(fleet[1].conditions[1].type, "Other");
    EXPECT_EQ(fleet[0].conditions.size(), 1u);  // the others keep theirs
    EXPECT_FALSE(fleet[0].conditions == fleet[1].conditions);
    EXPECT_EQ(
        fleet[1].conditions.erase_if([](const NodeCondition& c) { return c.type == "GPUHealthy"; }),
        1u);
    EXPECT_EQ(fleet[1].FindCondition("GPUHealthy"), nullptr);
    EXPECT_EQ(fleet[1].FindCondition("Other")->reason, "R");
    fleet[2].conditions.clear();
    EXPECT_TRUE(fleet[2].conditions.empty());
    ConditionList copy = fleet[3].conditions;
    NodeCondition later = ok;
    later.last_transition_time = t + std::chrono::seconds(1);
    copy.Assign({later});
    EXPECT_FALSE(copy == fleet[3].conditions);  // a different time is a different list
    EXPECT_EQ(fleet[3].conditions[0].last_transition_time, t);
  }
  EXPECT_EQ(ConditionList::InternedLists(), before);
}

TEST(LabelTest, CopiesShareOneArrayUntilWritten) {
  const std::size_t before = LabelMap::InternedEntries();
  {
    LabelMap a{{"zz.cow/k1", "v1"}, {"zz.cow/k2", "v2"}, {"zz.cow/k3", "v3"}};
    a.ShrinkToFit();
    const std::size_t one = a.MemoryBytes() - sizeof(LabelMap);
    EXPECT_GE(one, 3 * sizeof(void*));
    LabelMap b = a;
    LabelMap c;
    c = b;
    EXPECT_TRUE(a == b && b == c);
    EXPECT_FALSE(b.Erase("zz.cow/absent"));  // a no-op write does not copy
    EXPECT_TRUE(b.Erase("zz.cow/k2"));       // the first real write copies
    EXPECT_EQ(a.size(), 3u);
    EXPECT_EQ(c.size(), 3u);
    EXPECT_EQ(b.size(), 2u);
    EXPECT_EQ(a.Get("zz.cow/k2").value_or(""), "v2");
    EXPECT_FALSE(b.Has("zz.cow/k2"));
    c.Set("zz.cow/k1", "changed");
    EXPECT_EQ(a.Get("zz.cow/k1").value_or(""), "v1");
    EXPECT_EQ(c.Get("zz.cow/k1").value_or(""), "changed");
    a.clear();
    EXPECT_TRUE(a.empty());
    EXPECT_EQ(c.size(), 3u);
    EXPECT_TRUE(b.Erase("zz.cow/k1") && b.Erase("zz.cow/k3"));
    EXPECT_TRUE(b.empty());
    EXPECT_TRUE(b == LabelMap());
  }
  EXPECT_EQ(LabelMap::InternedEntries(), before);  // every pair released exactly once

  // Copies handed to other threads and written there: each writer gets its own array.
  LabelMap shared{{"zz.cow/shared", "v"}, {"zz.cow/x", "1"}};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([shared, t] {
      for (int i = 0; i < 2000; ++i) {
        LabelMap mine = shared;
        mine.Set("zz.cow/x", std::to_string(t));
        if (mine.Get("zz.cow/shared") != "v") std::abort();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(shared.Get("zz.cow/x").value_or(""), "1");
}

}  // namespace
}  // namespace gg::k8s
