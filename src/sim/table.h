// Server-side printing for the simulator: the meta.k8s.io Table that `kubectl get` asks for
// (Accept: application/json;as=Table;v=v1;g=meta.k8s.io). Columns of the built-in kinds
// follow the real server's printers (pkg/printers/internalversion, all priorities, as the
// server always sends the wide columns); custom resources use the CRD version's
// additionalPrinterColumns (JSONPath subset), or Age when it declares none; every other
// resource gets the default Name / Created At pair. Pure functions on generic JSON.
#pragma once

#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/status.h"

namespace gg::sim {

struct ResourceInfo;

// The first media range of `accept` that the server can satisfy: nullopt when that is plain
// application/json (no `as=`); otherwise the `v` of a range asking for `as_kind` in `group`
// at one of `versions`. Ranges we cannot serve (protobuf, other conversions) are skipped.
std::optional<std::string> ConversionFromAccept(std::string_view accept, std::string_view as_kind,
                                                std::string_view group,
                                                std::initializer_list<std::string_view> versions);

// What the Accept header asks for: the Table's apiVersion ("meta.k8s.io/v1" or
// "meta.k8s.io/v1beta1"), or nullopt when a plain object/list comes first (or only).
std::optional<std::string> TableVersionFromAccept(std::string_view accept);

// How rows carry their object (query includeObject=None|Metadata|Object, default Metadata).
enum class IncludeObject { kNone, kMetadata, kObject };
StatusOr<IncludeObject> ParseIncludeObject(std::string_view v);

// columnDefinitions for a resource.
nlohmann::json TableColumns(const ResourceInfo& ri);
// One row: cells for `obj` (the stored object; events in core/v1 form) and its object.
// `view_obj` is what includeObject=Object embeds (the object as the request's version).
nlohmann::json TableRow(const ResourceInfo& ri, const nlohmann::json& obj,
                        const nlohmann::json& view_obj, WallTime now, IncludeObject inc);

// k8s.io/apimachinery duration.HumanDuration: "45s", "3m20s", "5h", "12d", "2y3d".
std::string HumanDuration(Duration d);

// The JSONPath subset CRD printer columns use: `.a.b`, `.a[0]`, `.a[*].b`, `['k.x']`,
// `.a[?(@.k=="v")].b` (== / !=, string or number literal). Results in document order.
// InvalidArgument for anything else (the real server refuses such a CRD column).
StatusOr<std::vector<const nlohmann::json*>> JsonPathFind(const nlohmann::json& doc,
                                                          std::string_view path);

}  // namespace gg::sim
