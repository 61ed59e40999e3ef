// The storage tiers, as every process names them (node storage, controller
// registry, wire tier masks). Numbered; never renumbered.
#pragma once

#include <cstdint>
#include <string_view>

namespace pikv {

enum class TierKind : uint8_t { kCpu = 0, kDisk = 1, kRemote = 2 };
inline constexpr int kNumTiers = 3;

inline std::string_view TierName(TierKind t) {
  switch (t) {
    case TierKind::kCpu:
      return "cpu";
    case TierKind::kDisk:
      return "disk";
    case TierKind::kRemote:
      return "remote";
  }
  return "?";
}

// Bit set of tiers, bit (1 << TierKind).
using TierMask = uint8_t;
inline constexpr TierMask Bit(TierKind t) {
  return static_cast<TierMask>(1u << static_cast<int>(t));
}

}  // namespace pikv
