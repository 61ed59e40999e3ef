// What the client counts (ClientStats), each counter declared once
// (common/stats_registry.h): its name as Python's stats() and the CLI's
// demo show it, and its Prometheus name for an engine that exports them.
#pragma once

#include <cstdint>
#include <iterator>
#include <string_view>

#include "pikv/common/stats_registry.h"

namespace pikv::client {

struct ClientStats {
  uint64_t plans = 0, chunks_planned = 0;
  uint64_t planned_local = 0, planned_peer = 0, planned_remote = 0, planned_miss = 0;
  uint64_t fetched = 0, fetch_misses = 0, corrupt = 0, peer_direct = 0;
  uint64_t stores = 0, store_failures = 0;
  uint64_t stores_ran_inline = 0;  // stores run on the caller's thread (background queue full)
  uint64_t local_node_timeouts = 0, controller_timeouts = 0;
  uint64_t controller_skipped = 0;  // plans that did not ask (silent lately, or one in flight)
  uint64_t zero_copy_fetched = 0, zero_copy_stores = 0;  // objects read / written in place
  uint64_t lease_expired = 0;                            // remaps refused past a lease
  uint64_t audits = 0, audit_mismatches = 0;             // hits audited; of those, found wrong
};

namespace stats {

using enum MetricKind;

inline constexpr MetricFamily kPlans{"pikv_client_plans_total", kCounter, "Prompts planned.", "",
                                     "plans"};
inline constexpr MetricFamily kChunksPlanned{"pikv_client_chunks_planned_total", kCounter,
                                             "Chunks planned.", "", "chunks_planned"};
inline constexpr MetricFamily kPlanned{"pikv_client_planned_total", kCounter,
                                       "Chunks planned, by where the plan found them: local, peer, "
                                       "remote (Redis, shared by the nodes), miss.",
                                       "source", "planned_{}"};
inline constexpr MetricFamily kFetched{"pikv_client_fetched_total", kCounter,
                                       "Chunk objects fetched and verified.", "", "fetched"};
inline constexpr MetricFamily kFetchMisses{"pikv_client_fetch_misses_total", kCounter,
                                           "Planned hits that were not found when fetched.", "",
                                           "fetch_misses"};
inline constexpr MetricFamily kCorrupt{
    "pikv_client_corrupt_total", kCounter,
    "Objects refused: did not verify, or not the chunk asked for.", "", "corrupt"};
inline constexpr MetricFamily kPeerDirect{
    "pikv_client_peer_direct_total", kCounter,
    "Peer hits fetched from the peer itself (the local node did not answer).", "", "peer_direct"};
inline constexpr MetricFamily kStores{"pikv_client_stores_total", kCounter,
                                      "Stores sent or handed off to the background.", "", "stores"};
inline constexpr MetricFamily kStoreFailures{"pikv_client_store_failures_total", kCounter,
                                             "Stores that failed.", "", "store_failures"};
inline constexpr MetricFamily kStoresRanInline{
    "pikv_client_stores_ran_inline_total", kCounter,
    "Background stores run on the caller's thread: the queue was full.", "", "stores_ran_inline"};
inline constexpr MetricFamily kTimeouts{
    "pikv_client_timeouts_total", kCounter,
    "Plans that went on without an answer, by whom: local_node, controller.", "whom",
    "{}_timeouts"};
inline constexpr MetricFamily kControllerSkipped{
    "pikv_client_controller_skipped_total", kCounter,
    "Plans that did not ask the controller: it went unanswered lately (backing off), or a "
    "locate was still in flight.",
    "", "controller_skipped"};
inline constexpr MetricFamily kZeroCopyFetched{"pikv_client_zero_copy_fetched_total", kCounter,
                                               "Objects read in place from the node's arena.", "",
                                               "zero_copy_fetched"};
inline constexpr MetricFamily kZeroCopyStores{"pikv_client_zero_copy_stores_total", kCounter,
                                              "Objects written in place into the node's arena.", "",
                                              "zero_copy_stores"};
inline constexpr MetricFamily kLeaseExpired{"pikv_client_lease_expired_total", kCounter,
                                            "Remaps refused: the object's lease had expired.", "",
                                            "lease_expired"};
inline constexpr MetricFamily kAudits{"pikv_client_audits_total", kCounter,
                                      "Hits recomputed and compared (audit-rate).", "", "audits"};
inline constexpr MetricFamily kAuditMismatches{"pikv_client_audit_mismatches_total", kCounter,
                                               "Audited hits found wrong: reported, not used.", "",
                                               "audit_mismatches"};

inline constexpr const MetricFamily* kAll[] = {
    &kPlans,    &kChunksPlanned,     &kPlanned,         &kFetched,        &kFetchMisses,
    &kCorrupt,  &kPeerDirect,        &kStores,          &kStoreFailures,  &kStoresRanInline,
    &kTimeouts, &kControllerSkipped, &kZeroCopyFetched, &kZeroCopyStores, &kLeaseExpired,
    &kAudits,   &kAuditMismatches};

// Which family (and label) reads each ClientStats field: one row per field,
// beside its family, so a new counter is a field, its family and its row
// here, and the line that counts it. The client keeps a plain struct, not a
// CounterSet: a Client is used by one thread at a time, so its counts need
// no atomics, and its callers (tests, plan_bench) read the fields by name.
struct ClientCounterRow {
  const MetricFamily* family;
  std::string_view label;  // empty for an unlabelled family
  uint64_t ClientStats::*field;
};
inline constexpr ClientCounterRow kClientCounters[] = {
    {&kPlans, "", &ClientStats::plans},
    {&kChunksPlanned, "", &ClientStats::chunks_planned},
    {&kPlanned, "local", &ClientStats::planned_local},
    {&kPlanned, "peer", &ClientStats::planned_peer},
    {&kPlanned, "remote", &ClientStats::planned_remote},
    {&kPlanned, "miss", &ClientStats::planned_miss},
    {&kFetched, "", &ClientStats::fetched},
    {&kFetchMisses, "", &ClientStats::fetch_misses},
    {&kCorrupt, "", &ClientStats::corrupt},
    {&kPeerDirect, "", &ClientStats::peer_direct},
    {&kStores, "", &ClientStats::stores},
    {&kStoreFailures, "", &ClientStats::store_failures},
    {&kStoresRanInline, "", &ClientStats::stores_ran_inline},
    {&kTimeouts, "local_node", &ClientStats::local_node_timeouts},
    {&kTimeouts, "controller", &ClientStats::controller_timeouts},
    {&kControllerSkipped, "", &ClientStats::controller_skipped},
    {&kZeroCopyFetched, "", &ClientStats::zero_copy_fetched},
    {&kZeroCopyStores, "", &ClientStats::zero_copy_stores},
    {&kLeaseExpired, "", &ClientStats::lease_expired},
    {&kAudits, "", &ClientStats::audits},
    {&kAuditMismatches, "", &ClientStats::audit_mismatches}};
static_assert(std::size(kClientCounters) * sizeof(uint64_t) == sizeof(ClientStats),
              "each ClientStats field has one row in kClientCounters");

}  // namespace stats

// Every counter of `s` as a sample of its family.
void SampleClientStats(const ClientStats& s, StatsSink& out);

}  // namespace pikv::client
