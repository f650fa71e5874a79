// managedFields after plain (non-apply) writes: who owns what once another manager changes,
// adds and removes fields, and when a write changes nothing. Untyped objects: maps granular.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "sim/ssa.h"

namespace gg::sim {
namespace {

using nlohmann::json;

ManagerInfo Who(const std::string& manager, const std::string& now) {
  return ManagerInfo{manager, "v1", "", now};
}

// The fields `manager`'s Update entry owns in `obj` (empty when it has none).
FieldSet Owned(const json& obj, const std::string& manager) {
  for (const auto& e : obj["metadata"]["managedFields"])
    if (e.value("manager", "") == manager) return DecodeFieldsV1(e["fieldsV1"]);
  return {};
}

json Base() {
  return json::parse(R"({"apiVersion": "v1", "kind": "Thing",
    "metadata": {"name": "t", "labels": {"a": "1", "b": "2"}},
    "spec": {"x": 1, "y": {"z": 1}, "big": {"p": [1, 2, 3], "q": {"r": "s"}}}})");
}

TEST(UpdateManagedFields, AnotherManagerTakesWhatItChangesAndRemovedFieldsGo) {
  SsaType untyped;
  json v1 = Base();
  v1["metadata"]["managedFields"] = UpdateManagedFields(json(), v1, untyped, Who("m1", "t1"));
  const FieldSet m1_all = Owned(v1, "m1");
  EXPECT_TRUE(m1_all.count({"f:spec", "f:big", "f:q", "f:r"}));
  EXPECT_TRUE(m1_all.count({"f:metadata", "f:labels", "f:b"}));

  json v2 = v1;
  v2["metadata"]["labels"]["b"] = "3";
  v2["spec"].erase("x");
  v2["spec"]["w"] = 5;
  v2["metadata"]["managedFields"] = UpdateManagedFields(v1, v2, untyped, Who("m2", "t2"));
  const FieldSet m1 = Owned(v2, "m1"), m2 = Owned(v2, "m2");
  EXPECT_EQ(m2, (FieldSet{{"f:metadata", "f:labels", "f:b"}, {"f:spec", "f:w"}}));
  EXPECT_FALSE(m1.count({"f:metadata", "f:labels", "f:b"}));  // taken by m2
  EXPECT_FALSE(m1.count({"f:spec", "f:x"}));                  // removed
  EXPECT_TRUE(m1.count({"f:metadata", "f:labels", "f:a"}));   // untouched fields stay
  EXPECT_TRUE(m1.count({"f:spec", "f:y", "f:z"}));
  EXPECT_TRUE(m1.count({"f:spec", "f:big", "f:p"}));
  EXPECT_TRUE(m1.count({"f:spec", "f:big", "f:q", "f:r"}));
}

TEST(UpdateManagedFields, RemovingANestedFieldInsideAChangedMapDropsItsOwner) {
  SsaType untyped;
  json v1 = Base();
  v1["metadata"]["managedFields"] = UpdateManagedFields(json(), v1, untyped, Who("m1", "t1"));
  json v2 = v1;
  v2["spec"]["big"]["q"].erase("r");
  v2["spec"]["big"]["q"]["u"] = "v";
  v2["metadata"]["managedFields"] = UpdateManagedFields(v1, v2, untyped, Who("m2", "t2"));
  const FieldSet m1 = Owned(v2, "m1");
  EXPECT_FALSE(m1.count({"f:spec", "f:big", "f:q", "f:r"}));
  EXPECT_TRUE(m1.count({"f:spec", "f:big", "f:p"}));
  EXPECT_EQ(Owned(v2, "m2"), (FieldSet{{"f:spec", "f:big", "f:q", "f:u"}}));
}

TEST(UpdateManagedFields, AWriteThatChangesNothingKeepsEveryEntryAsItWas) {
  SsaType untyped;
  json v1 = Base();
  v1["metadata"]["managedFields"] = UpdateManagedFields(json(), v1, untyped, Who("m1", "t1"));
  json same = v1;
  EXPECT_EQ(UpdateManagedFields(v1, same, untyped, Who("m2", "t2")),
            v1["metadata"]["managedFields"]);
}

}  // namespace
}  // namespace gg::sim
