// Xid catalog (parsed from the embedded CSV) and classification with overrides.
#include "gpu/xid_catalog.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "common/strings.h"

namespace gg::gpu {
namespace internal {
extern const std::string_view kXidCatalogCsv;  // xid_catalog_data.cc (generated)
}

namespace {

std::optional<int> ParseXidNumber(std::string_view s) {
  s = TrimSpace(s);
  if (s.empty() || s.size() > 9) return std::nullopt;
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

// Splits one CSV record starting at `pos` (RFC 4180 quoting; quoted fields may span lines).
// Returns false at end of input; *line counts physical lines consumed.
bool NextRecord(std::string_view csv, size_t& pos, std::vector<std::string>& fields, int& line,
                bool& bad_quote) {
  fields.clear();
  bad_quote = false;
  if (pos >= csv.size()) return false;
  std::string cur;
  bool in_quotes = false;
  bool field_started = false;
  while (pos < csv.size()) {
    char c = csv[pos++];
    if (in_quotes) {
      if (c == '"') {
        if (pos < csv.size() && csv[pos] == '"') {
          cur.push_back('"');
          ++pos;
        } else {
          in_quotes = false;
        }
      } else {
        if (c == '\n') ++line;
        cur.push_back(c);
      }
      continue;
    }
    if (c == '"' && !field_started) {
      in_quotes = true;
      field_started = true;
    } else if (c == ',') {
      fields.push_back(std::move(cur));
      cur.clear();
      field_started = false;
    } else if (c == '\n') {
      ++line;
      break;
    } else if (c == '\r') {
      // CRLF: ignore the CR.
    } else {
      cur.push_back(c);
      field_started = true;
    }
  }
  if (in_quotes) bad_quote = true;
  fields.push_back(std::move(cur));
  return true;
}

}  // namespace

std::string_view XidActionName(XidAction a) {
  switch (a) {
    case XidAction::kIgnore:
      return "IGNORE";
    case XidAction::kRestartApp:
      return "RESTART_APP";
    case XidAction::kCheckMechanicals:
      return "CHECK_MECHANICALS";
    case XidAction::kUpdateSwFw:
      return "UPDATE_SWFW";
    case XidAction::kContactSupport:
      return "CONTACT_SUPPORT";
    case XidAction::kUnknown:
      return "UNKNOWN";
    case XidAction::kDrainP2P:
      return "DRAIN_P2P";
    case XidAction::kResetGpu:
      return "RESET_GPU";
    case XidAction::kDrainAndReset:
      return "DRAIN_AND_RESET";
    case XidAction::kRestartVm:
      return "RESTART_VM";
    case XidAction::kRestartBm:
      return "RESTART_BM";
  }
  return "UNKNOWN";
}

std::optional<XidAction> ParseXidAction(std::string_view name) {
  for (int i = 0; i <= static_cast<int>(XidAction::kRestartBm); ++i) {
    auto a = static_cast<XidAction>(i);
    if (XidActionName(a) == name) return a;
  }
  return std::nullopt;
}

XidAction NormalizeCatalogAction(std::string_view bucket) {
  bucket = TrimSpace(bucket);
  if (bucket == "IGNORE") return XidAction::kIgnore;
  if (bucket == "RESTART_APP") return XidAction::kRestartApp;
  if (bucket == "RESET_GPU") return XidAction::kResetGpu;
  if (bucket == "RESTART_BM") return XidAction::kRestartBm;
  if (bucket == "RESTART_VM") return XidAction::kRestartVm;
  if (bucket == "CONTACT_SUPPORT") return XidAction::kContactSupport;
  if (bucket == "CHECK_MECHANICALS") return XidAction::kCheckMechanicals;
  if (bucket == "UPDATE_SWFW") return XidAction::kUpdateSwFw;
  // Workflows whose automatable outcome is a GPU reset: Xid 48 alone -> RESET_GPU (with
  // 63/64 -> drain and reset), NVLink register decode (74: "A GPU reset or node reboot is
  // needed"), NVLink5 144-150 (RESET_GPU for fatal subcodes), CHECK_UVM (reset if UVM is in
  // use — the agent cannot tell, so it assumes the disruptive case).
  if (bucket == "WORKFLOW_XID_48" || bucket == "WORKFLOW_NVLINK_ERR" ||
      bucket == "WORKFLOW_NVLINK5_ERR" || bucket == "CHECK_UVM")
    return XidAction::kResetGpu;
  // 45 is cleanup after another Xid: follow that one.
  if (bucket == "WORKFLOW_XID_45") return XidAction::kIgnore;
  // XID_154 carries the driver's recovery action (classified from it when known); blank or
  // prose buckets have no automatable action.
  return XidAction::kUnknown;
}

std::optional<XidAction> ActionForRecovery(RecoveryAction r) {
  switch (r) {
    case RecoveryAction::kNone:
      return std::nullopt;
    case RecoveryAction::kGpuReset:
      return XidAction::kResetGpu;
    case RecoveryAction::kNodeReboot:
      return XidAction::kRestartBm;
    case RecoveryAction::kDrainP2P:
      return XidAction::kDrainP2P;
    case RecoveryAction::kDrainAndReset:
      return XidAction::kDrainAndReset;
    case RecoveryAction::kRecoverImexDomain:
      return XidAction::kContactSupport;
  }
  return XidAction::kUnknown;  // a value newer than this agent: not healthy
}

const XidCatalog& XidCatalog::Builtin() {
  static const XidCatalog* catalog = [] {
    auto parsed = FromCsv(internal::kXidCatalogCsv);
    // The CSV is ours and tested; an empty table (every Xid UNKNOWN) is the safe fallback.
    return new XidCatalog(parsed.ok() ? std::move(parsed).value() : XidCatalog());
  }();
  return *catalog;
}

StatusOr<XidCatalog> XidCatalog::FromCsv(std::string_view csv) {
  XidCatalog out;
  size_t pos = 0;
  int line = 1;
  std::vector<std::string> fields;
  bool bad_quote = false;
  int record_line = line;
  if (!NextRecord(csv, pos, fields, line, bad_quote))
    return InvalidArgumentError("xid catalog: empty");
  if (fields.size() < 4 || TrimSpace(fields[0]) != "xid" ||
      TrimSpace(fields[3]) != "recommended_action")
    return InvalidArgumentError(
        "xid catalog line 1: header must start with xid,name,category,recommended_action");
  // Optional columns are found by name, so a catalog without them still parses.
  size_t short_col = 0;
  for (size_t i = 4; i < fields.size(); ++i)
    if (TrimSpace(fields[i]) == "short_name") short_col = i;
  while (true) {
    record_line = line;
    if (!NextRecord(csv, pos, fields, line, bad_quote)) break;
    if (bad_quote)
      return InvalidArgumentError("xid catalog line " + std::to_string(record_line) +
                                  ": unterminated quote");
    if (fields.size() == 1 && TrimSpace(fields[0]).empty()) continue;  // blank line
    if (fields.size() < 4)
      return InvalidArgumentError("xid catalog line " + std::to_string(record_line) +
                                  ": expected at least 4 fields, got " +
                                  std::to_string(fields.size()));
    auto xid = ParseXidNumber(fields[0]);
    if (!xid)
      return InvalidArgumentError("xid catalog line " + std::to_string(record_line) +
                                  ": bad xid '" + fields[0] + "'");
    XidInfo info;
    info.xid = *xid;
    info.name = std::string(TrimSpace(fields[1]));
    info.category = std::string(TrimSpace(fields[2]));
    info.raw_action = std::string(TrimSpace(fields[3]));
    info.action = NormalizeCatalogAction(info.raw_action);
    if (short_col != 0 && short_col < fields.size())
      info.short_name = std::string(TrimSpace(fields[short_col]));
    out.entries_.push_back(std::move(info));
  }
  std::stable_sort(out.entries_.begin(), out.entries_.end(),
                   [](const XidInfo& a, const XidInfo& b) { return a.xid < b.xid; });
  for (size_t i = 1; i < out.entries_.size(); ++i)
    if (out.entries_[i].xid == out.entries_[i - 1].xid)
      return InvalidArgumentError("xid catalog: duplicate xid " +
                                  std::to_string(out.entries_[i].xid));
  return out;
}

const XidInfo* XidCatalog::Find(int xid) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), xid,
                             [](const XidInfo& e, int x) { return e.xid < x; });
  if (it == entries_.end() || it->xid != xid) return nullptr;
  return &*it;
}

namespace {

Status AddList(std::string_view list, std::set<int>& into) {
  std::string bad;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string_view::npos) comma = list.size();
    std::string_view tok = TrimSpace(list.substr(start, comma - start));
    if (!tok.empty()) {
      auto v = ParseXidNumber(tok);
      if (v) {
        into.insert(*v);
      } else {
        if (!bad.empty()) bad += ", ";
        bad += "'" + std::string(tok) + "'";
      }
    }
    start = comma + 1;
  }
  if (!bad.empty()) return InvalidArgumentError("bad Xid list entries: " + bad);
  return OkStatus();
}

// Device-plugin env syntax: returns true when the value says "all".
bool ApplyDpList(std::string_view value, std::set<int>& into, std::vector<std::string>* skipped) {
  bool all = false;
  std::string lower = Lower(value);
  std::string_view v = lower;
  size_t start = 0;
  while (start <= v.size()) {
    size_t comma = v.find(',', start);
    if (comma == std::string_view::npos) comma = v.size();
    std::string_view tok = TrimSpace(v.substr(start, comma - start));
    if (tok == "all" || tok == "xids") {
      all = true;
    } else if (!tok.empty()) {
      auto x = ParseXidNumber(tok);
      if (x) {
        into.insert(*x);
      } else if (skipped) {
        skipped->emplace_back(tok);
      }
    }
    start = comma + 1;
  }
  return all;
}

}  // namespace

Status XidOverrides::AddIgnoreList(std::string_view list) { return AddList(list, ignore); }
Status XidOverrides::AddCriticalList(std::string_view list) { return AddList(list, critical); }

void XidOverrides::ApplyDpDisableHealthchecks(std::string_view value,
                                              std::vector<std::string>* skipped) {
  if (ApplyDpList(value, ignore, skipped)) all_ignored = true;
}

void XidOverrides::ApplyDpEnableHealthchecks(std::string_view value,
                                             std::vector<std::string>* skipped) {
  if (ApplyDpList(value, critical, skipped)) all_critical = true;
}

std::string_view XidDecisionName(XidDecision d) {
  switch (d) {
    case XidDecision::kCatalog:
      return "catalog";
    case XidDecision::kDriverRecoveryAction:
      return "driver";
    case XidDecision::kOverrideIgnore:
      return "override-ignore";
    case XidDecision::kOverrideCritical:
      return "override-critical";
    case XidDecision::kUnlisted:
      return "unlisted";
  }
  return "unlisted";
}

XidClassifier::XidClassifier(XidOverrides overrides, const XidCatalog& catalog)
    : overrides_(std::move(overrides)), catalog_(catalog) {}

XidClassification XidClassifier::Classify(int xid, std::optional<RecoveryAction> recovery) const {
  XidClassification c;
  c.xid = xid;
  const XidInfo* info = catalog_.Find(xid);
  c.category = info ? std::string_view(info->category) : std::string_view("unknown");
  c.name = info ? std::string_view(info->name) : std::string_view();

  // Base: driver recovery action (when it has an opinion) over the catalog over UNKNOWN.
  XidAction base = info ? info->action : XidAction::kUnknown;
  c.decided_by = info ? XidDecision::kCatalog : XidDecision::kUnlisted;
  if (recovery) {
    if (auto a = ActionForRecovery(*recovery)) {
      base = *a;
      c.decided_by = XidDecision::kDriverRecoveryAction;
    } else if (xid == 154) {
      // Xid 154 "changed to None": the driver says nothing needs doing.
      base = XidAction::kIgnore;
      c.decided_by = XidDecision::kDriverRecoveryAction;
    }
  }

  const bool dp_default_ignored =
      overrides_.device_plugin_defaults &&
      std::find(std::begin(kDevicePluginIgnoredXids), std::end(kDevicePluginIgnoredXids), xid) !=
          std::end(kDevicePluginIgnoredXids);
  const bool critical = overrides_.all_critical || overrides_.critical.count(xid) > 0;
  const bool ignored =
      overrides_.all_ignored || overrides_.ignore.count(xid) > 0 || dp_default_ignored;
  if (critical) {
    // Force at least RESET_GPU; a more disruptive catalog/driver action stays.
    c.action = std::max(base, XidAction::kResetGpu);
    c.decided_by = XidDecision::kOverrideCritical;
  } else if (ignored) {
    c.action = XidAction::kIgnore;
    c.decided_by = XidDecision::kOverrideIgnore;
  } else {
    c.action = base;
  }
  c.action_name = XidActionName(c.action);
  c.critical = IsCriticalAction(c.action);
  return c;
}

XidClassification XidClassifier::ClassifySxid(int sxid, std::optional<bool> fatal) const {
  XidClassification c;
  c.xid = sxid;
  c.category = "nvswitch";
  c.decided_by = XidDecision::kCatalog;
  if (!fatal) {
    c.action = XidAction::kUnknown;
    c.decided_by = XidDecision::kUnlisted;
  } else {
    c.action = *fatal ? XidAction::kResetGpu : XidAction::kIgnore;
  }
  c.action_name = XidActionName(c.action);
  c.critical = IsCriticalAction(c.action);
  return c;
}

std::optional<RecoveryAction> ParseRecoveryActionChange(std::string_view message) {
  size_t to = message.rfind(" to 0x");
  if (to == std::string_view::npos) return std::nullopt;
  std::string_view rest = message.substr(to + 6);
  unsigned v = 0;
  auto [p, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), v, 16);
  if (ec != std::errc() || p == rest.data() || v > 1000) return std::nullopt;
  return static_cast<RecoveryAction>(v);
}

bool XidNeedsWholeNode(int xid, std::string_view recommended_action) {
  auto whole_node = [](std::string_view a) { return a == "RESTART_BM" || a == "RESTART_VM"; };
  if (whole_node(recommended_action)) return true;
  const XidInfo* info = XidCatalog::Builtin().Find(xid);
  if (info == nullptr) return false;
  return info->action == XidAction::kRestartBm || info->action == XidAction::kRestartVm ||
         info->raw_action == "WORKFLOW_NVLINK_ERR";
}

std::string_view XidShortName(int xid) {
  const XidInfo* info = XidCatalog::Builtin().Find(xid);
  return info == nullptr ? std::string_view() : std::string_view(info->short_name);
}

}  // namespace gg::gpu
