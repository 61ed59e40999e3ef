#include "pikv/transport/local_channel.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "pikv/proto/endian.h"
#include "pikv/proto/endpoint.h"

namespace pikv {

namespace {

constexpr std::string_view kSuffix = ".zc";

Status Errno(std::string_view what) {
  const int err = errno;
  if (err == EAGAIN || err == EWOULDBLOCK) return Timeout(std::string(what) + " timed out");
  return Unavailable(std::string(what) + ": " + std::strerror(err));
}

// Closes every descriptor in `msg`'s control data except the first, which
// goes to *keep (or is closed too when keep is null).
void TakeDescriptors(msghdr& msg, int* keep) {
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < n; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      if (keep && *keep < 0) {
        *keep = fd;
      } else {
        close(fd);
      }
    }
  }
}

}  // namespace

std::string ZeroCopySocketFor(std::string_view endpoint) {
  auto e = ParseEndpoint(endpoint);
  if (!e.ok() || e->transport != Endpoint::Transport::kIpc) return {};
  if (e->path.size() + kSuffix.size() > kMaxIpcPathLength) return {};
  return e->path + std::string(kSuffix);
}

Status SendLocal(int socket, const Header& header, int pass_fd) {
  const std::string body = EncodeHeader(header);
  std::string frame(4, '\0');
  StoreLE32(frame.data(), static_cast<uint32_t>(body.size()));
  frame += body;
  for (size_t sent = 0; sent < frame.size();) {
    iovec iov{frame.data() + sent, frame.size() - sent};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (pass_fd >= 0 && sent == 0) {  // the descriptor goes with the first byte
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(c), &pass_fd, sizeof pass_fd);
    }
    const ssize_t n = sendmsg(socket, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("send");
    }
    sent += static_cast<size_t>(n);
  }
  return Status::Ok();
}

Result<Header> RecvLocal(int socket, const WireLimits& limits, int* received_fd) {
  if (received_fd) *received_fd = -1;
  // Reads exactly `size` bytes; the first read also collects descriptors.
  auto read_exact = [&](uint8_t* into, size_t size, bool first) -> Status {
    size_t got = 0;
    while (got < size) {
      iovec iov{into + got, size - got};
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
      const ssize_t n = recvmsg(socket, &msg, MSG_CMSG_CLOEXEC);
      if (n < 0) {
        if (errno == EINTR) continue;
        return Errno("receive");
      }
      if (msg.msg_controllen > 0) TakeDescriptors(msg, first ? received_fd : nullptr);
      if (n == 0) return Unavailable("the peer closed the connection");
      got += static_cast<size_t>(n);
    }
    return Status::Ok();
  };
  uint8_t prefix[4];
  if (Status s = read_exact(prefix, sizeof prefix, true); !s.ok()) return s;
  const uint32_t size = LoadLE<uint32_t>(prefix);
  if (size > limits.max_header_bytes) {
    return TooLarge("message of " + std::to_string(size) + " bytes over the limit of " +
                    std::to_string(limits.max_header_bytes));
  }
  std::string body(size, 0);
  if (Status s = read_exact(reinterpret_cast<uint8_t*>(body.data()), size, false); !s.ok())
    return s;
  return DecodeHeader({reinterpret_cast<const uint8_t*>(body.data()), body.size()}, limits);
}

void SetLocalTimeout(int socket, std::chrono::milliseconds timeout) {
  const auto ms = std::max<int64_t>(1, timeout.count());
  timeval tv{static_cast<time_t>(ms / 1000), static_cast<suseconds_t>((ms % 1000) * 1000)};
  setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(socket, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

Result<int> ConnectLocal(const std::string& path, std::chrono::milliseconds timeout) {
  sockaddr_un addr{};
  if (path.empty() || path.size() >= sizeof addr.sun_path)
    return InvalidArgument("unix socket path '" + path + "' does not fit");
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Errno("socket");
  SetLocalTimeout(fd, timeout);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    Status s = Errno("connect " + path);
    close(fd);
    return s;
  }
  return fd;
}

}  // namespace pikv
