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

// Each type's number, name and request row are declared once, in
// message_types.def.
enum class MsgType : uint16_t {
#define PIKV_MESSAGE(type, number, name) type = number,
#define PIKV_REQUEST(type, number, name, ...) type = number,
#include "pikv/proto/message_types.def"
#undef PIKV_MESSAGE
#undef PIKV_REQUEST
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
// A batch of whole objects is put as several messages of at most this many
// bytes (or one object each), sent together, so the node stores the first
// while the rest are still arriving (bench/peers, batches of 32 x 1 MiB:
// 3.10 GB/s against 2.64 as one message, docs/benchmarks.md).
inline constexpr uint64_t kPutMessageBytes = 1 << 20;
inline constexpr int64_t kMaxStreamFrame = 64 << 20;
inline constexpr int64_t kStreamStallMs = 5000;

// A get's asked frame size, or a streamed reply's or put's (stream_frame);
// 0 where absent or not a number. Checked against the bounds where used.
int64_t StreamFrameOf(const Header& h);
bool HasStreamFrame(const Header& h);  // the field is there, whatever its value
void SetStreamFrame(int64_t frame, Header& h);
// A streamed put's start: its frame size and the object's size.
struct StreamedPut {
  int64_t frame = 0;
  int64_t size = 0;
  friend bool operator==(const StreamedPut&, const StreamedPut&) = default;
};
void EncodeStreamedPut(const StreamedPut& put, Header& request);
StreamedPut DecodeStreamedPut(const Header& request);  // a missing size reads as 0

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
// that is not the leader answers every request with kNotLeader, naming the
// leader it knows of (control_wire.h's NotLeader). Every reply and command a
// controller sends a node carries its epoch, and an elected leader's also
// its lease (control_wire.h's ControllerEpoch); a node ignores an elected
// epoch lower than the highest it has seen: a deposed leader cannot command
// it. A deposed leader stops claiming within its lease, so a lower epoch
// that the leader a node follows keeps claiming for two TTLs means etcd's
// history was rewound (wiped, or restored from a snapshot): the node then
// follows it.

// A reply to `request` with the same type and id and no payload.
Header ReplyTo(const Header& request, ErrorCode status = ErrorCode::kOk, std::string reason = {});

}  // namespace pikv
