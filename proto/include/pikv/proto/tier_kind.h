// The storage tiers, as every process names them (node storage, controller
// registry, wire tier masks). Numbered; never renumbered.
#pragma once

#include <cstdint>
#include <string_view>

#include "pikv/common/enum_names.h"

namespace pikv {

enum class TierKind : uint8_t { kCpu = 0, kDisk = 1, kRemote = 2 };
inline constexpr int kNumTiers = 3;

inline constexpr EnumName<TierKind> kTierNames[] = {
    {TierKind::kCpu, "cpu"}, {TierKind::kDisk, "disk"}, {TierKind::kRemote, "remote"}};
inline std::string_view TierName(TierKind t) { return NameOf(kTierNames, t); }

// Bit set of tiers, bit (1 << TierKind).
using TierMask = uint8_t;
inline constexpr TierMask Bit(TierKind t) {
  return static_cast<TierMask>(1u << static_cast<int>(t));
}

}  // namespace pikv
