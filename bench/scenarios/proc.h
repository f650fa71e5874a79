// Child processes for the runners that measure a real binary (operator, agent): spawn from
// build/bin next to build/bench, read another process's RSS / CPU / bytes read from /proc,
// plain HTTP GETs (sim and operator /metrics), Prometheus text lookups, a free loopback port.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bench/scenarios/bench_util.h"

namespace gg::bench {

// build/bin of the build this runner belongs to (runners live in build/bench).
inline std::string BinDir() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "bin";
  std::string exe(buf, static_cast<std::size_t>(n));
  std::string dir = exe.substr(0, exe.rfind('/'));
  return dir.substr(0, dir.rfind('/')) + "/bin";
}

// Forks and execs argv[0] with stdout+stderr appended to `log_path`. Returns the pid (<= 0 on
// failure). The child dies with the runner (PR_SET_PDEATHSIG is not portable enough here; the
// runner kills its children on every exit path instead).
inline pid_t Spawn(const std::vector<std::string>& argv, const std::string& log_path) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) {
    dup2(fd, 1);
    dup2(fd, 2);
    close(fd);
  }
  std::vector<char*> a;
  for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  execv(a[0], a.data());
  std::fprintf(stderr, "exec %s failed\n", a[0]);
  _exit(127);
}

// SIGTERM, then SIGKILL after `grace_s`. Returns the exit status (or -1).
inline int StopChild(pid_t pid, double grace_s = 20) {
  if (pid <= 0) return -1;
  kill(pid, SIGTERM);
  double end = Now() + grace_s;
  int st = 0;
  while (Now() < end) {
    if (waitpid(pid, &st, WNOHANG) == pid) return st;
    usleep(20000);
  }
  kill(pid, SIGKILL);
  waitpid(pid, &st, 0);
  return st;
}

inline bool Alive(pid_t pid) {
  int st = 0;
  return pid > 0 && waitpid(pid, &st, WNOHANG) == 0;
}

struct ProcSample {
  long rss = 0, hwm = 0;            // bytes
  long rss_anon = 0, rss_file = 0;  // heap/stacks vs mapped files (binary, shared libraries)
  double cpu_s = 0;                 // user + system
  long rchar = 0;                   // bytes returned by read()/recv() (sockets included)
  long wchar = 0;
};

inline ProcSample SampleProc(pid_t pid) {
  ProcSample s;
  std::string base = "/proc/" + std::to_string(pid);
  std::string st = ReadFile((base + "/status").c_str());
  auto field = [&](const char* key) -> long {
    std::string k = std::string(key) + ":";
    auto p = st.find(k);
    return p == std::string::npos ? 0 : std::atol(st.c_str() + p + k.size()) * 1024L;
  };
  s.rss = field("VmRSS");
  s.hwm = field("VmHWM");
  s.rss_anon = field("RssAnon");
  s.rss_file = field("RssFile");
  std::string stat = ReadFile((base + "/stat").c_str());
  // Fields after the ")" of comm: state is field 3, utime 14, stime 15.
  auto rp = stat.rfind(')');
  if (rp != std::string::npos) {
    std::vector<std::string> f;
    std::string cur;
    for (std::size_t i = rp + 2; i < stat.size(); ++i) {
      if (stat[i] == ' ') {
        f.push_back(cur);
        cur.clear();
      } else {
        cur.push_back(stat[i]);
      }
    }
    if (f.size() > 12) {
      double tck = static_cast<double>(sysconf(_SC_CLK_TCK));
      s.cpu_s = (std::atof(f[11].c_str()) + std::atof(f[12].c_str())) / tck;
    }
  }
  std::string io = ReadFile((base + "/io").c_str());
  if (auto p = io.find("rchar:"); p != std::string::npos) s.rchar = std::atol(io.c_str() + p + 6);
  if (auto p = io.find("wchar:"); p != std::string::npos) s.wchar = std::atol(io.c_str() + p + 6);
  return s;
}

inline double ProcThreads(pid_t pid) {
  std::string st = ReadFile(("/proc/" + std::to_string(pid) + "/status").c_str());
  auto p = st.find("Threads:");
  return p == std::string::npos ? 0 : std::atof(st.c_str() + p + 8);
}

inline int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  close(fd);
  return port;
}

// GET http://127.0.0.1:port/path; returns {status, body} (status -1 when unreachable).
inline std::pair<int, std::string> HttpGet(const std::string& base_url, const std::string& path) {
  httplib::Client c(base_url);
  c.set_connection_timeout(2, 0);
  c.set_read_timeout(30, 0);
  auto r = c.Get(path);
  if (!r) return {-1, ""};
  return {r->status, r->body};
}

// Sum of every sample of `metric` whose label set contains all of `labels` (k="v" pairs).
inline double PromSum(const std::string& text, const std::string& metric,
                      const std::vector<std::string>& labels = {}) {
  double sum = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    std::string_view line(text.data() + pos, eol - pos);
    pos = eol + 1;
    if (line.empty() || line[0] == '#') continue;
    if (line.substr(0, metric.size()) != metric) continue;
    char next = line.size() > metric.size() ? line[metric.size()] : '\0';
    if (next != '{' && next != ' ') continue;
    bool ok = true;
    for (const auto& l : labels) ok = ok && line.find(l) != std::string_view::npos;
    if (!ok) continue;
    auto sp = line.rfind(' ');
    sum += std::atof(std::string(line.substr(sp + 1)).c_str());
  }
  return sum;
}

// apiserver_request_total by verb (all resources and codes).
inline std::map<std::string, double> RequestsByVerb(const std::string& text) {
  std::map<std::string, double> out;
  for (const char* v : {"list", "watch", "get", "create", "update", "patch", "delete"}) {
    out[v] = PromSum(text, "apiserver_request_total", {std::string("verb=\"") + v + "\""});
  }
  return out;
}

// A loopback TCP proxy in front of the simulator that counts the bytes each way, so a child
// process's traffic with the API server is measured exactly (its rchar misses recv()).
class CountingProxy {
 public:
  ~CountingProxy() { Stop(); }
  // Listens on 127.0.0.1:0 and forwards every connection to 127.0.0.1:upstream_port.
  bool Start(int upstream_port) {
    up_port_ = upstream_port;
    lfd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(lfd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(lfd_, 128) != 0 ||
        getsockname(lfd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      return false;
    }
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] { AcceptLoop(); });
    return true;
  }
  void Stop() {
    if (lfd_ < 0) return;
    stop_ = true;
    shutdown(lfd_, SHUT_RDWR);
    close(lfd_);
    lfd_ = -1;
    if (acceptor_.joinable()) acceptor_.join();
    std::vector<std::thread> pumps;
    {
      std::scoped_lock l(mu_);
      for (int fd : fds_) shutdown(fd, SHUT_RDWR);
      pumps.swap(pumps_);
    }
    for (auto& t : pumps) t.join();
    std::scoped_lock l(mu_);
    for (int fd : fds_) close(fd);
    fds_.clear();
  }
  int port() const { return port_; }
  long served() const { return down_.load(); }  // upstream → client
  long received() const { return up_.load(); }  // client → upstream

 private:
  static void NoDelay(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  void AcceptLoop() {
    while (!stop_) {
      int c = accept(lfd_, nullptr, nullptr);
      if (c < 0) {
        if (stop_) return;
        continue;
      }
      int u = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(static_cast<uint16_t>(up_port_));
      if (connect(u, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        close(c);
        close(u);
        continue;
      }
      NoDelay(c);
      NoDelay(u);
      std::scoped_lock l(mu_);
      fds_.push_back(c);
      fds_.push_back(u);
      pumps_.emplace_back([this, c, u] { Pump(c, u, &up_); });
      pumps_.emplace_back([this, c, u] { Pump(u, c, &down_); });
    }
  }
  static void Pump(int from, int to, std::atomic<long>* counter) {
    std::vector<char> buf(1 << 16);
    while (true) {
      ssize_t n = read(from, buf.data(), buf.size());
      if (n <= 0) break;
      counter->fetch_add(n, std::memory_order_relaxed);
      for (ssize_t off = 0; off < n;) {
        ssize_t w = write(to, buf.data() + off, static_cast<std::size_t>(n - off));
        if (w <= 0) {
          shutdown(from, SHUT_RDWR);
          return;
        }
        off += w;
      }
    }
    shutdown(to, SHUT_WR);
  }
  int lfd_ = -1, port_ = 0, up_port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<long> down_{0}, up_{0};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<std::thread> pumps_;
  std::vector<int> fds_;
};

// The port of "http://127.0.0.1:PORT".
inline int UrlPort(const std::string& url) {
  auto p = url.rfind(':');
  return p == std::string::npos ? 0 : std::atoi(url.c_str() + p + 1);
}

}  // namespace gg::bench
