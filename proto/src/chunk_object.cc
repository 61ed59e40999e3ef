#include "pikv/proto/chunk_object.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>

#include "pikv/common/stream_copy.h"
#include "pikv/proto/checksum.h"
#include "pikv/proto/endian.h"

namespace pikv {

namespace {

constexpr char kMagic[8] = {'P', 'I', 'K', 'V', 'C', 'H', 'N', 'K'};
constexpr size_t kTenantAt = 120;  // owner.h: fixed, NUL-padded identity fields
constexpr size_t kWriterAt = kTenantAt + 64;
static_assert(kWriterAt + 64 == kOwnerPrefixBytes);  // the owner is read from this prefix
constexpr size_t kScopeAt = kOwnerPrefixBytes;       // 16 bytes; byte 39 says if set
constexpr size_t kFixedBytes = kScopeAt + 16;        // fields before model id / spec / tokens
constexpr size_t kChecksumBytes = 8;
constexpr size_t kAlign = 64;

size_t HeaderSizeFor(size_t model_len, size_t spec_len, size_t tokens) {
  size_t raw = kFixedBytes + model_len + spec_len + 4 * tokens + kChecksumBytes;
  return (raw + kAlign - 1) / kAlign * kAlign;
}

bool KnownDType(uint8_t v) { return v >= 1 && v <= 3; }
bool KnownFormat(uint8_t v) { return v == 1 || v == 2; }
bool KnownKForm(uint8_t v) { return v == 1 || v == 2; }
bool KnownStyle(uint8_t v) { return v == 1 || v == 2; }
bool KnownMode(uint8_t v) { return v == 1 || v == 2; }

Status CheckGeometry(const ChunkHeader& h, const ChunkLimits& lim) {
  const ChunkGeometry& g = h.geometry;
  if (g.num_layers == 0 || g.num_layers > lim.max_layers)
    return InvalidArgument("num_layers out of range");
  if (g.num_tokens == 0 || g.num_tokens > lim.max_tokens)
    return InvalidArgument("num_tokens out of range");
  if (g.num_kv_heads == 0 || g.num_kv_heads > lim.max_kv_heads)
    return InvalidArgument("num_kv_heads out of range");
  if (g.head_dim == 0 || g.head_dim > lim.max_head_dim)
    return InvalidArgument("head_dim out of range");
  if (g.kv_format == KvFormat::kMla && g.num_kv_heads != 1)
    return InvalidArgument("MLA chunks have one KV head");
  if (h.rotary_dim > g.head_dim || h.rope_offset > g.head_dim - h.rotary_dim)
    return InvalidArgument("rotary dims exceed head_dim");
  if (h.rotary_dim % 2 != 0) return InvalidArgument("rotary_dim must be even");
  if (h.tokens.size() != g.num_tokens)
    return InvalidArgument("token id count differs from num_tokens");
  if (h.model_id.size() > lim.max_model_id) return InvalidArgument("model_id too long");
  if (h.rope_spec.size() > lim.max_rope_spec) return InvalidArgument("rope_spec too long");
  if (h.layout != kLayoutLayerKvTokenHeadDim) return Unsupported("unknown payload layout");
  if (h.sys_key && h.attention_mode != AttentionMode::kPrefixed)
    return InvalidArgument("only a prefixed chunk has a system prompt key");
  if (!IsTenantName(h.tenant)) return InvalidArgument("tenant is not an identity name");
  if (!h.writer.empty() && !IsIdentityName(h.writer))
    return InvalidArgument("writer is not an identity name");
  return Status::Ok();
}

// A NUL-padded identity field (ParseChunkHeader checks what it names).
std::string FixedField(const uint8_t* field) {
  const auto* text = reinterpret_cast<const char*>(field);
  return std::string(text, strnlen(text, 64));
}

}  // namespace

uint64_t ChunkGeometry::PayloadBytes() const {
  uint64_t planes = kv_format == KvFormat::kMla ? 1 : 2;
  return uint64_t{num_layers} * planes * num_tokens * num_kv_heads * head_dim * DTypeSize(dtype);
}

uint64_t PayloadChecksum(std::span<const uint8_t> payload) { return Xxh3(payload); }

size_t ChunkHeaderSize(const ChunkHeader& h) {
  return HeaderSizeFor(h.model_id.size(), h.rope_spec.size(), h.tokens.size());
}

Status WriteChunkHeader(const ChunkHeader& h, uint64_t payload_checksum,
                        std::span<uint8_t> object) {
  if (Status s = CheckGeometry(h, ChunkLimits{}); !s.ok()) return s;
  const size_t header_size = ChunkHeaderSize(h);
  const uint64_t payload_size = h.geometry.PayloadBytes();
  if (object.size() != header_size + payload_size) {
    return InvalidArgument("object buffer is " + std::to_string(object.size()) +
                           " bytes, header and payload need " +
                           std::to_string(header_size + payload_size));
  }
  uint8_t* p = object.data();
  std::memset(p, 0, header_size);
  std::memcpy(p, kMagic, 8);
  StoreLE<uint16_t>(p + 8, kChunkFormatVersion);
  StoreLE<uint32_t>(p + 12, static_cast<uint32_t>(header_size));
  auto kb = h.key.Bytes();
  std::memcpy(p + 16, kb.data(), 16);
  p[32] = static_cast<uint8_t>(h.geometry.dtype);
  p[33] = static_cast<uint8_t>(h.geometry.kv_format);
  p[34] = static_cast<uint8_t>(h.k_form);
  p[35] = static_cast<uint8_t>(h.rope_style);
  p[36] = h.layout;
  p[37] = static_cast<uint8_t>(h.attention_mode);
  p[38] = h.sys_key ? 1 : 0;
  p[39] = h.scope ? 1 : 0;
  StoreLE<uint32_t>(p + 40, h.geometry.num_layers);
  StoreLE<uint32_t>(p + 44, h.geometry.num_tokens);
  StoreLE<uint32_t>(p + 48, h.geometry.num_kv_heads);
  StoreLE<uint32_t>(p + 52, h.geometry.head_dim);
  StoreLE<uint32_t>(p + 56, h.rotary_dim);
  StoreLE<uint32_t>(p + 60, h.rope_offset);
  StoreLE<double>(p + 64, h.rope_theta);
  StoreLE<int64_t>(p + 72, h.virtual_start);
  StoreLE<uint64_t>(p + 80, payload_size);
  StoreLE<uint64_t>(p + 88, payload_checksum);
  StoreLE<uint16_t>(p + 96, static_cast<uint16_t>(h.model_id.size()));
  StoreLE<uint16_t>(p + 98, static_cast<uint16_t>(h.rope_spec.size()));
  if (h.sys_key) {
    auto sb = h.sys_key->Bytes();
    std::memcpy(p + 100, sb.data(), 16);
  }
  std::memcpy(p + kTenantAt, h.tenant.data(), h.tenant.size());
  std::memcpy(p + kWriterAt, h.writer.data(), h.writer.size());
  if (h.scope) {
    auto sb = h.scope->Bytes();
    std::memcpy(p + kScopeAt, sb.data(), 16);
  }
  size_t off = kFixedBytes;
  std::memcpy(p + off, h.model_id.data(), h.model_id.size());
  off += h.model_id.size();
  std::memcpy(p + off, h.rope_spec.data(), h.rope_spec.size());
  off += h.rope_spec.size();
  for (int32_t t : h.tokens) {
    StoreLE<int32_t>(p + off, t);
    off += 4;
  }
  StoreLE<uint64_t>(p + header_size - kChecksumBytes, XXH3_64bits(p, header_size - kChecksumBytes));
  return Status::Ok();
}

Status BuildChunkObjectInto(const ChunkHeader& h, std::span<const uint8_t> payload,
                            std::span<uint8_t> object, bool checksum, const WrittenFn& written) {
  if (Status s = CheckGeometry(h, ChunkLimits{}); !s.ok()) return s;
  if (payload.size() != h.geometry.PayloadBytes()) {
    return InvalidArgument("payload is " + std::to_string(payload.size()) +
                           " bytes, geometry needs " + std::to_string(h.geometry.PayloadBytes()));
  }
  const size_t header_size = ChunkHeaderSize(h);
  if (object.size() != header_size + payload.size()) {
    return InvalidArgument("object buffer is " + std::to_string(object.size()) +
                           " bytes, header and payload need " +
                           std::to_string(header_size + payload.size()));
  }
  uint8_t* dst = object.data() + header_size;
  if (!checksum) {
    if (Status s = WriteChunkHeader(h, 0, object); !s.ok()) return s;
    for (size_t done = 0; done < payload.size(); done += kWrittenStep) {
      const size_t n = std::min(kWrittenStep, payload.size() - done);
      std::memcpy(dst + done, payload.data() + done, n);
      if (written) written(header_size + done + n);
    }
    return Status::Ok();
  }
  // Hash each block right after copying it, while it is still in cache.
  constexpr size_t kBlock = 256u << 10;
  Xxh3Stream digest;
  for (size_t done = 0; done < payload.size(); done += kBlock) {
    const size_t n = std::min(kBlock, payload.size() - done);
    std::memcpy(dst + done, payload.data() + done, n);
    digest.Update({dst + done, n});
  }
  return WriteChunkHeader(h, digest.Digest(), object);
}

Result<std::vector<uint8_t>> BuildChunkObject(ChunkHeader h, std::span<const uint8_t> payload) {
  if (payload.size() != h.geometry.PayloadBytes()) {
    return InvalidArgument("payload is " + std::to_string(payload.size()) +
                           " bytes, geometry needs " + std::to_string(h.geometry.PayloadBytes()));
  }
  if (Status s = CheckGeometry(h, ChunkLimits{}); !s.ok()) return s;
  std::vector<uint8_t> out(ChunkHeaderSize(h) + payload.size());
  if (Status s = BuildChunkObjectInto(h, payload, out); !s.ok()) return s;
  return out;
}

Result<uint64_t> SealChunkObject(std::span<uint8_t> object, const ChunkLimits& limits,
                                 std::optional<uint64_t> payload_checksum) {
  auto h = ParseChunkHeader(object, limits);
  if (!h.ok()) return h.status();
  const uint64_t digest = payload_checksum ? *payload_checksum : Xxh3(ChunkPayload(object, *h));
  uint8_t* p = object.data();
  StoreLE<uint64_t>(p + 88, digest);
  StoreLE<uint64_t>(p + h->header_size - kChecksumBytes,
                    XXH3_64bits(p, h->header_size - kChecksumBytes));
  return digest;
}

Result<ChunkHeader> ParseChunkHeader(std::span<const uint8_t> obj, const ChunkLimits& lim) {
  if (obj.size() < kFixedBytes + kChecksumBytes) return Corruption("object shorter than a header");
  const uint8_t* p = obj.data();
  if (std::memcmp(p, kMagic, 8) != 0) return Corruption("bad magic");
  if (LoadLE<uint16_t>(p + 8) != kChunkFormatVersion)
    return Unsupported("unknown chunk format version");
  ChunkHeader h;
  h.header_size = LoadLE<uint32_t>(p + 12);
  if (h.header_size % kAlign != 0 || h.header_size < kFixedBytes + kChecksumBytes ||
      h.header_size > obj.size()) {
    return Corruption("bad header size");
  }
  if (LoadLE<uint64_t>(p + h.header_size - kChecksumBytes) !=
      XXH3_64bits(p, h.header_size - kChecksumBytes)) {
    return Corruption("header checksum mismatch");
  }
  if (!KnownDType(p[32]) || !KnownFormat(p[33]) || !KnownKForm(p[34]) || !KnownStyle(p[35]) ||
      !KnownMode(p[37]) || p[38] > 1 || p[39] > 1) {
    return Unsupported("unknown dtype, format, K form, RoPE style or attention mode");
  }
  h.key = ChunkKey::FromBytes(p + 16);
  h.geometry.dtype = static_cast<DType>(p[32]);
  h.geometry.kv_format = static_cast<KvFormat>(p[33]);
  h.k_form = static_cast<KForm>(p[34]);
  h.rope_style = static_cast<RopeStyle>(p[35]);
  h.layout = p[36];
  h.attention_mode = static_cast<AttentionMode>(p[37]);
  if (p[38] == 1) h.sys_key = ChunkKey::FromBytes(p + 100);
  h.tenant = FixedField(p + kTenantAt);
  h.writer = FixedField(p + kWriterAt);
  if (p[39] == 1) h.scope = ChunkKey::FromBytes(p + kScopeAt);
  h.geometry.num_layers = LoadLE<uint32_t>(p + 40);
  h.geometry.num_tokens = LoadLE<uint32_t>(p + 44);
  h.geometry.num_kv_heads = LoadLE<uint32_t>(p + 48);
  h.geometry.head_dim = LoadLE<uint32_t>(p + 52);
  h.rotary_dim = LoadLE<uint32_t>(p + 56);
  h.rope_offset = LoadLE<uint32_t>(p + 60);
  h.rope_theta = LoadLE<double>(p + 64);
  h.virtual_start = LoadLE<int64_t>(p + 72);
  h.payload_size = LoadLE<uint64_t>(p + 80);
  h.payload_checksum = LoadLE<uint64_t>(p + 88);
  const size_t model_len = LoadLE<uint16_t>(p + 96);
  const size_t spec_len = LoadLE<uint16_t>(p + 98);
  if (model_len > lim.max_model_id || spec_len > lim.max_rope_spec ||
      h.geometry.num_tokens > lim.max_tokens) {
    return Corruption("header field over its limit");
  }
  if (HeaderSizeFor(model_len, spec_len, h.geometry.num_tokens) != h.header_size) {
    return Corruption("header size disagrees with its fields");
  }
  size_t off = kFixedBytes;
  h.model_id.assign(reinterpret_cast<const char*>(p + off), model_len);
  off += model_len;
  h.rope_spec.assign(reinterpret_cast<const char*>(p + off), spec_len);
  off += spec_len;
  h.tokens.resize(h.geometry.num_tokens);
  for (auto& t : h.tokens) {
    t = LoadLE<int32_t>(p + off);
    off += 4;
  }
  if (Status s = CheckGeometry(h, lim); !s.ok()) return Corruption(s.message());
  if (h.payload_size != h.geometry.PayloadBytes())
    return Corruption("payload size disagrees with geometry");
  if (obj.size() != h.header_size + h.payload_size) {
    return Corruption("object is " + std::to_string(obj.size()) + " bytes, header says " +
                      std::to_string(h.header_size + h.payload_size));
  }
  return h;
}

Status VerifyChunkObject(std::span<const uint8_t> obj, const ChunkKey* expected_key,
                         const ChunkLimits& lim, std::optional<uint64_t> payload_checksum) {
  auto h = ParseChunkHeader(obj, lim);
  if (!h.ok()) return h.status();
  if (expected_key && h->key != *expected_key)
    return Corruption("object key differs from its address");
  if (expected_key && KeyOfContent(*h) != h->key)
    return Corruption("object key is not the hash of its own namespace and tokens");
  const uint64_t actual =
      payload_checksum ? *payload_checksum : PayloadChecksum(ChunkPayload(obj, *h));
  if (actual != h->payload_checksum) return Corruption("payload checksum mismatch");
  return Status::Ok();
}

StreamingPayloadChecksum::StreamingPayloadChecksum() = default;
StreamingPayloadChecksum::~StreamingPayloadChecksum() = default;

void StreamingPayloadChecksum::Append(std::span<const uint8_t> bytes) {
  // The header's size (bytes 12..16) says where the payload starts.
  for (size_t i = 0; i < bytes.size() && seen_ + i < 16; ++i) {
    if (seen_ + i >= 12) header_size_ |= uint64_t{bytes[i]} << (8 * (seen_ + i - 12));
  }
  const uint64_t end = seen_ + bytes.size();
  if (seen_ >= 16 || end >= 16) {
    const uint64_t from = std::max(seen_, header_size_);
    if (end > from) payload_.Update(bytes.subspan(from - seen_, end - from));
  }
  seen_ = end;
}

void StreamingPayloadChecksum::CopyIn(uint8_t* dst, std::span<const uint8_t> bytes) {
  // Small enough to stay in L2 between the copy and the hash; large enough
  // that StreamCopy's closing fence (which waits for the streamed stores to
  // drain) is rare: in 64 KiB tiles, 512 MiB streamed puts measured 6-9 %
  // slower in two bench/peers runs than one fence per 1 MiB frame.
  constexpr size_t kTile = 1 << 20;
  for (size_t off = 0; off < bytes.size(); off += kTile) {
    const auto tile = bytes.subspan(off, std::min(kTile, bytes.size() - off));
    StreamCopy(dst + off, tile.data(), tile.size());
    Append(tile);
  }
}

uint64_t StreamingPayloadChecksum::Digest() const { return payload_.Digest(); }

KeyNamespace NamespaceOf(const ChunkHeader& h) {
  return {h.model_id,       h.geometry.kv_format,
          h.geometry.dtype, h.rope_spec,
          h.attention_mode, h.sys_key,
          h.tenant,         h.scope};
}

std::optional<Owner> ReadOwner(std::span<const uint8_t> obj) {
  if (obj.size() < kOwnerPrefixBytes || std::memcmp(obj.data(), kMagic, 8) != 0 ||
      LoadLE<uint16_t>(obj.data() + 8) != kChunkFormatVersion)
    return std::nullopt;
  Owner owner{FixedField(obj.data() + kTenantAt), FixedField(obj.data() + kWriterAt)};
  if (!IsTenantName(owner.tenant)) return std::nullopt;
  if (owner.writer.empty()) owner.writer = kUnknownWriter;
  if (!IsIdentityName(owner.writer)) return std::nullopt;
  return owner;
}

OwnerId ReadOwnerId(std::span<const uint8_t> obj) {
  const std::optional<Owner> owner = ReadOwner(obj);
  return owner ? InternOwner(*owner).value_or(kUnknownOwner) : kUnknownOwner;
}

Status StampWriter(std::span<uint8_t> obj, std::string_view writer) {
  if (!IsIdentityName(writer)) return InvalidArgument("writer is not an identity name");
  if (obj.size() < kFixedBytes + kChecksumBytes || std::memcmp(obj.data(), kMagic, 8) != 0)
    return Corruption("not a chunk object");
  if (LoadLE<uint16_t>(obj.data() + 8) != kChunkFormatVersion)
    return Unsupported("unknown chunk format version");
  uint8_t* p = obj.data();
  const uint32_t header_size = LoadLE<uint32_t>(p + 12);
  if (header_size % kAlign != 0 || header_size < kFixedBytes + kChecksumBytes ||
      header_size > obj.size())
    return Corruption("bad header size");
  uint8_t* sum = p + header_size - kChecksumBytes;
  if (LoadLE<uint64_t>(sum) != XXH3_64bits(p, header_size - kChecksumBytes))
    return Corruption("header checksum mismatch");
  std::memset(p + kWriterAt, 0, 64);
  std::memcpy(p + kWriterAt, writer.data(), writer.size());
  StoreLE<uint64_t>(sum, XXH3_64bits(p, header_size - kChecksumBytes));
  return Status::Ok();
}

ChunkKey KeyOfContent(const ChunkHeader& h) { return MakeChunkKey(NamespaceOf(h), h.tokens); }

std::span<const uint8_t> ChunkPayload(std::span<const uint8_t> obj, const ChunkHeader& h) {
  return obj.subspan(h.header_size, h.payload_size);
}

}  // namespace pikv
