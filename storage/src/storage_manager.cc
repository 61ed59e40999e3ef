#include "pikv/storage/storage_manager.h"

#include <spdlog/spdlog.h>

#include <mutex>
#include <utility>

#include "pikv/proto/chunk_object.h"

namespace pikv::storage {

Result<std::unique_ptr<StorageManager>> StorageManager::Open(const StorageOptions& options,
                                                             EventListener listener) {
  std::unique_ptr<StorageManager> m(new StorageManager());
  m->options_ = options;
  auto cpu = CpuTier::Create(options.cpu, listener);
  if (!cpu.ok()) return cpu.status();
  m->cpu_ = std::move(*cpu);
  if (options.disk) {
    auto disk = DiskTier::Open(*options.disk, listener);
    if (!disk.ok()) return disk.status();
    m->disk_ = std::move(*disk);
    m->disk_queue_ = std::make_unique<WriteThroughQueue>(m->disk_.get(), options.write_queue);
  }
  if (options.remote) {
    m->remote_ = std::make_unique<RemoteTier>(*options.remote, listener);
    m->remote_queue_ = std::make_unique<WriteThroughQueue>(m->remote_.get(), options.write_queue);
  }
  return m;
}

StorageManager::~StorageManager() { Shutdown(); }

Status StorageManager::CheckPut(const ChunkKey& key, std::span<const uint8_t> object,
                                std::optional<uint64_t> payload_checksum, const PutIdentity* as) {
  if (shut_down_) return Unavailable("storage is shutting down");
  if (Status s = VerifyChunkObject(object, &key, {}, payload_checksum); !s.ok()) {
    counters_.Add(StorageCounter::kPutRejects);
    spdlog::warn("refused a put of {}: {}", key.Hex(), s.ToString());
    return s;
  }
  const std::optional<Owner> owner = ReadOwner(object);  // verified: always there
  // Neither the writer the object names nor the caller, whose name a put
  // stamps over it (a revoked engine's bytes are not taken over by another).
  for (const std::string* writer : {owner ? &owner->writer : nullptr, as ? &as->writer : nullptr}) {
    if (!writer || !Refused(*writer)) continue;
    spdlog::warn("refused a put of {}: writer {} is revoked", key.Hex(), *writer);
    return PermissionDenied("writer " + *writer + " is revoked");
  }
  if (as) {
    if (!owner || owner->tenant != as->tenant) {
      counters_.Add(StorageCounter::kTenantRejects);
      const std::string theirs = owner ? TenantLabel(owner->tenant) : "?";
      spdlog::warn("refused a put of {} by engine {}: the object is of tenant {}, the engine of {}",
                   key.Hex(), as->writer, theirs, TenantLabel(as->tenant));
      return PermissionDenied("the object is of tenant " + theirs + ", engine " + as->writer +
                              " of tenant " + TenantLabel(as->tenant));
    }
  }
  counters_.Add(StorageCounter::kPuts);
  return Status::Ok();
}

Status StorageManager::WriteThrough(const ChunkKey& key, SharedBuffer object, bool already_cached,
                                    Result<SharedBuffer> held) {
  // A repeat put of a cached object was written through the first time; do
  // not send its bytes to Redis again.
  if (already_cached && held.ok()) return Status::Ok();
  Status cpu_status = held.status();
  // Write through the arena copy when there is one, so the caller's buffer
  // (often a network frame) is released now.
  if (held.ok()) object = std::move(*held);
  bool queued = false;
  if (disk_queue_) queued |= disk_queue_->Offer(key, object);
  if (remote_queue_) queued |= remote_queue_->Offer(key, object);
  if (cpu_status.ok() || queued) return Status::Ok();
  return cpu_status;
}

Status StorageManager::Put(const ChunkKey& key, SharedBuffer object, const PutIdentity* as) {
  const auto admitting = Admitting();
  if (Status s = CheckPut(key, object.span(), std::nullopt, as); !s.ok()) return s;
  const bool already_cached = cpu_->Contains(key);
  const std::string_view stamp = as ? std::string_view(as->writer) : std::string_view();
  auto held = cpu_->PutAndHold(key, object, stamp);
  if (!held.ok() && !stamp.empty()) {
    // No CPU copy to stamp: the lower tiers get a stamped copy of their own.
    std::vector<uint8_t> copy(object.data(), object.data() + object.size());
    if (Status s = StampWriter(copy, stamp); !s.ok()) return s;
    object = SharedBuffer::FromVector(std::move(copy));
  }
  return WriteThrough(key, std::move(object), already_cached, std::move(held));
}

Result<CpuTier::Reservation> StorageManager::Reserve(uint64_t bytes) {
  if (shut_down_) return Unavailable("storage is shutting down");
  return cpu_->Reserve(bytes);
}

Status StorageManager::SealAndCommit(const ChunkKey& key, CpuTier::Reservation reservation,
                                     std::optional<uint64_t> payload_checksum,
                                     const PutIdentity* as) {
  auto digest = SealChunkObject({reservation.data, reservation.size}, {}, payload_checksum);
  if (!digest.ok()) {
    counters_.Add(StorageCounter::kPutRejects);
    return digest.status();
  }
  return Commit(key, std::move(reservation), *digest, as);
}

Status StorageManager::Commit(const ChunkKey& key, CpuTier::Reservation reservation,
                              std::optional<uint64_t> payload_checksum, const PutIdentity* as) {
  const auto admitting = Admitting();
  // The writer goes into the header (resealed) before anyone can read it.
  if (as && !as->writer.empty()) {
    if (Status s = StampWriter({reservation.data, reservation.size}, as->writer); !s.ok()) {
      counters_.Add(StorageCounter::kPutRejects);
      return s;
    }
  }
  if (Status s = CheckPut(key, {reservation.data, reservation.size}, payload_checksum, as); !s.ok())
    return s;
  const bool already_cached = cpu_->Contains(key);
  SharedBuffer object(reservation.data, reservation.size, reservation.block);
  auto held = cpu_->Adopt(key, std::move(reservation));
  return WriteThrough(key, std::move(object), already_cached, std::move(held));
}

Result<SharedBuffer> StorageManager::Promote(const ChunkKey& key, const SharedBuffer& object,
                                             bool to_disk) {
  counters_.Add(StorageCounter::kPromotions);
  // A full CPU tier just serves from below.
  Result<SharedBuffer> held = cpu_->PutAndHold(key, object);
  if (to_disk && disk_queue_) disk_queue_->Offer(key, object);
  return held;
}

SharedBuffer StorageManager::PromoteFromRemote(const ChunkKey& key, const SharedBuffer& fetched,
                                               std::optional<CpuTier::Reservation>& space) {
  if (!space || fetched.data() != space->data) {  // read into the tier's own memory
    Promote(key, fetched, /*to_disk=*/true).status().IgnoreError();
    return fetched;
  }
  counters_.Add(StorageCounter::kPromotions);
  // The object keeps its space alive whatever Adopt does with it.
  SharedBuffer object(space->data, space->size, space->block);
  auto held = cpu_->Adopt(key, std::move(*space));
  if (disk_queue_) disk_queue_->Offer(key, object);
  return held.ok() ? std::move(*held) : object;
}

std::vector<Result<SharedBuffer>> StorageManager::Get(std::span<const ChunkKey> keys,
                                                      const std::string* only_tenant) {
  std::vector<Result<SharedBuffer>> out;
  out.reserve(keys.size());
  std::vector<size_t> remote_idx;
  std::vector<ChunkKey> remote_keys;
  for (size_t i = 0; i < keys.size(); ++i) {
    // A key is one tenant's in every tier: the first tier that holds it decides.
    Result<SharedBuffer> r = cpu_->Get(keys[i]);
    if (r.ok() && only_tenant && !Visible(ReadOwner(r->span()), only_tenant)) {
      out.push_back(NotFound());
      continue;
    }
    if (!r.ok() && disk_ && disk_->Contains(keys[i])) {
      // The index knows the owner: another tenant's object is not even read.
      const auto admitting = Admitting();
      const std::optional<Owner> owner = disk_->OwnerOf(keys[i]);
      if (!Visible(owner, only_tenant) || Refused(owner)) {
        out.push_back(NotFound());
        continue;
      }
      r = disk_->Get(keys[i]);
      if (r.ok()) Promote(keys[i], *r, /*to_disk=*/false).status().IgnoreError();
    }
    if (!r.ok() && remote_) {
      remote_idx.push_back(i);
      remote_keys.push_back(keys[i]);
    }
    out.push_back(std::move(r));
  }
  if (!remote_keys.empty()) {
    // A hit is read straight into CPU-tier space, so promoting it copies
    // nothing; space not adopted below is freed when `space` goes. Making
    // that space may evict before the object is checked: not for a caller
    // confined to one tenant, whose read of another tenant's key must not
    // flush the tier (its hits are copied up once checked, as before).
    std::vector<std::optional<CpuTier::Reservation>> space(remote_keys.size());
    auto fetched = remote_->GetManyPlaced(remote_keys, [&](size_t j, uint64_t size) {
      if (only_tenant) return std::span<uint8_t>{};
      auto reserved = cpu_->Reserve(size);
      if (!reserved.ok()) return std::span<uint8_t>{};  // a full tier: the tier's own memory
      space[j] = std::move(*reserved);
      return std::span<uint8_t>(space[j]->data, size);
    });
    for (size_t j = 0; j < fetched.size(); ++j) {
      if (!fetched[j].ok()) continue;  // keep the local miss
      const std::optional<Owner> owner = ReadOwner(fetched[j]->span());
      if (!Visible(owner, only_tenant)) continue;
      const auto admitting = Admitting();
      if (Refused(owner)) continue;  // another node sweeps Redis, perhaps later
      out[remote_idx[j]] = PromoteFromRemote(remote_keys[j], *fetched[j], space[j]);
    }
  }
  for (auto& r : out) {
    if (r.ok()) {
      counters_.Add(StorageCounter::kHits);
    } else {
      counters_.Add(StorageCounter::kMisses);
      if (r.code() != ErrorCode::kNotFound) r = NotFound(r.status().message());
    }
  }
  return out;
}

bool StorageManager::Visible(const std::optional<Owner>& owner, const std::string* only_tenant) {
  if (TenantMaySee(only_tenant, owner)) return true;
  counters_.Add(StorageCounter::kTenantHidden);
  return false;
}

std::shared_lock<std::shared_mutex> StorageManager::Admitting() {
  { const std::lock_guard turn(revoked_turnstile_); }
  return std::shared_lock(revoked_mu_);
}

bool StorageManager::Revoked(const std::optional<Owner>& owner) const {
  return owner && !revoked_writers_.empty() && revoked_writers_.contains(owner->writer);
}

bool StorageManager::Refused(std::string_view writer) {
  if (revoked_writers_.empty() || !revoked_writers_.contains(writer)) return false;
  counters_.Add(StorageCounter::kRevokedRefusals);
  return true;
}

bool StorageManager::Refused(const std::optional<Owner>& owner) {
  return owner && Refused(owner->writer);
}

std::optional<Owner> StorageManager::LocalOwner(const ChunkKey& key) const {
  if (auto owner = cpu_->OwnerOf(key)) return owner;
  return disk_ ? disk_->OwnerOf(key) : std::nullopt;
}

Result<SharedBuffer> StorageManager::Get(const ChunkKey& key) {
  return std::move(Get({&key, 1})[0]);
}

std::vector<TierMask> StorageManager::Exists(std::span<const ChunkKey> keys,
                                             const std::string* only_tenant) {
  std::vector<TierMask> out(keys.size(), 0);
  std::vector<size_t> ask_remote;
  std::vector<ChunkKey> remote_keys;
  for (size_t i = 0; i < keys.size(); ++i) {
    out[i] = LocalMask(keys[i], only_tenant);
    if (out[i] == 0 && remote_) {
      ask_remote.push_back(i);
      remote_keys.push_back(keys[i]);
    }
  }
  if (remote_keys.empty()) return out;
  if (only_tenant || any_revoked_) {
    // The owner comes from the object's first bytes (GETRANGE): another
    // tenant's object, or a revoked writer's that Get would not serve, is
    // not reported.
    auto owners = remote_->OwnersOf(remote_keys);
    const std::shared_lock reading(revoked_mu_);
    for (size_t j = 0; j < owners.size(); ++j) {
      // Not there (or not readable): a miss, not another tenant's object.
      if (owners[j] && Visible(owners[j], only_tenant) && !Revoked(owners[j]))
        out[ask_remote[j]] |= Bit(TierKind::kRemote);
    }
    return out;
  }
  auto found = remote_->ContainsMany(remote_keys);
  for (size_t j = 0; j < found.size(); ++j) {
    if (found[j]) out[ask_remote[j]] |= Bit(TierKind::kRemote);
  }
  return out;
}

std::optional<std::vector<SharedBuffer>> StorageManager::GetIfInCpu(
    std::span<const ChunkKey> keys, const std::string* only_tenant) {
  for (const ChunkKey& k : keys) {
    if (!cpu_->Contains(k)) return std::nullopt;
  }
  std::vector<SharedBuffer> out;
  out.reserve(keys.size());
  for (const ChunkKey& k : keys) {
    auto r = cpu_->Get(k);
    if (!r.ok()) return std::nullopt;  // evicted since Contains: rare, the full Get retries
    // Another tenant's object: the full Get answers it (a miss).
    if (!TenantMaySee(only_tenant, ReadOwner(r->span()))) return std::nullopt;
    out.push_back(std::move(*r));
  }
  counters_.Add(StorageCounter::kHits, keys.size());
  return out;
}

std::vector<std::optional<SharedBuffer>> StorageManager::GetEachInCpu(
    std::span<const ChunkKey> keys, const std::string* only_tenant) {
  std::vector<std::optional<SharedBuffer>> out(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!cpu_->Contains(keys[i])) continue;
    if (auto r = cpu_->Get(keys[i]); r.ok()) {
      if (only_tenant && !Visible(ReadOwner(r->span()), only_tenant)) continue;
      counters_.Add(StorageCounter::kHits);
      out[i] = std::move(*r);
    }
  }
  return out;
}

std::vector<std::optional<SharedBuffer>> StorageManager::GetEachInCpuOrDisk(
    std::span<const ChunkKey> keys, const std::string* only_tenant) {
  std::vector<std::optional<SharedBuffer>> out = GetEachInCpu(keys, only_tenant);
  if (!disk_) return out;
  for (size_t i = 0; i < keys.size(); ++i) {
    // In CPU but not given: another tenant's.
    if (out[i] || cpu_->Contains(keys[i]) || !disk_->Contains(keys[i])) continue;
    const auto admitting = Admitting();
    const std::optional<Owner> owner = disk_->OwnerOf(keys[i]);
    if (!Visible(owner, only_tenant) || Refused(owner)) continue;
    Result<SharedBuffer> read = disk_->Get(keys[i]);
    if (!read.ok()) continue;
    Result<SharedBuffer> held = Promote(keys[i], *read, /*to_disk=*/false);
    if (!held.ok()) continue;  // a full or pinned CPU tier: the reader fetches a copy
    counters_.Add(StorageCounter::kHits);
    out[i] = std::move(*held);
  }
  return out;
}

std::optional<std::vector<TierMask>> StorageManager::ExistsIfLocal(std::span<const ChunkKey> keys,
                                                                   const std::string* only_tenant) {
  std::vector<TierMask> out(keys.size(), 0);
  for (size_t i = 0; i < keys.size(); ++i) {
    out[i] = LocalMask(keys[i], only_tenant);
    if (out[i] == 0 && remote_) return std::nullopt;
  }
  return out;
}

TierMask StorageManager::LocalMask(const ChunkKey& key, const std::string* only_tenant) {
  if (only_tenant) {
    const bool in_cpu = cpu_->Contains(key), on_disk = disk_ && disk_->Contains(key);
    if (!in_cpu && !on_disk) return 0;
    if (!Visible(in_cpu ? cpu_->OwnerOf(key) : disk_->OwnerOf(key), only_tenant)) return 0;
    return (in_cpu ? Bit(TierKind::kCpu) : 0) | (on_disk ? Bit(TierKind::kDisk) : 0);
  }
  TierMask m = cpu_->Contains(key) ? Bit(TierKind::kCpu) : 0;
  if (disk_ && disk_->Contains(key)) m |= Bit(TierKind::kDisk);
  return m;
}

StorageManager::Dropped StorageManager::DropWrittenBy(std::string_view writer, bool shared_tier) {
  {
    // Waits out admissions under way (new ones wait at the turnstile, so a
    // stream of them cannot starve it): what they land, the sweep finds.
    const std::lock_guard turn(revoked_turnstile_);
    const std::unique_lock revoking(revoked_mu_);
    revoked_writers_.emplace(writer);
    any_revoked_ = true;
  }
  Dropped d;
  std::vector<ChunkKey> local = cpu_->WrittenBy(cpu_->LruOrder(), writer);
  for (const ChunkKey& k : local) d.cpu += cpu_->Remove(k).ok() ? 1 : 0;
  if (disk_queue_) disk_queue_->Drain();  // nothing queued may land after the drop
  if (disk_) {
    for (const ChunkKey& k : disk_->WrittenBy(disk_->LruOrder(), writer)) {
      d.disk += disk_->Remove(k).ok() ? 1 : 0;
      local.push_back(k);
    }
  }
  if (remote_queue_) remote_queue_->Drain();
  if (!remote_) return d;
  // Without `shared_tier` another node sweeps the remote tier; what this
  // node's write-through put there (drained above, so perhaps after that
  // sweep) goes here.
  Result<std::vector<ChunkKey>> keys =
      shared_tier ? remote_->KeysWrittenBy(writer) : remote_->WrittenBy(local, writer);
  if (!keys.ok()) {
    d.remote_error = keys.status();
    return d;
  }
  for (const ChunkKey& k : *keys) d.remote += remote_->Remove(k).ok() ? 1 : 0;
  return d;
}

Status StorageManager::Delete(const ChunkKey& key) {
  bool any = cpu_->Remove(key).ok();
  if (disk_queue_) disk_queue_->Drain();  // a queued write must not resurrect it
  if (disk_) any |= disk_->Remove(key).ok();
  if (remote_queue_) remote_queue_->Drain();
  if (remote_) any |= remote_->Remove(key).ok();
  return any ? Status::Ok() : NotFound();
}

uint64_t StorageManager::Clear() {
  uint64_t dropped = 0;
  for (const ChunkKey& k : cpu_->LruOrder()) dropped += cpu_->Remove(k).ok() ? 1 : 0;
  if (disk_queue_) disk_queue_->Drain();  // nothing queued may land after the clear
  if (disk_) {
    for (const ChunkKey& k : disk_->LruOrder()) dropped += disk_->Remove(k).ok() ? 1 : 0;
  }
  return dropped;
}

Status StorageManager::Pin(const ChunkKey& key) {
  bool any = cpu_->Pin(key).ok();
  if (disk_) any |= disk_->Pin(key).ok();
  return any ? Status::Ok() : NotFound();
}

Status StorageManager::Unpin(const ChunkKey& key) {
  Status cpu = cpu_->Unpin(key);
  Status disk = disk_ ? disk_->Unpin(key) : NotFound();
  if (cpu.ok() || disk.ok()) return Status::Ok();
  return cpu.code() == ErrorCode::kNotFound ? disk : cpu;
}

void StorageManager::WaitForWriteThrough() {
  if (disk_queue_) disk_queue_->Drain();
  if (remote_queue_) remote_queue_->Drain();
}

void StorageManager::Shutdown() {
  if (shut_down_.exchange(true)) return;
  if (disk_queue_) disk_queue_->Shutdown();
  if (remote_queue_) remote_queue_->Shutdown();
  if (disk_) {
    if (Status s = disk_->Flush(); !s.ok())
      spdlog::error("disk tier flush at shutdown: {}", s.ToString());
  }
}

namespace {

// StorageStats's named counters, as the set keeps them (the one place they are
// copied; a new counter is read through counters() and needs no field).
constexpr std::pair<StorageCounter, uint64_t StorageStats::*> kStatsFields[] = {
    {StorageCounter::kPuts, &StorageStats::puts},
    {StorageCounter::kPutRejects, &StorageStats::put_rejects},
    {StorageCounter::kTenantRejects, &StorageStats::tenant_rejects},
    {StorageCounter::kTenantHidden, &StorageStats::tenant_hidden},
    {StorageCounter::kRevokedRefusals, &StorageStats::revoked_refusals},
    {StorageCounter::kPromotions, &StorageStats::promotions},
    {StorageCounter::kHits, &StorageStats::hits},
    {StorageCounter::kMisses, &StorageStats::misses}};

}  // namespace

StorageStats StorageManager::Stats() const {
  StorageStats s;
  s.tiers[static_cast<int>(TierKind::kCpu)] = cpu_->Stats();
  if (disk_) s.tiers[static_cast<int>(TierKind::kDisk)] = disk_->Stats();
  if (remote_) s.tiers[static_cast<int>(TierKind::kRemote)] = remote_->Stats();
  if (disk_queue_) s.disk_queue = disk_queue_->GetStats();
  if (remote_queue_) s.remote_queue = remote_queue_->GetStats();
  for (const auto& [counter, field] : kStatsFields) s.*field = counters_[counter];
  return s;
}

}  // namespace pikv::storage
