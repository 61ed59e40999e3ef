// CpuTier (L1): chunk objects in one shared-memory arena, LRU-evicted.
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
// Thread-safety: all methods are thread-safe. Lock order: mu_ before the
// allocator's own lock (a block freed under mu_ takes only the allocator's).
#pragma once

#include <atomic>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "pikv/common/mutex.h"
#include "pikv/storage/tier.h"

namespace pikv::storage {

struct CpuTierOptions {
  uint64_t capacity_bytes = 1ull << 30;  // arena size
  bool prefault = false;                 // fault every arena page in at start
};

class CpuTier final : public Tier {
 public:
  static Result<std::unique_ptr<CpuTier>> Create(const CpuTierOptions& options,
                                                 EventListener listener);
  ~CpuTier() override;

  TierKind kind() const override { return TierKind::kCpu; }
  Status Put(const ChunkKey& key, const SharedBuffer& object) override;
  Result<SharedBuffer> Get(const ChunkKey& key) override;
  bool Contains(const ChunkKey& key) override;
  Status Remove(const ChunkKey& key) override;
  Status Pin(const ChunkKey& key) override;
  Status Unpin(const ChunkKey& key) override;
  TierStats Stats() const override;

  // Put that also returns the arena copy (not counted as a hit).
  Result<SharedBuffer> PutAndHold(const ChunkKey& key, const SharedBuffer& object);

  // Keys from most to least recently used.
  std::vector<ChunkKey> LruOrder() const;

 private:
  struct Shared;
  struct Block;
  struct Entry {
    std::shared_ptr<Block> block;
    uint64_t size = 0;
    uint32_t pins = 0;
    std::list<ChunkKey>::iterator lru;
  };

  CpuTier(std::shared_ptr<Shared> shared, EventListener listener);
  // Evicts the least recently used evictable entry; false if there is none.
  bool EvictOneLocked(std::vector<TierEvent>& events) PIKV_REQUIRES(mu_);
  void Emit(const std::vector<TierEvent>& events);
  Result<SharedBuffer> HoldLocked(const ChunkKey& key) PIKV_REQUIRES(mu_);

  std::shared_ptr<Shared> shared_;
  EventListener listener_;
  mutable Mutex mu_;
  std::unordered_map<ChunkKey, Entry, ChunkKeyHash> index_ PIKV_GUARDED_BY(mu_);
  std::list<ChunkKey> lru_ PIKV_GUARDED_BY(mu_);  // front = most recent
  std::unique_ptr<TierCounters> counters_;
};

}  // namespace pikv::storage
