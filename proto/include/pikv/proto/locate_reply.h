// The controller's reply to kLocate: written by the controller, decoded for whoever asked (clients,
// the CLI, a node resolving the peers it pulls from).
//
// On the wire: values hold, per requested key, a count n and then n location
// codes (node_index << 2 | tier), cheapest first; fields hold, per node index
// i that appears, "n<i>.id", "n<i>.host", "n<i>.tcp", "n<i>.ipc".
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "pikv/proto/location.h"
#include "pikv/proto/message.h"

namespace pikv {

// The controller answers at most this many copies per key (the cheapest),
// so a reply to a full batch of keys fits WireLimits::max_values.
inline constexpr size_t kMaxLocateCopies = 8;

// Writes a reply, one key at a time in the request's order, then the nodes
// the copies name. The replicas must outlive Finish().
class LocateReplyEncoder {
 public:
  explicit LocateReplyEncoder(Header& reply) : reply_(reply) {}
  void AddKey(std::span<const Replica> copies);
  void Finish();

 private:
  Header& reply_;
  std::map<uint16_t, const Replica*> nodes_;  // by node index
};

// A reply from a registry the nodes may still be filling (a new
// leadership, a restart: ClusterState::Filling) says so. A key it names no
// copy of may be held anyway; a node pulling it asks where the key, or the
// peers, were last seen (node/src/puller.h).
void MarkRegistryFilling(Header& reply);
bool RegistryFilling(const Header& reply);

// Per key, its copies; ProtocolError when the reply does not describe
// exactly `keys` keys.
Result<std::vector<std::vector<Replica>>> DecodeLocateReply(const Header& reply, size_t keys);

}  // namespace pikv
