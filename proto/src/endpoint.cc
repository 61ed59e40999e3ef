#include "pikv/proto/endpoint.h"

#include <charconv>

namespace pikv {

namespace {

bool IsAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

bool IsHexOrSeparator(std::string_view s) {
  for (char c : s) {
    const bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    if (!hex && c != ':' && c != '.') return false;
  }
  return true;
}

bool AllOf(std::string_view s, std::string_view extra) {
  for (char c : s) {
    if (!IsAlnum(c) && extra.find(c) == std::string_view::npos) return false;
  }
  return true;
}

// What the error says about a value: short, and safe to print.
std::string Quoted(std::string_view s) {
  std::string out = "\"";
  for (char c : s.substr(0, 64)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return out + (s.size() > 64 ? "...\"" : "\"");
}

Status BadEndpoint(std::string_view text, std::string_view why) {
  return InvalidArgument("endpoint " + Quoted(text) + ": " + std::string(why));
}

}  // namespace

std::string Endpoint::ToString() const {
  if (transport == Transport::kIpc) return "ipc://" + path;
  return "tcp://" + host + ":" + std::to_string(port);
}

Result<Endpoint> ParseEndpoint(std::string_view text) {
  if (text.size() > kMaxEndpointLength) return BadEndpoint(text, "too long");
  Endpoint e;
  if (text.starts_with("ipc://")) {
    e.transport = Endpoint::Transport::kIpc;
    e.path = std::string(text.substr(6));
    if (e.path.empty()) return BadEndpoint(text, "no path");
    if (e.path.size() > kMaxIpcPathLength) return BadEndpoint(text, "path too long for a socket");
    for (char c : e.path) {
      if (static_cast<unsigned char>(c) < 0x21 || c == 0x7f || c == '*')
        return BadEndpoint(text, "path holds a space, control character or wildcard");
    }
    return e;
  }
  if (!text.starts_with("tcp://")) return BadEndpoint(text, "wants tcp://HOST:PORT or ipc://PATH");
  std::string_view rest = text.substr(6);
  const size_t colon = rest.rfind(':');
  if (colon == std::string_view::npos) return BadEndpoint(text, "no port");
  std::string_view host = rest.substr(0, colon);
  std::string_view port = rest.substr(colon + 1);
  if (host.empty()) return BadEndpoint(text, "no host");
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']' || !IsHexOrSeparator(host.substr(1, host.size() - 2)))
      return BadEndpoint(text, "bad IPv6 address");
  } else if (!AllOf(host, ".-") || host.size() > kMaxHostLength) {
    return BadEndpoint(text, "bad host");
  }
  int value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value < 1 ||
      value > 65535)
    return BadEndpoint(text, "port must be 1-65535");
  e.host = std::string(host);
  e.port = value;
  return e;
}

Result<Endpoint> ParseTcpEndpoint(std::string_view text) {
  auto e = ParseEndpoint(text);
  if (e.ok() && e->transport != Endpoint::Transport::kTcp)
    return BadEndpoint(text, "wants tcp://HOST:PORT");
  return e;
}

bool IsWildcardHost(std::string_view host) { return host == "0.0.0.0" || host == "[::]"; }

bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      n = 1, cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      n = 2, cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      n = 3, cp = c & 0x07;
    } else {
      return false;
    }
    for (size_t k = 1; k <= n; ++k) {
      if (i + k >= s.size()) return false;
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = cp << 6 | (cc & 0x3f);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are invalid.
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
        (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
      return false;
    i += n + 1;
  }
  return true;
}

Status CheckNodeId(std::string_view id) {
  if (id.empty() || id.size() > kMaxNodeIdLength || !AllOf(id, "._:@-"))
    return InvalidArgument("node id " + Quoted(id) + " must be 1-" +
                           std::to_string(kMaxNodeIdLength) + " characters of [A-Za-z0-9._:@-]");
  return Status::Ok();
}

Status CheckHostName(std::string_view host) {
  if (host.empty() || host.size() > kMaxHostLength || !AllOf(host, "._:-"))
    return InvalidArgument("host " + Quoted(host) + " must be 1-" + std::to_string(kMaxHostLength) +
                           " characters of [A-Za-z0-9._:-]");
  return Status::Ok();
}

}  // namespace pikv
