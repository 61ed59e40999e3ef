#include "pikv/node/request_handler.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>

#include "node_stats_sources.h"
#include "pikv/node/node_stats.h"
#include "pikv/proto/chunk_object.h"
#include "pikv/proto/data_wire.h"
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

// The reason a refused request is counted under (pikv_node_request_errors_total).
stats::RequestCounter RejectionOf(ErrorCode code) {
  switch (code) {
    case ErrorCode::kTooLarge:
      return stats::RequestCounter::kTooLarge;
    case ErrorCode::kUnsupported:
      return stats::RequestCounter::kUnsupported;
    case ErrorCode::kInvalidArgument:
      return stats::RequestCounter::kBadRequest;
    case ErrorCode::kRetry:
      return stats::RequestCounter::kBusy;
    default:
      return stats::RequestCounter::kMalformed;
  }
}

}  // namespace

RequestHandler::RequestHandler(StorageManager& storage, std::string node_id, PullOptions pull)
    : storage_(storage),
      node_id_(std::move(node_id)),
      served_(Permissions().size()),
      stats_(stats::kAll) {
  if (pull.controller) puller_ = std::make_unique<Puller>(storage_, node_id_, std::move(pull));
  AddOwnSources();
}

RequestHandler::~RequestHandler() = default;

Message RequestHandler::Reject(const Header* request, const Status& why) {
  counters_.Add(RejectionOf(why.code()));
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

void RequestHandler::CountServed(MsgType type) {
  counters_.Add(stats::RequestCounter::kReceived);
  if (const Permission* row = PermissionFor(Server::kNode, type)) served_[RowOf(*row)]++;
}

Message RequestHandler::Handle(Message& req, Clock::time_point received, const Caller& caller) {
  CountServed(req.header.type);
  for (const auto& p : req.payloads) counters_.Add(stats::RequestCounter::kBytesIn, p.size());
  const Header& h = req.header;
  Message reply;
  switch (h.type) {
    case MsgType::kPing:
      reply.header = ReplyTo(h);
      SetAnsweringNode(node_id_, reply.header);
      return reply;
    case MsgType::kExists: {
      reply.header = ReplyTo(h);
      for (auto mask : storage_.Exists(h.keys, caller.only_tenant()))
        reply.header.values.push_back(mask);
      return reply;
    }
    case MsgType::kGet:
      return HandleGet(req, caller);
    case MsgType::kPut:
      return HandlePut(req, caller);
    case MsgType::kDelete:
      return HandlePerKey(req, &StorageManager::Delete);
    case MsgType::kPin:
      return HandlePerKey(req, &StorageManager::Pin);
    case MsgType::kUnpin:
      return HandlePerKey(req, &StorageManager::Unpin);
    case MsgType::kStats:
      reply.header = ReplyTo(h);
      reply.header.fields = StatsFields();
      SetAnsweringNode(node_id_, reply.header);
      return reply;
    case MsgType::kPull:
      return HandlePull(req, received, caller);
    case MsgType::kClear:
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
  const Permission* row = PermissionFor(Server::kNode, h.type);
  if (row && row->pool == Pool::kServe) return Handle(req, Clock::now(), caller);
  if (!row || row->pool != Pool::kServeIfCpu) return std::nullopt;
  switch (h.type) {
    case MsgType::kGet: {
      if (!req.payloads.empty()) return std::nullopt;  // Handle() rejects it
      auto objects = storage_.GetIfInCpu(h.keys, caller.only_tenant());
      if (!objects) return std::nullopt;
      CountServed(h.type);
      Message reply;
      reply.header = ReplyTo(h);
      reply.header.values.assign(objects->size(), static_cast<int64_t>(ErrorCode::kOk));
      for (const auto& o : *objects) counters_.Add(stats::RequestCounter::kBytesOut, o.size());
      reply.payloads = std::move(*objects);
      MaybeStream(h, reply);
      return reply;
    }
    case MsgType::kExists: {
      auto masks = storage_.ExistsIfLocal(h.keys, caller.only_tenant());
      if (!masks) return std::nullopt;
      CountServed(h.type);
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
  const int64_t frame = StreamFrameOf(request);
  if (frame < kMinStreamFrame || frame > kMaxStreamFrame) return;
  uint64_t bytes = 0;
  for (const auto& p : reply.payloads) bytes += p.size();
  if (bytes <= std::max<uint64_t>(frame, kWholeObjectBytes)) return;  // travels whole (message.h)
  uint64_t messages = 1;
  for (const auto& p : reply.payloads) messages += (p.size() + frame - 1) / frame;
  if (messages > kMaxStreamMessages) return;  // answered the ordinary way
  SetStreamFrame(frame, reply.header);
  for (const auto& p : reply.payloads)
    reply.header.values.push_back(static_cast<int64_t>(p.size()));
  counters_.Add(stats::RequestCounter::kStreamed);
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
      counters_.Add(stats::RequestCounter::kBytesOut, r->size());
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
  const PullRequest pull = DecodePull(req.header);
  if (!pull.from.empty()) {
    if (auto ep = ParseTcpEndpoint(pull.from); !ep.ok()) return Reject(&req.header, ep.status());
  }
  if (!puller_)
    return Reject(&req.header, Unsupported("this node has no controller to find its peers"));
  // The caller's deadline, counted from when the request arrived.
  const auto timeout = std::chrono::milliseconds(std::clamp<int64_t>(
      pull.timeout_ms.value_or(kDefaultPullTimeout.count()), 1, kMaxPullTimeout.count()));
  Message reply = puller_->Pull(req.header, pull, received + timeout);
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
  const Permission* row = PermissionFor(Server::kNode, type);
  latency_[static_cast<int>(row ? row->latency : Latency::kOther)].Record(d);
}

void RequestHandler::AddOwnSources() {
  stats_.AddSource([this](StatsSink& out) {
    for (const Permission& row : Permissions()) {
      if (row.server == Server::kNode)
        out.Add(stats::kRequests, MsgTypeName(row.type), served_[RowOf(row)]);
    }
    counters_.Sample(out);
  });
  AddPullerSource(stats_, puller_.get());
  AddStorageSource(stats_, storage_);
}

Fields RequestHandler::StatsFields() const {
  Fields f;
  for (auto& [name, value] : stats_.FieldValues()) f[std::move(name)] = static_cast<int64_t>(value);
  return f;
}

}  // namespace pikv::node
