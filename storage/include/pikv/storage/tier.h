// The tier interface every storage level implements (CPU, disk, remote), and
// the events and stats they report. The base holds what every tier shares:
// the listener its events go to, its counters, and the owner scans built on
// OwnersOf and Keys.
//
// Contract shared by all tiers:
//   - Put stores the object's bytes under its key; kRejected when it cannot
//     fit (capacity, pins). Storing an existing key refreshes it.
//   - Get returns the object, verified against its checksum unless the tier
//     holds only bytes it verified on admission, or kNotFound. A corrupt copy
//     is deleted, counted, and reported as kNotFound: never served.
//   - Remove deletes regardless of pins; readers' handles stay valid.
//   - Every admit and evict (capacity eviction, removal, corruption) is
//     reported to the EventListener, outside the tier's locks (but not
//     always outside another's: the CPU tier's evictions for a Redis hit's
//     space are reported under the remote tier's mutex, storage/README.md),
//     so a listener never calls back into storage.
// All methods are thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "pikv/common/status.h"
#include "pikv/proto/chunk_key.h"
#include "pikv/proto/owner.h"
#include "pikv/proto/shared_buffer.h"
#include "pikv/proto/tier_kind.h"

namespace pikv::storage {

using ::pikv::Bit;
using ::pikv::kNumTiers;
using ::pikv::TierKind;
using ::pikv::TierMask;
using ::pikv::TierName;

enum class EventKind : uint8_t { kAdmit = 1, kEvict = 2 };

struct TierEvent {
  TierKind tier;
  EventKind kind;
  ChunkKey key;
  uint64_t bytes;
  OwnerId owner = kUnknownOwner;  // an admit's: read from the object as it is admitted
};

// Receives events in batches; must be cheap and must not call back into the tier.
using EventListener = std::function<void(std::span<const TierEvent>)>;

struct TierStats {
  uint64_t capacity_bytes = 0;  // 0 = no limit (a remote server without maxmemory)
  uint64_t used_bytes = 0;
  uint64_t faulted_bytes = 0;  // CPU: arena bytes the prefaulter has faulted in (0: not running)
  uint64_t entries = 0;
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t admits = 0;
  uint64_t evictions = 0;
  uint64_t rejects = 0;
  uint64_t corruptions = 0;
  uint64_t errors = 0;
};

struct TierCounters;  // storage-internal counters behind TierStats

class Tier {
 public:
  virtual ~Tier();
  virtual TierKind kind() const = 0;
  virtual Status Put(const ChunkKey& key, const SharedBuffer& object) = 0;
  virtual Result<SharedBuffer> Get(const ChunkKey& key) = 0;
  virtual bool Contains(const ChunkKey& key) = 0;
  virtual Status Remove(const ChunkKey& key) = 0;
  // Pinned objects are never evicted for capacity. Counted: n pins need n unpins.
  virtual Status Pin(const ChunkKey&) { return Unsupported("tier has no pins"); }
  virtual Status Unpin(const ChunkKey&) { return Unsupported("tier has no pins"); }
  virtual TierStats Stats() const = 0;

  // Batched forms; a remote tier pipelines them, the default loops.
  virtual std::vector<Result<SharedBuffer>> GetMany(std::span<const ChunkKey> keys);
  virtual std::vector<Status> PutMany(std::span<const ChunkKey> keys,
                                      std::span<const SharedBuffer> objects);
  virtual std::vector<bool> ContainsMany(std::span<const ChunkKey> keys);

  // Each key's owner (proto/owner.h); nullopt for a key the tier does not
  // hold or whose owner is not known. A remote tier pipelines the batch.
  virtual std::vector<std::optional<Owner>> OwnersOf(std::span<const ChunkKey> keys) = 0;
  std::optional<Owner> OwnerOf(const ChunkKey& key) { return OwnersOf({&key, 1})[0]; }
  // Every key the tier holds (the remote tier: its namespace's, by SCAN).
  virtual Result<std::vector<ChunkKey>> Keys() = 0;
  // Those of `keys` whose object `writer` wrote.
  std::vector<ChunkKey> WrittenBy(std::span<const ChunkKey> keys, std::string_view writer);
  // Every key held whose object `writer` wrote (a revocation's sweep, not a hot path).
  Result<std::vector<ChunkKey>> KeysWrittenBy(std::string_view writer);

 protected:
  explicit Tier(EventListener listener);
  // Reports events to the listener; the caller holds none of its tier's locks.
  void Emit(const std::vector<TierEvent>& events) const;

  const std::unique_ptr<TierCounters> counters_;

 private:
  EventListener listener_;
};

}  // namespace pikv::storage
