// Renderings of ClusterState for operators: JSON for `pikv admin --json` and
// the HTTP endpoints, Prometheus text for /metrics. One place, so the CLI, the
// admin replies and HTTP always agree.
#pragma once

#include <string>
#include <vector>

#include "pikv/controller/cluster_state.h"
#include "pikv/controller/controller_stats.h"

namespace pikv::controller {

// This controller's part in leadership, as operators see it.
struct Leadership {
  std::string role = "alone";  // alone (no etcd), leader or standby
  std::string leader;          // the leader's endpoint (standby: as last read)
  int64_t lease_ttl_ms = 0, lease_left_ms = 0;
  std::vector<std::string> standbys;  // the other controllers with a live lease
  uint64_t leaderships = 0, step_downs = 0;
  double last_failover_seconds = 0;  // its last win: since the previous leader was last seen
};

std::string NodesJson(const ClusterState& state, Clock::time_point now);
std::string StatsJson(const ClusterState& state, Clock::time_point now);
std::string HealthJson(const ClusterState& state, Clock::time_point now,
                       const Leadership& leadership);
// A key's copies (cheapest first) and who wrote it.
struct Located {
  std::vector<Replica> copies;
  Registry::Provenance provenance;
};
std::string LocateJson(const std::vector<ChunkKey>& keys, const std::vector<Located>& located);
// The score document (admin_wire.h) of a prompt's chunks for the nodes
// `only` names (empty: every alive and suspect one). `tenant`: the asker's
// tenant (null: unscoped); another tenant's keys count as missing.
// The query must have passed CheckScoreQuery.
std::string ScoreJson(const ClusterState& state, std::span<const ChunkKey> keys,
                      std::span<const int64_t> tokens, const std::string* tenant,
                      std::span<const std::string> only, Clock::time_point now);
// The reply to an admin command forwarded to nodes.
std::string ForwardedJson(const std::vector<std::string>& node_ids, size_t keys);
// `handler`: the handler's counters (ControllerHandler::counters()); null
// reads as zeros.
std::string MetricsText(const ClusterState& state, Clock::time_point now,
                        const Leadership& leadership,
                        const stats::HandlerCounters* handler = nullptr);

}  // namespace pikv::controller
