#include "pikv/storage/cpu_tier.h"

#include "pikv/common/stream_copy.h"
#include "pikv/proto/chunk_object.h"
#include "pikv/storage/arena.h"
#include "tier_internal.h"

namespace pikv::storage {

struct CpuTier::Shared {
  std::unique_ptr<Arena> arena;
  RangeAllocator allocator;
  std::unique_ptr<ArenaPrefaulter> prefaulter;  // declared last: stops before the arena goes
  Shared(std::unique_ptr<Arena> a, uint64_t capacity) : arena(std::move(a)), allocator(capacity) {}
};

// One allocation in the arena; returns its range when the last owner drops it.
struct ArenaBlock {
  std::shared_ptr<CpuTier::Shared> shared;
  uint64_t offset;
  uint64_t size;
  ArenaBlock(std::shared_ptr<CpuTier::Shared> s, uint64_t off, uint64_t n)
      : shared(std::move(s)), offset(off), size(n) {}
  ~ArenaBlock() { shared->allocator.Free(offset, size); }
  uint8_t* data() const { return shared->arena->base() + offset; }
};

Result<std::unique_ptr<CpuTier>> CpuTier::Create(const CpuTierOptions& options,
                                                 EventListener listener) {
  auto arena = Arena::Create(options.capacity_bytes);
  if (!arena.ok()) return arena.status();
  auto shared = std::make_shared<Shared>(std::move(*arena), options.capacity_bytes);
  if (options.prefault) shared->prefaulter = std::make_unique<ArenaPrefaulter>(*shared->arena);
  return std::unique_ptr<CpuTier>(new CpuTier(std::move(shared), std::move(listener)));
}

CpuTier::CpuTier(std::shared_ptr<Shared> shared, EventListener listener)
    : IndexedTier(std::move(listener)), shared_(std::move(shared)) {}

CpuTier::~CpuTier() = default;

bool CpuTier::EvictOneLocked(std::vector<TierEvent>& events) {
  for (auto it = lru_.rbegin(); it != lru_.rend(); ++it) {
    auto e = index_.find(*it);
    // use_count() > 1: a reader (or a write-through job) holds the object.
    if (e->second.pins > 0 || e->second.block.use_count() > 1) continue;
    events.push_back({TierKind::kCpu, EventKind::kEvict, e->first, e->second.size});
    // Sole owner: erasing frees the range now (allocator lock nests inside mu_).
    lru_.erase(std::next(it).base());
    index_.erase(e);
    counters_->evictions++;
    return true;
  }
  return false;
}

Status CpuTier::Put(const ChunkKey& key, const SharedBuffer& object) {
  return PutAndHold(key, object).status();
}

Result<SharedBuffer> CpuTier::HoldLocked(const ChunkKey& key) {
  auto it = index_.find(key);
  if (it == index_.end()) return NotFound();
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  const auto& block = it->second.block;
  return SharedBuffer(block->data(), it->second.size, block);
}

Result<std::shared_ptr<CpuTier::Block>> CpuTier::AllocateLocked(uint64_t bytes,
                                                                std::vector<TierEvent>& events) {
  if (RangeAllocator::RoundUp(bytes) > shared_->allocator.capacity()) {
    counters_->rejects++;
    return Rejected("object of " + std::to_string(bytes) + " bytes exceeds the CPU tier");
  }
  std::optional<uint64_t> offset;
  while (!(offset = shared_->allocator.Allocate(bytes))) {
    if (!EvictOneLocked(events)) {
      counters_->rejects++;
      return Rejected("CPU tier is full of pinned or in-use objects");
    }
  }
  return std::make_shared<Block>(shared_, *offset, bytes);
}

Result<SharedBuffer> CpuTier::InsertAndHold(const ChunkKey& key, std::shared_ptr<Block> block,
                                            uint64_t size, std::vector<TierEvent>& events) {
  // The owner, for the admit's event: read before the lock (the object is
  // written by now), interned in the process-wide owner table.
  const OwnerId owner = ReadOwnerId({block->data(), std::min<uint64_t>(size, kOwnerPrefixBytes)});
  MutexLock lock(mu_);
  if (!index_.contains(key)) {  // a concurrent writer of the same key may have won
    lru_.push_front(key);
    index_.emplace(key, Entry{std::move(block), size, 0, lru_.begin()});
    counters_->admits++;
    events.push_back({TierKind::kCpu, EventKind::kAdmit, key, size, owner});
  }
  return HoldLocked(key);
}

Result<SharedBuffer> CpuTier::PutAndHold(const ChunkKey& key, const SharedBuffer& object,
                                         std::string_view stamp_writer) {
  std::vector<TierEvent> events;
  Result<std::shared_ptr<Block>> block = NotFound();
  {
    MutexLock lock(mu_);
    if (auto held = HoldLocked(key); held.ok()) return held;
    block = AllocateLocked(object.size(), events);
  }
  Result<SharedBuffer> held = block.status();
  if (block.ok()) {
    // Copy outside the lock: other readers and writers proceed meanwhile.
    // Past the caches: a plain copy would first read each line of the arena
    // in (the arena is far larger than the caches). A put's object is read
    // again only when someone asks for it; a promoted one is read at once,
    // from memory, by the get that promoted it (hash_bench: a whole put's
    // hash and copy at 1.05x memcpy this way, 0.67x with memcpy).
    StreamCopy((*block)->data(), object.data(), object.size());
    // The object verified; stamping it can fail only on a bad name.
    if (!stamp_writer.empty())
      StampWriter({(*block)->data(), object.size()}, stamp_writer).IgnoreError();
    held = InsertAndHold(key, std::move(*block), object.size(), events);
  }
  Emit(events);
  return held;
}

Result<CpuTier::Reservation> CpuTier::Reserve(uint64_t bytes) {
  std::vector<TierEvent> events;
  Result<std::shared_ptr<Block>> block = NotFound();
  {
    MutexLock lock(mu_);
    block = AllocateLocked(bytes, events);
  }
  Emit(events);
  if (!block.ok()) return block.status();
  Reservation r;
  r.data = (*block)->data();
  r.offset = (*block)->offset;
  r.size = bytes;
  r.block = std::move(*block);
  return r;
}

Result<SharedBuffer> CpuTier::Adopt(const ChunkKey& key, Reservation reservation) {
  if (!reservation.block) return InvalidArgument("empty reservation");
  std::vector<TierEvent> events;
  auto held = InsertAndHold(key, std::move(reservation.block), reservation.size, events);
  Emit(events);
  return held;
}

int CpuTier::arena_fd() const { return shared_->arena->fd(); }
const uint8_t* CpuTier::arena_base() const { return shared_->arena->base(); }
uint64_t CpuTier::arena_bytes() const { return shared_->arena->size(); }

Result<SharedBuffer> CpuTier::Get(const ChunkKey& key) {
  MutexLock lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) {
    counters_->misses++;
    return NotFound();
  }
  counters_->hits++;
  return HoldLocked(key);
}

bool CpuTier::Contains(const ChunkKey& key) {
  MutexLock lock(mu_);
  return index_.contains(key);
}

Status CpuTier::Remove(const ChunkKey& key) {
  std::shared_ptr<Block> released;
  TierEvent event{};
  {
    MutexLock lock(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) return NotFound();
    event = {TierKind::kCpu, EventKind::kEvict, key, it->second.size};
    released = std::move(it->second.block);
    lru_.erase(it->second.lru);
    index_.erase(it);
    counters_->evictions++;
  }
  released.reset();
  Emit({event});
  return Status::Ok();
}

TierStats CpuTier::Stats() const {
  TierStats s = counters_->Stats();
  s.capacity_bytes = shared_->allocator.capacity();
  s.used_bytes = shared_->allocator.used();
  s.faulted_bytes = shared_->prefaulter ? shared_->prefaulter->faulted_bytes() : 0;
  {
    MutexLock lock(mu_);
    s.entries = index_.size();
  }
  return s;
}

std::vector<std::optional<Owner>> CpuTier::OwnersOf(std::span<const ChunkKey> keys) {
  std::vector<std::optional<Owner>> out(keys.size());
  MutexLock lock(mu_);
  for (size_t i = 0; i < keys.size(); ++i) {
    auto it = index_.find(keys[i]);
    if (it != index_.end()) out[i] = ReadOwner({it->second.block->data(), it->second.size});
  }
  return out;
}

}  // namespace pikv::storage
