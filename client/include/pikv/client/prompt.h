// Chunked prompts: [system prompt, chunks..., question], as the engine's
// side splits them. The split is the connector's (python/pikv/connector.py
// split_segments: explicit lengths, or a separator token sequence that starts
// the segment after it, so the segments still concatenate to the prompt the
// engine computes); the client takes the segments (FromSegments) and never
// splits a prompt itself, so there is one rule. Errors (with what and where):
// fewer than two segments, an empty one.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "pikv/common/status.h"
#include "pikv/proto/chunk_key.h"

namespace pikv::client {

struct ChunkedPrompt {
  std::vector<std::vector<int32_t>> segments;  // system prompt, chunks..., question
  // The scope every chunk of the prompt is keyed in (KeyNamespace::scope;
  // none: the client's namespace as it is).
  std::optional<ChunkKey> scope;
  // A prompt computed to store its last segment at a distance from the
  // system prompt (prefixed mode, distance_buckets.h): the system prompt is
  // loaded encoded this many tokens further back, so the segment after it
  // reads it across that gap. 0: where it sits.
  int64_t distance = 0;
  // A chunk whose distance bucket's copy is found nowhere is planned from
  // its adjacent copy (bucket 0) where that one is found: the answer of
  // plain prefixed for that chunk, not a miss. False: only the bucket's
  // copy counts (what precompute asks, to compute what is missing).
  bool adjacent_fallback = true;

  size_t num_chunks() const { return segments.size() - 2; }
  const std::vector<int32_t>& system() const { return segments.front(); }
  const std::vector<int32_t>& question() const { return segments.back(); }
  std::vector<uint32_t> Lengths() const;
};

Result<ChunkedPrompt> FromSegments(std::vector<std::vector<int32_t>> segments);

}  // namespace pikv::client
