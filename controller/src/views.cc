#include "pikv/controller/views.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "pikv/controller/controller_stats.h"
#include "pikv/proto/admin_wire.h"
#include "pikv/proto/owner.h"

namespace pikv::controller {

namespace {

using nlohmann::json;

// Strings in these documents came from peers; they are checked at
// registration, and anything that is still not UTF-8 is replaced, never thrown on.
constexpr size_t Index(TierKind t) { return static_cast<size_t>(t); }

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// Totals by tier over live nodes. The remote tier is one Redis shared by the
// cluster: its chunks are the registry's remote-tier locations (no node owns
// them), and its bytes are the server's, which every node reports as of its
// own last write: the largest report is taken, not their sum.
json TierTotals(const std::vector<NodeView>& nodes, const ClusterStats& stats) {
  json tiers = json::object();
  for (int t = 0; t < kNumTiers; ++t) {
    const auto tier = static_cast<TierKind>(t);
    const bool shared = tier == TierKind::kRemote;
    const std::string name(TierName(tier));
    uint64_t hits = 0, misses = 0, used = 0, capacity = 0;
    uint64_t chunks = shared ? stats.shared_tier_chunks : 0;
    for (const auto& n : nodes) {
      if (n.state != NodeState::kAlive && n.state != NodeState::kSuspect) continue;
      const NodeUsage::Tier& u = n.usage.tiers[t];
      hits += u.hits;
      misses += u.misses;
      used = shared ? std::max(used, u.used_bytes) : used + u.used_bytes;
      capacity = shared ? std::max(capacity, u.capacity_bytes) : capacity + u.capacity_bytes;
      chunks += n.chunks[t];
    }
    tiers[name] = {
        {admin::kChunks, chunks},
        {admin::kUsedBytes, used},
        {admin::kCapacityBytes, capacity},
        {admin::kHits, hits},
        {admin::kMisses, misses},
        {admin::kHitRate, hits + misses > 0 ? static_cast<double>(hits) / (hits + misses) : 0.0}};
  }
  return tiers;
}

// A node's pulls from its peers, from its last heartbeat; added into `total`.
json PullsOf(const NodeView& n, json& total) {
  json p2p;
  for (auto [field, count] : {std::pair{admin::kPulledObjects, n.usage.pulled_objects},
                              std::pair{admin::kPulledBytes, n.usage.pulled_bytes},
                              std::pair{admin::kPullFailures, n.usage.pull_failures}}) {
    p2p[field] = count;
    total[field] = total.value(field, uint64_t{0}) + count;
  }
  return p2p;
}

}  // namespace

std::string NodesJson(const ClusterState& state, Clock::time_point now) {
  json nodes = json::array();
  for (const auto& n : state.Nodes(now)) {
    json tiers = json::object();
    for (int t = 0; t < kNumTiers; ++t) {
      const std::string name(TierName(static_cast<TierKind>(t)));
      tiers[name] = {{admin::kChunks, n.chunks[t]},
                     {admin::kUsedBytes, n.usage.tiers[t].used_bytes},
                     {admin::kCapacityBytes, n.usage.tiers[t].capacity_bytes}};
    }
    nodes.push_back({{admin::kId, n.reg.id},
                     {admin::kIndex, n.index},
                     {admin::kState, std::string(NodeStateName(n.state))},
                     {admin::kHost, n.reg.host},
                     {admin::kTcp, n.reg.tcp},
                     {admin::kIpc, n.reg.ipc},
                     {admin::kIncarnation, std::to_string(n.reg.incarnation)},
                     {admin::kResyncPending, n.resync_pending},
                     {admin::kLastSeq, n.last_seq},
                     {admin::kEventsApplied, n.events_applied},
                     {admin::kSecondsSinceHeartbeat, n.seconds_since_heartbeat},
                     {admin::kRequests, n.usage.requests},
                     {admin::kTiers, tiers}});
  }
  return Dump(json{{admin::kNodes, nodes}});
}

std::string ScoreJson(const ClusterState& state, std::span<const ChunkKey> keys,
                      std::span<const int64_t> tokens, const std::string* tenant,
                      std::span<const std::string> only, Clock::time_point now) {
  const auto visible = [tenant](const Registry::Provenance& p) {
    return TenantMaySee(tenant, FindOwner(p.owner));
  };
  json nodes = json::array();
  for (const NodeScore& n : state.Score(keys, tokens, visible, only)) {
    json by_reach = json::object();
    for (int r = 0; r < kNumReaches; ++r)
      by_reach[std::string(ReachName(static_cast<Reach>(r)))] = n.tokens[r];
    nodes.push_back({{admin::kId, n.id},
                     {admin::kIndex, n.index},
                     {admin::kState, std::string(NodeStateName(n.alive ? NodeState::kAlive
                                                                       : NodeState::kSuspect))},
                     {admin::kHost, n.host},
                     {admin::kTokens, by_reach},
                     {admin::kPrefixTokens, n.prefix_tokens},
                     {admin::kLoad, {{admin::kRequestsPerSecond, n.requests_per_second}}}});
  }
  uint64_t total = 0;
  for (size_t i = 0; i < keys.size(); ++i) total += tokens.empty() ? 1 : tokens[i];
  return Dump(json{{admin::kKeys, keys.size()},
                   {admin::kTokens, total},
                   {admin::kRegistryFilling, state.Filling(now)},
                   {admin::kNodes, nodes}});
}

std::string StatsJson(const ClusterState& state, Clock::time_point now) {
  ClusterStats s = state.Stats();
  auto nodes = state.Nodes(now);
  json per_node = json::array();
  json p2p = {{admin::kPulledObjects, 0}, {admin::kPulledBytes, 0}, {admin::kPullFailures, 0}};
  for (const auto& n : nodes) {
    per_node.push_back({{admin::kId, n.reg.id},
                        {admin::kP2p, PullsOf(n, p2p)},
                        {admin::kState, std::string(NodeStateName(n.state))},
                        {admin::kCpuChunks, n.chunks[0]},
                        {admin::kDiskChunks, n.chunks[1]},
                        {admin::kCpuUsedBytes, n.usage.tiers[Index(TierKind::kCpu)].used_bytes},
                        {admin::kDiskUsedBytes, n.usage.tiers[Index(TierKind::kDisk)].used_bytes},
                        {admin::kHits, n.usage.storage_hits},
                        {admin::kMisses, n.usage.storage_misses}});
  }
  json out = {{admin::kNodesAlive, s.nodes_alive},
              {admin::kNodesSuspect, s.nodes_suspect},
              {admin::kNodesDead, s.nodes_dead},
              {admin::kKeys, s.keys},
              {admin::kLocations, s.locations},
              {admin::kRegistryBytes, s.registry_bytes},
              {admin::kEventsApplied, s.events_applied},
              {admin::kEventsIgnored, s.events_ignored},
              {admin::kEventsPerSecond, s.events_per_second},
              {admin::kSequenceGaps, s.gaps},
              {admin::kResyncs, s.resyncs},
              {admin::kNodeDeaths, s.deaths},
              {admin::kAuditMismatches, s.audits.reports},
              {admin::kAuditReportsRefused, s.audits.refused},
              {admin::kAuditConfirmed, s.audits.confirmed},
              {admin::kConfirmedByWriter, s.audits.confirmed_by_writer},
              {admin::kReportsByReporter, s.audits.reports_by_reporter},
              {admin::kRefusedByReporter, s.audits.refused_by_reporter},
              {admin::kTiers, TierTotals(nodes, s)},
              {admin::kP2p, p2p},
              {admin::kPerNode, per_node}};
  return Dump(out);
}

std::string HealthJson(const ClusterState& state, Clock::time_point now,
                       const Leadership& leadership) {
  ClusterStats s = state.Stats();
  const bool degraded = s.nodes_suspect > 0 || s.nodes_alive == 0 || leadership.role == "standby";
  return Dump(json{{admin::kStatus, degraded ? "degraded" : "ok"},
                   {admin::kEpoch, std::to_string(state.epoch())},
                   {admin::kNodesAlive, s.nodes_alive},
                   {admin::kNodesSuspect, s.nodes_suspect},
                   {admin::kNodesDead, s.nodes_dead},
                   {admin::kRole, leadership.role},
                   {admin::kLeader, leadership.leader},
                   {admin::kStandbys, leadership.standbys},
                   {admin::kLeaseTtlMs, leadership.lease_ttl_ms},
                   {admin::kLeaseLeftMs, leadership.lease_left_ms},
                   {admin::kLeaderships, leadership.leaderships},
                   {admin::kLastFailoverSeconds, leadership.last_failover_seconds}});
}

std::string LocateJson(const std::vector<ChunkKey>& keys, const std::vector<Located>& located) {
  json out = json::array();
  for (size_t i = 0; i < keys.size() && i < located.size(); ++i) {
    json locs = json::array();
    for (const auto& r : located[i].copies) {
      locs.push_back({{admin::kNode, r.node_id},
                      {admin::kTier, std::string(TierName(r.location.tier))},
                      {admin::kHost, r.host},
                      {admin::kTcp, r.tcp},
                      {admin::kIpc, r.ipc}});
    }
    // An owner not known shows as "unknown" (a reserved name) in both.
    const Owner* owner = FindOwner(located[i].provenance.owner);
    const std::string unknown(kUnknownWriter);
    out.push_back({{admin::kKey, keys[i].Hex()},
                   {admin::kTenant, owner ? TenantLabel(owner->tenant) : unknown},
                   {admin::kWriter, owner ? owner->writer : unknown},
                   {admin::kSeveralWriters, located[i].provenance.several_writers},
                   {admin::kLocations, locs}});
  }
  return Dump(json{{admin::kKeys, out}});
}

std::string ForwardedJson(const std::vector<std::string>& node_ids, size_t keys) {
  return Dump(json{{admin::kForwardedTo, node_ids}, {admin::kKeys, keys}});
}

std::string MetricsText(const ClusterState& state, Clock::time_point now,
                        const Leadership& leadership, const stats::HandlerCounters* handler) {
  const ClusterStats s = state.Stats();
  StatsSink out;
  out.Add(stats::kNodes, "alive", s.nodes_alive);
  out.Add(stats::kNodes, "suspect", s.nodes_suspect);
  out.Add(stats::kNodes, "dead", s.nodes_dead);
  out.Add(stats::kRegistryKeys, s.keys);
  out.Add(stats::kRegistryLocations, s.locations);
  out.Add(stats::kRegistryBytes, s.registry_bytes);
  out.Add(stats::kSharedTierChunks, s.shared_tier_chunks);
  out.AddReal(stats::kEventsPerSecond, s.events_per_second);
  out.Add(stats::kEventsApplied, s.events_applied);
  out.Add(stats::kEventsIgnored, s.events_ignored);
  out.Add(stats::kSequenceGaps, s.gaps);
  out.Add(stats::kResyncs, s.resyncs);
  out.Add(stats::kNodeDeaths, s.deaths);
  for (const auto& [who, n] : s.audits.reports_by_reporter) out.Add(stats::kAuditReports, who, n);
  for (const auto& [who, n] : s.audits.refused_by_reporter)
    out.Add(stats::kAuditReportsRefused, who, n);
  for (const auto& [who, n] : s.audits.confirmed_by_writer) out.Add(stats::kAuditConfirmed, who, n);
  out.Add(stats::kLeader, leadership.role == "standby" ? 0 : 1);
  out.Add(stats::kEpoch, state.epoch());
  out.AddReal(stats::kLastFailoverSeconds, leadership.last_failover_seconds);
  static const stats::HandlerCounters kNone;  // no handler: zeros
  (handler ? *handler : kNone).Sample(out);
  std::string text = PrometheusText(stats::kAll, out.Take());
  // Chunks per node and tier: two labels, one series per node.
  text +=
      "# HELP pikv_controller_chunks Chunks per node and tier.\n"
      "# TYPE pikv_controller_chunks gauge\n";
  for (const auto& n : state.Nodes(now)) {
    for (int t = 0; t < kNumTiers; ++t) {
      text += "pikv_controller_chunks{node=\"" + EscapeLabelValue(n.reg.id) + "\",tier=\"" +
              std::string(TierName(static_cast<TierKind>(t))) + "\"} " +
              std::to_string(n.chunks[t]) + "\n";
    }
  }
  return text;
}

}  // namespace pikv::controller
