// Pieces every tier implementation shares; internal to storage/.
#pragma once

#include <atomic>
#include <cstdint>

#include "pikv/storage/tier.h"

namespace pikv::storage {

// The counters behind TierStats, updated lock-free.
struct TierCounters {
  std::atomic<uint64_t> hits{0}, misses{0}, admits{0}, evictions{0}, rejects{0}, corruptions{0},
      errors{0};

  // The counters' part of TierStats; the tier adds its sizes.
  TierStats Stats() const {
    return {.hits = hits,
            .misses = misses,
            .admits = admits,
            .evictions = evictions,
            .rejects = rejects,
            .corruptions = corruptions,
            .errors = errors};
  }
};

}  // namespace pikv::storage
