// AgentApp wiring (see app.h).
#include "agent/app.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>

#include "agent/file_source.h"
#include "agent/k8s_writers.h"
#include "agent/kmsg_source.h"
#include "agent/nvml_source.h"
#include "gpu/nvml_loader.h"
#include "k8s/config.h"

#ifndef GG_AGENT_VERSION
#define GG_AGENT_VERSION "0.0.0-dev"
#endif

namespace gg::agent {

std::string_view AgentVersion() { return GG_AGENT_VERSION; }

std::vector<std::string> SplitList(std::string_view list) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= list.size()) {
    std::size_t end = list.find(',', start);
    if (end == std::string_view::npos) end = list.size();
    std::string_view item = list.substr(start, end - start);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (!item.empty()) out.emplace_back(item);
    start = end + 1;
  }
  return out;
}

std::string DefaultLeaseNamespace(const k8s::ConfigEnv& env, const std::string& sa_dir) {
  auto trim = [](std::string v) {
    const char* ws = " \t\r\n";
    v.erase(0, v.find_first_not_of(ws));
    v.erase(v.find_last_not_of(ws) + 1);
    return v;
  };
  if (auto ns = env.read_file(sa_dir + "/namespace"); ns.ok() && !trim(*ns).empty())
    return trim(*ns);
  if (auto ns = env.getenv("POD_NAMESPACE"); ns && !trim(*ns).empty()) return trim(*ns);
  return api::kDefaultNamespace;
}

Status ValidateConfig(const AgentConfig& c) {
  if (c.sources.empty()) return InvalidArgumentError("--source: at least one source is needed");
  std::map<std::string, int> seen;
  for (const auto& s : c.sources) {
    if (s != "nvml" && s != "kmsg" && s != "file" && s != "script")
      return InvalidArgumentError("--source: unknown source \"" + s +
                                  "\" (want nvml, kmsg, file, script)");
    if (seen[s]++) return InvalidArgumentError("--source: \"" + s + "\" given twice");
  }
  if (seen.count("nvml") && seen.count("script"))
    return InvalidArgumentError("--source: nvml and script both report GPUs; pick one");
  if (seen.count("file") && c.file_path.empty())
    return InvalidArgumentError("--file: required with --source file");
  if (seen.count("script") && c.script_path.empty())
    return InvalidArgumentError("--script: required with --source script");
  for (const auto& p : c.publish)
    if (p != "resource" && p != "annotation")
      return InvalidArgumentError("--publish: unknown mode \"" + p +
                                  "\" (want resource, annotation)");
  if (!(c.print && c.once) && c.node_name.empty())
    return InvalidArgumentError("--node-name: required (or set $NODE_NAME)");
  if (c.time_scale <= 0) return InvalidArgumentError("--time-scale: must be > 0");
  if (c.heartbeat <= Duration::zero()) return InvalidArgumentError("--heartbeat: must be > 0");
  if (c.sweep_interval <= Duration::zero())
    return InvalidArgumentError("--sweep-interval: must be > 0");
  if (c.xid_ring_size == 0 || c.xid_ring_size > 1024)
    return InvalidArgumentError("--xid-ring-size: must be 1..1024");
  return OkStatus();
}

AgentApp::AgentApp(AgentConfig config, Clock& clock, metrics::Registry& registry, Logger log)
    : config_(std::move(config)), clock_(clock), registry_(registry), log_(std::move(log)) {}

AgentApp::~AgentApp() { Stop(); }

StatusOr<std::unique_ptr<AgentApp>> AgentApp::Create(AgentConfig config, Clock& clock,
                                                     metrics::Registry& registry, Logger log,
                                                     gpu::NvmlApi* nvml_override,
                                                     k8s::RestClient* client_override) {
  GG_RETURN_IF_ERROR(ValidateConfig(config));
  std::unique_ptr<AgentApp> app(new AgentApp(std::move(config), clock, registry, std::move(log)));
  GG_RETURN_IF_ERROR(app->Wire(nvml_override, client_override));
  return app;
}

Status AgentApp::Wire(gpu::NvmlApi* nvml_override, k8s::RestClient* client_override) {
  GG_RETURN_IF_ERROR(MakeClassifier());
  // API client: not needed for --once --print.
  const bool publishing = !(config_.once && config_.print) && !config_.publish.empty();
  if (publishing) GG_RETURN_IF_ERROR(MakeClient(client_override));
  const int expected = ReadExpectedGpus();
  metrics_ = std::make_unique<AgentMetrics>(registry_, config_.node_name);
  AgentOptions ao;
  ao.node_name = config_.node_name;
  ao.agent_version = std::string(AgentVersion());
  ao.expected_gpus = expected;
  ao.xid_ring_size = config_.xid_ring_size;
  ao.rebuild_interval = config_.sweep_interval;
  agent_ = std::make_unique<Agent>(ao, clock_, metrics_.get(), log_);
  GG_RETURN_IF_ERROR(MakeSources(nvml_override, expected));
  if (publishing && !config_.once) MakePublishers();
  return OkStatus();
}

// Classification overrides: flags, then the device plugin's environment variables.
Status AgentApp::MakeClassifier() {
  gpu::XidOverrides overrides;
  GG_RETURN_IF_ERROR(overrides.AddIgnoreList(config_.xid_ignore).WithContext("--xid-ignore"));
  GG_RETURN_IF_ERROR(overrides.AddCriticalList(config_.xid_critical).WithContext("--xid-critical"));
  overrides.device_plugin_defaults = config_.xid_ignore_dp_defaults;
  if (config_.honor_device_plugin_env) {
    std::vector<std::string> skipped;
    if (const char* v = std::getenv("DP_DISABLE_HEALTHCHECKS"))
      overrides.ApplyDpDisableHealthchecks(v, &skipped);
    if (const char* v = std::getenv("DP_ENABLE_HEALTHCHECKS"))
      overrides.ApplyDpEnableHealthchecks(v, &skipped);
    for (const auto& s : skipped) log_.Warn("ignoring malformed Xid in DP_* env", {{"token", s}});
  }
  classifier_ = std::make_unique<gpu::XidClassifier>(overrides);
  return OkStatus();
}

Status AgentApp::MakeClient(k8s::RestClient* client_override) {
  if (client_override != nullptr) {
    client_ = client_override;
    return OkStatus();
  }
  auto cfg = k8s::ResolveConfig(config_.kubeconfig, config_.server);
  if (!cfg.ok()) return cfg.status().WithContext("API server configuration");
  // The publisher owns retries (jittered backoff, newest report); one attempt per write
  // and a bounded request time keep SIGTERM prompt when the API server is unreachable.
  cfg->timeout = std::min(cfg->timeout, std::chrono::milliseconds(10000));
  k8s::RestClientOptions ro;
  ro.max_attempts = 1;
  auto client = k8s::RestClient::Create(*cfg, clock_, ro);
  if (!client.ok()) return client.status().WithContext("API client");
  owned_client_ = std::move(client).value();
  client_ = owned_client_.get();
  return OkStatus();
}

// The Node's nvidia.com/gpu capacity; 0 without a client or when the API is down at boot
// (not fatal: the report then says expectedGPUs 0 until the writer learns it).
int AgentApp::ReadExpectedGpus() {
  if (client_ == nullptr) return 0;
  auto cap = ReadNodeGpuCapacity(*client_, config_.node_name);
  if (cap.ok()) return *cap;
  log_.Warn("cannot read the Node's nvidia.com/gpu capacity", {{"error", cap.status().ToString()}});
  return 0;
}

Status AgentApp::MakeSources(gpu::NvmlApi* nvml_override, int expected) {
  NvmlSourceOptions no;
  no.sweep_interval = config_.sweep_interval;
  no.collector.expected_gpus = expected;
  no.collector.call_deadline = config_.nvml_deadline;
  std::map<std::string, std::unique_ptr<Source>> made;
  NvmlSource* gpu_source = nullptr;  // PCI -> UUID for kmsg
  for (const auto& name : config_.sources) {
    if (name == "nvml") {
      gpu::NvmlApi* api = nvml_override;
      if (api == nullptr) {
        nvml_ = std::make_unique<gpu::NvmlLoader>(config_.nvml_library);
        api = nvml_.get();
      }
      no.name = "nvml";
      auto s = std::make_unique<NvmlSource>(*api, clock_, *classifier_, no);
      gpu_source = s.get();
      made[name] = std::move(s);
    } else if (name == "script") {
      no.name = "script";
      auto s = ScriptSource::Create(config_.script_path, config_.node_name, clock_, *classifier_,
                                    config_.time_scale, no);
      if (!s.ok()) return s.status();
      gpu_source = &(*s)->inner();
      made[name] = std::move(s).value();
    } else if (name == "file") {
      FileSourceOptions fo;
      fo.path = config_.file_path;
      made[name] = std::make_unique<FileSource>(clock_, fo);
    }
  }
  if (std::find(config_.sources.begin(), config_.sources.end(), "kmsg") != config_.sources.end())
    made["kmsg"] = MakeKmsgSource(gpu_source);
  for (const auto& name : config_.sources) agent_->AddSource(std::move(made[name]));
  return OkStatus();
}

std::unique_ptr<Source> AgentApp::MakeKmsgSource(NvmlSource* gpu_source) {
  KmsgSourceOptions ko;
  ko.path = config_.kmsg_path;
  ko.from_boot = config_.kmsg_from_boot;
  PciResolver resolver;
  if (gpu_source != nullptr) {
    resolver = [gpu_source](uint32_t d, uint32_t b, uint32_t dev) {
      return gpu_source->UuidForPci(d, b, dev);
    };
  }
  return std::make_unique<KmsgSource>(clock_, *classifier_, ko, std::move(resolver));
}

void AgentApp::MakePublishers() {
  PublisherOptions po;
  po.debounce = config_.debounce;
  po.heartbeat = config_.heartbeat;
  for (const auto& mode : config_.publish) {
    std::unique_ptr<ReportWriter> w;
    if (mode == "resource") {
      auto rw = std::make_unique<ResourceWriter>(*client_, config_.node_name, log_);
      const std::string ns =
          config_.lease_namespace.empty() ? DefaultLeaseNamespace() : config_.lease_namespace;
      // Valid for three heartbeats, as the kubelet's node Lease covers several renewals.
      const auto hb_s = std::chrono::ceil<std::chrono::seconds>(config_.heartbeat).count();
      rw->UseLease(std::make_unique<NodeLease>(
          *client_, config_.node_name, ns,
          static_cast<std::int32_t>(std::min<long long>(3 * hb_s, 3600 * 24))));
      Agent* agent = agent_.get();
      rw->OnNodeCapacity([agent](int n) { agent->SetExpectedGpus(n); });
      w = std::move(rw);
    } else {
      w = std::make_unique<AnnotationWriter>(*client_, config_.node_name);
    }
    agent_->AddPublisher(
        std::make_unique<Publisher>(std::move(w), clock_, po, metrics_.get(), log_));
  }
}

int AgentApp::RunOnce(std::ostream& out) {
  auto report = agent_->CollectOnce();
  // The agent logged each source's state with its error while building the report; the
  // exit status says whether any source failed (Unavailable or Degraded).
  std::string failed;
  for (const auto& s : report.sources)
    if (s.state != api::SourceState::kOk) failed += (failed.empty() ? "" : ",") + s.name;
  if (!failed.empty()) log_.Error("one-shot collection incomplete", {{"failed_sources", failed}});
  if (config_.print) {
    auto j = nlohmann::ordered_json::parse(api::EncodeGpuNodeHealthStatus(report), nullptr, false);
    out << j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
    out.flush();
  } else if (client_ != nullptr) {
    report.heartbeat_time = clock_.Now();
    for (const auto& mode : config_.publish) {
      Status st;
      if (mode == "resource") {
        ResourceWriter w(*client_, config_.node_name, log_);
        st = w.Write(report);
      } else {
        AnnotationWriter w(*client_, config_.node_name);
        st = w.Write(report);
      }
      if (!st.ok()) {
        log_.Error("publishing the report failed", {{"mode", mode}, {"error", st.ToString()}});
        return 2;
      }
    }
  }
  return failed.empty() ? 0 : 1;
}

Status AgentApp::Start(std::stop_token stop) {
  if (!config_.metrics_addr.empty() && config_.metrics_addr != "0") {
    server_ = std::make_unique<metrics::HealthServer>(registry_, log_);
    const double budget = 3 * std::chrono::duration<double>(config_.sweep_interval).count() + 60.0;
    Agent* agent = agent_.get();
    server_->AddHealthCheck("report-builder", [agent, budget]() -> Status {
      if (agent->SecondsSinceLastBuild() > budget)
        return UnavailableError("report builder stalled");
      return OkStatus();
    });
    server_->AddReadyCheck("first-report", [agent]() -> Status {
      return agent->builds() > 0 ? OkStatus() : UnavailableError("no report built yet");
    });
    auto port = server_->Start(config_.metrics_addr);
    if (!port.ok()) return port.status().WithContext("--metrics-addr " + config_.metrics_addr);
    metrics_port_ = *port;
  }
  agent_->Start(stop);
  log_.Info("agent started", {{"node", config_.node_name},
                              {"version", std::string(AgentVersion())},
                              {"metrics_port", metrics_port_}});
  return OkStatus();
}

void AgentApp::Stop() {
  if (agent_) agent_->Stop();
  if (server_) server_->Stop();
}

}  // namespace gg::agent
