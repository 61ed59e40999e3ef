// CpuTier: the CPU tier, chunk objects in one shared-memory arena, LRU-evicted.
//
// Owns: the arena and its allocator, the key index, the LRU list, pin counts.
// Capacity is the arena size, so it is never exceeded, whatever the workload.
// Readers get SharedBuffers that reference arena bytes directly and hold the
// allocation: a held object stays valid after its entry is evicted or
// removed, and its range returns to the allocator when the last reader lets
// go. Capacity eviction takes the least recently used entry that is neither
// pinned nor held by a reader.
// Objects are verified before admission (by the StorageManager), so Get does
// not re-hash them.
// Zero-copy writers Reserve a range, fill it in place (a local client does so
// through its own mapping of the arena) and hand it back to Adopt, which
// admits it without a copy; a reservation dropped before that frees its range.
// The arena's fd, base and size are exposed so local clients can map it.
// Thread-safety: all methods are thread-safe. Lock order: mu_ before the
// allocator's own lock (a block freed under mu_ takes only the allocator's).
#pragma once

#include <atomic>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "pikv/common/mutex.h"
#include "pikv/proto/owner.h"
#include "pikv/storage/indexed_tier.h"

namespace pikv::storage {

struct CpuTierOptions {
  uint64_t capacity_bytes = 1ull << 30;  // arena size
  bool prefault = true;                  // fault the arena in on a thread (ArenaPrefaulter)
};

struct ArenaBlock;  // one allocation in the arena (cpu_tier.cc)

struct CpuTierEntry {
  std::shared_ptr<ArenaBlock> block;
  uint64_t size = 0;
  uint32_t pins = 0;
  std::list<ChunkKey>::iterator lru;
};

class CpuTier final : public IndexedTier<CpuTierEntry> {
 public:
  static Result<std::unique_ptr<CpuTier>> Create(const CpuTierOptions& options,
                                                 EventListener listener);
  ~CpuTier() override;

  TierKind kind() const override { return TierKind::kCpu; }
  Status Put(const ChunkKey& key, const SharedBuffer& object) override;
  Result<SharedBuffer> Get(const ChunkKey& key) override;
  bool Contains(const ChunkKey& key) override;
  Status Remove(const ChunkKey& key) override;
  TierStats Stats() const override;
  // The owners their objects' headers name.
  std::vector<std::optional<Owner>> OwnersOf(std::span<const ChunkKey> keys) override;

  // Put that also returns the arena copy (not counted as a hit); with
  // `stamp_writer`, the copy has that writer (StampWriter) before anyone
  // can read it.
  Result<SharedBuffer> PutAndHold(const ChunkKey& key, const SharedBuffer& object,
                                  std::string_view stamp_writer = {});

  using Block = ArenaBlock;
  // Arena space being filled by a writer, not yet an object: not in the
  // index, never evicted, freed when the last holder drops it.
  struct Reservation {
    std::shared_ptr<Block> block;
    uint8_t* data = nullptr;
    uint64_t offset = 0;  // from the arena's base
    uint64_t size = 0;
  };
  // Space for an object of `bytes`, evicting as a put would; kRejected when
  // unpinned, unheld objects cannot make room.
  Result<Reservation> Reserve(uint64_t bytes);
  // Admits a filled reservation as `key`'s object without copying it (the
  // caller has verified it). If `key` is already held, that copy wins and
  // the reservation is freed. Returns the admitted object.
  Result<SharedBuffer> Adopt(const ChunkKey& key, Reservation reservation);

  // The shared-memory region behind the tier, for local clients to map.
  int arena_fd() const;
  const uint8_t* arena_base() const;
  uint64_t arena_bytes() const;

 private:
  struct Shared;
  friend struct ArenaBlock;  // holds the Shared its range is in

  CpuTier(std::shared_ptr<Shared> shared, EventListener listener);
  // Evicts the least recently used evictable entry; false if there is none.
  bool EvictOneLocked(std::vector<TierEvent>& events) PIKV_REQUIRES(mu_);
  Result<SharedBuffer> HoldLocked(const ChunkKey& key) PIKV_REQUIRES(mu_);
  // A range of `bytes` (evicting as needed) or why there is none.
  Result<std::shared_ptr<Block>> AllocateLocked(uint64_t bytes, std::vector<TierEvent>& events)
      PIKV_REQUIRES(mu_);
  // Indexes a filled block as key's object unless key is already there.
  Result<SharedBuffer> InsertAndHold(const ChunkKey& key, std::shared_ptr<Block> block,
                                     uint64_t size, std::vector<TierEvent>& events);

  std::shared_ptr<Shared> shared_;
};

}  // namespace pikv::storage
