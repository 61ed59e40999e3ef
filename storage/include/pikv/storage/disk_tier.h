// DiskTier: the disk tier, chunk objects in RocksDB under the node's data dir.
//
// Owns: the RocksDB instance, an in-memory index (key -> size, recency,
// pins) and the LRU order. Objects live in the default column family with
// large values in blob files, so compaction does not rewrite them; a second
// column family "lru" holds (size, last-access tick) per key, written in the
// same atomic batch as the object. On open the index and LRU order are
// rebuilt from "lru", so contents and recency survive a restart. The LRU
// record also holds the object's owner (tenant, writer: proto/owner.h), so
// tenant checks and revocations need no object read, across restarts too.
// Capacity counts object bytes (not SST/blob file overhead); a put evicts
// least recently used, unpinned objects until it fits. Pins live in memory
// only. Every Get verifies size and checksum; a corrupt value is deleted and
// reported as a miss.
// Thread-safety: all methods are thread-safe; mu_ guards the index only,
// RocksDB reads run outside it.
#pragma once

#include <atomic>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "pikv/common/mutex.h"
#include "pikv/proto/owner.h"
#include "pikv/storage/indexed_tier.h"

namespace pikv::storage {

struct DiskTierOptions {
  std::string path;                       // RocksDB directory; created if missing
  uint64_t capacity_bytes = 16ull << 30;  // object bytes kept before LRU eviction
  uint64_t min_blob_bytes = 64u << 10;    // values at least this large go to blob files
  bool sync_writes = false;               // fsync each put (durability vs throughput)
};

struct DiskTierEntry {
  uint64_t size = 0;
  uint64_t tick = 0;
  uint32_t pins = 0;
  OwnerId owner = kUnknownOwner;
  std::list<ChunkKey>::iterator lru;
};

class DiskTier final : public IndexedTier<DiskTierEntry> {
 public:
  static Result<std::unique_ptr<DiskTier>> Open(const DiskTierOptions& options,
                                                EventListener listener);
  ~DiskTier() override;  // flushes memtables

  TierKind kind() const override { return TierKind::kDisk; }
  Status Put(const ChunkKey& key, const SharedBuffer& object) override;
  Result<SharedBuffer> Get(const ChunkKey& key) override;
  bool Contains(const ChunkKey& key) override;
  Status Remove(const ChunkKey& key) override;
  TierStats Stats() const override;
  // The owners kept in the index (and its LRU records): no object is read.
  std::vector<std::optional<Owner>> OwnersOf(std::span<const ChunkKey> keys) override;

  // Persists memtables so a restart finds everything written so far.
  Status Flush();

 private:
  struct Db;

  DiskTier(std::unique_ptr<Db> db, const DiskTierOptions& options, EventListener listener);
  Status RebuildIndex();
  // Deletes key's object and metadata; the caller reports the event.
  Status DeleteFromDb(const ChunkKey& key);

  std::unique_ptr<Db> db_;
  DiskTierOptions options_;
  Mutex write_mu_ PIKV_ACQUIRED_BEFORE(mu_);  // serializes puts and removes
  uint64_t used_ PIKV_GUARDED_BY(mu_) = 0;
  uint64_t next_tick_ PIKV_GUARDED_BY(mu_) = 1;
};

}  // namespace pikv::storage
