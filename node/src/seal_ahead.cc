#include "seal_ahead.h"

#include "pikv/proto/endian.h"

namespace pikv::node {

bool SealAhead::Mark(std::span<const uint8_t> space, uint64_t written) {
  const uint64_t from = sum_.appended();
  if (written < from || written > space.size()) return false;
  sum_.Append(space.subspan(from, written - from));
  return true;
}

std::optional<uint64_t> SealAhead::Finish(std::span<const uint8_t> space) {
  if (marked() == 0 || space.size() < 16) return std::nullopt;
  // Bytes 12..16 say where the payload starts, as they did when first marked?
  if (LoadLE<uint32_t>(space.data() + 12) != sum_.payload_offset()) return std::nullopt;
  if (!Mark(space, space.size())) return std::nullopt;
  return sum_.Digest();
}

}  // namespace pikv::node
