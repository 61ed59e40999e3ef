#include "pikv/node/node_stats.h"

#include "node_stats_sources.h"
#include "pikv/node/reporter.h"

namespace pikv::node {

void AddStorageSource(StatsRegistry& registry, const storage::StorageManager& storage) {
  registry.AddSource([&storage](StatsSink& out) {
    const storage::StorageStats s = storage.Stats();
    struct PerTier {
      const MetricFamily& family;
      uint64_t storage::TierStats::*field;
    };
    const PerTier per_tier[] = {{stats::kTierHits, &storage::TierStats::hits},
                                {stats::kTierMisses, &storage::TierStats::misses},
                                {stats::kTierAdmits, &storage::TierStats::admits},
                                {stats::kTierEvictions, &storage::TierStats::evictions},
                                {stats::kTierRejects, &storage::TierStats::rejects},
                                {stats::kTierCorruptions, &storage::TierStats::corruptions},
                                {stats::kTierErrors, &storage::TierStats::errors},
                                {stats::kTierUsedBytes, &storage::TierStats::used_bytes},
                                {stats::kTierCapacityBytes, &storage::TierStats::capacity_bytes},
                                {stats::kTierChunks, &storage::TierStats::entries}};
    for (const PerTier& m : per_tier) {
      for (int t = 0; t < storage::kNumTiers; ++t) {
        if (s.tiers[t])
          out.Add(m.family, storage::TierName(static_cast<TierKind>(t)), (*s.tiers[t]).*m.field);
      }
    }
    out.Add(stats::kArenaFaultedBytes,
            s.tiers[static_cast<int>(TierKind::kCpu)].value_or(storage::TierStats{}).faulted_bytes);
    out.Add(stats::kStoragePuts, s.puts);
    out.Add(stats::kStorageHits, s.hits);
    out.Add(stats::kStorageMisses, s.misses);
    out.Add(stats::kPromotions, s.promotions);
    out.Add(stats::kPutRejects, s.put_rejects);
    for (const auto& [name, q] :
         {std::pair{"disk", s.disk_queue}, std::pair{"remote", s.remote_queue}}) {
      if (!q) continue;
      out.Add(stats::kQueueDepth, name, q->depth);
      out.Add(stats::kQueueWritten, name, q->written);
      out.Add(stats::kQueueFailed, name, q->failed);
      out.Add(stats::kQueueDropped, name, q->dropped);
    }
    out.Add(stats::kTrust, "tenant_rejects", s.tenant_rejects);
    out.Add(stats::kTrust, "tenant_hidden", s.tenant_hidden);
    out.Add(stats::kTrust, "revoked_refusals", s.revoked_refusals);
  });
}

void AddPullerSource(StatsRegistry& registry, const Puller* puller) {
  registry.AddSource([puller](StatsSink& out) {
    const Puller::Counters c = puller ? puller->counters() : Puller::Counters{};
    out.Add(stats::kPulledObjects, c.objects);
    out.Add(stats::kPulledBytes, c.bytes);
    out.Add(stats::kPullFailures, c.failures);
    out.Add(stats::kPullsFromMemory, c.from_memory);
    out.Add(stats::kPullsAsPlanned, c.as_planned);
    out.Add(stats::kPullsLocated, c.located);
    out.Add(stats::kPulledStreamed, c.streamed);
  });
}

void AddInboundSource(StatsRegistry& registry, const InboundStreams& inbound) {
  registry.AddSource([&inbound](StatsSink& out) {
    const InboundStreams::Counters c = inbound.counters();
    out.Add(stats::kStreamedPuts, "started", c.started);
    out.Add(stats::kStreamedPuts, "completed", c.completed);
    out.Add(stats::kStreamedPuts, "refused", c.refused);
    out.Add(stats::kStreamedPuts, "broken", c.broken);
    out.Add(stats::kStreamedPuts, "expired", c.expired);
  });
}

void AddZeroCopySource(StatsRegistry& registry, const ZeroCopyServer& zero_copy) {
  registry.AddSource([&zero_copy](StatsSink& out) {
    const ZeroCopyServer::Counters c = zero_copy.counters();
    const std::pair<const char*, uint64_t> events[] = {{"clients", c.clients},
                                                       {"refused_clients", c.refused_clients},
                                                       {"requests", c.requests},
                                                       {"errors", c.errors},
                                                       {"leased_objects", c.leased_objects},
                                                       {"commits", c.commits},
                                                       {"commit_failures", c.commit_failures},
                                                       {"sealed_ahead", c.sealed_ahead},
                                                       {"sealed_whole", c.sealed_whole},
                                                       {"expired", c.leases.expired},
                                                       {"dropped", c.leases.dropped},
                                                       {"refused", c.leases.refused}};
    for (const auto& [event, n] : events) out.Add(stats::kZeroCopyEvents, event, n);
    out.Add(stats::kZeroCopyHeld, "leases", c.leases.leases);
    out.Add(stats::kZeroCopyHeld, "reservations", c.leases.reservations);
    out.Add(stats::kZeroCopyHeld, "lent_bytes", c.leases.lent_bytes);
  });
}

void AddReporterSource(StatsRegistry& registry, const std::unique_ptr<Reporter>& reporter) {
  registry.AddSource([&reporter](StatsSink& out) {
    out.Add(stats::kReporterInventories, reporter ? reporter->inventories_sent() : 0);
    out.Add(stats::kReporterRefused, reporter ? reporter->refused() : 0);
  });
}

}  // namespace pikv::node
