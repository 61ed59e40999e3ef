#include "pikv/client/distance_buckets.h"

#include <bit>
#include <charconv>

namespace pikv::client {

int64_t DistanceBuckets::BucketOf(int64_t distance) const {
  if (distance <= 0 || distance > kMaxDistance) return 0;
  switch (scheme) {
    case Scheme::kNone:
      return 0;
    case Scheme::kLinear: {
      const int64_t nearest = (distance + step / 2) / step * step;
      return nearest > kMaxDistance ? nearest - step : nearest;  // a bucket is a distance
    }
    case Scheme::kPow2: {
      // The power of two below and the one above; the nearer in log scale
      // (d >= p·√2 means d² >= 2p²; both fit: d <= 2^30).
      const auto p = static_cast<int64_t>(std::bit_floor(static_cast<uint64_t>(distance)));
      return distance * distance >= 2 * p * p ? 2 * p : p;
    }
  }
  return 0;
}

std::string DistanceBuckets::Name() const {
  switch (scheme) {
    case Scheme::kNone:
      return "none";
    case Scheme::kPow2:
      return "pow2";
    case Scheme::kLinear:
      return std::to_string(step);
  }
  return "none";
}

Result<DistanceBuckets> DistanceBuckets::Parse(std::string_view text) {
  if (text == "none") return DistanceBuckets{};
  if (text == "pow2") return DistanceBuckets{Scheme::kPow2, 0};
  int64_t step = 0;
  const auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), step);
  if (err != std::errc() || end != text.data() + text.size() || step < 1 || step > kMaxDistance) {
    return InvalidArgument("distance-buckets: '" + std::string(text) +
                           "' is not none, pow2 or a step of 1.." + std::to_string(kMaxDistance) +
                           " tokens");
  }
  return DistanceBuckets{Scheme::kLinear, step};
}

}  // namespace pikv::client
