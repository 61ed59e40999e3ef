// Chunk-set scoring: for a prompt's chunks, what each node would get of
// them and from where, so a router can send the request where the least
// is left to compute.
//
// Routers that score prefixes (the longest run of cached blocks from the
// first) score a RAG prompt whose documents come in a new order near zero;
// pikv reuses each chunk wherever it sits, so a chunk counts for a node
// wherever it is in the prompt. Per node and chunk, its tokens count in
// exactly one reach, the cheapest the node has:
//   kCpu / kDisk  the node holds it itself (its lease or its own disk);
//   kRemote       the cluster's shared tier (Redis) holds it;
//   kPeer         another alive node holds it (a P2P pull);
//   kMissing      no one does: it is computed.
// prefix_tokens is what a prefix scorer would count: the run of chunks from
// the first that the node itself holds, for comparison.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pikv/common/status.h"
#include "pikv/proto/location.h"

namespace pikv::controller {

enum class Reach : uint8_t { kCpu = 0, kDisk = 1, kRemote = 2, kPeer = 3, kMissing = 4 };
inline constexpr int kNumReaches = 5;
std::string_view ReachName(Reach r);

// A chunk's tokens in a score query: 1 to this (a chunk longer than any
// context window is a malformed query, not a heavy chunk).
inline constexpr int64_t kMaxChunkTokens = int64_t{1} << 24;
// A query's keys (1 to the wire's batch) and tokens (none, or one per key,
// each 1 to kMaxChunkTokens), checked where they enter (wire and HTTP).
Status CheckScoreQuery(size_t keys, std::span<const int64_t> tokens);

// One chunk of the prompt: its tokens and where the registry has it (the
// locations a reader may see; empty for a chunk another tenant wrote).
struct ScoredChunk {
  uint64_t tokens = 1;
  std::vector<Location> locations;
};

// A candidate node and what it would get.
struct NodeScore {
  uint16_t index = 0;  // node table index
  std::string id, host;
  bool alive = true;  // false: suspect (scored, its copies count for itself only)
  double requests_per_second = 0;
  std::array<uint64_t, kNumReaches> tokens{};  // by Reach; they add up to the prompt's
  uint64_t prefix_tokens = 0;
};

// Fills each candidate's tokens and prefix_tokens (both zeroed first).
// `alive[i]`: whether node index i is alive, so its copies can be pulled
// (a location on an index past its end counts as not alive). O(chunks ×
// copies + candidates), whatever the registry's size.
void ScoreChunkSet(std::span<const ScoredChunk> chunks, const std::vector<bool>& alive,
                   std::span<NodeScore> candidates);

}  // namespace pikv::controller
