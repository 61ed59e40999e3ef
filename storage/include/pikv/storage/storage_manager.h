// StorageManager: one node's tiers, ordered CPU -> disk -> remote.
//
// Put: verify the object (size, checksum, key), admit to CPU synchronously,
// then write through to disk and remote on bounded background queues that
// drop and count when full (not again for an object already in CPU). Get: CPU, then disk, then
// remote (pipelined for a batch); the first hit wins and a lower-tier hit is promoted to CPU (a
// remote hit is also written through to disk, so the host keeps a copy).
// Tier events (admit, evict, per tier) go to the listener given at Open.
// Disk and remote are optional; CPU is always present.
// Thread-safety: all methods are thread-safe.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <span>
#include <string>
#include <vector>

#include "pikv/storage/cpu_tier.h"
#include "pikv/storage/disk_tier.h"
#include "pikv/storage/remote_tier.h"
#include "pikv/storage/storage_stats.h"
#include "pikv/storage/write_through_queue.h"

namespace pikv::storage {

struct StorageOptions {
  CpuTierOptions cpu;
  std::optional<DiskTierOptions> disk;      // absent: no disk tier
  std::optional<RemoteTierOptions> remote;  // absent: no remote tier
  WriteThroughQueue::Options write_queue;   // per lower tier
};

// Who puts an object, for the node's checks and provenance (proto/owner.h):
// the object must be of the writer's tenant, and the node records the
// writer in its header (an empty writer: a caller without a key, whose
// object keeps the writer it names). Puts without one (a pull from a peer,
// an admin's put) keep the owner the object names.
struct PutIdentity {
  std::string tenant;
  std::string writer;
};

using stats::StorageCounter;
using stats::StorageCounters;

// A snapshot of the tiers, the queues and the manager's counters. The
// counters' fields are those its readers had before the counters became a
// set (StorageCounters); a new counter needs none: it is read through
// StorageManager::counters() and sampled by its row.
struct StorageStats {
  std::array<std::optional<TierStats>, kNumTiers> tiers;  // by TierKind
  std::optional<WriteThroughQueue::Stats> disk_queue, remote_queue;
  uint64_t puts = 0;
  uint64_t put_rejects = 0;       // objects that failed verification
  uint64_t tenant_rejects = 0;    // puts of another tenant's object
  uint64_t tenant_hidden = 0;     // lookups answered as misses: another tenant's object
  uint64_t revoked_refusals = 0;  // puts and promotions refused: a revoked writer's object
  uint64_t promotions = 0;
  uint64_t hits = 0;
  uint64_t misses = 0;
};

class StorageManager {
 public:
  static Result<std::unique_ptr<StorageManager>> Open(const StorageOptions& options,
                                                      EventListener listener);
  ~StorageManager();  // Shutdown()

  // kCorruption / kInvalidArgument when the object does not verify;
  // kPermissionDenied when it is not of `as`'s tenant, or it or `as` names
  // a revoked writer; kRejected when no tier took it.
  Status Put(const ChunkKey& key, SharedBuffer object, const PutIdentity* as = nullptr);
  // Zero-copy put: space in the CPU arena that the writer fills in place
  // (CpuTier::Reserve), then Commit, which verifies the bytes exactly as Put
  // does and admits them without a copy. A failed commit frees the space.
  // `payload_checksum`: the payload's XXH3 as this process computed it while
  // writing the bytes (a streamed receive), instead of hashing them again.
  Result<CpuTier::Reservation> Reserve(uint64_t bytes);
  Status Commit(const ChunkKey& key, CpuTier::Reservation reservation,
                std::optional<uint64_t> payload_checksum = std::nullopt,
                const PutIdentity* as = nullptr);
  // Commit of an object its writer left unsealed (SealChunkObject): the
  // payload is hashed once, here (or was, as it was written:
  // `payload_checksum`), and the checksum written into its header.
  Status SealAndCommit(const ChunkKey& key, CpuTier::Reservation reservation,
                       std::optional<uint64_t> payload_checksum = std::nullopt,
                       const PutIdentity* as = nullptr);
  // Reads take `only_tenant`: null, every object (admins, nodes); else only
  // that tenant's objects, another's reading as a miss (no promotion).
  std::vector<Result<SharedBuffer>> Get(std::span<const ChunkKey> keys,
                                        const std::string* only_tenant = nullptr);
  Result<SharedBuffer> Get(const ChunkKey& key);
  // Which tiers hold each key (0 = none).
  std::vector<TierMask> Exists(std::span<const ChunkKey> keys,
                               const std::string* only_tenant = nullptr);

  // Non-blocking forms for a server's I/O thread; nullopt means "would have
  // to touch disk or the network: use the full call". GetIfInCpu answers only
  // when every key is in the CPU tier; ExistsIfLocal when no key needs Redis.
  std::optional<std::vector<SharedBuffer>> GetIfInCpu(std::span<const ChunkKey> keys,
                                                      const std::string* only_tenant = nullptr);
  std::optional<std::vector<TierMask>> ExistsIfLocal(std::span<const ChunkKey> keys,
                                                     const std::string* only_tenant = nullptr);
  // Per key, its CPU-tier object when it has one (counted as a hit); never
  // touches disk or the network.
  std::vector<std::optional<SharedBuffer>> GetEachInCpu(std::span<const ChunkKey> keys,
                                                        const std::string* only_tenant = nullptr);
  // GetEachInCpu, after copying up into the CPU tier what only the disk tier
  // holds (counted as a disk hit and a promotion; skipped when the CPU tier
  // cannot take it): what a reader on this host is lent in place. Never
  // touches the network.
  std::vector<std::optional<SharedBuffer>> GetEachInCpuOrDisk(std::span<const ChunkKey> keys,
                                                              const std::string* only_tenant);
  // Drops every object `writer` wrote from every tier, the remote one with
  // `shared_tier` (a revocation): what each tier dropped, and why Redis
  // could not be searched. From its start on, and for as long as this
  // process runs, none of the writer's objects is admitted again: a put of
  // one is refused (kPermissionDenied), and one that only a lower tier
  // holds is a miss, not promoted nor reported by Exists (the remote tier
  // may be swept by another node, later).
  struct Dropped {
    uint64_t cpu = 0, disk = 0, remote = 0;
    Status remote_error;
  };
  Dropped DropWrittenBy(std::string_view writer, bool shared_tier = true);
  // Who owns key's copy on this node (CPU, else disk); nullopt when neither
  // holds it. What the reporter tells the controller with each admit.
  std::optional<Owner> LocalOwner(const ChunkKey& key) const;
  // Removes from every tier; kNotFound if no tier held it.
  Status Delete(const ChunkKey& key);
  // Pins in CPU and disk, where held; kNotFound if neither holds it.
  Status Pin(const ChunkKey& key);
  Status Unpin(const ChunkKey& key);

  // Drops every object from the CPU and disk tiers (not the remote tier,
  // which the nodes share), reporting each evict. Returns how many objects were dropped.
  uint64_t Clear();

  // Blocks until queued write-through work is applied.
  void WaitForWriteThrough();
  // Stops taking writes, drains queues, flushes the disk tier. Idempotent.
  void Shutdown();

  StorageStats Stats() const;
  // The manager's counters, each sampled as its family (storage_stats.h).
  const StorageCounters& counters() const { return counters_; }
  CpuTier& cpu() { return *cpu_; }
  DiskTier* disk() { return disk_.get(); }
  RemoteTier* remote() { return remote_.get(); }

 private:
  StorageManager() = default;
  // Copies a lower tier's hit into the CPU tier (and to disk, with
  // `to_disk`): the CPU tier's copy, or why it could not take it.
  Result<SharedBuffer> Promote(const ChunkKey& key, const SharedBuffer& object, bool to_disk);
  // Promotes a Redis hit (and offers it to disk): adopted without a copy
  // when it was read into `space`, copied otherwise. The object to serve.
  SharedBuffer PromoteFromRemote(const ChunkKey& key, const SharedBuffer& fetched,
                                 std::optional<CpuTier::Reservation>& space);
  // Put's checks: not shut down, the object verifies as key's and is of
  // `as`'s tenant.
  Status CheckPut(const ChunkKey& key, std::span<const uint8_t> object,
                  std::optional<uint64_t> payload_checksum, const PutIdentity* as);
  // After the CPU admission `held` (of an object verified by CheckPut), the
  // write-through to the lower tiers; `object` is the caller's copy.
  Status WriteThrough(const ChunkKey& key, SharedBuffer object, bool already_cached,
                      Result<SharedBuffer> held);
  // The tiers of this node (CPU, disk) holding key; never touches the network.
  TierMask LocalMask(const ChunkKey& key, const std::string* only_tenant);
  // Whether an object of `owner` may be read by `only_tenant` (counted when not).
  bool Visible(const std::optional<Owner>& owner, const std::string* only_tenant);
  // Held by an admission from its check until it has landed. Nothing done
  // under it may enter StorageManager again (the tier listener included):
  // a revocation waiting at the turnstile would deadlock it.
  std::shared_lock<std::shared_mutex> Admitting();
  // Whether the owner's writer was revoked here; the caller holds
  // revoked_mu_. Refused: the same, counted as a refusal when so.
  bool Revoked(const std::optional<Owner>& owner) const;
  bool Refused(std::string_view writer);
  bool Refused(const std::optional<Owner>& owner);

  StorageOptions options_;
  std::unique_ptr<CpuTier> cpu_;
  std::unique_ptr<DiskTier> disk_;
  std::unique_ptr<RemoteTier> remote_;
  std::unique_ptr<WriteThroughQueue> disk_queue_, remote_queue_;
  std::atomic<bool> shut_down_{false};
  // Writers revoked here (DropWrittenBy). An admission (a put, a promotion)
  // holds revoked_mu_ shared from its check until it has landed; a
  // revocation takes it alone, so its sweep finds whatever landed before.
  // The turnstile keeps admissions from starving a revocation (glibc's
  // rwlock prefers readers).
  std::mutex revoked_turnstile_;
  std::shared_mutex revoked_mu_;
  std::set<std::string, std::less<>> revoked_writers_;
  std::atomic<bool> any_revoked_{false};  // whether Exists must read owners
  StorageCounters counters_;
};

}  // namespace pikv::storage
