// A minimal HTTP/1.1 client for small JSON exchanges with a trusted service
// (etcd's v3 JSON gateway): one request per connection (Connection: close),
// one deadline for connecting, sending and reading, a bounded response.
// Bodies may come with Content-Length, chunked, or up to the close. A peer
// that is down, slow, or answers malformed or oversized bytes is an error
// Status within the deadline; nothing throws. Thread-safe (no state).
#pragma once

#include <chrono>
#include <string>

#include "pikv/common/status.h"

namespace pikv::coord {

inline constexpr size_t kMaxResponseBytes = 4u << 20;

struct ClientResponse {
  int status = 0;
  std::string body;
};

// POSTs `body` (application/json) to http://<host_port><path>. host_port is
// host:port (a name or an IPv4 address).
Result<ClientResponse> Post(const std::string& host_port, const std::string& path,
                            const std::string& body, std::chrono::milliseconds timeout);

// Decodes a chunked body (exposed for tests and the fuzzer).
Result<std::string> DecodeChunked(std::string_view raw);

}  // namespace pikv::coord
