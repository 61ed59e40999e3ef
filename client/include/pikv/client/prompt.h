// Chunked prompts: `sys SEP chunk_1 SEP ... SEP chunk_n SEP question`.
//
// The separator is a token-id sequence (the tokenizer's encoding of "##" by
// default); it is markup and takes no position. Engines that tokenize
// segments separately should hand them over directly (FromSegments), since a
// BPE tokenizer can merge a separator with its neighbours. Segment 0 is the
// system prompt, the last is the question, the ones between are chunks.
// Errors (with what and where): an empty separator, no separator, an empty
// segment (a separator at either end, or two adjacent separators).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "pikv/common/status.h"

namespace pikv::client {

struct ChunkedPrompt {
  std::vector<std::vector<int32_t>> segments;  // system prompt, chunks..., question

  size_t num_chunks() const { return segments.size() - 2; }
  const std::vector<int32_t>& system() const { return segments.front(); }
  const std::vector<int32_t>& question() const { return segments.back(); }
  std::vector<uint32_t> Lengths() const;
};

Result<ChunkedPrompt> ParsePrompt(std::span<const int32_t> tokens,
                                  std::span<const int32_t> separator);
Result<ChunkedPrompt> FromSegments(std::vector<std::vector<int32_t>> segments);

}  // namespace pikv::client
