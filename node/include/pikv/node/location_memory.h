// LocationMemory: the last copies the controller named for keys this node
// pulled, and the peers it named most recently, so that pulls go on while no
// controller answers (a failover, etcd without quorum). A remembered
// location may be stale: the peer then answers "not found", and whatever a
// peer sends is verified on arrival as always (StorageManager::Put). Only
// what the controller said is remembered: a pull request never adds a peer.
// Bounded: at most `max_keys` keys, least recently remembered dropped first.
// Thread-safe.
#pragma once

#include <cstddef>
#include <list>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "pikv/proto/chunk_key.h"
#include "pikv/proto/locate_reply.h"

namespace pikv::node {

class LocationMemory {
 public:
  static constexpr size_t kMaxPeers = 4;
  static constexpr size_t kMaxKnownNodes = 1024;  // endpoints kept for NodeAt (beyond: forgotten)
  explicit LocationMemory(size_t max_keys = 16384) : max_keys_(max_keys) {}

  // The controller's answer for `keys`; a key it names no node copy of
  // keeps what was remembered.
  void Remember(std::span<const ChunkKey> keys, const std::vector<std::vector<Replica>>& copies);
  // Per key: its remembered copies, or for a key never located (when
  // `peers_for_unknown`) the peers named most recently, newest first.
  std::vector<std::vector<Replica>> Recall(std::span<const ChunkKey> keys,
                                           bool peers_for_unknown = true) const;
  size_t size() const;
  // The node the controller last named at tcp endpoint `tcp` ("" if none).
  std::string NodeAt(const std::string& tcp) const;

 private:
  struct Entry {
    std::vector<Replica> copies;
    std::list<ChunkKey>::iterator age;
  };
  const size_t max_keys_;
  mutable std::mutex mu_;
  std::list<ChunkKey> ages_;                    // guarded by mu_: newest first
  std::unordered_map<ChunkKey, Entry> by_key_;  // guarded by mu_
  std::vector<Replica> peers_;                  // guarded by mu_: newest first, distinct node ids
  std::unordered_map<std::string, std::string> node_at_;  // guarded by mu_: tcp -> node id
};

}  // namespace pikv::node
