// Timeline: four small list+watch loops feeding one printer.
#include "cli/timeline.h"

#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "cli/status.h"
#include "common/time_util.h"
#include "k8s/codec.h"
#include "k8s/resource.h"

namespace gg::cli {
namespace {

using nlohmann::json;

std::string Ms(std::optional<WallTime> from, std::optional<WallTime> to) {
  if (!from || !to) return "-";
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(*to - *from).count();
  char buf[32];
  if (ms < 10000)
    std::snprintf(buf, sizeof(buf), "%lld ms", static_cast<long long>(ms));
  else
    std::snprintf(buf, sizeof(buf), "%.1f s", static_cast<double>(ms) / 1000.0);
  return buf;
}

// LIST (to learn the resourceVersion and the current state, printed silently) then WATCH,
// resuming from the last resourceVersion; relists only on 410.
void ListWatch(
    k8s::RestClient& client, const k8s::ResourceType& type, std::stop_token stop,
    const std::function<void(std::string_view object_json, bool initial, bool deleted)>& fn) {
  std::string rv;
  bool need_list = true;
  while (!stop.stop_requested()) {
    if (need_list) {
      auto body = client.List(type, "");
      if (!body.ok()) {
        client.clock().SleepFor(std::chrono::seconds(1), stop);
        continue;
      }
      json list = json::parse(*body, nullptr, false);
      if (!list.is_object()) continue;
      rv = list["metadata"].value("resourceVersion", "");
      if (list.contains("items") && list["items"].is_array())
        for (const auto& item : list["items"]) fn(item.dump(), true, false);
      need_list = false;
    }
    k8s::WatchOptions wo;
    wo.resource_version = rv;
    wo.timeout_seconds = 60;
    Status st = client.Watch(
        type, "", wo,
        [&](std::string_view line) {
          json ev = json::parse(line, nullptr, false);
          if (!ev.is_object() || !ev.contains("object")) return true;
          std::string kind = ev.value("type", "");
          const json& obj = ev["object"];
          if (obj.contains("metadata") && obj["metadata"].contains("resourceVersion"))
            rv = obj["metadata"].value("resourceVersion", rv);
          if (kind == "ADDED" || kind == "MODIFIED" || kind == "DELETED")
            fn(obj.dump(), false, kind == "DELETED");
          return !stop.stop_requested();
        },
        stop);
    if (st.code() == StatusCode::kOutOfRange)
      need_list = true;
    else if (!st.ok() && !stop.stop_requested())
      client.clock().SleepFor(std::chrono::milliseconds(500), stop);
  }
}

}  // namespace

std::string DescribeReport(const api::GpuNodeHealthStatus& r) {
  std::vector<std::string> parts;
  for (const auto& g : r.gpus) {
    std::string p;
    auto add = [&](const std::string& s) { p += (p.empty() ? "" : ", ") + s; };
    if (g.lost) add("lost");
    if (g.ecc_uncorrected_volatile && *g.ecc_uncorrected_volatile)
      add("uncorrectable ECC x" + std::to_string(*g.ecc_uncorrected_volatile));
    if (g.remap_failure) add("row-remap failure");
    if (g.remap_pending) add("row-remap pending");
    if (g.temperature_c && g.slowdown_temperature_c &&
        *g.temperature_c >= *g.slowdown_temperature_c)
      add(std::to_string(*g.temperature_c) + " C");
    for (const auto& t : g.throttle_reasons)
      if (t.find("Thermal") != std::string::npos) add(t);
    if (!g.recovery_action.empty() && g.recovery_action != "None")
      add("recovery " + g.recovery_action);
    if (!p.empty()) parts.push_back("GPU " + std::to_string(g.index) + ": " + p);
  }
  for (const auto& x : r.xids)
    parts.push_back("Xid " + std::to_string(x.xid) + " x" + std::to_string(x.count) + " [" +
                    x.recommended_action + "]");
  for (const auto& s : r.sources)
    if (s.state != api::SourceState::kOk)
      parts.push_back("source " + s.name + " " + std::string(api::SourceStateName(s.state)));
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : "; ") + p;
  return out;
}

Timeline::Timeline(k8s::RestClient& client, Clock& clock, std::ostream& out,
                   TimelineOptions options)
    : client_(client), clock_(clock), out_(out), options_(options) {}

void Timeline::Print(const std::string& subject, const std::string& text, const char* color) {
  double t = std::chrono::duration<double>(clock_.Now() - start_).count();
  char ts[32];
  std::snprintf(ts, sizeof(ts), "[%6.1fs] ", t);
  std::string subj = subject;
  subj += subj.size() < 28 ? std::string(28 - subj.size(), ' ') : std::string(" ");
  if (options_.color && color)
    out_ << ts << "\033[" << color << "m" << subj << text << "\033[0m\n";
  else
    out_ << ts << subj << text << "\n";
  out_.flush();
}

void Timeline::OnReport(const std::string& node, const api::GpuNodeHealthStatus& report) {
  std::string desc = DescribeReport(report);
  auto& prev = report_summary_[node];
  if (desc == prev) return;
  prev = desc;
  auto& m = milestones_[node];
  if (!desc.empty() && !m.fault_observed) {
    m.fault_observed = report.observed_at;
    m.report_seen = clock_.Now();
  }
  Print("report " + node, desc.empty() ? "all GPUs healthy" : desc, desc.empty() ? "32" : "33");
}

void Timeline::OnNode(const k8s::Node& node, bool deleted) {
  const std::string& name = node.meta.name;
  auto it = nodes_.find(name);
  if (deleted) {
    if (it != nodes_.end()) nodes_.erase(it);
    Print("node " + name, "deleted");
    return;
  }
  k8s::Node old = it == nodes_.end() ? k8s::Node{} : it->second;
  nodes_[name] = node;
  if (it == nodes_.end()) return;  // first sight
  auto& m = milestones_[name];
  WallTime now = clock_.Now();
  const k8s::NodeCondition* oc = old.FindCondition(api::kConditionType);
  const k8s::NodeCondition* nc = node.FindCondition(api::kConditionType);
  std::string os = oc ? oc->status : "", ns = nc ? nc->status : "";
  if (os != ns && nc) {
    const char* color = ns == "True" ? "32" : ns == "False" ? "31" : "33";
    Print("node " + name, "GPUHealthy=" + ns + " (" + nc->reason + ") " + nc->message, color);
    if (ns == "False" && !m.condition_false) m.condition_false = now;
  }
  bool ot = old.FindTaint(api::kTaintKey) != nullptr,
       nt = node.FindTaint(api::kTaintKey) != nullptr;
  if (!ot && nt) {
    const k8s::Taint* t = node.FindTaint(api::kTaintKey);
    Print("node " + name,
          "tainted " + t->key + (t->value.empty() ? "" : "=" + t->value) + ":" + t->effect, "31");
    if (!m.tainted) m.tainted = now;
  } else if (ot && !nt) {
    Print("node " + name, "taint removed", "32");
    if (m.tainted) m.recovered = now;
  }
  if (!old.unschedulable && node.unschedulable) {
    Print("node " + name, "cordoned", "31");
    if (!m.cordoned) m.cordoned = now;
  } else if (old.unschedulable && !node.unschedulable) {
    Print("node " + name, "uncordoned", "32");
    if (m.cordoned || m.tainted) m.recovered = now;
  }
}

void Timeline::OnPod(const k8s::Pod& pod, bool deleted) {
  std::string key = pod.meta.Key();
  auto it = pods_.find(key);
  if (deleted) {
    if (it != pods_.end()) pods_.erase(it);
    Print("pod " + key, "deleted" + (pod.node_name.empty() ? "" : " from " + pod.node_name));
    return;
  }
  k8s::Pod old = it == pods_.end() ? k8s::Pod{} : it->second;
  bool first = it == pods_.end();
  pods_[key] = pod;
  if (first && pod.node_name.empty()) {
    Print("pod " + key, "created, pending");
    return;
  }
  if ((first || old.node_name.empty()) && !pod.node_name.empty()) {
    Print("pod " + key, "scheduled on " + pod.node_name, "36");
    return;
  }
  if (!old.meta.deletion_timestamp && pod.meta.deletion_timestamp) {
    Print("pod " + key, "terminating on " + pod.node_name + " (evicted)", "35");
    auto& m = milestones_[pod.node_name];
    if (m.cordoned || m.tainted) {
      ++m.evictions;
      if (!m.first_eviction) m.first_eviction = clock_.Now();
    }
  }
}

void Timeline::OnEvent(const k8s::Event& e) {
  std::string subject = "event " + e.involved_object.name;
  const char* color = e.type == "Warning" ? "33" : nullptr;
  Print(subject,
        e.reason + ": " + e.message + (e.count > 1 ? " (x" + std::to_string(e.count) + ")" : ""),
        color);
}

bool Timeline::AllRecovered() const {
  if (milestones_.empty()) return false;
  bool any_bad = false;
  for (const auto& [n, m] : milestones_) {
    if (!m.tainted && !m.cordoned) continue;
    any_bad = true;
    if (!m.recovered) return false;
  }
  return any_bad;
}

Status Timeline::Run(std::stop_token stop) {
  start_ = clock_.Now();
  std::stop_source inner;
  std::stop_callback forward(stop, [&] { inner.request_stop(); });
  auto guard = [this](auto fn) {
    return [this, fn](std::string_view obj, bool initial, bool deleted) {
      std::scoped_lock lock(mu_);
      fn(obj, initial, deleted);
    };
  };
  std::vector<std::jthread> threads;
  threads.emplace_back([&, st = inner.get_token()] {
    ListWatch(client_, k8s::kGpuNodeHealths, st,
              guard([this](std::string_view obj, bool initial, bool) {
                json o = json::parse(obj, nullptr, false);
                if (!o.is_object() || !o.contains("status")) return;
                std::string name = o["metadata"].value("name", "");
                auto r = api::DecodeGpuNodeHealthStatus(o["status"].dump());
                if (!r.ok()) {
                  if (!initial) Print("report " + name, "invalid: " + r.status().message(), "31");
                  return;
                }
                if (initial)
                  report_summary_[name] = DescribeReport(*r);
                else
                  OnReport(name, *r);
              }));
  });
  threads.emplace_back([&, st = inner.get_token()] {
    ListWatch(client_, k8s::kNodes, st,
              guard([this](std::string_view obj, bool initial, bool deleted) {
                auto n = k8s::ParseObject<k8s::Node>(obj);
                if (!n.ok()) return;
                if (initial)
                  nodes_[n->meta.name] = *n;
                else
                  OnNode(*n, deleted);
              }));
  });
  threads.emplace_back([&, st = inner.get_token()] {
    ListWatch(client_, k8s::kPods, st,
              guard([this](std::string_view obj, bool initial, bool deleted) {
                auto p = k8s::ParseObject<k8s::Pod>(obj);
                if (!p.ok()) return;
                if (initial)
                  pods_[p->meta.Key()] = *p;
                else
                  OnPod(*p, deleted);
              }));
  });
  threads.emplace_back([&, st = inner.get_token()] {
    ListWatch(client_, k8s::kEvents, st,
              guard([this](std::string_view obj, bool initial, bool deleted) {
                if (initial || deleted) return;
                auto e = k8s::ParseObject<k8s::Event>(obj);
                if (e.ok()) OnEvent(*e);
              }));
  });
  auto deadline = clock_.Monotonic() + options_.duration;
  while (!stop.stop_requested() && clock_.Monotonic() < deadline) {
    clock_.SleepFor(std::chrono::milliseconds(200), stop);
    if (options_.until_recovered) {
      std::scoped_lock lock(mu_);
      if (AllRecovered()) break;
    }
  }
  inner.request_stop();
  threads.clear();
  return OkStatus();
}

std::map<std::string, NodeMilestones> Timeline::Milestones() const {
  std::scoped_lock lock(mu_);
  return milestones_;
}

std::string Timeline::Summary() const {
  auto ms = Milestones();
  std::ostringstream out;
  char line[256];
  std::snprintf(line, sizeof(line), "%-10s %-16s %-16s %-16s %-10s %-16s\n", "NODE",
                "FAULT->REPORT", "REPORT->TAINT", "REPORT->CORDON", "EVICTIONS",
                "TAINT->RECOVERED");
  out << line;
  for (const auto& [node, m] : ms) {
    if (!m.fault_observed && !m.tainted && !m.cordoned) continue;
    std::snprintf(line, sizeof(line), "%-10s %-16s %-16s %-16s %-10d %-16s\n", node.c_str(),
                  Ms(m.fault_observed, m.report_seen).c_str(), Ms(m.report_seen, m.tainted).c_str(),
                  Ms(m.report_seen, m.cordoned).c_str(), m.evictions,
                  Ms(m.tainted ? m.tainted : m.cordoned, m.recovered).c_str());
    out << line;
  }
  return out.str();
}

}  // namespace gg::cli
