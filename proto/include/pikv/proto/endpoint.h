// Endpoints and names that arrive from peers: parsed and checked here, before
// any socket, table or JSON document sees them.
//
// An endpoint is what pikv connects to: `tcp://HOST:PORT` (HOST a DNS name,
// an IPv4 address or a bracketed IPv6 address; PORT 1-65535) or
// `ipc://PATH` (an absolute or relative path that fits a unix socket
// address). Nothing else (no wildcards, no `src;dst` forms, no other
// transports, no control characters) is accepted. Names (node ids, host
// names) are short printable ASCII. The limits are defined here once; the
// node checks what it advertises against them, the controller what it is sent.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "pikv/common/status.h"

namespace pikv {

inline constexpr size_t kMaxEndpointLength = 256;
inline constexpr size_t kMaxIpcPathLength = 107;  // sun_path less its terminator
inline constexpr size_t kMaxNodeIdLength = 128;
inline constexpr size_t kMaxHostLength = 253;  // a DNS name

struct Endpoint {
  enum class Transport { kTcp, kIpc };
  Transport transport = Transport::kTcp;
  std::string host;  // tcp: as written, brackets kept for IPv6
  int port = 0;      // tcp
  std::string path;  // ipc
  std::string ToString() const;
};

Result<Endpoint> ParseEndpoint(std::string_view text);
// ParseEndpoint, and a tcp endpoint.
Result<Endpoint> ParseTcpEndpoint(std::string_view text);

// 0.0.0.0 or [::]: fine to bind, useless to dial from another host.
bool IsWildcardHost(std::string_view host);

bool IsValidUtf8(std::string_view text);

// A node id: 1..kMaxNodeIdLength of [A-Za-z0-9._:@-].
Status CheckNodeId(std::string_view id);
// A host name: 1..kMaxHostLength of [A-Za-z0-9._:-] (names, IPv4, IPv6).
Status CheckHostName(std::string_view host);

}  // namespace pikv
