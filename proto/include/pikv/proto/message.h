// pikv wire messages.
//
// A message is a ZeroMQ multipart: frame 0 is a msgpack header, frames 1..n
// are raw payload bytes (chunk objects), sent without copying. The header is
// a msgpack array
//   [version, type, request_id, status, reason, keys, values, fields]
// where keys is one bin of 16 bytes per key, values an array of int64 (one per
// key where the type says so: per-key ErrorCodes, tier masks), and fields a
// map from string to int64 or string. Decoders accept longer arrays and ignore
// the extra elements, so new trailing elements do not need a version bump.
// Replies carry the request's type and id; status/reason describe the whole
// request, values the per-key outcome.
//
// Every limit is checked by the decoder before it allocates: header bytes,
// array, map, string and bin lengths, nesting depth.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "pikv/common/status.h"
#include "pikv/proto/chunk_key.h"
#include "pikv/proto/shared_buffer.h"

namespace pikv {

inline constexpr uint16_t kProtocolVersion = 1;

// Numbered once, never renumbered.
enum class MsgType : uint16_t {
  kError = 0,  // reply to a request too malformed to know its type
  kPing = 1,
  // 10-29: node data operations.
  kExists = 10,  // values: per-key tier mask (TierMask bits), 0 = absent
  kGet = 11,     // values: per-key ErrorCode; one payload frame per kOk key (or streamed, below)
  kPut = 12,     // one payload frame per key; values: per-key ErrorCode
  kDelete = 13,
  kPin = 14,
  kUnpin = 15,
  kStats = 16,  // fields: counters
  kClear = 17,  // drop every object this node holds; values: [objects dropped]
  kPull = 18,   // P2P: get keys from peers (data_wire.h's PullRequest), admit them, reply like kGet
  // controller -> node: drop every object an engine wrote, in every tier
  // (the remote one too), and refuse the engine from now on (control_wire.h).
  kRevoke = 19,
  // 30-49: node <-> controller. Events and inventory get no reply; the
  // controller asks for a resync when it sees a gap.
  kRegister = 30,   // control_wire.h: NodeRegistration; reply: epoch and RegisterReply
  kHeartbeat = 31,  // fields: node_id, incarnation, usage; reply: epoch (kNotFound: register again)
  // Events and inventory: control_wire.h's NodeReport.
  kEvents = 32,
  kInventory = 33,
  kDeregister = 34,  // fields: node_id, incarnation
  kResync = 35,      // controller -> node: send a full inventory
  // 50-69: queries and admin. Admin replies carry fields["json"].
  kLocate = 50,  // keys; fields: host. reply values per key: n, then n x (node_index * 4 + tier)
  kAdminNodes = 51,
  kAdminStats = 52,
  kAdminHealth = 53,
  kAdminClear = 54,   // fields: node_id (absent: every node)
  kAdminPin = 55,     // keys
  kAdminUnpin = 56,   // keys
  kAdminEvict = 57,   // keys
  kAdminRevoke = 58,  // control_wire.h's Revocation; forwarded to every live node as kRevoke
  // engine -> controller: keys whose fetched objects an audit found wrong
  // (control_wire.h). The controller drops them on every node (kDelete)
  // and counts each writer's mismatches.
  kAuditMismatch = 59,
  // 70-79: the zero-copy channel between a node and its host's clients
  // (local_channel.h; never on ZeroMQ). Offsets are into the node's CPU arena.
  kShareHello = 70,  // node -> client on connect, with the arena's fd: fields arena_bytes
  kLease = 71,       // keys; reply values per key: code, offset, size; fields lease, ttl_ms
  kRelease = 72,     // values: lease or reservation ids to give back; no reply
  kReserve = 73,  // values: sizes; reply values [code, reservation, offset] per size, fields ttl_ms
  kCommit = 74,   // keys, values: a reservation per key; fields seal (1: the node computes the
                  // checksums); reply values: a code per key
  kWritten = 75,  // values: reservation, bytes: its first bytes are final (sealed ahead); no reply
};

std::string_view MsgTypeName(MsgType t);

// A register reply names at most this many revoked engines (fields
// "revoked.<i>"), within WireLimits::max_fields.
inline constexpr size_t kMaxRevokedInRegisterReply = 1024;

using FieldValue = std::variant<int64_t, std::string>;
using Fields = std::map<std::string, FieldValue>;

struct Header {
  uint16_t version = kProtocolVersion;
  MsgType type = MsgType::kPing;
  uint64_t request_id = 0;
  ErrorCode status = ErrorCode::kOk;
  std::string reason;
  std::vector<ChunkKey> keys;
  std::vector<int64_t> values;
  Fields fields;
};

struct Message {
  Header header;
  std::vector<SharedBuffer> payloads;
};

// Limits on what a peer may send. Defaults suit a node; all are checked
// before allocation.
// One definition for both ends of every exchange: senders split what a
// receiver with these limits would refuse (inventories, batches), and
// replies are built to fit them (locate).
struct WireLimits {
  size_t max_header_bytes = 1u << 20;
  size_t max_batch = 4096;    // keys and payload frames per message
  size_t max_values = 65536;  // values per message (locate: counts plus locations)
  size_t max_fields = 8192;   // e.g. locate: 4 per node referenced
  size_t max_string = 4096;
  uint64_t max_payload_bytes = 1ull << 30;          // one payload frame
  uint64_t max_message_payload_bytes = 4ull << 30;  // all payload frames
};

// Streamed replies: large objects in bounded frames, so that neither side
// allocates (and page-faults) an object-sized buffer per transfer. A get may
// ask for fields["stream_frame"] = F (within the bounds below). A node that
// streams its answer sends the reply header alone, with the same field and
// values = per-key ErrorCodes followed by the size of each hit, then each
// hit's bytes in order as one-frame messages of F bytes (an object's last
// shorter). A node may also answer the ordinary way (no field in the reply).
// A receiver that fails halfway must drop its connection: the rest of the
// stream would still arrive on it.
//
// Streamed puts, the other direction: a put of one key with no payload and
// fields stream_frame = F, stream_size = S (the object's bytes) asks to
// stream. The node answers at once: a kOk reply carrying the same
// stream_frame means "space is reserved, send"; any other reply is the put's
// final answer. The client then sends the object as one-frame messages of F
// bytes (the last shorter), and the node answers once more, with the same
// request id: the put's per-key result, after verifying the whole object. A
// frame of the wrong size ends the stream with an error; a stream that stalls
// for kStreamStallMs between frames is dropped and its space freed.
inline constexpr int64_t kMinStreamFrame = 64 << 10;
// Objects up to this size travel whole even where streaming was asked for:
// a streamed put costs a round trip more and goes alone (batched whole puts
// share one message), a streamed reply costs the receiver a copy out of each
// frame, and neither saves an object-sized buffer worth the cost this small
// (bench/peers: 1 MiB puts in 1 MiB frames at 0.6x whole; 1 MiB gets at
// 0.8x whole, 4 MiB alike at 1.4x the client's CPU). A reply is streamed
// when its objects together are larger (and frame-sized), so that no reply
// message is larger than this, and a caller's timeout bounds each frame.
inline constexpr uint64_t kWholeObjectBytes = 4 << 20;
inline constexpr int64_t kMaxStreamFrame = 64 << 20;
inline constexpr int64_t kStreamStallMs = 5000;
inline constexpr char kStreamFrameField[] = "stream_frame";
inline constexpr char kStreamSizeField[] = "stream_size";

std::string EncodeHeader(const Header& header);
Result<Header> DecodeHeader(std::span<const uint8_t> bytes, const WireLimits& limits = {});

// A field's value, or `fallback` when absent or of the other type.
std::string FieldString(const Fields& fields, const std::string& name, std::string fallback = {});
int64_t FieldInt(const Fields& fields, const std::string& name, int64_t fallback = 0);

// Checks payload frame count and sizes against the limits.
Status CheckPayloadLimits(std::span<const size_t> frame_sizes, const WireLimits& limits);

// A streamed get reply's frame size and the size of each hit, in key order,
// checked against the bounds and limits; an error if the reply is malformed.
struct StreamedHits {
  uint64_t frame = 0;
  std::vector<uint64_t> sizes;  // one per kOk value
};
Result<StreamedHits> DecodeStreamedHits(const Header& reply, size_t keys, const WireLimits& limits);

// Leadership (controllers with standbys; docs/operations.md). A controller
// that is not the leader answers every request with kNotLeader and fields
// leader (the leader's endpoint, empty when it knows none) and leader_epoch.
// Every reply and command a controller sends a node carries its epoch
// (decimal, as a string); an elected leader's (its etcd key's create
// revision) also carries elected = its lease TTL in ms (> 0), and a node
// ignores an elected epoch lower than the highest it has seen: a deposed
// leader cannot command it. A deposed leader stops claiming within its
// lease, so a lower epoch that the leader a node follows keeps claiming for
// two TTLs means etcd's history was rewound (wiped, or restored from a
// snapshot): the node then follows it.
inline constexpr char kLeaderField[] = "leader";
inline constexpr char kLeaderEpochField[] = "leader_epoch";
inline constexpr char kEpochField[] = "epoch";
inline constexpr char kElectedField[] = "elected";
// A locate reply from a registry the nodes may still be filling (a new
// leadership, a restart: ClusterState::Filling): filling = 1. A key it
// names no copy of may be held anyway; a node pulling it asks where the
// key, or the peers, were last seen (node/src/puller.h).
inline constexpr char kRegistryFillingField[] = "filling";

// A reply to `request` with the same type and id and no payload.
Header ReplyTo(const Header& request, ErrorCode status = ErrorCode::kOk, std::string reason = {});

}  // namespace pikv
