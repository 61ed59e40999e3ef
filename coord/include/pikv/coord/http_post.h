// HttpClient: small JSON POSTs to a trusted service (etcd's v3 JSON gateway)
// through libcurl: one deadline over name lookup, connect, TLS and transfer;
// every address a name resolves to (IPv6 and IPv4); http or https with a
// client certificate; proxies from the environment ignored; a bounded
// answer. A peer that is down, slow, or answers oversized bytes is an error
// Status within the deadline; nothing throws. The connection is kept for
// the next call to the same host.
// Not thread-safe: one per thread.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "pikv/common/status.h"

namespace pikv::coord {

inline constexpr size_t kMaxResponseBytes = 4u << 20;

// Mutual TLS: the CA that signed the service's certificate, and our
// certificate and key (PEM files). Empty: plaintext http.
struct TlsFiles {
  std::string ca, cert, key;
  bool enabled() const { return !ca.empty(); }
  // <dir>/ca.crt, <dir>/client.crt, <dir>/client.key (as `pikv etcd-certs` writes them).
  static TlsFiles InDir(const std::string& dir);
  // Each file is readable: a clear error at start-up rather than at the first call.
  Status Check() const;
};

struct ClientResponse {
  int status = 0;
  std::string body;
};

class HttpClient {
 public:
  explicit HttpClient(TlsFiles tls = {});
  ~HttpClient();
  HttpClient(HttpClient&&) noexcept;
  HttpClient& operator=(HttpClient&&) noexcept;

  // POSTs `body` (application/json) to `url` (http:// or https://
  // host:port/path; an IPv6 host in brackets); `authorization`, when not
  // empty, is sent as the Authorization header.
  Result<ClientResponse> Post(const std::string& url, const std::string& body,
                              std::chrono::milliseconds timeout,
                              const std::string& authorization = {});
  const TlsFiles& tls() const { return tls_; }

 private:
  struct Handle;
  TlsFiles tls_;
  std::unique_ptr<Handle> handle_;
};

}  // namespace pikv::coord
