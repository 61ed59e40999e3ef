// HttpServer: the read-only HTTP/1.1 endpoint of pikv processes (/metrics,
// /healthz, JSON queries).
//
// One thread, non-blocking sockets and poll(): a slow or stalled client holds
// a connection slot, never the thread, so health checks are answered however
// many clients dawdle. Each connection must deliver its request head within
// `request_timeout` and take its response within the same time again, or it
// is closed. At most `max_connections` are open: when full, the connection
// that has waited longest without completing a request is dropped for the
// new one. GET and HEAD only, one request per connection (Connection: close),
// request heads up to kMaxRequestHead bytes. Handlers run on the server
// thread: they must be quick and must not throw (a throw is answered 500).
// Thread-safety: Start/Stop from one thread.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "pikv/common/status.h"

namespace pikv::http {

inline constexpr size_t kMaxRequestHead = 8192;

struct Request {
  std::string method;                        // GET or HEAD
  std::string path;                          // without the query
  std::map<std::string, std::string> query;  // percent-decoded
  std::string Param(const std::string& name) const;
};

struct Response {
  int status = 200;
  std::string content_type = "text/plain";
  std::string body;
};

using Handler = std::function<Response(const Request&)>;

struct Options {
  std::string address;  // host:port; port 0 = any free one
  std::chrono::milliseconds request_timeout{2000};
  size_t max_connections = 128;
};

// Parses a request head (request line and headers, through the blank line).
// Exposed for tests and the fuzzer.
Result<Request> ParseRequestHead(std::string_view head);

class Server {
 public:
  static Result<std::unique_ptr<Server>> Start(Options options,
                                               std::map<std::string, Handler> routes);
  ~Server();  // Stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  const std::string& address() const { return address_; }  // host:port as bound
  void Stop();

 private:
  struct Impl;
  Server() = default;
  std::string address_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pikv::http
