// NodeClient: typed calls to one pikv-node over tcp or ipc.
//
// Each call is one request with a deadline (RpcClient; a batch of puts,
// several requests sent together). A call-level error (node down,
// timeout, rejected request) is the Result's status; per-key outcomes are
// in the returned vector (for a batch of puts, a message the node refused
// as a whole is each of its keys' outcome). Not thread-safe: one per
// thread.
#pragma once

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "pikv/transport/rpc_client.h"

namespace pikv::rpc {

class StagingPool;

// Per-key objects from a get or pull reply that answers `expected` keys.
Result<std::vector<Result<SharedBuffer>>> ObjectsFromReply(Result<Message> reply, size_t expected);

class NodeClient {
 public:
  explicit NodeClient(std::string endpoint,
                      std::chrono::milliseconds timeout = std::chrono::seconds(5),
                      WireLimits limits = {}, std::optional<CurveClientKeys> curve = std::nullopt);

  Status Ping();
  // Tier mask per key (bit 0 CPU, 1 disk, 2 remote; 0 = absent).
  Result<std::vector<uint8_t>> Exists(std::span<const ChunkKey> keys);
  // Per key: the object, or why not (kNotFound for a miss).
  Result<std::vector<Result<SharedBuffer>>> Get(std::span<const ChunkKey> keys);
  Result<std::vector<Status>> Put(std::span<const ChunkKey> keys,
                                  std::span<const SharedBuffer> objects);
  Result<std::vector<Status>> Delete(std::span<const ChunkKey> keys);
  Result<std::vector<Status>> Pin(std::span<const ChunkKey> keys);
  Result<std::vector<Status>> Unpin(std::span<const ChunkKey> keys);
  Result<Fields> Stats();
  // P2P: the node gets `keys` from peers that the controller says hold them
  // (preferring the one at `from`, if any), admits them and returns them:
  // misses for what no peer has or when none answers within `peer_timeout`.
  Result<std::vector<Result<SharedBuffer>>> Pull(std::span<const ChunkKey> keys,
                                                 const std::string& from,
                                                 std::chrono::milliseconds peer_timeout);

  // Pull that only admits: per key kOk (now in this node's CPU tier, or
  // lower) or why not; the objects are read afterwards in place.
  Result<std::vector<Status>> PullHere(std::span<const ChunkKey> keys, const std::string& from,
                                       std::chrono::milliseconds peer_timeout);

  void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }
  // Objects over `bytes` (and over kWholeObjectBytes, message.h) are put in
  // frames of that size, and gets ask the node to answer that way (it does
  // for replies over kWholeObjectBytes in all: message.h, streamed puts and
  // replies), so no message is object-sized; the call timeout then bounds
  // each frame's progress, not the whole transfer. 0 (the default) sends
  // objects whole.
  void set_stream_frame(uint64_t bytes) { stream_frame_ = bytes; }

 private:
  Result<Message> Call(MsgType type, std::span<const ChunkKey> keys,
                       std::vector<SharedBuffer> payloads = {}, Fields fields = {});
  Result<std::vector<Status>> PerKey(MsgType type, std::span<const ChunkKey> keys,
                                     std::vector<SharedBuffer> payloads = {}, Fields fields = {});
  Status PutStreamed(const ChunkKey& key, const SharedBuffer& object, Status& outcome);
  Result<std::vector<Result<SharedBuffer>>> ReceiveStreamed(const Header& reply, size_t keys);

  RpcClient rpc_;
  std::chrono::milliseconds timeout_;
  WireLimits limits_;
  uint64_t stream_frame_ = 0;
  std::shared_ptr<StagingPool> staging_;  // what streamed gets land in, reused
};

}  // namespace pikv::rpc
