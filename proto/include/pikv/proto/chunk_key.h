// ChunkKey: the content address of a chunk's KV.
//
// key = XXH3-128( namespace bytes || token ids as little-endian int32 ).
// The namespace pins everything the KV depends on besides the tokens: model,
// KV format, dtype, the RoPE signature, the attention mode and, in
// prefixed mode, the system prompt's key; and the tenant, so that equal
// documents of two tenants are two keys. No position goes into the key.
// Printed as 32 lowercase hex digits (high 64 bits first).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "pikv/proto/kv_types.h"

namespace pikv {

struct ChunkKey {
  uint64_t hi = 0;
  uint64_t lo = 0;

  std::string Hex() const;
  static std::optional<ChunkKey> FromHex(std::string_view hex);

  // 16 bytes, big-endian (so byte order matches the hex form); used on the
  // wire and as the RocksDB key.
  std::array<uint8_t, 16> Bytes() const;
  static ChunkKey FromBytes(const uint8_t* bytes16);

  friend bool operator==(const ChunkKey&, const ChunkKey&) = default;
  friend auto operator<=>(const ChunkKey&, const ChunkKey&) = default;
};

struct ChunkKeyHash {
  size_t operator()(const ChunkKey& k) const {
    return static_cast<size_t>(k.lo ^ (k.hi * 0x9e3779b97f4a7c15ULL));
  }
};

// What a chunk's KV depends on besides its tokens.
struct KeyNamespace {
  std::string model_id;
  KvFormat kv_format = KvFormat::kStandard;
  DType dtype = DType::kBF16;
  // Canonical text of the RoPE spec (style, rotary dim, base, scaling).
  std::string rope_signature;
  AttentionMode attention_mode = AttentionMode::kIsolated;
  // Only in prefixed mode: the key of the system prompt the chunk saw, as
  // PrefixKeyAt folds in how far after it the chunk was computed.
  std::optional<ChunkKey> sys_key;
  // The tenant (owner.h); "" = the default tenant, which adds nothing to the
  // bytes (keys of the default tenant are those of a cluster without tenants).
  std::string tenant;
  // A sub-namespace within the tenant (none: adds nothing to the bytes): the
  // vLLM connector's keyed hash of a request's cache salt and LoRA adapter,
  // so that requests vLLM keeps apart never share a chunk.
  std::optional<ChunkKey> scope;

  // Unambiguous byte encoding (length-prefixed fields) that the key hashes.
  std::string CanonicalBytes() const;
};

ChunkKey MakeChunkKey(const KeyNamespace& ns, std::span<const int32_t> tokens);

// The context key of a prefixed-mode chunk computed `distance` tokens after
// the end of the prefix whose key is `prefix` (nothing attended in the gap;
// client/distance_buckets.h): `prefix` itself at distance 0, so a chunk
// computed right after its prefix keeps the key it always had; else a hash
// of both. It takes the system prompt key's place in the namespace and the
// object header, so nodes check such chunks with no field of their own.
ChunkKey PrefixKeyAt(const ChunkKey& prefix, int64_t distance);

}  // namespace pikv

template <>
struct std::hash<pikv::ChunkKey> : pikv::ChunkKeyHash {};
