// Xid catalog and classification. The table comes from NVIDIA's Xid catalog
// (src/gpu/data/xid-catalog.csv, embedded at build time — the CSV is the single source).
// Classification order: operator overrides (--xid-ignore/--xid-critical, DP_* env) >
// driver-reported recovery action (NVML field 230 / Xid 154 text) > catalog > UNKNOWN.
// See docs/xid-classification.md.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "gpu/nvml_api.h"

namespace gg::gpu {

// Normalized recommended action, ordered by severity (higher = more disruptive).
enum class XidAction : int {
  kIgnore = 0,
  kRestartApp = 1,
  kCheckMechanicals = 2,  // reseat / cables: needs a human, GPU may keep working
  kUpdateSwFw = 3,
  kContactSupport = 4,
  kUnknown = 5,   // unlisted Xid or no bucket in the catalog: NOT healthy
  kDrainP2P = 6,  // driver recovery action
  kResetGpu = 7,
  kDrainAndReset = 8,  // driver recovery action
  kRestartVm = 9,
  kRestartBm = 10,
};
// "IGNORE", "RESTART_APP", "CHECK_MECHANICALS", "UPDATE_SWFW", "CONTACT_SUPPORT", "UNKNOWN",
// "DRAIN_P2P", "RESET_GPU", "DRAIN_AND_RESET", "RESTART_VM", "RESTART_BM".
std::string_view XidActionName(XidAction a);
std::optional<XidAction> ParseXidAction(std::string_view name);
// Catalog bucket text -> action: RESTART_APP, IGNORE, RESET_GPU, RESTART_BM, RESTART_VM,
// CONTACT_SUPPORT, CHECK_MECHANICALS, UPDATE_SWFW map 1:1; WORKFLOW_XID_48,
// WORKFLOW_NVLINK_ERR, WORKFLOW_NVLINK5_ERR, CHECK_UVM -> RESET_GPU (their reset outcome);
// WORKFLOW_XID_45 -> IGNORE (follow the other Xid); XID_154 and blank/prose -> UNKNOWN.
XidAction NormalizeCatalogAction(std::string_view bucket);
// Driver recovery action (field 230 value) -> action; kNone -> nullopt (no opinion).
std::optional<XidAction> ActionForRecovery(RecoveryAction r);
// Actions that make the GPU unfit for new work (everything above RESTART_APP).
inline bool IsCriticalAction(XidAction a) { return a > XidAction::kRestartApp; }

struct XidInfo {
  int xid = 0;
  std::string name;      // "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS - GPU has fallen off the bus"
  std::string category;  // "pcie", "memory", "application", ... (catalog column)
  std::string raw_action;  // catalog bucket as written ("WORKFLOW_XID_48")
  XidAction action = XidAction::kUnknown;
  // Optional `short_name` column: the short form verdict messages use ("fallen off the bus")
  // where `name` is the driver's constant; "" when the catalog has none.
  std::string short_name;
};

class XidCatalog {
 public:
  // The built-in table (embedded CSV), parsed once.
  static const XidCatalog& Builtin();
  // Parses catalog CSV text (header: xid,name,category,recommended_action[,...]; RFC 4180
  // quoting). Errors name the line.
  static StatusOr<XidCatalog> FromCsv(std::string_view csv);

  const XidInfo* Find(int xid) const;  // nullptr when unlisted
  const std::vector<XidInfo>& entries() const { return entries_; }

 private:
  std::vector<XidInfo> entries_;  // sorted by xid
};

// Operator overrides. Precedence (highest first): critical (DP_ENABLE_HEALTHCHECKS,
// --xid-critical) > ignore (DP_DISABLE_HEALTHCHECKS, --xid-ignore, DRA
// --additional-xids-to-ignore) > all_ignored. Unlike the device plugin, "disable all" plus an
// enable list still treats the enabled Xids as critical (see the doc).
struct XidOverrides {
  std::set<int> ignore;
  std::set<int> critical;
  bool all_ignored = false;   // DP_DISABLE_HEALTHCHECKS=all|xids
  bool all_critical = false;  // DP_ENABLE_HEALTHCHECKS=all|xids
  // Also ignore the device plugin's hard-coded application Xids 13,31,43,45,68,109
  // (proposed agent flag --xid-ignore-dp-defaults). Off by default: the catalog already rates
  // most of them RESTART_APP/IGNORE.
  bool device_plugin_defaults = false;

  // "13,31" (flag syntax; whitespace allowed). Bad tokens -> InvalidArgument naming them.
  Status AddIgnoreList(std::string_view list);
  Status AddCriticalList(std::string_view list);
  // Device-plugin env semantics: "all"/"xids" (case-insensitive) or a comma list. Malformed
  // tokens are skipped and returned in *skipped (the plugin logs and drops them).
  void ApplyDpDisableHealthchecks(std::string_view value,
                                  std::vector<std::string>* skipped = nullptr);
  void ApplyDpEnableHealthchecks(std::string_view value,
                                 std::vector<std::string>* skipped = nullptr);
};
// The device plugin's built-in ignored ("application") Xids.
inline constexpr int kDevicePluginIgnoredXids[] = {13, 31, 43, 45, 68, 109};

enum class XidDecision {
  kCatalog,
  kDriverRecoveryAction,
  kOverrideIgnore,
  kOverrideCritical,
  kUnlisted
};
std::string_view XidDecisionName(XidDecision d);  // "catalog", "driver", "override-ignore", ...

struct XidClassification {
  int xid = 0;
  XidAction action = XidAction::kUnknown;
  std::string_view action_name;  // XidActionName(action)
  std::string_view category;     // catalog category or "unknown"
  std::string_view name;         // catalog name or ""
  bool critical = false;         // IsCriticalAction(action)
  XidDecision decided_by = XidDecision::kUnlisted;
};

class XidClassifier {
 public:
  explicit XidClassifier(XidOverrides overrides = {},
                         const XidCatalog& catalog = XidCatalog::Builtin());
  // `recovery`: the driver's recovery action for this GPU right after the Xid, if known
  // (field 230, or parsed from an Xid 154 line). kNone does not downgrade the catalog.
  XidClassification Classify(int xid, std::optional<RecoveryAction> recovery = std::nullopt) const;
  // SXids (NVSwitch): "Fatal" -> RESET_GPU-class (category "nvswitch"), "Non-fatal" -> IGNORE,
  // unknown severity -> UNKNOWN. Overrides do not apply (they are GPU Xid numbers).
  XidClassification ClassifySxid(int sxid, std::optional<bool> fatal) const;
  const XidOverrides& overrides() const { return overrides_; }

 private:
  XidOverrides overrides_;
  const XidCatalog& catalog_;
};

// --- Facts the policy engine takes from the catalog (docs/reference/xid-catalog.md) ---
// The Xid needs the whole node fenced: its catalog action (or `recommended_action`, the
// agent's classification in the report) is RESTART_BM / RESTART_VM, or the catalog sends it
// through NVIDIA's NVLink workflow (the peers over NVLink are involved).
bool XidNeedsWholeNode(int xid, std::string_view recommended_action);
// Short human name of a well-known Xid for verdict messages ("fallen off the bus"); "" when
// the catalog has none.
std::string_view XidShortName(int xid);

// Parses "… GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)" (the
// Xid 154 message) into the new action.
std::optional<RecoveryAction> ParseRecoveryActionChange(std::string_view message);

}  // namespace gg::gpu
