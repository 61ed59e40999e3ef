#include "pikv/storage/tier.h"

namespace pikv::storage {

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
