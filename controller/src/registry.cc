#include "pikv/controller/registry.h"

#include <algorithm>
#include <mutex>
#include <unordered_map>

namespace pikv::controller {

namespace {

constexpr uint8_t kEmpty = 0;
constexpr uint8_t kSpilled = 0xff;  // locations live in the shard's side map
constexpr int kInline = 4;

struct Slot {
  uint64_t hi = 0;
  uint64_t lo = 0;
  uint16_t loc[kInline] = {};
  uint16_t owner = kUnknownOwner;  // the first writer reported (OwnerId < kMaxOwners)
  uint8_t n = kEmpty;              // kEmpty, 1..kInline inline locations, or kSpilled
  bool several_writers = false;    // another writer's copy was admitted too
  ChunkKey key() const { return {hi, lo}; }
};
static_assert(sizeof(Slot) == 32, "slots must stay compact");
static_assert(kMaxOwners <= 1u << 16, "owner ids fit a slot");

// The first known writer stays; another one marks the key.
void MergeOwner(Slot& s, OwnerId owner) {
  if (owner == kUnknownOwner || owner == s.owner) return;
  if (s.owner == kUnknownOwner) {
    s.owner = static_cast<uint16_t>(owner);
  } else {
    s.several_writers = true;
  }
}

}  // namespace

class Registry::Shard {
 public:
  Shard() : slots_(kInitialSlots) {}

  mutable std::mutex mu;

  // Everything below requires mu.
  bool Admit(const ChunkKey& key, uint16_t code, OwnerId owner, bool& new_key) {
    if ((used_ + 1) * 4 > slots_.size() * 3) Grow();
    size_t i = Find(key);
    new_key = slots_[i].n == kEmpty;
    Slot& s = slots_[i];
    if (new_key) {
      s.hi = key.hi;
      s.lo = key.lo;
      s.loc[0] = code;
      s.n = 1;
      s.owner = static_cast<uint16_t>(owner);
      used_++;
      return true;
    }
    MergeOwner(s, owner);
    if (s.n == kSpilled) {
      auto& v = spilled_[key];
      if (std::find(v.begin(), v.end(), code) != v.end()) return false;
      v.push_back(code);
      return true;
    }
    for (int j = 0; j < s.n; ++j) {
      if (s.loc[j] == code) return false;
    }
    if (s.n < kInline) {
      s.loc[s.n++] = code;
      return true;
    }
    auto& v = spilled_[key];
    v.assign(s.loc, s.loc + kInline);
    v.push_back(code);
    s.n = kSpilled;
    return true;
  }

  bool Evict(const ChunkKey& key, uint16_t code, bool& key_gone) {
    key_gone = false;
    size_t i = Find(key);
    Slot& s = slots_[i];
    if (s.n == kEmpty) return false;
    if (s.n == kSpilled) {
      auto it = spilled_.find(key);
      auto& v = it->second;
      auto pos = std::find(v.begin(), v.end(), code);
      if (pos == v.end()) return false;
      v.erase(pos);
      if (v.size() <= kInline) {  // fits inline again
        s.n = static_cast<uint8_t>(v.size());
        std::copy(v.begin(), v.end(), s.loc);
        spilled_.erase(it);
      }
      return true;
    }
    for (int j = 0; j < s.n; ++j) {
      if (s.loc[j] != code) continue;
      s.loc[j] = s.loc[s.n - 1];
      if (--s.n == 0) {
        Erase(i);
        key_gone = true;
      }
      return true;
    }
    return false;
  }

  Provenance Locate(const ChunkKey& key, std::vector<Location>& out) const {
    const Slot& s = slots_[Find(key)];
    if (s.n == kEmpty) return {};
    if (s.n == kSpilled) {
      for (uint16_t c : spilled_.at(key)) out.push_back(Location::FromCode(c));
    } else {
      for (int j = 0; j < s.n; ++j) out.push_back(Location::FromCode(s.loc[j]));
    }
    return {s.owner, s.several_writers};
  }

  // Calls fn(key, code) for every location (snapshot under the lock).
  template <typename Fn>
  void ForEach(Fn fn) const {
    for (const Slot& s : slots_) {
      if (s.n == kEmpty) continue;
      if (s.n == kSpilled) {
        for (uint16_t c : spilled_.at(s.key())) fn(s.key(), c);
      } else {
        for (int j = 0; j < s.n; ++j) fn(s.key(), s.loc[j]);
      }
    }
  }

  uint64_t MemoryBytes() const {
    uint64_t bytes = slots_.size() * sizeof(Slot);
    // Side map: node + bucket pointer + key + vector header + elements.
    for (const auto& [k, v] : spilled_) bytes += 64 + v.capacity() * sizeof(uint16_t);
    return bytes;
  }

 private:
  static constexpr size_t kInitialSlots = 64;

  size_t Mask() const { return slots_.size() - 1; }
  size_t Home(const ChunkKey& key) const { return key.lo & Mask(); }

  // The slot holding key, or the empty slot where it would go.
  size_t Find(const ChunkKey& key) const {
    size_t i = Home(key);
    while (slots_[i].n != kEmpty && (slots_[i].lo != key.lo || slots_[i].hi != key.hi))
      i = (i + 1) & Mask();
    return i;
  }

  // Backward-shift deletion: no tombstones, probe chains stay short.
  void Erase(size_t i) {
    size_t j = i;
    while (true) {
      j = (j + 1) & Mask();
      if (slots_[j].n == kEmpty) break;
      size_t home = Home(slots_[j].key());
      // Slot j may move to i unless its home lies cyclically in (i, j].
      bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
      if (stays) continue;
      slots_[i] = slots_[j];
      i = j;
    }
    slots_[i] = Slot{};
    used_--;
  }

  void Grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    for (const Slot& s : old) {
      if (s.n != kEmpty) slots_[Find(s.key())] = s;
    }
  }

  std::vector<Slot> slots_;
  size_t used_ = 0;
  std::unordered_map<ChunkKey, std::vector<uint16_t>, ChunkKeyHash> spilled_;
};

Registry::Registry(size_t num_shards)
    : counts_(new std::atomic<uint64_t>[size_t{kMaxNodes + 1} * kNumTiers]()) {
  size_t n = 1;
  while (n < num_shards) n <<= 1;  // a power of two, so the shard is a mask of key.hi
  for (size_t i = 0; i < n; ++i) shards_.push_back(std::make_unique<Shard>());
}

Registry::~Registry() = default;

Registry::Shard& Registry::ShardOf(const ChunkKey& key) const {
  return *shards_[key.hi & (shards_.size() - 1)];
}

bool Registry::Admit(const ChunkKey& key, Location location, OwnerId owner) {
  if (location.node > kMaxNodes) return false;
  if (owner >= kMaxOwners) owner = kUnknownOwner;
  Shard& shard = ShardOf(key);
  bool new_key = false;
  bool added;
  {
    std::lock_guard lock(shard.mu);
    added = shard.Admit(key, location.Code(), owner, new_key);
  }
  if (added) {
    locations_.fetch_add(1, std::memory_order_relaxed);
    counts_[location.node * kNumTiers + static_cast<int>(location.tier)].fetch_add(
        1, std::memory_order_relaxed);
  }
  if (new_key) keys_.fetch_add(1, std::memory_order_relaxed);
  return added;
}

bool Registry::Evict(const ChunkKey& key, Location location) {
  if (location.node > kMaxNodes) return false;
  Shard& shard = ShardOf(key);
  bool key_gone = false;
  bool removed;
  {
    std::lock_guard lock(shard.mu);
    removed = shard.Evict(key, location.Code(), key_gone);
  }
  if (removed) {
    locations_.fetch_sub(1, std::memory_order_relaxed);
    counts_[location.node * kNumTiers + static_cast<int>(location.tier)].fetch_sub(
        1, std::memory_order_relaxed);
  }
  if (key_gone) keys_.fetch_sub(1, std::memory_order_relaxed);
  return removed;
}

Registry::Provenance Registry::Locate(const ChunkKey& key, std::vector<Location>& out) const {
  Shard& shard = ShardOf(key);
  std::lock_guard lock(shard.mu);
  return shard.Locate(key, out);
}

uint64_t Registry::RemoveNode(uint16_t node) {
  uint64_t removed = 0;
  std::vector<std::pair<ChunkKey, uint16_t>> victims;
  for (auto& shard : shards_) {
    victims.clear();
    std::lock_guard lock(shard->mu);
    shard->ForEach([&](const ChunkKey& k, uint16_t code) {
      if (Location::FromCode(code).node == node) victims.emplace_back(k, code);
    });
    for (const auto& [k, code] : victims) {
      bool key_gone = false;
      if (!shard->Evict(k, code, key_gone)) continue;
      removed++;
      Location loc = Location::FromCode(code);
      locations_.fetch_sub(1, std::memory_order_relaxed);
      counts_[loc.node * kNumTiers + static_cast<int>(loc.tier)].fetch_sub(
          1, std::memory_order_relaxed);
      if (key_gone) keys_.fetch_sub(1, std::memory_order_relaxed);
    }
  }
  return removed;
}

std::vector<ChunkKey> Registry::Inventory(uint16_t node, TierKind tier) const {
  std::vector<ChunkKey> out;
  const uint16_t want = Location{node, tier}.Code();
  for (const auto& shard : shards_) {
    std::lock_guard lock(shard->mu);
    shard->ForEach([&](const ChunkKey& k, uint16_t code) {
      if (code == want) out.push_back(k);
    });
  }
  return out;
}

uint64_t Registry::CountOn(uint16_t node, TierKind tier) const {
  if (node > kMaxNodes) return 0;
  return counts_[node * kNumTiers + static_cast<int>(tier)].load(std::memory_order_relaxed);
}

uint64_t Registry::MemoryBytes() const {
  uint64_t bytes = 0;
  for (const auto& shard : shards_) {
    std::lock_guard lock(shard->mu);
    bytes += shard->MemoryBytes();
  }
  return bytes;
}

}  // namespace pikv::controller
