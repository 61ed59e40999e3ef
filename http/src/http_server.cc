#include "pikv/http/http_server.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <list>
#include <thread>
#include <vector>

#include "pikv/common/guarded_thread.h"

namespace pikv::http {

namespace {

using Clock = std::chrono::steady_clock;

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// application/x-www-form-urlencoded decoding; a bad escape is kept as written.
std::string Decode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && HexDigit(s[i + 1]) >= 0 &&
               HexDigit(s[i + 2]) >= 0) {
      out += static_cast<char>(HexDigit(s[i + 1]) * 16 + HexDigit(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::string_view Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 431:
      return "Request Header Fields Too Large";
    default:
      return "Internal Server Error";
  }
}

std::string Serialize(const Response& r, bool head_only) {
  std::string out = "HTTP/1.1 " + std::to_string(r.status) + " " + std::string(Reason(r.status)) +
                    "\r\nContent-Type: " + r.content_type +
                    "\r\nContent-Length: " + std::to_string(r.body.size()) +
                    "\r\nConnection: close\r\n\r\n";
  if (!head_only) out += r.body;
  return out;
}

Response Error(int status, std::string_view what) {
  return {status, "application/json", "{\"error\":\"" + std::string(what) + "\"}"};
}

struct Connection {
  int fd = -1;
  Clock::time_point deadline;
  bool responding = false;
  std::string in;
  std::string out;
  size_t sent = 0;
};

}  // namespace

std::string Request::Param(const std::string& name) const {
  auto it = query.find(name);
  return it == query.end() ? std::string() : it->second;
}

Result<Request> ParseRequestHead(std::string_view head) {
  const size_t eol = head.find("\r\n");
  if (eol == std::string_view::npos) return InvalidArgument("no request line");
  const std::string_view line = head.substr(0, eol);
  const size_t sp1 = line.find(' ');
  const size_t sp2 = line.rfind(' ');
  if (sp1 == std::string_view::npos || sp2 == sp1) return InvalidArgument("bad request line");
  const std::string_view version = line.substr(sp2 + 1);
  if (version != "HTTP/1.1" && version != "HTTP/1.0") return InvalidArgument("bad HTTP version");
  Request r;
  r.method = std::string(line.substr(0, sp1));
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  if (target.empty() || target.front() != '/') return InvalidArgument("bad request target");
  for (char c : target) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f)
      return InvalidArgument("bad request target");
  }
  const size_t q = target.find('?');
  r.path = std::string(target.substr(0, q));
  if (q != std::string_view::npos) {
    std::string_view rest = target.substr(q + 1);
    while (!rest.empty()) {
      const size_t amp = rest.find('&');
      const std::string_view pair = rest.substr(0, amp);
      const size_t eq = pair.find('=');
      if (!pair.empty()) {
        r.query[Decode(pair.substr(0, eq))] =
            eq == std::string_view::npos ? std::string() : Decode(pair.substr(eq + 1));
      }
      if (amp == std::string_view::npos) break;
      rest = rest.substr(amp + 1);
    }
  }
  return r;
}

struct Server::Impl {
  Options options;
  std::map<std::string, Handler> routes;
  int listen_fd = -1;
  int wake[2] = {-1, -1};
  std::atomic<bool> stopping{false};
  std::thread thread;
  std::list<Connection> connections;  // oldest first

  ~Impl() {
    for (auto& c : connections) close(c.fd);
    for (int fd : {listen_fd, wake[0], wake[1]}) {
      if (fd >= 0) close(fd);
    }
  }

  Response Route(const Request& req) {
    if (req.method != "GET" && req.method != "HEAD") return Error(405, "only GET and HEAD");
    auto it = routes.find(req.path);
    if (it == routes.end()) return Error(404, "no such path");
    try {
      return it->second(req);
    } catch (const std::exception& e) {
      spdlog::error("http {}: {}", req.path, e.what());
      return Error(500, "internal error");
    }
  }

  void Respond(Connection& c, const Response& r, bool head_only) {
    c.out = Serialize(r, head_only);
    c.responding = true;
    c.deadline = Clock::now() + options.request_timeout;
  }

  // Reads what is there; true when the connection should stay open.
  bool Read(Connection& c) {
    char buf[4096];
    while (true) {
      const ssize_t n = recv(c.fd, buf, sizeof buf, 0);
      if (n == 0) return false;
      if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
      c.in.append(buf, static_cast<size_t>(n));
      const size_t end = c.in.find("\r\n\r\n");
      if (end != std::string::npos) {
        auto req = ParseRequestHead(std::string_view(c.in).substr(0, end + 4));
        if (!req.ok()) {
          Respond(c, Error(400, "malformed request"), false);
        } else {
          Respond(c, Route(*req), req->method == "HEAD");
        }
        return true;
      }
      if (c.in.size() > kMaxRequestHead) {
        Respond(c, Error(431, "request head too large"), false);
        return true;
      }
    }
  }

  // Writes what it can; true while there is more to write.
  bool Write(Connection& c) {
    while (c.sent < c.out.size()) {
      const ssize_t n = send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
      if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
      c.sent += static_cast<size_t>(n);
    }
    return false;
  }

  void Accept() {
    while (true) {
      const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;
      if (connections.size() >= options.max_connections) {
        // Full: the longest-waiting connection still sending its request
        // goes (a stalled client is always the oldest), else the oldest.
        auto victim = std::find_if(connections.begin(), connections.end(),
                                   [](const Connection& c) { return !c.responding; });
        if (victim == connections.end()) victim = connections.begin();
        close(victim->fd);
        connections.erase(victim);
      }
      Connection c;
      c.fd = fd;
      c.deadline = Clock::now() + options.request_timeout;
      connections.push_back(std::move(c));
    }
  }

  void Run() {
    std::vector<pollfd> fds;
    while (!stopping) {
      fds.clear();
      fds.push_back({listen_fd, POLLIN, 0});
      fds.push_back({wake[0], POLLIN, 0});
      auto now = Clock::now();
      auto next = now + std::chrono::milliseconds(500);
      for (auto& c : connections) {
        fds.push_back({c.fd, static_cast<short>(c.responding ? POLLOUT : POLLIN), 0});
        next = std::min(next, c.deadline);
      }
      const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - now);
      if (poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(0, wait.count()) + 1)) <
              0 &&
          errno != EINTR) {
        spdlog::error("http poll: {}", strerror(errno));
        return;
      }
      now = Clock::now();
      size_t i = 2;
      for (auto it = connections.begin(); it != connections.end(); ++i) {
        Connection& c = *it;
        bool keep = now < c.deadline;
        const short ev = i < fds.size() ? fds[i].revents : 0;
        if (keep && (ev & (POLLERR | POLLHUP | POLLNVAL)) && !(ev & POLLIN)) keep = false;
        if (keep && !c.responding && (ev & POLLIN)) keep = Read(c);
        if (keep && c.responding) keep = Write(c);
        if (keep) {
          ++it;
        } else {
          close(c.fd);
          it = connections.erase(it);
        }
      }
      if (fds[0].revents & POLLIN) Accept();
    }
  }
};

Result<std::unique_ptr<Server>> Server::Start(Options options,
                                              std::map<std::string, Handler> routes) {
  const size_t colon = options.address.rfind(':');
  if (colon == std::string::npos) return InvalidArgument("HTTP address wants host:port");
  const std::string host = options.address.substr(0, colon);
  const std::string port_text = options.address.substr(colon + 1);
  int port = -1;
  auto [p, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || p != port_text.data() + port_text.size() || port < 0 || port > 65535)
    return InvalidArgument("HTTP port must be 0-65535: " + options.address);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.empty() ? nullptr : host.c_str(), port_text.c_str(), &hints, &found) != 0 ||
      !found)
    return InvalidArgument("cannot resolve HTTP host " + host);
  std::unique_ptr<Server> server(new Server());
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  impl->routes = std::move(routes);
  impl->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  const int one = 1;
  setsockopt(impl->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  const bool bound = impl->listen_fd >= 0 &&
                     bind(impl->listen_fd, found->ai_addr, found->ai_addrlen) == 0 &&
                     listen(impl->listen_fd, 128) == 0;
  freeaddrinfo(found);
  if (!bound)
    return IoError("cannot bind HTTP to " + impl->options.address + ": " + strerror(errno));
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  getsockname(impl->listen_fd, reinterpret_cast<sockaddr*>(&addr), &len);
  server->address_ = host + ":" + std::to_string(ntohs(addr.sin_port));
  if (pipe2(impl->wake, O_NONBLOCK | O_CLOEXEC) != 0)
    return IoError("pipe: " + std::string(strerror(errno)));
  Impl* raw = impl.get();
  impl->thread = GuardedThread("http server", [raw] { raw->Run(); });
  server->impl_ = std::move(impl);
  return server;
}

Server::~Server() { Stop(); }

void Server::Stop() {
  if (!impl_ || impl_->stopping.exchange(true)) return;
  const char byte = 0;
  if (write(impl_->wake[1], &byte, 1) < 0) {
    // The loop wakes within its poll timeout anyway.
  }
  if (impl_->thread.joinable()) impl_->thread.join();
}

}  // namespace pikv::http
