// The control plane's messages as declared types (message.h has the
// frame): what a node says of itself and holds, what an engine's audit
// found, what an admin revokes. The sender encodes one and the receiver
// decodes one, so no field is named by hand at either end. Decoding never
// fails where a field is missing (it reads as its zero); names are checked
// where they are used (the registry checks endpoints, Authorize checks
// node_id against the sender's key, an engine name is checked before it is
// acted on).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pikv/proto/message.h"
#include "pikv/proto/owner.h"
#include "pikv/proto/tier_kind.h"

namespace pikv {

// kRegister: a node joins, or joins again (a restart: a new incarnation; a
// new leadership). Every node -> controller message carries node_id and
// incarnation the same way.
struct NodeRegistration {
  std::string id;
  std::string host;
  std::string tcp;
  std::string ipc;
  uint64_t incarnation = 0;
  uint64_t cpu_capacity = 0;
  uint64_t disk_capacity = 0;
  friend bool operator==(const NodeRegistration&, const NodeRegistration&) = default;
};
Header EncodeRegister(const NodeRegistration& reg);
NodeRegistration DecodeRegister(const Header& request);  // negative capacities read as 0

// The register reply: the node's index in locate replies, and the engines
// revoked (while the node was away, perhaps), at most
// kMaxRevokedInRegisterReply of them.
struct RegisterReply {
  int64_t node_index = 0;
  std::vector<std::string> revoked;
  friend bool operator==(const RegisterReply&, const RegisterReply&) = default;
};
// Into `reply` (a ReplyTo the request, stamped by the controller).
void EncodeRegisterReply(const RegisterReply& r, Header& reply);
// Revoked names that are not identity names (owner.h) are dropped.
RegisterReply DecodeRegisterReply(const Header& reply);

// kHeartbeat: a node is alive, with the usage the controller's documents
// show and its request count (the controller's load). The field names are
// the node's own stats fields (node_stats.h: a test holds the two equal), so
// controllers of either version read a heartbeat alike.
struct NodeUsage {
  struct Tier {
    uint64_t used_bytes = 0, capacity_bytes = 0, hits = 0, misses = 0;
    friend bool operator==(const Tier&, const Tier&) = default;
  };
  uint64_t requests = 0;  // received, served or refused, since the node started
  std::array<Tier, kNumTiers> tiers{};
  uint64_t storage_hits = 0, storage_misses = 0;                     // lookups over every tier
  uint64_t pulled_objects = 0, pulled_bytes = 0, pull_failures = 0;  // from peers
  friend bool operator==(const NodeUsage&, const NodeUsage&) = default;
};
Header EncodeHeartbeat(const NodeUsage& usage);
NodeUsage DecodeHeartbeat(const Header& h);  // a missing or negative count reads as 0

// kEvents and kInventory: what a node admitted and evicted, or all it holds
// (in parts), one value per key (location.h: EncodeEvent, EncodeHeld), with
// the owners of admitted objects in a table: a value's owner slot 0 is an
// owner not known, slot i is owners[i - 1], at most kMaxOwnersPerReport.
struct NodeReport {
  std::string node_id;
  uint64_t incarnation = 0;
  uint64_t seq = 0;
  uint64_t part = 0;   // kInventory
  bool final = false;  // kInventory: the last part
  std::vector<ChunkKey> keys;
  std::vector<int64_t> values;
  std::vector<std::optional<Owner>> owners;  // decoded: nullopt where the text was not an owner
};
Header EncodeReport(MsgType type, NodeReport report);
NodeReport DecodeReport(const Header& h);

// kAuditMismatch (engine -> controller): keys whose fetched objects an audit
// found wrong, with the writer each object named and its payload checksum
// (which object was judged). The reply: how many keys were dropped, and how
// many reports were refused (past the reporter's rate).
struct MismatchReport {
  ChunkKey key;
  std::string writer;  // as the object named it: checked where used
  uint64_t checksum = 0;
  friend bool operator==(const MismatchReport&, const MismatchReport&) = default;
};
Header EncodeMismatches(std::span<const MismatchReport> reports);
std::vector<MismatchReport> DecodeMismatches(const Header& h);  // one per key
struct MismatchReply {
  uint64_t dropped = 0;
  uint64_t refused = 0;
};
void EncodeMismatchReply(const MismatchReply& r, Header& reply);
Result<MismatchReply> DecodeMismatchReply(const Header& reply);  // an error when malformed

// kAdminRevoke (admin -> controller) and kRevoke (controller -> node): an
// engine refused from now on, and what it wrote dropped; sweep_shared (kRevoke
// only) names the one node that sweeps the remote tier too.
struct Revocation {
  std::string engine;
  bool sweep_shared = false;
  friend bool operator==(const Revocation&, const Revocation&) = default;
};
Header EncodeRevoke(MsgType type, const Revocation& r);
Revocation DecodeRevoke(const Header& h);

// Who sends a node's requests to the controller (kRegister, kHeartbeat,
// events, inventory; kDeregister carries nothing else): its id, which
// Authorize holds to the sender's key, and the incarnation it registered as.
struct NodeIdentity {
  std::string node_id;
  uint64_t incarnation = 0;
  friend bool operator==(const NodeIdentity&, const NodeIdentity&) = default;
};
void EncodeNodeIdentity(const NodeIdentity& id, Header& request);
NodeIdentity DecodeNodeIdentity(const Header& request);

// A heartbeat's reply, besides its status (kNotFound: register again) and
// epoch: whether the controller asks for the node's inventory again.
struct HeartbeatReply {
  bool resync = false;
  friend bool operator==(const HeartbeatReply&, const HeartbeatReply&) = default;
};
void EncodeHeartbeatReply(const HeartbeatReply& r, Header& reply);
HeartbeatReply DecodeHeartbeatReply(const Header& reply);

// kLocate: the asker's host (copies there are named first) and whether to
// answer with a JSON document as well (the CLI's locate; admin_wire.h).
struct LocateRequest {
  std::string host;
  bool json = false;
  friend bool operator==(const LocateRequest&, const LocateRequest&) = default;
};
void EncodeLocate(const LocateRequest& r, Header& request);
LocateRequest DecodeLocate(const Header& request);

// kScore: the candidate nodes by id (empty: every alive and suspect node),
// sent as one comma-separated field (node ids hold no commas: CheckNodeId).
struct ScoreRequest {
  std::vector<std::string> nodes;
  friend bool operator==(const ScoreRequest&, const ScoreRequest&) = default;
};
void EncodeScore(const ScoreRequest& r, Header& request);
ScoreRequest DecodeScore(const Header& request);
// The node ids of a comma-separated candidate list, empty items skipped (the
// wire's field and /score's `node` parameter read alike).
std::vector<std::string> ScoreCandidates(std::string_view joined);

// An admin command the controller forwards to nodes (kAdminClear, Pin,
// Unpin, Evict, Revoke): the one node it is for; empty: every node.
struct AdminTarget {
  std::string node_id;
  friend bool operator==(const AdminTarget&, const AdminTarget&) = default;
};
void EncodeAdminTarget(const AdminTarget& t, Header& request);
AdminTarget DecodeAdminTarget(const Header& request);

// Leadership (message.h). A non-leader's kNotLeader reply: the leader it
// knows of (an endpoint; empty: none yet) and that leader's epoch.
struct NotLeader {
  std::string leader;
  int64_t leader_epoch = 0;
  friend bool operator==(const NotLeader&, const NotLeader&) = default;
};
void EncodeNotLeader(const NotLeader& n, Header& reply);
NotLeader DecodeNotLeader(const Header& reply);
// The stamp on every reply and command a controller sends a node: its epoch
// (decimal text; nullopt where the message carries none) and, from an
// elected leader, its lease TTL in ms (0: not elected).
struct ControllerEpoch {
  std::optional<std::string> epoch;
  int64_t elected_ttl_ms = 0;
  friend bool operator==(const ControllerEpoch&, const ControllerEpoch&) = default;
};
void StampEpoch(const ControllerEpoch& e, Header& h);
ControllerEpoch EpochOf(const Header& h);

}  // namespace pikv
