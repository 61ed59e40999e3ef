// IndexedTier: what the CPU and disk tiers share, an in-memory index of
// their objects under one lock, with pin counts and the keys' recency order.
//
// Entry has `uint32_t pins` and `std::list<ChunkKey>::iterator lru` (its
// key's place in lru_); the tier adds what it keeps per object.
// Thread-safety: Pin, Unpin, Keys and LruOrder take mu_; the derived tier
// holds mu_ whenever it reads or changes index_ or lru_.
#pragma once

#include <list>
#include <unordered_map>
#include <vector>

#include "pikv/common/mutex.h"
#include "pikv/storage/tier.h"

namespace pikv::storage {

template <typename E>
class IndexedTier : public Tier {
 public:
  Status Pin(const ChunkKey& key) override {
    MutexLock lock(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) return NotFound();
    it->second.pins++;
    return Status::Ok();
  }
  Status Unpin(const ChunkKey& key) override {
    MutexLock lock(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) return NotFound();
    if (it->second.pins == 0) return InvalidArgument("object is not pinned");
    it->second.pins--;
    return Status::Ok();
  }
  Result<std::vector<ChunkKey>> Keys() override { return LruOrder(); }

  // Keys from most to least recently used.
  std::vector<ChunkKey> LruOrder() const {
    MutexLock lock(mu_);
    return {lru_.begin(), lru_.end()};
  }

 protected:
  using Entry = E;
  using Tier::Tier;

  mutable Mutex mu_;
  std::unordered_map<ChunkKey, Entry, ChunkKeyHash> index_ PIKV_GUARDED_BY(mu_);
  std::list<ChunkKey> lru_ PIKV_GUARDED_BY(mu_);  // front = most recent
};

}  // namespace pikv::storage
