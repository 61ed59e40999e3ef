#include "pikv/client/client_stats.h"

namespace pikv::client {

void SampleClientStats(const ClientStats& s, StatsSink& out) {
  struct Counter {
    const MetricFamily& family;
    const char* label;  // "" for an unlabelled family
    uint64_t ClientStats::*field;
  };
  static const Counter kCounters[] = {
      {stats::kPlans, "", &ClientStats::plans},
      {stats::kChunksPlanned, "", &ClientStats::chunks_planned},
      {stats::kPlanned, "local", &ClientStats::planned_local},
      {stats::kPlanned, "peer", &ClientStats::planned_peer},
      {stats::kPlanned, "remote", &ClientStats::planned_remote},
      {stats::kPlanned, "miss", &ClientStats::planned_miss},
      {stats::kFetched, "", &ClientStats::fetched},
      {stats::kFetchMisses, "", &ClientStats::fetch_misses},
      {stats::kCorrupt, "", &ClientStats::corrupt},
      {stats::kPeerDirect, "", &ClientStats::peer_direct},
      {stats::kStores, "", &ClientStats::stores},
      {stats::kStoreFailures, "", &ClientStats::store_failures},
      {stats::kStoresRanInline, "", &ClientStats::stores_ran_inline},
      {stats::kTimeouts, "local_node", &ClientStats::local_node_timeouts},
      {stats::kTimeouts, "controller", &ClientStats::controller_timeouts},
      {stats::kControllerSkipped, "", &ClientStats::controller_skipped},
      {stats::kZeroCopyFetched, "", &ClientStats::zero_copy_fetched},
      {stats::kZeroCopyStores, "", &ClientStats::zero_copy_stores},
      {stats::kLeaseExpired, "", &ClientStats::lease_expired},
      {stats::kAudits, "", &ClientStats::audits},
      {stats::kAuditMismatches, "", &ClientStats::audit_mismatches}};
  for (const Counter& c : kCounters) out.Add(c.family, c.label, s.*c.field);
}

}  // namespace pikv::client
