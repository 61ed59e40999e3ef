// Where a chunk is, and how that changes: the copies the controller's
// answers (locate, admin locate) describe, and the admit/evict events nodes
// report (kEvents and inventory values). One definition for both ends.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "pikv/proto/tier_kind.h"

namespace pikv {

// One copy: a node-table index and a tier; Code() packs both into 16 bits.
struct Location {
  uint16_t node = 0;  // index into the controller's node table
  TierKind tier = TierKind::kCpu;

  uint16_t Code() const { return static_cast<uint16_t>(node << 2 | static_cast<uint16_t>(tier)); }
  static Location FromCode(uint16_t code) {
    return {static_cast<uint16_t>(code >> 2), static_cast<TierKind>(code & 3)};
  }
  friend bool operator==(const Location&, const Location&) = default;
};

// A copy with the node's identity and endpoints, as a client needs it to fetch.
struct Replica {
  Location location;
  std::string node_id;
  std::string host;
  std::string tcp;
  std::string ipc;
};

// An event value on the wire: tier | kind << 4 | owner << 8 (kind 1 = admit,
// 2 = evict; an inventory's values have kind 0 = held, an admit). `owner`
// indexes the report's owner table (control_wire.h: NodeReport), 1 to
// kMaxOwnersPerReport; 0 is an owner the node did not know (or an evict).
inline constexpr int kMaxOwnersPerReport = 255;

struct LocationEvent {
  TierKind tier = TierKind::kCpu;
  bool admit = true;
  int owner = 0;
};
inline int64_t EncodeEvent(TierKind tier, bool admit, int owner = 0) {
  return static_cast<int64_t>(tier) | (admit ? 1 : 2) << 4 | static_cast<int64_t>(owner) << 8;
}
inline int64_t EncodeHeld(TierKind tier, int owner = 0) {
  return static_cast<int64_t>(tier) | static_cast<int64_t>(owner) << 8;
}
// nullopt for a value that is not an event (unknown tier, kind or owner slot).
inline std::optional<LocationEvent> DecodeEvent(int64_t value) {
  const int64_t tier = value & 0xf, kind = (value >> 4) & 0xf, owner = value >> 8;
  if (tier >= kNumTiers || kind > 2 || owner < 0 || owner > kMaxOwnersPerReport)
    return std::nullopt;
  return LocationEvent{static_cast<TierKind>(tier), kind != 2, static_cast<int>(owner)};
}

}  // namespace pikv
