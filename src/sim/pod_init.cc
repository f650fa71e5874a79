// Pod init: see pod_init.h for the protocol. Single-threaded: one poll loop over the control
// socket, a signalfd for SIGCHLD and the containers' stdout/stderr pipes.
#include "sim/pod_init.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace gg::sim {
namespace {

using nlohmann::json;

void Send(int fd, const json& msg) {
  std::string s = msg.dump();
  (void)::send(fd, s.data(), s.size(), MSG_NOSIGNAL);
}

std::string NowRfc3339Nano() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  tm t{};
  gmtime_r(&ts.tv_sec, &t);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%09ldZ", t.tm_year + 1900,
                t.tm_mon + 1, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec, ts.tv_nsec);
  return buf;
}

// One container output stream being copied into the CRI log file.
struct Stream {
  int fd = -1;
  const char* name = "stdout";
  std::string buf;
};

struct Container {
  std::string name;
  pid_t pid = 0;
  std::vector<std::string> env;  // for exec probes: they run as the container does
  long uid = -1, gid = -1;
  int log_fd = -1;
  Stream out, err;
  bool exited = false;
  int code = 0, sig = 0;
};

struct ExecProbe {
  long id = 0;
  std::chrono::steady_clock::time_point deadline;
};

class Init {
 public:
  explicit Init(int ctl) : ctl_(ctl) {}
  int Run();

 private:
  void Handle(const json& m);
  void Setup(const json& m);
  void Start(const json& m);
  void Exec(const json& m);
  void Reap();
  void Pump(Container& c, Stream& s, bool drain);
  void WriteRecord(Container& c, const Stream& s, std::string_view text, bool partial);
  void FinishExit(Container& c);

  int ctl_;
  int sigfd_ = -1;
  std::map<std::string, Container> containers_;
  std::map<pid_t, ExecProbe> execs_;
};

std::string ResolveExecutable(const std::string& file, const std::vector<std::string>& env) {
  if (file.find('/') != std::string::npos) return file;
  std::string path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  for (const auto& e : env)
    if (e.rfind("PATH=", 0) == 0) path = e.substr(5);
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t colon = path.find(':', pos);
    std::string dir =
        path.substr(pos, colon == std::string::npos ? std::string::npos : colon - pos);
    std::string cand = (dir.empty() ? "." : dir) + "/" + file;
    if (::access(cand.c_str(), X_OK) == 0) return cand;
    if (colon == std::string::npos) break;
    pos = colon + 1;
  }
  return file;
}

std::vector<char*> CStrings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// In a forked child: exec `argv` with `env`; never returns.
[[noreturn]] void ExecOrDie(std::vector<std::string> argv, std::vector<std::string> env) {
  if (argv.empty()) {
    std::fprintf(stderr, "pod init: empty command\n");
    _exit(127);
  }
  std::string file = ResolveExecutable(argv[0], env);
  auto a = CStrings(argv);
  auto e = CStrings(env);
  ::execve(file.c_str(), a.data(), e.data());
  std::fprintf(stderr, "exec %s: %s\n", file.c_str(), std::strerror(errno));
  _exit(errno == ENOENT ? 127 : 126);
}

void ResetSignals() {
  sigset_t all;
  sigemptyset(&all);
  sigprocmask(SIG_SETMASK, &all, nullptr);
  for (int s = 1; s < NSIG; ++s) signal(s, SIG_DFL);
}

bool UnderRun(const std::string& p) {
  return p == "/run" || p.rfind("/run/", 0) == 0 || p.rfind("/var/run/", 0) == 0;
}

int Init::Run() {
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  sigprocmask(SIG_BLOCK, &mask, nullptr);
  sigfd_ = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  std::vector<char> buf(1 << 20);
  while (true) {
    std::vector<pollfd> fds;
    fds.push_back({ctl_, POLLIN, 0});
    fds.push_back({sigfd_, POLLIN, 0});
    std::vector<std::pair<Container*, Stream*>> owners;
    for (auto& [n, c] : containers_) {
      for (Stream* s : {&c.out, &c.err}) {
        if (s->fd < 0) continue;
        fds.push_back({s->fd, POLLIN, 0});
        owners.emplace_back(&c, s);
      }
    }
    int r = ::poll(fds.data(), fds.size(), execs_.empty() ? 1000 : 50);
    if (r < 0 && errno != EINTR) return 1;
    for (size_t i = 2; i < fds.size(); ++i)
      if (fds[i].revents) Pump(*owners[i - 2].first, *owners[i - 2].second, false);
    if (fds[1].revents) {
      signalfd_siginfo si;
      while (::read(sigfd_, &si, sizeof(si)) == sizeof(si)) {
      }
      Reap();
    }
    if (fds[0].revents) {
      ssize_t n = ::recv(ctl_, buf.data(), buf.size(), 0);
      if (n <= 0) {
        // The runner is gone: end the pod (pid 1 exiting kills the namespace).
        ::kill(-1, SIGKILL);
        return 0;
      }
      json m = json::parse(std::string_view(buf.data(), static_cast<size_t>(n)), nullptr, false);
      if (m.is_object()) Handle(m);
    }
    auto now = std::chrono::steady_clock::now();
    for (auto it = execs_.begin(); it != execs_.end();) {
      if (now < it->second.deadline) {
        ++it;
        continue;
      }
      ::kill(-it->first, SIGKILL);
      Send(ctl_, {{"ev", "exec"}, {"id", it->second.id}, {"code", -1}});
      it->second.id = -1;  // reaped later, result already sent
      it->second.deadline = std::chrono::steady_clock::time_point::max();
      ++it;
    }
  }
}

void Init::Handle(const json& m) {
  std::string op = m.value("op", "");
  if (op == "setup") {
    Setup(m);
  } else if (op == "start") {
    Start(m);
  } else if (op == "exec") {
    Exec(m);
  } else if (op == "signal") {
    auto it = containers_.find(m.value("name", ""));
    if (it == containers_.end() || it->second.exited || it->second.pid <= 0) return;
    int sig = m.value("sig", SIGTERM);
    if (sig == SIGKILL)
      ::kill(-it->second.pid, SIGKILL);
    else
      ::kill(it->second.pid, sig);
  }
}

void Init::Setup(const json& m) {
  auto fail = [&](const std::string& what) {
    Send(ctl_, {{"ev", "error"}, {"message", what + ": " + std::strerror(errno)}});
  };
  std::string host = m.value("hostname", "");
  if (!host.empty() && ::sethostname(host.data(), host.size()) != 0) return fail("sethostname");
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    return fail("make / private");
  if (::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
    return fail("mount /proc");
  if (::mount("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=755") != 0)
    return fail("mount /run");
  Send(ctl_, {{"ev", "ready"}});
}

// In the container's child, before exec: its own mount namespace with the pod's bind mounts
// (and, if asked, a read-only root). Exits 128 with the reason on stderr on failure.
void MountContainerFilesystem(const json& mounts, bool ro_root) {
  if (::unshare(CLONE_NEWNS) != 0) {
    std::fprintf(stderr, "container mount namespace: %s\n", std::strerror(errno));
    _exit(128);
  }
  for (const auto& mt : mounts) {
    std::string src = mt.value("src", ""), dst = mt.value("dst", "");
    struct stat st {};
    if (::stat(src.c_str(), &st) != 0) {
      std::fprintf(stderr, "mount %s: source %s: %s\n", dst.c_str(), src.c_str(),
                   std::strerror(errno));
      _exit(128);
    }
    struct stat dt {};
    if (::lstat(dst.c_str(), &dt) != 0) {
      std::error_code ec;
      // Targets are only created inside the pod's own /run; elsewhere they would appear
      // on the host's filesystem.
      if (!UnderRun(dst)) {
        std::fprintf(stderr, "mount %s: target does not exist in the node's filesystem\n",
                     dst.c_str());
        _exit(128);
      }
      if (S_ISDIR(st.st_mode)) {
        std::filesystem::create_directories(dst, ec);
      } else {
        std::filesystem::create_directories(std::filesystem::path(dst).parent_path(), ec);
        int fd = ::open(dst.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd >= 0) ::close(fd);
      }
    }
    if (::mount(src.c_str(), dst.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
      std::fprintf(stderr, "mount %s on %s: %s\n", src.c_str(), dst.c_str(), std::strerror(errno));
      _exit(128);
    }
    if (mt.value("ro", false) &&
        ::mount(nullptr, dst.c_str(), nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY, nullptr) != 0) {
      std::fprintf(stderr, "read-only %s: %s\n", dst.c_str(), std::strerror(errno));
      _exit(128);
    }
  }
  if (ro_root && ::mount(nullptr, "/", nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY, nullptr) != 0) {
    std::fprintf(stderr, "read-only root filesystem: %s\n", std::strerror(errno));
    _exit(128);
  }
}

// In the container's child, before exec: the capability bounding set, no_new_privs, then the
// group and the user. Exits 128 with the reason on stderr on failure.
void DropPrivileges(const json& caps, bool no_new_privs, long uid, long gid) {
  if (caps.is_array()) {
    // The capability bounding set: what a uid-0 process gets back at exec.
    std::set<int> keep;
    for (const auto& c : caps) keep.insert(c.get<int>());
    for (int cap = 0; cap < 64; ++cap) {
      if (keep.count(cap) || ::prctl(PR_CAPBSET_READ, cap) != 1) continue;
      if (::prctl(PR_CAPBSET_DROP, cap) != 0) {
        std::fprintf(stderr, "dropping capability %d: %s\n", cap, std::strerror(errno));
        _exit(128);
      }
    }
  }
  if (no_new_privs && ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    std::fprintf(stderr, "no_new_privs: %s\n", std::strerror(errno));
    _exit(128);
  }
  if (gid >= 0 && (::setgroups(0, nullptr) != 0 || ::setgid(static_cast<gid_t>(gid)) != 0)) {
    std::fprintf(stderr, "setgid %ld: %s\n", gid, std::strerror(errno));
    _exit(128);
  }
  if (uid >= 0 && ::setuid(static_cast<uid_t>(uid)) != 0) {
    std::fprintf(stderr, "setuid %ld: %s\n", uid, std::strerror(errno));
    _exit(128);
  }
}

void Init::Start(const json& m) {
  std::string name = m.value("name", "");
  Container& c = containers_[name];
  if (c.pid > 0 && !c.exited) return;  // still running
  for (Stream* s : {&c.out, &c.err})
    if (s->fd >= 0) ::close(s->fd), s->fd = -1;
  if (c.log_fd >= 0) ::close(c.log_fd);
  c = Container{};
  c.name = name;
  c.out.name = "stdout";
  c.err.name = "stderr";
  std::string log = m.value("log", "");
  c.log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    Send(ctl_, {{"ev", "start_failed"}, {"name", name}, {"message", std::strerror(errno)}});
    return;
  }
  std::vector<std::string> argv = m.value("argv", std::vector<std::string>{});
  std::vector<std::string> env = m.value("env", std::vector<std::string>{});
  std::string cwd = m.value("cwd", "");
  long uid = m.value("uid", -1L), gid = m.value("gid", -1L);
  json mounts = m.value("mounts", json::array());
  bool ro_root = m.value("read_only_root", false);
  bool no_new_privs = m.value("no_new_privs", false);
  json caps = m.value("capabilities", json());  // null: keep the runner's
  pid_t pid = ::fork();
  if (pid < 0) {
    Send(ctl_, {{"ev", "start_failed"}, {"name", name}, {"message", std::strerror(errno)}});
    return;
  }
  if (pid == 0) {
    ResetSignals();
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::setsid();
    MountContainerFilesystem(mounts, ro_root);
    DropPrivileges(caps, no_new_privs, uid, gid);
    if (::chdir(cwd.empty() ? "/" : cwd.c_str()) != 0) {
      std::fprintf(stderr, "chdir %s: %s\n", cwd.c_str(), std::strerror(errno));
      _exit(128);
    }
    ExecOrDie(std::move(argv), std::move(env));
  }
  ::close(out[1]);
  ::close(err[1]);
  c.out.fd = out[0];
  c.err.fd = err[0];
  ::fcntl(out[0], F_SETFL, O_NONBLOCK);
  ::fcntl(err[0], F_SETFL, O_NONBLOCK);
  c.pid = pid;
  c.env = m.value("env", std::vector<std::string>{});
  c.uid = uid;
  c.gid = gid;
  Send(ctl_, {{"ev", "started"}, {"name", name}, {"pid", pid}});
}

void Init::Exec(const json& m) {
  std::vector<std::string> argv = m.value("argv", std::vector<std::string>{});
  std::vector<std::string> env = m.value("env", std::vector<std::string>{});
  long id = m.value("id", 0L);
  // In the container's mount namespace, with its environment and identity.
  int mnt = -1;
  long uid = -1, gid = -1;
  if (auto it = containers_.find(m.value("name", ""));
      it != containers_.end() && !it->second.exited) {
    mnt = ::open(("/proc/" + std::to_string(it->second.pid) + "/ns/mnt").c_str(),
                 O_RDONLY | O_CLOEXEC);
    env = it->second.env;
    uid = it->second.uid;
    gid = it->second.gid;
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    Send(ctl_, {{"ev", "exec"}, {"id", id}, {"code", 126}});
    return;
  }
  if (pid == 0) {
    ResetSignals();
    ::setsid();
    int devnull = ::open("/dev/null", O_RDWR);
    if (devnull >= 0) {
      ::dup2(devnull, 0);
      ::dup2(devnull, 1);
      ::dup2(devnull, 2);
    }
    if (mnt >= 0 && ::setns(mnt, CLONE_NEWNS) != 0) _exit(126);
    if (gid >= 0 && (::setgroups(0, nullptr) != 0 || ::setgid(static_cast<gid_t>(gid)) != 0))
      _exit(126);
    if (uid >= 0 && ::setuid(static_cast<uid_t>(uid)) != 0) _exit(126);
    if (::chdir("/") != 0) _exit(126);
    ExecOrDie(std::move(argv), std::move(env));
  }
  if (mnt >= 0) ::close(mnt);
  ExecProbe p;
  p.id = id;
  p.deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(m.value("timeout_ms", 1000));
  execs_[pid] = p;
}

void Init::WriteRecord(Container& c, const Stream& s, std::string_view text, bool partial) {
  if (c.log_fd < 0) return;
  std::string rec = NowRfc3339Nano();
  rec += ' ';
  rec += s.name;
  rec += partial ? " P " : " F ";
  rec.append(text);
  rec += '\n';
  (void)!::write(c.log_fd, rec.data(), rec.size());
}

void Init::Pump(Container& c, Stream& s, bool drain) {
  char buf[65536];
  while (s.fd >= 0) {
    ssize_t n = ::read(s.fd, buf, sizeof(buf));
    if (n > 0) {
      s.buf.append(buf, static_cast<size_t>(n));
      size_t nl;
      while ((nl = s.buf.find('\n')) != std::string::npos) {
        WriteRecord(c, s, std::string_view(s.buf).substr(0, nl), false);
        s.buf.erase(0, nl + 1);
      }
      if (s.buf.size() >= 16384) {
        WriteRecord(c, s, s.buf, true);
        s.buf.clear();
      }
      continue;
    }
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
      if (!s.buf.empty()) WriteRecord(c, s, s.buf, false);
      s.buf.clear();
      ::close(s.fd);
      s.fd = -1;
      return;
    }
    if (!drain) return;
    return;
  }
}

void Init::FinishExit(Container& c) {
  // A container ends with its main process: what it left running goes too (a real
  // container's pid namespace would take them down).
  ::kill(-c.pid, SIGKILL);
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  while ((c.out.fd >= 0 || c.err.fd >= 0) && std::chrono::steady_clock::now() < until) {
    Pump(c, c.out, true);
    Pump(c, c.err, true);
    if (c.out.fd >= 0 || c.err.fd >= 0) ::usleep(5000);
  }
  Send(ctl_, {{"ev", "exit"}, {"name", c.name}, {"code", c.code}, {"signal", c.sig}});
}

void Init::Reap() {
  while (true) {
    int st = 0;
    pid_t pid = ::waitpid(-1, &st, WNOHANG);
    if (pid <= 0) return;
    if (auto e = execs_.find(pid); e != execs_.end()) {
      if (e->second.id >= 0) {
        int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        Send(ctl_, {{"ev", "exec"}, {"id", e->second.id}, {"code", code}});
      }
      execs_.erase(e);
      continue;
    }
    for (auto& [n, c] : containers_) {
      if (c.pid != pid || c.exited) continue;
      c.exited = true;
      if (WIFEXITED(st)) {
        c.code = WEXITSTATUS(st);
      } else if (WIFSIGNALED(st)) {
        c.sig = WTERMSIG(st);
        c.code = 128 + c.sig;
      }
      FinishExit(c);
    }
  }
}

}  // namespace

int PodInitMain(int ctl_fd) {
  // Dies with the runner's thread that started it (set again in case exec cleared it).
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  ::fcntl(ctl_fd, F_SETFD, FD_CLOEXEC);
  Init init(ctl_fd);
  return init.Run();
}

}  // namespace gg::sim
