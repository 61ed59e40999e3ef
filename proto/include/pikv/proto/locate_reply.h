// The controller's reply to kLocate, decoded for whoever asked (clients, the
// CLI, a node resolving the peers it pulls from).
//
// On the wire: values hold, per requested key, a count n and then n location
// codes (node_index << 2 | tier), cheapest first; fields hold, per node index
// i that appears, "n<i>.id", "n<i>.host", "n<i>.tcp", "n<i>.ipc".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pikv/proto/message.h"
#include "pikv/proto/tier_kind.h"

namespace pikv {

// The controller answers at most this many copies per key (the cheapest),
// so a reply to a full batch of keys fits WireLimits::max_values.
inline constexpr size_t kMaxLocateCopies = 8;

struct LocatedCopy {
  uint16_t node = 0;  // the controller's node index
  TierKind tier = TierKind::kCpu;
  std::string node_id, host, tcp, ipc;
};

// Per key, its copies; ProtocolError when the reply does not describe
// exactly `keys` keys.
Result<std::vector<std::vector<LocatedCopy>>> DecodeLocateReply(const Header& reply, size_t keys);

}  // namespace pikv
