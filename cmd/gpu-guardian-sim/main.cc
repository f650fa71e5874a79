// gpu-guardian-sim: the in-memory Kubernetes API server as a process. Prints exactly one
// line "gpu-guardian-sim listening on http(s)://HOST:PORT" when ready; exits on SIGTERM.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "common/log.h"
#include "common/signals.h"
#include "sim/pod_init.h"
#include "sim/population.h"
#include "sim/rbac.h"
#include "sim/scenario.h"
#include "sim/server.h"
#include "sim/tls.h"

namespace {

// The command line: server options plus what to populate the cluster with.
struct SimFlags {
  gg::sim::SimOptions opts;
  std::string kubeconfig, scenario_file, token = "admin";
  int nodes = 0, gpus_per_node = 8, pods_per_node = 0;
  bool dra = false, no_kubelet = false, no_scheduler = false, no_controllers = false;
  std::vector<std::string> tokens, apply_paths;
  std::string log_format = "text", log_level = "info";
};

void DefineFlags(CLI::App& app, SimFlags& f) {
  gg::sim::SimOptions& opts = f.opts;
  app.add_option("--listen", opts.listen, "HOST:PORT to serve on (port 0 = any free port)")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            auto colon = v.rfind(':');
            if (colon == std::string::npos || colon == 0) return "must be HOST:PORT, got " + v;
            std::string p = v.substr(colon + 1);
            if (p.empty() || p.size() > 5 ||
                p.find_first_not_of("0123456789") != std::string::npos || std::stoi(p) > 65535)
              return "port must be a number in 0-65535, got " + v;
            return "";
          },
          "HOST:PORT"));
  app.add_flag("--tls", opts.tls, "serve HTTPS with a generated CA (written into the kubeconfig)");
  app.add_option("--write-kubeconfig", f.kubeconfig, "write a kubeconfig for this server to PATH");
  app.add_option("--token", f.token, "bearer token written into the kubeconfig (default admin)");
  app.add_option("--scenario", f.scenario_file, "YAML scenario describing the cluster")
      ->check(CLI::ExistingFile);
  app.add_option("--apply", f.apply_paths,
                 "YAML manifests (files, or directories of *.yaml) created at start, in order")
      ->check(CLI::ExistingPath);
  app.add_option("--nodes", f.nodes, "generate N GPU nodes")->check(CLI::Range(0, 10000000));
  app.add_option("--gpus-per-node", f.gpus_per_node, "GPUs per generated node")
      ->check(CLI::Range(0, 1024));
  app.add_option("--pods-per-node", f.pods_per_node, "workload pods per generated node")
      ->check(CLI::Range(0, 10000));
  app.add_flag("--dra", f.dra, "also generate DRA ResourceSlices");
  app.add_option("--kube-version", opts.kube_version, "Kubernetes release to mimic (1.32-1.36)")
      ->check(CLI::IsMember({"1.32", "1.33", "1.34", "1.35", "1.36"}));
  app.add_option("--authz", opts.authz, "authorization mode: rbac (default: allow all)")
      ->check(CLI::IsMember({"", "rbac"}));
  app.add_option("--rbac", opts.rbac_files, "RBAC manifest files loaded at start")
      ->check(CLI::ExistingFile);
  app.add_option("--user-token", f.tokens,
                 "TOKEN=USER[,node=NODE] bearer token mapping (repeatable; node= makes a token "
                 "bound to a pod on NODE)");
  app.add_option("--watch-history", opts.watch_history,
                 "watch events kept per resource for resumes (410 beyond)")
      ->check(CLI::Range(static_cast<std::size_t>(1), static_cast<std::size_t>(100000000)));
  app.add_option("--time-scale", opts.time_scale, "divide grace periods by this")
      ->check(CLI::PositiveNumber);
  app.add_flag("--no-kubelet", f.no_kubelet, "do not simulate kubelets");
  app.add_flag("--no-scheduler", f.no_scheduler, "do not simulate the scheduler");
  app.add_flag("--no-controllers", f.no_controllers, "no PDB/DaemonSet/ReplicaSet controllers");
  app.add_flag("--log-requests", opts.log_requests, "log every request");
  app.add_option("--log-format", f.log_format, "text|json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  app.add_option("--log-level", f.log_level, "debug|info|warn|error")
      ->check(CLI::IsMember({"debug", "info", "warn", "error"}))
      ->capture_default_str();
  app.add_option("--exec-images", opts.exec_images,
                 "run pods whose image basename is an executable in DIR as real processes "
                 "(needs root, --tls and --node-root)");
  app.add_option("--node-root", opts.node_root,
                 "per-node files of real pods: ROOT/<node>/dev/kmsg, ROOT/<node>/nvml.yaml, logs");
}

// Turns the parsed flags into logging settings and SimOptions; false on a bad --user-token.
bool ApplyFlags(SimFlags& f) {
  gg::sim::SimOptions& opts = f.opts;
  if (gg::LogLevel level; gg::Logger::ParseLevel(f.log_level, &level))
    gg::Logger::SetGlobalLevel(level);
  if (f.log_format == "json") gg::Logger::SetGlobalFormat(gg::LogFormat::kJson);
  opts.kubelet = !f.no_kubelet;
  opts.scheduler = !f.no_scheduler;
  opts.controllers = !f.no_controllers;
  for (const auto& t : f.tokens) {
    auto eq = t.find('=');
    if (eq == std::string::npos) {
      std::cerr << "--user-token must be TOKEN=USER\n";
      return false;
    }
    opts.token_users.emplace_back(t.substr(0, eq), t.substr(eq + 1));
  }
  return true;
}

// --scenario and --nodes: the cluster's objects; false (logged) on failure.
bool Populate(gg::sim::SimServer& server, const SimFlags& f, gg::Logger& log) {
  auto insert = [&](nlohmann::json&& obj) { return server.Insert(obj); };
  if (!f.scenario_file.empty()) {
    auto sc = gg::sim::LoadScenarioFile(f.scenario_file);
    if (!sc.ok()) {
      log.Error("bad scenario", {{"error", sc.status().ToString()}});
      return false;
    }
    if (auto st = gg::sim::EmitScenario(*sc, insert); !st.ok()) {
      log.Error("scenario population failed", {{"error", st.ToString()}});
      return false;
    }
  }
  if (f.nodes > 0) {
    gg::sim::PopulationSpec spec;
    spec.nodes = f.nodes;
    spec.gpus_per_node = f.gpus_per_node;
    spec.pods_per_node = f.pods_per_node;
    spec.dra = f.dra;
    spec.kube_version = f.opts.kube_version;
    if (auto st = gg::sim::GeneratePopulation(spec, insert); !st.ok()) {
      log.Error("population failed", {{"error", st.ToString()}});
      return false;
    }
  }
  return true;
}

// --apply: like `kubectl apply -f` at start-up (CRDs before their objects: keep the order).
bool ApplyManifests(gg::sim::SimServer& server, const std::vector<std::string>& apply_paths,
                    gg::Logger& log) {
  for (const auto& path : apply_paths) {
    std::vector<std::filesystem::path> files;
    if (std::filesystem::is_directory(path)) {
      for (const auto& e : std::filesystem::directory_iterator(path))
        if (e.path().extension() == ".yaml" || e.path().extension() == ".yml")
          files.push_back(e.path());
      std::sort(files.begin(), files.end());
    } else {
      files.emplace_back(path);
    }
    for (const auto& f : files) {
      std::ifstream in(f);
      std::stringstream text;
      text << in.rdbuf();
      auto docs = gg::sim::ParseYamlDocuments(text.str());
      if (!docs.ok()) {
        log.Error("bad manifest", {{"file", f.string()}, {"error", docs.status().ToString()}});
        return false;
      }
      for (const auto& doc : *docs) {
        if (!doc.is_object()) continue;
        if (auto st = server.Insert(doc); !st.ok()) {
          log.Error("cannot apply manifest", {{"file", f.string()}, {"error", st.ToString()}});
          return false;
        }
      }
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  // The init process of a pod run by --exec-images (sim/pod_init.h), not a user command.
  if (argc == 3 && std::string_view(argv[1]) == gg::sim::kPodInitArg)
    return gg::sim::PodInitMain(std::atoi(argv[2]));
  std::stop_token stop = gg::InstallShutdownSignals();
  CLI::App app{"gpu-guardian-sim: an in-memory Kubernetes API server for tests and demos"};
  SimFlags flags;
  DefineFlags(app, flags);
  CLI11_PARSE(app, argc, argv);
  if (!ApplyFlags(flags)) return 2;
  gg::sim::SimOptions& opts = flags.opts;
  gg::Logger log = gg::Logger().WithName("gpu-guardian-sim");
  if (opts.authz == "rbac" && !opts.tls)
    log.Warn(
        "--authz rbac over plain http: kubectl and other client-go programs send the "
        "kubeconfig's token only to https servers and act as system:anonymous here; "
        "add --tls for them (gpu-guardian's own clients send it either way)");
  // The population goes in before the cluster's loops start, as a restarted control plane
  // finds its cluster in etcd: their first list then sees every object.
  opts.defer_controllers = true;
  auto sim = gg::sim::SimServer::Start(opts);
  if (!sim.ok()) {
    log.Error("cannot start", {{"error", sim.status().ToString()}});
    return 1;
  }
  auto& server = **sim;
  if (!Populate(server, flags, log)) return 1;
  if (!ApplyManifests(server, flags.apply_paths, log)) return 1;
  server.StartControllers();
  if (!flags.kubeconfig.empty()) {
    if (auto st = gg::sim::WriteKubeconfig(flags.kubeconfig, server.Url(), server.CaCertPem(),
                                           flags.token);
        !st.ok()) {
      log.Error("cannot write kubeconfig", {{"error", st.ToString()}});
      return 1;
    }
  }
  std::printf("gpu-guardian-sim listening on %s\n", server.Url().c_str());
  std::fflush(stdout);
  while (!stop.stop_requested()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  log.Info("shutting down");
  server.Stop();
  return 0;
}
