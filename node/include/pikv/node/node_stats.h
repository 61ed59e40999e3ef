// Every counter and gauge the node keeps, declared once (common/stats_registry.h):
// its Prometheus name, help, label and stats field. docs/metrics.md documents
// each; tests/controller/metrics_test.cc proves each reaches /metrics, the
// stats fields and the docs.
#pragma once

#include <vector>

#include "pikv/common/counter_set.h"
#include "pikv/common/stats_registry.h"
#include "pikv/proto/control_wire.h"
#include "pikv/storage/storage_stats.h"

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

// The storage manager's, its tiers' and queues', and the trust events
// (storage/storage_stats.h, where storage's counter table can name them).
using storage::stats::kArenaFaultedBytes;
using storage::stats::kPromotions;
using storage::stats::kPutRejects;
using storage::stats::kQueueDepth;
using storage::stats::kQueueDropped;
using storage::stats::kQueueFailed;
using storage::stats::kQueueWritten;
using storage::stats::kStorageHits;
using storage::stats::kStorageMisses;
using storage::stats::kStoragePuts;
using storage::stats::kTierAdmits;
using storage::stats::kTierCapacityBytes;
using storage::stats::kTierChunks;
using storage::stats::kTierCorruptions;
using storage::stats::kTierErrors;
using storage::stats::kTierEvictions;
using storage::stats::kTierHits;
using storage::stats::kTierMisses;
using storage::stats::kTierRejects;
using storage::stats::kTierUsedBytes;
using storage::stats::kTrust;

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

// The request handler's and the puller's families, then storage's, then the
// node server's parts': every family of the node, in /metrics order.
inline constexpr const MetricFamily* kServingFamilies[] = {
    &kRequests,        &kRequestsReceived, &kRequestErrors, &kBytes,
    &kStreamedReplies, &kPulledObjects,    &kPulledBytes,   &kPullFailures,
    &kPullsFromMemory, &kPullsAsPlanned,   &kPullsLocated,  &kPulledStreamed};
inline constexpr const MetricFamily* kPartFamilies[] = {
    &kStreamedPuts, &kZeroCopyEvents, &kZeroCopyHeld, &kReporterInventories, &kReporterRefused};
inline constexpr auto kAll = JoinFamilies(kServingFamilies, storage::stats::kAll, kPartFamilies);

}  // namespace pikv::node::stats

namespace pikv::node {

// The heartbeat's usage (control_wire.h), read from the node's samples by
// family: the one place the two are joined.
NodeUsage UsageOf(const std::vector<MetricSample>& samples);

}  // namespace pikv::node
