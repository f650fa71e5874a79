// libcurl Transport: pooled easy handles (their connection caches give keep-alive), HTTP/2
// over TLS when offered, verified TLS by default, streams driven through libcurl's socket
// interface by their own poll loop, which a stop request wakes at once.
#include <curl/curl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

#include "common/strings.h"
#include "common/wake_batch.h"
#include "k8s/transport.h"

namespace gg::k8s {
namespace {

constexpr std::size_t kMaxIdleHandles = 16;
// Receive buffer of a streaming (watch) transfer; libcurl allocates it per transfer.
constexpr long kStreamBufferSize = 128 * 1024;

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Transfer {
  HttpResponse* resp = nullptr;
  CURL* easy = nullptr;
  const Transport::ChunkFn* on_chunk = nullptr;  // streaming only
  bool stopped_by_callback = false;
  std::size_t streamed = 0;     // body bytes handed to on_chunk
  bool streaming_body = false;  // decided at the first body byte
  bool decided = false;
};

std::size_t HeaderCb(char* data, std::size_t size, std::size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::size_t len = size * n;
  std::string_view line(data, len);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  if (line.starts_with("HTTP/")) {
    t->resp->headers.clear();  // a new response (after 100-continue or a redirect)
    return len;
  }
  auto colon = line.find(':');
  if (colon == std::string_view::npos) return len;
  std::string name = Lower(line.substr(0, colon));
  std::string_view value = line.substr(colon + 1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  if (name == "content-length" && !t->on_chunk) {
    std::size_t cl = 0;
    auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), cl);
    // Reserve once, with padding for simdjson (bounded against absurd values).
    if (ec == std::errc() && cl < (std::size_t{1} << 31)) t->resp->body.reserve(cl + kBodyPadding);
  }
  t->resp->headers.emplace_back(std::move(name), std::string(value));
  return len;
}

std::size_t WriteCb(char* data, std::size_t size, std::size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::size_t len = size * n;
  if (t->on_chunk) {
    if (!t->decided) {
      long code = 0;
      curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &code);
      t->streaming_body = code >= 200 && code < 300;
      t->decided = true;
    }
    if (t->streaming_body) {
      t->streamed += len;
      if (!(*t->on_chunk)(std::string_view(data, len))) {
        t->stopped_by_callback = true;
        return 0;  // aborts the transfer with CURLE_WRITE_ERROR
      }
      return len;
    }
  }
  std::string& body = t->resp->body;
  if (body.capacity() < body.size() + len + kBodyPadding) {
    body.reserve(std::max(body.capacity() * 2, body.size() + len + kBodyPadding));
  }
  body.append(data, len);
  return len;
}

Status CurlError(CURLcode rc, const char* errbuf, std::string_view what) {
  std::string msg = std::string(what) + ": " + curl_easy_strerror(rc);
  if (errbuf && errbuf[0]) msg += std::string(" (") + errbuf + ")";
  switch (rc) {
    case CURLE_OPERATION_TIMEDOUT:
      return DeadlineExceededError(msg);
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_URL_MALFORMAT:
      return FailedPreconditionError(msg);
    default:
      return UnavailableError(msg);
  }
}

// TLS: verified unless the kubeconfig asked otherwise; CA and client certificate/key from PEM
// data (copied into the handle) or files.
void SetTls(CURL* h, const ClientConfig& cfg) {
  long verify = cfg.insecure_skip_tls_verify ? 0L : 1L;
  curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, verify);
  curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, verify ? 2L : 0L);
  if (!cfg.ca_pem.empty()) {
    curl_blob blob{const_cast<char*>(cfg.ca_pem.data()), cfg.ca_pem.size(), CURL_BLOB_COPY};
    curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &blob);
  } else if (!cfg.ca_file.empty()) {
    curl_easy_setopt(h, CURLOPT_CAINFO, cfg.ca_file.c_str());
  }
  if (!cfg.client_cert_pem.empty()) {
    curl_blob cert{const_cast<char*>(cfg.client_cert_pem.data()), cfg.client_cert_pem.size(),
                   CURL_BLOB_COPY};
    curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &cert);
    curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
  } else if (!cfg.client_cert_file.empty()) {
    curl_easy_setopt(h, CURLOPT_SSLCERT, cfg.client_cert_file.c_str());
  }
  if (!cfg.client_key_pem.empty()) {
    curl_blob key{const_cast<char*>(cfg.client_key_pem.data()), cfg.client_key_pem.size(),
                  CURL_BLOB_COPY};
    curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &key);
    curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
  } else if (!cfg.client_key_file.empty()) {
    curl_easy_setopt(h, CURLOPT_SSLKEY, cfg.client_key_file.c_str());
  }
}

}  // namespace

std::string_view HttpResponse::Header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k.size() == name.size() && std::equal(k.begin(), k.end(), name.begin(), [](char a, char b) {
          return std::tolower(static_cast<unsigned char>(a)) ==
                 std::tolower(static_cast<unsigned char>(b));
        })) {
      return v;
    }
  }
  return {};
}

CurlTransport::CurlTransport(const ClientConfig& config)
    : config_(config), tokens_(config.token, config.token_file) {
  base_ = config.server;
  while (!base_.empty() && base_.back() == '/') base_.pop_back();
  std::string_view rest = base_;
  if (auto p = rest.find("://"); p != std::string_view::npos) rest.remove_prefix(p + 3);
  if (auto p = rest.find('/'); p != std::string_view::npos) rest = rest.substr(0, p);
  host_ = std::string(rest);
  if (config_.user_agent.empty()) config_.user_agent = "gpu-guardian/0.1";
}

StatusOr<std::unique_ptr<CurlTransport>> CurlTransport::Create(const ClientConfig& config) {
  if (config.server.empty()) return InvalidArgumentError("client config: server is empty");
  if (!config.server.starts_with("http://") && !config.server.starts_with("https://")) {
    return InvalidArgumentError("client config: server must start with http:// or https://: " +
                                config.server);
  }
  GlobalInit();
  return std::unique_ptr<CurlTransport>(new CurlTransport(config));
}

CurlTransport::~CurlTransport() {
  std::scoped_lock lock(pool_mu_);
  for (void* h : idle_) curl_easy_cleanup(static_cast<CURL*>(h));
  idle_.clear();
}

void* CurlTransport::AcquireHandle() {
  {
    std::scoped_lock lock(pool_mu_);
    if (!idle_.empty()) {
      void* h = idle_.back();
      idle_.pop_back();
      return h;
    }
  }
  return curl_easy_init();
}

void CurlTransport::ReleaseHandle(void* handle) {
  if (!handle) return;
  std::scoped_lock lock(pool_mu_);
  if (idle_.size() < kMaxIdleHandles) {
    idle_.push_back(handle);
  } else {
    curl_easy_cleanup(static_cast<CURL*>(handle));
  }
}

Status CurlTransport::Setup(void* handle, const HttpRequest& req, void* header_list_out,
                            bool streaming) {
  CURL* h = static_cast<CURL*>(handle);
  curl_easy_reset(h);  // keeps live connections
  std::string url = base_ + req.path;
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_2TLS));
  curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(h, CURLOPT_TCP_KEEPIDLE, 30L);
  curl_easy_setopt(h, CURLOPT_TCP_KEEPINTVL, 15L);
  curl_easy_setopt(h, CURLOPT_USERAGENT, config_.user_agent.c_str());
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
  auto timeout = req.timeout.count() > 0 ? req.timeout : config_.timeout;
  if (!streaming || req.timeout.count() > 0) {
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
  }
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(std::min<long long>(timeout.count(), 10000)));
  if (streaming) {
    // A watch that falls behind reads several events per receive (the default 16 KB buffer
    // holds about one 13 KB Node event): fewer poll/recv rounds and callbacks per event.
    curl_easy_setopt(h, CURLOPT_BUFFERSIZE, kStreamBufferSize);
  }
  if (!streaming) {
    // A server that stalls mid-body for 30 s (or the whole timeout if shorter) is hung.
    long stall =
        static_cast<long>(std::max<long long>(1, std::min<long long>(timeout.count() / 1000, 30)));
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, stall);
  }

  SetTls(h, config_);

  curl_slist* headers = nullptr;
  bool has_accept = false, has_ctype = false;
  for (const auto& [k, v] : req.headers) {
    std::string lk = Lower(k);
    has_accept |= lk == "accept";
    has_ctype |= lk == "content-type";
    headers = curl_slist_append(headers, (k + ": " + v).c_str());
  }
  if (!has_accept) headers = curl_slist_append(headers, "Accept: application/json");
  if (!has_ctype && !req.body.empty()) {
    headers = curl_slist_append(headers, "Content-Type: application/json");
  }
  std::string token = tokens_.Token();
  if (!token.empty())
    headers = curl_slist_append(headers, ("Authorization: Bearer " + token).c_str());
  headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  *static_cast<curl_slist**>(header_list_out) = headers;

  if (req.method == "GET") {
    curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
  } else if (req.method == "HEAD") {
    curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  } else {
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req.method.c_str());
    if (!req.body.empty() || req.method == "POST" || req.method == "PUT" || req.method == "PATCH") {
      curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
      curl_easy_setopt(h, CURLOPT_COPYPOSTFIELDS, req.body.c_str());
    }
  }
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, &HeaderCb);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &WriteCb);
  return OkStatus();
}

StatusOr<HttpResponse> CurlTransport::Do(const HttpRequest& req) {
  CURL* h = static_cast<CURL*>(AcquireHandle());
  if (!h) return InternalError("curl_easy_init failed");
  HttpResponse resp;
  Transfer t{&resp, h, nullptr};
  curl_slist* headers = nullptr;
  Status s = Setup(h, req, &headers, false);
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &t);
  CURLcode rc = s.ok() ? curl_easy_perform(h) : CURLE_OK;
  long code = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, nullptr);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, nullptr);
  curl_slist_free_all(headers);
  if (!s.ok()) {
    ReleaseHandle(h);
    return s;
  }
  if (rc != CURLE_OK) {
    // The connection state is unknown: drop the handle rather than reuse it.
    curl_easy_cleanup(h);
    return CurlError(rc, errbuf, req.method + " " + req.path);
  }
  ReleaseHandle(h);
  resp.status = static_cast<int>(code);
  if (resp.body.capacity() < resp.body.size() + kBodyPadding) {
    resp.body.reserve(resp.body.size() + kBodyPadding);
  }
  return resp;
}

namespace {

// The stream's own event loop on libcurl's socket interface: curl says which sockets to wait
// for (SocketCb) and when to call back for its timers (TimerCb); one poll() waits for them and
// for the stop eventfd. Telling curl which socket is readable spares the poll(fd, 0) that
// curl_multi_perform makes before each receive to find out (one syscall per watch event).
class StreamLoop {
 public:
  // `streamed` counts the body bytes delivered (Transfer::streamed).
  StreamLoop(CURLM* multi, std::chrono::milliseconds coalesce, const std::size_t* streamed)
      : multi_(multi),
        coalesce_(coalesce),
        streamed_(streamed),
        stop_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, &StreamLoop::SocketCb);
    curl_multi_setopt(multi, CURLMOPT_SOCKETDATA, this);
    curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, &StreamLoop::TimerCb);
    curl_multi_setopt(multi, CURLMOPT_TIMERDATA, this);
  }
  ~StreamLoop() {
    if (stop_fd_ >= 0) close(stop_fd_);
  }
  StreamLoop(const StreamLoop&) = delete;
  StreamLoop& operator=(const StreamLoop&) = delete;

  bool ok() const { return stop_fd_ >= 0; }
  // Wakes Run() (any thread; async-signal-safe).
  void Wake() {
    std::uint64_t one = 1;
    ssize_t n = write(stop_fd_, &one, sizeof one);
    (void)n;
  }
  // Drives the transfer until curl has no running transfer or `cancelled` is set.
  Status Run(const std::atomic<bool>& cancelled) {
    int running = 1;
    CURLMcode mc = curl_multi_socket_action(multi_, CURL_SOCKET_TIMEOUT, 0, &running);
    std::vector<pollfd> fds;
    while (mc == CURLM_OK && running && !cancelled.load()) {
      int n = PollAll(fds, PollTimeoutMs());
      if (n < 0 && errno != EINTR)
        return UnavailableError(std::string("poll: ") + std::strerror(errno));
      if (cancelled.load()) break;
      bool acted = false;
      {
        // One read hands curl's write callback each HTTP chunk (a watch event) separately;
        // the batch spans them all, so their handlers wake a work queue's worker once.
        WakeBatch batch;
        for (;;) {
          const std::size_t before = *streamed_;
          for (std::size_t i = 0; n > 0 && i + 1 < fds.size() && mc == CURLM_OK; ++i) {
            if (!fds[i].revents) continue;
            acted = true;
            mc = curl_multi_socket_action(multi_, fds[i].fd, EventBits(fds[i].revents), &running);
          }
          // A read that (nearly) filled curl's buffer left more waiting: take it now, in the
          // same batch (a saturated stream is never held to a buffer per window).
          if (!acted || !running || mc != CURLM_OK || cancelled.load() ||
              *streamed_ - before < kStreamBufferSize * 3 / 4) {
            break;
          }
          n = PollAll(fds, 0);
          if (n <= 0) break;
        }
      }
      if (acted && running && mc == CURLM_OK) Coalesce();  // not once the transfer is over
      if (mc == CURLM_OK && (!acted || TimerDue())) {
        mc = curl_multi_socket_action(multi_, CURL_SOCKET_TIMEOUT, 0, &running);
      }
    }
    if (mc != CURLM_OK) {
      return UnavailableError(std::string("curl_multi_socket_action: ") + curl_multi_strerror(mc));
    }
    return OkStatus();
  }

 private:
  // Polls curl's sockets and, last, the stop eventfd.
  int PollAll(std::vector<pollfd>& fds, int timeout_ms) {
    fds.assign(socks_.begin(), socks_.end());
    fds.push_back({stop_fd_, POLLIN, 0});
    return poll(fds.data(), fds.size(), timeout_ms);
  }
  static int SocketCb(CURL*, curl_socket_t s, int what, void* user, void*) {
    auto& socks = static_cast<StreamLoop*>(user)->socks_;
    auto it = std::find_if(socks.begin(), socks.end(), [s](const pollfd& p) { return p.fd == s; });
    if (what == CURL_POLL_REMOVE) {
      if (it != socks.end()) socks.erase(it);
      return 0;
    }
    short events = 0;
    if (what == CURL_POLL_IN || what == CURL_POLL_INOUT) events |= POLLIN;
    if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT) events |= POLLOUT;
    if (it == socks.end()) {
      socks.push_back({s, events, 0});
    } else {
      it->events = events;
    }
    return 0;
  }
  static int TimerCb(CURLM*, long timeout_ms, void* user) {
    auto* self = static_cast<StreamLoop*>(user);
    self->timer_set_ = timeout_ms >= 0;
    if (self->timer_set_) {
      self->timer_at_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    }
    return 0;
  }
  static int EventBits(short revents) {
    int bits = 0;
    if (revents & (POLLIN | POLLHUP)) bits |= CURL_CSELECT_IN;
    if (revents & POLLOUT) bits |= CURL_CSELECT_OUT;
    if (revents & (POLLERR | POLLNVAL)) bits |= CURL_CSELECT_ERR;
    return bits;
  }
  // After a read that came within the window of the one before it (a busy stream), waits out
  // the window (only the stop eventfd can cut it short) so the next read takes the events
  // that arrived meanwhile in one go. A quiet stream's first event is read at once.
  void Coalesce() {
    if (coalesce_.count() <= 0) return;
    const auto now = std::chrono::steady_clock::now();
    const bool busy = now - last_read_ < coalesce_;
    last_read_ = now;
    if (!busy) return;
    pollfd stop{stop_fd_, POLLIN, 0};
    poll(&stop, 1, static_cast<int>(coalesce_.count()));
    last_read_ = std::chrono::steady_clock::now();
  }
  bool TimerDue() const { return timer_set_ && std::chrono::steady_clock::now() >= timer_at_; }
  // Until curl's timer, at most a second (a lost timer update then costs a second, not a hang).
  int PollTimeoutMs() const {
    if (!timer_set_) return 1000;
    auto left =
        std::chrono::ceil<std::chrono::milliseconds>(timer_at_ - std::chrono::steady_clock::now());
    return static_cast<int>(std::clamp<long long>(left.count(), 0, 1000));
  }

  CURLM* multi_;
  std::chrono::milliseconds coalesce_;
  const std::size_t* streamed_;
  std::chrono::steady_clock::time_point last_read_{};
  int stop_fd_;
  std::vector<pollfd> socks_;  // curl's sockets and what it waits for on each
  bool timer_set_ = false;
  std::chrono::steady_clock::time_point timer_at_{};
};

}  // namespace

StatusOr<HttpResponse> CurlTransport::Stream(const HttpRequest& req, const ChunkFn& on_chunk,
                                             std::stop_token stop) {
  CURL* h = static_cast<CURL*>(AcquireHandle());
  if (!h) return InternalError("curl_easy_init failed");
  CURLM* multi = curl_multi_init();
  if (!multi) {
    ReleaseHandle(h);
    return InternalError("curl_multi_init failed");
  }
  HttpResponse resp;
  Transfer t{&resp, h, &on_chunk};
  curl_slist* headers = nullptr;
  Status s = Setup(h, req, &headers, true);
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &t);
  CURLcode rc = CURLE_OK;
  std::atomic<bool> cancelled{false};
  StreamLoop loop(multi, req.read_coalesce, &t.streamed);
  if (s.ok() && !loop.ok()) s = InternalError(std::string("eventfd: ") + std::strerror(errno));
  if (s.ok()) {
    curl_multi_add_handle(multi, h);
    {
      std::stop_callback on_stop(stop, [&] {
        cancelled.store(true);
        loop.Wake();
      });
      s = loop.Run(cancelled);
    }
    int left = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi, &left)) {
      if (msg->msg == CURLMSG_DONE && msg->easy_handle == h) rc = msg->data.result;
    }
    curl_multi_remove_handle(multi, h);
  }
  long code = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, nullptr);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, nullptr);
  curl_slist_free_all(headers);
  curl_multi_cleanup(multi);
  // The stream's connection is in an unknown state; don't pool the handle.
  curl_easy_cleanup(h);
  if (!s.ok()) return s;
  resp.status = static_cast<int>(code);
  if (cancelled.load()) return CancelledError("watch cancelled");
  if (t.stopped_by_callback) return resp;
  if (rc != CURLE_OK) return CurlError(rc, errbuf, req.method + " " + req.path);
  return resp;
}

bool LineSplitter::Feed(std::string_view chunk,
                        const std::function<bool(std::string_view line)>& on_line) {
  std::size_t start = 0;
  while (start < chunk.size()) {
    auto nl = chunk.find('\n', start);
    if (nl == std::string_view::npos) {
      buf_.append(chunk.substr(start));
      return true;
    }
    std::string_view piece = chunk.substr(start, nl - start);
    start = nl + 1;
    bool keep_going = true;
    if (buf_.empty()) {
      // Fast path: the line lies inside the chunk. The padding guarantee needs a copy unless
      // enough bytes follow it in the chunk.
      if (chunk.size() - (nl) >= kBodyPadding) {
        if (!piece.empty()) keep_going = on_line(piece);
      } else {
        buf_.reserve(piece.size() + kBodyPadding);
        buf_.assign(piece);
        if (!buf_.empty()) keep_going = on_line(buf_);
        buf_.clear();
      }
    } else {
      buf_.append(piece);
      if (buf_.capacity() < buf_.size() + kBodyPadding) buf_.reserve(buf_.size() + kBodyPadding);
      keep_going = on_line(buf_);
      buf_.clear();
    }
    if (!keep_going) return false;
  }
  return true;
}

}  // namespace gg::k8s
