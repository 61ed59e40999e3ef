// Pieces every tier implementation shares; internal to storage/.
#pragma once

#include <atomic>
#include <cstdint>

#include "pikv/storage/tier.h"

namespace pikv::storage {

// The counters behind TierStats, updated lock-free.
struct TierCounters {
  std::atomic<uint64_t> hits{0}, misses{0}, admits{0}, evictions{0}, rejects{0}, corruptions{0},
      errors{0};

  void CopyTo(TierStats& s) const {
    s.hits = hits;
    s.misses = misses;
    s.admits = admits;
    s.evictions = evictions;
    s.rejects = rejects;
    s.corruptions = corruptions;
    s.errors = errors;
  }
};

// Pin counting over an index whose entries have a `pins` field; the caller
// holds the index's lock.
template <typename Index>
Status PinLocked(Index& index, const ChunkKey& key) {
  auto it = index.find(key);
  if (it == index.end()) return NotFound();
  it->second.pins++;
  return Status::Ok();
}

template <typename Index>
Status UnpinLocked(Index& index, const ChunkKey& key) {
  auto it = index.find(key);
  if (it == index.end()) return NotFound();
  if (it->second.pins == 0) return InvalidArgument("object is not pinned");
  it->second.pins--;
  return Status::Ok();
}

}  // namespace pikv::storage
