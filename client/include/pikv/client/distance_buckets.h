// DistanceBuckets: at which distance from the system prompt a prefixed-mode
// document is computed and stored (shared/DESIGN.md §4).
//
// A document used `d` tokens after the end of the system prompt (the
// lengths of the documents before it) is loaded from the copy computed
// BucketOf(d) tokens after it, with nothing attended in the gap, and
// re-rotated to where it sits: the document reads the system prompt at
// about the distance it really has, and the copies stored per document are
// one per bucket used. Bucket 0 is the adjacent form `prefixed` always
// stored (the same key: PrefixKeyAt), so `none` is plain `prefixed`.
//   none    every document at distance 0
//   pow2    the nearest power of two in log scale (0 stays 0)
//   <N>     the nearest multiple of N tokens (N >= 1)
// A value type; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "pikv/common/status.h"

namespace pikv::client {

struct DistanceBuckets {
  enum class Scheme : uint8_t { kNone, kPow2, kLinear };
  // The largest distance a bucket is computed for: a prompt longer than
  // this is not a prompt any engine here serves.
  static constexpr int64_t kMaxDistance = int64_t{1} << 30;

  Scheme scheme = Scheme::kNone;
  int64_t step = 0;  // kLinear's N

  // The bucket of a distance in [0, kMaxDistance] (itself in that range);
  // out of it: 0.
  int64_t BucketOf(int64_t distance) const;
  std::string Name() const;
  static Result<DistanceBuckets> Parse(std::string_view text);
  friend bool operator==(const DistanceBuckets&, const DistanceBuckets&) = default;
};

}  // namespace pikv::client
