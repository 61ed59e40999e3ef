#include "pikv/node/node_stats.h"

#include "node_stats_sources.h"
#include "pikv/node/reporter.h"

namespace pikv::node {

NodeUsage UsageOf(const std::vector<MetricSample>& samples) {
  struct TierCount {
    const MetricFamily* family;
    uint64_t NodeUsage::Tier::*member;
  };
  struct NodeCount {
    const MetricFamily* family;
    uint64_t NodeUsage::*member;
  };
  static constexpr TierCount kPerTier[] = {
      {&stats::kTierUsedBytes, &NodeUsage::Tier::used_bytes},
      {&stats::kTierCapacityBytes, &NodeUsage::Tier::capacity_bytes},
      {&stats::kTierHits, &NodeUsage::Tier::hits},
      {&stats::kTierMisses, &NodeUsage::Tier::misses}};
  static constexpr NodeCount kPerNode[] = {{&stats::kRequestsReceived, &NodeUsage::requests},
                                           {&stats::kStorageHits, &NodeUsage::storage_hits},
                                           {&stats::kStorageMisses, &NodeUsage::storage_misses},
                                           {&stats::kPulledObjects, &NodeUsage::pulled_objects},
                                           {&stats::kPulledBytes, &NodeUsage::pulled_bytes},
                                           {&stats::kPullFailures, &NodeUsage::pull_failures}};
  NodeUsage usage;
  for (const MetricSample& sample : samples) {
    const uint64_t* value = std::get_if<uint64_t>(&sample.value);
    if (!value) continue;
    for (const NodeCount& c : kPerNode) {
      if (sample.family == c.family) usage.*c.member = *value;
    }
    const auto tier = ValueOf(kTierNames, sample.label);
    if (!tier) continue;
    for (const TierCount& c : kPerTier) {
      if (sample.family == c.family) usage.tiers[static_cast<int>(*tier)].*c.member = *value;
    }
  }
  return usage;
}

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
    storage.counters().Sample(out);
    for (const auto& [name, q] :
         {std::pair{"disk", s.disk_queue}, std::pair{"remote", s.remote_queue}}) {
      if (!q) continue;
      out.Add(stats::kQueueDepth, name, q->depth);
      out.Add(stats::kQueueWritten, name, q->written);
      out.Add(stats::kQueueFailed, name, q->failed);
      out.Add(stats::kQueueDropped, name, q->dropped);
    }
  });
}

void AddPullerSource(StatsRegistry& registry, const Puller* puller) {
  registry.AddSource([puller](StatsSink& out) {
    static const stats::PullCounters kNone;  // no puller (no controller): zeros
    (puller ? puller->counters() : kNone).Sample(out);
  });
}

void AddInboundSource(StatsRegistry& registry, const InboundStreams& inbound) {
  registry.AddSource([&inbound](StatsSink& out) { inbound.counters().Sample(out); });
}

void AddZeroCopySource(StatsRegistry& registry, const ZeroCopyServer& zero_copy) {
  registry.AddSource([&zero_copy](StatsSink& out) {
    zero_copy.counters().Sample(out);
    const LeaseTable::Stats leases = zero_copy.leases();
    out.Add(stats::kZeroCopyEvents, "expired", leases.expired);
    out.Add(stats::kZeroCopyEvents, "dropped", leases.dropped);
    out.Add(stats::kZeroCopyEvents, "refused", leases.refused);
    out.Add(stats::kZeroCopyHeld, "leases", leases.leases);
    out.Add(stats::kZeroCopyHeld, "reservations", leases.reservations);
    out.Add(stats::kZeroCopyHeld, "lent_bytes", leases.lent_bytes);
  });
}

void AddReporterSource(StatsRegistry& registry, const std::unique_ptr<Reporter>& reporter) {
  registry.AddSource([&reporter](StatsSink& out) {
    out.Add(stats::kReporterInventories, reporter ? reporter->inventories_sent() : 0);
    out.Add(stats::kReporterRefused, reporter ? reporter->refused() : 0);
  });
}

}  // namespace pikv::node
