// ApiProxy: a loopback TCP proxy in front of the simulator, one per process under test. It
// reads the plain HTTP/1.1 requests and responses passing through, so a test can tell which
// replica wrote what, when, and what the server answered (the simulator itself does not record
// who wrote). Partition(true) cuts that replica off the network: open connections are reset
// and new ones are closed at once, so all of its requests fail, writes included.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace gg::fault {

struct ProxiedRequest {
  std::string method;  // GET, POST, PUT, PATCH, DELETE
  std::string path;    // path + query
  int status = 0;      // 0: no answer seen (connection cut, watch still open)
  std::chrono::steady_clock::time_point sent;  // when its header passed through
};

class ApiProxy {
 public:
  // Listens on 127.0.0.1:<free port>, forwards to 127.0.0.1:upstream_port. Null on failure.
  static std::unique_ptr<ApiProxy> Start(int upstream_port);
  ~ApiProxy();
  ApiProxy(const ApiProxy&) = delete;
  ApiProxy& operator=(const ApiProxy&) = delete;

  std::string Url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  void Partition(bool on);
  std::vector<ProxiedRequest> Requests() const;
  // Connections refused while partitioned.
  int Refused() const { return refused_.load(); }

  // Parser state of one direction of one connection (internal, public for the .cc helpers).
  struct Stream;

 private:
  explicit ApiProxy(int listen_fd, int port, int upstream_port);
  void AcceptLoop();
  void Serve(int id, int client_fd);

  int listen_fd_ = -1;
  int port_ = 0;
  int upstream_port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> partitioned_{false};
  std::atomic<int> refused_{0};
  mutable std::mutex mu_;
  std::vector<ProxiedRequest> log_;
  std::map<int, std::pair<int, int>> conns_;  // id -> (client fd, upstream fd)
  int next_id_ = 0;
  std::vector<std::thread> threads_;
  std::thread acceptor_;
};

}  // namespace gg::fault
