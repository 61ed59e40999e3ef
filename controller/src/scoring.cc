#include "pikv/controller/scoring.h"

#include <algorithm>

#include "pikv/proto/admin_wire.h"
#include "pikv/proto/message.h"

namespace pikv::controller {

static_assert(std::size(admin::kReaches) == kNumReaches);
std::string_view ReachName(Reach r) { return admin::kReaches[static_cast<size_t>(r)]; }

Status CheckScoreQuery(size_t keys, std::span<const int64_t> tokens) {
  if (keys == 0 || keys > WireLimits{}.max_batch)
    return InvalidArgument("a score names 1 to " + std::to_string(WireLimits{}.max_batch) +
                           " keys");
  if (!tokens.empty() && tokens.size() != keys)
    return InvalidArgument("a score gives tokens for every key or for none");
  for (int64_t t : tokens) {
    if (t < 1 || t > kMaxChunkTokens)
      return InvalidArgument("a chunk's tokens are 1 to " + std::to_string(kMaxChunkTokens));
  }
  return Status::Ok();
}

namespace {

constexpr size_t Index(Reach r) { return static_cast<size_t>(r); }
// A holder's own copy is in its tier: the reaches start with the tiers.
static_assert(static_cast<int>(Reach::kCpu) == static_cast<int>(TierKind::kCpu) &&
              static_cast<int>(Reach::kDisk) == static_cast<int>(TierKind::kDisk));

// Where a candidate that holds no copy of the chunk gets it from.
Reach Fallback(const ScoredChunk& chunk, const std::vector<bool>& alive) {
  bool pullable = false;
  for (const Location& loc : chunk.locations) {
    if (loc.tier == TierKind::kRemote) return Reach::kRemote;
    pullable = pullable || (loc.node < alive.size() && alive[loc.node]);
  }
  return pullable ? Reach::kPeer : Reach::kMissing;
}

}  // namespace

void ScoreChunkSet(std::span<const ScoredChunk> chunks, const std::vector<bool>& alive,
                   std::span<NodeScore> candidates) {
  // Every candidate gets each chunk's fallback reach; a holder's own copy
  // then moves those tokens into its tier. So the work is per copy, not
  // per (chunk, candidate).
  constexpr int kNone = -1;
  size_t max_index = 0;
  for (const NodeScore& c : candidates) max_index = std::max<size_t>(max_index, c.index);
  std::vector<int> slot(max_index + 1, kNone);
  for (size_t s = 0; s < candidates.size(); ++s) slot[candidates[s].index] = static_cast<int>(s);

  std::array<uint64_t, kNumReaches> fallback_tokens{};
  std::vector<std::array<int64_t, kNumReaches>> moved(candidates.size());
  std::vector<int> own_tier(candidates.size(), kNone);  // this chunk's, per candidate
  std::vector<int> holders, open_prefix;                // candidate slots
  std::vector<uint64_t> prefix(candidates.size(), 0);
  for (size_t s = 0; s < candidates.size(); ++s) open_prefix.push_back(static_cast<int>(s));

  for (const ScoredChunk& chunk : chunks) {
    const Reach fallback = Fallback(chunk, alive);
    fallback_tokens[Index(fallback)] += chunk.tokens;
    holders.clear();
    for (const Location& loc : chunk.locations) {
      if (loc.tier == TierKind::kRemote || loc.node > max_index || slot[loc.node] == kNone)
        continue;
      const int s = slot[loc.node];
      if (own_tier[s] == kNone) holders.push_back(s);
      own_tier[s] =
          std::min(own_tier[s] == kNone ? kNumTiers : own_tier[s], static_cast<int>(loc.tier));
    }
    for (int s : holders) {
      const auto own = static_cast<Reach>(own_tier[s]);  // kCpu or kDisk, as the tiers
      moved[s][Index(fallback)] -= static_cast<int64_t>(chunk.tokens);
      moved[s][Index(own)] += static_cast<int64_t>(chunk.tokens);
    }
    // A prefix stays open for the candidates that hold every chunk so far.
    std::erase_if(open_prefix, [&](int s) { return own_tier[s] == kNone; });
    for (int s : open_prefix) prefix[s] += chunk.tokens;
    for (int s : holders) own_tier[s] = kNone;
  }
  for (size_t s = 0; s < candidates.size(); ++s) {
    for (int r = 0; r < kNumReaches; ++r)
      candidates[s].tokens[r] =
          static_cast<uint64_t>(static_cast<int64_t>(fallback_tokens[r]) + moved[s][r]);
    candidates[s].prefix_tokens = prefix[s];
  }
}

}  // namespace pikv::controller
