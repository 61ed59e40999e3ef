// Attention metadata for a chunked prompt: which token may attend to which.
//
// Segments are [system prompt, chunk 1, ..., chunk n, question]; separators
// are markup and take no position, so positions run start, start+1, ... over
// the concatenated segments.
//   isolated:     every chunk (the system prompt included) attends causally
//                 within itself only; question tokens attend to everything
//                 before them and causally among themselves.
//   prefixed: chunk tokens also see the whole system prompt.
// Per query token the allowed keys are a few half-open ranges, which is what
// an engine's varlen attention wants; DenseMask is for reference and tests.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "pikv/common/status.h"
#include "pikv/proto/kv_types.h"

namespace pikv::device {

struct KeyRange {
  uint32_t begin, end;  // [begin, end) over token indexes
};

struct AttentionMetadata {
  std::vector<int32_t> segment_ids;            // 0 = system, 1..n chunks, n + 1 question
  std::vector<int64_t> positions;              // absolute position per token
  std::vector<uint32_t> segment_starts;        // first token index of each segment
  std::vector<std::vector<KeyRange>> allowed;  // per query token

  uint32_t num_tokens() const { return static_cast<uint32_t>(segment_ids.size()); }
  bool Allowed(uint32_t query, uint32_t key) const;
  std::vector<uint8_t> DenseMask() const;  // [query][key], 1 = may attend
};

// segment_lengths: system prompt, chunks..., question (at least two segments,
// none empty).
Result<AttentionMetadata> BuildAttentionMetadata(std::span<const uint32_t> segment_lengths,
                                                 AttentionMode mode, int64_t start_position = 0);

}  // namespace pikv::device
