#include "pikv/rpc/zero_copy_client.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "pikv/proto/share_wire.h"
#include "pikv/transport/local_channel.h"

namespace pikv::rpc {

// One mapping of the whole arena; unmapped when the last user lets go.
struct ZeroCopyClient::Mapping {
  uint8_t* base = nullptr;
  uint64_t size = 0;
  ~Mapping() {
    if (base) munmap(base, size);
  }
};

namespace {

using Mapping = ZeroCopyClient::Mapping;

// Not populated: that would allocate every page of the node's arena. Reads
// fault pages in 16 at a time (the kernel's fault-around on shared memory);
// reserved space is populated when it is handed out (WritePopulator).
Result<std::shared_ptr<Mapping>> MapArena(int fd, uint64_t size, bool writable) {
  void* p = mmap(nullptr, size, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED)
    return IoError(std::string("mmap the node's arena: ") + std::strerror(errno));
  auto m = std::make_shared<Mapping>();
  m->base = static_cast<uint8_t*>(p);
  m->size = size;
  return m;
}

// Write faults are taken one page at a time; populating a range in one call
// first is several times cheaper (Linux 5.14+; a no-op before). Populating
// is done once per region of the writable mapping: the kernel walks every
// page of the range again even when all are mapped already (22 ms per
// 512 MiB), and a mapped page stays mapped while the arena lives.
class WritePopulator {
 public:
  static constexpr uint64_t kRegion = 2u << 20;

  explicit WritePopulator(uint64_t arena_bytes)
      : arena_bytes_(arena_bytes), done_((arena_bytes + kRegion - 1) / kRegion, false) {}

  // Populates the regions of `bytes` (at `offset` in the mapping at `base`)
  // not populated before.
  void Prepare(uint8_t* base, uint64_t offset, uint64_t size) {
    if (size == 0) return;
    const uint64_t first = offset / kRegion, last = (offset + size - 1) / kRegion;
    std::vector<std::pair<uint64_t, uint64_t>> runs;  // [begin, end) regions
    {
      std::lock_guard lock(mu_);
      for (uint64_t r = first; r <= last && r < done_.size(); ++r) {
        if (done_[r]) continue;
        done_[r] = true;
        if (!runs.empty() && runs.back().second == r) {
          runs.back().second = r + 1;
        } else {
          runs.emplace_back(r, r + 1);
        }
      }
    }
    // Outside the lock: two writers' ranges never overlap, and a region
    // marked but not yet populated only costs its writer page faults.
    for (auto [begin, end] : runs) {
      const uint64_t from = begin * kRegion, to = std::min(end * kRegion, arena_bytes_);
      (void)madvise(base + from, to - from, MADV_POPULATE_WRITE);
    }
  }

 private:
  const uint64_t arena_bytes_;
  std::mutex mu_;
  std::vector<bool> done_;  // guarded by mu_
};

// One object's outcome in a batch reply: `reason` (the reply's one reason,
// the first refusal's) goes with the first refusal only; a code outside
// what the wire can carry is the node's protocol error.
Status OutcomeOf(int64_t code, const std::string& reason, bool& reason_given) {
  if (code == 0) return Status::Ok();
  if (code < 0 || code > INT32_MAX) return ProtocolError("an outcome code out of range");
  const bool first = !reason_given;
  reason_given = true;
  return Status(static_cast<ErrorCode>(code), first ? reason : "");
}

}  // namespace

struct ZeroCopyClient::Channel {
  int socket = -1;
  int arena_fd = -1;
  uint64_t arena_bytes = 0;
  bool seals_ahead = false;  // the node hashes written marks (kWritten); an older one would not
  std::shared_ptr<Mapping> read_only;
  std::shared_ptr<Mapping> writable;          // mapped on the first Reserve; guarded by call_mu
  std::unique_ptr<WritePopulator> populator;  // of `writable`; set with it
  std::mutex call_mu;                         // one request and its reply at a time
  std::mutex send_mu;                         // releases are written between calls' messages
  std::atomic<bool> healthy{true};
  uint64_t next_id = 1;  // guarded by call_mu

  ~Channel() {
    close(socket);
    close(arena_fd);
  }

  // Fire and forget (a release or a written mark has no reply). Any thread.
  void Tell(MsgType type, std::vector<int64_t> values) {
    if (!healthy) return;  // the node drops what a closed connection held
    Header h;
    h.type = type;
    h.values = std::move(values);
    std::lock_guard lock(send_mu);
    if (!SendLocal(socket, h).ok()) healthy = false;
  }
  void Release(uint64_t id) { Tell(MsgType::kRelease, {static_cast<int64_t>(id)}); }

  Result<Header> Call(Header request, std::chrono::milliseconds timeout) {
    std::lock_guard call(call_mu);
    if (!healthy) return Unavailable("the zero-copy channel is closed");
    request.request_id = next_id++;
    SetLocalTimeout(socket, timeout);
    Status sent;
    {
      std::lock_guard send(send_mu);
      sent = SendLocal(socket, request);
    }
    if (!sent.ok()) {
      healthy = false;
      return sent;
    }
    auto reply = RecvLocal(socket, WireLimits{});
    if (!reply.ok() || reply->type != request.type || reply->request_id != request.request_id) {
      healthy = false;  // a late or foreign reply: the stream is out of step
      return reply.ok() ? ProtocolError("zero-copy reply does not answer the request")
                        : reply.status();
    }
    if (reply->status != ErrorCode::kOk) return Status(reply->status, reply->reason);
    return reply;
  }
};

// A lease or reservation held on the node, and the mapping its bytes are
// read or written through: both stay valid while it lives, and it is given
// back with the last view or Space (unless the node already took it back).
struct ZeroCopyClient::Loan {
  std::shared_ptr<Channel> channel;
  std::shared_ptr<Mapping> mapping;
  uint64_t id = 0;
  bool given_back = false;
  ~Loan() {
    if (!given_back) channel->Release(id);
  }
};

std::shared_ptr<ZeroCopyClient::Loan> ZeroCopyClient::NewLoan(int64_t id,
                                                              std::shared_ptr<Mapping> mapping) {
  auto loan = std::make_shared<Loan>();
  loan->channel = channel_;
  loan->mapping = std::move(mapping);
  loan->id = static_cast<uint64_t>(id);
  return loan;
}

ZeroCopyClient::ZeroCopyClient(std::shared_ptr<Channel> channel) : channel_(std::move(channel)) {}
ZeroCopyClient::~ZeroCopyClient() = default;

Result<std::shared_ptr<ZeroCopyClient>> ZeroCopyClient::Connect(const std::string& socket_path,
                                                                std::chrono::milliseconds timeout) {
  auto socket = ConnectLocal(socket_path, timeout);
  if (!socket.ok()) return socket.status();
  auto channel = std::make_shared<Channel>();
  channel->socket = *socket;
  auto hello = RecvLocal(channel->socket, WireLimits{}, &channel->arena_fd);
  if (!hello.ok()) return Unavailable("no zero-copy hello: " + hello.status().message());
  const ShareHello said = DecodeShareHello(*hello);
  if (hello->type != MsgType::kShareHello || channel->arena_fd < 0 || said.arena_bytes <= 0)
    return ProtocolError("the zero-copy hello carries no arena");
  channel->arena_bytes = static_cast<uint64_t>(said.arena_bytes);
  channel->seals_ahead = said.seals_ahead;
  auto mapping = MapArena(channel->arena_fd, channel->arena_bytes, false);
  if (!mapping.ok()) return mapping.status();
  channel->read_only = std::move(*mapping);
  return std::shared_ptr<ZeroCopyClient>(new ZeroCopyClient(std::move(channel)));
}

bool ZeroCopyClient::healthy() const { return channel_->healthy; }
uint64_t ZeroCopyClient::arena_bytes() const { return channel_->arena_bytes; }

ZeroCopyClient::Arena ZeroCopyClient::ReadOnlyArena() const {
  const auto& m = channel_->read_only;
  return {m, m->base, m->size};
}

Result<ZeroCopyClient::Leased> ZeroCopyClient::Lease(std::span<const ChunkKey> keys,
                                                     std::chrono::milliseconds timeout) {
  Header request;
  request.type = MsgType::kLease;
  request.keys.assign(keys.begin(), keys.end());
  const auto sent_at = Clock::now();
  auto reply = channel_->Call(std::move(request), timeout);
  if (!reply.ok()) return reply.status();
  if (reply->values.size() != keys.size() * 3) {
    channel_->healthy = false;
    return ProtocolError("lease reply has " + std::to_string(reply->values.size()) +
                         " values for " + std::to_string(keys.size()) + " keys");
  }
  Leased out;
  const LoanTerms terms = DecodeLoanTerms(*reply);
  out.deadline = sent_at + std::chrono::milliseconds(terms.ttl_ms);
  std::shared_ptr<Loan> loan;
  if (terms.lease > 0) loan = NewLoan(terms.lease, channel_->read_only);
  const uint64_t arena = channel_->arena_bytes;
  for (size_t i = 0; i < keys.size(); ++i) {
    const auto code = static_cast<ErrorCode>(reply->values[3 * i]);
    const int64_t offset = reply->values[3 * i + 1], size = reply->values[3 * i + 2];
    if (code != ErrorCode::kOk) {
      out.objects.emplace_back(NotFound());
      continue;
    }
    // Where the node says the object lies must lie inside what it lent us.
    if (!loan || offset < 0 || size <= 0 || static_cast<uint64_t>(offset) > arena ||
        static_cast<uint64_t>(size) > arena - static_cast<uint64_t>(offset)) {
      out.objects.emplace_back(ProtocolError("lease outside the arena"));
      continue;
    }
    out.objects.emplace_back(
        SharedBuffer(loan->mapping->base + offset, static_cast<size_t>(size), loan));
  }
  return out;
}

Result<std::vector<Result<ZeroCopyClient::Space>>> ZeroCopyClient::ReserveMany(
    std::span<const uint64_t> sizes, std::chrono::milliseconds timeout) {
  if (sizes.empty()) return std::vector<Result<Space>>{};
  if (sizes.size() > WireLimits{}.max_batch)
    return InvalidArgument("a batch of " + std::to_string(sizes.size()) +
                           " reservations: " + std::to_string(WireLimits{}.max_batch) + " at most");
  std::shared_ptr<Mapping> writable;
  WritePopulator* populator;
  {
    std::lock_guard lock(channel_->call_mu);
    if (!channel_->writable) {
      auto mapping = MapArena(channel_->arena_fd, channel_->arena_bytes, true);
      if (!mapping.ok()) return mapping.status();
      channel_->writable = std::move(*mapping);
      channel_->populator = std::make_unique<WritePopulator>(channel_->arena_bytes);
    }
    writable = channel_->writable;
    populator = channel_->populator.get();
  }
  Header request;
  request.type = MsgType::kReserve;
  for (uint64_t size : sizes) request.values.push_back(static_cast<int64_t>(size));
  const auto sent_at = Clock::now();
  auto reply = channel_->Call(std::move(request), timeout);
  if (!reply.ok()) return reply.status();
  if (reply->values.size() != 3 * sizes.size()) {
    channel_->healthy = false;
    return ProtocolError("reserve reply has " + std::to_string(reply->values.size()) +
                         " values for " + std::to_string(sizes.size()) + " sizes");
  }
  const auto deadline = sent_at + std::chrono::milliseconds(DecodeLoanTerms(*reply).ttl_ms);
  std::vector<Result<Space>> out;
  bool reason_given = false;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const int64_t id = reply->values[3 * i + 1], offset = reply->values[3 * i + 2];
    if (Status refused = OutcomeOf(reply->values[3 * i], reply->reason, reason_given);
        !refused.ok()) {
      out.emplace_back(std::move(refused));
      continue;
    }
    auto loan = NewLoan(id, writable);
    if (id <= 0 || offset < 0 || static_cast<uint64_t>(offset) > channel_->arena_bytes ||
        sizes[i] > channel_->arena_bytes - static_cast<uint64_t>(offset)) {
      out.emplace_back(ProtocolError("reservation outside the arena"));  // the loan gives it back
      continue;
    }
    Space space;
    space.bytes_ = {loan->mapping->base + offset, static_cast<size_t>(sizes[i])};
    populator->Prepare(loan->mapping->base, static_cast<uint64_t>(offset), sizes[i]);
    space.deadline_ = deadline;
    space.loan_ = std::move(loan);
    out.emplace_back(std::move(space));
  }
  return out;
}

Result<ZeroCopyClient::Space> ZeroCopyClient::Reserve(uint64_t bytes,
                                                      std::chrono::milliseconds timeout) {
  auto spaces = ReserveMany({&bytes, 1}, timeout);
  if (!spaces.ok()) return spaces.status();
  return std::move((*spaces)[0]);
}

void ZeroCopyClient::Space::Written(uint64_t bytes) const {
  if (loan_ && loan_->channel->seals_ahead && bytes <= bytes_.size())
    loan_->channel->Tell(MsgType::kWritten,
                         {static_cast<int64_t>(loan_->id), static_cast<int64_t>(bytes)});
}

Result<std::vector<Status>> ZeroCopyClient::CommitMany(std::span<const ChunkKey> keys,
                                                       std::vector<Space> spaces,
                                                       std::chrono::milliseconds timeout,
                                                       bool seal) {
  if (keys.size() != spaces.size()) return InvalidArgument("one space per key");
  if (keys.size() > WireLimits{}.max_batch)
    return InvalidArgument("a batch of " + std::to_string(keys.size()) +
                           " commits: " + std::to_string(WireLimits{}.max_batch) + " at most");
  std::vector<Status> out(keys.size());
  Header request;
  request.type = MsgType::kCommit;
  std::vector<size_t> sent;  // which spaces the request names
  const auto now = Clock::now();
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!spaces[i].loan_) {
      out[i] = InvalidArgument("commit of an empty space");
    } else if (now >= spaces[i].deadline_) {
      out[i] = Timeout("the reservation expired before its commit");  // the node may reuse it
    } else {
      request.keys.push_back(keys[i]);
      request.values.push_back(static_cast<int64_t>(spaces[i].loan_->id));
      sent.push_back(i);
    }
  }
  if (sent.empty()) return out;
  EncodeCommit({seal}, request);
  // Once the node has answered, it holds none of the reservations for us
  // (a refused commit is freed there). A request refused whole took none:
  // they are given back as the spaces go; after a failed call the channel
  // is closed, and with it everything it held.
  auto reply = channel_->Call(std::move(request), timeout);
  for (size_t i : sent) spaces[i].loan_->given_back = reply.ok();
  if (!reply.ok()) return reply.status();
  if (reply->values.size() != sent.size()) {
    channel_->healthy = false;
    return ProtocolError("commit reply has " + std::to_string(reply->values.size()) +
                         " values for " + std::to_string(sent.size()) + " keys");
  }
  bool reason_given = false;
  for (size_t j = 0; j < sent.size(); ++j)
    out[sent[j]] = OutcomeOf(reply->values[j], reply->reason, reason_given);
  return out;
}

Status ZeroCopyClient::Commit(const ChunkKey& key, Space space, std::chrono::milliseconds timeout,
                              bool seal) {
  std::vector<Space> one;
  one.push_back(std::move(space));
  auto outcome = CommitMany({&key, 1}, std::move(one), timeout, seal);
  return outcome.ok() ? (*outcome)[0] : outcome.status();
}

}  // namespace pikv::rpc
