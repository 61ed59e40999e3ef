// Every counter and gauge the node keeps, declared once (common/stats_registry.h):
// its Prometheus name, help, label and stats field. docs/metrics.md documents
// each; tests/controller/metrics_test.cc proves each reaches /metrics, the
// stats fields and the docs.
#pragma once

#include <vector>

#include "pikv/common/counter_set.h"
#include "pikv/common/stats_registry.h"
#include "pikv/proto/control_wire.h"

namespace pikv::node::stats {

using enum MetricKind;

// The request handler's.
inline constexpr MetricFamily kRequests{"pikv_node_requests_total", kCounter,
                                        "Requests served, by operation.", "op", "requests.{}"};
inline constexpr MetricFamily kRequestsReceived{
    "pikv_node_requests_received_total", kCounter,
    "Requests received, served or refused (the controller's request rate).", "", "requests"};
inline constexpr MetricFamily kRequestErrors{"pikv_node_request_errors_total", kCounter,
                                             "Requests refused, by reason.", "reason", "errors.{}"};
inline constexpr MetricFamily kBytes{"pikv_node_bytes_total", kCounter,
                                     "Payload bytes received and sent.", "direction", "bytes_{}"};
inline constexpr MetricFamily kStreamedReplies{
    "pikv_node_streamed_replies_total", kCounter,
    "Get replies sent in bounded frames (to pulling peers).", "", "requests.streamed"};

// The puller's.
inline constexpr MetricFamily kPulledObjects{"pikv_node_p2p_pulled_objects_total", kCounter,
                                             "Objects pulled from peers and admitted here.", "",
                                             "p2p.pulled_objects"};
inline constexpr MetricFamily kPulledBytes{"pikv_node_p2p_pulled_bytes_total", kCounter,
                                           "Bytes of the objects pulled from peers.", "",
                                           "p2p.pulled_bytes"};
inline constexpr MetricFamily kPullFailures{
    "pikv_node_p2p_pull_failures_total", kCounter,
    "Asks of the controller or a peer, within pulls, that were not answered.", "",
    "p2p.pull_failures"};
inline constexpr MetricFamily kPullsFromMemory{
    "pikv_node_p2p_pulls_from_memory_total", kCounter,
    "Pulls planned on the last locations seen while no controller answered.", "",
    "p2p.pulls_from_memory"};
inline constexpr MetricFamily kPullsAsPlanned{
    "pikv_node_p2p_pulls_as_planned_total", kCounter,
    "Pulls that asked the peer the client's plan named first, locating nothing.", "",
    "p2p.pulls_as_planned"};
inline constexpr MetricFamily kPullsLocated{"pikv_node_p2p_pulls_located_total", kCounter,
                                            "Pulls that asked the controller where keys are.", "",
                                            "p2p.pulls_located"};
inline constexpr MetricFamily kPulledStreamed{"pikv_node_p2p_pulled_streamed_total", kCounter,
                                              "Objects pulled from peers in bounded frames.", "",
                                              "p2p.pulled_streamed"};
enum class PullCounter {
  kObjects,     // pulled and admitted
  kBytes,       // their sizes
  kFailures,    // controller or peer did not answer
  kFromMemory,  // pulls planned on remembered locations (no controller)
  kAsPlanned,   // pulls that asked the client's planned peer first
  kLocated,     // pulls that asked where their keys are
  kStreamed,    // objects received in bounded frames
  kCount
};
inline constexpr CounterRow<PullCounter> kPullCounters[] = {
    {PullCounter::kObjects, &kPulledObjects},    {PullCounter::kBytes, &kPulledBytes},
    {PullCounter::kFailures, &kPullFailures},    {PullCounter::kFromMemory, &kPullsFromMemory},
    {PullCounter::kAsPlanned, &kPullsAsPlanned}, {PullCounter::kLocated, &kPullsLocated},
    {PullCounter::kStreamed, &kPulledStreamed}};
using PullCounters = CounterSet<PullCounter, kPullCounters>;

// The storage manager's and its tiers'.
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
// node server.
inline constexpr MetricFamily kTrust{
    "pikv_node_trust_events_total", kCounter,
    "Tenancy and revocation events: revocations, revoked_objects, revoked_refused, "
    "revoked_refusals, tenant_rejects, tenant_hidden, owner_table_refusals.",
    "event", "trust.{}"};

// The node server's parts: streamed puts, the zero-copy channel, the reporter.
inline constexpr MetricFamily kStreamedPuts{
    "pikv_node_streamed_puts_total", kCounter,
    "Puts received in bounded frames, by outcome: started, completed, refused (could not start, "
    "or failed verification), broken (a frame of the wrong size), expired (stalled).",
    "outcome", "streamed_puts.{}"};
enum class InboundCounter { kStarted, kCompleted, kRefused, kBroken, kExpired, kCount };
inline constexpr CounterRow<InboundCounter> kInboundCounters[] = {
    {InboundCounter::kStarted, &kStreamedPuts, "started"},
    {InboundCounter::kCompleted, &kStreamedPuts, "completed"},
    {InboundCounter::kRefused, &kStreamedPuts, "refused"},
    {InboundCounter::kBroken, &kStreamedPuts, "broken"},
    {InboundCounter::kExpired, &kStreamedPuts, "expired"}};
using InboundCounters = CounterSet<InboundCounter, kInboundCounters>;
inline constexpr MetricFamily kZeroCopyEvents{
    "pikv_node_zero_copy_events_total", kCounter,
    "Zero-copy channel events: clients, refused_clients, requests, errors, leased_objects, "
    "commits, commit_failures, sealed_ahead, sealed_whole (sealing commits hashed as the object "
    "was written, or after), expired, dropped, refused.",
    "event", "zero_copy.{}"};
// The zero-copy server's own events (its lease table's are sampled beside them).
enum class ZeroCopyCounter {
  kClients,
  kRefusedClients,
  kRequests,
  kErrors,
  kLeasedObjects,
  kCommits,
  kCommitFailures,
  kSealedAhead,  // sealing commits whose payload was hashed as it was written
  kSealedWhole,  // ... or after
  kCount
};
inline constexpr CounterRow<ZeroCopyCounter> kZeroCopyCounters[] = {
    {ZeroCopyCounter::kClients, &kZeroCopyEvents, "clients"},
    {ZeroCopyCounter::kRefusedClients, &kZeroCopyEvents, "refused_clients"},
    {ZeroCopyCounter::kRequests, &kZeroCopyEvents, "requests"},
    {ZeroCopyCounter::kErrors, &kZeroCopyEvents, "errors"},
    {ZeroCopyCounter::kLeasedObjects, &kZeroCopyEvents, "leased_objects"},
    {ZeroCopyCounter::kCommits, &kZeroCopyEvents, "commits"},
    {ZeroCopyCounter::kCommitFailures, &kZeroCopyEvents, "commit_failures"},
    {ZeroCopyCounter::kSealedAhead, &kZeroCopyEvents, "sealed_ahead"},
    {ZeroCopyCounter::kSealedWhole, &kZeroCopyEvents, "sealed_whole"}};
using ZeroCopyCounters = CounterSet<ZeroCopyCounter, kZeroCopyCounters>;
inline constexpr MetricFamily kZeroCopyHeld{
    "pikv_node_zero_copy_held", kGauge,
    "What local clients hold of the CPU arena now: leases, reservations, lent_bytes.", "kind",
    "zero_copy.{}"};
inline constexpr MetricFamily kReporterInventories{
    "pikv_node_reporter_inventories_total", kCounter,
    "Full inventories sent to the controller (registrations, resyncs, retries).", "",
    "reporter.inventories"};
inline constexpr MetricFamily kReporterRefused{
    "pikv_node_reporter_refused_total", kCounter,
    "Messages the controller refused; each one triggers a full inventory.", "", "reporter.refused"};

inline constexpr const MetricFamily* kAll[] = {&kRequests,
                                               &kRequestsReceived,
                                               &kRequestErrors,
                                               &kBytes,
                                               &kStreamedReplies,
                                               &kPulledObjects,
                                               &kPulledBytes,
                                               &kPullFailures,
                                               &kPullsFromMemory,
                                               &kPullsAsPlanned,
                                               &kPullsLocated,
                                               &kPulledStreamed,
                                               &kTierHits,
                                               &kTierMisses,
                                               &kTierAdmits,
                                               &kTierEvictions,
                                               &kTierRejects,
                                               &kTierCorruptions,
                                               &kTierErrors,
                                               &kTierUsedBytes,
                                               &kTierCapacityBytes,
                                               &kTierChunks,
                                               &kArenaFaultedBytes,
                                               &kStoragePuts,
                                               &kStorageHits,
                                               &kStorageMisses,
                                               &kPromotions,
                                               &kPutRejects,
                                               &kQueueDepth,
                                               &kQueueWritten,
                                               &kQueueFailed,
                                               &kQueueDropped,
                                               &kTrust,
                                               &kStreamedPuts,
                                               &kZeroCopyEvents,
                                               &kZeroCopyHeld,
                                               &kReporterInventories,
                                               &kReporterRefused};

}  // namespace pikv::node::stats

namespace pikv::node {

// The heartbeat's usage (control_wire.h), read from the node's samples by
// family: the one place the two are joined.
NodeUsage UsageOf(const std::vector<MetricSample>& samples);

}  // namespace pikv::node
