// The node's /metrics (Prometheus text) and /healthz (JSON), rendered from the
// plain stats of the request handler and the storage manager. Every metric
// name is documented in docs/metrics.md.
#pragma once

#include <string>

#include "pikv/node/reporter.h"
#include "pikv/node/request_handler.h"

namespace pikv::node {

std::string NodeMetricsText(const RequestHandler& handler, storage::StorageManager& storage,
                            const Reporter* reporter = nullptr);
// `cpu`: the CPU tier's stats (arena size and how much of it is faulted in).
std::string NodeHealthJson(const std::string& node_id, bool controller_registered,
                           bool has_controller, const storage::TierStats& cpu);

}  // namespace pikv::node
