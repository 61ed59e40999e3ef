#include "pikv/storage/disk_tier.h"

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>

#include "pikv/proto/chunk_object.h"
#include "pikv/proto/endian.h"
#include "tier_internal.h"

namespace pikv::storage {

namespace {

constexpr char kLruFamily[] = "lru";

rocksdb::Slice KeySlice(const std::array<uint8_t, 16>& bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

// An LRU record: size, tick, and the object's owner (tenant and writer,
// each a length byte and its text), so that owners survive a restart
// without reading the objects. Records of 16 bytes predate owners.
std::string MetaValue(uint64_t size, uint64_t tick, const Owner& owner) {
  std::string v(16, '\0');
  StoreLE<uint64_t>(v.data(), size);
  StoreLE<uint64_t>(v.data() + 8, tick);
  for (const std::string* field : {&owner.tenant, &owner.writer}) {
    v.push_back(static_cast<char>(field->size()));
    v += *field;
  }
  return v;
}

// The owner in an LRU record; nullopt for an older or malformed one.
std::optional<Owner> MetaOwner(std::string_view v) {
  Owner owner;
  size_t at = 16;
  for (std::string* field : {&owner.tenant, &owner.writer}) {
    if (at >= v.size()) return std::nullopt;
    const size_t n = static_cast<uint8_t>(v[at++]);
    if (at + n > v.size()) return std::nullopt;
    *field = std::string(v.substr(at, n));
    at += n;
  }
  if (at != v.size() || !IsTenantName(owner.tenant) || !IsIdentityName(owner.writer))
    return std::nullopt;
  return owner;
}

Status FromRocks(const rocksdb::Status& s) {
  if (s.ok()) return Status::Ok();
  if (s.IsNotFound()) return NotFound();
  if (s.IsCorruption()) return Corruption(s.ToString());
  return IoError(s.ToString());
}

}  // namespace

struct DiskTier::Db {
  std::unique_ptr<rocksdb::DB> db;
  rocksdb::ColumnFamilyHandle* objects = nullptr;
  rocksdb::ColumnFamilyHandle* lru = nullptr;
  rocksdb::WriteOptions write_options;
  rocksdb::WriteOptions touch_options;  // recency updates: no WAL, flushed on close
  // An object read is checked whole by VerifyChunkObject (its header, the
  // XXH3 of its payload, its key), so RocksDB's own CRC32C over the value
  // would be a second pass over every byte, and a slow one: Debian's RocksDB
  // computes it by table lookups here (perf: 47% of the node's CPU on a mix of
  // disk hits, 7% without it; bench/peers' tiers workload).
  rocksdb::ReadOptions object_reads;

  ~Db() {
    if (!db) return;
    rocksdb::FlushOptions fo;
    db->Flush(fo, {objects, lru}).PermitUncheckedError();
    db->DestroyColumnFamilyHandle(lru).PermitUncheckedError();
    db->DestroyColumnFamilyHandle(objects).PermitUncheckedError();
    db->Close().PermitUncheckedError();
  }
};

Result<std::unique_ptr<DiskTier>> DiskTier::Open(const DiskTierOptions& options,
                                                 EventListener listener) {
  if (options.path.empty()) return InvalidArgument("disk tier needs a path");
  std::error_code ec;
  std::filesystem::create_directories(options.path, ec);
  if (ec) return IoError("cannot create " + options.path + ": " + ec.message());

  rocksdb::DBOptions db_options;
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;
  db_options.max_background_jobs = 2;
  rocksdb::ColumnFamilyOptions object_options;
  object_options.enable_blob_files = true;
  object_options.min_blob_size = options.min_blob_bytes;
  object_options.blob_file_size = 256ull << 20;
  object_options.enable_blob_garbage_collection = true;
  object_options.compression = rocksdb::kNoCompression;  // KV values barely compress
  object_options.blob_compression_type = rocksdb::kNoCompression;
  rocksdb::ColumnFamilyOptions lru_options;

  std::vector<rocksdb::ColumnFamilyDescriptor> families = {
      {rocksdb::kDefaultColumnFamilyName, object_options}, {kLruFamily, lru_options}};
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(db_options, options.path, families, &handles, &raw);
  if (!s.ok()) return IoError("open RocksDB at " + options.path + ": " + s.ToString());
  auto db = std::make_unique<Db>();
  db->db.reset(raw);
  db->objects = handles[0];
  db->lru = handles[1];
  db->write_options.sync = options.sync_writes;
  db->touch_options.disableWAL = true;
  db->object_reads.verify_checksums = false;

  std::unique_ptr<DiskTier> tier(new DiskTier(std::move(db), options, std::move(listener)));
  if (Status st = tier->RebuildIndex(); !st.ok()) return st;
  return tier;
}

DiskTier::DiskTier(std::unique_ptr<Db> db, const DiskTierOptions& options, EventListener listener)
    : IndexedTier(std::move(listener)), db_(std::move(db)), options_(options) {}

DiskTier::~DiskTier() = default;

Status DiskTier::RebuildIndex() {
  struct Item {
    ChunkKey key;
    uint64_t size, tick;
    OwnerId owner;
  };
  std::vector<Item> items;
  std::vector<ChunkKey> older;  // objects of a format before owners: never readable now
  std::unique_ptr<rocksdb::Iterator> it(db_->db->NewIterator(rocksdb::ReadOptions(), db_->lru));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const std::string_view value(it->value().data(), it->value().size());
    if (it->key().size() != 16 || value.size() < 16) {
      spdlog::warn("disk tier: skipping malformed LRU record");
      continue;
    }
    const ChunkKey key = ChunkKey::FromBytes(reinterpret_cast<const uint8_t*>(it->key().data()));
    const std::optional<Owner> owner = MetaOwner(value);
    if (!owner) {
      older.push_back(key);
      continue;
    }
    // A full owner table leaves the owner not known: no tenant sees it.
    items.push_back({key, LoadLE<uint64_t>(value.data()), LoadLE<uint64_t>(value.data() + 8),
                     InternOwner(*owner).value_or(kUnknownOwner)});
  }
  if (!it->status().ok()) return FromRocks(it->status());
  for (const ChunkKey& key : older) DeleteFromDb(key).IgnoreError();
  if (!older.empty())
    spdlog::info("disk tier: {} objects of an older chunk format dropped", older.size());
  std::sort(items.begin(), items.end(),
            [](const Item& a, const Item& b) { return a.tick > b.tick; });
  MutexLock lock(mu_);
  for (const Item& item : items) {
    lru_.push_back(item.key);
    index_.emplace(item.key, Entry{item.size, item.tick, 0, item.owner, std::prev(lru_.end())});
    used_ += item.size;
    next_tick_ = std::max(next_tick_, item.tick + 1);
  }
  if (!items.empty()) {
    spdlog::info("disk tier: {} objects, {} bytes recovered from {}", items.size(), used_,
                 options_.path);
  }
  return Status::Ok();
}

Status DiskTier::DeleteFromDb(const ChunkKey& key) {
  auto kb = key.Bytes();
  rocksdb::WriteBatch batch;
  batch.Delete(db_->objects, KeySlice(kb)).PermitUncheckedError();
  batch.Delete(db_->lru, KeySlice(kb)).PermitUncheckedError();
  return FromRocks(db_->db->Write(db_->write_options, &batch));
}

Status DiskTier::Put(const ChunkKey& key, const SharedBuffer& object) {
  // The owner is kept with the index entry and the LRU record: one the
  // table cannot hold (or none) is refused, never filed as another's.
  const std::optional<Owner> owner = ReadOwner(object.span());
  const std::optional<OwnerId> owner_id = owner ? InternOwner(*owner) : std::nullopt;
  if (!owner_id) {
    counters_->rejects++;
    return Rejected("disk tier: " + key.Hex() +
                    (owner ? ": the owner table is full" : ": the object names no owner"));
  }
  MutexLock write_lock(write_mu_);
  std::vector<TierEvent> events;
  std::vector<ChunkKey> victims;
  uint64_t tick = 0;
  {
    MutexLock lock(mu_);
    if (auto it = index_.find(key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      return Status::Ok();
    }
    if (object.size() > options_.capacity_bytes) {
      counters_->rejects++;
      return Rejected("object exceeds the disk tier's capacity");
    }
    uint64_t freed = 0;
    for (auto it = lru_.rbegin();
         it != lru_.rend() && used_ - freed + object.size() > options_.capacity_bytes; ++it) {
      const Entry& e = index_.at(*it);
      if (e.pins > 0) continue;
      victims.push_back(*it);
      freed += e.size;
    }
    if (used_ - freed + object.size() > options_.capacity_bytes) {
      counters_->rejects++;
      return Rejected("disk tier is full of pinned objects");
    }
    tick = next_tick_++;
  }
  // One atomic batch: evictions, the object and its LRU record.
  auto kb = key.Bytes();
  rocksdb::WriteBatch batch;
  for (const ChunkKey& v : victims) {
    auto vb = v.Bytes();
    batch.Delete(db_->objects, KeySlice(vb)).PermitUncheckedError();
    batch.Delete(db_->lru, KeySlice(vb)).PermitUncheckedError();
  }
  batch
      .Put(db_->objects, KeySlice(kb),
           rocksdb::Slice(reinterpret_cast<const char*>(object.data()), object.size()))
      .PermitUncheckedError();
  batch.Put(db_->lru, KeySlice(kb), MetaValue(object.size(), tick, *owner)).PermitUncheckedError();
  if (Status s = FromRocks(db_->db->Write(db_->write_options, &batch)); !s.ok()) {
    counters_->errors++;
    spdlog::error("disk tier: put {} failed: {}", key.Hex(), s.ToString());
    return s;
  }
  {
    MutexLock lock(mu_);
    for (const ChunkKey& v : victims) {
      auto it = index_.find(v);
      if (it == index_.end()) continue;
      events.push_back({TierKind::kDisk, EventKind::kEvict, v, it->second.size});
      used_ -= it->second.size;
      lru_.erase(it->second.lru);
      index_.erase(it);
      counters_->evictions++;
    }
    lru_.push_front(key);
    index_.emplace(key, Entry{object.size(), tick, 0, *owner_id, lru_.begin()});
    used_ += object.size();
    counters_->admits++;
  }
  events.push_back({TierKind::kDisk, EventKind::kAdmit, key, object.size(), *owner_id});
  Emit(events);
  return Status::Ok();
}

Result<SharedBuffer> DiskTier::Get(const ChunkKey& key) {
  uint64_t tick = 0;
  uint64_t size = 0;
  {
    MutexLock lock(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) {
      counters_->misses++;
      return NotFound();
    }
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    tick = it->second.tick = next_tick_++;
    size = it->second.size;
  }
  auto kb = key.Bytes();
  auto value = std::make_shared<rocksdb::PinnableSlice>();
  rocksdb::Status rs = db_->db->Get(db_->object_reads, db_->objects, KeySlice(kb), value.get());
  // A failed read is read again with RocksDB's checks on, so damage to what
  // leads to the value (a block, a blob's index) is still told from a miss.
  if (!rs.ok()) {
    value->Reset();
    rs = db_->db->Get(rocksdb::ReadOptions(), db_->objects, KeySlice(kb), value.get());
  }
  Status s = FromRocks(rs);
  if (s.ok()) {
    SharedBuffer buf(reinterpret_cast<const uint8_t*>(value->data()), value->size(), value);
    s = VerifyChunkObject(buf.span(), &key);
    if (s.ok()) {
      counters_->hits++;
      if (const std::optional<Owner> owner = ReadOwner(buf.span())) {
        db_->db->Put(db_->touch_options, db_->lru, KeySlice(kb), MetaValue(size, tick, *owner))
            .PermitUncheckedError();
      }
      return buf;
    }
  }
  if (s.code() == ErrorCode::kNotFound) {
    // Index and database disagree (e.g. removed concurrently): a plain miss.
    counters_->misses++;
    return NotFound();
  }
  if (s.code() == ErrorCode::kIoError) {
    counters_->errors++;
    counters_->misses++;
    spdlog::error("disk tier: read {} failed: {}", key.Hex(), s.ToString());
    return s;
  }
  counters_->corruptions++;
  counters_->misses++;
  spdlog::warn("disk tier: corrupt object {} deleted: {}", key.Hex(), s.ToString());
  Remove(key).IgnoreError();
  return NotFound("corrupt copy deleted");
}

std::vector<std::optional<Owner>> DiskTier::OwnersOf(std::span<const ChunkKey> keys) {
  std::vector<std::optional<Owner>> out(keys.size());
  MutexLock lock(mu_);
  for (size_t i = 0; i < keys.size(); ++i) {
    auto it = index_.find(keys[i]);
    const Owner* owner = it == index_.end() ? nullptr : FindOwner(it->second.owner);
    if (owner) out[i] = *owner;
  }
  return out;
}

bool DiskTier::Contains(const ChunkKey& key) {
  MutexLock lock(mu_);
  return index_.contains(key);
}

Status DiskTier::Remove(const ChunkKey& key) {
  MutexLock write_lock(write_mu_);
  uint64_t size = 0;
  {
    MutexLock lock(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) return NotFound();
    size = it->second.size;
  }
  if (Status s = DeleteFromDb(key); !s.ok()) {
    counters_->errors++;
    return s;
  }
  {
    MutexLock lock(mu_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      used_ -= it->second.size;
      lru_.erase(it->second.lru);
      index_.erase(it);
      counters_->evictions++;
    }
  }
  Emit({{TierKind::kDisk, EventKind::kEvict, key, size}});
  return Status::Ok();
}

TierStats DiskTier::Stats() const {
  TierStats s = counters_->Stats();
  s.capacity_bytes = options_.capacity_bytes;
  {
    MutexLock lock(mu_);
    s.used_bytes = used_;
    s.entries = index_.size();
  }
  return s;
}

Status DiskTier::Flush() {
  rocksdb::FlushOptions fo;
  return FromRocks(db_->db->Flush(fo, {db_->objects, db_->lru}));
}

}  // namespace pikv::storage
