// Renderings of ClusterState for operators: JSON for `pikv admin --json` and
// the HTTP endpoints, Prometheus text for /metrics. One place, so the CLI, the
// admin replies and HTTP always agree.
#pragma once

#include <string>
#include <vector>

#include "pikv/controller/cluster_state.h"

namespace pikv::controller {

std::string NodesJson(const ClusterState& state, Clock::time_point now);
std::string StatsJson(const ClusterState& state, Clock::time_point now);
std::string HealthJson(const ClusterState& state, Clock::time_point now);
std::string LocateJson(const std::vector<ChunkKey>& keys,
                       const std::vector<std::vector<Replica>>& replicas);
// The reply to an admin command forwarded to nodes.
std::string ForwardedJson(const std::vector<std::string>& node_ids, size_t keys);
std::string MetricsText(const ClusterState& state, Clock::time_point now);

}  // namespace pikv::controller
