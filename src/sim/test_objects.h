// Objects that tests and benchmarks seed into the simulator, shared so each fixture does not
// carry its own copy.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace gg::sim {

// A cluster-scoped gpuguardian.io/v1alpha1 CRD with a status subresource and a schema that
// accepts any body: for tests of the operator's behaviour, where the shipped CRD's validation
// (exercised by its own tests against deploy/crds/) is not what is under test.
inline nlohmann::json GuardianCrd(const std::string& plural, const std::string& kind) {
  using json = nlohmann::json;
  return {{"apiVersion", "apiextensions.k8s.io/v1"},
          {"kind", "CustomResourceDefinition"},
          {"metadata", {{"name", plural + ".gpuguardian.io"}}},
          {"spec",
           {{"group", "gpuguardian.io"},
            {"scope", "Cluster"},
            {"names", {{"plural", plural}, {"kind", kind}}},
            {"versions",
             {{{"name", "v1alpha1"},
               {"served", true},
               {"storage", true},
               {"subresources", {{"status", json::object()}}},
               {"schema",
                {{"openAPIV3Schema",
                  {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}}}}}}}}}}};
}

}  // namespace gg::sim
