// ResourceClaim status writes as each release's kube-apiserver treats them (KEP-4817 device
// status, and from 1.36 the granular status authorization):
// - status.devices (per allocated device: conditions, data, networkData) is kept from 1.33
//   (gate DRAResourceClaimDeviceStatus beta, on by default); in 1.32 the gate is alpha and
//   off, and the server drops the field on every write.
// - Entries may only name devices the claim's allocation lists (driver, pool, device).
// - From 1.36 (DRAResourceClaimGranularStatusAuthorization, beta, on): besides
//   resourceclaims/status, a change to status.devices entries of driver D needs the verb
//   "arbitrary-node:<update|patch>" on the synthetic subresource resourceclaims/driver named D
//   ("associated-node:" for a node-bound requester is not simulated), and a change to
//   status.allocation or status.reservedFor needs <update|patch> on resourceclaims/binding.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "sim/api.h"
#include "sim/api_error.h"
#include "sim/rbac.h"

namespace gg::sim {

// For a write (update, or patch when `from_patch`) of resourceclaims/status — any other write
// passes untouched: adjusts `next` for the release (drops status.devices before 1.33) and
// returns the error to answer instead, if any. `authz` null: no
// authorization (authz mode AlwaysAllow or an in-process writer); `o.user` empty likewise.
std::optional<ApiError> AdmitClaimStatus(const Target& t, const std::string& kube_version,
                                         Authorizer* authz, bool from_patch,
                                         const nlohmann::json& old_claim, nlohmann::json& next,
                                         const WriteOpts& o);

}  // namespace gg::sim
