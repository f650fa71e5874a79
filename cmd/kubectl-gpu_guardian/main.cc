// kubectl gpu-guardian: status | explain NODE | timeline. Flags → client → subcommand.
#include <unistd.h>

#include <iostream>

#include <CLI/CLI.hpp>

#include "cli/status.h"
#include "cli/timeline.h"
#include "common/log.h"
#include "common/signals.h"
#include "common/time_util.h"
#include "k8s/config.h"
#include "k8s/rest_client.h"

int main(int argc, char** argv) {
  auto stop = gg::InstallShutdownSignals();
  CLI::App app{"kubectl gpu-guardian: GPU node health as gpu-guardian sees it"};
  app.require_subcommand(1);
  std::string kubeconfig, server, output = "table", duration = "60s";
  bool no_color = false, until_recovered = false;
  app.add_option("--kubeconfig", kubeconfig, "Path to a kubeconfig (default $KUBECONFIG, ~/.kube/config)");
  app.add_option("--server,-s", server, "API server URL (plain HTTP, e.g. kubectl proxy)");
  auto* status = app.add_subcommand("status", "Table of GPU nodes: state, failing GPUs, action, since, policy");
  status->add_option("-o,--output", output, "table | json")->check(CLI::IsMember({"table", "json"}));
  status->add_flag("--no-color", no_color, "Never color the output");
  std::string node;
  auto* explain = app.add_subcommand("explain", "The evidence, the deciding rule and the record for one node");
  explain->add_option("node", node, "Node name")->required();
  auto* timeline = app.add_subcommand("timeline", "Live story of faults, verdicts, remediation and recovery");
  timeline->add_option("--duration", duration, "Stop after this long (e.g. 90s, 5m)");
  timeline->add_flag("--until-recovered", until_recovered,
                     "Stop once every fenced node has recovered");
  timeline->add_flag("--no-color", no_color, "Never color the output");
  CLI11_PARSE(app, argc, argv);

  auto cfg = gg::k8s::ResolveConfig(kubeconfig, server);
  if (!cfg.ok()) {
    std::cerr << "error: " << cfg.status().message() << "\n";
    return 1;
  }
  gg::Clock& clock = gg::RealClock::Default();
  auto client = gg::k8s::RestClient::Create(*cfg, clock);
  if (!client.ok()) {
    std::cerr << "error: " << client.status().message() << "\n";
    return 1;
  }
  bool tty = isatty(STDOUT_FILENO) && !no_color;

  if (*status) {
    auto rows = gg::cli::CollectRows(**client);
    if (!rows.ok()) {
      std::cerr << "error: " << rows.status().message() << "\n";
      return 1;
    }
    if (output == "json") std::cout << gg::cli::RowsToJson(*rows).dump(2) << "\n";
    else std::cout << gg::cli::RenderTable(*rows, clock.Now(), tty);
    return 0;
  }
  if (*explain) {
    auto text = gg::cli::Explain(**client, node, clock.Now());
    if (!text.ok()) {
      std::cerr << "error: " << text.status().message() << "\n";
      return 1;
    }
    std::cout << *text;
    return 0;
  }
  auto d = gg::ParseDuration(duration);
  if (!d.ok()) {
    std::cerr << "error: --duration: " << d.status().message() << "\n";
    return 1;
  }
  gg::cli::TimelineOptions opts;
  opts.duration = *d;
  opts.until_recovered = until_recovered;
  opts.color = tty;
  gg::cli::Timeline tl(**client, clock, std::cout, opts);
  gg::Status st = tl.Run(stop);
  std::cout << "\nMeasured per node (watch delivery times):\n" << tl.Summary();
  return st.ok() ? 0 : 1;
}
