// Registry: which node holds which chunk in which tier, for tens of millions
// of chunks.
//
// The tree cluster -> node -> tier -> keys is kept as its inverted index: a
// table from key to locations, sharded by key hash, each shard an
// open-addressing table (linear probing, backward-shift deletion) of 32-byte
// slots: the 16-byte key, up to four inline 16-bit location codes, a count
// and the key's provenance (its first reported writer, as an OwnerId, and
// whether copies by other writers were admitted too). A key with more locations spills to a
// per-shard side map, the only place a key costs a heap allocation. Per-(node, tier) counts are
// kept incrementally; the keys of one node (inventory, node removal) are found by scanning, which
// is rare and runs one shard lock at a time. Thread-safety: all methods are thread-safe; each takes
// one shard lock at a time, never two.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "pikv/proto/chunk_key.h"
#include "pikv/proto/location.h"
#include "pikv/proto/owner.h"

namespace pikv::controller {

class Registry {
 public:
  static constexpr uint16_t kMaxNodes = (1 << 14) - 1;  // location codes keep 14 bits of node

  explicit Registry(size_t num_shards = 64);
  ~Registry();

  // Who wrote a key: the owner the first report naming one gave, and
  // whether a copy by another writer was admitted since.
  struct Provenance {
    OwnerId owner = kUnknownOwner;
    bool several_writers = false;
  };

  // True if the location was new. `owner`: who wrote the admitted copy.
  bool Admit(const ChunkKey& key, Location location, OwnerId owner = kUnknownOwner);
  // True if the location was there.
  bool Evict(const ChunkKey& key, Location location);
  // Appends key's locations to `out` (unordered); returns its provenance.
  Provenance Locate(const ChunkKey& key, std::vector<Location>& out) const;
  // Drops every location on `node`; returns how many.
  uint64_t RemoveNode(uint16_t node);
  // Every key `node` holds in `tier`.
  std::vector<ChunkKey> Inventory(uint16_t node, TierKind tier) const;
  uint64_t CountOn(uint16_t node, TierKind tier) const;

  uint64_t keys() const { return keys_.load(std::memory_order_relaxed); }
  uint64_t locations() const { return locations_.load(std::memory_order_relaxed); }
  // Bytes held by the tables and side maps.
  uint64_t MemoryBytes() const;

 private:
  class Shard;
  Shard& ShardOf(const ChunkKey& key) const;

  std::vector<std::unique_ptr<Shard>> shards_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // [node * kNumTiers + tier]
  std::atomic<uint64_t> keys_{0}, locations_{0};
};

}  // namespace pikv::controller
