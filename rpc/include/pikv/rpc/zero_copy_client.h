// ZeroCopyClient: a local client's side of its node's zero-copy channel
// (transport/local_channel.h; the node's side is node/src/zero_copy_server.h).
//
// Connecting receives the node's CPU arena (a memfd) and maps it read-only.
// Lease returns the objects of a batch that the node holds on this host (in
// its CPU tier, or copied up into it from its disk tier) as views into that
// mapping: no byte is copied, and the node keeps them from being evicted or
// overwritten until the last view is dropped (the release is sent then) or
// the lease's TTL passes. The TTL is counted from before the request was
// sent, so the deadline given here is never later than the node's: a reader
// that checks it after reading knows whether what it read was still the
// object. Reserve gives writable arena space (mapped read-write on first
// use); Commit has the node verify it and admit it without a copy; dropping
// an uncommitted Space gives it back.
// The mappings stay valid while any view or Space needs them, even after
// this client is destroyed or the node dies.
// Thread-safety: thread-safe (one call on the socket at a time); views and
// Spaces may be dropped on any thread.
#pragma once

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "pikv/common/status.h"
#include "pikv/proto/chunk_key.h"
#include "pikv/proto/shared_buffer.h"

namespace pikv::rpc {

class ZeroCopyClient {
 public:
  using Clock = std::chrono::steady_clock;

  struct Leased {
    std::vector<Result<SharedBuffer>> objects;  // kNotFound: in neither its CPU nor its disk tier
    Clock::time_point deadline;                 // the views are the objects until then
  };
  struct Loan;  // a lease or reservation held on the node (src/)

  // Writable space in the node's arena; an uncommitted one is given back
  // when dropped.
  class Space {
   public:
    std::span<uint8_t> bytes() const { return bytes_; }
    Clock::time_point deadline() const { return deadline_; }
    // Tells the node the first `bytes` are written for good (the header
    // first, then the payload in order), so that it hashes them while the
    // rest is written and a sealing commit has only the tail left. The
    // writer must not change them after. Any thread; no reply.
    void Written(uint64_t bytes) const;

   private:
    friend class ZeroCopyClient;
    std::span<uint8_t> bytes_;
    Clock::time_point deadline_;
    std::shared_ptr<Loan> loan_;
  };

  // kUnavailable when no node listens at `socket_path` (or it refuses us).
  static Result<std::shared_ptr<ZeroCopyClient>> Connect(const std::string& socket_path,
                                                         std::chrono::milliseconds timeout);
  ~ZeroCopyClient();

  Result<Leased> Lease(std::span<const ChunkKey> keys, std::chrono::milliseconds timeout);
  // Space for each of `sizes` (WireLimits::max_batch at most), in one round
  // trip: per size its Space, or why the node had none (kRejected: past
  // this client's share of the arena, or no room in it).
  Result<std::vector<Result<Space>>> ReserveMany(std::span<const uint64_t> sizes,
                                                 std::chrono::milliseconds timeout);
  Result<Space> Reserve(uint64_t bytes, std::chrono::milliseconds timeout);
  // Commits each space under its key, in one round trip: per key, whether
  // the node admitted it. A batch refused whole (more keys than spaces, or
  // than WireLimits::max_batch) gives every space back. `seal`: the objects' payload checksums were
  // left 0 for the node to compute (SealChunkObject), saving the writer a pass over the bytes.
  Result<std::vector<Status>> CommitMany(std::span<const ChunkKey> keys, std::vector<Space> spaces,
                                         std::chrono::milliseconds timeout, bool seal = false);
  Status Commit(const ChunkKey& key, Space space, std::chrono::milliseconds timeout,
                bool seal = false);

  // False once a call failed in a way that leaves the stream unusable (the
  // node died, a reply timed out): make a new client.
  bool healthy() const;
  uint64_t arena_bytes() const;

  // The read-only mapping of the node's arena that leased objects are views
  // of, kept mapped while `keep` lives (a device registers it once to copy
  // leased objects without a bounce through host memory).
  struct Arena {
    std::shared_ptr<const void> keep;
    const uint8_t* data = nullptr;
    uint64_t size = 0;
  };
  Arena ReadOnlyArena() const;

  struct Channel;  // the socket and mappings, shared with the views (src/)
  struct Mapping;  // one mapping of the arena (src/)

 private:
  std::shared_ptr<Loan> NewLoan(int64_t id, std::shared_ptr<Mapping> mapping);
  explicit ZeroCopyClient(std::shared_ptr<Channel> channel);
  std::shared_ptr<Channel> channel_;
};

}  // namespace pikv::rpc
