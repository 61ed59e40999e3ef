#include "pikv/proto/chunk_key.h"

#include <xxhash.h>

#include <cstring>

#include "pikv/proto/endian.h"

namespace pikv {

namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void AppendField(std::string& out, std::string_view field) {
  uint32_t n = static_cast<uint32_t>(field.size());
  char len[4];
  StoreLE32(len, n);
  out.append(len, 4);
  out.append(field);
}

}  // namespace

std::string ChunkKey::Hex() const {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(32, '0');
  for (int i = 0; i < 16; ++i) {
    s[i] = kDigits[(hi >> (60 - 4 * i)) & 0xf];
    s[16 + i] = kDigits[(lo >> (60 - 4 * i)) & 0xf];
  }
  return s;
}

std::optional<ChunkKey> ChunkKey::FromHex(std::string_view hex) {
  if (hex.size() != 32) return std::nullopt;
  ChunkKey k;
  for (int i = 0; i < 32; ++i) {
    int d = HexDigit(hex[i]);
    if (d < 0) return std::nullopt;
    uint64_t& half = i < 16 ? k.hi : k.lo;
    half = (half << 4) | static_cast<uint64_t>(d);
  }
  return k;
}

std::array<uint8_t, 16> ChunkKey::Bytes() const {
  std::array<uint8_t, 16> b{};
  for (int i = 0; i < 8; ++i) {
    b[i] = static_cast<uint8_t>(hi >> (56 - 8 * i));
    b[8 + i] = static_cast<uint8_t>(lo >> (56 - 8 * i));
  }
  return b;
}

ChunkKey ChunkKey::FromBytes(const uint8_t* bytes16) {
  ChunkKey k;
  for (int i = 0; i < 8; ++i) {
    k.hi = (k.hi << 8) | bytes16[i];
    k.lo = (k.lo << 8) | bytes16[8 + i];
  }
  return k;
}

std::string KeyNamespace::CanonicalBytes() const {
  std::string out = "pikv-ns-v1";
  AppendField(out, model_id);
  AppendField(out, KvFormatName(kv_format));
  AppendField(out, DTypeName(dtype));
  AppendField(out, rope_signature);
  AppendField(out, AttentionModeName(attention_mode));
  if (attention_mode == AttentionMode::kPrefixed && sys_key) {
    AppendField(out, sys_key->Hex());
  } else {
    AppendField(out, "");
  }
  if (!tenant.empty()) AppendField(out, "tenant:" + tenant);
  if (scope) AppendField(out, "scope:" + scope->Hex());
  return out;
}

ChunkKey MakeChunkKey(const KeyNamespace& ns, std::span<const int32_t> tokens) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_128bits_reset(state);
  std::string prefix = ns.CanonicalBytes();
  XXH3_128bits_update(state, prefix.data(), prefix.size());
  if constexpr (std::endian::native == std::endian::little) {
    XXH3_128bits_update(state, tokens.data(), tokens.size_bytes());
  } else {
    for (int32_t t : tokens) {
      char le[4];
      StoreLE32(le, static_cast<uint32_t>(t));
      XXH3_128bits_update(state, le, 4);
    }
  }
  XXH128_hash_t h = XXH3_128bits_digest(state);
  XXH3_freeState(state);
  return ChunkKey{h.high64, h.low64};
}

ChunkKey PrefixKeyAt(const ChunkKey& prefix, int64_t distance) {
  if (distance == 0) return prefix;
  std::string bytes = "pikv-prefix-at-v1";
  const auto key = prefix.Bytes();
  bytes.append(reinterpret_cast<const char*>(key.data()), key.size());
  char le[8];
  StoreLE(le, static_cast<uint64_t>(distance));
  bytes.append(le, 8);
  const XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
  return ChunkKey{h.high64, h.low64};
}

}  // namespace pikv
