// ApiProxy: byte pump with a small HTTP/1.1 framing parser on each direction (header, then a
// Content-Length or chunked body) — enough to log each request with its answer's status.
#include "fault/api_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <deque>
#include <functional>

namespace gg::fault {

struct ApiProxy::Stream {
  enum State { kHead, kBody, kChunkSize, kChunkData, kTrailer, kUntilClose } state = kHead;
  std::string buf;
  std::size_t remaining = 0;
};

namespace {

using Stream = ApiProxy::Stream;

struct Head {
  std::string first_line;
  std::string lower;  // the whole header, lower-cased, for header look-ups
};

Head SplitHead(const std::string& raw) {
  Head h;
  h.first_line = raw.substr(0, raw.find("\r\n"));
  h.lower = raw;
  std::transform(h.lower.begin(), h.lower.end(), h.lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return h;
}

// Value of a header (lower-cased), "" when absent.
std::string HeaderValue(const Head& h, const std::string& name) {
  auto pos = h.lower.find("\r\n" + name + ":");
  if (pos == std::string::npos) return "";
  pos += name.size() + 3;
  auto end = h.lower.find("\r\n", pos);
  std::string v = h.lower.substr(pos, end - pos);
  v.erase(0, v.find_first_not_of(' '));
  while (!v.empty() && v.back() == ' ') v.pop_back();
  return v;
}

// Sets the body state after a header: chunked, a Content-Length, or `fallback`.
void BodyState(Stream& s, const Head& h, Stream::State fallback) {
  if (HeaderValue(h, "transfer-encoding").find("chunked") != std::string::npos) {
    s.state = Stream::kChunkSize;
    return;
  }
  std::string len = HeaderValue(h, "content-length");
  if (!len.empty()) {
    s.remaining = std::strtoull(len.c_str(), nullptr, 10);
    s.state = s.remaining > 0 ? Stream::kBody : Stream::kHead;
    return;
  }
  s.state = fallback;
}

// Advances the framing over `data`; calls on_head with each complete header block.
void Feed(Stream& s, const char* data, std::size_t n,
          const std::function<void(const std::string&)>& on_head) {
  std::size_t i = 0;
  while (i < n) {
    switch (s.state) {
      case Stream::kHead:
        s.buf.push_back(data[i++]);
        if (s.buf.size() >= 4 && s.buf.compare(s.buf.size() - 4, 4, "\r\n\r\n") == 0) {
          std::string head = std::move(s.buf);
          s.buf.clear();
          on_head(head);
        }
        break;
      case Stream::kBody:
      case Stream::kChunkData: {
        std::size_t take = std::min(s.remaining, n - i);
        i += take;
        s.remaining -= take;
        if (s.remaining == 0)
          s.state = s.state == Stream::kBody ? Stream::kHead : Stream::kChunkSize;
        break;
      }
      case Stream::kChunkSize:
        s.buf.push_back(data[i++]);
        if (s.buf.size() >= 2 && s.buf.compare(s.buf.size() - 2, 2, "\r\n") == 0) {
          std::size_t size = std::strtoull(s.buf.c_str(), nullptr, 16);
          s.buf.clear();
          if (size == 0) {
            s.state = Stream::kTrailer;
          } else {
            s.remaining = size + 2;  // data + CRLF
            s.state = Stream::kChunkData;
          }
        }
        break;
      case Stream::kTrailer:
        s.buf.push_back(data[i++]);
        if (s.buf.size() >= 2 && s.buf.compare(s.buf.size() - 2, 2, "\r\n") == 0) {
          bool end = s.buf == "\r\n";
          s.buf.clear();
          if (end) s.state = Stream::kHead;
        }
        break;
      case Stream::kUntilClose:
        i = n;
        break;
    }
  }
}

bool WriteAll(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) return false;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

}  // namespace

std::unique_ptr<ApiProxy> ApiProxy::Start(int upstream_port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return nullptr;
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 128) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    return nullptr;
  }
  std::unique_ptr<ApiProxy> p(new ApiProxy(fd, ntohs(addr.sin_port), upstream_port));
  p->acceptor_ = std::thread([raw = p.get()] { raw->AcceptLoop(); });
  return p;
}

ApiProxy::ApiProxy(int listen_fd, int port, int upstream_port)
    : listen_fd_(listen_fd), port_(port), upstream_port_(upstream_port) {}

ApiProxy::~ApiProxy() {
  stopping_.store(true);
  if (acceptor_.joinable()) acceptor_.join();
  {
    std::scoped_lock lock(mu_);
    for (auto& [id, fds] : conns_) {
      ::shutdown(fds.first, SHUT_RDWR);
      ::shutdown(fds.second, SHUT_RDWR);
    }
  }
  for (auto& t : threads_) t.join();
  ::close(listen_fd_);
}

void ApiProxy::Partition(bool on) {
  partitioned_.store(on);
  if (!on) return;
  std::scoped_lock lock(mu_);
  for (auto& [id, fds] : conns_) {
    ::shutdown(fds.first, SHUT_RDWR);
    ::shutdown(fds.second, SHUT_RDWR);
  }
}

std::vector<ProxiedRequest> ApiProxy::Requests() const {
  std::scoped_lock lock(mu_);
  return log_;
}

void ApiProxy::AcceptLoop() {
  while (!stopping_.load()) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    int c = ::accept(listen_fd_, nullptr, nullptr);
    if (c < 0) continue;
    if (partitioned_.load()) {
      ::close(c);
      refused_.fetch_add(1);
      continue;
    }
    int one = 1;
    ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::scoped_lock lock(mu_);
    int id = next_id_++;
    threads_.emplace_back([this, id, c] { Serve(id, c); });
  }
}

void ApiProxy::Serve(int id, int cfd) {
  int ufd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(upstream_port_));
  if (ufd < 0 || ::connect(ufd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (ufd >= 0) ::close(ufd);
    ::close(cfd);
    return;
  }
  int one = 1;
  ::setsockopt(ufd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  {
    std::scoped_lock lock(mu_);
    conns_[id] = {cfd, ufd};
    if (partitioned_.load()) {
      ::shutdown(cfd, SHUT_RDWR);
      ::shutdown(ufd, SHUT_RDWR);
    }
  }
  Stream req, resp;
  std::deque<std::size_t> pending;  // log_ indices awaiting their response
  auto on_request = [&](const std::string& raw) {
    Head h = SplitHead(raw);
    ProxiedRequest r;
    auto sp1 = h.first_line.find(' ');
    auto sp2 = h.first_line.find(' ', sp1 + 1);
    r.method = h.first_line.substr(0, sp1);
    r.path = h.first_line.substr(sp1 + 1, sp2 - sp1 - 1);
    r.sent = std::chrono::steady_clock::now();
    BodyState(req, h, Stream::kHead);
    std::scoped_lock lock(mu_);
    pending.push_back(log_.size());
    log_.push_back(std::move(r));
  };
  auto on_response = [&](const std::string& raw) {
    Head h = SplitHead(raw);
    int status = 0;
    if (auto sp = h.first_line.find(' '); sp != std::string::npos)
      status = std::atoi(h.first_line.c_str() + sp + 1);
    if (status >= 100 && status < 200) return;  // interim answer, the real one follows
    BodyState(resp, h, status == 204 || status == 304 ? Stream::kHead : Stream::kUntilClose);
    std::scoped_lock lock(mu_);
    if (!pending.empty()) {
      log_[pending.front()].status = status;
      pending.pop_front();
    }
  };
  char buf[16384];
  while (!stopping_.load()) {
    pollfd p[2] = {{cfd, POLLIN, 0}, {ufd, POLLIN, 0}};
    int r = ::poll(p, 2, 200);
    if (r < 0) break;
    if (r == 0) continue;
    bool closed = false;
    for (int k = 0; k < 2 && !closed; ++k) {
      if (!(p[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = ::recv(p[k].fd, buf, sizeof(buf), 0);
      if (n <= 0) {
        closed = true;
        break;
      }
      if (k == 0) {
        Feed(req, buf, static_cast<std::size_t>(n), on_request);
        if (!WriteAll(ufd, buf, static_cast<std::size_t>(n))) closed = true;
      } else {
        Feed(resp, buf, static_cast<std::size_t>(n), on_response);
        if (!WriteAll(cfd, buf, static_cast<std::size_t>(n))) closed = true;
      }
    }
    if (closed) break;
  }
  std::scoped_lock lock(mu_);
  conns_.erase(id);
  ::shutdown(cfd, SHUT_RDWR);
  ::shutdown(ufd, SHUT_RDWR);
  ::close(cfd);
  ::close(ufd);
}

}  // namespace gg::fault
