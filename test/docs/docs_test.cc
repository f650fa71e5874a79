// The docs are true to the binaries: the metric names README.md, docs/operator.md
// and docs/agent.md list are the ones the running operator and agent serve on /metrics (and
// every gpu_guardian_* series served is documented); every flag in the docs' flag tables is in
// the binary's --help and every --help flag is documented; every binary takes --log-format and
// --log-level; a metrics port in use is refused with the port named.
#include <gtest/gtest.h>
#include <httplib.h>

#include <regex>
#include <set>

#include "docs/harness.h"

namespace gg::docs_test {
namespace {

using namespace std::chrono_literals;

// The text of `file` from the line starting with `start` up to the next line starting with
// `end_prefix` (exclusive).
std::string Section(const std::string& file, const std::string& start,
                    const std::string& end_prefix) {
  std::istringstream in(ReadAll(kSrc + "/" + file));
  std::string out;
  bool on = false;
  for (std::string line; std::getline(in, line);) {
    if (!on) {
      on = line.rfind(start, 0) == 0;
      if (!on) continue;
      out += line + "\n";
      continue;
    }
    if (line.rfind(end_prefix, 0) == 0) break;
    out += line + "\n";
  }
  return out;
}

bool IsMetricPrefix(const std::string& s) {
  for (const char* p : {"gpu_guardian_", "DCGM_", "rest_client_", "workqueue_",
                        "controller_runtime_", "process_", "leader_election_"})
    if (s.rfind(p, 0) == 0) return true;
  return false;
}

// `DCGM_FI_DEV_ECC_{SBE,DBE}_{VOL,AGG}_TOTAL` → four names; `name{label,...}` → name.
std::vector<std::string> Expand(const std::string& token) {
  auto open = token.find('{');
  if (open == std::string::npos) return {token};
  auto close = token.find('}', open);
  if (close == std::string::npos) return {token.substr(0, open)};
  const std::string inner = token.substr(open + 1, close - open - 1);
  const bool alternatives = std::all_of(inner.begin(), inner.end(), [](char c) {
    return std::isupper(static_cast<unsigned char>(c)) ||
           std::isdigit(static_cast<unsigned char>(c)) || c == ',' || c == '_';
  });
  if (!alternatives) return {token.substr(0, open)};  // a label list
  std::vector<std::string> out;
  std::stringstream parts(inner);
  for (std::string alt; std::getline(parts, alt, ',');)
    for (const auto& rest : Expand(token.substr(close + 1)))
      out.push_back(token.substr(0, open) + alt + rest);
  return out;
}

// Metric names (and `prefix_*` wildcards) named in backticks in `text`.
std::set<std::string> DocumentedMetrics(const std::string& text) {
  std::set<std::string> out;
  static const std::regex kTick("`([^`]+)`");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kTick);
       it != std::sregex_iterator(); ++it) {
    std::string token = (*it)[1];
    if (auto sp = token.find(' '); sp != std::string::npos) token = token.substr(0, sp);
    if (!IsMetricPrefix(token)) continue;
    for (const auto& name : Expand(token)) out.insert(name);
  }
  return out;
}

std::set<std::string> Exported(const std::string& exposition) {
  std::set<std::string> out;
  std::istringstream in(exposition);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# TYPE ", 0) != 0) continue;
    std::string rest = line.substr(7);
    out.insert(rest.substr(0, rest.find(' ')));
  }
  return out;
}

bool Covered(const std::string& name, const std::set<std::string>& documented) {
  if (documented.count(name)) return true;
  for (const auto& d : documented)
    if (!d.empty() && d.back() == '*' && name.rfind(d.substr(0, d.size() - 1), 0) == 0) return true;
  return false;
}

// Every documented name is served (a wildcard by at least one series); every served
// gpu_guardian_* name is documented.
void CompareMetrics(const std::string& who, const std::set<std::string>& documented,
                    const std::set<std::string>& exported) {
  ASSERT_FALSE(documented.empty()) << who;
  for (const auto& d : documented) {
    if (d.back() == '*') {
      const std::string prefix = d.substr(0, d.size() - 1);
      bool any = std::any_of(exported.begin(), exported.end(),
                             [&](const std::string& e) { return e.rfind(prefix, 0) == 0; });
      EXPECT_TRUE(any) << who << ": docs promise " << d << " but no such series is served";
    } else {
      EXPECT_TRUE(exported.count(d)) << who << ": docs list " << d << ", /metrics does not have it";
    }
  }
  for (const auto& e : exported) {
    if (e.rfind("gpu_guardian_", 0) != 0) continue;
    EXPECT_TRUE(Covered(e, documented))
        << who << ": /metrics serves " << e << ", the docs do not list it";
  }
}

std::string Scrape(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(10s);
  auto res = c.Get("/metrics");
  return res && res->status == 200 ? res->body : "";
}

int PortFromLog(const e2e::Process& p) {
  std::string line = p.WaitForLog("serving metrics and health", 30s);
  auto at = line.find("port=");
  return at == std::string::npos ? 0 : std::atoi(line.c_str() + at + 5);
}

constexpr char kPolicy[] = R"(apiVersion: gpuguardian.io/v1alpha1
kind: GPUHealthPolicy
metadata: {name: default}
spec:
  rules:
  - {name: gpu-lost, gpuLost: true, action: Drain}
)";

constexpr char kScript[] = R"(gpus: 2
product: NVIDIA H100 80GB HBM3
timeline:
  - {at: 0s, gpu: 1, xid: 13}
)";

class Binaries : public ::testing::Test {
 protected:
  std::string Path(const std::string& n) const { return dir_.path() + "/" + n; }
  void Write(const std::string& n, const std::string& text) { std::ofstream(Path(n)) << text; }
  e2e::TempDir dir_;
};

TEST_F(Binaries, MetricNamesInTheDocsAreTheOnesServed) {
  Write("policy.yaml", kPolicy);
  Write("script.yaml", kScript);
  Sim sim(dir_.path(),
          {"--nodes", "1", "--apply", kSrc + "/deploy/crds", "--apply", Path("policy.yaml")});
  ASSERT_TRUE(sim.ready()) << sim.Log();
  e2e::Process op(
      {kBin + "/gpu-guardian-operator", "--kubeconfig", sim.kubeconfig(), "--metrics-addr",
       "127.0.0.1:0", "--leader-elect=true", "--leader-election-namespace", "default"},
      Path("operator.log"));
  e2e::Process agent({kBin + "/gpu-guardian-agent", "--kubeconfig", sim.kubeconfig(), "--node-name",
                      "gpu-node-00000", "--source", "script", "--script", Path("script.yaml"),
                      "--metrics-addr", "127.0.0.1:0"},
                     Path("agent.log"));
  const int op_port = PortFromLog(op), agent_port = PortFromLog(agent);
  ASSERT_GT(op_port, 0) << op.Log();
  ASSERT_GT(agent_port, 0) << agent.Log();
  ASSERT_NE(op.WaitForLog("became leader", 30s), "") << op.Log();
  ASSERT_NE(agent.WaitForLog("first report written", 30s), "") << agent.Log();

  const std::string readme_metrics =
      Section("README.md", "## Metrics, Events and alerts", "Events (on the Node");
  const auto agent_at = readme_metrics.find("Agent (`:9402`)");
  ASSERT_NE(agent_at, std::string::npos) << readme_metrics;
  std::set<std::string> op_docs = DocumentedMetrics(readme_metrics.substr(0, agent_at));
  for (const auto& n : DocumentedMetrics(Section("docs/operator.md", "## Metrics", "## ")))
    op_docs.insert(n);
  std::set<std::string> agent_docs = DocumentedMetrics(readme_metrics.substr(agent_at));
  for (const auto& n : DocumentedMetrics(Section("docs/agent.md", "## Metrics", "## ")))
    agent_docs.insert(n);

  CompareMetrics("operator", op_docs, Exported(Scrape(op_port)));
  CompareMetrics("agent", agent_docs, Exported(Scrape(agent_port)));
}

// Flags named in the first column of a docs flag table ("| `--flag` |", "| `--a` / `--b` |").
std::set<std::string> DocumentedFlags(const std::string& file) {
  std::set<std::string> out;
  std::istringstream in(ReadAll(kSrc + "/" + file));
  static const std::regex kFlag("`(--[a-z0-9-]+)");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("| `--", 0) != 0) continue;
    std::string first = line.substr(0, line.find('|', 1));
    for (auto it = std::sregex_iterator(first.begin(), first.end(), kFlag);
         it != std::sregex_iterator(); ++it)
      out.insert((*it)[1]);
  }
  return out;
}

std::set<std::string> HelpFlags(const std::string& help) {
  std::set<std::string> out;
  std::istringstream in(help);
  static const std::regex kFlag("(^|[ ,])(--[a-z0-9-]+)");
  for (std::string line; std::getline(in, line);) {
    auto first = line.find_first_not_of(' ');
    if (first == std::string::npos || line[first] != '-') continue;  // option lines only
    std::string head = line.substr(0, line.find("  ", first));
    for (auto it = std::sregex_iterator(head.begin(), head.end(), kFlag);
         it != std::sregex_iterator(); ++it)
      out.insert((*it)[2]);
  }
  out.erase("--help");
  return out;
}

TEST_F(Binaries, FlagTablesMatchHelp) {
  for (const auto& [binary, doc] :
       {std::pair<std::string, std::string>{"gpu-guardian-operator", "docs/operator.md"},
        {"gpu-guardian-agent", "docs/agent.md"}}) {
    auto help = Sh(kBin + "/" + binary + " --help", dir_.path());
    ASSERT_EQ(help.rc, 0) << binary << help.err;
    const auto documented = DocumentedFlags(doc), offered = HelpFlags(help.out);
    ASSERT_FALSE(documented.empty()) << doc;
    for (const auto& f : documented)
      EXPECT_TRUE(offered.count(f))
          << doc << " documents " << f << ", " << binary << " --help has no such flag";
    for (const auto& f : offered)
      EXPECT_TRUE(documented.count(f))
          << binary << " takes " << f << ", " << doc << " does not document it";
  }
}

// README: "--log-format text|json and --log-level debug|info|warn|error are common to all".
TEST_F(Binaries, EveryBinaryTakesTheLogFlags) {
  for (const std::string binary : {"gpu-guardian-operator", "gpu-guardian-agent",
                                   "gpu-guardian-sim", "kubectl-gpu_guardian"}) {
    auto help = Sh(kBin + "/" + binary + " --help", dir_.path());
    EXPECT_EQ(help.rc, 0) << binary;
    const auto flags = HelpFlags(help.out);
    EXPECT_TRUE(flags.count("--log-format")) << binary << ":\n" << help.out;
    EXPECT_TRUE(flags.count("--log-level")) << binary << ":\n" << help.out;
  }
  // And they work: JSON lines from the agent, an invalid level refused.
  Write("kmsg",
        "4,1,1,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.\n");
  auto json = Sh(kBin + "/gpu-guardian-agent --source kmsg --kmsg-path " + Path("kmsg") +
                     " --kmsg-from-boot --once --print --log-format json --log-level info",
                 dir_.path());
  EXPECT_EQ(json.rc, 0) << json.err;
  EXPECT_NE(json.err.find(R"("msg":"Xid seen")"), std::string::npos) << json.err;
  auto bad = Sh(kBin + "/gpu-guardian-sim --log-level loud --listen 127.0.0.1:0", dir_.path());
  EXPECT_NE(bad.rc, 0);
}

// A second process on a metrics port in use exits non-zero naming the port — it must not
// share the port (SO_REUSEPORT) and split the scrapes.
TEST_F(Binaries, MetricsPortInUseIsRefused) {
  Write("policy.yaml", kPolicy);
  Write("gpus.json", R"({"gpus": [{"index": 0, "uuid": "GPU-a"}]})");
  Sim sim(dir_.path(), {"--nodes", "1", "--apply", kSrc + "/deploy/crds"});
  ASSERT_TRUE(sim.ready()) << sim.Log();
  e2e::Process first({kBin + "/gpu-guardian-agent", "--kubeconfig", sim.kubeconfig(), "--node-name",
                      "gpu-node-00000", "--source", "file", "--file", Path("gpus.json"),
                      "--metrics-addr", "127.0.0.1:0"},
                     Path("agent1.log"));
  const int port = PortFromLog(first);
  ASSERT_GT(port, 0) << first.Log();
  const std::string addr = "127.0.0.1:" + std::to_string(port);

  auto agent = Sh(kBin + "/gpu-guardian-agent --kubeconfig " + sim.kubeconfig() +
                      " --node-name gpu-node-00000 --source file --file " + Path("gpus.json") +
                      " --metrics-addr " + addr,
                  dir_.path());
  EXPECT_NE(agent.rc, 0) << agent.err;
  EXPECT_NE(agent.err.find("address already in use"), std::string::npos) << agent.err;
  EXPECT_NE(agent.err.find("port " + std::to_string(port)), std::string::npos) << agent.err;

  auto op = Sh("timeout 30 " + kBin + "/gpu-guardian-operator --kubeconfig " + sim.kubeconfig() +
                   " --leader-election-namespace default --metrics-addr " + addr,
               dir_.path());
  EXPECT_NE(op.rc, 0) << op.err;
  EXPECT_NE(op.rc, 124) << "the operator kept running on a port it does not own";
  EXPECT_NE(op.err.find("address already in use"), std::string::npos) << op.err;
  EXPECT_NE(op.err.find("port " + std::to_string(port)), std::string::npos) << op.err;
  EXPECT_TRUE(first.Running());
}

}  // namespace
}  // namespace gg::docs_test
