// HTTP transport behind an interface (tests and the RestClient inject it), plus the libcurl
// implementation: keep-alive through a pool of easy handles, HTTP/2 when offered over TLS,
// TLS verified by default, per-request timeouts and streaming bodies for watches.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "k8s/config.h"

namespace gg::k8s {

// Response bodies keep at least this many spare bytes of capacity past size() so simdjson
// can parse them in place.
inline constexpr std::size_t kBodyPadding = 64;

struct HttpRequest {
  std::string method = "GET";
  std::string path;  // path + query, starting with '/'
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::chrono::milliseconds timeout{0};  // 0: the transport's default (ClientConfig::timeout)
  // Streams only: while data keeps coming within this window of the last read, wait the window
  // out before reading again, so a busy watch is read (and its handlers wake their workers) in
  // batches. Adds at most this much latency to an event; 0 reads each arrival at once.
  std::chrono::milliseconds read_coalesce{0};
};

struct HttpResponse {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;                                          // capacity() >= size() + kBodyPadding
  // First header with that (case-insensitive) name, "" when absent.
  std::string_view Header(std::string_view name) const;
};

class Transport {
 public:
  // Receives body bytes of a 2xx streaming response as they arrive. Return false to stop.
  using ChunkFn = std::function<bool(std::string_view chunk)>;

  virtual ~Transport() = default;
  // One request, whole body. Transport failures: Unavailable (connect/reset/garbage),
  // DeadlineExceeded (timeout). Any HTTP status is a successful transport result.
  virtual StatusOr<HttpResponse> Do(const HttpRequest& req) = 0;
  // Streaming request. For a 2xx answer the body goes to on_chunk and the returned response
  // has an empty body; otherwise the body is collected into the response. Ends when the server
  // ends the body (OK), on_chunk returns false (OK), `stop` is requested (Cancelled, promptly)
  // or the connection breaks/times out (Unavailable / DeadlineExceeded).
  virtual StatusOr<HttpResponse> Stream(const HttpRequest& req, const ChunkFn& on_chunk,
                                        std::stop_token stop) = 0;
  // "host:port" of the server, for metrics labels.
  virtual std::string Host() const = 0;
  // Called after a 401: re-read rotating credentials before the retry.
  virtual void InvalidateCredentials() {}
};

// libcurl transport built from a ClientConfig (server, TLS material, token source, timeouts).
class CurlTransport final : public Transport {
 public:
  static StatusOr<std::unique_ptr<CurlTransport>> Create(const ClientConfig& config);
  ~CurlTransport() override;
  CurlTransport(const CurlTransport&) = delete;
  CurlTransport& operator=(const CurlTransport&) = delete;

  StatusOr<HttpResponse> Do(const HttpRequest& req) override;
  StatusOr<HttpResponse> Stream(const HttpRequest& req, const ChunkFn& on_chunk,
                                std::stop_token stop) override;
  std::string Host() const override { return host_; }

  // Forces the token file to be re-read before the next request (after a 401).
  void InvalidateCredentials() override { tokens_.Invalidate(); }

 private:
  explicit CurlTransport(const ClientConfig& config);
  void* AcquireHandle();  // CURL*
  void ReleaseHandle(void* handle);
  Status Setup(void* handle, const HttpRequest& req, void* header_list_out, bool streaming);

  ClientConfig config_;
  std::string base_;  // server URL without trailing '/'
  std::string host_;
  BearerTokenSource tokens_;
  std::mutex pool_mu_;
  std::vector<void*> idle_;  // easy handles with live keep-alive connections
};

// Splits a byte stream into '\n'-terminated lines; keeps the tail of a partial line across
// chunks. Lines passed to the callback are followed by >= kBodyPadding readable bytes.
class LineSplitter {
 public:
  // Returns false when `on_line` asked to stop.
  bool Feed(std::string_view chunk, const std::function<bool(std::string_view line)>& on_line);
  std::size_t pending() const { return buf_.size(); }

 private:
  std::string buf_;
};

}  // namespace gg::k8s
