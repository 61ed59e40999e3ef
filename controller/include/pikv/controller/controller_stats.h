// Every counter and gauge of the controller's /metrics, declared once
// (common/stats_registry.h). The controller's stats are its admin views
// (views.h), so these families name no stats field. docs/metrics.md documents each;
// tests/controller/metrics_test.cc scrapes them from a running controller.
#pragma once

#include "pikv/common/counter_set.h"
#include "pikv/common/stats_registry.h"

namespace pikv::controller::stats {

using enum MetricKind;

inline constexpr MetricFamily kNodes{"pikv_controller_nodes", kGauge, "Nodes by lifecycle state.",
                                     "state", ""};
inline constexpr MetricFamily kRegistryKeys{"pikv_controller_registry_keys", kGauge,
                                            "Distinct chunk keys in the registry.", "", ""};
inline constexpr MetricFamily kRegistryLocations{"pikv_controller_registry_locations", kGauge,
                                                 "(key, node, tier) locations in the registry.", "",
                                                 ""};
inline constexpr MetricFamily kRegistryBytes{"pikv_controller_registry_bytes", kGauge,
                                             "Memory held by the registry tables.", "", ""};
inline constexpr MetricFamily kSharedTierChunks{"pikv_controller_shared_tier_chunks", kGauge,
                                                "Chunks in the shared remote tier (Redis).", "",
                                                ""};
inline constexpr MetricFamily kEventsPerSecond{"pikv_controller_events_per_second", kGauge,
                                               "Admit/evict events applied per second.", "", ""};
inline constexpr MetricFamily kEventsApplied{"pikv_controller_events_applied_total", kCounter,
                                             "Admit/evict events applied.", "", ""};
inline constexpr MetricFamily kEventsIgnored{"pikv_controller_events_ignored_total", kCounter,
                                             "Events ignored (duplicates, awaiting resync).", "",
                                             ""};
inline constexpr MetricFamily kSequenceGaps{"pikv_controller_sequence_gaps_total", kCounter,
                                            "Event sequence gaps that triggered a resync.", "", ""};
inline constexpr MetricFamily kResyncs{"pikv_controller_resyncs_total", kCounter,
                                       "Full node inventories applied.", "", ""};
inline constexpr MetricFamily kNodeDeaths{"pikv_controller_node_deaths_total", kCounter,
                                          "Nodes declared dead.", "", ""};
inline constexpr MetricFamily kAuditReports{
    "pikv_controller_audit_reports_total", kCounter,
    "Audit-mismatch reports taken (each key dropped cluster-wide), by reporter.", "reporter", ""};
inline constexpr MetricFamily kAuditReportsRefused{
    "pikv_controller_audit_reports_refused_total", kCounter,
    "Audit-mismatch reports refused over the reporter's rate (nothing dropped).", "reporter", ""};
inline constexpr MetricFamily kAuditConfirmed{
    "pikv_controller_audit_confirmed_total", kCounter,
    "Objects found wrong by two different reporters, by the writer they named.", "writer", ""};
inline constexpr MetricFamily kLeader{"pikv_controller_leader", kGauge,
                                      "1 while this controller leads (or runs alone), 0 standing "
                                      "by.",
                                      "", ""};
inline constexpr MetricFamily kEpoch{"pikv_controller_epoch", kGauge,
                                     "The epoch this controller serves (0 standing by).", "", ""};
inline constexpr MetricFamily kLeaderships{"pikv_controller_leaderships_total", kCounter,
                                           "Times this controller became leader.", "", ""};
inline constexpr MetricFamily kStepDowns{"pikv_controller_step_downs_total", kCounter,
                                         "Times this controller stopped leading.", "", ""};
inline constexpr MetricFamily kLastFailoverSeconds{
    "pikv_controller_last_failover_seconds", kGauge,
    "Its last win: seconds since the previous leader was last seen.", "", ""};

inline constexpr MetricFamily kRejectedRequests{"pikv_controller_rejected_requests_total", kCounter,
                                                "Malformed, oversized or unknown requests.", "",
                                                ""};

// What the handler counts (ControllerHandler::counters()). A new counter: a
// value here, its row below, the line that counts it, and its row in
// docs/metrics.md. The registry's and the nodes' numbers are not here: they
// are gauges, or kept per leadership under ClusterState's mutex.
enum class HandlerCounter {
  kRejected,     // malformed, oversized, unknown or refused requests
  kLeaderships,  // leaderships started
  kStepDowns,    // leaderships ended
  kCount
};
inline constexpr CounterRow<HandlerCounter> kHandlerCounters[] = {
    {HandlerCounter::kRejected, &kRejectedRequests},
    {HandlerCounter::kLeaderships, &kLeaderships},
    {HandlerCounter::kStepDowns, &kStepDowns}};
using HandlerCounters = CounterSet<HandlerCounter, kHandlerCounters>;

inline constexpr const MetricFamily* kAll[] = {&kNodes,
                                               &kRegistryKeys,
                                               &kRegistryLocations,
                                               &kRegistryBytes,
                                               &kSharedTierChunks,
                                               &kEventsPerSecond,
                                               &kEventsApplied,
                                               &kEventsIgnored,
                                               &kSequenceGaps,
                                               &kResyncs,
                                               &kNodeDeaths,
                                               &kAuditReports,
                                               &kAuditReportsRefused,
                                               &kAuditConfirmed,
                                               &kLeader,
                                               &kEpoch,
                                               &kLeaderships,
                                               &kStepDowns,
                                               &kLastFailoverSeconds,
                                               &kRejectedRequests};

}  // namespace pikv::controller::stats
