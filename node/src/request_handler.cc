#include "pikv/node/request_handler.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>

#include "pikv/proto/chunk_object.h"
#include "pikv/proto/endpoint.h"
#include "puller.h"

namespace pikv::node {

using storage::StorageManager;

namespace {

// A pull fetches what peers hold for the node (every tenant's); its caller
// learns only of its own tenant's objects, another's reading as a miss. An
// admit-only pull returns no objects: the node's own copy says whose it is.
void HideOtherTenants(StorageManager& storage, const std::string& tenant,
                      std::span<const ChunkKey> keys, Message& reply) {
  std::vector<SharedBuffer> kept;
  size_t next = 0;
  const bool with_objects = !reply.payloads.empty();
  for (size_t i = 0; i < reply.header.values.size() && i < keys.size(); ++i) {
    int64_t& code = reply.header.values[i];
    if (code != static_cast<int64_t>(ErrorCode::kOk)) continue;
    bool visible = false;
    if (with_objects && next < reply.payloads.size()) {
      SharedBuffer& object = reply.payloads[next++];
      visible = TenantMaySee(&tenant, ReadOwner(object.span()));
      if (visible) kept.push_back(std::move(object));
    } else if (!with_objects) {
      visible = storage.Exists(keys.subspan(i, 1), &tenant)[0] != 0;
    }
    if (!visible) code = static_cast<int64_t>(ErrorCode::kNotFound);
  }
  if (with_objects) reply.payloads = std::move(kept);
}

}  // namespace

RequestHandler::RequestHandler(StorageManager& storage, std::string node_id, PullOptions pull)
    : storage_(storage), node_id_(std::move(node_id)) {
  if (pull.controller) puller_ = std::make_unique<Puller>(storage_, node_id_, std::move(pull));
}

RequestHandler::~RequestHandler() = default;

Message RequestHandler::Reject(const Header* request, const Status& why) {
  switch (why.code()) {
    case ErrorCode::kTooLarge:
      too_large_++;
      break;
    case ErrorCode::kUnsupported:
      unsupported_++;
      break;
    case ErrorCode::kInvalidArgument:
      bad_requests_++;
      break;
    case ErrorCode::kRetry:
      busy_++;
      break;
    default:
      malformed_++;
      break;
  }
  spdlog::debug("rejected request: {}", why.ToString());
  Message reply;
  if (request) {
    reply.header = ReplyTo(*request, why.code(), why.message());
  } else {
    reply.header.type = MsgType::kError;
    reply.header.status = why.code();
    reply.header.reason = why.message();
  }
  return reply;
}

Message RequestHandler::Handle(Message& req, Clock::time_point received, const Caller& caller) {
  requests_++;
  for (const auto& p : req.payloads) bytes_in_ += p.size();
  const Header& h = req.header;
  Message reply;
  switch (h.type) {
    case MsgType::kPing:
      pings_++;
      reply.header = ReplyTo(h);
      reply.header.fields["node_id"] = node_id_;
      return reply;
    case MsgType::kExists: {
      exists_++;
      reply.header = ReplyTo(h);
      for (auto mask : storage_.Exists(h.keys, caller.only_tenant()))
        reply.header.values.push_back(mask);
      return reply;
    }
    case MsgType::kGet:
      gets_++;
      return HandleGet(req, caller);
    case MsgType::kPut:
      puts_++;
      return HandlePut(req, caller);
    case MsgType::kDelete:
      deletes_++;
      return HandlePerKey(req, &StorageManager::Delete);
    case MsgType::kPin:
      pins_++;
      return HandlePerKey(req, &StorageManager::Pin);
    case MsgType::kUnpin:
      unpins_++;
      return HandlePerKey(req, &StorageManager::Unpin);
    case MsgType::kStats:
      stats_++;
      reply.header = ReplyTo(h);
      reply.header.fields = StatsFields();
      return reply;
    case MsgType::kPull:
      pulls_++;
      return HandlePull(req, received, caller);
    case MsgType::kClear:
      clears_++;
      reply.header = ReplyTo(h);
      reply.header.values.push_back(static_cast<int64_t>(storage_.Clear()));
      return reply;
    default:
      break;
  }
  return Reject(&h,
                Unsupported("unknown message type " + std::to_string(static_cast<int>(h.type))));
}

std::optional<Message> RequestHandler::TryHandleInline(Message& req, const Caller& caller) {
  const Header& h = req.header;
  switch (h.type) {
    case MsgType::kPing:
    case MsgType::kPin:
    case MsgType::kUnpin:
    case MsgType::kStats:
      return Handle(req, Clock::now(), caller);
    case MsgType::kGet: {
      if (!req.payloads.empty()) return std::nullopt;  // Handle() rejects it
      auto objects = storage_.GetIfInCpu(h.keys, caller.only_tenant());
      if (!objects) return std::nullopt;
      requests_++;
      gets_++;
      Message reply;
      reply.header = ReplyTo(h);
      reply.header.values.assign(objects->size(), static_cast<int64_t>(ErrorCode::kOk));
      for (const auto& o : *objects) bytes_out_ += o.size();
      reply.payloads = std::move(*objects);
      MaybeStream(h, reply);
      return reply;
    }
    case MsgType::kExists: {
      auto masks = storage_.ExistsIfLocal(h.keys, caller.only_tenant());
      if (!masks) return std::nullopt;
      requests_++;
      exists_++;
      Message reply;
      reply.header = ReplyTo(h);
      reply.header.values.assign(masks->begin(), masks->end());
      return reply;
    }
    default:
      return std::nullopt;
  }
}

void RequestHandler::MaybeStream(const Header& request, Message& reply) {
  const int64_t frame = FieldInt(request.fields, kStreamFrameField, 0);
  if (frame < kMinStreamFrame || frame > kMaxStreamFrame) return;
  uint64_t bytes = 0;
  for (const auto& p : reply.payloads) bytes += p.size();
  if (bytes <= std::max<uint64_t>(frame, kWholeObjectBytes)) return;  // travels whole (message.h)
  uint64_t messages = 1;
  for (const auto& p : reply.payloads) messages += (p.size() + frame - 1) / frame;
  if (messages > kMaxStreamMessages) return;  // answered the ordinary way
  reply.header.fields[kStreamFrameField] = frame;
  for (const auto& p : reply.payloads)
    reply.header.values.push_back(static_cast<int64_t>(p.size()));
  streamed_++;
}

Message RequestHandler::HandleGet(Message& req, const Caller& caller) {
  if (!req.payloads.empty())
    return Reject(&req.header, InvalidArgument("get carries no payload frames"));
  Message reply;
  reply.header = ReplyTo(req.header);
  auto results = storage_.Get(req.header.keys, caller.only_tenant());
  for (auto& r : results) {
    reply.header.values.push_back(static_cast<int64_t>(r.code()));
    if (r.ok()) {
      bytes_out_ += r->size();
      reply.payloads.push_back(std::move(*r));
    }
  }
  return reply;
}

Message RequestHandler::HandlePut(Message& req, const Caller& caller) {
  if (req.payloads.size() != req.header.keys.size()) {
    return Reject(&req.header, InvalidArgument("put has " + std::to_string(req.header.keys.size()) +
                                               " keys and " + std::to_string(req.payloads.size()) +
                                               " payload frames"));
  }
  Message reply;
  reply.header = ReplyTo(req.header);
  for (size_t i = 0; i < req.payloads.size(); ++i) {
    Status s = storage_.Put(req.header.keys[i], std::move(req.payloads[i]), caller.writer());
    if (!s.ok() && reply.header.reason.empty()) reply.header.reason = s.ToString();
    reply.header.values.push_back(static_cast<int64_t>(s.code()));
  }
  return reply;
}

Message RequestHandler::HandlePull(Message& req, Clock::time_point received, const Caller& caller) {
  if (!req.payloads.empty())
    return Reject(&req.header, InvalidArgument("pull carries no payload frames"));
  const std::string from = FieldString(req.header.fields, "from");
  if (!from.empty()) {
    if (auto ep = ParseTcpEndpoint(from); !ep.ok()) return Reject(&req.header, ep.status());
  }
  if (!puller_)
    return Reject(&req.header, Unsupported("this node has no controller to find its peers"));
  // The caller's deadline, counted from when the request arrived.
  const auto timeout = std::chrono::milliseconds(
      std::clamp<int64_t>(FieldInt(req.header.fields, "timeout_ms", kDefaultPullTimeout.count()), 1,
                          kMaxPullTimeout.count()));
  Message reply = puller_->Pull(req.header, received + timeout);
  if (caller.only_tenant())
    HideOtherTenants(storage_, *caller.only_tenant(), req.header.keys, reply);
  return reply;
}

Message RequestHandler::HandlePerKey(Message& req, Status (StorageManager::*op)(const ChunkKey&)) {
  if (!req.payloads.empty())
    return Reject(&req.header, InvalidArgument("request carries no payload frames"));
  Message reply;
  reply.header = ReplyTo(req.header);
  for (const ChunkKey& k : req.header.keys) {
    reply.header.values.push_back(static_cast<int64_t>((storage_.*op)(k).code()));
  }
  return reply;
}

void RequestHandler::RecordLatency(MsgType type, std::chrono::nanoseconds d) {
  const LatencyClass c = type == MsgType::kGet || type == MsgType::kPull ? LatencyClass::kGet
                         : type == MsgType::kPut                         ? LatencyClass::kPut
                                                                         : LatencyClass::kOther;
  latency_[static_cast<int>(c)].Record(d);
}

NodeCounters RequestHandler::Counters() const {
  NodeCounters c;
  c.requests = requests_;
  c.gets = gets_;
  c.puts = puts_;
  c.exists = exists_;
  c.deletes = deletes_;
  c.pins = pins_;
  c.unpins = unpins_;
  c.stats = stats_;
  c.pings = pings_;
  c.clears = clears_;
  c.pulls = pulls_;
  c.streamed = streamed_;
  if (puller_) {
    c.pulled_objects = puller_->counters().objects;
    c.pull_failures = puller_->counters().failures;
    c.pulled_streamed = puller_->counters().streamed;
    c.pulls_from_memory = puller_->counters().from_memory;
  }
  c.malformed = malformed_;
  c.too_large = too_large_;
  c.unsupported = unsupported_;
  c.bad_requests = bad_requests_;
  c.busy = busy_;
  c.bytes_in = bytes_in_;
  c.bytes_out = bytes_out_;
  return c;
}

Fields RequestHandler::StatsFields() const {
  Fields f;
  auto put = [&f](const std::string& name, uint64_t v) { f[name] = static_cast<int64_t>(v); };
  f["node_id"] = node_id_;
  NodeCounters c = Counters();
  put("requests", c.requests);
  put("requests.get", c.gets);
  put("requests.put", c.puts);
  put("requests.exists", c.exists);
  put("requests.delete", c.deletes);
  put("requests.pin", c.pins);
  put("requests.unpin", c.unpins);
  put("requests.clear", c.clears);
  put("requests.pull", c.pulls);
  put("requests.streamed", c.streamed);
  put("p2p.pulled_objects", c.pulled_objects);
  put("p2p.pull_failures", c.pull_failures);
  put("p2p.pulls_from_memory", c.pulls_from_memory);
  put("p2p.pulled_streamed", c.pulled_streamed);
  put("errors.malformed", c.malformed);
  put("errors.too_large", c.too_large);
  put("errors.unsupported", c.unsupported);
  put("errors.bad_request", c.bad_requests);
  put("errors.busy", c.busy);
  put("bytes_in", c.bytes_in);
  put("bytes_out", c.bytes_out);
  storage::StorageStats s = storage_.Stats();
  put("storage.puts", s.puts);
  put("storage.put_rejects", s.put_rejects);
  put("storage.promotions", s.promotions);
  put("storage.hits", s.hits);
  put("storage.misses", s.misses);
  for (int t = 0; t < storage::kNumTiers; ++t) {
    if (!s.tiers[t]) continue;
    const std::string p = std::string(storage::TierName(static_cast<storage::TierKind>(t))) + ".";
    const storage::TierStats& ts = *s.tiers[t];
    put(p + "capacity_bytes", ts.capacity_bytes);
    put(p + "used_bytes", ts.used_bytes);
    if (t == static_cast<int>(TierKind::kCpu)) put(p + "faulted_bytes", ts.faulted_bytes);
    put(p + "entries", ts.entries);
    put(p + "hits", ts.hits);
    put(p + "misses", ts.misses);
    put(p + "admits", ts.admits);
    put(p + "evictions", ts.evictions);
    put(p + "rejects", ts.rejects);
    put(p + "corruptions", ts.corruptions);
    put(p + "errors", ts.errors);
  }
  auto queue = [&](const std::string& p,
                   const std::optional<storage::WriteThroughQueue::Stats>& q) {
    if (!q) return;
    put(p + "depth", q->depth);
    put(p + "written", q->written);
    put(p + "failed", q->failed);
    put(p + "dropped", q->dropped);
  };
  queue("queue.disk.", s.disk_queue);
  queue("queue.remote.", s.remote_queue);
  for (const auto& source : stats_sources_) source(f);
  return f;
}

}  // namespace pikv::node
