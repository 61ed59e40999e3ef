#include "pikv/storage/remote_tier.h"

#include <hiredis/hiredis.h>
#include <spdlog/spdlog.h>

#include <charconv>
#include <optional>
#include <random>

#include "pikv/proto/chunk_object.h"
#include "pikv/proto/message.h"
#include "redis_parts.h"
#include "resp_io.h"
#include "tier_internal.h"

namespace pikv::storage {

namespace {

timeval ToTimeval(std::chrono::milliseconds ms) {
  return {static_cast<time_t>(ms.count() / 1000),
          static_cast<suseconds_t>((ms.count() % 1000) * 1000)};
}

// The value of `field` in an INFO reply ("field:123\r\n" lines).
std::optional<uint64_t> InfoField(std::string_view info, std::string_view field) {
  for (size_t at = 0; at < info.size();) {
    size_t end = info.find('\n', at);
    if (end == std::string_view::npos) end = info.size();
    std::string_view line = info.substr(at, end - at);
    at = end + 1;
    if (line.size() <= field.size() || line.substr(0, field.size()) != field ||
        line[field.size()] != ':')
      continue;
    uint64_t v = 0;
    const char* first = line.data() + field.size() + 1;
    auto [ptr, ec] = std::from_chars(first, line.data() + line.size(), v);
    if (ec != std::errc() || ptr == first) return std::nullopt;
    return v;
  }
  return std::nullopt;
}

}  // namespace

struct RemoteTier::Reply {
  redisReply* r;
  explicit Reply(redisReply* reply) : r(reply) {}
  ~Reply() { freeReplyObject(r); }
};

Result<RemoteTierOptions> ParseRedisAddress(const std::string& address) {
  std::string rest = address;
  if (rest.rfind("redis://", 0) == 0) rest = rest.substr(8);
  auto colon = rest.rfind(':');
  RemoteTierOptions o;
  if (colon == std::string::npos) {
    o.host = rest;
  } else {
    o.host = rest.substr(0, colon);
    try {
      size_t used = 0;
      o.port = std::stoi(rest.substr(colon + 1), &used);
      if (used != rest.size() - colon - 1 || o.port <= 0 || o.port > 65535)
        throw std::out_of_range("port");
    } catch (const std::exception&) {
      return InvalidArgument("bad Redis port in '" + address + "'");
    }
  }
  if (o.host.empty()) return InvalidArgument("no Redis host in '" + address + "'");
  return o;
}

RemoteTier::RemoteTier(RemoteTierOptions options, EventListener listener)
    : Tier(std::move(listener)), options_(std::move(options)), breaker_(options_.breaker) {}

RemoteTier::~RemoteTier() {
  std::lock_guard lock(mu_);
  DisconnectLocked();
}

std::string RemoteTier::RedisKey(const ChunkKey& key) const {
  return "pikv:" + options_.key_namespace + ":" + key.Hex();
}

void RemoteTier::DisconnectLocked() {
  if (ctx_) redisFree(ctx_);
  ctx_ = nullptr;
}

Status RemoteTier::ConnectLocked() {
  if (ctx_) return Status::Ok();
  redisContext* c = redisConnectWithTimeout(options_.host.c_str(), options_.port,
                                            ToTimeval(options_.connect_timeout));
  if (!c || c->err) {
    std::string why = c ? c->errstr : "out of memory";
    if (c) redisFree(c);
    return Unavailable("connect to Redis " + options_.host + ":" + std::to_string(options_.port) +
                       ": " + why);
  }
  redisSetTimeout(c, ToTimeval(options_.io_timeout));
  redisEnableKeepAlive(c);
  if (!options_.password.empty()) {
    auto* reply = static_cast<redisReply*>(
        redisCommand(c, "AUTH %b", options_.password.data(), options_.password.size()));
    const bool refused = !reply || reply->type == REDIS_REPLY_ERROR;
    // The reply names no password; say what Redis said, never what was sent.
    std::string why = !reply ? std::string(c->errstr) : refused ? reply->str : "";
    if (reply) freeReplyObject(reply);
    if (refused) {
      redisFree(c);
      return Unavailable("Redis " + options_.host + ":" + std::to_string(options_.port) +
                         " refused the password: " + why);
    }
  }
  ctx_ = c;
  spdlog::info("remote tier: connected to Redis {}:{}", options_.host, options_.port);
  return Status::Ok();
}

CircuitBreaker::State RemoteTier::breaker_state() const {
  std::lock_guard lock(mu_);
  return breaker_.state();
}

Result<std::vector<std::shared_ptr<RemoteTier::Reply>>> RemoteTier::Pipeline(
    const std::vector<std::vector<std::string_view>>& commands) {
  std::vector<std::shared_ptr<Reply>> replies;
  Status s = Exchange(commands.size(), [&](int) {  // through hiredis, on ctx_ (locked)
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& cmd : commands) {
      argv.clear();
      lens.clear();
      for (auto part : cmd) {
        argv.push_back(part.data());
        lens.push_back(part.size());
      }
      if (redisAppendCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), lens.data()) !=
          REDIS_OK)
        return IoError(std::string("Redis append: ") + ctx_->errstr);
    }
    for (size_t i = 0; i < commands.size(); ++i) {
      void* raw = nullptr;
      if (redisGetReply(ctx_, &raw) != REDIS_OK || raw == nullptr)
        return IoError(std::string("Redis: ") + (ctx_->errstr[0] ? ctx_->errstr : "no reply"));
      replies.push_back(std::make_shared<Reply>(static_cast<redisReply*>(raw)));
    }
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return replies;
}

Result<std::vector<std::shared_ptr<RemoteTier::Reply>>> RemoteTier::PerKey(
    std::string_view verb, std::span<const ChunkKey> keys) {
  std::vector<std::string> names;
  names.reserve(keys.size());
  for (const auto& k : keys) names.push_back(RedisKey(k));
  std::vector<std::vector<std::string_view>> cmds;
  cmds.reserve(keys.size());
  for (const auto& n : names) cmds.push_back({verb, n});
  return Pipeline(cmds);
}

std::vector<Status> RemoteTier::PutMany(std::span<const ChunkKey> keys,
                                        std::span<const SharedBuffer> objects) {
  std::vector<std::string> names;
  names.reserve(keys.size());
  for (const auto& k : keys) names.push_back(RedisKey(k));
  const std::string ttl = std::to_string(options_.ttl_seconds);
  std::vector<size_t> whole;  // indices stored as one value; the rest as parts
  std::vector<Status> out(keys.size());
  std::vector<TierEvent> events;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (objects[i].size() > options_.part_bytes) {
      out[i] = PutParts(keys[i], objects[i]);
      if (out[i].ok()) {
        counters_->admits++;
        events.push_back({TierKind::kRemote, EventKind::kAdmit, keys[i], objects[i].size(),
                          ReadOwnerId(objects[i].span())});
      }
      continue;
    }
    whole.push_back(i);
  }
  std::vector<resp::BulkReply> replies;
  Status sent = whole.empty() ? Status::Ok() : Exchange(whole.size(), [&](int fd) {
    for (size_t i : whole) {
      const std::string_view value(reinterpret_cast<const char*>(objects[i].data()),
                                   objects[i].size());
      const std::string_view set[] = {"SET", names[i], value, "EX", ttl};
      if (Status s = resp::WriteCommand(fd, {set, options_.ttl_seconds > 0 ? 5u : 3u}); !s.ok())
        return s;
    }
    return ReadStatuses(fd, whole.size(), replies);
  });
  for (size_t w = 0; w < whole.size(); ++w) {
    const size_t i = whole[w];
    if (!sent.ok()) {
      out[i] = sent;
    } else if (replies[w].kind != resp::BulkReply::Kind::kStatus) {
      counters_->errors++;
      out[i] = IoError("Redis SET: " + replies[w].line);
    } else {
      counters_->admits++;
      events.push_back({TierKind::kRemote, EventKind::kAdmit, keys[i], objects[i].size(),
                        ReadOwnerId(objects[i].span())});
    }
  }
  if (!events.empty()) RefreshServerMemory();
  Emit(events);
  return out;
}

Status RemoteTier::ReadStatuses(int fd, size_t n, std::vector<resp::BulkReply>& out) {
  resp::Reader reader(fd);
  for (size_t i = 0; i < n; ++i) {
    auto r = reader.ReadStatus();
    if (!r.ok()) return r.status();
    out.push_back(std::move(*r));
  }
  return reader.empty() ? Status::Ok() : ProtocolError("Redis sent more than was asked");
}

Status RemoteTier::Exchange(size_t ops, const std::function<Status(int fd)>& io) {
  std::lock_guard lock(mu_);
  const auto now = CircuitBreaker::Clock::now();
  if (!breaker_.Allow(now)) {
    counters_->rejects += ops;
    return Unavailable("Redis circuit open");
  }
  Status s = ConnectLocked();
  if (s.ok()) s = io(ctx_->fd);
  if (!s.ok()) {
    counters_->errors++;
    DisconnectLocked();
    breaker_.OnFailure(now);
    spdlog::warn("remote tier: {}", s.ToString());
    return Unavailable(s.message());
  }
  breaker_.OnSuccess();
  return s;
}

void RemoteTier::RefreshServerMemory() {
  auto r = Pipeline({{"INFO", "memory"}});
  if (!r.ok() || (*r)[0]->r->type != REDIS_REPLY_STRING) return;
  const std::string_view info((*r)[0]->r->str, (*r)[0]->r->len);
  if (auto used = InfoField(info, "used_memory")) server_used_bytes_ = *used;
  if (auto max = InfoField(info, "maxmemory")) server_max_bytes_ = *max;
}

Status RemoteTier::PutParts(const ChunkKey& key, const SharedBuffer& object) {
  const std::string name = RedisKey(key);
  PartsManifest m;
  static thread_local std::mt19937_64 rng(std::random_device{}());
  m.generation = rng();
  m.size = object.size();
  m.part_bytes = options_.part_bytes;
  const uint64_t parts = (m.size + m.part_bytes - 1) / m.part_bytes;
  if (m.size > kMaxPartedObjectBytes || parts > kMaxParts)
    return TooLarge("object of " + std::to_string(m.size) + " bytes for the remote tier");
  m.parts = static_cast<uint32_t>(parts);
  const std::string orphan_ttl = std::to_string(options_.orphan_ttl_seconds);
  std::vector<std::string> part_keys;
  bool sent_any = false;  // no part to delete before one went out
  auto fail = [&](Status s) {
    // Best effort: whatever was written would expire anyway.
    std::vector<std::vector<std::string_view>> dels;
    for (const auto& k : part_keys) dels.push_back({"DEL", k});
    if (sent_any && !dels.empty()) (void)Pipeline(dels);
    counters_->errors++;
    return s;
  };
  for (uint32_t i = 0; i < m.parts; ++i) part_keys.push_back(PartKey(name, m, i));
  // Every part in one pipeline, each written from the object's own memory.
  std::vector<resp::BulkReply> replies;
  Status sent = Exchange(m.parts, [&](int fd) {
    sent_any = true;
    for (uint32_t i = 0; i < m.parts; ++i) {
      const uint64_t offset = uint64_t{i} * m.part_bytes;
      const std::string_view slice(reinterpret_cast<const char*>(object.data()) + offset,
                                   std::min<uint64_t>(m.part_bytes, m.size - offset));
      const std::string_view set[] = {"SET", part_keys[i], slice, "EX", orphan_ttl};
      if (Status s = resp::WriteCommand(fd, set); !s.ok()) return s;
    }
    return ReadStatuses(fd, m.parts, replies);
  });
  if (!sent.ok()) return fail(sent);
  for (const auto& r : replies) {
    if (r.kind != resp::BulkReply::Kind::kStatus) return fail(IoError("Redis SET part: " + r.line));
  }
  // The manifest and the parts' final expiry, atomically.
  const std::string manifest = EncodeManifest(m), ttl = std::to_string(options_.ttl_seconds);
  std::vector<std::vector<std::string_view>> commit = {{"MULTI"}};
  if (options_.ttl_seconds > 0) {
    commit.push_back({"SET", name, manifest, "EX", ttl});
    for (const auto& k : part_keys) commit.push_back({"EXPIRE", k, ttl});
  } else {
    commit.push_back({"SET", name, manifest});
    for (const auto& k : part_keys) commit.push_back({"PERSIST", k});
  }
  commit.push_back({"EXEC"});
  auto r = Pipeline(commit);
  if (!r.ok()) return fail(r.status());
  if (r->back()->r->type != REDIS_REPLY_ARRAY) return fail(IoError("Redis EXEC of a manifest"));
  return Status::Ok();
}

Status RemoteTier::ReadParts(int fd, const std::string& name, std::string_view manifest,
                             const std::function<std::span<uint8_t>(uint64_t)>& place,
                             SharedBuffer& object, Status& key_status) {
  auto m = ParseManifest(manifest);
  // The size is Redis's word: no more memory is taken than one object may
  // have (the wire's limit on a payload).
  if (!m || m->size > WireLimits{}.max_payload_bytes) {
    key_status =
        Corruption(m ? "parts manifest past the object size limit" : "malformed parts manifest");
    return Status::Ok();
  }
  const std::span<uint8_t> placed = place(m->size);
  SharedBuffer whole_object = placed.size() == m->size
                                  ? SharedBuffer(placed.data(), placed.size(), nullptr)
                                  : resp::AllocateValue(m->size);
  if (whole_object.empty()) {
    key_status = IoError("no memory for a parted object");
    return Status::Ok();
  }
  auto* bytes = const_cast<uint8_t*>(whole_object.data());
  auto ask = [&](uint32_t i) {
    const std::string part = PartKey(name, *m, i);
    const std::string_view get[] = {"GET", part};
    return resp::WriteCommand(fd, get);
  };
  // Two parts in flight: Redis holds a reply in memory it counts against
  // maxmemory, so a whole object's worth would evict others.
  constexpr uint32_t kWindow = 2;
  for (uint32_t i = 0; i < std::min(kWindow, m->parts); ++i)
    if (Status s = ask(i); !s.ok()) return s;
  resp::Reader reader(fd);
  for (uint32_t i = 0; i < m->parts; ++i) {
    const uint64_t offset = uint64_t{i} * m->part_bytes;
    const uint64_t want = std::min<uint64_t>(m->part_bytes, m->size - offset);
    auto r = reader.ReadBulk(want, {bytes + offset, want});  // straight into place
    if (!r.ok()) return r.status();
    if (i + kWindow < m->parts)
      if (Status s = ask(i + kWindow); !s.ok()) return s;
    if (!key_status.ok() || r->kind == resp::BulkReply::Kind::kValue) continue;
    key_status = r->kind == resp::BulkReply::Kind::kError
                     ? IoError("Redis refused a part: " + r->line)  // a miss, kept
                     : Corruption("incomplete parts");
  }
  if (!reader.empty()) return ProtocolError("Redis sent more than was asked");
  if (key_status.ok()) object = std::move(whole_object);
  return Status::Ok();
}

std::vector<Result<SharedBuffer>> RemoteTier::GetMany(std::span<const ChunkKey> keys) {
  return GetManyPlaced(keys, nullptr);
}

static_assert(kMaxManifestBytes < RemoteTier::kPlacedMinBytes,
              "a parts manifest is never read into a caller's memory");

std::vector<Result<SharedBuffer>> RemoteTier::GetManyPlaced(std::span<const ChunkKey> keys,
                                                            const Placer& place) {
  // Key i's object's memory, where the caller wants it.
  auto placer_of = [&](size_t i) {
    return [&place, i](uint64_t size) {
      return place && size >= kPlacedMinBytes ? place(i, size) : std::span<uint8_t>{};
    };
  };
  std::vector<std::string> names;
  names.reserve(keys.size());
  for (const auto& k : keys) names.push_back(RedisKey(k));
  // What each key's GET found: a value (an object, or a parted object read
  // whole), nil, or something else; for a parted object, what reading its
  // parts came to (a connection lost there fails it and those after it).
  std::vector<resp::BulkReply> replies;
  std::vector<Status> parts(keys.size());
  Status got = Exchange(keys.size(), [&](int fd) {
    for (const auto& n : names) {
      const std::string_view get[] = {"GET", n};
      if (Status s = resp::WriteCommand(fd, get); !s.ok()) return s;
    }
    resp::Reader reader(fd);
    for (size_t i = 0; i < keys.size(); ++i) {
      auto r = reader.ReadBulkPlaced(WireLimits{}.max_payload_bytes, placer_of(i));
      if (!r.ok()) return r.status();
      replies.push_back(std::move(*r));
    }
    if (!reader.empty()) return ProtocolError("Redis sent more than was asked");
    for (size_t i = 0; i < keys.size(); ++i) {  // parted objects, once every reply is in
      SharedBuffer& v = replies[i].value;
      const std::string_view value(reinterpret_cast<const char*>(v.data()), v.size());
      if (replies[i].kind != resp::BulkReply::Kind::kValue || !value.starts_with(kPartsMagic))
        continue;
      SharedBuffer object;
      if (Status s = ReadParts(fd, names[i], value, placer_of(i), object, parts[i]); !s.ok()) {
        for (size_t j = i; j < keys.size(); ++j) parts[j] = s;
        return s;
      }
      v = object;
    }
    return Status::Ok();
  });
  std::vector<Result<SharedBuffer>> out;
  if (!got.ok() && replies.size() < keys.size()) {  // no key's reply was read whole
    counters_->misses += keys.size();
    for (size_t i = 0; i < keys.size(); ++i) out.emplace_back(got);
    return out;
  }
  std::vector<ChunkKey> corrupt;
  for (size_t i = 0; i < keys.size(); ++i) {
    const resp::BulkReply& r = replies[i];
    if (r.kind == resp::BulkReply::Kind::kNil) {
      counters_->misses++;
      out.emplace_back(NotFound());
      continue;
    }
    if (r.kind == resp::BulkReply::Kind::kError || r.kind == resp::BulkReply::Kind::kStatus) {
      counters_->misses++;
      out.emplace_back(IoError("unexpected Redis reply: " + r.line));
      continue;
    }
    if (!parts[i].ok() && parts[i].code() != ErrorCode::kCorruption) {
      counters_->misses++;  // not the object's fault: kept
      out.emplace_back(parts[i]);
      continue;
    }
    Status s = r.kind == resp::BulkReply::Kind::kTooLarge ? Corruption("value past the size limit")
               : !parts[i].ok()                           ? parts[i]
                                : VerifyChunkObject(r.value.span(), &keys[i]);
    if (!s.ok()) {
      counters_->corruptions++;
      counters_->misses++;
      spdlog::warn("remote tier: corrupt object {} deleted: {}", keys[i].Hex(), s.ToString());
      corrupt.push_back(keys[i]);
      out.emplace_back(NotFound("corrupt copy deleted"));
      continue;
    }
    counters_->hits++;
    out.emplace_back(r.value);
  }
  for (const auto& k : corrupt) Remove(k).IgnoreError();
  return out;
}

std::vector<bool> RemoteTier::ContainsMany(std::span<const ChunkKey> keys) {
  auto replies = PerKey("EXISTS", keys);
  std::vector<bool> out(keys.size(), false);
  if (!replies.ok()) return out;
  for (size_t i = 0; i < keys.size(); ++i) {
    const redisReply* r = (*replies)[i]->r;
    out[i] = r->type == REDIS_REPLY_INTEGER && r->integer > 0;
  }
  return out;
}

Status RemoteTier::Put(const ChunkKey& key, const SharedBuffer& object) {
  return PutMany({&key, 1}, {&object, 1})[0];
}

Result<SharedBuffer> RemoteTier::Get(const ChunkKey& key) {
  return std::move(GetMany({&key, 1})[0]);
}

bool RemoteTier::Contains(const ChunkKey& key) { return ContainsMany({&key, 1})[0]; }

std::vector<std::optional<Owner>> RemoteTier::OwnersOf(std::span<const ChunkKey> keys) {
  std::vector<std::optional<Owner>> out(keys.size());
  const std::string last = std::to_string(kOwnerPrefixBytes - 1);
  auto prefix = [&](const std::vector<std::string>& names) {
    std::vector<std::vector<std::string_view>> cmds;
    for (const auto& n : names) cmds.push_back({"GETRANGE", n, "0", last});
    return Pipeline(cmds);
  };
  std::vector<std::string> names;
  for (const auto& k : keys) names.push_back(RedisKey(k));
  auto replies = prefix(names);
  if (!replies.ok()) return out;
  std::vector<size_t> parted;
  std::vector<std::string> first_parts;
  for (size_t i = 0; i < keys.size(); ++i) {
    const redisReply* r = (*replies)[i]->r;
    if (r->type != REDIS_REPLY_STRING) continue;
    const std::string_view value(r->str, r->len);
    if (value.starts_with(kPartsMagic)) {
      if (auto m = ParseManifest(value)) {
        parted.push_back(i);
        first_parts.push_back(PartKey(names[i], *m, 0));
      }
      continue;
    }
    out[i] = ReadOwner({reinterpret_cast<const uint8_t*>(r->str), r->len});
  }
  if (parted.empty()) return out;
  auto parts = prefix(first_parts);
  if (!parts.ok()) return out;
  for (size_t j = 0; j < parted.size(); ++j) {
    const redisReply* r = (*parts)[j]->r;
    if (r->type == REDIS_REPLY_STRING)
      out[parted[j]] = ReadOwner({reinterpret_cast<const uint8_t*>(r->str), r->len});
  }
  return out;
}

Result<std::vector<ChunkKey>> RemoteTier::Keys() {
  const std::string pattern = "pikv:" + options_.key_namespace + ":*";
  const size_t prefix = pattern.size() - 1;
  std::vector<ChunkKey> keys;
  std::string cursor = "0";
  do {
    auto r = Pipeline({{"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"}});
    if (!r.ok()) return r.status();
    const redisReply* reply = (*r)[0]->r;
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
        reply->element[0]->type != REDIS_REPLY_STRING ||
        reply->element[1]->type != REDIS_REPLY_ARRAY)
      return IoError("unexpected Redis SCAN reply");
    cursor.assign(reply->element[0]->str, reply->element[0]->len);
    const redisReply* names = reply->element[1];
    for (size_t i = 0; i < names->elements; ++i) {
      const std::string_view name(names->element[i]->str, names->element[i]->len);
      // Parts are `<key>:part:...`: only the bare key names an object.
      if (auto key = ChunkKey::FromHex(name.substr(std::min(prefix, name.size()))))
        keys.push_back(*key);
    }
  } while (cursor != "0");
  return keys;
}

Status RemoteTier::Remove(const ChunkKey& key) {
  // A parted object's manifest names its parts: they go with it.
  const std::string name = RedisKey(key);
  std::vector<std::string> doomed = {name};
  // A manifest is short: its first bytes say whether this is one.
  auto current = Pipeline({{"GETRANGE", name, "0", std::to_string(kMaxManifestBytes - 1)}});
  if (!current.ok()) return current.status();
  if (const redisReply* v = (*current)[0]->r; v->type == REDIS_REPLY_STRING) {
    if (auto m = ParseManifest({v->str, v->len})) {
      for (uint32_t i = 0; i < m->parts; ++i) doomed.push_back(PartKey(name, *m, i));
    }
  }
  std::vector<std::vector<std::string_view>> dels;
  for (const auto& k : doomed) dels.push_back({"DEL", k});
  auto replies = Pipeline(dels);
  if (!replies.ok()) return replies.status();
  const redisReply* r = (*replies)[0]->r;
  if (r->type != REDIS_REPLY_INTEGER) return Unavailable("redis refused DEL");
  // The key is gone now, whoever deleted it. That is reported either way, so
  // the registry's remote-tier entry cannot outlive the object when another
  // node's delete (or Redis's own expiry) came first.
  RefreshServerMemory();
  Emit({{TierKind::kRemote, EventKind::kEvict, key, 0}});
  if (r->integer == 0) return NotFound();
  counters_->evictions++;
  return Status::Ok();
}

TierStats RemoteTier::Stats() const {
  TierStats s = counters_->Stats();
  s.used_bytes = server_used_bytes_;
  s.capacity_bytes = server_max_bytes_;
  return s;
}

uint64_t RemoteTier::unavailable() const { return counters_->rejects; }

}  // namespace pikv::storage
