// PodRunner: real processes for pods whose image is an executable in --exec-images.
// Threads: the runner loop (clones pod inits — PR_SET_PDEATHSIG is tied to this thread, so
// it lives as long as the runner — reads their events, runs timers, writes pod status), the
// prober (httpGet/tcpSocket/exec probes) and the API relay (10.96.0.1:443 -> listener).
#include "sim/pod_runner.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "common/log.h"
#include "sim/api.h"
#include "sim/pod_init.h"
#include "sim/population.h"

extern char** environ;

namespace gg::sim {

namespace fs = std::filesystem;
using nlohmann::json;
using Steady = std::chrono::steady_clock;

std::string ImageBaseName(const std::string& image) {
  std::string s = image;
  if (auto at = s.find('@'); at != std::string::npos) s = s.substr(0, at);
  auto slash = s.rfind('/');
  std::string last = slash == std::string::npos ? s : s.substr(slash + 1);
  if (auto colon = last.find(':'); colon != std::string::npos) last = last.substr(0, colon);
  return last;
}

std::string ExpandVars(const std::string& s, const std::map<std::string, std::string>& vars) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '$' || i + 1 >= s.size()) {
      out += s[i];
      continue;
    }
    if (s[i + 1] == '$') {  // "$$" -> "$"
      out += '$';
      ++i;
      continue;
    }
    if (s[i + 1] == '(') {
      auto close = s.find(')', i + 2);
      if (close != std::string::npos) {
        std::string name = s.substr(i + 2, close - i - 2);
        if (auto it = vars.find(name); it != vars.end()) {
          out += it->second;
          i = close;
          continue;
        }
      }
    }
    out += s[i];
  }
  return out;
}

namespace {

constexpr char kLinkPrefix[] = "ggp-";
constexpr char kLockPath[] = "/run/gpu-guardian-sim/pods.lock";
constexpr char kSaMount[] = "/var/run/secrets/kubernetes.io/serviceaccount";
constexpr char kNvidiaLibMount[] = "/run/nvidia/lib";

uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}

std::string Rfc3339Now() {
  auto t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  tm u{};
  gmtime_r(&t, &u);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &u);
  return buf;
}

std::string RandomToken() {
  std::random_device rd;
  std::string t;
  static const char* hex = "0123456789abcdef";
  for (int i = 0; i < 48; ++i) t += hex[rd() & 15];
  return t;
}

// Runs argv (no shell), returns the exit code; output into *out.
int RunCmd(const std::vector<std::string>& argv, std::string* out = nullptr,
           const std::string& input = "") {
  int pout[2], pin[2];
  if (::pipe2(pout, O_CLOEXEC) != 0) return -1;
  if (::pipe2(pin, O_CLOEXEC) != 0) {
    ::close(pout[0]);
    ::close(pout[1]);
    return -1;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, pin[0], 0);
  posix_spawn_file_actions_adddup2(&fa, pout[1], 1);
  posix_spawn_file_actions_adddup2(&fa, pout[1], 2);
  std::vector<std::string> copy = argv;
  std::vector<char*> a;
  for (auto& s : copy) a.push_back(s.data());
  a.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, a[0], &fa, nullptr, a.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(pout[1]);
  ::close(pin[0]);
  if (rc != 0) {
    ::close(pout[0]);
    ::close(pin[1]);
    if (out) *out = std::string("cannot run ") + argv[0] + ": " + std::strerror(rc);
    return -1;
  }
  if (!input.empty()) (void)!::write(pin[1], input.data(), input.size());
  ::close(pin[1]);
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(pout[0], buf, sizeof(buf))) > 0) text.append(buf, static_cast<size_t>(n));
  ::close(pout[0]);
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (out) *out = text;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

Status WriteFile(const fs::path& p, const std::string& content, mode_t mode) {
  std::error_code ec;
  fs::create_directories(p.parent_path(), ec);
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  if (!f) return InternalError("cannot write " + p.string());
  f << content;
  f.close();
  ::chmod(p.c_str(), mode);
  return OkStatus();
}

std::string Base64Decode(const std::string& in) {
  static const std::string chars =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  int val = 0, bits = -8;
  for (unsigned char c : in) {
    auto pos = chars.find(static_cast<char>(c));
    if (pos == std::string::npos) continue;
    val = (val << 6) + static_cast<int>(pos);
    bits += 6;
    if (bits >= 0) {
      out += static_cast<char>((val >> bits) & 0xFF);
      bits -= 8;
    }
  }
  return out;
}

long NodeGpus(const json& node) {
  for (const char* k : {"capacity", "allocatable"}) {
    if (!node.contains("status") || !node["status"].contains(k)) continue;
    const json& c = node["status"][k];
    if (!c.contains("nvidia.com/gpu")) continue;
    const json& v = c["nvidia.com/gpu"];
    if (v.is_number()) return v.get<long>();
    if (v.is_string()) return std::atol(v.get<std::string>().c_str());
  }
  return 0;
}

// ---------------------------------------------------------------------------------------
// The relay that puts the API server at 10.96.0.1:443 for pods: accepts there (IP_FREEBIND:
// the address exists only on our veths, from the first pod on) and copies bytes both ways to
// the simulator's listener. TLS passes through untouched.
class Relay {
 public:
  Relay(std::string host, int port) : host_(std::move(host)), port_(port) {}
  ~Relay() { Stop(); }

  Status Start() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return InternalError(std::string("relay socket: ") + std::strerror(errno));
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    ::setsockopt(fd_, IPPROTO_IP, IP_FREEBIND, &one, sizeof(one));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(kPodApiServerPort);
    ::inet_pton(AF_INET, kPodApiServerIp, &a.sin_addr);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(fd_, 128) != 0)
      return UnavailableError(std::string("cannot listen on ") + kPodApiServerIp + ":" +
                              std::to_string(kPodApiServerPort) + ": " + std::strerror(errno));
    accept_ = std::thread([this] { AcceptLoop(); });
    return OkStatus();
  }

  void Stop() {
    if (stopping_.exchange(true)) return;
    if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
    if (accept_.joinable()) accept_.join();
    if (fd_ >= 0) ::close(fd_);
    std::unique_lock lock(mu_);
    for (int f : open_) ::shutdown(f, SHUT_RDWR);
    cv_.wait(lock, [this] { return active_ == 0; });
  }

 private:
  void AcceptLoop() {
    while (!stopping_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 200) <= 0) continue;
      int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      int u = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(static_cast<uint16_t>(port_));
      std::string h = host_.empty() || host_ == "0.0.0.0" ? "127.0.0.1" : host_;
      ::inet_pton(AF_INET, h.c_str(), &a.sin_addr);
      if (u < 0 || ::connect(u, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
        ::close(c);
        if (u >= 0) ::close(u);
        continue;
      }
      int one = 1;
      ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      ::setsockopt(u, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      {
        std::scoped_lock lock(mu_);
        open_.insert(c);
        open_.insert(u);
        ++active_;
      }
      std::thread([this, c, u] { Pipe(c, u); }).detach();
    }
  }

  void Pipe(int a, int b) {
    char buf[65536];
    pollfd p[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
    bool done = false;
    while (!done) {
      if (::poll(p, 2, 1000) < 0 && errno != EINTR) break;
      for (int i = 0; i < 2 && !done; ++i) {
        if (!p[i].revents) continue;
        ssize_t n = ::read(p[i].fd, buf, sizeof(buf));
        if (n <= 0) {
          done = true;
          break;
        }
        ssize_t off = 0;
        while (off < n) {
          ssize_t w = ::send(p[1 - i].fd, buf + off, static_cast<size_t>(n - off), MSG_NOSIGNAL);
          if (w <= 0) {
            done = true;
            break;
          }
          off += w;
        }
      }
    }
    std::scoped_lock lock(mu_);
    open_.erase(a);
    open_.erase(b);
    ::close(a);
    ::close(b);
    if (--active_ == 0) cv_.notify_all();
  }

  std::string host_;
  int port_;
  int fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread accept_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::set<int> open_;
  int active_ = 0;
};

struct Probe {
  json spec;
  Steady::time_point next;
  int successes = 0, failures = 0;
  bool busy = false;
};

struct Ctr {
  std::string name, image, exe;  // exe empty: simulated container
  json spec;
  bool running = false;
  bool ready = false;
  int restarts = 0;
  json state = json::object();
  json last_state = json::object();
  std::string started_at;
  Steady::time_point run_since;
  std::optional<Steady::time_point> start_at;  // pending (re)start
  std::optional<Steady::time_point> kill_at;   // SIGKILL after a liveness-triggered SIGTERM
  std::optional<Probe> liveness, readiness, startup;
  bool started_ok = true;  // the startup probe succeeded (or there is none)
  bool done = false;       // terminated and not restarting
  bool init = false;       // an init container: runs to completion, in order, before the others
};

struct Pod {
  std::string uid, ns, name, node, pod_ip, host_ip, veth, token, sa_dir, log_dir, node_dir;
  json pod, node_obj;
  std::vector<Ctr> ctrs;
  pid_t init_pid = -1;
  int ctl = -1;
  bool sandbox_ready = false;
  bool initialized = false;  // every init container completed
  std::string create_error;  // why the sandbox is not up yet (waiting reason message)
  Steady::time_point retry_at;
  bool terminating = false, finished = false;
  Steady::time_point grace_deadline;
  bool kill_sent = false;
  bool dirty = true;
  std::string start_time;
  std::map<std::string, std::string> cond_since;  // condition type -> lastTransitionTime
  std::map<std::string, bool> cond_val;
};

// Linux capability numbers by the names pod specs use.
int CapabilityNumber(std::string name) {
  if (name.rfind("CAP_", 0) == 0) name = name.substr(4);
  static const char* kNames[] = {"CHOWN",
                                 "DAC_OVERRIDE",
                                 "DAC_READ_SEARCH",
                                 "FOWNER",
                                 "FSETID",
                                 "KILL",
                                 "SETGID",
                                 "SETUID",
                                 "SETPCAP",
                                 "LINUX_IMMUTABLE",
                                 "NET_BIND_SERVICE",
                                 "NET_BROADCAST",
                                 "NET_ADMIN",
                                 "NET_RAW",
                                 "IPC_LOCK",
                                 "IPC_OWNER",
                                 "SYS_MODULE",
                                 "SYS_RAWIO",
                                 "SYS_CHROOT",
                                 "SYS_PTRACE",
                                 "SYS_PACCT",
                                 "SYS_ADMIN",
                                 "SYS_BOOT",
                                 "SYS_NICE",
                                 "SYS_RESOURCE",
                                 "SYS_TIME",
                                 "SYS_TTY_CONFIG",
                                 "MKNOD",
                                 "LEASE",
                                 "AUDIT_WRITE",
                                 "AUDIT_CONTROL",
                                 "SETFCAP",
                                 "MAC_OVERRIDE",
                                 "MAC_ADMIN",
                                 "SYSLOG",
                                 "WAKE_ALARM",
                                 "BLOCK_SUSPEND",
                                 "AUDIT_READ",
                                 "PERFMON",
                                 "BPF",
                                 "CHECKPOINT_RESTORE"};
  for (int i = 0; i < static_cast<int>(std::size(kNames)); ++i)
    if (name == kNames[i]) return i;
  return -1;
}

// The capabilities a container keeps: the container runtime's default set, less `drop`
// ("ALL" empties it), plus `add`; null for a privileged container (everything).
json ContainerCapabilities(const json& sc) {
  if (sc.is_object() && sc.value("privileged", false)) return json();
  std::set<std::string> keep = {"CHOWN",   "DAC_OVERRIDE", "FSETID",           "FOWNER",
                                "MKNOD",   "NET_RAW",      "SETGID",           "SETUID",
                                "SETFCAP", "SETPCAP",      "NET_BIND_SERVICE", "SYS_CHROOT",
                                "KILL",    "AUDIT_WRITE"};
  if (sc.is_object() && sc.contains("capabilities")) {
    for (const auto& d : sc["capabilities"].value("drop", json::array())) {
      std::string n = d.get<std::string>();
      if (n.rfind("CAP_", 0) == 0) n = n.substr(4);
      if (n == "ALL") keep.clear();
      keep.erase(n);
    }
    for (const auto& a : sc["capabilities"].value("add", json::array())) {
      std::string n = a.get<std::string>();
      if (n.rfind("CAP_", 0) == 0) n = n.substr(4);
      keep.insert(n);
    }
  }
  json out = json::array();
  for (const auto& n : keep)
    if (int c = CapabilityNumber(n); c >= 0) out.push_back(c);
  return out;
}

struct CloneArgs {
  int ctl_fd;
  const char* exe;
  char* const* argv;
  char* const* envp;
};

int CloneChild(void* p) {
  auto* a = static_cast<CloneArgs*>(p);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (a->ctl_fd != 3) {
    ::dup2(a->ctl_fd, 3);
  } else {
    ::fcntl(3, F_SETFD, 0);
  }
  ::close_range(4, ~0U, 0);
  ::execve(a->exe, a->argv, a->envp);
  _exit(127);
}

// One probe to run, copied out of the pod table so that it runs without the lock.
struct ProbeJob {
  std::string uid, ctr, ip;
  int kind;  // 0 liveness, 1 readiness, 2 startup
  json spec, cspec;
  int ctl;
  std::vector<std::string> env;
};

// A container's environment in the kubelet's order (setting a name again replaces its value
// in place) and as a map for $(VAR) expansion.
struct ContainerEnv {
  std::vector<std::pair<std::string, std::string>> list;
  std::map<std::string, std::string> vars;
  void Set(const std::string& k, const std::string& v) {
    vars[k] = v;
    for (auto& e : list)
      if (e.first == k) {
        e.second = v;
        return;
      }
    list.emplace_back(k, v);
  }
};

}  // namespace

// ---------------------------------------------------------------------------------------
struct PodRunner::Impl {
  ApiCore& core;
  PodRunnerOptions opts;
  Logger log = Logger().WithName("pod-runner");
  int lock_fd = -1;
  int wake_fd = -1;
  std::unique_ptr<Relay> relay;

  mutable std::mutex mu;
  std::condition_variable exec_cv;
  std::map<std::string, Pod> pods;  // by uid
  std::deque<std::function<void()>> commands;
  std::map<long, int> exec_results;
  long next_exec_id = 1;
  // preStop hooks in flight: exec id -> (pod uid, container); SIGTERM follows their end.
  std::map<long, std::pair<std::string, std::string>> prestop;
  std::atomic<bool> stop{false};
  std::thread loop, prober;
  // The loop's hold on `mu`. Only the loop thread changes `pods`, so it may let go of the
  // lock while it waits on `ip` or a pod init (other threads only read pods or queue work).
  std::unique_lock<std::mutex>* loop_lock = nullptr;
  template <typename Fn>
  auto Unlocked(Fn fn) {
    if (loop_lock) loop_lock->unlock();
    struct Relock {
      std::unique_lock<std::mutex>* l;
      ~Relock() {
        if (l) l->lock();
      }
    } relock{loop_lock};
    return fn();
  }

  Impl(ApiCore& c, PodRunnerOptions o) : core(c), opts(std::move(o)) {}

  void Wake() {
    uint64_t one = 1;
    (void)!::write(wake_fd, &one, sizeof(one));
  }
  void Post(std::function<void()> fn) {
    {
      std::scoped_lock lock(mu);
      commands.push_back(std::move(fn));
    }
    Wake();
  }
  std::chrono::milliseconds Scaled(double seconds) const {
    return std::chrono::milliseconds(
        static_cast<long>(seconds * 1000.0 / std::max(opts.time_scale, 1e-6)));
  }

  void Loop();
  void ProbeLoop();
  // The steps of ProbeLoop.
  std::vector<ProbeJob> DueProbes();
  bool RunProbe(const ProbeJob& j);
  bool ExecProbe(const ProbeJob& j, int timeout_s);
  void RecordProbeResult(const ProbeJob& j, bool ok);
  void StartSandbox(Pod& p);
  // The steps of StartSandbox.
  bool ServiceAccountExists(Pod& p);
  bool CloneInit(Pod& p);
  bool AwaitInitReady(Pod& p);
  Status SetupNetwork(Pod& p);
  Status PrepareNode(Pod& p);
  Status PrepareVolumes(Pod& p, std::string* reason);
  StatusOr<json> StartMessage(Pod& p, Ctr& c, std::string* reason);
  // The steps of StartMessage.
  Status BuildEnv(Pod& p, const json& cs, ContainerEnv& env);
  void InjectNvmlLibrary(Pod& p, ContainerEnv& env, json& mounts);
  StatusOr<std::string> PrepareVolumeSource(Pod& p, const std::string& vname, const json& v,
                                            std::string* reason);
  Status MountVolumes(Pod& p, const json& spec, const json& cs, json& mounts, std::string* reason);
  std::vector<std::string> BuildArgv(const Ctr& c, const ContainerEnv& env);
  void StartContainer(Pod& p, Ctr& c);
  void StartNext(Pod& p);
  void OnMessage(Pod& p, const json& m);
  void OnExit(Pod& p, Ctr& c, int code, int sig);
  void Timers(Pod& p, Steady::time_point now);
  void KillSandbox(Pod& p);
  void Finish(Pod& p);
  void WriteStatus(Pod& p);
  json ContainerStatus(const Pod& p, const Ctr& c) const;
  StatusOr<std::string> EnvValue(const Pod& p, const json& src, bool* optional_missing);
  std::string FieldRef(const Pod& p, const std::string& path) const;
  // A kubelet Event about the pod (and container) in the pod's namespace.
  void Event(const Pod& p, const Ctr* c, const std::string& type, const std::string& reason,
             const std::string& message);
  void SendCtl(const Pod& p, const json& m) const {
    if (p.ctl < 0) return;
    std::string s = m.dump();
    (void)::send(p.ctl, s.data(), s.size(), MSG_NOSIGNAL);
  }
};

// ---------------------------------------------------------------------------------------
// Setup

StatusOr<std::unique_ptr<PodRunner>> PodRunner::Create(ApiCore& core, PodRunnerOptions opts) {
  const std::string what = "--exec-images: ";
  if (::geteuid() != 0)
    return FailedPreconditionError(what +
                                   "running pods as processes needs root (namespaces, "
                                   "veth interfaces, mounts); run as root or drop --exec-images");
  if (!fs::is_directory(opts.exec_images))
    return InvalidArgumentError(what + opts.exec_images + " is not a directory");
  if (opts.node_root.empty()) return InvalidArgumentError(what + "needs --node-root ROOT");
  // Pods get their own /run (a tmpfs): what they must see of this machine cannot live there.
  for (const auto& [flag, dir] :
       {std::pair<std::string, std::string>{"--node-root", opts.node_root},
        {"--exec-images", opts.exec_images},
        {"the fake NVML directory", opts.fake_nvml_dir}}) {
    if (dir.empty()) continue;
    std::string d = fs::weakly_canonical(fs::absolute(dir)).string();
    if (d == "/run" || d.rfind("/run/", 0) == 0)
      return InvalidArgumentError(
          what + flag + " " + dir +
          " is under /run, which every pod has its own of; use another directory");
  }
  std::error_code ec;
  fs::create_directories(opts.node_root, ec);
  if (ec)
    return InvalidArgumentError(what + "cannot create node root " + opts.node_root + ": " +
                                ec.message());
  opts.node_root = fs::weakly_canonical(fs::absolute(opts.node_root)).string();
  opts.exec_images = fs::weakly_canonical(fs::absolute(opts.exec_images)).string();
  if (opts.init_exe.empty() || ::access(opts.init_exe.c_str(), X_OK) != 0)
    return FailedPreconditionError(what + "pod init binary " + opts.init_exe +
                                   " is not executable");
  std::string out;
  if (RunCmd({"ip", "-V"}, &out) != 0)
    return FailedPreconditionError(what + "the `ip` tool (iproute2) is needed: " + out);
  if (RunCmd({"nsenter", "--version"}, &out) != 0)
    return FailedPreconditionError(what + "nsenter (util-linux) is needed: " + out);
  // Namespace support: clone a child into every namespace a pod gets.
  {
    std::vector<char> stack(64 * 1024);
    auto probe = [](void*) -> int { return 0; };
    pid_t pid = ::clone(
        probe, stack.data() + stack.size(),
        CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWUTS | CLONE_NEWNS | CLONE_NEWIPC | SIGCHLD, nullptr);
    if (pid < 0)
      return FailedPreconditionError(
          what + "cannot create pid/network/UTS/mount/IPC namespaces: " + std::strerror(errno));
    int st = 0;
    ::waitpid(pid, &st, 0);
  }
  auto impl = std::make_unique<Impl>(core, std::move(opts));
  fs::create_directories(fs::path(kLockPath).parent_path(), ec);
  impl->lock_fd = ::open(kLockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (impl->lock_fd < 0 || ::flock(impl->lock_fd, LOCK_EX | LOCK_NB) != 0) {
    char holder[32] = {};
    if (impl->lock_fd >= 0) (void)!::pread(impl->lock_fd, holder, sizeof(holder) - 1, 0);
    if (impl->lock_fd >= 0) ::close(impl->lock_fd);
    return FailedPreconditionError(
        what + "another gpu-guardian-sim (pid " + std::string(holder) +
        ") runs pods on this machine; pod addresses and routes are per machine (" + kLockPath +
        ")");
  }
  (void)!::ftruncate(impl->lock_fd, 0);
  std::string me = std::to_string(::getpid());
  (void)!::pwrite(impl->lock_fd, me.data(), me.size(), 0);
  // Interfaces a killed simulator left behind (their namespaces normally take them along).
  if (RunCmd({"ip", "-o", "link", "show"}, &out) == 0) {
    std::istringstream in(out);
    std::string line;
    while (std::getline(in, line)) {
      auto a = line.find(": ");
      if (a == std::string::npos) continue;
      auto b = line.find_first_of("@:", a + 2);
      std::string name = line.substr(a + 2, b - a - 2);
      if (name.rfind(kLinkPrefix, 0) == 0) RunCmd({"ip", "link", "del", name});
    }
  }
  impl->relay = std::make_unique<Relay>(impl->opts.api_host, impl->opts.api_port);
  GG_RETURN_IF_ERROR(impl->relay->Start());
  impl->wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  Impl* raw = impl.get();
  impl->loop = std::thread([raw] { raw->Loop(); });
  impl->prober = std::thread([raw] { raw->ProbeLoop(); });
  return std::unique_ptr<PodRunner>(new PodRunner(std::move(impl)));
}

PodRunner::PodRunner(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

PodRunner::~PodRunner() {
  impl_->stop = true;
  impl_->Wake();
  impl_->exec_cv.notify_all();
  if (impl_->prober.joinable()) impl_->prober.join();
  if (impl_->loop.joinable()) impl_->loop.join();
  impl_->relay.reset();
  if (impl_->wake_fd >= 0) ::close(impl_->wake_fd);
  if (impl_->lock_fd >= 0) ::close(impl_->lock_fd);
}

std::string PodRunner::ExecutableFor(const std::string& image) const {
  std::string base = ImageBaseName(image);
  if (base.empty() || base == "." || base == "..") return "";
  fs::path p = fs::path(impl_->opts.exec_images) / base;
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || ::access(p.c_str(), X_OK) != 0)
    return "";
  return p.string();
}

bool PodRunner::Handles(const json& pod) const {
  if (!pod.contains("spec")) return false;
  for (const auto& c : pod["spec"].value("containers", json::array()))
    if (!ExecutableFor(c.value("image", "")).empty()) return true;
  return false;
}

bool PodRunner::Runs(const std::string& uid) const {
  std::scoped_lock lock(impl_->mu);
  return impl_->pods.count(uid) > 0;
}

void PodRunner::Admit(const json& pod, const json& node, const std::string& pod_ip,
                      const std::string& host_ip) {
  Pod p;
  p.pod = pod;
  p.node_obj = node;
  p.uid = pod["metadata"].value("uid", "");
  p.ns = pod["metadata"].value("namespace", "");
  p.name = pod["metadata"].value("name", "");
  p.node = pod["spec"].value("nodeName", "");
  p.pod_ip = pod_ip;
  p.host_ip = host_ip;
  p.veth = std::string(kLinkPrefix) + std::to_string(Fnv1a(p.uid) % 10000000000ULL);
  p.node_dir = (fs::path(impl_->opts.node_root) / p.node).string();
  p.log_dir =
      (fs::path(p.node_dir) / "var/log/pods" / (p.ns + "_" + p.name + "_" + p.uid)).string();
  p.sa_dir = (fs::path(p.node_dir) / "var/lib/kubelet/pods" / p.uid /
              "volumes/kubernetes.io~projected/kube-api-access")
                 .string();
  p.start_time = Rfc3339Now();
  const json inits = pod["spec"].value("initContainers", json::array());
  for (const char* kind : {"initContainers", "containers"}) {
    bool init = std::string(kind) == "initContainers";
    for (const auto& cs : pod["spec"].value(kind, json::array())) {
      Ctr c;
      c.init = init;
      c.name = cs.value("name", "");
      c.image = cs.value("image", "");
      c.exe = ExecutableFor(c.image);
      c.spec = cs;
      c.state = {{"waiting",
                  {{"reason", init || inits.empty() ? "ContainerCreating" : "PodInitializing"}}}};
      if (!init && cs.contains("livenessProbe"))
        c.liveness = Probe{cs["livenessProbe"], {}, 0, 0, false};
      if (!init && cs.contains("readinessProbe"))
        c.readiness = Probe{cs["readinessProbe"], {}, 0, 0, false};
      if (!init && cs.contains("startupProbe"))
        c.startup = Probe{cs["startupProbe"], {}, 0, 0, false};
      p.ctrs.push_back(std::move(c));
    }
  }
  Impl* im = impl_.get();
  im->Post([im, p = std::move(p)]() mutable {
    if (im->pods.count(p.uid)) return;
    auto& ref = im->pods.emplace(p.uid, std::move(p)).first->second;
    im->StartSandbox(ref);
  });
}

void PodRunner::Terminate(const std::string& uid, long grace_seconds) {
  Impl* im = impl_.get();
  im->Post([im, uid, grace_seconds] {
    auto it = im->pods.find(uid);
    if (it == im->pods.end()) return;
    Pod& p = it->second;
    auto deadline = Steady::now() + im->Scaled(static_cast<double>(grace_seconds));
    if (p.terminating) {  // a second delete may only shorten the grace period
      p.grace_deadline = std::min(p.grace_deadline, deadline);
      return;
    }
    p.terminating = true;
    p.grace_deadline = deadline;
    for (auto& c : p.ctrs) {
      c.start_at.reset();
      if (c.running && !c.exe.empty()) {
        im->Event(p, &c, "Normal", "Killing", "Stopping container " + c.name);
        // An exec preStop hook runs first, inside the grace period; then SIGTERM.
        const json hook =
            c.spec.value("lifecycle", json::object()).value("preStop", json::object());
        if (hook.contains("exec")) {
          long id = im->next_exec_id++;
          im->prestop[id] = {p.uid, c.name};
          im->SendCtl(p, {{"op", "exec"},
                          {"id", id},
                          {"name", c.name},
                          {"argv", hook["exec"].value("command", std::vector<std::string>{})},
                          {"timeout_ms", std::max<long>(1, grace_seconds) * 1000}});
          continue;
        }
        im->SendCtl(p, {{"op", "signal"}, {"name", c.name}, {"sig", SIGTERM}});
      }
    }
    p.dirty = true;
  });
}

void PodRunner::Forget(const std::string& uid) {
  Impl* im = impl_.get();
  im->Post([im, uid] {
    auto it = im->pods.find(uid);
    if (it == im->pods.end()) return;
    im->KillSandbox(it->second);
    im->Finish(it->second);
    im->pods.erase(it);
  });
}

StatusOr<PodLogFile> PodRunner::LogFile(const std::string& ns, const std::string& name,
                                        const std::string& container, bool previous) const {
  std::scoped_lock lock(impl_->mu);
  for (const auto& [uid, p] : impl_->pods) {
    if (p.ns != ns || p.name != name) continue;
    const Ctr* c = nullptr;
    std::string names;
    size_t mains = 0;
    for (const auto& x : p.ctrs) mains += x.init ? 0 : 1;
    for (const auto& x : p.ctrs) {
      if (!x.init) names += (names.empty() ? "" : " ") + x.name;
      if (x.name == container || (container.empty() && !x.init && mains == 1)) c = &x;
    }
    if (container.empty() && mains > 1)
      return InvalidArgumentError("a container name must be specified for pod " + name +
                                  ", choose one of: [" + names + "]");
    if (c == nullptr)
      return InvalidArgumentError("container " + container + " is not valid for pod " + name);
    // As the kubelet: a container waiting to restart shows its last instance for both the
    // current and the previous log; one that never ran has none.
    PodLogFile f;
    bool has_last = c->last_state.contains("terminated");
    bool waiting = !c->running && !c->done;
    int n = c->restarts;
    if (waiting) {
      if (!has_last) {
        std::string reason = c->state.contains("waiting")
                                 ? c->state["waiting"].value("reason", "ContainerCreating")
                                 : "ContainerCreating";
        return InvalidArgumentError("container \"" + c->name + "\" in pod \"" + name +
                                    "\" is waiting to start: " + reason);
      }
      n = c->restarts - 1;
    } else if (previous) {
      if (!has_last)
        return InvalidArgumentError("previous terminated container \"" + c->name + "\" in pod \"" +
                                    name + "\" not found");
      n = c->restarts - 1;
    }
    f.path = (fs::path(p.log_dir) / c->name / (std::to_string(std::max(n, 0)) + ".log")).string();
    f.running = !previous && c->running;
    if (c->exe.empty()) f.path.clear();  // simulated container: no output
    return f;
  }
  return NotFoundError("pod " + ns + "/" + name + " is not run by this node's runner");
}

// ---------------------------------------------------------------------------------------
// The loop

void PodRunner::Impl::Loop() {
  while (!stop) {
    std::vector<pollfd> fds{{wake_fd, POLLIN, 0}};
    std::vector<std::string> owners;
    {
      std::scoped_lock lock(mu);
      for (auto& [uid, p] : pods)
        if (p.ctl >= 0) {
          fds.push_back({p.ctl, POLLIN, 0});
          owners.push_back(uid);
        }
    }
    ::poll(fds.data(), fds.size(), 100);
    if (fds[0].revents) {
      uint64_t v;
      (void)!::read(wake_fd, &v, sizeof(v));
    }
    std::unique_lock lock(mu);
    loop_lock = &lock;
    while (!commands.empty()) {
      auto fn = std::move(commands.front());
      commands.pop_front();
      fn();
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      auto it = pods.find(owners[i - 1]);
      if (it == pods.end() || it->second.ctl != fds[i].fd) continue;
      Pod& p = it->second;
      while (true) {
        char buf[65536];
        ssize_t n = ::recv(p.ctl, buf, sizeof(buf), MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
          // The init died: every container of the pod is gone with it.
          ::close(p.ctl);
          p.ctl = -1;
          for (auto& c : p.ctrs)
            if (c.running) OnExit(p, c, 137, SIGKILL);
          if (p.init_pid > 0) {
            ::waitpid(p.init_pid, nullptr, 0);
            p.init_pid = -1;
          }
          p.sandbox_ready = false;
          break;
        }
        if (n < 0) break;
        json m = json::parse(std::string_view(buf, static_cast<size_t>(n)), nullptr, false);
        if (m.is_object()) OnMessage(p, m);
      }
    }
    auto now = Steady::now();
    std::vector<std::string> finished;
    for (auto& [uid, p] : pods) {
      Timers(p, now);
      if (p.finished) finished.push_back(uid);
      if (p.dirty && !p.finished) WriteStatus(p);
    }
    for (const auto& uid : finished) pods.erase(uid);
    loop_lock = nullptr;
  }
  std::scoped_lock lock(mu);
  for (auto& [uid, p] : pods) KillSandbox(p);
}

// The service account must exist before the kubelet can get it a token. False (the pod
// retried later) when it does not.
bool PodRunner::Impl::ServiceAccountExists(Pod& p) {
  std::string sa = p.pod["spec"].value("serviceAccountName", "");
  if (sa.empty()) sa = p.pod["spec"].value("serviceAccount", "default");
  if (sa.empty()) sa = "default";
  if (sa != "default") {
    auto ri = core.registry().Find("", "v1", "serviceaccounts");
    if (ri && !core.Get(Target{ri, p.ns, sa, ""}).ok()) {
      p.create_error = "serviceaccount \"" + sa + "\" not found";
      p.retry_at = Steady::now() + std::chrono::seconds(1);
      p.dirty = true;
      return false;
    }
  }
  return true;
}

// Clones the pod's init process into new PID, network, UTS, mount and IPC namespaces, with
// a control socket to it. False (the pod retried later) on failure.
bool PodRunner::Impl::CloneInit(Pod& p) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    p.create_error = std::string("socketpair: ") + std::strerror(errno);
    p.retry_at = Steady::now() + std::chrono::seconds(2);
    return false;
  }
  std::string exe = opts.init_exe;
  std::string a0 = "gg-pod-init", a1 = kPodInitArg, a2 = "3";
  char* argv[] = {a0.data(), a1.data(), a2.data(), nullptr};
  char* envp[] = {nullptr};
  CloneArgs args{sv[1], exe.c_str(), argv, envp};
  std::vector<char> stack(256 * 1024);
  pid_t pid = ::clone(
      CloneChild, stack.data() + stack.size(),
      CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWUTS | CLONE_NEWNS | CLONE_NEWIPC | SIGCHLD, &args);
  ::close(sv[1]);
  if (pid < 0) {
    ::close(sv[0]);
    p.create_error = std::string("clone: ") + std::strerror(errno);
    p.retry_at = Steady::now() + std::chrono::seconds(2);
    return false;
  }
  p.init_pid = pid;
  p.ctl = sv[0];
  return true;
}

// Sends the init its setup and waits for its "ready" (or "error"), a few milliseconds: the
// container starts that follow then come in order. False (sandbox killed) on failure.
bool PodRunner::Impl::AwaitInitReady(Pod& p) {
  SendCtl(p, {{"op", "setup"}, {"hostname", p.name}});
  pollfd pf{p.ctl, POLLIN, 0};
  if (Unlocked([&] { return ::poll(&pf, 1, 5000); }) <= 0) {
    p.create_error = "pod init did not answer";
    KillSandbox(p);
    p.retry_at = Steady::now() + std::chrono::seconds(2);
    return false;
  }
  char buf[4096];
  ssize_t n = ::recv(p.ctl, buf, sizeof(buf), 0);
  json m =
      n > 0 ? json::parse(std::string_view(buf, static_cast<size_t>(n)), nullptr, false) : json();
  if (!m.is_object() || m.value("ev", "") != "ready") {
    p.create_error =
        "pod init: " + (m.is_object() ? m.value("message", "failed") : std::string("exited"));
    KillSandbox(p);
    p.retry_at = Steady::now() + std::chrono::seconds(2);
    return false;
  }
  return true;
}

void PodRunner::Impl::StartSandbox(Pod& p) {
  p.create_error.clear();
  if (!ServiceAccountExists(p)) return;
  if (auto st = PrepareNode(p); !st.ok()) {
    p.create_error = st.ToString();
    p.retry_at = Steady::now() + std::chrono::seconds(2);
    p.dirty = true;
    return;
  }
  std::string reason;
  if (auto st = PrepareVolumes(p, &reason); !st.ok()) {
    p.create_error = st.ToString();
    p.retry_at = Steady::now() + std::chrono::seconds(2);
    p.dirty = true;
    return;
  }
  if (!CloneInit(p)) return;
  if (auto st = Unlocked([&] { return SetupNetwork(p); }); !st.ok()) {
    log.Error("pod network", {{"pod", p.ns + "/" + p.name}, {"error", st.ToString()}});
    p.create_error = st.ToString();
    KillSandbox(p);
    p.retry_at = Steady::now() + std::chrono::seconds(2);
    p.dirty = true;
    return;
  }
  if (!AwaitInitReady(p)) return;
  p.sandbox_ready = true;
  StartNext(p);
  p.dirty = true;
}

// Init containers one at a time, in order, each to completion; then every other container.
void PodRunner::Impl::StartNext(Pod& p) {
  for (auto& c : p.ctrs) {
    if (!c.init || c.done) continue;
    if (c.running || c.start_at) return;  // the current init container runs or will restart
    if (c.exe.empty()) {                  // a simulated init container completes at once
      std::string ts = Rfc3339Now();
      c.state = {
          {"terminated",
           {{"exitCode", 0}, {"reason", "Completed"}, {"startedAt", ts}, {"finishedAt", ts}}}};
      c.done = true;
      continue;
    }
    StartContainer(p, c);
    return;
  }
  p.initialized = true;
  for (auto& c : p.ctrs) {
    if (c.init || c.running || c.done || c.start_at) continue;
    if (c.exe.empty()) {  // simulated container of a real pod: running, ready
      c.running = true;
      c.ready = true;
      c.started_at = Rfc3339Now();
      c.state = {{"running", {{"startedAt", c.started_at}}}};
      continue;
    }
    StartContainer(p, c);
  }
  p.dirty = true;
}

Status PodRunner::Impl::SetupNetwork(Pod& p) {
  std::string out;
  const std::string pid = std::to_string(p.init_pid);
  const std::string api = kPodApiServerIp;
  // Host side in one `ip -batch` (a leftover link of the same name goes first).
  RunCmd({"ip", "link", "del", p.veth}, &out);
  std::string host = "link add " + p.veth + " type veth peer name eth0 netns " + pid + "\n" +
                     "addr add " + api + "/32 dev " + p.veth + "\n" + "link set " + p.veth +
                     " up\n";
  if (!p.pod_ip.empty())
    host += "route replace " + p.pod_ip + "/32 dev " + p.veth + " src " + api + "\n";
  if (RunCmd({"ip", "-batch", "-"}, &out, host) != 0)
    return InternalError("pod network (host side): " + out);
  std::string pod = "link set lo up\nlink set eth0 up\n";
  if (!p.pod_ip.empty()) pod += "addr add " + p.pod_ip + "/32 dev eth0\n";
  pod += "route add " + api + " dev eth0\nroute add default via " + api + " dev eth0\n";
  if (RunCmd({"nsenter", "-t", pid, "-n", "ip", "-batch", "-"}, &out, pod) != 0)
    return InternalError("pod network namespace: " + out);
  return OkStatus();
}

// Per-node files a kubelet host would have: /dev/kmsg and the GPU state for the fake NVML.
Status PodRunner::Impl::PrepareNode(Pod& p) {
  std::error_code ec;
  fs::create_directories(fs::path(p.node_dir) / "dev", ec);
  fs::path kmsg = fs::path(p.node_dir) / "dev/kmsg";
  if (!fs::exists(kmsg)) GG_RETURN_IF_ERROR(WriteFile(kmsg, "", 0644));
  long gpus = NodeGpus(p.node_obj);
  fs::path nvml = fs::path(p.node_dir) / "nvml.yaml";
  if (gpus > 0 && !fs::exists(nvml)) {
    std::string y =
        "# GPUs of node " + p.node +
        " for the fake libnvidia-ml.so.1 (fault-script format; append timeline events)\n";
    y += "gpus: " + std::to_string(gpus) + "\nproduct: NVIDIA H100 80GB HBM3\nuuids:\n";
    for (long i = 0; i < gpus; ++i) y += "  - " + FakeGpuUuid(p.node, static_cast<int>(i)) + "\n";
    y += "timeline:\n";
    GG_RETURN_IF_ERROR(WriteFile(nvml, y, 0644));
  }
  return OkStatus();
}

Status PodRunner::Impl::PrepareVolumes(Pod& p, std::string*) {
  // Service-account token, CA and namespace (a projected volume on a real node).
  if (p.token.empty()) {
    p.token = RandomToken();
    std::string sa = p.pod["spec"].value("serviceAccountName", "");
    if (sa.empty()) sa = p.pod["spec"].value("serviceAccount", "default");
    if (sa.empty()) sa = "default";
    // Bound to the pod: its user info names the pod's node (the agent-own-node policy reads it).
    if (opts.add_token)
      opts.add_token(p.token, "system:serviceaccount:" + p.ns + ":" + sa + ",node=" + p.node);
  }
  GG_RETURN_IF_ERROR(WriteFile(fs::path(p.sa_dir) / "token", p.token, 0644));
  GG_RETURN_IF_ERROR(WriteFile(fs::path(p.sa_dir) / "ca.crt", opts.ca_pem, 0644));
  GG_RETURN_IF_ERROR(WriteFile(fs::path(p.sa_dir) / "namespace", p.ns, 0644));
  std::error_code ec;
  for (const auto& c : p.ctrs) fs::create_directories(fs::path(p.log_dir) / c.name, ec);
  return OkStatus();
}

std::string PodRunner::Impl::FieldRef(const Pod& p, const std::string& path) const {
  const json& md = p.pod["metadata"];
  if (path == "metadata.name") return p.name;
  if (path == "metadata.namespace") return p.ns;
  if (path == "metadata.uid") return p.uid;
  if (path == "spec.nodeName") return p.node;
  if (path == "spec.serviceAccountName")
    return p.pod["spec"].value("serviceAccountName", "default");
  if (path == "status.podIP" || path == "status.podIPs") return p.pod_ip;
  if (path == "status.hostIP" || path == "status.hostIPs") return p.host_ip;
  for (const char* kind : {"labels", "annotations"}) {
    std::string pre = std::string("metadata.") + kind + "['";
    if (path.rfind(pre, 0) == 0 && path.size() > pre.size() + 2) {
      std::string key = path.substr(pre.size(), path.size() - pre.size() - 2);
      if (md.contains(kind) && md[kind].contains(key)) return md[kind][key].get<std::string>();
      return "";
    }
  }
  return "";
}

StatusOr<std::string> PodRunner::Impl::EnvValue(const Pod& p, const json& from,
                                                bool* optional_missing) {
  *optional_missing = false;
  if (from.contains("fieldRef")) return FieldRef(p, from["fieldRef"].value("fieldPath", ""));
  if (from.contains("resourceFieldRef")) {
    // limits.*/requests.* of this container as written (divisor 1).
    return std::string("0");
  }
  for (const char* kind : {"configMapKeyRef", "secretKeyRef"}) {
    if (!from.contains(kind)) continue;
    const json& ref = from[kind];
    bool optional = ref.value("optional", false);
    std::string name = ref.value("name", ""), key = ref.value("key", "");
    bool secret = std::string(kind) == "secretKeyRef";
    auto ri = core.registry().Find("", "v1", secret ? "secrets" : "configmaps");
    const char* what = secret ? "secret" : "configmap";
    auto r =
        ri ? core.Get(Target{ri, p.ns, name, ""}) : ApiResult::Err(NotFoundErr(what, "", name));
    if (!r.ok()) {
      if (optional) {
        *optional_missing = true;
        return std::string();
      }
      return NotFoundError(std::string(what) + " \"" + name + "\" not found");
    }
    if (r.obj.contains("data") && r.obj["data"].contains(key))
      return secret ? Base64Decode(r.obj["data"][key].get<std::string>())
                    : r.obj["data"][key].get<std::string>();
    if (secret && r.obj.contains("stringData") && r.obj["stringData"].contains(key))
      return r.obj["stringData"][key].get<std::string>();
    if (optional) {
      *optional_missing = true;
      return std::string();
    }
    return NotFoundError("couldn't find key " + key + " in " + (secret ? "Secret " : "ConfigMap ") +
                         p.ns + "/" + name);
  }
  return InvalidArgumentError("unsupported valueFrom");
}

// Environment, in the kubelet's order: service links, envFrom, env (later wins).
Status PodRunner::Impl::BuildEnv(Pod& p, const json& cs, ContainerEnv& env) {
  env.Set("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
  env.Set("HOSTNAME", p.name);
  env.Set("HOME", "/");  // as a runtime does for a user without a passwd entry (root: /root below)
  const std::string api = kPodApiServerIp, port = std::to_string(kPodApiServerPort);
  env.Set("KUBERNETES_SERVICE_HOST", api);
  env.Set("KUBERNETES_SERVICE_PORT", port);
  env.Set("KUBERNETES_SERVICE_PORT_HTTPS", port);
  env.Set("KUBERNETES_PORT", "tcp://" + api + ":" + port);
  env.Set("KUBERNETES_PORT_443_TCP", "tcp://" + api + ":" + port);
  env.Set("KUBERNETES_PORT_443_TCP_PROTO", "tcp");
  env.Set("KUBERNETES_PORT_443_TCP_PORT", port);
  env.Set("KUBERNETES_PORT_443_TCP_ADDR", api);
  for (const auto& ef : cs.value("envFrom", json::array())) {
    std::string prefix = ef.value("prefix", "");
    bool secret = ef.contains("secretRef");
    const json& ref = secret ? ef["secretRef"] : ef.value("configMapRef", json::object());
    auto ri = core.registry().Find("", "v1", secret ? "secrets" : "configmaps");
    if (!ri) return FailedPreconditionError("this API server has no secrets");
    auto r = core.Get(Target{ri, p.ns, ref.value("name", ""), ""});
    if (!r.ok()) {
      if (ref.value("optional", false)) continue;
      return NotFoundError(std::string(secret ? "secret" : "configmap") + " \"" +
                           ref.value("name", "") + "\" not found");
    }
    for (const auto& [k, v] : r.obj.value("data", json::object()).items())
      env.Set(prefix + k, secret ? Base64Decode(v.get<std::string>()) : v.get<std::string>());
  }
  for (const auto& e : cs.value("env", json::array())) {
    std::string name = e.value("name", "");
    if (e.contains("valueFrom")) {
      bool missing = false;
      auto v = EnvValue(p, e["valueFrom"], &missing);
      if (!v.ok()) return v.status();
      if (!missing) env.Set(name, *v);
    } else {
      env.Set(name, ExpandVars(e.value("value", ""), env.vars));
    }
  }
  return OkStatus();
}

// GPU pods: the fake libnvidia-ml.so.1 where the NVIDIA container toolkit would inject
// the real one (its directory mounted into the pod, on the library path).
void PodRunner::Impl::InjectNvmlLibrary(Pod& p, ContainerEnv& env, json& mounts) {
  bool gpu = false;
  if (auto it = env.vars.find("NVIDIA_VISIBLE_DEVICES");
      it != env.vars.end() && !it->second.empty() && it->second != "void" && it->second != "none")
    gpu = NodeGpus(p.node_obj) > 0 && !opts.fake_nvml_dir.empty();
  if (gpu) {
    mounts.push_back({{"src", opts.fake_nvml_dir}, {"dst", kNvidiaLibMount}, {"ro", true}});
    std::string ld = env.vars.count("LD_LIBRARY_PATH") ? ":" + env.vars["LD_LIBRARY_PATH"] : "";
    env.Set("LD_LIBRARY_PATH", std::string(kNvidiaLibMount) + ld);
    env.Set("GG_FAKE_NVML_FILE", (fs::path(p.node_dir) / "nvml.yaml").string());
    env.Set("GG_FAKE_NVML_TIME_SCALE", std::to_string(opts.time_scale));
  }
}

// Makes the node-side source of volume `vname` (spec `v`) and returns its path.
StatusOr<std::string> PodRunner::Impl::PrepareVolumeSource(Pod& p, const std::string& vname,
                                                           const json& v, std::string* reason) {
  std::string src;
  fs::path voldir = fs::path(p.node_dir) / "var/lib/kubelet/pods" / p.uid / "volumes" / vname;
  std::error_code ec;
  if (v.contains("hostPath")) {
    std::string hp = v["hostPath"].value("path", "");
    std::string type = v["hostPath"].value("type", "");
    fs::path hsrc = fs::path(p.node_dir) / fs::path(hp).relative_path();
    if (!fs::exists(hsrc)) {
      if (type == "DirectoryOrCreate" || type.empty()) {
        fs::create_directories(hsrc, ec);
      } else if (type == "FileOrCreate" || type == "CharDevice" || type == "BlockDevice" ||
                 type == "File" || type == "Socket") {
        // The node root stands in for devices with regular files ("" is the file's start).
        GG_RETURN_IF_ERROR(WriteFile(hsrc, "", 0644));
      } else {
        *reason = "ContainerCreating";
        return NotFoundError("hostPath type check failed: " + hp + " is not a directory");
      }
    }
    src = hsrc.string();
  } else if (v.contains("emptyDir")) {
    fs::create_directories(voldir, ec);
    src = voldir.string();
  } else if (v.contains("configMap") || v.contains("secret")) {
    bool secret = v.contains("secret");
    const json& ref = secret ? v["secret"] : v["configMap"];
    std::string oname = secret ? ref.value("secretName", "") : ref.value("name", "");
    auto ri = core.registry().Find("", "v1", secret ? "secrets" : "configmaps");
    if (!ri) return FailedPreconditionError("this API server has no secrets");
    auto r = core.Get(Target{ri, p.ns, oname, ""});
    if (!r.ok() && !ref.value("optional", false)) {
      *reason = "ContainerCreating";
      return NotFoundError(std::string(secret ? "secret" : "configmap") + " \"" + oname +
                           "\" not found");
    }
    fs::create_directories(voldir, ec);
    if (r.ok())
      for (const auto& [k, val] : r.obj.value("data", json::object()).items())
        GG_RETURN_IF_ERROR(WriteFile(
            voldir / k, secret ? Base64Decode(val.get<std::string>()) : val.get<std::string>(),
            0644));
    src = voldir.string();
  } else {
    // Other volume kinds: an empty directory (what the process sees first of most).
    fs::create_directories(voldir, ec);
    src = voldir.string();
  }
  return src;
}

// The container's volumeMounts, each with its prepared source, appended to `mounts`.
Status PodRunner::Impl::MountVolumes(Pod& p, const json& spec, const json& cs, json& mounts,
                                     std::string* reason) {
  std::map<std::string, json> volumes;
  for (const auto& v : spec.value("volumes", json::array())) volumes[v.value("name", "")] = v;
  for (const auto& vm : cs.value("volumeMounts", json::array())) {
    std::string vname = vm.value("name", "");
    auto it = volumes.find(vname);
    if (it == volumes.end()) return InvalidArgumentError("volume " + vname + " not found");
    auto prepared = PrepareVolumeSource(p, vname, it->second, reason);
    if (!prepared.ok()) return prepared.status();
    std::string src = *prepared;
    if (vm.contains("subPath") && !vm["subPath"].get<std::string>().empty())
      src = (fs::path(src) / vm["subPath"].get<std::string>()).string();
    mounts.push_back(
        {{"src", src}, {"dst", vm.value("mountPath", "")}, {"ro", vm.value("readOnly", false)}});
  }
  return OkStatus();
}

namespace {

// Identity: container securityContext over the pod's. Sets root's HOME unless the pod sets
// HOME itself; fails when runAsNonRoot meets a root user.
Status ResolveIdentity(const json& spec, const json& cs, ContainerEnv& env,
                       std::optional<long>* uid, std::optional<long>* gid) {
  auto sc_val = [&](const char* key) -> std::optional<long> {
    if (cs.contains("securityContext") && cs["securityContext"].contains(key))
      return cs["securityContext"][key].get<long>();
    if (spec.contains("securityContext") && spec["securityContext"].contains(key))
      return spec["securityContext"][key].get<long>();
    return std::nullopt;
  };
  auto non_root = [&]() {
    if (cs.contains("securityContext") && cs["securityContext"].contains("runAsNonRoot"))
      return cs["securityContext"]["runAsNonRoot"].get<bool>();
    if (spec.contains("securityContext") && spec["securityContext"].contains("runAsNonRoot"))
      return spec["securityContext"]["runAsNonRoot"].get<bool>();
    return false;
  }();
  *uid = sc_val("runAsUser");
  *gid = sc_val("runAsGroup");
  if (non_root && (!*uid || **uid == 0))
    return FailedPreconditionError("container has runAsNonRoot and image will run as root");
  if (!*uid || **uid == 0) {  // root's home, unless the pod sets HOME itself
    bool pod_home = false;
    for (const auto& e : cs.value("env", json::array()))
      pod_home = pod_home || e.value("name", "") == "HOME";
    if (!pod_home)
      for (auto& e : env.list)
        if (e.first == "HOME") e.second = "/root";
  }
  return OkStatus();
}

}  // namespace

// Command: `command` replaces the image's entrypoint (the executable), `args` its cmd.
std::vector<std::string> PodRunner::Impl::BuildArgv(const Ctr& c, const ContainerEnv& env) {
  const json& cs = c.spec;
  std::vector<std::string> argv;
  auto cmd = cs.value("command", std::vector<std::string>{});
  auto args = cs.value("args", std::vector<std::string>{});
  if (cmd.empty()) {
    argv.push_back(c.exe);
  } else {
    for (auto& s : cmd) argv.push_back(ExpandVars(s, env.vars));
    // A bare name that is one of the images' executables runs that executable.
    if (argv[0].find('/') == std::string::npos) {
      fs::path cand = fs::path(opts.exec_images) / argv[0];
      if (::access(cand.c_str(), X_OK) == 0) argv[0] = cand.string();
    }
  }
  for (auto& s : args) argv.push_back(ExpandVars(s, env.vars));
  return argv;
}

StatusOr<json> PodRunner::Impl::StartMessage(Pod& p, Ctr& c, std::string* reason) {
  const json& spec = p.pod["spec"];
  const json& cs = c.spec;
  *reason = "CreateContainerConfigError";
  ContainerEnv env;
  GG_RETURN_IF_ERROR(BuildEnv(p, cs, env));
  json mounts = json::array();
  InjectNvmlLibrary(p, env, mounts);
  bool automount = spec.value("automountServiceAccountToken", true);
  if (automount) mounts.push_back({{"src", p.sa_dir}, {"dst", kSaMount}, {"ro", true}});
  GG_RETURN_IF_ERROR(MountVolumes(p, spec, cs, mounts, reason));
  std::optional<long> uid, gid;
  GG_RETURN_IF_ERROR(ResolveIdentity(spec, cs, env, &uid, &gid));
  std::vector<std::string> argv = BuildArgv(c, env);
  std::vector<std::string> envs;
  for (const auto& [k, v] : env.list) envs.push_back(k + "=" + v);
  json m = {
      {"op", "start"},
      {"name", c.name},
      {"argv", argv},
      {"env", envs},
      {"cwd", cs.value("workingDir", "")},
      {"uid", uid ? *uid : -1L},
      {"gid", gid ? *gid : (uid ? 0L : -1L)},
      {"mounts", mounts},
      {"log", (fs::path(p.log_dir) / c.name / (std::to_string(c.restarts) + ".log")).string()}};
  const json sc = cs.value("securityContext", json::object());
  m["capabilities"] = ContainerCapabilities(sc);
  m["read_only_root"] = sc.value("readOnlyRootFilesystem", false);
  m["no_new_privs"] = sc.contains("allowPrivilegeEscalation") &&
                      !sc["allowPrivilegeEscalation"].get<bool>() && !sc.value("privileged", false);
  return m;
}

void PodRunner::Impl::StartContainer(Pod& p, Ctr& c) {
  c.start_at.reset();
  std::string reason;
  auto m = StartMessage(p, c, &reason);
  if (!m.ok()) {
    c.state = {{"waiting", {{"reason", reason}, {"message", m.status().message()}}}};
    if (reason == "CreateContainerConfigError")
      Event(p, &c, "Warning", "Failed", "Error: " + std::string(m.status().message()));
    c.start_at = Steady::now() + std::chrono::seconds(2);  // the kubelet retries config errors
    p.dirty = true;
    return;
  }
  std::error_code ec;
  fs::create_directories(fs::path(p.log_dir) / c.name, ec);
  // A fresh log file per instance (restartCount.log), as the kubelet keeps them.
  fs::remove(fs::path((*m)["log"].get<std::string>()), ec);
  Event(p, &c, "Normal", "Pulled",
        "Container image \"" + c.image + "\" already present on machine (" + c.exe + ")");
  Event(p, &c, "Normal", "Created", "Created container " + c.name);
  SendCtl(p, *m);
  Event(p, &c, "Normal", "Started", "Started container " + c.name);
  c.running = true;  // confirmed by "started"; an exit event follows on failure
  c.started_ok = !c.startup.has_value();
  c.ready = !c.readiness.has_value() && c.started_ok;
  c.started_at = Rfc3339Now();
  c.run_since = Steady::now();
  c.state = {{"running", {{"startedAt", c.started_at}}}};
  auto first = [&](std::optional<Probe>& pr) {
    if (!pr) return;
    pr->successes = pr->failures = 0;
    pr->next = Steady::now() + std::chrono::seconds(pr->spec.value("initialDelaySeconds", 0));
  };
  first(c.liveness);
  first(c.readiness);
  first(c.startup);
  p.dirty = true;
}

void PodRunner::Impl::OnMessage(Pod& p, const json& m) {
  std::string ev = m.value("ev", "");
  if (ev == "exec") {
    long id = m.value("id", 0L);
    if (auto h = prestop.find(id); h != prestop.end()) {  // the preStop hook is over: SIGTERM
      std::string ctr = h->second.second;
      prestop.erase(h);
      for (auto& c : p.ctrs)
        if (c.name == ctr && c.running)
          SendCtl(p, {{"op", "signal"}, {"name", c.name}, {"sig", SIGTERM}});
      return;
    }
    exec_results[id] = m.value("code", -1);
    exec_cv.notify_all();
    return;
  }
  std::string name = m.value("name", "");
  for (auto& c : p.ctrs) {
    if (c.name != name) continue;
    if (ev == "exit") OnExit(p, c, m.value("code", 0), m.value("signal", 0));
    if (ev == "start_failed") OnExit(p, c, 128, 0);
  }
}

void PodRunner::Impl::OnExit(Pod& p, Ctr& c, int code, int sig) {
  if (!c.running) return;
  c.running = false;
  c.ready = false;
  c.kill_at.reset();
  std::string finished = Rfc3339Now();
  json term = {{"exitCode", code},
               {"reason", code == 0 ? "Completed" : "Error"},
               {"startedAt", c.started_at},
               {"finishedAt", finished},
               {"containerID", "sim://" + p.uid + "/" + c.name + "/" + std::to_string(c.restarts)}};
  if (sig != 0) term["signal"] = sig;
  std::string policy = p.pod["spec"].value("restartPolicy", "Always");
  bool restart = !p.terminating && (policy == "Always" || (policy == "OnFailure" && code != 0));
  if (c.init) restart = !p.terminating && code != 0 && policy != "Never";  // inits run to success
  if (!restart) {
    c.state = {{"terminated", term}};
    c.done = true;
    p.dirty = true;
    if (c.init && code == 0 && !p.terminating) {
      StartNext(p);
    } else if (c.init) {  // a failed init container with restartPolicy Never fails the pod
      for (auto& o : p.ctrs)
        if (!o.done && !o.running) {
          o.done = true;
          o.start_at.reset();
        }
    }
    return;
  }
  c.last_state = {{"terminated", term}};
  // Back-off: none for the first restart, then 10 s doubling to 5 min (scaled); a container
  // that ran 10 minutes starts over.
  auto ran = Steady::now() - c.run_since;
  int n = ran > std::chrono::minutes(10) ? 0 : c.restarts;
  double backoff = n == 0 ? 0 : std::min(300.0, 10.0 * std::pow(2.0, n - 1));
  c.restarts += 1;
  c.start_at = Steady::now() + Scaled(backoff);
  if (backoff > 0)
    Event(p, &c, "Warning", "BackOff",
          "Back-off restarting failed container " + c.name + " in pod " + p.name + "_" + p.ns +
              "(" + p.uid + ")");
  if (backoff > 0)
    c.state = {{"waiting",
                {{"reason", "CrashLoopBackOff"},
                 {"message", "back-off " + std::to_string(static_cast<int>(backoff)) +
                                 "s restarting failed container=" + c.name + " pod=" + p.name +
                                 "_" + p.ns + "(" + p.uid + ")"}}}};
  else
    c.state = {{"waiting", {{"reason", "ContainerCreating"}}}};
  p.dirty = true;
}

void PodRunner::Impl::Timers(Pod& p, Steady::time_point now) {
  if (!p.sandbox_ready && !p.terminating && p.init_pid < 0 && now >= p.retry_at) {
    StartSandbox(p);
    return;
  }
  if (p.terminating) {
    bool any = false;
    for (auto& c : p.ctrs)
      if (c.running && !c.exe.empty()) any = true;
    if (any && !p.kill_sent && now >= p.grace_deadline) {
      for (auto& c : p.ctrs)
        if (c.running && !c.exe.empty())
          SendCtl(p, {{"op", "signal"}, {"name", c.name}, {"sig", SIGKILL}});
      p.kill_sent = true;
    }
    if (!any || p.ctl < 0 || (p.kill_sent && now >= p.grace_deadline + std::chrono::seconds(5))) {
      KillSandbox(p);
      Finish(p);
      Target t{core.registry().Find("", "v1", "pods"), p.ns, p.name, ""};
      core.FinishTermination(t, p.uid);
    }
    return;
  }
  for (auto& c : p.ctrs) {
    if (c.start_at && now >= *c.start_at && p.sandbox_ready) StartContainer(p, c);
    if (c.kill_at && now >= *c.kill_at && c.running) {
      SendCtl(p, {{"op", "signal"}, {"name", c.name}, {"sig", SIGKILL}});
      c.kill_at.reset();
    }
  }
}

void PodRunner::Impl::KillSandbox(Pod& p) {
  if (p.ctl >= 0) {
    ::close(p.ctl);
    p.ctl = -1;
  }
  if (p.init_pid > 0) {
    ::kill(p.init_pid, SIGKILL);
    ::waitpid(p.init_pid, nullptr, 0);
    p.init_pid = -1;
  }
  p.sandbox_ready = false;
  for (auto& c : p.ctrs) c.running = false;
}

void PodRunner::Impl::Finish(Pod& p) {
  p.finished = true;
  if (!p.token.empty() && opts.remove_token) opts.remove_token(p.token);
  std::error_code ec;
  fs::remove_all(fs::path(p.node_dir) / "var/lib/kubelet/pods" / p.uid, ec);
  fs::remove_all(p.log_dir, ec);
}

void PodRunner::Impl::Event(const Pod& p, const Ctr* c, const std::string& type,
                            const std::string& reason, const std::string& message) {
  auto ri = core.registry().Find("", "v1", "events");
  if (!ri) return;
  static std::atomic<uint64_t> seq{0};
  char suffix[24];
  std::snprintf(
      suffix, sizeof(suffix), ".%016llx",
      static_cast<unsigned long long>(Fnv1a(p.uid + reason) ^ (++seq * 0x9e3779b97f4a7c15ULL)));
  std::string now = core.NowRfc3339();
  json involved = {
      {"apiVersion", "v1"}, {"kind", "Pod"}, {"namespace", p.ns}, {"name", p.name}, {"uid", p.uid}};
  if (c) involved["fieldPath"] = "spec.containers{" + c->name + "}";
  json ev = {{"apiVersion", "v1"},
             {"kind", "Event"},
             {"metadata", {{"name", p.name + suffix}, {"namespace", p.ns}}},
             {"involvedObject", involved},
             {"reason", reason},
             {"message", message},
             {"type", type},
             {"source", {{"component", "kubelet"}, {"host", p.node}}},
             {"reportingComponent", "kubelet"},
             {"reportingInstance", p.node},
             {"firstTimestamp", now},
             {"lastTimestamp", now},
             {"count", 1}};
  core.Create(Target{ri, p.ns, "", ""}, std::move(ev), WriteOpts{});
}

json PodRunner::Impl::ContainerStatus(const Pod& p, const Ctr& c) const {
  json s = {{"name", c.name},
            {"image", c.image},
            {"imageID", ""},
            {"ready", c.ready},
            {"started", c.running && c.started_ok},
            {"restartCount", c.restarts},
            {"state", c.state},
            {"lastState", c.last_state}};
  if (c.running || c.state.contains("terminated"))
    s["containerID"] = "sim://" + p.uid + "/" + c.name + "/" + std::to_string(c.restarts);
  return s;
}

void PodRunner::Impl::WriteStatus(Pod& p) {
  p.dirty = false;
  bool all_ready = true, any_running = false, all_done = true, any_failed = false;
  json cstat = json::array(), istat = json::array();
  for (const auto& c : p.ctrs) {
    if (c.init) {
      istat.push_back(ContainerStatus(p, c));
      if (c.done && c.state.contains("terminated") &&
          c.state["terminated"].value("exitCode", 0) != 0)
        any_failed = true;
      continue;
    }
    all_ready = all_ready && c.ready;
    any_running = any_running || c.running;
    all_done = all_done && c.done;
    if (c.done && c.state.contains("terminated") && c.state["terminated"].value("exitCode", 0) != 0)
      any_failed = true;
    cstat.push_back(ContainerStatus(p, c));
  }
  if (p.terminating || !p.initialized) all_ready = false;
  std::string phase = "Pending";
  if (p.initialized && (p.sandbox_ready || any_running)) phase = "Running";
  if (all_done) phase = any_failed ? "Failed" : "Succeeded";
  std::string now = Rfc3339Now();
  auto cond = [&](const char* type, bool v) {
    if (!p.cond_val.count(type) || p.cond_val[type] != v) {
      p.cond_val[type] = v;
      p.cond_since[type] = now;
    }
    json c = {{"type", type},
              {"status", v ? "True" : "False"},
              {"lastProbeTime", nullptr},
              {"lastTransitionTime", p.cond_since[type]}};
    if (!v && (std::string(type) == "Ready" || std::string(type) == "ContainersReady")) {
      std::string names;
      for (const auto& x : p.ctrs)
        if (!x.init && !x.ready) names += (names.empty() ? "" : " ") + x.name;
      c["reason"] = "ContainersNotReady";
      c["message"] = "containers with unready status: [" + names + "]";
    }
    return c;
  };
  json conds = json::array({cond("PodReadyToStartContainers", p.sandbox_ready),
                            cond("Initialized", p.initialized), cond("Ready", all_ready),
                            cond("ContainersReady", all_ready), cond("PodScheduled", true)});
  json status = {{"phase", phase},
                 {"hostIP", p.host_ip},
                 {"hostIPs", json::array({{{"ip", p.host_ip}}})},
                 {"startTime", p.start_time},
                 {"conditions", conds},
                 {"containerStatuses", cstat}};
  if (!istat.empty()) status["initContainerStatuses"] = istat;
  if (!p.pod_ip.empty()) {
    status["podIP"] = p.pod_ip;
    status["podIPs"] = json::array({{{"ip", p.pod_ip}}});
  }
  if (!p.create_error.empty()) {
    for (auto& cs : status["containerStatuses"])
      cs["state"] = {{"waiting", {{"reason", "ContainerCreating"}, {"message", p.create_error}}}};
  }
  Target t{core.registry().Find("", "v1", "pods"), p.ns, p.name, "status"};
  auto r = core.Patch(t, "application/merge-patch+json", json{{"status", status}}, WriteOpts{});
  if (!r.ok() && r.err->code != 404) p.dirty = true;  // conflict or transient: try again
}

// ---------------------------------------------------------------------------------------
// Probes

namespace {

// The port a probe names: a number, or the name of one of the container's ports.
int ProbePort(const json& port, const json& cspec) {
  if (port.is_number()) return port.get<int>();
  std::string name = port.is_string() ? port.get<std::string>() : "";
  for (const auto& cp : cspec.value("ports", json::array()))
    if (cp.value("name", "") == name) return cp.value("containerPort", 0);
  return std::atoi(name.c_str());
}

bool HttpGetProbe(const ProbeJob& j, int timeout_s) {
  const json& h = j.spec["httpGet"];
  std::string host = h.value("host", j.ip);
  int port = ProbePort(h.value("port", json(80)), j.cspec);
  std::string path = h.value("path", "/");
  httplib::Headers hdrs;
  for (const auto& x : h.value("httpHeaders", json::array()))
    hdrs.emplace(x.value("name", ""), x.value("value", ""));
  if (h.value("scheme", "HTTP") == "HTTPS") {
    httplib::SSLClient cli(host, port);
    cli.enable_server_certificate_verification(false);
    cli.set_connection_timeout(timeout_s, 0);
    cli.set_read_timeout(timeout_s, 0);
    auto res = cli.Get(path.c_str(), hdrs);
    return res && res->status >= 200 && res->status < 400;
  }
  httplib::Client cli(host, port);
  cli.set_connection_timeout(timeout_s, 0);
  cli.set_read_timeout(timeout_s, 0);
  auto res = cli.Get(path.c_str(), hdrs);
  return res && res->status >= 200 && res->status < 400;
}

bool TcpSocketProbe(const ProbeJob& j, int timeout_s) {
  bool ok = false;
  int port = ProbePort(j.spec["tcpSocket"].value("port", json(0)), j.cspec);
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, j.spec["tcpSocket"].value("host", j.ip).c_str(), &a.sin_addr);
  int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  if (rc == 0) {
    ok = true;
  } else if (errno == EINPROGRESS) {
    pollfd pf{fd, POLLOUT, 0};
    if (::poll(&pf, 1, timeout_s * 1000) == 1) {
      int err = 0;
      socklen_t len = sizeof(err);
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      ok = err == 0;
    }
  }
  ::close(fd);
  return ok;
}

}  // namespace

// The probes whose period is up, each marked busy until its result is recorded.
std::vector<ProbeJob> PodRunner::Impl::DueProbes() {
  std::vector<ProbeJob> jobs;
  std::scoped_lock lock(mu);
  auto now = Steady::now();
  for (auto& [uid, p] : pods) {
    if (p.terminating || !p.sandbox_ready) continue;
    for (auto& c : p.ctrs) {
      if (!c.running || c.exe.empty()) continue;
      // Until the startup probe succeeds it is the only one that runs.
      for (int kind : {0, 1, 2}) {
        if ((kind == 2) == c.started_ok) continue;
        auto& pr = kind == 0 ? c.liveness : kind == 1 ? c.readiness : c.startup;
        if (!pr || pr->busy || now < pr->next) continue;
        pr->busy = true;
        jobs.push_back({uid, c.name, p.pod_ip, kind, pr->spec, c.spec, p.ctl, {}});
      }
    }
  }
  return jobs;
}

// An exec probe: the pod's init runs the command in the container and reports its exit code.
bool PodRunner::Impl::ExecProbe(const ProbeJob& j, int timeout_s) {
  long id;
  {
    std::scoped_lock lock(mu);
    id = next_exec_id++;
  }
  json m = {{"op", "exec"},
            {"id", id},
            {"name", j.ctr},
            {"argv", j.spec["exec"].value("command", std::vector<std::string>{})},
            {"env",
             std::vector<std::string>{
                 "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}},
            {"timeout_ms", timeout_s * 1000}};
  std::string s = m.dump();
  (void)::send(j.ctl, s.data(), s.size(), MSG_NOSIGNAL);
  std::unique_lock lock(mu);
  exec_cv.wait_for(lock, std::chrono::seconds(timeout_s + 2),
                   [&] { return stop || exec_results.count(id) > 0; });
  bool ok = exec_results.count(id) && exec_results[id] == 0;
  exec_results.erase(id);
  return ok;
}

bool PodRunner::Impl::RunProbe(const ProbeJob& j) {
  int timeout_s = std::max(1, j.spec.value("timeoutSeconds", 1));
  if (j.spec.contains("httpGet")) return HttpGetProbe(j, timeout_s);
  if (j.spec.contains("tcpSocket")) return TcpSocketProbe(j, timeout_s);
  if (j.spec.contains("exec")) return ExecProbe(j, timeout_s);
  return false;
}

// Counts a probe's result against its thresholds: readiness flips Ready, a failed liveness
// or startup probe kills the container (it restarts), a passed startup probe starts the rest.
void PodRunner::Impl::RecordProbeResult(const ProbeJob& j, bool ok) {
  std::scoped_lock lock(mu);
  auto it = pods.find(j.uid);
  if (it == pods.end()) return;
  Pod& p = it->second;
  for (auto& c : p.ctrs) {
    if (c.name != j.ctr) continue;
    auto& pr = j.kind == 0 ? c.liveness : j.kind == 1 ? c.readiness : c.startup;
    const bool restarts_on_failure = j.kind != 1;  // liveness and startup
    const char* what = j.kind == 0 ? "Liveness" : j.kind == 1 ? "Readiness" : "Startup";
    if (!pr) continue;
    pr->busy = false;
    pr->next =
        Steady::now() + std::chrono::seconds(std::max(1, pr->spec.value("periodSeconds", 10)));
    if (!c.running) continue;
    if (ok) {
      pr->failures = 0;
      ++pr->successes;
      if (j.kind == 1 && pr->successes >= std::max(1, pr->spec.value("successThreshold", 1)) &&
          !c.ready) {
        c.ready = true;
        p.dirty = true;
      }
      if (j.kind == 2 && !c.started_ok) {  // started: the other probes begin now
        c.started_ok = true;
        c.ready = !c.readiness.has_value();
        for (auto* other : {&c.liveness, &c.readiness})
          if (*other)
            (*other)->next = Steady::now() +
                             std::chrono::seconds((*other)->spec.value("initialDelaySeconds", 0));
        p.dirty = true;
      }
    } else {
      pr->successes = 0;
      ++pr->failures;
      Event(p, &c, "Warning", "Unhealthy", std::string(what) + " probe failed");
      if (pr->failures >= std::max(1, pr->spec.value("failureThreshold", 3))) {
        if (j.kind == 1 && c.ready) {
          c.ready = false;
          p.dirty = true;
        }
        if (restarts_on_failure && !c.kill_at) {
          // Liveness/startup failed: stop the container (SIGTERM, grace, SIGKILL); it restarts.
          Event(p, &c, "Normal", "Killing",
                "Container " + c.name + " failed " + (j.kind == 0 ? "liveness" : "startup") +
                    " probe, will be restarted");
          SendCtl(p, {{"op", "signal"}, {"name", c.name}, {"sig", SIGTERM}});
          long grace = p.pod["spec"].value("terminationGracePeriodSeconds", 30L);
          c.kill_at = Steady::now() + Scaled(static_cast<double>(grace));
          pr->failures = 0;
        }
      }
    }
  }
}

void PodRunner::Impl::ProbeLoop() {
  while (!stop) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    for (auto& j : DueProbes()) RecordProbeResult(j, RunProbe(j));
  }
}

}  // namespace gg::sim
