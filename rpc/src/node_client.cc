#include "pikv/rpc/node_client.h"

#include "pikv/common/stream_copy.h"
#include "pikv/proto/data_wire.h"
#include "staging_pool.h"

namespace pikv::rpc {

NodeClient::NodeClient(std::string endpoint, std::chrono::milliseconds timeout, WireLimits limits,
                       std::optional<CurveClientKeys> curve)
    : rpc_(std::move(endpoint), limits, std::move(curve)),
      timeout_(timeout),
      limits_(limits),
      staging_(StagingPool::Create()) {}

Result<Message> NodeClient::Call(MsgType type, std::span<const ChunkKey> keys,
                                 std::vector<SharedBuffer> payloads, Fields fields) {
  Message req;
  req.header.type = type;
  req.header.fields = std::move(fields);
  req.header.keys.assign(keys.begin(), keys.end());
  req.payloads = std::move(payloads);
  auto reply = rpc_.Call(std::move(req), timeout_);
  if (!reply.ok()) return reply.status();
  if (reply->header.status != ErrorCode::kOk)
    return Status(reply->header.status, reply->header.reason);
  return reply;
}

namespace {

// Per-key outcomes from a reply that answers `keys` keys.
Result<std::vector<Status>> StatusesOf(const Message& reply, size_t keys) {
  if (reply.header.status != ErrorCode::kOk)
    return Status(reply.header.status, reply.header.reason);
  if (reply.header.values.size() != keys)
    return ProtocolError("reply has the wrong number of results");
  std::vector<Status> out;
  for (int64_t code : reply.header.values) {
    out.emplace_back(static_cast<ErrorCode>(code), code == 0 ? "" : reply.header.reason);
  }
  return out;
}

}  // namespace

Result<std::vector<Status>> NodeClient::PerKey(MsgType type, std::span<const ChunkKey> keys,
                                               std::vector<SharedBuffer> payloads, Fields fields) {
  auto reply = Call(type, keys, std::move(payloads), std::move(fields));
  if (!reply.ok()) return reply.status();
  return StatusesOf(*reply, keys.size());
}

Status NodeClient::Ping() { return Call(MsgType::kPing, {}).status(); }

Result<std::vector<uint8_t>> NodeClient::Exists(std::span<const ChunkKey> keys) {
  auto reply = Call(MsgType::kExists, keys);
  if (!reply.ok()) return reply.status();
  if (reply->header.values.size() != keys.size())
    return ProtocolError("reply has the wrong number of results");
  return std::vector<uint8_t>(reply->header.values.begin(), reply->header.values.end());
}

Result<std::vector<Result<SharedBuffer>>> NodeClient::Get(std::span<const ChunkKey> keys) {
  Header ask;
  if (stream_frame_ > 0) SetStreamFrame(static_cast<int64_t>(stream_frame_), ask);
  auto reply = Call(MsgType::kGet, keys, {}, std::move(ask.fields));
  if (!reply.ok() || !HasStreamFrame(reply->header))
    return ObjectsFromReply(std::move(reply), keys.size());
  auto got = ReceiveStreamed(reply->header, keys.size());
  if (!got.ok()) rpc_.Reset();  // the rest of the stream would still arrive
  return got;
}

Result<std::vector<Result<SharedBuffer>>> NodeClient::ReceiveStreamed(const Header& reply,
                                                                      size_t keys) {
  auto hits = DecodeStreamedHits(reply, keys, limits_);
  if (!hits.ok()) return hits.status();
  std::vector<Result<SharedBuffer>> out;
  size_t h = 0;
  for (size_t i = 0; i < keys; ++i) {
    if (reply.values[i] != 0) {
      out.emplace_back(Status(static_cast<ErrorCode>(reply.values[i]), ""));
      continue;
    }
    const uint64_t size = hits->sizes[h++];
    std::shared_ptr<uint8_t> bytes = staging_->Take(size);
    for (uint64_t off = 0; off < size;) {
      auto frame = rpc_.ReceiveFrame(timeout_);
      if (!frame.ok()) return frame.status();
      if (frame->size() != std::min(hits->frame, size - off))
        return ProtocolError("stream frame of the wrong size");
      // Past the caches: a reply streams only past kWholeObjectBytes in all.
      StreamCopy(bytes.get() + off, frame->data(), frame->size());
      off += frame->size();
    }
    const uint8_t* data = bytes.get();  // before the move: argument order is unspecified
    out.emplace_back(SharedBuffer(data, size, std::move(bytes)));
  }
  return out;
}

namespace {

Fields PullFields(const std::string& from, std::chrono::milliseconds peer_timeout,
                  bool admit_only) {
  Header h;
  EncodePull({from, peer_timeout.count(), admit_only}, h);
  return std::move(h.fields);
}

}  // namespace

Result<std::vector<Result<SharedBuffer>>> NodeClient::Pull(std::span<const ChunkKey> keys,
                                                           const std::string& from,
                                                           std::chrono::milliseconds peer_timeout) {
  return ObjectsFromReply(Call(MsgType::kPull, keys, {}, PullFields(from, peer_timeout, false)),
                          keys.size());
}

Result<std::vector<Status>> NodeClient::PullHere(std::span<const ChunkKey> keys,
                                                 const std::string& from,
                                                 std::chrono::milliseconds peer_timeout) {
  return PerKey(MsgType::kPull, keys, {}, PullFields(from, peer_timeout, true));
}

Result<std::vector<Result<SharedBuffer>>> ObjectsFromReply(Result<Message> reply, size_t expected) {
  if (!reply.ok()) return reply.status();
  const auto& codes = reply->header.values;
  if (codes.size() != expected) return ProtocolError("reply has the wrong number of results");
  std::vector<Result<SharedBuffer>> out;
  size_t next = 0;
  for (int64_t code : codes) {
    if (code != 0) {
      out.emplace_back(Status(static_cast<ErrorCode>(code), ""));
    } else if (next < reply->payloads.size()) {
      out.emplace_back(std::move(reply->payloads[next++]));
    } else {
      return ProtocolError("reply has fewer payload frames than hits");
    }
  }
  return out;
}

Result<std::vector<Status>> NodeClient::Put(std::span<const ChunkKey> keys,
                                            std::span<const SharedBuffer> objects) {
  if (keys.size() != objects.size()) return InvalidArgument("one object per key");
  std::vector<Status> out(keys.size());
  std::vector<size_t> whole;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (stream_frame_ > 0 && objects[i].size() > std::max(stream_frame_, kWholeObjectBytes)) {
      if (Status call = PutStreamed(keys[i], objects[i], out[i]); !call.ok()) return call;
    } else {
      whole.push_back(i);
    }
  }
  if (whole.empty()) return out;
  // Messages of at most kPutMessageBytes (or one object) and max_batch keys,
  // sent together: the node stores each as it arrives while the next are
  // still on the wire.
  std::vector<Message> messages;
  uint64_t filled = 0;
  for (size_t i : whole) {
    if (messages.empty() || filled + objects[i].size() > kPutMessageBytes ||
        messages.back().header.keys.size() >= limits_.max_batch) {
      messages.emplace_back().header.type = MsgType::kPut;
      filled = 0;
    }
    messages.back().header.keys.push_back(keys[i]);
    messages.back().payloads.push_back(objects[i]);
    filled += objects[i].size();
  }
  std::vector<size_t> counts;
  for (const Message& m : messages) counts.push_back(m.header.keys.size());
  auto replies = rpc_.CallAll(std::move(messages), timeout_);
  if (!replies.ok()) return replies.status();
  // A message the node refused as a whole (busy, too large) is each of its
  // keys' outcome; the other messages' keys keep theirs.
  size_t next = 0;
  for (size_t m = 0; m < replies->size(); ++m) {
    auto statuses = StatusesOf((*replies)[m], counts[m]);
    for (size_t k = 0; k < counts[m]; ++k)
      out[whole[next++]] = statuses.ok() ? std::move((*statuses)[k]) : statuses.status();
  }
  return out;
}

Status NodeClient::PutStreamed(const ChunkKey& key, const SharedBuffer& object, Status& outcome) {
  Message start;
  start.header.type = MsgType::kPut;
  start.header.keys = {key};
  EncodeStreamedPut({static_cast<int64_t>(stream_frame_), static_cast<int64_t>(object.size())},
                    start.header);
  auto go = rpc_.Call(std::move(start), timeout_);
  if (!go.ok()) return go.status();
  // The call's status; the key's is set from a reply that answers the put.
  auto answer = [&outcome](const Header& h) {
    if (h.status != ErrorCode::kOk) return Status(h.status, h.reason);
    if (h.values.size() != 1) return ProtocolError("reply has the wrong number of results");
    outcome = Status(static_cast<ErrorCode>(h.values[0]), h.values[0] == 0 ? "" : h.reason);
    return Status::Ok();
  };
  if (go->header.status != ErrorCode::kOk || !HasStreamFrame(go->header))
    return answer(go->header);  // refused at once: the put's answer
  // Each frame waits for room at most the call timeout: progress, not the
  // whole transfer, is what the deadline bounds.
  for (size_t off = 0; off < object.size(); off += stream_frame_) {
    const size_t n = std::min<size_t>(stream_frame_, object.size() - off);
    if (Status s = rpc_.SendFrame(SharedBuffer(object.data() + off, n, object.owner()), timeout_);
        !s.ok()) {
      rpc_.Reset();  // the node drops the half-sent stream when it stalls
      return s;
    }
  }
  auto done = rpc_.AwaitReply(go->header.request_id, timeout_);
  if (!done.ok()) {
    rpc_.Reset();
    return done.status();
  }
  return answer(done->header);
}

Result<std::vector<Status>> NodeClient::Delete(std::span<const ChunkKey> keys) {
  return PerKey(MsgType::kDelete, keys);
}
Result<std::vector<Status>> NodeClient::Pin(std::span<const ChunkKey> keys) {
  return PerKey(MsgType::kPin, keys);
}
Result<std::vector<Status>> NodeClient::Unpin(std::span<const ChunkKey> keys) {
  return PerKey(MsgType::kUnpin, keys);
}

Result<Fields> NodeClient::Stats() {
  auto reply = Call(MsgType::kStats, {});
  if (!reply.ok()) return reply.status();
  return std::move(reply->header.fields);
}

}  // namespace pikv::rpc
