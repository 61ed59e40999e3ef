#include "planner.h"

#include <iterator>
#include <vector>

#include "pikv/common/enum_names.h"
#include "pikv/proto/endpoint.h"
#include "pikv/proto/tier_kind.h"

namespace pikv::client {

namespace {

// The keys of a plan's chunks, and of the adjacent copy (bucket 0) of each
// chunk planned at a distance bucket past 0, to fall back on.
struct ChunkKeys {
  std::vector<ChunkKey> planned;                  // in plan order
  std::vector<std::optional<ChunkKey>> adjacent;  // where it differs from planned
  ChunkKey sys_key;
};

// The plan's chunks, one per segment before the question, keyed and placed.
ChunkKeys AddChunks(const ChunkedPrompt& prompt, const Client& client, Plan& plan) {
  ChunkKeys keys;
  keys.sys_key = client.KeyOf(prompt.system(), {.sys_key = std::nullopt, .scope = prompt.scope});
  const ClientOptions& options = client.options();
  const bool prefixed = options.mode == AttentionMode::kPrefixed;
  const int64_t sys_end = static_cast<int64_t>(prompt.system().size());
  for (size_t s = 0; s + 1 < prompt.segments.size(); ++s) {
    ChunkPlan c;
    c.segment = static_cast<uint32_t>(s);
    c.scope = prompt.scope;
    c.actual_start = plan.metadata.positions[plan.metadata.segment_starts[s]];
    c.encoded_start = s == 0 ? c.actual_start - prompt.distance : c.actual_start;
    std::optional<ChunkKey> adjacent;
    if (s == 0) {
      c.key = keys.sys_key;
    } else {
      // Prefixed: the copy computed at the bucket of this chunk's distance.
      const int64_t bucket = options.distance_buckets.BucketOf(c.actual_start - sys_end);
      const ChunkKey context = PrefixKeyAt(keys.sys_key, bucket);
      c.key = client.KeyOf(prompt.segments[s], {context, prompt.scope});
      if (prefixed) c.sys_key = context;
      if (prefixed && bucket != 0)
        adjacent = client.KeyOf(prompt.segments[s], {keys.sys_key, prompt.scope});
    }
    plan.chunks.push_back(c);
    keys.planned.push_back(c.key);
    keys.adjacent.push_back(adjacent);
  }
  return keys;
}

// Chunk i planned from its adjacent copy instead of its bucket's.
void UseAdjacent(ChunkPlan& c, const ChunkKeys& keys, size_t i) {
  c.key = *keys.adjacent[i];
  c.sys_key = keys.sys_key;
  c.adjacent = true;
}

// 1. The local node: CPU or disk is local; Redis-only is remote (through it).
// Only its live look into Redis decides the remote tier: the registry's
// shared-tier entries lag behind deletes (another node's, Redis's own
// expiry), and a plan on a stale one fails at fetch. Returns, per chunk,
// whether the node's Redis holds it.
std::vector<bool> AskLocalNode(Plan& plan, const std::vector<ChunkKey>& keys,
                               const ClientOptions& options, Channels& channels,
                               ClientStats& stats) {
  std::vector<bool> remote_here(keys.size(), false);
  rpc::NodeClient* local = channels.local();
  if (!local) return remote_here;
  local->set_timeout(options.node_timeout);
  auto masks = local->Exists(keys);
  if (!masks.ok()) {
    stats.local_node_timeouts++;
    return remote_here;
  }
  plan.local_node_answered = true;
  for (size_t i = 0; i < keys.size(); ++i) {
    const TierMask m = (*masks)[i];
    if (m & (Bit(TierKind::kCpu) | Bit(TierKind::kDisk))) plan.chunks[i].source = Source::kLocal;
    remote_here[i] = (m & Bit(TierKind::kRemote)) != 0;
  }
  return remote_here;
}

// 2. The controller for the rest: a peer's CPU or disk beats the remote
// tier. It is waited on for options.locate_budget at most (Locator).
void AskController(Plan& plan, const std::vector<ChunkKey>& keys, const ClientOptions& options,
                   Channels& channels, ClientStats& stats) {
  std::vector<size_t> rest;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (plan.chunks[i].source != Source::kLocal) rest.push_back(i);
  }
  Locator* locator = channels.locator();
  if (!locator || rest.empty()) return;
  std::vector<ChunkKey> ask;
  for (size_t i : rest) ask.push_back(keys[i]);
  const Locator::Answer located = locator->Locate(ask, options.locate_budget);
  switch (located.outcome) {
    case Locator::Outcome::kSkipped:
      stats.controller_skipped++;
      break;
    case Locator::Outcome::kNoAnswer:
      stats.controller_timeouts++;
      break;
    case Locator::Outcome::kAnswered:
      plan.controller_answered = true;
      break;
  }
  // Without an answer now, what an earlier one said (kept briefly) still serves.
  for (size_t j = 0; j < rest.size(); ++j) {
    ChunkPlan& c = plan.chunks[rest[j]];
    for (const auto& r : located.replicas[j]) {
      if (r.location.tier == TierKind::kRemote) continue;
      if (c.source == Source::kMiss && r.host != options.host && !r.tcp.empty()) {
        c.source = Source::kPeer;  // replicas come cheapest first
        c.peer_id = r.node_id;
        c.peer_endpoint = r.tcp;
      }
    }
  }
}

// The ClientStats field each Source is counted in, in Source's order.
constexpr uint64_t ClientStats::*kPlannedAs[] = {
    &ClientStats::planned_local, &ClientStats::planned_peer, &ClientStats::planned_remote,
    &ClientStats::planned_miss};
static_assert(std::size(kPlannedAs) == static_cast<size_t>(Source::kMiss) + 1);

// 3. The remote tier, reachable only through a live local node.
void SettleRemote(Plan& plan, const std::vector<bool>& remote_here) {
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    ChunkPlan& c = plan.chunks[i];
    if (c.source == Source::kMiss && remote_here[i] && plan.local_node_answered)
      c.source = Source::kRemote;
  }
}

// The adjacent copies asked beside the chunks: appended to the plan as
// chunks of their own (alternate_of: the chunk each stands for), so the
// node and the controller are each asked once.
std::vector<size_t> AppendAdjacent(Plan& plan, const ChunkKeys& keys, std::vector<ChunkKey>& ask) {
  std::vector<size_t> alternate_of;
  const size_t n = plan.chunks.size();
  for (size_t i = 0; i < n; ++i) {
    if (!keys.adjacent[i]) continue;
    ChunkPlan alt = plan.chunks[i];
    UseAdjacent(alt, keys, i);
    ask.push_back(alt.key);
    plan.chunks.push_back(std::move(alt));
    alternate_of.push_back(i);
  }
  return alternate_of;
}

// 4. A chunk its bucket's copy missed takes its adjacent copy where that one
// was found; the appended copies go, and the plan is counted by source.
void SettleAdjacent(Plan& plan, size_t n, const std::vector<size_t>& alternate_of,
                    ClientStats& stats) {
  for (size_t j = 0; j < alternate_of.size(); ++j) {
    ChunkPlan& c = plan.chunks[alternate_of[j]];
    if (c.source == Source::kMiss && plan.chunks[n + j].source != Source::kMiss) {
      c = plan.chunks[n + j];
      stats.planned_adjacent++;
    }
  }
  plan.chunks.resize(n);
  for (const ChunkPlan& c : plan.chunks) stats.*kPlannedAs[static_cast<size_t>(c.source)] += 1;
}

}  // namespace

constexpr EnumName<Source> kSourceNames[] = {{Source::kLocal, "local"},
                                             {Source::kPeer, "peer"},
                                             {Source::kRemote, "remote"},
                                             {Source::kMiss, "miss"}};

std::string_view SourceName(Source s) { return NameOf(kSourceNames, s); }

std::optional<Source> ParseSource(std::string_view name) { return ValueOf(kSourceNames, name); }

namespace {

// A plan's chunks, keys and positions: what needs nobody's answer.
Plan StartPlan(const ChunkedPrompt& prompt, const Client& client, ChunkKeys& keys) {
  Plan plan;
  auto meta = device::BuildAttentionMetadata(prompt.Lengths(), client.options().mode);
  if (!meta.ok()) return plan;  // a ChunkedPrompt is already validated; nothing to plan otherwise
  plan.metadata = std::move(*meta);
  keys = AddChunks(prompt, client, plan);
  return plan;
}

}  // namespace

Plan BuildPlan(const ChunkedPrompt& prompt, const Client& client, Channels& channels,
               ClientStats& stats) {
  const ClientOptions& options = client.options();
  stats.plans++;
  ChunkKeys keys;
  Plan plan = StartPlan(prompt, client, keys);
  const size_t n = plan.chunks.size();
  stats.chunks_planned += n;
  std::vector<ChunkKey> ask = keys.planned;
  const std::vector<size_t> alternate_of =
      prompt.adjacent_fallback ? AppendAdjacent(plan, keys, ask) : std::vector<size_t>{};
  const std::vector<bool> remote_here = AskLocalNode(plan, ask, options, channels, stats);
  AskController(plan, ask, options, channels, stats);
  SettleRemote(plan, remote_here);
  SettleAdjacent(plan, n, alternate_of, stats);
  return plan;
}

Plan PlanKeys(const ChunkedPrompt& prompt, const Client& client) {
  ChunkKeys keys;
  return StartPlan(prompt, client, keys);
}

Result<Plan> PlanFromSources(const ChunkedPrompt& prompt, const Client& client,
                             std::span<const PlannedSource> sources) {
  ChunkKeys keys;
  Plan plan = StartPlan(prompt, client, keys);
  if (sources.size() != plan.chunks.size())
    return InvalidArgument("planned sources: " + std::to_string(sources.size()) + " for " +
                           std::to_string(plan.chunks.size()) + " chunks");
  for (size_t i = 0; i < sources.size(); ++i) {
    const PlannedSource& given = sources[i];
    if (given.source == Source::kPeer &&
        (given.peer_id.empty() || !ParseTcpEndpoint(given.peer_endpoint).ok()))
      return InvalidArgument("planned sources: chunk " + std::to_string(i) +
                             " names a peer without an id or a tcp endpoint");
    if (given.adjacent && !keys.adjacent[i])
      return InvalidArgument("planned sources: chunk " + std::to_string(i) +
                             " has no adjacent copy to be planned from");
    ChunkPlan& c = plan.chunks[i];
    if (given.adjacent) UseAdjacent(c, keys, i);
    c.source = given.source;
    if (c.source == Source::kPeer) {
      c.peer_id = given.peer_id;
      c.peer_endpoint = given.peer_endpoint;
    }
  }
  return plan;
}

}  // namespace pikv::client
