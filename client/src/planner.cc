#include "planner.h"

#include <iterator>
#include <vector>

#include "pikv/common/enum_names.h"
#include "pikv/proto/endpoint.h"
#include "pikv/proto/tier_kind.h"

namespace pikv::client {

namespace {

// The plan's chunks, one per segment before the question, keyed and placed;
// their keys in plan order.
std::vector<ChunkKey> AddChunks(const ChunkedPrompt& prompt, const Client& client, Plan& plan) {
  const ChunkKey sys_key =
      client.KeyOf(prompt.system(), {.sys_key = std::nullopt, .scope = prompt.scope});
  const ClientOptions& options = client.options();
  const bool prefixed = options.mode == AttentionMode::kPrefixed;
  const int64_t sys_end = static_cast<int64_t>(prompt.system().size());
  std::vector<ChunkKey> keys;
  for (size_t s = 0; s + 1 < prompt.segments.size(); ++s) {
    ChunkPlan c;
    c.segment = static_cast<uint32_t>(s);
    c.scope = prompt.scope;
    c.actual_start = plan.metadata.positions[plan.metadata.segment_starts[s]];
    c.encoded_start = s == 0 ? c.actual_start - prompt.distance : c.actual_start;
    if (s == 0) {
      c.key = sys_key;
    } else {
      // Prefixed: the copy computed at the bucket of this chunk's distance.
      const ChunkKey context =
          PrefixKeyAt(sys_key, options.distance_buckets.BucketOf(c.actual_start - sys_end));
      c.key = client.KeyOf(prompt.segments[s], {context, prompt.scope});
      if (prefixed) c.sys_key = context;
    }
    plan.chunks.push_back(c);
    keys.push_back(c.key);
  }
  return keys;
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

// 3. The remote tier, reachable only through a live local node; then the
// plan is counted by source.
void SettleRemote(Plan& plan, const std::vector<bool>& remote_here, ClientStats& stats) {
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    ChunkPlan& c = plan.chunks[i];
    if (c.source == Source::kMiss && remote_here[i] && plan.local_node_answered)
      c.source = Source::kRemote;
    stats.*kPlannedAs[static_cast<size_t>(c.source)] += 1;
  }
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
Plan StartPlan(const ChunkedPrompt& prompt, const Client& client, std::vector<ChunkKey>& keys) {
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
  std::vector<ChunkKey> keys;
  Plan plan = StartPlan(prompt, client, keys);
  stats.chunks_planned += keys.size();
  const std::vector<bool> remote_here = AskLocalNode(plan, keys, options, channels, stats);
  AskController(plan, keys, options, channels, stats);
  SettleRemote(plan, remote_here, stats);
  return plan;
}

Plan PlanKeys(const ChunkedPrompt& prompt, const Client& client) {
  std::vector<ChunkKey> keys;
  return StartPlan(prompt, client, keys);
}

Result<Plan> PlanFromSources(const ChunkedPrompt& prompt, const Client& client,
                             std::span<const PlannedSource> sources) {
  std::vector<ChunkKey> keys;
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
    ChunkPlan& c = plan.chunks[i];
    c.source = given.source;
    if (c.source == Source::kPeer) {
      c.peer_id = given.peer_id;
      c.peer_endpoint = given.peer_endpoint;
    }
  }
  return plan;
}

}  // namespace pikv::client
