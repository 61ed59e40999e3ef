// The storage part's metric families and the storage manager's counters,
// declared once (common/stats_registry.h, common/counter_set.h). They live
// here, not in the node's node_stats.h, because storage is below the node
// (its README): the manager's counter table must name its families. The node
// lists these among its own (node::stats::kAll) and samples them; the names
// stay pikv_node_*, as /metrics and the stats reply have always shown them.
// docs/metrics.md documents each.
#pragma once

#include "pikv/common/counter_set.h"
#include "pikv/common/stats_registry.h"

namespace pikv::storage::stats {

using enum MetricKind;

// The tiers' (TierStats, sampled per tier by the node).
inline constexpr MetricFamily kTierHits{"pikv_node_tier_hits_total", kCounter,
                                        "Lookups that found the object, by tier.", "tier",
                                        "{}.hits"};
inline constexpr MetricFamily kTierMisses{"pikv_node_tier_misses_total", kCounter,
                                          "Lookups that did not, by tier.", "tier", "{}.misses"};
inline constexpr MetricFamily kTierAdmits{"pikv_node_tier_admits_total", kCounter,
                                          "Objects admitted, by tier.", "tier", "{}.admits"};
inline constexpr MetricFamily kTierEvictions{"pikv_node_tier_evictions_total", kCounter,
                                             "Objects evicted or removed, by tier.", "tier",
                                             "{}.evictions"};
inline constexpr MetricFamily kTierRejects{"pikv_node_tier_rejects_total", kCounter,
                                           "Writes refused (full, pinned, circuit open), by tier.",
                                           "tier", "{}.rejects"};
inline constexpr MetricFamily kTierCorruptions{"pikv_node_tier_corruptions_total", kCounter,
                                               "Corrupt copies found and deleted, by tier.", "tier",
                                               "{}.corruptions"};
inline constexpr MetricFamily kTierErrors{"pikv_node_tier_errors_total", kCounter,
                                          "I/O errors, by tier.", "tier", "{}.errors"};
inline constexpr MetricFamily kTierUsedBytes{"pikv_node_tier_used_bytes", kGauge,
                                             "Bytes held, by tier.", "tier", "{}.used_bytes"};
inline constexpr MetricFamily kTierCapacityBytes{"pikv_node_tier_capacity_bytes", kGauge,
                                                 "Byte capacity (0 = not tracked), by tier.",
                                                 "tier", "{}.capacity_bytes"};
inline constexpr MetricFamily kTierChunks{"pikv_node_tier_chunks", kGauge,
                                          "Chunk objects held, by tier.", "tier", "{}.entries"};
inline constexpr MetricFamily kArenaFaultedBytes{
    "pikv_node_arena_faulted_bytes", kGauge,
    "CPU arena bytes faulted in by the background prefault (0: prefault off).", "",
    "cpu.faulted_bytes"};
// The manager's own (StorageCounter below).
inline constexpr MetricFamily kStoragePuts{"pikv_node_storage_puts_total", kCounter,
                                           "Objects stored through the storage manager.", "",
                                           "storage.puts"};
inline constexpr MetricFamily kStorageHits{"pikv_node_storage_hits_total", kCounter,
                                           "Lookups found in some tier.", "", "storage.hits"};
inline constexpr MetricFamily kStorageMisses{"pikv_node_storage_misses_total", kCounter,
                                             "Lookups found in no tier.", "", "storage.misses"};
inline constexpr MetricFamily kPromotions{"pikv_node_promotions_total", kCounter,
                                          "Lower-tier hits copied up to the CPU tier.", "",
                                          "storage.promotions"};
inline constexpr MetricFamily kPutRejects{"pikv_node_put_rejects_total", kCounter,
                                          "Puts refused because the object did not verify.", "",
                                          "storage.put_rejects"};
// The write-through queues' (WriteThroughQueue::Stats, sampled per queue by the node).
inline constexpr MetricFamily kQueueDepth{"pikv_node_queue_depth", kGauge,
                                          "Write-through jobs waiting or running, by queue.",
                                          "queue", "queue.{}.depth"};
inline constexpr MetricFamily kQueueWritten{"pikv_node_queue_written_total", kCounter,
                                            "Write-through jobs written, by queue.", "queue",
                                            "queue.{}.written"};
inline constexpr MetricFamily kQueueFailed{"pikv_node_queue_failed_total", kCounter,
                                           "Write-through jobs that failed, by queue.", "queue",
                                           "queue.{}.failed"};
inline constexpr MetricFamily kQueueDropped{
    "pikv_node_queue_dropped_total", kCounter,
    "Write-through jobs dropped because the queue was full, by queue.", "queue",
    "queue.{}.dropped"};

// Tenancy and revocation (docs/security.md), from the storage manager and the
// node server (declared here, below both, so the manager's table can name it).
inline constexpr MetricFamily kTrust{
    "pikv_node_trust_events_total", kCounter,
    "Tenancy and revocation events: revocations, revoked_objects, revoked_refused, "
    "revoked_refusals, tenant_rejects, tenant_hidden, owner_table_refusals.",
    "event", "trust.{}"};

// What the storage manager counts. A new counter: a value here, its row
// below, the line that counts it (storage_manager.cc), and its row in
// docs/metrics.md.
enum class StorageCounter {
  kPuts,
  kHits,
  kMisses,
  kPromotions,
  kPutRejects,       // objects that failed verification
  kTenantRejects,    // puts of another tenant's object
  kTenantHidden,     // lookups answered as misses: another tenant's object
  kRevokedRefusals,  // puts and promotions refused: a revoked writer's object
  kCount
};
inline constexpr CounterRow<StorageCounter> kStorageCounters[] = {
    {StorageCounter::kPuts, &kStoragePuts},
    {StorageCounter::kHits, &kStorageHits},
    {StorageCounter::kMisses, &kStorageMisses},
    {StorageCounter::kPromotions, &kPromotions},
    {StorageCounter::kPutRejects, &kPutRejects},
    {StorageCounter::kTenantRejects, &kTrust, "tenant_rejects"},
    {StorageCounter::kTenantHidden, &kTrust, "tenant_hidden"},
    {StorageCounter::kRevokedRefusals, &kTrust, "revoked_refusals"}};
using StorageCounters = CounterSet<StorageCounter, kStorageCounters>;

// Every family above, in the order /metrics shows them.
inline constexpr const MetricFamily* kAll[] = {
    &kTierHits,      &kTierMisses,        &kTierAdmits,
    &kTierEvictions, &kTierRejects,       &kTierCorruptions,
    &kTierErrors,    &kTierUsedBytes,     &kTierCapacityBytes,
    &kTierChunks,    &kArenaFaultedBytes, &kStoragePuts,
    &kStorageHits,   &kStorageMisses,     &kPromotions,
    &kPutRejects,    &kQueueDepth,        &kQueueWritten,
    &kQueueFailed,   &kQueueDropped,      &kTrust};

}  // namespace pikv::storage::stats
