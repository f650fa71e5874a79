// kubectl gpu-guardian status / explain.
#include "cli/status.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include "cli/driver_taints.h"
#include "common/strings.h"
#include "common/time_util.h"
#include "k8s/codec.h"
#include "k8s/crd_hint.h"
#include "k8s/resource.h"
#include "remediation/record.h"

namespace gg::cli {
namespace {

using nlohmann::json;

// The remediation record is the operator's: decoded by its own decoder (unknown fields are
// ignored); one unreadable record never fails the whole table.
void ReadRecord(std::string_view text, NodeRow& row) {
  auto rec = remediation::DecodeRecord(text);
  if (!rec.ok()) {
    row.actions.push_back("record-unreadable");
    return;
  }
  if (!rec->policy.empty()) row.policy = rec->policy;
  if (rec->tainted) row.actions.push_back("tainted");
  if (rec->cordoned) row.actions.push_back("cordoned");
  if (rec->drain.phase != remediation::DrainPhase::kNone) {
    row.actions.push_back("drain:" + Lower(remediation::DrainPhaseName(rec->drain.phase)));
  }
  if (rec->dry_run) row.actions.push_back("dry-run");
  row.held_back = rec->skipped;
  if (!row.held_back.empty()) row.actions.push_back("held-back");
}

// The condition message ends with " [policy NAME]" (the policy whose verdict it is).
std::string PolicyFromMessage(const std::string& msg, std::string* rest) {
  static constexpr std::string_view kMarker = " [policy ";
  auto at = msg.rfind(kMarker);
  if (at == std::string::npos || msg.empty() || msg.back() != ']') {
    if (rest) *rest = msg;
    return {};
  }
  if (rest) *rest = msg.substr(0, at);
  return msg.substr(at + kMarker.size(), msg.size() - at - kMarker.size() - 1);
}

std::string Pad(const std::string& s, size_t w) {
  // Column widths count bytes; node names and reasons are ASCII.
  if (s.size() >= w) return s;
  return s + std::string(w - s.size(), ' ');
}

std::string Truncate(const std::string& s, size_t w) {
  if (s.size() <= w) return s;
  return s.substr(0, w - 3) + "...";
}

std::string Join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const auto& s : v) {
    if (!out.empty()) out += sep;
    out += s;
  }
  return out;
}

}  // namespace

std::string Age(WallTime since, WallTime now) {
  auto d = std::chrono::duration_cast<std::chrono::seconds>(now - since);
  if (d.count() < 0) d = std::chrono::seconds(0);
  long s = static_cast<long>(d.count());
  char buf[32];
  if (s < 120)
    std::snprintf(buf, sizeof(buf), "%lds", s);
  else if (s < 3600 * 3)
    std::snprintf(buf, sizeof(buf), "%ldm%lds", s / 60, s % 60);
  else if (s < 86400 * 2)
    std::snprintf(buf, sizeof(buf), "%ldh%ldm", s / 3600, (s % 3600) / 60);
  else
    std::snprintf(buf, sizeof(buf), "%ldd", s / 86400);
  return buf;
}

NodeRow BuildRow(const k8s::Node& node, const std::optional<api::GpuNodeHealthStatus>& report) {
  NodeRow row;
  row.node = node.meta.name;
  row.excluded =
      node.meta.labels.Get(api::kExcludeLabel) == std::optional<std::string_view>("true");
  const k8s::NodeCondition* cond = node.FindCondition(api::kConditionType);
  if (cond == nullptr) {
    row.state = "NotEvaluated";
  } else {
    row.state = cond->status == "True"    ? "Healthy"
                : cond->status == "False" ? "Unhealthy"
                                          : "Unknown";
    row.reason = cond->reason;
    row.why = cond->message;
    row.since = cond->last_transition_time;
  }
  row.gpus_total = static_cast<int>(node.gpu_capacity);
  if (report) {
    row.report_observed = report->observed_at;
    if (!report->gpus.empty()) row.gpus_total = static_cast<int>(report->gpus.size());
    for (const auto& g : report->gpus)
      if (g.lost) ++row.gpus_bad;
  }
  if (node.FindTaint(api::kTaintKey) != nullptr) row.actions.push_back("tainted");
  if (auto rec = node.meta.annotations.Get(api::kRemediationAnnotation)) {
    std::vector<std::string> before = row.actions;
    ReadRecord(*rec, row);
    // The record's "tainted" duplicates what the node shows.
    std::vector<std::string> uniq;
    for (const auto& a : row.actions)
      if (std::find(uniq.begin(), uniq.end(), a) == uniq.end()) uniq.push_back(a);
    row.actions = uniq;
  }
  if (node.unschedulable &&
      std::find(row.actions.begin(), row.actions.end(), "cordoned") == row.actions.end())
    row.actions.push_back("cordoned(admin)");
  if (row.excluded) row.actions.push_back("excluded");
  // One policy per row: the verdict's (what WHY shows) wins over an older record's.
  if (std::string p = PolicyFromMessage(row.why, nullptr); !p.empty()) row.policy = p;
  return row;
}

StatusOr<std::vector<NodeRow>> CollectRows(k8s::RestClient& client) {
  std::map<std::string, api::GpuNodeHealthStatus> reports;
  std::map<std::string, std::string> report_errors;
  auto body = client.List(k8s::kGpuNodeHealths, "");
  if (body.ok()) {
    json list = json::parse(*body, nullptr, false);
    if (list.is_object() && list.contains("items") && list["items"].is_array()) {
      for (const auto& item : list["items"]) {
        if (!item.is_object() || !item.contains("metadata") || !item.contains("status")) continue;
        std::string name = item["metadata"].value("name", "");
        auto decoded = api::DecodeGpuNodeHealthStatus(item["status"].dump());
        if (decoded.ok())
          reports[name] = std::move(*decoded);
        else
          report_errors[name] = decoded.status().message();
      }
    }
  } else if (k8s::IsResourceNotServed(body.status())) {
    return FailedPreconditionError(k8s::MissingResourceHint(k8s::kGpuNodeHealths));
  } else if (!IsNotFound(body.status())) {
    return body.status().WithContext("listing gpunodehealths");
  }
  std::vector<NodeRow> rows;
  Status st = client.ListPages(
      k8s::kNodes, "", k8s::ListOptions{.limit = 500},
      [&](std::string& page) -> StatusOr<k8s::ListPageInfo> {
        GG_ASSIGN_OR_RETURN(auto list, k8s::ParseList<k8s::Node>(page));
        for (const auto& n : list.items) {
          auto it = reports.find(n.meta.name);
          bool has_report = it != reports.end();
          if (n.gpu_capacity == 0 && !has_report && !report_errors.count(n.meta.name)) continue;
          NodeRow row = BuildRow(n, has_report ? std::optional(it->second) : std::nullopt);
          if (auto e = report_errors.find(n.meta.name); e != report_errors.end())
            row.actions.push_back("report-invalid");
          rows.push_back(std::move(row));
        }
        return k8s::ListPageInfo{list.resource_version, list.continue_token};
      });
  if (!st.ok()) return st.WithContext("listing nodes");
  const std::vector<k8s::ResourceSlice> slices = ListSlices(client, "");
  for (auto& row : rows) {
    row.driver_taints = DriverTaintLines(slices, row.node);
    if (!row.driver_taints.empty())
      row.actions.push_back("driver-tainted:" + std::to_string(row.driver_taints.size()));
  }
  std::sort(rows.begin(), rows.end(),
            [](const NodeRow& a, const NodeRow& b) { return a.node < b.node; });
  return rows;
}

std::string RenderTable(const std::vector<NodeRow>& rows, WallTime now, bool color, bool wide) {
  std::vector<std::vector<std::string>> cells;
  if (wide)
    cells.push_back(
        {"NODE", "STATE", "GPUS", "ACTIONS", "SINCE", "POLICY", "REASON", "REPORTED", "WHY"});
  else
    cells.push_back({"NODE", "STATE", "GPUS", "ACTIONS", "SINCE", "POLICY", "WHY"});
  for (const auto& r : rows) {
    std::string gpus =
        r.gpus_bad ? std::to_string(r.gpus_total - r.gpus_bad) + "/" + std::to_string(r.gpus_total)
                   : std::to_string(r.gpus_total);
    // POLICY has its own column: WHY drops the " [policy X]" suffix it repeats.
    std::string why;
    PolicyFromMessage(r.why, &why);
    if (!wide) why = Truncate(why, 80);
    std::vector<std::string> row = {r.node,
                                    r.state,
                                    gpus,
                                    r.actions.empty() ? "-" : Join(r.actions, ","),
                                    r.since ? Age(*r.since, now) : "-",
                                    r.policy.empty() ? "-" : r.policy};
    if (wide) {
      row.push_back(r.reason.empty() ? "-" : r.reason);
      row.push_back(r.report_observed ? Age(*r.report_observed, now) + " ago" : "never");
    }
    row.push_back(why.empty() ? "-" : why);
    cells.push_back(std::move(row));
  }
  std::vector<size_t> width(cells[0].size(), 0);
  for (const auto& row : cells)
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  std::ostringstream out;
  for (size_t r = 0; r < cells.size(); ++r) {
    for (size_t i = 0; i < cells[r].size(); ++i) {
      std::string cell = i + 1 == cells[r].size() ? cells[r][i] : Pad(cells[r][i], width[i] + 2);
      if (color && r > 0 && i == 1) {
        const std::string& s = cells[r][1];
        const char* code = s == "Healthy"     ? "32"
                           : s == "Unhealthy" ? "31"
                           : s == "Unknown"   ? "33"
                                              : "90";
        cell = std::string("\033[") + code + "m" + cell + "\033[0m";
      }
      out << cell;
    }
    out << "\n";
  }
  return out.str();
}

std::string RenderBrakes(const ClusterStatus& st) {
  std::ostringstream out;
  for (const auto& b : st.brakes)
    out << "\nBrake engaged on policy " << b.policy << ": "
        << (b.message.empty() ? b.reason : b.message) << "\n";
  bool header = false;
  for (const auto& r : st.rows) {
    if (r.held_back.empty()) continue;
    if (!header)
      out << (st.brakes.empty() ? "\n" : "") << "Held back (new remediation withheld):\n";
    header = true;
    out << "  " << r.node << ": " << r.held_back << "\n";
  }
  return out.str();
}

json RowsToJson(const std::vector<NodeRow>& rows) {
  json arr = json::array();
  for (const auto& r : rows) {
    json j = {{"node", r.node},       {"state", r.state},     {"reason", r.reason},
              {"message", r.why},     {"gpus", r.gpus_total}, {"badGPUs", r.gpus_bad},
              {"actions", r.actions}, {"policy", r.policy},   {"excluded", r.excluded}};
    if (!r.held_back.empty()) j["heldBack"] = r.held_back;
    if (!r.driver_taints.empty()) j["driverTaints"] = r.driver_taints;
    if (r.since) j["since"] = FormatRfc3339(*r.since);
    if (r.report_observed) j["reportObservedAt"] = FormatRfc3339(*r.report_observed);
    arr.push_back(std::move(j));
  }
  return json{
      {"apiVersion", "gpuguardian.io/v1alpha1"}, {"kind", "GPUNodeStatusList"}, {"items", arr}};
}

json StatusToJson(const ClusterStatus& st) {
  json j = RowsToJson(st.rows);
  json brakes = json::array();
  for (const auto& b : st.brakes)
    brakes.push_back({{"policy", b.policy}, {"reason", b.reason}, {"message", b.message}});
  j["brakes"] = std::move(brakes);
  j["operator"] = {{"lease", st.lease.found ? st.lease.ns + "/" + st.lease.name : ""},
                   {"holder", st.lease.holder},
                   {"leading", st.lease.problem.empty()}};
  if (!st.lease.problem.empty()) j["operator"]["problem"] = st.lease.problem;
  return j;
}

StatusOr<std::vector<BrakeInfo>> CollectBrakes(k8s::RestClient& client) {
  auto body = client.List(k8s::kGpuHealthPolicies, "");
  if (!body.ok()) {
    if (k8s::IsResourceNotServed(body.status()))
      return FailedPreconditionError(k8s::MissingResourceHint(k8s::kGpuHealthPolicies));
    return body.status().WithContext("listing gpuhealthpolicies");
  }
  std::vector<BrakeInfo> out;
  json list = json::parse(*body, nullptr, false);
  if (!list.is_object() || !list.contains("items") || !list["items"].is_array()) return out;
  for (const auto& item : list["items"]) {
    if (!item.is_object() || !item.contains("status") || !item["status"].is_object()) continue;
    const json& st = item["status"];
    if (!st.contains("conditions") || !st["conditions"].is_array()) continue;
    for (const auto& c : st["conditions"]) {
      if (!c.is_object() || c.value("type", "") != "BrakeEngaged" ||
          c.value("status", "") != "True")
        continue;
      BrakeInfo b;
      if (item.contains("metadata") && item["metadata"].is_object())
        b.policy = item["metadata"].value("name", "");
      b.reason = c.value("reason", "");
      b.message = c.value("message", "");
      out.push_back(std::move(b));
    }
  }
  std::sort(out.begin(), out.end(),
            [](const BrakeInfo& a, const BrakeInfo& b) { return a.policy < b.policy; });
  return out;
}

namespace {

void JudgeLease(const k8s::Lease& l, WallTime now, OperatorLease* out) {
  out->found = true;
  out->ns = l.meta.namespace_;
  out->name = l.meta.name;
  out->holder = l.holder_identity;
  const std::string where = "Lease " + out->ns + "/" + out->name;
  if (l.holder_identity.empty()) {
    out->problem = "no operator is leading: " + where + " was released and nobody took it";
    return;
  }
  const auto duration = std::chrono::seconds(l.lease_duration_seconds.value_or(15));
  if (!l.renew_time) {
    out->problem = "no operator is leading: " + where + " has never been renewed";
    return;
  }
  if (*l.renew_time + duration < now) {
    out->problem = "no operator is leading: " + where + " held by " + l.holder_identity +
                   " was last renewed " + Age(*l.renew_time, now) + " ago (lease duration " +
                   std::to_string(duration.count()) + "s); is the operator running?";
    return;
  }
  out->fresh = true;
}

}  // namespace

OperatorLease FindOperatorLease(k8s::RestClient& client, const std::string& ns,
                                const std::string& name, WallTime now) {
  OperatorLease out;
  out.name = name;
  std::vector<std::string> candidates;
  if (!ns.empty()) {
    candidates = {ns};
  } else {
    k8s::ListOptions lo;
    lo.field_selector = "metadata.name=" + name;
    auto list = client.List(k8s::kLeases, "", lo);
    auto parsed = list.ok() ? k8s::ParseList<k8s::Lease>(*list)
                            : StatusOr<k8s::ObjectList<k8s::Lease>>(list.status());
    if (parsed.ok()) {
      // Several (an old install left one behind): a fresh one decides.
      OperatorLease best;
      for (const auto& l : parsed->items) {
        OperatorLease one;
        JudgeLease(l, now, &one);
        if (!best.found || (one.fresh && !best.fresh)) best = one;
      }
      if (best.found) return best;
    } else {
      // No cluster-wide list allowed: the namespaces our manifests and defaults use.
      candidates = {"gpu-guardian", "gpu-guardian-system", "default"};
    }
  }
  std::string read_error;  // a Lease we could not read is not "no Lease"
  for (const auto& c : candidates) {
    auto body = client.Get(k8s::kLeases, c, name);
    if (!body.ok()) {
      if (!IsNotFound(body.status()))
        read_error = "reading Lease " + c + "/" + name + ": " + body.status().message();
      continue;
    }
    auto l = k8s::ParseObject<k8s::Lease>(*body);
    if (!l.ok()) {
      read_error = "Lease " + c + "/" + name + " is unreadable: " + l.status().message();
      continue;
    }
    JudgeLease(*l, now, &out);
    return out;
  }
  if (!read_error.empty()) {
    out.problem = "cannot tell whether an operator is leading: " + read_error;
    return out;
  }
  std::string where;
  for (const auto& c : candidates) where += (where.empty() ? "" : ", ") + c;
  out.problem = "no operator is leading: no Lease \"" + name + "\" found" +
                (candidates.empty() ? std::string(" in any namespace") : " in namespace " + where) +
                "; is the operator deployed (kubectl apply -k deploy/) and running with "
                "--leader-elect? (-n NAMESPACE / --lease NAME to look elsewhere)";
  return out;
}

namespace {

// The node's GPUNodeHealth report (or, where none is published, the health annotation) and
// a note on where it came from or why there is none; an error only when the API fails.
Status ReadReport(k8s::RestClient& client, const k8s::Node& node, const std::string& node_name,
                  std::optional<api::GpuNodeHealthStatus>* report, std::string* report_note) {
  auto rep_body = client.Get(k8s::kGpuNodeHealths, "", node_name);
  if (rep_body.ok()) {
    json obj = json::parse(*rep_body, nullptr, false);
    if (obj.is_object() && obj.contains("status")) {
      auto decoded = api::DecodeGpuNodeHealthStatus(obj["status"].dump());
      if (decoded.ok())
        *report = std::move(*decoded);
      else
        *report_note = "report is invalid: " + decoded.status().message();
    }
  } else if (k8s::IsResourceNotServed(rep_body.status())) {
    *report_note = "cannot be read: " + k8s::MissingResourceHint(k8s::kGpuNodeHealths);
  } else if (IsNotFound(rep_body.status())) {
    if (auto ann = node.meta.annotations.Get(api::kHealthAnnotation)) {
      auto decoded = api::DecodeHealthAnnotation(*ann);
      if (decoded.ok()) {
        *report = std::move(*decoded);
        *report_note = "(from the " + std::string(api::kHealthAnnotation) + " annotation)";
      } else {
        *report_note = "annotation report is invalid: " + decoded.status().message();
      }
    } else {
      *report_note = "no GPUNodeHealth report has been published for this node";
    }
  } else {
    return rep_body.status().WithContext("reading the report");
  }
  return OkStatus();
}

// The agent's heartbeat Lease for a node (api::AgentLeaseName): in `ns` when given,
// else found by name in any namespace. Heartbeats renew it, not the report, so the report's own
// heartbeatTime only moves when its facts change. nullopt when there is none or it cannot be read
// (an agent too old to write one, or no permission): the report's time is then all there is.
std::optional<k8s::Lease> FindAgentLease(k8s::RestClient& client, const std::string& ns,
                                         const std::string& node) {
  const std::string name = api::AgentLeaseName(node);
  k8s::ListOptions lo;
  lo.field_selector = "metadata.name=" + name;
  auto list = client.List(k8s::kLeases, ns, lo);
  if (!list.ok()) return std::nullopt;
  auto parsed = k8s::ParseList<k8s::Lease>(*list);
  if (!parsed.ok()) return std::nullopt;
  std::optional<k8s::Lease> best;
  for (auto& l : parsed->items) {
    if (l.holder_identity != node || !l.renew_time) continue;  // the operator ignores these too
    if (!best || *l.renew_time > *best->renew_time) best = std::move(l);
  }
  return best;
}

// The report's freshness, sources, GPUs and Xids, one line each. Freshness is the later of the
// report's heartbeatTime and the agent Lease's renewTime, as the operator judges it.
void WriteReport(std::ostream& out, const api::GpuNodeHealthStatus& report,
                 const std::optional<k8s::Lease>& lease, WallTime now) {
  WallTime heartbeat = report.heartbeat_time;
  if (lease && *lease->renew_time > heartbeat) heartbeat = *lease->renew_time;
  out << "  observed " << Age(report.observed_at, now) << " ago, heartbeat " << Age(heartbeat, now)
      << " ago";
  if (lease)
    out << " (Lease " << lease->meta.namespace_ << "/" << lease->meta.name << ")";
  else
    out << " (the report's; no agent Lease found)";
  out << ", agent " << report.agent_version << "\n";
  for (const auto& s : report.sources)
    out << "  source " << s.name << ": " << api::SourceStateName(s.state)
        << (s.message.empty() ? "" : " (" + s.message + ")") << "\n";
  for (const auto& g : report.gpus) {
    out << "  GPU " << g.index << " " << g.uuid << " " << g.name;
    if (g.lost) out << " LOST";
    if (g.temperature_c) out << " " << *g.temperature_c << "C";
    if (g.ecc_uncorrected_volatile && *g.ecc_uncorrected_volatile)
      out << " ecc-uncorrected=" << *g.ecc_uncorrected_volatile;
    if (g.remap_failure) out << " remap-failure";
    if (g.remap_pending) out << " remap-pending";
    if (!g.throttle_reasons.empty()) out << " throttle=" << Join(g.throttle_reasons, "+");
    if (!g.recovery_action.empty() && g.recovery_action != "None")
      out << " recovery=" << g.recovery_action;
    out << "\n";
  }
  for (const auto& x : report.xids)
    out << "  Xid " << x.xid << " x" << x.count << " on "
        << (x.gpu_uuid.empty() ? x.pci_bus_id : x.gpu_uuid) << " [" << x.category << ", "
        << x.recommended_action << "] last " << Age(x.last_seen, now) << " ago\n";
}

// The Events about this node, oldest first (nothing when none or they cannot be listed).
void WriteNodeEvents(std::ostream& out, k8s::RestClient& client, const std::string& node_name,
                     WallTime now) {
  k8s::ListOptions lo;
  lo.field_selector = "involvedObject.kind=Node,involvedObject.name=" + node_name;
  auto events = client.List(k8s::kEvents, "", lo);
  if (events.ok()) {
    auto list = k8s::ParseList<k8s::Event>(*events);
    if (list.ok() && !list->items.empty()) {
      auto items = list->items;
      auto ts = [](const k8s::Event& e) {
        return e.last_timestamp.value_or(e.event_time.value_or(WallTime{}));
      };
      std::sort(items.begin(), items.end(),
                [&](const auto& a, const auto& b) { return ts(a) < ts(b); });
      out << "\nEvents:\n";
      for (const auto& e : items)
        out << "  " << Pad(Age(ts(e), now) + " ago", 10) << Pad(e.type, 8) << Pad(e.reason, 20)
            << (e.count > 1 ? "(x" + std::to_string(e.count) + ") " : "") << e.message << "\n";
    }
  }
}

}  // namespace

StatusOr<std::string> Explain(k8s::RestClient& client, const std::string& node_name, WallTime now,
                              const std::string& agent_ns) {
  GG_ASSIGN_OR_RETURN(std::string node_body, client.Get(k8s::kNodes, "", node_name));
  GG_ASSIGN_OR_RETURN(k8s::Node node, k8s::ParseObject<k8s::Node>(node_body));
  std::optional<api::GpuNodeHealthStatus> report;
  std::string report_note;
  GG_RETURN_IF_ERROR(ReadReport(client, node, node_name, &report, &report_note));
  NodeRow row = BuildRow(node, report);
  std::ostringstream out;
  out << "Node:      " << row.node << "\n";
  out << "State:     " << row.state;
  if (!row.reason.empty()) out << " (" << row.reason << ")";
  if (row.since) out << " for " << Age(*row.since, now);
  out << "\n";
  if (!row.why.empty()) out << "Evidence:  " << row.why << "\n";
  out << "Actions:   " << (row.actions.empty() ? "-" : Join(row.actions, ", ")) << "\n";
  if (!row.policy.empty()) out << "Policy:    " << row.policy << "\n";
  out << "Cordoned:  " << (node.unschedulable ? "yes" : "no") << "\n";
  for (const auto& t : node.taints)
    out << "Taint:     " << t.key << (t.value.empty() ? "" : "=" + t.value) << ":" << t.effect
        << "\n";
  for (const auto& line : DriverTaintLines(ListSlices(client, node_name), node_name))
    out << "Device taint: " << line << "\n";
  out << "\nReport " << report_note << "\n";
  if (report) WriteReport(out, *report, FindAgentLease(client, agent_ns, node_name), now);
  if (auto rec = node.meta.annotations.Get(api::kRemediationAnnotation)) {
    json r = json::parse(*rec, nullptr, false);
    out << "\nRemediation record (" << api::kRemediationAnnotation << "):\n"
        << (r.is_discarded() ? std::string(*rec) : r.dump(2)) << "\n";
  }
  WriteNodeEvents(out, client, node_name, now);
  return out.str();
}

}  // namespace gg::cli
