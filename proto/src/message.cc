#include "pikv/proto/message.h"

#include <msgpack.hpp>

#include "pikv/common/enum_names.h"

namespace pikv {

namespace {

constexpr size_t kHeaderElements = 8;
constexpr char kStreamFrame[] = "stream_frame", kStreamSize[] = "stream_size";

Status Malformed(const std::string& what) { return ProtocolError("malformed header: " + what); }

bool AsInt(const msgpack::object& o, int64_t& out) {
  if (o.type == msgpack::type::POSITIVE_INTEGER) {
    if (o.via.u64 > static_cast<uint64_t>(INT64_MAX)) return false;
    out = static_cast<int64_t>(o.via.u64);
    return true;
  }
  if (o.type == msgpack::type::NEGATIVE_INTEGER) {
    out = o.via.i64;
    return true;
  }
  return false;
}

bool AsUint(const msgpack::object& o, uint64_t& out) {
  if (o.type != msgpack::type::POSITIVE_INTEGER) return false;
  out = o.via.u64;
  return true;
}

// Two rows of message_types.def may not share a number.
constexpr bool NumbersDistinct() {
  constexpr uint16_t kNumbers[] = {
#define PIKV_MESSAGE(type, number, name) number,
#define PIKV_REQUEST(type, number, name, ...) number,
#include "pikv/proto/message_types.def"
#undef PIKV_MESSAGE
#undef PIKV_REQUEST
  };
  for (size_t i = 0; i < std::size(kNumbers); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (kNumbers[i] == kNumbers[j]) return false;
    }
  }
  return true;
}
static_assert(NumbersDistinct(), "message_types.def gives a number twice");

}  // namespace

std::string_view MsgTypeName(MsgType t) {
  static constexpr EnumName<MsgType> kNames[] = {
#define PIKV_MESSAGE(type, number, name) {MsgType::type, name},
#define PIKV_REQUEST(type, number, name, ...) {MsgType::type, name},
#include "pikv/proto/message_types.def"
#undef PIKV_MESSAGE
#undef PIKV_REQUEST
  };
  return NameOf(kNames, t, "unknown");
}

std::string EncodeHeader(const Header& h) {
  msgpack::sbuffer buf(256 + 16 * h.keys.size() + 9 * h.values.size());
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_array(kHeaderElements);
  pk.pack_uint16(h.version);
  pk.pack_uint16(static_cast<uint16_t>(h.type));
  pk.pack_uint64(h.request_id);
  pk.pack_int32(static_cast<int32_t>(h.status));
  pk.pack_str(static_cast<uint32_t>(h.reason.size()));
  pk.pack_str_body(h.reason.data(), static_cast<uint32_t>(h.reason.size()));
  pk.pack_bin(static_cast<uint32_t>(16 * h.keys.size()));
  for (const ChunkKey& k : h.keys) {
    auto b = k.Bytes();
    pk.pack_bin_body(reinterpret_cast<const char*>(b.data()), 16);
  }
  pk.pack_array(static_cast<uint32_t>(h.values.size()));
  for (int64_t v : h.values) pk.pack_int64(v);
  pk.pack_map(static_cast<uint32_t>(h.fields.size()));
  for (const auto& [name, value] : h.fields) {
    pk.pack(name);
    if (const auto* i = std::get_if<int64_t>(&value)) {
      pk.pack_int64(*i);
    } else {
      pk.pack(std::get<std::string>(value));
    }
  }
  return std::string(buf.data(), buf.size());
}

Result<Header> DecodeHeader(std::span<const uint8_t> bytes, const WireLimits& lim) {
  if (bytes.empty()) return Malformed("empty header frame");
  if (bytes.size() > lim.max_header_bytes) {
    return TooLarge("header frame of " + std::to_string(bytes.size()) + " bytes exceeds " +
                    std::to_string(lim.max_header_bytes));
  }
  msgpack::unpack_limit limit(/*array=*/std::max(lim.max_values, kHeaderElements + 8),
                              /*map=*/lim.max_fields, /*str=*/lim.max_string,
                              /*bin=*/16 * lim.max_batch, /*ext=*/0, /*depth=*/3);
  msgpack::object_handle oh;
  size_t offset = 0;
  try {
    oh = msgpack::unpack(reinterpret_cast<const char*>(bytes.data()), bytes.size(), offset, nullptr,
                         nullptr, limit);
  } catch (const msgpack::size_overflow& e) {
    return TooLarge(std::string("header element over its limit: ") + e.what());
  } catch (const std::exception& e) {
    return Malformed(e.what());
  }
  if (offset != bytes.size()) return Malformed("trailing bytes after header");
  const msgpack::object& root = oh.get();
  if (root.type != msgpack::type::ARRAY || root.via.array.size < kHeaderElements) {
    return Malformed("not an array of " + std::to_string(kHeaderElements) + " elements");
  }
  const msgpack::object* e = root.via.array.ptr;
  Header h;
  uint64_t u = 0;
  int64_t i = 0;
  if (!AsUint(e[0], u) || u > UINT16_MAX) return Malformed("version");
  h.version = static_cast<uint16_t>(u);
  if (h.version != kProtocolVersion) {
    return Unsupported("protocol version " + std::to_string(h.version) + ", this build speaks " +
                       std::to_string(kProtocolVersion));
  }
  if (!AsUint(e[1], u) || u > UINT16_MAX) return Malformed("type");
  h.type = static_cast<MsgType>(u);
  if (!AsUint(e[2], h.request_id)) return Malformed("request id");
  if (!AsInt(e[3], i) || i < INT32_MIN || i > INT32_MAX) return Malformed("status");
  h.status = static_cast<ErrorCode>(i);
  if (e[4].type != msgpack::type::STR) return Malformed("reason");
  h.reason.assign(e[4].via.str.ptr, e[4].via.str.size);
  if (e[5].type != msgpack::type::BIN || e[5].via.bin.size % 16 != 0) return Malformed("keys");
  const size_t nkeys = e[5].via.bin.size / 16;
  if (nkeys > lim.max_batch) return TooLarge("batch of " + std::to_string(nkeys) + " keys");
  h.keys.reserve(nkeys);
  for (size_t k = 0; k < nkeys; ++k) {
    h.keys.push_back(
        ChunkKey::FromBytes(reinterpret_cast<const uint8_t*>(e[5].via.bin.ptr) + 16 * k));
  }
  if (e[6].type != msgpack::type::ARRAY) return Malformed("values");
  h.values.reserve(e[6].via.array.size);
  for (uint32_t k = 0; k < e[6].via.array.size; ++k) {
    if (!AsInt(e[6].via.array.ptr[k], i)) return Malformed("value " + std::to_string(k));
    h.values.push_back(i);
  }
  if (e[7].type != msgpack::type::MAP) return Malformed("fields");
  for (uint32_t k = 0; k < e[7].via.map.size; ++k) {
    const msgpack::object_kv& kv = e[7].via.map.ptr[k];
    if (kv.key.type != msgpack::type::STR) return Malformed("field name");
    std::string name(kv.key.via.str.ptr, kv.key.via.str.size);
    if (kv.val.type == msgpack::type::STR) {
      h.fields[name] = std::string(kv.val.via.str.ptr, kv.val.via.str.size);
    } else if (AsInt(kv.val, i)) {
      h.fields[name] = i;
    } else {
      return Malformed("field " + name);
    }
  }
  return h;
}

std::string FieldString(const Fields& fields, const std::string& name, std::string fallback) {
  auto it = fields.find(name);
  if (it == fields.end()) return fallback;
  const auto* s = std::get_if<std::string>(&it->second);
  return s ? *s : fallback;
}

int64_t FieldInt(const Fields& fields, const std::string& name, int64_t fallback) {
  auto it = fields.find(name);
  if (it == fields.end()) return fallback;
  const auto* v = std::get_if<int64_t>(&it->second);
  return v ? *v : fallback;
}

Status CheckPayloadLimits(std::span<const size_t> sizes, const WireLimits& lim) {
  if (sizes.size() > lim.max_batch) {
    return TooLarge(std::to_string(sizes.size()) + " payload frames exceed " +
                    std::to_string(lim.max_batch));
  }
  uint64_t total = 0;
  for (size_t s : sizes) {
    if (s > lim.max_payload_bytes) {
      return TooLarge("payload frame of " + std::to_string(s) + " bytes exceeds " +
                      std::to_string(lim.max_payload_bytes));
    }
    total += s;
  }
  if (total > lim.max_message_payload_bytes) return TooLarge("message payload exceeds its limit");
  return Status::Ok();
}

Header ReplyTo(const Header& request, ErrorCode status, std::string reason) {
  Header h;
  h.type = request.type;
  h.request_id = request.request_id;
  h.status = status;
  h.reason = std::move(reason);
  return h;
}

int64_t StreamFrameOf(const Header& h) { return FieldInt(h.fields, kStreamFrame, 0); }

bool HasStreamFrame(const Header& h) { return h.fields.contains(kStreamFrame); }

void SetStreamFrame(int64_t frame, Header& h) { h.fields[kStreamFrame] = frame; }

void EncodeStreamedPut(const StreamedPut& put, Header& request) {
  SetStreamFrame(put.frame, request);
  request.fields[kStreamSize] = put.size;
}

StreamedPut DecodeStreamedPut(const Header& request) {
  return {StreamFrameOf(request), FieldInt(request.fields, kStreamSize, 0)};
}

Result<StreamedHits> DecodeStreamedHits(const Header& reply, size_t keys,
                                        const WireLimits& limits) {
  StreamedHits out;
  const int64_t frame = StreamFrameOf(reply);
  if (frame < kMinStreamFrame || frame > kMaxStreamFrame)
    return ProtocolError("stream_frame out of bounds");
  out.frame = static_cast<uint64_t>(frame);
  size_t hits = 0;
  for (size_t i = 0; i < keys && i < reply.values.size(); ++i) hits += reply.values[i] == 0;
  if (reply.values.size() != keys + hits)
    return ProtocolError("a streamed reply has a code per key and a size per hit");
  uint64_t total = 0;
  for (size_t h = 0; h < hits; ++h) {
    const int64_t size = reply.values[keys + h];
    if (size < 1 || static_cast<uint64_t>(size) > limits.max_payload_bytes)
      return ProtocolError("streamed object size out of bounds");
    out.sizes.push_back(static_cast<uint64_t>(size));
    total += static_cast<uint64_t>(size);
  }
  if (total > limits.max_message_payload_bytes) return TooLarge("streamed reply over the limit");
  return out;
}

}  // namespace pikv
