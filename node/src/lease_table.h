// LeaseTable: what a node has lent to the clients of its zero-copy channel.
//
// A lease keeps arena objects alive for a client that reads them in place:
// it holds their SharedBuffers, and a held object is neither evicted nor
// freed (CpuTier), so its bytes cannot be overwritten while leased. A
// reservation is arena space a client is filling before it commits it.
// Both end when the client gives them back, when its connection closes (the
// kernel closes a crashed client's socket), or when they expire: the TTL
// bounds what a live but stuck client can pin, and the client is told it so
// that it stops reading before the node reuses the memory. One client holds
// at most `max_client_bytes` at once; past that it is refused (and copies).
// Thread-safety: thread-safe. Memory is released outside the lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "pikv/common/mutex.h"
#include "pikv/proto/shared_buffer.h"
#include "pikv/storage/cpu_tier.h"
#include "seal_ahead.h"

namespace pikv::node {

class LeaseTable {
 public:
  using Clock = std::chrono::steady_clock;
  struct Options {
    std::chrono::milliseconds ttl{30000};
    uint64_t max_client_bytes = 1ull << 30;
  };
  struct Stats {
    uint64_t leases = 0, reservations = 0;  // held now
    uint64_t lent_bytes = 0;                // by both, now
    uint64_t granted = 0, released = 0, expired = 0, dropped = 0, refused = 0;
  };

  // A reservation, and the hashing of what its client marked written.
  struct Reserved {
    storage::CpuTier::Reservation space;
    std::shared_ptr<SealAhead> seal_ahead;
  };

  explicit LeaseTable(Options options) : options_(options) {}

  // A new lease of `objects` for `client`; kRejected past its byte limit.
  Result<uint64_t> Lease(uint64_t client, std::vector<SharedBuffer> objects, Clock::time_point now);
  Result<uint64_t> Reserve(uint64_t client, storage::CpuTier::Reservation space,
                           Clock::time_point now);
  // kRejected (counted) when `bytes` more would take `client` past its
  // limit: asked before arena space is made for a reservation, since
  // making it may evict.
  Status WithinShare(uint64_t client, uint64_t bytes);
  // Removes and returns `client`'s reservation `id`; kNotFound when it is
  // not the client's, was given back, or expired.
  Result<Reserved> TakeReservation(uint64_t client, uint64_t id);
  // The same, left in place: its space stays allocated while the copy lives
  // (even if the reservation ends meanwhile).
  Result<Reserved> FindReservation(uint64_t client, uint64_t id) const;
  // Gives back a lease or reservation; false when `client` holds no such id.
  bool Release(uint64_t client, uint64_t id);
  // Everything `client` holds (its connection closed).
  void DropClient(uint64_t client);
  // Ends what expired by `now`; returns how many.
  size_t Expire(Clock::time_point now);

  std::chrono::milliseconds ttl() const { return options_.ttl; }
  Stats stats() const;

 private:
  struct Loan {
    uint64_t client = 0;
    Clock::time_point expiry;
    uint64_t bytes = 0;
    std::vector<SharedBuffer> objects;  // a lease
    Reserved reserved;                  // a reservation
  };
  Result<uint64_t> Add(Loan loan);
  Status WithinShareLocked(uint64_t client, uint64_t bytes) PIKV_REQUIRES(mu_);
  // `client`'s reservation `id`, or null.
  const Loan* FindReservationLocked(uint64_t client, uint64_t id) const PIKV_REQUIRES(mu_);
  // Removes a loan and its bytes from its client's count; the caller
  // destroys it after the lock (that is where memory returns).
  Loan EraseLocked(std::unordered_map<uint64_t, Loan>::iterator it) PIKV_REQUIRES(mu_);
  // Ends every loan `ends` picks, counting them in `counter`.
  size_t EndWhere(const std::function<bool(const Loan&)>& ends, uint64_t Stats::*counter)
      PIKV_EXCLUDES(mu_);

  const Options options_;
  mutable Mutex mu_;
  uint64_t next_id_ PIKV_GUARDED_BY(mu_) = 1;
  std::unordered_map<uint64_t, Loan> loans_ PIKV_GUARDED_BY(mu_);
  std::unordered_map<uint64_t, uint64_t> client_bytes_ PIKV_GUARDED_BY(mu_);
  Stats stats_ PIKV_GUARDED_BY(mu_);  // counters only; what is held is counted in stats()
};

}  // namespace pikv::node
