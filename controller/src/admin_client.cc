#include "pikv/controller/admin_client.h"

#include "pikv/proto/locate_reply.h"

namespace pikv::controller {

AdminClient::AdminClient(std::string endpoint, std::chrono::milliseconds timeout)
    : rpc_(std::move(endpoint)), timeout_(timeout) {}

Result<std::vector<std::vector<Replica>>> AdminClient::Locate(const std::vector<ChunkKey>& keys,
                                                              const std::string& host) {
  Message req;
  req.header.type = MsgType::kLocate;
  req.header.keys = keys;
  req.header.fields["host"] = host;
  auto reply = rpc_.Call(std::move(req), timeout_);
  if (!reply.ok()) return reply.status();
  const Header& h = reply->header;
  if (h.status != ErrorCode::kOk) return Status(h.status, h.reason);
  auto copies = DecodeLocateReply(h, keys.size());
  if (!copies.ok()) return copies.status();
  std::vector<std::vector<Replica>> out(keys.size());
  for (size_t k = 0; k < keys.size(); ++k) {
    for (auto& c : (*copies)[k]) {
      out[k].push_back({Location{c.node, c.tier}, std::move(c.node_id), std::move(c.host),
                        std::move(c.tcp), std::move(c.ipc)});
    }
  }
  return out;
}

Result<std::string> AdminClient::Json(MsgType type, const std::vector<ChunkKey>& keys,
                                      Fields fields) {
  Message req;
  req.header.type = type;
  req.header.keys = keys;
  req.header.fields = std::move(fields);
  if (type == MsgType::kLocate) req.header.fields["json"] = int64_t{1};
  auto reply = rpc_.Call(std::move(req), timeout_);
  if (!reply.ok()) return reply.status();
  if (reply->header.status != ErrorCode::kOk)
    return Status(reply->header.status, reply->header.reason);
  std::string json = FieldString(reply->header.fields, "json");
  if (json.empty()) return ProtocolError("reply carries no JSON");
  return json;
}

}  // namespace pikv::controller
