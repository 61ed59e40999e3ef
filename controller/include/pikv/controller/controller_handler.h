// ControllerHandler: what the controller does with each message, without
// sockets. The server loop (controller_server.cc) receives frames and sends
// what this returns; tests and fuzzers call it directly.
//
// Handle() takes one request as frames arrived from a peer (its ROUTER
// identity, who sent it as CURVE authenticated it, the header frame, the
// number of payload frames), decodes it
// under the wire limits, applies it to the ClusterState and returns what to
// send: the reply to the requester, if any, and the commands it causes for
// nodes (kResync after a sequence gap, clear/pin/unpin/evict for admin
// requests), each addressed by ROUTER identity. Nodes are reached over the
// connections they opened; a node's identity is learned when it registers
// or heartbeats and forgotten with the node. With security on, only node
// <id>'s key speaks for node <id> (register, heartbeat, events, inventory,
// deregister) and only an admin key changes nodes (clear, pin, unpin,
// evict); anything else is refused with kPermissionDenied and counted in
// rejected(). The trusted sender (nullptr: security off) may do anything.
// Nothing a peer sends throws.
// Thread-safety: one thread (the server's) calls Handle and Tick.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "pikv/controller/cluster_state.h"
#include "pikv/controller/leader_election.h"
#include "pikv/controller/trust_record.h"
#include "pikv/controller/views.h"
#include "pikv/transport/curve.h"

namespace pikv::controller {

class ControllerHandler {
 public:
  struct Outgoing {
    std::string identity;  // ROUTER identity of the recipient
    Header header;
    std::vector<SharedBuffer> payloads;  // an admin reply's document (proto/admin_wire.h)
  };

  ControllerHandler(ClusterState& state, WireLimits limits) : state_(state), limits_(limits) {}

  std::vector<Outgoing> Handle(const std::string& identity, const CurvePeer* sender,
                               std::span<const uint8_t> header, size_t payload_frames,
                               Clock::time_point now);
  // Ages node lifecycles (every 100 ms from the server).
  void Tick(Clock::time_point now);
  // With standbys: serve only while `election` says this controller leads
  // (else every request gets kNotLeader naming the leader), and start each
  // leadership with an empty registry at its epoch. Null: run alone.
  void Follow(const LeaderElection* election) { election_ = election; }
  // Where revocations and confirmed poisonings are kept for the next leader
  // (etcd, with an election): a revocation is written there before it takes
  // effect, and a new leadership reads it before it answers. Without one
  // they live in this controller's memory.
  void KeepTrustIn(std::unique_ptr<TrustRecord> record) { trust_ = std::move(record); }
  // Whether what Handle just returned may still go out: alone, or the lease
  // it was answered under still holds (checked again before sending).
  bool StillLeading() const;
  Leadership LeadershipOf(Clock::time_point now) const;

  uint64_t rejected() const { return counters_[stats::HandlerCounter::kRejected]; }
  // Its counters, each sampled as its family (controller_stats.h).
  const stats::HandlerCounters& counters() const { return counters_; }
  uint64_t bad_owners() const { return bad_owners_; }
  // Engines refused (pikv admin revoke, the keyring's `revoked` lines):
  // shared with the server's ZAP handler.
  const std::shared_ptr<Revocations>& revocations() const { return revoked_; }

 private:
  std::vector<Outgoing> Reject(const std::string& identity, const Header* request,
                               const Status& why);
  // Whether to serve now; starts or ends a leadership as the election says.
  bool Leading(Clock::time_point now);
  Header NotLeader(const Header& request, Clock::time_point now) const;
  // Adds this controller's epoch (and whether it was elected) to `h`.
  void Stamp(Header& h) const;
  void Apply(const std::string& identity, const CurvePeer* sender, const Header& h,
             Clock::time_point now, std::vector<Outgoing>& out);
  // Register, heartbeat, deregister: false when refused (`out` holds why).
  bool OnNodeRequest(const std::string& identity, const Header& h, Clock::time_point now,
                     Header& reply, std::vector<Outgoing>& out);
  // Events and inventory parts: a kResync to `out` after a gap.
  void OnNodeReport(const std::string& identity, const Header& h, Clock::time_point now,
                    std::vector<Outgoing>& out);
  // A report's owner table (control_wire.h) interned: ids[slot],
  // kUnknownOwner for slot 0 and for entries that did not parse (counted in
  // bad_owners()).
  std::vector<OwnerId> InternOwners(const std::vector<std::optional<Owner>>& owners);
  // Each key's copies (those on `host` first) and provenance; an engine
  // (`only_tenant`) is answered no copies of another tenant's keys.
  std::vector<Located> AllCopies(std::span<const ChunkKey> keys, const std::string& host,
                                 const std::string* only_tenant) const;
  // Reads the trust record for leadership `epoch` (revocations, confirmed
  // counts); false while it cannot be read: the leadership does not answer.
  bool ReadTrust(uint64_t epoch, Clock::time_point now);
  // One key of a kAuditMismatch as the ledger takes it.
  AuditLedger::Report ReportOf(const std::string& reporter, const CurvePeer* sender,
                               const MismatchReport& reported) const;
  // kAuditMismatch: the reported keys of the reporter's tenant, taken as
  // evidence (AuditLedger: rate-limited per reporter, a writer counted once
  // a second reporter confirms the object), dropped on every node; the
  // reply says how many were dropped and how many refused.
  void OnMismatch(const std::string& identity, const CurvePeer* sender, const Header& h,
                  Clock::time_point now, Header& reply, std::vector<Outgoing>& out);
  // The locate reply's values and fields for `copies` (AllCopies).
  void AnswerLocate(const std::vector<Located>& located, Header& reply) const;
  // An admin clear/pin/unpin/evict/revoke as commands to the nodes; their ids.
  Result<std::vector<std::string>> Forward(const Header& h, std::vector<Outgoing>& out) const;

  ClusterState& state_;
  const WireLimits limits_;
  std::map<std::string, std::string> identities_;  // node id -> ROUTER identity of its reporter
  std::atomic<const LeaderElection*> election_{nullptr};  // read by the HTTP thread too
  stats::HandlerCounters counters_;
  // Not in the set: it has no metric family (tests read bad_owners()), and a
  // family is a new /metrics series.
  std::atomic<uint64_t> bad_owners_{0};  // owner entries in node reports that did not parse
  const std::shared_ptr<Revocations> revoked_ = std::make_shared<Revocations>();
  std::unique_ptr<TrustRecord> trust_;
  uint64_t trust_epoch_ = 0;            // the leadership whose record was read
  Clock::time_point trust_retry_at_{};  // a failed read is tried again from then
};

}  // namespace pikv::controller
