#include "pikv/storage/tier.h"

#include <algorithm>

#include "tier_internal.h"

namespace pikv::storage {

Tier::Tier(EventListener listener)
    : counters_(std::make_unique<TierCounters>()), listener_(std::move(listener)) {}

Tier::~Tier() = default;

void Tier::Emit(const std::vector<TierEvent>& events) const {
  if (listener_ && !events.empty()) listener_(events);
}

std::vector<ChunkKey> Tier::WrittenBy(std::span<const ChunkKey> keys, std::string_view writer) {
  std::vector<ChunkKey> out;
  // In batches: one remote round trip (or one index lock) per batch.
  constexpr size_t kBatch = 512;
  for (size_t at = 0; at < keys.size(); at += kBatch) {
    const auto batch = keys.subspan(at, std::min(kBatch, keys.size() - at));
    const auto owners = OwnersOf(batch);
    for (size_t i = 0; i < batch.size(); ++i)
      if (owners[i] && owners[i]->writer == writer) out.push_back(batch[i]);
  }
  return out;
}

Result<std::vector<ChunkKey>> Tier::KeysWrittenBy(std::string_view writer) {
  Result<std::vector<ChunkKey>> keys = Keys();
  if (!keys.ok()) return keys.status();
  return WrittenBy(*keys, writer);
}

std::vector<Result<SharedBuffer>> Tier::GetMany(std::span<const ChunkKey> keys) {
  std::vector<Result<SharedBuffer>> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(Get(k));
  return out;
}

std::vector<Status> Tier::PutMany(std::span<const ChunkKey> keys,
                                  std::span<const SharedBuffer> objects) {
  std::vector<Status> out;
  out.reserve(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) out.push_back(Put(keys[i], objects[i]));
  return out;
}

std::vector<bool> Tier::ContainsMany(std::span<const ChunkKey> keys) {
  std::vector<bool> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(Contains(k));
  return out;
}

}  // namespace pikv::storage
