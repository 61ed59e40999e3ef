#include "pikv/rpc/node_client.h"

namespace pikv::rpc {

NodeClient::NodeClient(std::string endpoint, std::chrono::milliseconds timeout, WireLimits limits)
    : rpc_(std::move(endpoint), limits), timeout_(timeout) {}

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

Result<std::vector<Status>> NodeClient::PerKey(MsgType type, std::span<const ChunkKey> keys,
                                               std::vector<SharedBuffer> payloads, Fields fields) {
  auto reply = Call(type, keys, std::move(payloads), std::move(fields));
  if (!reply.ok()) return reply.status();
  if (reply->header.values.size() != keys.size())
    return ProtocolError("reply has the wrong number of results");
  std::vector<Status> out;
  for (int64_t code : reply->header.values) {
    out.emplace_back(static_cast<ErrorCode>(code), code == 0 ? "" : reply->header.reason);
  }
  return out;
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
  return ObjectsFromReply(Call(MsgType::kGet, keys), keys.size());
}

Fields NodeClient::PullFields(const std::string& from,
                              std::chrono::milliseconds peer_timeout) const {
  Fields f;
  f["from"] = from;
  f["timeout_ms"] = static_cast<int64_t>(peer_timeout.count());
  return f;
}

Result<std::vector<Result<SharedBuffer>>> NodeClient::Pull(std::span<const ChunkKey> keys,
                                                           const std::string& from,
                                                           std::chrono::milliseconds peer_timeout) {
  return ObjectsFromReply(Call(MsgType::kPull, keys, {}, PullFields(from, peer_timeout)),
                          keys.size());
}

Result<std::vector<Status>> NodeClient::PullHere(std::span<const ChunkKey> keys,
                                                 const std::string& from,
                                                 std::chrono::milliseconds peer_timeout) {
  Fields f = PullFields(from, peer_timeout);
  f["admit_only"] = int64_t{1};
  return PerKey(MsgType::kPull, keys, {}, std::move(f));
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
  return PerKey(MsgType::kPut, keys, std::vector<SharedBuffer>(objects.begin(), objects.end()));
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
