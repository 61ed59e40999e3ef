// The node's /metrics (Prometheus text: its stats registry, node_stats.h, and
// the latency histograms) and /healthz (JSON). Every metric name is
// documented in docs/metrics.md.
#pragma once

#include <string>

#include "pikv/node/request_handler.h"

namespace pikv::node {

std::string NodeMetricsText(const RequestHandler& handler);
// `cpu`: the CPU tier's stats (arena size and how much of it is faulted in).
std::string NodeHealthJson(const std::string& node_id, bool controller_registered,
                           bool has_controller, const storage::TierStats& cpu);

}  // namespace pikv::node
