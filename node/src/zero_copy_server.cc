#include "zero_copy_server.h"

#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "pikv/common/guarded_thread.h"
#include "pikv/proto/share_wire.h"
#include "pikv/transport/local_channel.h"

namespace pikv::node {

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kPollInterval = std::chrono::milliseconds(100);
// A client that does not take a reply within this long is dropped.
constexpr auto kSendTimeout = std::chrono::seconds(2);

bool IsOwnUser(int fd) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return false;
  return cred.uid == geteuid();
}

Result<int> Listen(const std::string& path) {
  sockaddr_un addr{};
  if (path.empty() || path.size() >= sizeof addr.sun_path)
    return InvalidArgument("zero-copy socket path '" + path + "' does not fit");
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  struct stat st {};
  // A socket left by a node that died is replaced; any other file is not ours.
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) return IoError(path + " exists and is not a socket");
    unlink(path.c_str());
  }
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return IoError(std::string("socket: ") + std::strerror(errno));
  if (bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 ||
      chmod(path.c_str(), 0600) != 0 || listen(fd, 64) != 0) {
    Status s = IoError("listen on " + path + ": " + std::strerror(errno));
    close(fd);
    return s;
  }
  return fd;
}

}  // namespace

ZeroCopyServer::ZeroCopyServer(storage::StorageManager& storage, const ZeroCopyOptions& options,
                               const WireLimits& limits)
    : storage_(storage),
      options_(options),
      limits_(limits),
      leases_({options.lease_ttl, options.max_client_bytes > 0 ? options.max_client_bytes
                                                               : storage.cpu().arena_bytes() / 2}),
      path_(options.path) {}

Result<std::unique_ptr<ZeroCopyServer>> ZeroCopyServer::Start(const ZeroCopyOptions& options,
                                                              storage::StorageManager& storage,
                                                              const WireLimits& limits) {
  if (options.lease_ttl.count() < 1) return InvalidArgument("zero-copy lease ttl must be positive");
  if (options.max_clients < 1) return InvalidArgument("zero-copy max_clients must be >= 1");
  auto fd = Listen(options.path);
  if (!fd.ok()) return fd.status();
  std::unique_ptr<ZeroCopyServer> server(new ZeroCopyServer(storage, options, limits));
  server->listen_fd_ = *fd;
  server->acceptor_ =
      EssentialThread("zero-copy acceptor", [s = server.get()] { s->AcceptLoop(); });
  return server;
}

ZeroCopyServer::~ZeroCopyServer() { Stop(); }

void ZeroCopyServer::Stop() {
  if (stopping_.exchange(true)) return;
  if (acceptor_.joinable()) acceptor_.join();
  {
    std::lock_guard lock(connections_mu_);
    for (auto& c : connections_) shutdown(c.fd, SHUT_RDWR);  // wakes their reads
  }
  for (auto& c : connections_) {
    if (c.thread.joinable()) c.thread.join();
    close(c.fd);
  }
  connections_.clear();
  close(listen_fd_);
  unlink(path_.c_str());
}

void ZeroCopyServer::ReapFinished() {
  std::lock_guard lock(connections_mu_);
  for (auto it = connections_.begin(); it != connections_.end();) {
    if (it->done) {
      it->thread.join();
      close(it->fd);
      it = connections_.erase(it);
    } else {
      ++it;
    }
  }
}

void ZeroCopyServer::AcceptLoop() {
  while (!stopping_) {
    leases_.Expire(Clock::now());
    ReapFinished();
    pollfd p{listen_fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(kPollInterval.count())) <= 0) continue;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    size_t open_now;
    {
      std::lock_guard lock(connections_mu_);
      open_now = connections_.size();
    }
    const bool too_many = open_now >= static_cast<size_t>(options_.max_clients);
    if (too_many || !IsOwnUser(fd)) {
      counters_.Add(stats::ZeroCopyCounter::kRefusedClients);
      spdlog::warn("zero-copy: refused a client ({})",
                   too_many ? "too many clients" : "another user");
      close(fd);
      continue;
    }
    std::lock_guard lock(connections_mu_);
    Connection& c = connections_.emplace_back();
    c.fd = fd;
    c.id = next_client_++;
    c.thread = std::thread([this, &c] { Serve(c); });
  }
}

void ZeroCopyServer::Serve(Connection& c) {
  counters_.Add(stats::ZeroCopyCounter::kClients);
  // Nothing escapes a thread: whatever happens, the client's loans end with it.
  try {
    SetLocalTimeout(c.fd, kSendTimeout);
    timeval no_timeout{};  // reads wait for the client as long as it stays connected
    setsockopt(c.fd, SOL_SOCKET, SO_RCVTIMEO, &no_timeout, sizeof no_timeout);
    const Header hello = EncodeShareHello(
        {static_cast<int64_t>(storage_.cpu().arena_bytes()), /*seals_ahead=*/true});
    Status sent = SendLocal(c.fd, hello, storage_.cpu().arena_fd());
    while (sent.ok() && !stopping_) {
      auto request = RecvLocal(c.fd, limits_);
      if (!request.ok()) {
        if (request.code() != ErrorCode::kUnavailable) {
          counters_.Add(stats::ZeroCopyCounter::kErrors);
          spdlog::warn("zero-copy client {}: {}", c.id, request.status().ToString());
        }
        break;  // closed, or undecodable: the stream cannot be trusted after it
      }
      counters_.Add(stats::ZeroCopyCounter::kRequests);
      if (auto reply = Handle(c.id, *request)) sent = SendLocal(c.fd, *reply);
    }
  } catch (const std::exception& e) {
    spdlog::error("zero-copy client {}: {}", c.id, e.what());
  }
  leases_.DropClient(c.id);
  shutdown(c.fd, SHUT_RDWR);  // the client sees the end now; the reaper closes the fd
  c.done = true;
}

std::optional<Header> ZeroCopyServer::Handle(uint64_t client, const Header& request) {
  switch (request.type) {
    case MsgType::kLease:
      return HandleLease(client, request);
    case MsgType::kRelease:
      for (int64_t id : request.values) {
        if (!leases_.Release(client, static_cast<uint64_t>(id)))
          counters_.Add(stats::ZeroCopyCounter::kErrors);
      }
      return std::nullopt;
    case MsgType::kReserve:
      return HandleReserve(client, request);
    case MsgType::kCommit:
      return HandleCommit(client, request);
    case MsgType::kWritten:
      HandleWritten(client, request);
      return std::nullopt;
    default:
      counters_.Add(stats::ZeroCopyCounter::kErrors);
      return ReplyTo(request, ErrorCode::kUnsupported,
                     "not a zero-copy request: " + std::string(MsgTypeName(request.type)));
  }
}

Header ZeroCopyServer::HandleLease(uint64_t client, const Header& request) {
  Header reply = ReplyTo(request);
  const uint8_t* base = storage_.cpu().arena_base();
  std::vector<SharedBuffer> held;
  for (auto& object : storage_.GetEachInCpuOrDisk(request.keys, &options_.identity.tenant)) {
    if (!object) {
      reply.values.insert(reply.values.end(), {static_cast<int64_t>(ErrorCode::kNotFound), 0, 0});
      continue;
    }
    reply.values.insert(reply.values.end(), {static_cast<int64_t>(ErrorCode::kOk),
                                             static_cast<int64_t>(object->data() - base),
                                             static_cast<int64_t>(object->size())});
    held.push_back(std::move(*object));
  }
  if (held.empty()) return reply;
  const size_t count = held.size();
  auto lease = leases_.Lease(client, std::move(held), Clock::now());
  if (!lease.ok()) return ReplyTo(request, lease.code(), lease.status().message());
  counters_.Add(stats::ZeroCopyCounter::kLeasedObjects, count);
  EncodeLoanTerms({static_cast<int64_t>(*lease), static_cast<int64_t>(leases_.ttl().count())},
                  reply);
  return reply;
}

Header ZeroCopyServer::HandleReserve(uint64_t client, const Header& request) {
  if (request.values.empty() || request.values.size() > limits_.max_batch) {
    counters_.Add(stats::ZeroCopyCounter::kErrors);
    return ReplyTo(request, ErrorCode::kInvalidArgument,
                   "reserve names 1 to " + std::to_string(limits_.max_batch) + " sizes");
  }
  // Per size [code, reservation, offset]: the space the node had room for.
  Header reply = ReplyTo(request);
  const auto now = Clock::now();
  for (const int64_t size : request.values) {
    auto reserved = ReserveOne(client, size, now);
    if (!reserved.ok() && reply.reason.empty()) reply.reason = reserved.status().message();
    reply.values.insert(reply.values.end(),
                        {static_cast<int64_t>(reserved.code()),
                         reserved.ok() ? static_cast<int64_t>(reserved->first) : 0,
                         reserved.ok() ? static_cast<int64_t>(reserved->second) : 0});
  }
  EncodeLoanTerms({.ttl_ms = static_cast<int64_t>(leases_.ttl().count())}, reply);
  return reply;
}

Result<std::pair<uint64_t, uint64_t>> ZeroCopyServer::ReserveOne(uint64_t client, int64_t size,
                                                                 Clock::time_point now) {
  if (size < 1 || static_cast<uint64_t>(size) > limits_.max_payload_bytes) {
    counters_.Add(stats::ZeroCopyCounter::kErrors);
    return Status(ErrorCode::kTooLarge, "reserve of " + std::to_string(size) + " bytes: 1 to " +
                                            std::to_string(limits_.max_payload_bytes));
  }
  if (Status s = leases_.WithinShare(client, static_cast<uint64_t>(size)); !s.ok()) return s;
  auto space = storage_.Reserve(static_cast<uint64_t>(size));
  if (!space.ok()) return space.status();
  const uint64_t offset = space->offset;
  auto id = leases_.Reserve(client, std::move(*space), now);
  if (!id.ok()) return id.status();
  return std::pair<uint64_t, uint64_t>{*id, offset};
}

void ZeroCopyServer::HandleWritten(uint64_t client, const Header& request) {
  auto reserved = request.values.size() == 2
                      ? leases_.FindReservation(client, static_cast<uint64_t>(request.values[0]))
                      : Result<LeaseTable::Reserved>(InvalidArgument("not [reservation, bytes]"));
  const int64_t written = request.values.size() == 2 ? request.values[1] : -1;
  if (!reserved.ok() || written < 0 ||
      !reserved->seal_ahead->Mark({reserved->space.data, reserved->space.size},
                                  static_cast<uint64_t>(written))) {
    counters_.Add(stats::ZeroCopyCounter::kErrors);  // no reply to tell: the commit hashes the
                                                     // whole object instead
  }
}

Header ZeroCopyServer::HandleCommit(uint64_t client, const Header& request) {
  if (request.keys.empty() || request.keys.size() != request.values.size()) {
    counters_.Add(stats::ZeroCopyCounter::kErrors);
    return ReplyTo(request, ErrorCode::kInvalidArgument, "commit names one reservation per key");
  }
  const bool seal = DecodeCommit(request).seal;
  Header reply = ReplyTo(request);
  for (size_t i = 0; i < request.keys.size(); ++i) {
    const Status s = CommitOne(client, request.keys[i], request.values[i], seal);
    if (!s.ok() && reply.reason.empty()) reply.reason = s.message();  // the first refusal's
    reply.values.push_back(static_cast<int64_t>(s.code()));
  }
  return reply;
}

Status ZeroCopyServer::CommitOne(uint64_t client, const ChunkKey& key, int64_t reservation,
                                 bool seal) {
  auto reserved = leases_.TakeReservation(client, static_cast<uint64_t>(reservation));
  if (!reserved.ok()) {
    counters_.Add(stats::ZeroCopyCounter::kCommitFailures);
    return reserved.status();
  }
  auto& space = reserved->space;
  Status s;
  if (seal) {
    const auto checksum = reserved->seal_ahead->Finish({space.data, space.size});
    counters_.Add(checksum ? stats::ZeroCopyCounter::kSealedAhead
                           : stats::ZeroCopyCounter::kSealedWhole);
    s = storage_.SealAndCommit(key, std::move(space), checksum, &options_.identity);
  } else {
    s = storage_.Commit(key, std::move(space), std::nullopt, &options_.identity);
  }
  if (!s.ok()) {
    counters_.Add(stats::ZeroCopyCounter::kCommitFailures);
    spdlog::warn("zero-copy client {}: commit refused: {}", client, s.ToString());
    return s;
  }
  counters_.Add(stats::ZeroCopyCounter::kCommits);
  return s;
}

}  // namespace pikv::node
