// The chunk object: a self-describing header followed by the KV payload.
// Every tier stores and every node sends exactly these bytes.
//
// Layout (all integers little-endian):
//   [0, header_size)  header: fixed fields, model id, RoPE spec text, token
//                     ids, zero padding; its last 8 bytes are XXH3-64 of the
//                     header bytes before them. header_size is a multiple of
//                     64 so the payload is 64-byte aligned within the object.
//   [header_size, header_size + payload_size)  payload:
//                     kStandard: [layer][k|v][token][kv_head][head_dim]
//                     kMla:      [layer][token][1][head_dim] (latent + rope)
//                     each element of `dtype`; XXH3-64 in payload_checksum.
// A reader calls VerifyChunkObject before use; any mismatch is corruption.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "pikv/common/status.h"
#include "pikv/proto/checksum.h"
#include "pikv/proto/chunk_key.h"
#include "pikv/proto/kv_types.h"
#include "pikv/proto/owner.h"

namespace pikv {

// 2: the header carries the attention mode and the system prompt's key, so
// that every part of the key's namespace is in the object (KeyOfContent).
// 3: the tenant (part of the namespace) and the writer, in fixed fields
// (owner.h); objects of older versions are refused, so they read as misses.
// 4: the scope (KeyNamespace::scope), 16 bytes after the writer.
inline constexpr uint16_t kChunkFormatVersion = 4;
inline constexpr uint8_t kLayoutLayerKvTokenHeadDim = 1;

struct ChunkGeometry {
  uint32_t num_layers = 0;
  uint32_t num_tokens = 0;
  uint32_t num_kv_heads = 0;
  uint32_t head_dim = 0;
  DType dtype = DType::kBF16;
  KvFormat kv_format = KvFormat::kStandard;

  // Bytes of the payload this geometry implies.
  uint64_t PayloadBytes() const;
};

struct ChunkHeader {
  ChunkKey key;
  std::string model_id;
  ChunkGeometry geometry;
  // RoPE: style, rotated dims (the first `rotary_dim` of each head starting at
  // `rope_offset`; MLA puts the rope part after the latent), base, and the
  // canonical spec text (scaling included) that the device layer parses.
  RopeStyle rope_style = RopeStyle::kNeox;
  uint32_t rotary_dim = 0;
  uint32_t rope_offset = 0;
  double rope_theta = 10000.0;
  std::string rope_spec;
  KForm k_form = KForm::kRotated;
  int64_t virtual_start = 0;  // position of token 0 when k_form == kRotated
  uint8_t layout = kLayoutLayerKvTokenHeadDim;
  AttentionMode attention_mode = AttentionMode::kIsolated;
  std::optional<ChunkKey> sys_key;  // prefixed only: the system prompt's key
  std::string tenant;               // part of the namespace; "" = the default tenant
  std::optional<ChunkKey> scope;    // part of the namespace (KeyNamespace::scope)
  std::string writer;               // stamped by the node that took the put (StampWriter)
  std::vector<int32_t> tokens;
  // Filled by BuildChunkObject / ParseChunkHeader.
  uint64_t payload_size = 0;
  uint64_t payload_checksum = 0;
  uint32_t header_size = 0;
};

// Limits a header must respect before anything is sized from it.
struct ChunkLimits {
  uint32_t max_layers = 1024;
  uint32_t max_tokens = 1u << 20;
  uint32_t max_kv_heads = 1024;
  uint32_t max_head_dim = 4096;
  uint32_t max_model_id = 256;
  uint32_t max_rope_spec = 1024;
};

// Builds header + payload in one buffer. Fails if the payload size does not
// match the geometry or the header breaks a limit.
Result<std::vector<uint8_t>> BuildChunkObject(ChunkHeader header, std::span<const uint8_t> payload);

// Told, as a writer goes, how many leading bytes of the object it has
// written for good (the header first): a local store's node seals those
// while the rest is still being written (node/src/seal_ahead.h).
using WrittenFn = std::function<void(size_t object_bytes)>;

// BuildChunkObject into a caller's buffer of exactly ChunkHeaderSize +
// payload bytes (e.g. space reserved in a node's arena); the payload is
// hashed while it is copied, in cache-sized blocks (one pass over memory).
// With `checksum` false the payload is only copied and the object is left
// for its receiver to seal (SealChunkObject); `written` then hears of it
// in kWrittenStep pieces.
Status BuildChunkObjectInto(const ChunkHeader& header, std::span<const uint8_t> payload,
                            std::span<uint8_t> object, bool checksum = true,
                            const WrittenFn& written = {});
// How much a writer that reports progress writes between two reports: large
// enough that a report (a message to the node) costs nothing beside it,
// small enough that the node's hashing trails the writer closely.
inline constexpr size_t kWrittenStep = 4u << 20;

// A writer that leaves the payload checksum to the node (a local zero-copy
// store: the node hashes the bytes to verify them anyway) writes the header
// with payload checksum 0. SealChunkObject parses the header, hashes the
// payload (or takes `payload_checksum`, from a node that hashed it as it was
// written) and writes the checksum (and the header's own); returns the
// payload checksum.
Result<uint64_t> SealChunkObject(std::span<uint8_t> object, const ChunkLimits& limits = {},
                                 std::optional<uint64_t> payload_checksum = std::nullopt);

// For writers that fill the payload themselves (gather hashes it while
// copying): the header's size, and the header written into the first
// ChunkHeaderSize bytes of `object` with the payload checksum given.
size_t ChunkHeaderSize(const ChunkHeader& header);
Status WriteChunkHeader(const ChunkHeader& header, uint64_t payload_checksum,
                        std::span<uint8_t> object);

// The key namespace the header describes, and the key its namespace and
// tokens hash to: what the object's key must be (VerifyChunkObject).
KeyNamespace NamespaceOf(const ChunkHeader& header);
ChunkKey KeyOfContent(const ChunkHeader& header);

// Parses and checks the header (magic, version, header checksum, limits,
// object length == header_size + payload_size). Does not hash the payload.
Result<ChunkHeader> ParseChunkHeader(std::span<const uint8_t> object,
                                     const ChunkLimits& limits = {});

// ParseChunkHeader plus the payload checksum, and the key when given: the
// header's key must be `expected_key` and the hash of the header's own
// namespace and tokens (an object filed under another chunk's key, or made
// for another model, dtype, RoPE or attention mode, is corruption). A
// receiver that hashed the payload as it arrived (StreamingPayloadChecksum)
// passes that digest instead of a second pass over the bytes.
Status VerifyChunkObject(std::span<const uint8_t> object, const ChunkKey* expected_key = nullptr,
                         const ChunkLimits& limits = {},
                         std::optional<uint64_t> payload_checksum = std::nullopt);

// The payload checksum of an object whose bytes are appended in order, as a
// streamed transfer delivers them: the payload starts where the header (its
// first 16 bytes) says. A wrong header only yields a digest that fails
// verification.
class StreamingPayloadChecksum {
 public:
  StreamingPayloadChecksum();
  ~StreamingPayloadChecksum();
  void Append(std::span<const uint8_t> bytes);
  // Copies `bytes` to `dst` (StreamCopy: past the caches) and appends them,
  // a 1 MiB tile at a time, each hashed while the copy has just read it
  // into cache: memory is read once for both, where copying then hashing a
  // large object reads it twice.
  void CopyIn(uint8_t* dst, std::span<const uint8_t> bytes);
  uint64_t Digest() const;
  uint64_t appended() const { return seen_; }
  // Where the payload started, as bytes 12..16 said when they were appended.
  uint64_t payload_offset() const { return header_size_; }

 private:
  Xxh3Stream payload_;
  uint64_t seen_ = 0;
  uint64_t header_size_ = 0;
};

// The owner in an object's fixed header fields, read without parsing or
// verifying the rest (the object was verified when a tier admitted it);
// nullopt when the bytes are not a current-format header. An unstamped
// writer reads as kUnknownWriter.
std::optional<Owner> ReadOwner(std::span<const uint8_t> object);
// ReadOwner interned: kUnknownOwner when it does not read or the owner
// table is full.
OwnerId ReadOwnerId(std::span<const uint8_t> object);
// How many leading bytes of an object ReadOwner needs.
inline constexpr size_t kOwnerPrefixBytes = 248;
// Writes `writer` into the header of a parsed-and-intact object and seals
// the header again; the payload is not touched. Refuses a header whose own
// checksum does not hold (it must not be made to look intact).
Status StampWriter(std::span<uint8_t> object, std::string_view writer);

std::span<const uint8_t> ChunkPayload(std::span<const uint8_t> object, const ChunkHeader& header);

uint64_t PayloadChecksum(std::span<const uint8_t> payload);

}  // namespace pikv
