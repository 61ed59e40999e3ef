#include "staging_pool.h"

#include <algorithm>

namespace pikv::rpc {

std::shared_ptr<uint8_t> StagingPool::Take(uint64_t size) {
  Block block;
  {
    std::lock_guard lock(mu_);
    // The smallest kept buffer that fits.
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->capacity >= size && (best == free_.end() || it->capacity < best->capacity)) best = it;
    }
    if (best != free_.end()) {
      block = std::move(*best);
      free_.erase(best);
    }
  }
  if (!block.bytes) block = {std::unique_ptr<uint8_t[]>(new uint8_t[size]), size};
  uint8_t* data = block.bytes.get();
  std::weak_ptr<StagingPool> pool = weak_from_this();
  auto owned = std::make_shared<Block>(std::move(block));
  return std::shared_ptr<uint8_t>(data, [pool, owned](uint8_t*) {
    if (auto p = pool.lock()) p->GiveBack(std::move(*owned));
  });
}

void StagingPool::GiveBack(Block block) {
  std::lock_guard lock(mu_);
  uint64_t kept = block.capacity;
  for (const Block& b : free_) kept += b.capacity;
  if (free_.size() < kKeep && kept <= kKeepBytes) {
    free_.push_back(std::move(block));
    return;
  }
  // Full: keep the larger buffers, which are the costly ones to fault in.
  auto smallest = std::min_element(free_.begin(), free_.end(), [](const Block& a, const Block& b) {
    return a.capacity < b.capacity;
  });
  if (smallest != free_.end() && smallest->capacity < block.capacity &&
      kept - smallest->capacity <= kKeepBytes)
    *smallest = std::move(block);
}

size_t StagingPool::kept() const {
  std::lock_guard lock(mu_);
  return free_.size();
}

}  // namespace pikv::rpc
