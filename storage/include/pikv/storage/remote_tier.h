// RemoteTier: the remote tier, chunk objects in Redis, shared by the nodes
// of a cluster.
//
// Owns: one hiredis connection and the circuit breaker in front of it.
// Keys are `pikv:<namespace>:<key-hex>`; values are chunk objects, verified
// on every read (a corrupt value is deleted and is a miss). Objects over
// `part_bytes` (Redis refuses values over its bulk limit, 512 MB by default)
// are stored as parts behind a manifest that becomes visible only when every
// part is written (src/redis_parts.h). Batched calls are
// pipelined: one round trip for N keys. Values travel straight between the
// socket and their memory (src/resp_io.h); hiredis carries the small commands. Every I/O has a
// timeout; on failure the connection is dropped and re-established on a later call, with the
// breaker's backoff in between, so a dead Redis costs callers nothing but a
// kUnavailable. Redis's own eviction (maxmemory) is invisible here: only
// admits and our own deletes are reported.
// Stats' used_bytes and capacity_bytes are the Redis server's own figures
// (INFO memory: used_memory, maxmemory; 0 = no limit), read after each of
// this tier's writes and deletes: the remote tier's size is the server's,
// not what this node wrote, and reads do not change it. Between this node's
// writes they can lag other nodes' writes and Redis's own expiry.
// Thread-safety: thread-safe; calls are serialized on the one connection.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "pikv/proto/owner.h"
#include "pikv/storage/circuit_breaker.h"
#include "pikv/storage/tier.h"

struct redisContext;

namespace pikv::storage {

namespace resp {
struct BulkReply;
}

struct RemoteTierOptions {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string key_namespace = "default";  // separates clusters sharing one Redis
  std::string password;                   // sent with AUTH on every connection (empty: none)
  uint32_t ttl_seconds = 0;               // 0 = no expiry
  // Objects larger than this are stored as parts of at most this size; keep
  // it under the server's proto-max-bulk-len.
  uint64_t part_bytes = 256ull << 20;
  // Expiry of parts whose manifest was never written (a writer cut halfway).
  uint32_t orphan_ttl_seconds = 3600;
  std::chrono::milliseconds connect_timeout{200};
  std::chrono::milliseconds io_timeout{2000};
  CircuitBreaker::Options breaker;
};

// Parses "host:port" or "redis://host:port".
Result<RemoteTierOptions> ParseRedisAddress(const std::string& address);

class RemoteTier final : public Tier {
 public:
  // Never fails on a dead Redis: the tier starts disconnected and retries.
  explicit RemoteTier(RemoteTierOptions options, EventListener listener);
  ~RemoteTier() override;

  TierKind kind() const override { return TierKind::kRemote; }
  Status Put(const ChunkKey& key, const SharedBuffer& object) override;
  Result<SharedBuffer> Get(const ChunkKey& key) override;
  bool Contains(const ChunkKey& key) override;
  Status Remove(const ChunkKey& key) override;
  // Stats' rejects: operations refused by the open breaker.
  TierStats Stats() const override;
  // Read from the first bytes of each object (one pipelined GETRANGE; a
  // parted object's first part takes one more); all nullopt on a dead Redis.
  std::vector<std::optional<Owner>> OwnersOf(std::span<const ChunkKey> keys) override;
  // A SCAN of this namespace.
  Result<std::vector<ChunkKey>> Keys() override;

  std::vector<Result<SharedBuffer>> GetMany(std::span<const ChunkKey> keys) override;
  // Where the object read for keys[index] is to land once its size is
  // known: memory of the caller's of exactly `size` bytes (a CPU-tier
  // reservation: the object is then promoted without a copy), or an empty
  // span for memory of the tier's own. Asked only for objects of at least
  // kPlacedMinBytes (smaller ones cost little to copy, and a parts manifest
  // is never that large); what it returned is written whether or not the
  // object then passes its checks, and is the object's memory when it does.
  using Placer = std::function<std::span<uint8_t>(size_t index, uint64_t size)>;
  static constexpr uint64_t kPlacedMinBytes = 64 << 10;
  std::vector<Result<SharedBuffer>> GetManyPlaced(std::span<const ChunkKey> keys,
                                                  const Placer& place);
  std::vector<Status> PutMany(std::span<const ChunkKey> keys,
                              std::span<const SharedBuffer> objects) override;
  std::vector<bool> ContainsMany(std::span<const ChunkKey> keys) override;

  std::string RedisKey(const ChunkKey& key) const;
  CircuitBreaker::State breaker_state() const;
  // Operations refused because the circuit was open.
  uint64_t unavailable() const;

 private:
  struct Reply;
  // Runs one pipelined batch of commands (argv form); replies in order, or
  // an error Status when the connection failed or the breaker is open.
  Result<std::vector<std::shared_ptr<Reply>>> Pipeline(
      const std::vector<std::vector<std::string_view>>& commands);
  // One pipelined `verb <redis key>` per key.
  Result<std::vector<std::shared_ptr<Reply>>> PerKey(std::string_view verb,
                                                     std::span<const ChunkKey> keys);
  // Runs `io` on the connection's socket (ctx_ held for it: Pipeline goes
  // through hiredis, the values' path through resp_io), under the lock and
  // the breaker; a failed `io` drops the connection.
  Status Exchange(size_t ops, const std::function<Status(int fd)>& io);
  // The status replies of `n` commands written before.
  static Status ReadStatuses(int fd, size_t n, std::vector<resp::BulkReply>& out);
  Status PutParts(const ChunkKey& key, const SharedBuffer& object);
  // The object behind a manifest into `object`; `key_status` says why not
  // (kCorruption: a malformed manifest, a part missing or short; another
  // error: a part refused, no memory: the object is kept). An error return
  // is the connection's. Runs inside an Exchange.
  Status ReadParts(int fd, const std::string& name, std::string_view manifest,
                   const std::function<std::span<uint8_t>(uint64_t)>& place, SharedBuffer& object,
                   Status& key_status);
  Status ConnectLocked();
  void DisconnectLocked();
  // Reads the server's used_memory and maxmemory (best effort: a failure
  // keeps the last figures).
  void RefreshServerMemory();

  RemoteTierOptions options_;
  mutable std::mutex mu_;
  redisContext* ctx_ = nullptr;  // guarded by mu_
  CircuitBreaker breaker_;       // guarded by mu_
  std::atomic<uint64_t> server_used_bytes_{0}, server_max_bytes_{0};
};

}  // namespace pikv::storage
