// ClusterState: the controller's whole model of the cluster, without sockets.
//
// Owns the node table (id, endpoints, incarnation, lifecycle state, last
// heartbeat, last applied event sequence, reported usage) and the Registry of
// chunk locations. It applies what nodes send and says what the server must
// do in return:
//   - Register: every string is checked first (CheckNodeId, CheckHostName,
//     tcp and ipc endpoints that parse); a new incarnation of a known id
//     drops the old subtree; the node then sends its full inventory.
//   - Events: batches carry a per-incarnation sequence number. A duplicate or
//     old batch is ignored; a gap marks the node as needing a resync (the
//     server sends kResync) and its events are ignored until the inventory
//     arrives. Admit/evict are idempotent, so a replayed batch changes nothing.
//   - Inventory: replaces the node's subtree (parts 0..final, in order, all
//     of one sequence number); after it the node's events continue from the
//     inventory's sequence number. A part out of order means one was lost:
//     kNeedResync, and the node sends the whole inventory again.
//   - Resync requests can be lost too: while a node's resync is pending,
//     TakeResyncRequest says to ask again, at most every `suspect_after`.
//   - Tick: alive -> suspect after `suspect_after` without a heartbeat, dead
//     after `dead_after` (its subtree removed). Dead and deregistered nodes
//     are forgotten after `forget_after`, or earlier, oldest first, when the
//     table is full and a new node registers: the table is bounded, and
//     registrations under ever new ids cannot lock real nodes out.
// Remote-tier (Redis) locations belong to the cluster, not to the node that
// wrote them, so they are kept under the reserved node index 0 and survive
// that node's death.
// Thread-safety: all methods are thread-safe (one mutex for the node table;
// the registry has its own shard locks; lock order: table, then registry).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "pikv/common/mutex.h"
#include "pikv/controller/audit_ledger.h"
#include "pikv/controller/registry.h"
#include "pikv/controller/scoring.h"
#include "pikv/proto/control_wire.h"
#include "pikv/proto/message.h"

namespace pikv::controller {

using Clock = std::chrono::steady_clock;

enum class NodeState : uint8_t {
  kAlive = 1,
  kSuspect = 2,
  kDead = 3,
  kGone = 4
};  // gone: deregistered
std::string_view NodeStateName(NodeState s);

inline constexpr uint16_t kSharedTierNode = 0;  // owner of remote-tier locations

struct NodeView {
  uint16_t index = 0;
  NodeRegistration reg;
  NodeState state = NodeState::kAlive;
  bool resync_pending = false;
  uint64_t last_seq = 0;
  uint64_t events_applied = 0;
  double seconds_since_heartbeat = 0;
  NodeUsage usage;                           // from the node's last heartbeat
  std::array<uint64_t, kNumTiers> chunks{};  // from the registry
};

struct ClusterStats {
  size_t nodes_alive = 0, nodes_suspect = 0, nodes_dead = 0;
  uint64_t keys = 0, locations = 0, registry_bytes = 0;
  uint64_t shared_tier_chunks = 0;  // remote-tier (Redis) chunks, the cluster's own
  uint64_t events_applied = 0, events_ignored = 0, gaps = 0, resyncs = 0, deaths = 0;
  double events_per_second = 0;
  AuditStats audits;  // engines' mismatch reports (AuditLedger)
};

class ClusterState {
 public:
  struct Options {
    std::chrono::milliseconds suspect_after{2500};
    std::chrono::milliseconds dead_after{5000};
    std::chrono::milliseconds forget_after{std::chrono::minutes(10)};
    size_t max_nodes = Registry::kMaxNodes;  // node table entries (dead ones included)
  };
  enum class Outcome { kApplied, kIgnored, kNeedResync, kUnknownNode };

  ClusterState(Options options, uint64_t epoch);

  uint64_t epoch() const { return epoch_.load(std::memory_order_acquire); }
  // Whether the nodes may still be reporting to this registry: less than
  // `suspect_after` (within which every live node heartbeats) since it
  // started or was reset. A key it names no copy of may be held anyway.
  bool Filling(Clock::time_point now) const {
    return now.time_since_epoch().count() - started_.load(std::memory_order_acquire) <
           Clock::duration(options_.suspect_after).count();
  }
  // Forgets every node and location and starts `epoch` (a controller that
  // became leader, or stopped being one: the nodes report to it afresh).
  void Reset(uint64_t epoch);
  Result<uint16_t> Register(const NodeRegistration& reg, Clock::time_point now);
  // kNotFound when the node (this incarnation) is unknown: it must register.
  Status Heartbeat(const std::string& id, uint64_t incarnation, const NodeUsage& usage,
                   Clock::time_point now);
  // A node's report: keys, their event values (location.h) and the owners
  // the values' owner slots name (owners[slot]; a slot past its end is
  // kUnknownOwner).
  struct Report {
    std::span<const ChunkKey> keys;
    std::span<const int64_t> values;
    std::span<const OwnerId> owners;
  };
  Outcome ApplyEvents(const std::string& id, uint64_t incarnation, uint64_t seq,
                      const Report& report, Clock::time_point now);
  Outcome ApplyInventory(const std::string& id, uint64_t incarnation, uint64_t seq, uint64_t part,
                         bool final, const Report& report, Clock::time_point now);
  Status Deregister(const std::string& id, uint64_t incarnation);
  // True when the node's inventory is overdue and it should be asked again
  // (then the next ask waits another suspect_after).
  bool TakeResyncRequest(const std::string& id, uint64_t incarnation, Clock::time_point now);
  struct TickResult {
    std::vector<std::string> died;       // declared dead in this tick
    std::vector<std::string> forgotten;  // dropped from the node table
  };
  // Ages nodes and advances the events rate's window (Stats reads it).
  TickResult Tick(Clock::time_point now);
  // Node table entries in use (any state).
  size_t node_count() const;

  // Replicas of key, cheapest first for a client on `host`: suspect nodes
  // last; then the same host; then CPU, disk, remote; then lighter nodes.
  // `provenance`, when given, receives who wrote the key.
  std::vector<Replica> Locate(const ChunkKey& key, const std::string& host,
                              Registry::Provenance* provenance = nullptr) const;
  // A prompt's chunks scored for every alive and suspect node, or for those
  // of them `only` names (scoring.h). `tokens[i]`: key i's tokens (missing
  // or 0: 1). A key `visible` refuses (another tenant's) counts as missing.
  // Answered from the registry alone, without asking a node.
  using Visible = std::function<bool(const Registry::Provenance&)>;
  std::vector<NodeScore> Score(std::span<const ChunkKey> keys, std::span<const int64_t> tokens,
                               const Visible& visible, std::span<const std::string> only) const;
  std::vector<NodeView> Nodes(Clock::time_point now) const;
  // Node indexes to forward an admin command to: one id, or every live node.
  std::vector<std::pair<uint16_t, std::string>> LiveNodes(const std::string& only_id = {}) const;
  ClusterStats Stats() const;
  // Engines' audit-mismatch reports: evidence, rate-limited, confirmed by a
  // second reporter before a writer is counted.
  AuditLedger& audits() { return audits_; }

 private:
  struct Node {
    bool in_use = false;
    NodeRegistration reg;
    NodeState state = NodeState::kAlive;
    Clock::time_point last_seen;
    Clock::time_point ended_at;           // when it died or deregistered
    Clock::time_point resync_asked_at{};  // last kResync sent for it
    uint64_t next_inventory_part = 0;
    uint64_t inventory_seq = 0;
    uint64_t last_seq = 0;
    bool resync_pending = false;
    uint64_t events_applied = 0;
    NodeUsage usage;
    double load = 0;  // requests/s from heartbeats
    int64_t last_requests = -1;
    Clock::time_point last_requests_at;
  };
  // Requires mu_. The node's record if id and incarnation match a live node.
  Node* LiveLocked(const std::string& id, uint64_t incarnation) PIKV_REQUIRES(mu_);
  void ApplyLocked(uint16_t index, const Report& report, bool admit_only) PIKV_REQUIRES(mu_);
  void KillLocked(uint16_t index, Clock::time_point now) PIKV_REQUIRES(mu_);
  void ForgetLocked(uint16_t index) PIKV_REQUIRES(mu_);
  // A free table index for a new node, reclaiming the longest-ended one when
  // the table is full; nullopt when every entry is alive or suspect.
  std::optional<uint16_t> FreeIndexLocked() PIKV_REQUIRES(mu_);

  const Options options_;
  std::atomic<uint64_t> epoch_;
  std::atomic<Clock::rep> started_{0};  // steady-clock ticks of the last Reset
  mutable Mutex mu_;
  std::vector<Node> nodes_ PIKV_GUARDED_BY(mu_);  // by index; index 0 is the remote tier
  std::map<std::string, uint16_t> ids_ PIKV_GUARDED_BY(mu_);
  std::vector<uint16_t> free_ PIKV_GUARDED_BY(mu_);  // unused indexes
  Registry registry_;
  uint64_t events_applied_ PIKV_GUARDED_BY(mu_) = 0;
  uint64_t events_ignored_ PIKV_GUARDED_BY(mu_) = 0;
  uint64_t gaps_ PIKV_GUARDED_BY(mu_) = 0;
  uint64_t resyncs_ PIKV_GUARDED_BY(mu_) = 0;
  uint64_t deaths_ PIKV_GUARDED_BY(mu_) = 0;
  AuditLedger audits_;
  // The events rate's window, advanced by Tick.
  uint64_t rate_events_ PIKV_GUARDED_BY(mu_) = 0;
  Clock::time_point rate_at_ PIKV_GUARDED_BY(mu_) = {};
  double rate_ PIKV_GUARDED_BY(mu_) = 0;
};

}  // namespace pikv::controller
