// The admin wire: what `pikv admin`, the HTTP endpoints and tests read from
// the controller. An admin request is an ordinary header (kAdminNodes,
// kAdminStats, kAdminHealth, kLocate with `json` (control_wire.h's LocateRequest),
// kAdminClear/Pin/Unpin/ Evict); the reply's one payload frame is a JSON document whose member
// names are defined here, once, for the controller that writes them and the
// clients that read them. The document is a payload frame, not a header
// string, so it is bounded by kMaxAdminReplyBytes (a 16,383-node table is
// about 10 MB), not by the header's string limit.
#pragma once

#include <cstdint>

namespace pikv::admin {

inline constexpr uint64_t kMaxAdminReplyBytes = 64ull << 20;

// Members, by document. Tier objects are keyed by TierName (cpu, disk, remote).
inline constexpr char kNodes[] = "nodes";  // nodes: [node]
inline constexpr char kId[] = "id";
inline constexpr char kIndex[] = "index";
inline constexpr char kState[] = "state";
inline constexpr char kHost[] = "host";
inline constexpr char kTcp[] = "tcp";
inline constexpr char kIpc[] = "ipc";
inline constexpr char kIncarnation[] = "incarnation";
inline constexpr char kResyncPending[] = "resync_pending";
inline constexpr char kLastSeq[] = "last_seq";
inline constexpr char kEventsApplied[] = "events_applied";
inline constexpr char kSecondsSinceHeartbeat[] = "seconds_since_heartbeat";
inline constexpr char kRequests[] = "requests";
inline constexpr char kTiers[] = "tiers";
inline constexpr char kChunks[] = "chunks";
inline constexpr char kUsedBytes[] = "used_bytes";
inline constexpr char kCapacityBytes[] = "capacity_bytes";
inline constexpr char kHits[] = "hits";
inline constexpr char kMisses[] = "misses";
inline constexpr char kHitRate[] = "hit_rate";

// stats (and health: status, epoch and the three node counts)
inline constexpr char kStatus[] = "status";  // "ok" or "degraded"
inline constexpr char kEpoch[] = "epoch";
inline constexpr char kNodesAlive[] = "nodes_alive";
inline constexpr char kNodesSuspect[] = "nodes_suspect";
inline constexpr char kNodesDead[] = "nodes_dead";
// health: leadership (docs/operations.md)
inline constexpr char kRole[] = "role";  // "alone", "leader" or "standby"
inline constexpr char kLeader[] = "leader";
inline constexpr char kStandbys[] = "standbys";
inline constexpr char kLeaseTtlMs[] = "lease_ttl_ms";
inline constexpr char kLeaseLeftMs[] = "lease_left_ms";
inline constexpr char kLeaderships[] = "leaderships";
inline constexpr char kLastFailoverSeconds[] = "last_failover_seconds";
inline constexpr char kKeys[] = "keys";  // stats: a count; locate: [entry]; forwarded: a count
inline constexpr char kLocations[] = "locations";
inline constexpr char kRegistryBytes[] = "registry_bytes";
inline constexpr char kEventsIgnored[] = "events_ignored";
inline constexpr char kEventsPerSecond[] = "events_per_second";
inline constexpr char kSequenceGaps[] = "sequence_gaps";
inline constexpr char kResyncs[] = "resyncs";
inline constexpr char kNodeDeaths[] = "node_deaths";
inline constexpr char kPerNode[] = "per_node";
inline constexpr char kCpuChunks[] = "cpu_chunks";
inline constexpr char kDiskChunks[] = "disk_chunks";
inline constexpr char kCpuUsedBytes[] = "cpu_used_bytes";
inline constexpr char kDiskUsedBytes[] = "disk_used_bytes";
// stats: peer-to-peer pulls, the cluster's and each node's (what its puller fetched)
inline constexpr char kP2p[] = "p2p";
inline constexpr char kPulledObjects[] = "pulled_objects";
inline constexpr char kPulledBytes[] = "pulled_bytes";
inline constexpr char kPullFailures[] = "pull_failures";
// stats: audits (docs/security.md, controller/audit_ledger.h)
inline constexpr char kAuditMismatches[] = "audit_mismatches";  // reports taken: keys dropped
inline constexpr char kAuditReportsRefused[] = "audit_reports_refused";  // over a reporter's rate
inline constexpr char kAuditConfirmed[] = "audit_confirmed";  // objects two reporters found wrong
inline constexpr char kConfirmedByWriter[] = "confirmed_by_writer";        // {writer: count}
inline constexpr char kReportsByReporter[] = "audit_reports_by_reporter";  // {engine: count}
inline constexpr char kRefusedByReporter[] = "audit_refused_by_reporter";  // {engine: count}

// locate: keys: [{key, tenant, writer, several_writers,
//                  locations: [{node, tier, host, tcp, ipc}]}]
// (tenant and writer as the nodes reported the first copy; "default" is
// the default tenant, "unknown" an owner never reported or not known)
inline constexpr char kKey[] = "key";
inline constexpr char kTenant[] = "tenant";
inline constexpr char kWriter[] = "writer";
inline constexpr char kSeveralWriters[] = "several_writers";
inline constexpr char kNode[] = "node";
inline constexpr char kTier[] = "tier";

// score (kScore, /score): keys and tokens as counts, registry_filling, and
// nodes: [{id, index, state, host, tokens: {<reach>: n}, prefix_tokens,
// load: {requests_per_second}}] (controller/scoring.h names the reaches)
inline constexpr char kTokens[] = "tokens";
inline constexpr char kRegistryFilling[] = "registry_filling";
inline constexpr char kPrefixTokens[] = "prefix_tokens";
inline constexpr char kLoad[] = "load";
inline constexpr char kRequestsPerSecond[] = "requests_per_second";
// The members of a node's tokens, in the order of controller/scoring.h's Reach.
inline constexpr const char* kReaches[] = {"cpu", "disk", "remote", "peer", "missing"};

// clear, pin, unpin, evict
inline constexpr char kForwardedTo[] = "forwarded_to";

}  // namespace pikv::admin
