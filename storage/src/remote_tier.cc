#include "pikv/storage/remote_tier.h"

#include <hiredis/hiredis.h>
#include <spdlog/spdlog.h>

#include "pikv/proto/chunk_object.h"
#include "tier_internal.h"

namespace pikv::storage {

namespace {

timeval ToTimeval(std::chrono::milliseconds ms) {
  return {static_cast<time_t>(ms.count() / 1000),
          static_cast<suseconds_t>((ms.count() % 1000) * 1000)};
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
    : options_(std::move(options)),
      listener_(std::move(listener)),
      breaker_(options_.breaker),
      counters_(std::make_unique<TierCounters>()) {}

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
  std::lock_guard lock(mu_);
  const auto now = CircuitBreaker::Clock::now();
  if (!breaker_.Allow(now)) {
    counters_->rejects += commands.size();
    return Unavailable("Redis circuit open");
  }
  Status s = ConnectLocked();
  std::vector<std::shared_ptr<Reply>> replies;
  if (s.ok()) {
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
          REDIS_OK) {
        s = IoError(std::string("Redis append: ") + ctx_->errstr);
        break;
      }
    }
    for (size_t i = 0; s.ok() && i < commands.size(); ++i) {
      void* raw = nullptr;
      if (redisGetReply(ctx_, &raw) != REDIS_OK || raw == nullptr) {
        s = IoError(std::string("Redis: ") + (ctx_->errstr[0] ? ctx_->errstr : "no reply"));
        break;
      }
      replies.push_back(std::make_shared<Reply>(static_cast<redisReply*>(raw)));
    }
  }
  if (!s.ok()) {
    counters_->errors++;
    DisconnectLocked();
    breaker_.OnFailure(now);
    spdlog::warn("remote tier: {}", s.ToString());
    return Unavailable(s.message());
  }
  breaker_.OnSuccess();
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

void RemoteTier::Emit(const std::vector<TierEvent>& events) {
  if (listener_ && !events.empty()) listener_(events);
}

std::vector<Status> RemoteTier::PutMany(std::span<const ChunkKey> keys,
                                        std::span<const SharedBuffer> objects) {
  std::vector<std::string> names;
  names.reserve(keys.size());
  for (const auto& k : keys) names.push_back(RedisKey(k));
  const std::string ttl = std::to_string(options_.ttl_seconds);
  std::vector<std::vector<std::string_view>> cmds;
  for (size_t i = 0; i < keys.size(); ++i) {
    std::string_view value(reinterpret_cast<const char*>(objects[i].data()), objects[i].size());
    if (options_.ttl_seconds > 0) {
      cmds.push_back({"SET", names[i], value, "EX", ttl});
    } else {
      cmds.push_back({"SET", names[i], value});
    }
  }
  auto replies = Pipeline(cmds);
  if (!replies.ok()) return std::vector<Status>(keys.size(), replies.status());
  std::vector<Status> out;
  std::vector<TierEvent> events;
  for (size_t i = 0; i < keys.size(); ++i) {
    const redisReply* r = (*replies)[i]->r;
    if (r->type == REDIS_REPLY_ERROR) {
      counters_->errors++;
      out.push_back(IoError(std::string("Redis SET: ") + r->str));
    } else {
      counters_->admits++;
      out.push_back(Status::Ok());
      events.push_back({TierKind::kRemote, EventKind::kAdmit, keys[i], objects[i].size()});
    }
  }
  Emit(events);
  return out;
}

std::vector<Result<SharedBuffer>> RemoteTier::GetMany(std::span<const ChunkKey> keys) {
  auto replies = PerKey("GET", keys);
  std::vector<Result<SharedBuffer>> out;
  if (!replies.ok()) {
    counters_->misses += keys.size();
    for (size_t i = 0; i < keys.size(); ++i) out.emplace_back(replies.status());
    return out;
  }
  std::vector<ChunkKey> corrupt;
  for (size_t i = 0; i < keys.size(); ++i) {
    std::shared_ptr<Reply> reply = (*replies)[i];
    const redisReply* r = reply->r;
    if (r->type != REDIS_REPLY_STRING) {
      counters_->misses++;
      out.emplace_back(r->type == REDIS_REPLY_NIL ? NotFound() : IoError("unexpected Redis reply"));
      continue;
    }
    SharedBuffer buf(reinterpret_cast<const uint8_t*>(r->str), r->len, reply);
    if (Status s = VerifyChunkObject(buf.span(), &keys[i]); !s.ok()) {
      counters_->corruptions++;
      counters_->misses++;
      spdlog::warn("remote tier: corrupt object {} deleted: {}", keys[i].Hex(), s.ToString());
      corrupt.push_back(keys[i]);
      out.emplace_back(NotFound("corrupt copy deleted"));
      continue;
    }
    counters_->hits++;
    out.emplace_back(std::move(buf));
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

Status RemoteTier::Remove(const ChunkKey& key) {
  auto replies = PerKey("DEL", {&key, 1});
  if (!replies.ok()) return replies.status();
  const redisReply* r = (*replies)[0]->r;
  if (r->type != REDIS_REPLY_INTEGER || r->integer == 0) return NotFound();
  counters_->evictions++;
  Emit({{TierKind::kRemote, EventKind::kEvict, key, 0}});
  return Status::Ok();
}

TierStats RemoteTier::Stats() const {
  TierStats s;
  counters_->CopyTo(s);
  return s;
}

uint64_t RemoteTier::unavailable() const { return counters_->rejects; }

}  // namespace pikv::storage
