#include "pikv/coord/http_post.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

namespace pikv::coord {

namespace {

using Clock = std::chrono::steady_clock;

int MsLeft(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Waits for `events` on fd until the deadline.
bool WaitFor(int fd, short events, Clock::time_point deadline) {
  pollfd p{fd, events, 0};
  for (;;) {
    const int r = ::poll(&p, 1, MsLeft(deadline));
    if (r > 0) return true;
    if (r == 0 || errno != EINTR) return false;
  }
}

Result<int> Connect(const std::string& host_port, Clock::time_point deadline) {
  const size_t colon = host_port.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == host_port.size())
    return InvalidArgument("not host:port: " + host_port);
  const std::string host = host_port.substr(0, colon), port = host_port.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0 || !found)
    return Unavailable("cannot resolve " + host_port);
  const int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    ::freeaddrinfo(found);
    return IoError(std::string("socket: ") + std::strerror(errno));
  }
  const int r = ::connect(fd, found->ai_addr, found->ai_addrlen);
  ::freeaddrinfo(found);
  int error = r == 0 ? 0 : errno;
  if (error == EINPROGRESS) {
    error = ETIMEDOUT;
    if (WaitFor(fd, POLLOUT, deadline)) {
      socklen_t len = sizeof(error);
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len);
    }
  }
  if (error != 0) {
    ::close(fd);
    return Unavailable("connect " + host_port + ": " + std::strerror(error));
  }
  return fd;
}

Status SendAll(int fd, std::string_view bytes, Clock::time_point deadline) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n > 0) {
      bytes.remove_prefix(static_cast<size_t>(n));
    } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
      return IoError(std::string("send: ") + std::strerror(errno));
    } else if (!WaitFor(fd, POLLOUT, deadline)) {
      return Timeout("send timed out");
    }
  }
  return Status::Ok();
}

// Reads until the peer closes (the request said Connection: close).
Result<std::string> ReadAll(int fd, Clock::time_point deadline) {
  std::string raw;
  char buf[16384];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n == 0) return raw;
    if (n > 0) {
      raw.append(buf, static_cast<size_t>(n));
      if (raw.size() > kMaxResponseBytes + 16384) return TooLarge("response too large");
    } else if (errno != EAGAIN && errno != EINTR) {
      return IoError(std::string("recv: ") + std::strerror(errno));
    } else if (!WaitFor(fd, POLLIN, deadline)) {
      return Timeout("response timed out");
    }
  }
}

bool HeaderIs(std::string_view head, std::string_view name, std::string_view value) {
  // Case-insensitive search of "\r\n<name>: <value>" among the header lines.
  for (size_t pos = head.find("\r\n"); pos != std::string_view::npos;
       pos = head.find("\r\n", pos + 2)) {
    std::string_view line = head.substr(pos + 2, head.find("\r\n", pos + 2) - pos - 2);
    if (line.size() < name.size() + 1 || line[name.size()] != ':') continue;
    if (strncasecmp(line.data(), name.data(), name.size()) != 0) continue;
    std::string_view v = line.substr(name.size() + 1);
    while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
    return v.size() == value.size() && strncasecmp(v.data(), value.data(), v.size()) == 0;
  }
  return false;
}

}  // namespace

Result<std::string> DecodeChunked(std::string_view raw) {
  std::string body;
  for (;;) {
    const size_t eol = raw.find("\r\n");
    if (eol == std::string_view::npos) return ProtocolError("chunked body cut short");
    size_t size = 0;
    const std::string_view digits = raw.substr(0, eol);
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), size, 16);
    if (ec != std::errc() || end == digits.data() ||
        (end != digits.data() + digits.size() && *end != ';'))
      return ProtocolError("bad chunk size");
    raw.remove_prefix(eol + 2);
    if (size == 0) return body;
    if (size > kMaxResponseBytes - body.size() || raw.size() < size + 2 ||
        raw.substr(size, 2) != "\r\n")
      return ProtocolError("bad chunk");
    body.append(raw.substr(0, size));
    raw.remove_prefix(size + 2);
  }
}

Result<ClientResponse> Post(const std::string& host_port, const std::string& path,
                            const std::string& body, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  auto fd = Connect(host_port, deadline);
  if (!fd.ok()) return fd.status();
  Fd socket(*fd);
  const std::string request =
      "POST " + path + " HTTP/1.1\r\nHost: " + host_port +
      "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\nConnection: close\r\n\r\n" + body;
  if (Status s = SendAll(socket.get(), request, deadline); !s.ok()) return s;
  auto raw = ReadAll(socket.get(), deadline);
  if (!raw.ok()) return raw.status();
  const size_t head_end = raw->find("\r\n\r\n");
  if (head_end == std::string::npos || raw->compare(0, 9, "HTTP/1.1 ") != 0 || raw->size() < 12)
    return ProtocolError("not an HTTP/1.1 response");
  ClientResponse response;
  auto [end, ec] = std::from_chars(raw->data() + 9, raw->data() + 12, response.status);
  if (ec != std::errc() || end != raw->data() + 12) return ProtocolError("bad status line");
  const std::string_view head(raw->data(), head_end + 2);
  std::string_view rest(raw->data() + head_end + 4, raw->size() - head_end - 4);
  if (HeaderIs(head, "Transfer-Encoding", "chunked")) {
    auto decoded = DecodeChunked(rest);
    if (!decoded.ok()) return decoded.status();
    response.body = std::move(*decoded);
  } else {
    if (rest.size() > kMaxResponseBytes) return TooLarge("response too large");
    response.body = rest;  // Content-Length or up to the close: both end at the close here
  }
  return response;
}

}  // namespace pikv::coord
