#include "pikv/device/attention_metadata.h"

namespace pikv::device {

bool AttentionMetadata::Allowed(uint32_t query, uint32_t key) const {
  for (const KeyRange& r : allowed[query]) {
    if (key >= r.begin && key < r.end) return true;
  }
  return false;
}

std::vector<uint8_t> AttentionMetadata::DenseMask() const {
  const uint32_t n = num_tokens();
  std::vector<uint8_t> mask(size_t{n} * n, 0);
  for (uint32_t q = 0; q < n; ++q) {
    for (const KeyRange& r : allowed[q]) {
      for (uint32_t k = r.begin; k < r.end; ++k) mask[size_t{q} * n + k] = 1;
    }
  }
  return mask;
}

Result<AttentionMetadata> BuildAttentionMetadata(std::span<const uint32_t> lengths,
                                                 AttentionMode mode, int64_t start_position) {
  if (lengths.size() < 2)
    return InvalidArgument("a chunked prompt needs a system prompt and a question");
  for (size_t s = 0; s < lengths.size(); ++s) {
    if (lengths[s] == 0) {
      return InvalidArgument(s == 0 ? "the system prompt is empty"
                             : s + 1 == lengths.size()
                                 ? "the question is empty"
                                 : "chunk " + std::to_string(s) + " is empty");
    }
  }
  AttentionMetadata m;
  const size_t question = lengths.size() - 1;
  uint32_t start = 0;
  for (size_t s = 0; s < lengths.size(); ++s) {
    m.segment_starts.push_back(start);
    for (uint32_t t = 0; t < lengths[s]; ++t) {
      const uint32_t index = start + t;
      m.segment_ids.push_back(static_cast<int32_t>(s));
      m.positions.push_back(start_position + index);
      std::vector<KeyRange> ranges;
      if (s == question) {
        ranges.push_back({0, index + 1});
      } else {
        if (s > 0 && mode == AttentionMode::kPrefixed) ranges.push_back({0, lengths[0]});
        ranges.push_back({start, index + 1});
      }
      m.allowed.push_back(std::move(ranges));
    }
    start += lengths[s];
  }
  return m;
}

}  // namespace pikv::device
