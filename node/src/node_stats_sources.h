// The node's stats sources: each reads one part's own counters into the
// families of pikv/node/node_stats.h. The one place a part's counter is
// mapped to its name.
#pragma once

#include <memory>

#include "inbound_streams.h"
#include "pikv/common/stats_registry.h"
#include "pikv/storage/storage_manager.h"
#include "puller.h"
#include "zero_copy_server.h"

namespace pikv::node {

class Reporter;

void AddStorageSource(StatsRegistry& stats, const storage::StorageManager& storage);
// `puller` null (no controller): zeros, as for the reporter.
void AddPullerSource(StatsRegistry& stats, const Puller* puller);
void AddInboundSource(StatsRegistry& stats, const InboundStreams& inbound);
void AddZeroCopySource(StatsRegistry& stats, const ZeroCopyServer& zero_copy);
// Read through `reporter` at each read: it is made after the sources are.
void AddReporterSource(StatsRegistry& stats, const std::unique_ptr<Reporter>& reporter);

}  // namespace pikv::node
